#pragma once
// The op vocabulary a model description is written in (model/arch/*.cpp),
// and the interface both backends execute it through: CpuBackend runs each
// op as it is called, VulkanBackend records it into the step's command
// buffer. A description names what it computes; a backend owns the buffers,
// the weights' device copies, the KV cache and the kernels, and knows no
// architecture.
//
// Activations are float32 rows: an Act is [rows, width] where rows is the
// batch's token count, or for an Act from logitRows() the rows whose logits
// the step returns (the last one, or every one). The same slot name gives the
// same buffer throughout a step, so a description reuses buffers as a
// hand-written forward pass would. Ops may run in place where they say so.
//
// Every op's output carries a Name ("blk.3.ffn_inp"), so any intermediate can
// be read back (backend::TensorDump, `kvscope-cli dump`) and diffed against
// llama.cpp's eval-callback, whose names these follow ("ffn_inp-3").
//
// What an executor may rely on, and a description must keep:
//  - a slot's width is fixed by its first act() (a wider second one is an error);
//  - embed() comes before any other op of the step touches its output (the
//    Vulkan backend uploads embedded rows before the step's commands run);
//  - a RopeSpec is the same object, unchanged, for every rope() of a step that
//    uses it: executors compute its angle table once per step, by address.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "model/architecture.h"
#include "model/weight_source.h"

namespace kvscope::model {

// A step's activation: a backend-owned buffer of [rows, width] floats.
struct Act {
  uint32_t slot = 0;  // the backend's buffer index
  uint32_t width = 0;
  bool logitRows = false;  // rows are the logit rows, not the batch
};

// An op output's name: `base` for whole-model tensors (layer < 0), else
// "blk.{layer}.{base}".
struct OpName {
  std::string_view base;
  int layer = -1;
  std::string str() const;
};

// The activation of a gated feed-forward's gate (y_old in Epilogue).
enum class Gate : uint8_t {
  kNone,
  kSilu,  // SwiGLU: silu(g) = g / (1 + exp(-g))
  kGelu,  // GeGLU: gelu(g) = g/2 (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))
  // gpt-oss's clamped SwiGLU: with g' = min(g, 7) and u' = clamp(u, -7, 7),
  // out = g' sigmoid(1.702 g') (u' + 1). Its constants are the model's
  // (swiglu_limit and the GELU-like alpha of OpenAI's reference code).
  kSwigluOai,
};
inline constexpr float kSwigluOaiAlpha = 1.702f, kSwigluOaiLimit = 7.0f;

// y = W x, then (in this order) + bias, y_old + (accumulate: a residual add),
// or act(y_old) * (gate: y holds the gate of a gated FFN); at most one of
// accumulate and a gate.
struct Epilogue {
  const TensorView* bias = nullptr;  // {rows of W}
  bool accumulate = false;
  Gate gate = Gate::kNone;
};

// kInternal for an epilogue a description must not ask for: both
// accumulate and a gate, or a bias that is not `width` long.
Status checkEpilogue(const Epilogue& epilogue, uint32_t width);

// Rotary position embedding of one attention's heads, resolved at load from
// the model's config, its factor tensors and the context the backend runs at.
struct RopeSpec {
  RopeStyle style = RopeStyle::kNormal;
  uint32_t dims = 0;               // rotated dimensions per head (even, <= head dim)
  float theta = 10000.f;           // base frequency
  float positionScale = 1.0f;      // positions are divided by it (linear scaling)
  std::vector<float> freqFactors;  // [dims / 2] divisors of each frequency; empty: none
  float attnFactor = 1.0f;         // multiplies cos and sin (LongRoPE / YaRN magnitude)
  // YaRN: frequency pair i turns by a mix of the interpolated angle (the
  // position divided by positionScale) and the original one, the original's
  // share ramping from 1 at pair yarnLow and below to 0 at yarnHigh and above.
  bool yarn = false;
  float yarnLow = 0.0f, yarnHigh = 0.0f;
  // Multiplies the whole head after the rotation, unrotated values included:
  // a query scaled before attention (phi3) rides on its RoPE.
  float scale = 1.0f;
};

// What one attention computes: softmax(scale * q.k + mask) v over the cached
// rows of its layer, keys and values first appended to the cache.
struct AttentionSpec {
  uint32_t layer = 0;  // the cache layer: the one whose rows it appends, or reads

  uint32_t nHead = 0, nHeadKv = 0, headDim = 0;
  float scale = 0.0f;                 // of q.k: 1/sqrt(headDim), or 1 where q was scaled
  // A query at position p sees positions (p - window, p]; 0: [0, p].
  uint32_t window = 0;
  // {nHead}: a per-head logit that joins each query's softmax (its maximum
  // and denominator) with no value row, so a head can attend to nothing.
  const TensorView* sinks = nullptr;
  float softCap = 0.0f;               // scores become cap * tanh(score / cap); 0: none
};

// How a router's logits become the chosen experts' weights.
enum class ExpertWeighting : uint8_t {
  // p = softmax(r) over all experts, the nUsed largest kept, divided by their
  // sum (clamped below at 2^-14, as llama.cpp does): qwen3moe.
  kSoftmaxTopK,
  // The nUsed largest logits kept, their softmax: gpt-oss.
  kTopKSoftmax,
};

// A mixture-of-experts feed-forward. Per token: router logits r = router x
// (x: routerInput where given) (+ routerBias) over nExpert experts; the nUsed
// largest kept (ties: the lower expert) and weighted by `weighting`, then
// multiplied by `scale` unless it is 0 or 1; the FFN output
//   sum over kept e of w_e * (s_e down_e (act(gate_e x + gb_e, up_e x + ub_e)) + db_e)
// (act: the `gate` activation; biases and s_e, downScale, where given) is
// added to `out`.
struct MoeSpec {
  const TensorView* router = nullptr;      // {width, nExpert}
  const TensorView* routerBias = nullptr;  // {nExpert}, or none
  const TensorView* gate = nullptr;        // {width, ff, nExpert}
  const TensorView* up = nullptr;          // {width, ff, nExpert}
  // Or both in one: {width, 2 ff, nExpert}, an expert's gate rows then its up
  // rows (Gemma 4); gate and up are then null.
  const TensorView* gateUp = nullptr;
  const TensorView* down = nullptr;        // {ff, width, nExpert}
  const TensorView* gateBias = nullptr;    // {ff, nExpert}, or none
  const TensorView* upBias = nullptr;      // {ff, nExpert}, or none
  const TensorView* downBias = nullptr;    // {width, nExpert}, or none
  // {nExpert}: multiplies each expert's output (Gemma 4), or none.
  const TensorView* downScale = nullptr;
  // The router's input where it is not x ([rows, router width]; Gemma 4
  // routes on another norm of the residual); width 0: x.
  Act routerInput;
  uint32_t nExpert = 0, nUsed = 0, ff = 0;
  float scale = 0.0f;
  ExpertWeighting weighting = ExpertWeighting::kSoftmaxTopK;
  Gate act = Gate::kSilu;
  bool accumulate = true;  // out += the FFN; false: out = it
};

class ForwardOps {
 public:
  virtual ~ForwardOps() = default;

  // The buffer named `slot`, [batch rows, width] (the same one on every call
  // of the same width; asked for wider than before, its values are not kept,
  // so a description rewrites a slot whose width changes; an executor that
  // cannot make it fails the step's next op).
  virtual Act act(std::string_view slot, uint32_t width) = 0;
  // The rows of `x` whose logits the step returns, copied to their own
  // buffer (every row when all logits are asked for).
  virtual Expected<Act> logitRows(Act x, OpName name) = 0;
  // The step's logits: [logit rows, vocab]; write them with matmul.
  virtual Act logits(uint32_t vocab) = 0;

  // out[t] = scale * row tokens[t] of the embedding table {width, vocab}
  // (Gemma scales its embeddings by sqrt(width); 1 elsewhere).
  virtual Status embed(const TensorView& table, Act out, float scale, OpName name) = 0;
  // out = x / sqrt(mean(x^2) + eps) * weight over groups of `group` values
  // (group == width: one per row; head dim: per-head q/k norms); a null
  // weight: unweighted (Gemma 4's V norm). In place ok.
  virtual Status rmsnorm(Act x, const TensorView* weight, Act out, uint32_t group, float eps,
                         OpName name) = 0;
  // out += x / sqrt(mean(x^2) + eps) * weight, per row: a sub-layer's output
  // normed before its residual add (Gemma's post-attention and post-FFN norms).
  virtual Status rmsnormAdd(Act x, const TensorView& weight, Act out, float eps, OpName name) = 0;
  // x *= s, in place (Gemma 4's per-layer input scales and layer output scale).
  virtual Status scale(Act x, float s, OpName name) = 0;
  // out += x (same widths).
  virtual Status add(Act x, Act out, OpName name) = 0;
  // gate = act(gate) * up[:, upFirst, upFirst + gate.width), in place: a
  // gated product whose other half is a column range of a wider activation
  // (Gemma 4's per-layer input of one layer among all layers').
  virtual Status gatedMul(Gate act, Act gate, Act up, uint32_t upFirst, OpName name) = 0;
  // x = cap * tanh(x / cap), in place (Gemma 4's final logits).
  virtual Status softCap(Act x, float cap, OpName name) = 0;
  // out = W x with the epilogue; W is {x.width, out.width}.
  virtual Status matmul(const TensorView& w, Act x, Act out, const Epilogue& epilogue,
                        OpName name) = 0;
  // Rotates each of `heads` head vectors of x in place at its token's position.
  virtual Status rope(Act x, uint32_t heads, uint32_t headDim, const RopeSpec& spec,
                      OpName name) = 0;
  // Appends k and v ([n, nHeadKv * headDim], after RoPE) to the layer's cache
  // and writes the attention of q ([n, nHead * headDim]) over it to out.
  virtual Status attention(Act q, Act k, Act v, Act out, const AttentionSpec& spec,
                           OpName name) = 0;
  // A KV-shared layer's attention: of q over the rows layer spec.layer's
  // attention() appended (this step's too), appending none.
  virtual Status attendCache(Act q, Act out, const AttentionSpec& spec, OpName name) = 0;
  // out += the mixture-of-experts FFN of x (MoeSpec; out = it where the spec
  // does not accumulate).
  virtual Status moe(Act x, const MoeSpec& spec, Act out, OpName name) = 0;
};

// What a backend refuses of an AttentionSpec, as one message: both backends
// run causal attention, windowed or not, with or without sinks, at any
// positive scale; soft-capping is refused until they run it.
Status checkAttentionSpec(const AttentionSpec& spec, std::string_view backend);

}  // namespace kvscope::model
