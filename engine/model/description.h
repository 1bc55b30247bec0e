#pragma once
// A model description: what one architecture's files hold (its tensor table)
// and its forward pass, written once against the op vocabulary of
// model/forward_ops.h. Each architecture is one file under model/arch/ that
// defines an ArchDescription, plus one row in model/architecture.cpp.
//
// The tensor table drives three things, so they cannot disagree: binding a
// file's tensors to the roles the forward pass reads (checking each shape
// against the config), the list of weights a backend uploads, and the
// tensors the synthetic model generator writes (model/synthetic_model.h).

#include <algorithm>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>

#include "core/error.h"
#include "model/forward_ops.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace kvscope::model {

// A tensor dimension in terms of the config.
enum class Dim : uint8_t {
  kNone,  // a vector's missing second dimension
  kEmbd,  // nEmbd
  kFf,    // the layer's feed-forward width (ModelConfig::ffOf)
  kFf2,   // twice it: a fused gate/up projection
  // The attention dimensions are the layer's (ModelConfig::headsOf(l),
  // headsKvOf(l), headDimOf(l), ropeDimsOf(l)); a global tensor's are the
  // global layers' (kGlobalTensor).
  kQ,            // heads * head width
  kKv,           // KV heads * head width
  kQkv,          // q + 2 * kv widths: a fused q/k/v projection
  kHeadDim,      // head width
  kVocab,        // nVocab
  kRopeHalf,     // rotated dimensions / 2
  kExpert,       // nExpert: the third dimension of an expert tensor, or the router's outputs
  kFfExp,        // nFfExp
  kHead,         // heads: one value per query head
  kFfExp2,       // 2 * nFfExp: fused gate/up experts
  kPerLayer,     // nEmbdPerLayer: one layer's per-layer input
  kPerLayerAll,  // nEmbdPerLayer * nLayer: every layer's per-layer inputs side by side
};

// What a tensor is, which decides its WeightRole and how the synthetic
// generator fills it.
enum class TensorKind : uint8_t {
  kEmbedding,    // token_embd: one row read per token
  kMatrix,       // a projection, random ~ N(0, 1/in)
  kNorm,         // a norm weight, ~ N(1, 0.1)
  kBias,         // ~ N(0, 0.1); 2-D for stacked experts' biases {rows, nExpert}
  kSinks,        // attention-sink logits, one per head, ~ N(0, 1)
  kRopeFactors,  // per-frequency RoPE divisors; written only when asked for
};

enum class Presence : uint8_t {
  kRequired,
  kOptional,
  kUnlessTied,  // output.weight: absent when the output shares token_embd
  kStoresKv,    // on layers that store K/V rows; absent on KV-shared ones
  // On layers that store K/V rows, except global layers whose V is their K
  // (ModelConfig::globalValueIsKey): attn_v of Gemma 4.
  kValueProjection,
  kExperts,   // when the model has experts (ModelConfig::nExpert > 0)
  kPerLayer,  // when it has per-layer inputs (ModelConfig::nEmbdPerLayer > 0)
  // RoPE factors a GGUF file must ship and a Hugging Face config may state
  // instead (Gemma 4's proportional RoPE: RopeScaling::kProportional).
  kUnlessRopeStated,
};

// One row of a tensor table: the GGUF name (per-layer names without the
// "blk.N." prefix), its shape, and the field it binds to.
template <typename Owner>
struct TensorRule {
  std::string_view name;
  Dim in, out;
  TensorKind kind;
  Presence presence;
  const TensorView* Owner::*field;
  Dim stack = Dim::kNone;  // a third dimension: experts stacked {in, out, nExpert}
};

struct ForwardPlan;

// A Hugging Face checkpoint's expert tensors, which loading stacks into
// GGUF's {in, out, nExpert} ones (model/hf_experts.h).
enum class HfExperts : uint8_t {
  kNone,
  // mlp.experts.E.{gate,up,down}_proj.weight, one [out, in] matrix per
  // expert (Qwen3-MoE, Mixtral).
  kPerExpert,
  // gpt-oss: mlp.experts.gate_up_proj_{blocks,scales,bias} with gate and up
  // rows interleaved, and down_proj_{blocks,scales,bias}, MXFP4 blocks of 32
  // values stored as 16 bytes (value 2i in byte i's low nibble, 2i + 1 in its
  // high one) and their exponents apart.
  kGptOssMxfp4,
};

struct ArchDescription {
  std::span<const TensorRule<ModelWeights>> globals;  // in file order
  std::span<const TensorRule<LayerWeights>> layer;    // in file order, per layer
  // Names of optional rows this architecture requires (a table shared with
  // another architecture: qwen2's biases in llama's table).
  std::span<const std::string_view> required;
  // Turns fused tensors into views of their parts (nullptr: none fused).
  Status (*split)(const ModelConfig& config, ModelWeights& weights) = nullptr;
  Status (*forward)(const ForwardPlan& plan, ForwardOps& ops) = nullptr;
  // Where a file gives a sliding window but no pattern: every windowPeriod-th
  // layer is global (ModelConfig::windowLayers), 0 none.
  uint32_t windowPeriod = 0;
  // Whether window layers scale RoPE as the global ones do (gpt-oss: YaRN on
  // every layer, the window base defaulting to the global one) or rotate by
  // their own base unscaled (Gemma 3: base 10000 unless the file says).
  bool windowRopeScaled = false;
  // Hugging Face conventions that differ from llama's: per-layer tensor names
  // (the part after "model.layers.N.", to the GGUF name after "blk.N."), tried
  // before llama's; and norm weights stored as w - 1 (Gemma's RMSNorm
  // multiplies by 1 + w), which loading turns into w as GGUF files hold it.
  std::span<const std::pair<std::string_view, std::string_view>> hfLayerNames;
  // Whole-model tensors beyond llama's (full Hugging Face name to GGUF name).
  std::span<const std::pair<std::string_view, std::string_view>> hfGlobalNames;
  bool hfNormsMinusOne = false;
  // How a Hugging Face checkpoint stores the experts (model/hf_experts.h).
  HfExperts hfExperts = HfExperts::kNone;
  // Whether its layers may have experts (a stacked tensor in the table), and
  // whether they must (qwen3moe, gpt-oss; gemma4's are optional).
  bool mayHaveExperts() const {
    return std::ranges::any_of(layer, [](const auto& r) { return r.stack != Dim::kNone; });
  }
  bool mustHaveExperts() const {
    return std::ranges::any_of(layer, [](const auto& r) {
      return r.stack != Dim::kNone && r.presence == Presence::kRequired;
    });
  }
  // The final logit soft-cap of a file without final_logit_softcapping
  // (Gemma 4's loaders take 30); 0: the architecture does not soft-cap (its
  // files' key is not read).
  float defaultLogitSoftcap = 0.0f;
};

// Whether `config`'s architecture requires the tensor of `rule` on `layer`
// (kGlobalTensor for a global rule); an optional tensor is bound where present.
template <typename Owner>
bool isRequired(const ModelConfig& config, const TensorRule<Owner>& rule, uint32_t layer);

// Whether a rule's tensor may be bound at all on `layer`: not a K/V
// projection of a KV-shared layer, not an expert of a dense model.
template <typename Owner>
bool isAllowed(const ModelConfig& config, const TensorRule<Owner>& rule, uint32_t layer);

// The layer index of a global tensor's dimensions: past every layer, so the
// per-layer accessors give the global layers' shape (rope_freqs spans the
// global RoPE's dimensions even where a window layer comes first).
inline constexpr uint32_t kGlobalTensor = ~0u;

// The number of elements of `d` for `config`'s `layer` (kGlobalTensor for a
// global tensor).
uint64_t dimSize(Dim d, const ModelConfig& config, uint32_t layer);

// Binds `source`'s tensors through the config's architecture description:
// every required tensor present with its table shape, fused ones split.
Expected<ModelWeights> bindWeights(const ModelConfig& config, const WeightSource& source);

// A view of output rows [first, first + count) of a 2-D weight {in, out}:
// the same bytes, no copy (a row is whole blocks of any type).
Expected<TensorView> rowRange(const TensorView& t, uint64_t first, uint64_t count,
                              std::string name);

// Expert `e` of a stacked expert tensor {in, out, nExpert} as a 2-D weight
// {in, out}: the same bytes, no copy.
TensorView expertMatrix(const TensorView& t, uint32_t e);

// What a backend runs one step of: the model's config and bound weights, and
// what was resolved for the context it runs at.
struct ForwardPlan {
  const ModelConfig* config = nullptr;
  const ModelWeights* weights = nullptr;
  RopeSpec rope;        // global layers'
  RopeSpec windowRope;  // sliding-window layers': their own base, unscaled
  // Gemma 4's layer_output_scale values, read at load: [nLayer], or empty.
  std::vector<float> layerOutputScales;
  const RopeSpec& ropeOf(uint32_t layer) const {
    return config->isWindowLayer(layer) ? windowRope : rope;
  }
  // The layer's heads, scale 1/sqrt(head dim) and window, and the cache
  // layer it appends to or (a KV-shared layer) reads.
  AttentionSpec attention(uint32_t layer) const;
};

// Gemma 4's proportional RoPE as per-pair divisors ({dims / 2}): 1 for the
// first partialRotary * dims / 2 pairs, 1e30 (an angle of 0) for the rest,
// as its GGUF files ship them in rope_freqs.
std::vector<float> proportionalRopeFactors(const RopeConfig& rope);

// The plan of `weights` for a backend of `contextLimit` tokens. RoPE factors:
// a GGUF `rope_freqs` tensor, llama3 parameters of a Hugging Face config, or
// LongRoPE's long factors when the context exceeds the original one (its short
// factors otherwise), as llama.cpp chooses them.
Expected<ForwardPlan> planForward(const ModelConfig& config, const ModelWeights& weights,
                                  uint32_t contextLimit);

// Runs the plan's description against `ops` (one step).
inline Status runForward(const ForwardPlan& plan, ForwardOps& ops) {
  return plan.config->arch->description->forward(plan, ops);
}

}  // namespace kvscope::model
