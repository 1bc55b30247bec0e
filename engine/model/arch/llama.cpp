// llama (and mistral, whose GGUF files are llama-shaped): pre-norm decoder
// blocks of grouped-query attention with RoPE and a SwiGLU feed-forward, all
// normalised by RMSNorm. Names follow llama.cpp's eval-callback.
#include "model/arch/architectures.h"

#include <algorithm>
#include <cmath>

namespace kvscope::model {

Status llamaDecoder(const ForwardPlan& p, ForwardOps& ops, const LlamaVariant& variant) {
  const ModelConfig& c = *p.config;
  const ModelWeights& w = *p.weights;
  // The queries' RoPE: the layer's, or (scaleQueries) a copy carrying the
  // scale, made only then (a step would otherwise copy two specs for nothing).
  RopeSpec scaledRope, scaledWindowRope;
  if (variant.scaleQueries) {  // the whole head, rotated or not (Phi-4-mini rotates 96 of 128)
    scaledRope = p.rope;
    scaledWindowRope = p.windowRope;
    scaledRope.scale = 1.0f / std::sqrt(static_cast<float>(c.headDim));
    scaledWindowRope.scale = 1.0f / std::sqrt(static_cast<float>(c.windowHeadDim()));
  }
  const auto queryRope = [&](uint32_t l) -> const RopeSpec& {
    if (!variant.scaleQueries) return p.ropeOf(l);
    return c.isWindowLayer(l) ? scaledWindowRope : scaledRope;
  };
  const Act x = ops.act("x", c.nEmbd);  // the residual stream
  const Act h = ops.act("h", c.nEmbd);  // a block's normed input

  KVS_TRY(ops.embed(*w.tokenEmbd, x, 1.0f, {"inp_embd"}));
  for (uint32_t l = 0; l < c.nLayer; ++l) {
    const LayerWeights& lw = w.layers[l];
    const int il = static_cast<int>(l);
    const uint32_t headDim = c.headDimOf(l);
    const Act q = ops.act("q", c.qDimOf(l));
    const Act k = ops.act("k", c.kvDimOf(l));
    const Act v = ops.act("v", c.kvDimOf(l));
    const Act att = ops.act("att", c.qDimOf(l));  // attention output, before wo
    const Act ffn = ops.act("ffn", c.ffOf(l));    // the gate, then silu(gate) * up
    // Attention: norm, projections (+ bias), per-head q/k norm, RoPE, attend,
    // output projection added to the residual.
    KVS_TRY(ops.rmsnorm(x, lw.attnNorm, h, c.nEmbd, c.rmsEps, {"attn_norm", il}));
    KVS_TRY(ops.matmul(*lw.wq, h, q, {.bias = lw.bq}, {"Qcur", il}));
    KVS_TRY(ops.matmul(*lw.wk, h, k, {.bias = lw.bk}, {"Kcur", il}));
    KVS_TRY(ops.matmul(*lw.wv, h, v, {.bias = lw.bv}, {"Vcur", il}));
    if (lw.qNorm) {
      KVS_TRY(ops.rmsnorm(q, lw.qNorm, q, headDim, c.rmsEps, {"Qcur_normed", il}));
    }
    if (lw.kNorm) {
      KVS_TRY(ops.rmsnorm(k, lw.kNorm, k, headDim, c.rmsEps, {"Kcur_normed", il}));
    }
    KVS_TRY(ops.rope(q, c.headsOf(l), headDim, queryRope(l), {"Qcur_rope", il}));
    KVS_TRY(ops.rope(k, c.headsKvOf(l), headDim, p.ropeOf(l), {"Kcur_rope", il}));
    AttentionSpec attention = p.attention(l);
    if (variant.scaleQueries) attention.scale = 1.0f;
    attention.sinks = lw.attnSinks;
    KVS_TRY(ops.attention(q, k, v, att, attention, {"kqv_out", il}));
    KVS_TRY(ops.matmul(*lw.wo, att, x, {.bias = lw.bo, .accumulate = true}, {"ffn_inp", il}));
    // Feed-forward: norm, SwiGLU (or the experts the router picks, where the
    // table bound a router), down projection added to the residual.
    KVS_TRY(ops.rmsnorm(x, lw.ffnNorm, h, c.nEmbd, c.rmsEps, {"ffn_norm", il}));
    if (lw.gateInp) {
      const MoeSpec moe{.router = lw.gateInp,
                        .routerBias = lw.gateInpBias,
                        .gate = lw.gateExps,
                        .up = lw.upExps,
                        .down = lw.downExps,
                        .gateBias = lw.gateExpsBias,
                        .upBias = lw.upExpsBias,
                        .downBias = lw.downExpsBias,
                        .nExpert = c.nExpert,
                        .nUsed = c.nExpertUsed,
                        .ff = c.nFfExp,
                        .scale = c.expertWeightsScale,
                        .weighting = variant.expertWeighting,
                        .act = variant.expertAct};
      KVS_TRY(ops.moe(h, moe, x, {"l_out", il}));
      continue;
    }
    KVS_TRY(ops.matmul(*lw.gate, h, ffn, {}, {"ffn_gate", il}));
    KVS_TRY(ops.matmul(*lw.up, h, ffn, {.gate = Gate::kSilu}, {"ffn_swiglu", il}));
    KVS_TRY(ops.matmul(*lw.down, ffn, x, {.accumulate = true}, {"l_out", il}));
  }
  KVS_ASSIGN_OR_RETURN(const Act last, ops.logitRows(x, {"result_rows"}));
  KVS_TRY(ops.rmsnorm(last, w.outputNorm, last, c.nEmbd, c.rmsEps, {"result_norm"}));
  return ops.matmul(*w.output, last, ops.logits(c.nVocab), {}, {"result_output"});
}

Status llamaForward(const ForwardPlan& p, ForwardOps& ops) {
  return llamaDecoder(p, ops, {});
}

namespace {
using M = ModelWeights;
using L = LayerWeights;
constexpr auto kReq = Presence::kRequired;
constexpr auto kOpt = Presence::kOptional;

}  // namespace

constexpr TensorRule<M> kLlamaGlobals[4] = {
    {"token_embd.weight", Dim::kEmbd, Dim::kVocab, TensorKind::kEmbedding, kReq, &M::tokenEmbd},
    {"output_norm.weight", Dim::kEmbd, Dim::kNone, TensorKind::kNorm, kReq, &M::outputNorm},
    {"output.weight", Dim::kEmbd, Dim::kVocab, TensorKind::kMatrix, Presence::kUnlessTied,
     &M::output},
    {"rope_freqs.weight", Dim::kRopeHalf, Dim::kNone, TensorKind::kRopeFactors, kOpt,
     &M::ropeFreqs},
};

constexpr TensorRule<L> kLlamaLayer[14] = {
    {"attn_norm.weight", Dim::kEmbd, Dim::kNone, TensorKind::kNorm, kReq, &L::attnNorm},
    {"attn_q.weight", Dim::kEmbd, Dim::kQ, TensorKind::kMatrix, kReq, &L::wq},
    {"attn_k.weight", Dim::kEmbd, Dim::kKv, TensorKind::kMatrix, kReq, &L::wk},
    {"attn_v.weight", Dim::kEmbd, Dim::kKv, TensorKind::kMatrix, kReq, &L::wv},
    {"attn_output.weight", Dim::kQ, Dim::kEmbd, TensorKind::kMatrix, kReq, &L::wo},
    // Optional here, required by qwen2 (and carried by some llama files
    // converted from other families).
    {"attn_q.bias", Dim::kQ, Dim::kNone, TensorKind::kBias, kOpt, &L::bq},
    {"attn_k.bias", Dim::kKv, Dim::kNone, TensorKind::kBias, kOpt, &L::bk},
    {"attn_v.bias", Dim::kKv, Dim::kNone, TensorKind::kBias, kOpt, &L::bv},
    // Required by qwen3: RMSNorm of each q and k head before RoPE.
    {"attn_q_norm.weight", Dim::kHeadDim, Dim::kNone, TensorKind::kNorm, kOpt, &L::qNorm},
    {"attn_k_norm.weight", Dim::kHeadDim, Dim::kNone, TensorKind::kNorm, kOpt, &L::kNorm},
    {"ffn_norm.weight", Dim::kEmbd, Dim::kNone, TensorKind::kNorm, kReq, &L::ffnNorm},
    {"ffn_gate.weight", Dim::kEmbd, Dim::kFf, TensorKind::kMatrix, kReq, &L::gate},
    {"ffn_up.weight", Dim::kEmbd, Dim::kFf, TensorKind::kMatrix, kReq, &L::up},
    {"ffn_down.weight", Dim::kFf, Dim::kEmbd, TensorKind::kMatrix, kReq, &L::down},
};

// A declared size larger than the rows given would leave empty rules.
static_assert(std::ranges::none_of(kLlamaGlobals, [](const auto& r) { return r.name.empty(); }));
static_assert(std::ranges::none_of(kLlamaLayer, [](const auto& r) { return r.name.empty(); }));

const ArchDescription kLlama{
    .globals = kLlamaGlobals, .layer = kLlamaLayer, .forward = llamaForward};

}  // namespace kvscope::model
