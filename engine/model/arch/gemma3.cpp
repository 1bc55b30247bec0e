// gemma3 (Gemma 3 1B-27B, text): pre- and post-normed decoder blocks. The
// embeddings are scaled by sqrt(width); each attention and FFN output is
// RMS-normed again before its residual add; q and k heads are RMS-normed
// before NeoX RoPE; the queries are scaled before attention (so the f16
// rounding of a cached-attention query comes after the scale, as in phi3);
// the FFN is GeGLU. Five of every six layers attend a sliding window with
// their own RoPE base, unscaled; every sixth attends the whole context
// (ModelConfig::windowLayers). The output shares token_embd unless the file
// ships output.weight. GGUF norm weights hold Gemma's 1 + w, so they multiply
// as in llama; a Hugging Face folder's w gets its 1 added at load.
#include "model/arch/architectures.h"

#include <algorithm>
#include <cmath>

namespace kvscope::model {
namespace {

using L = LayerWeights;
constexpr auto kReq = Presence::kRequired;

constexpr TensorRule<L> kLayer[] = {
    {"attn_norm.weight", Dim::kEmbd, Dim::kNone, TensorKind::kNorm, kReq, &L::attnNorm},
    {"attn_q.weight", Dim::kEmbd, Dim::kQ, TensorKind::kMatrix, kReq, &L::wq},
    {"attn_k.weight", Dim::kEmbd, Dim::kKv, TensorKind::kMatrix, kReq, &L::wk},
    {"attn_v.weight", Dim::kEmbd, Dim::kKv, TensorKind::kMatrix, kReq, &L::wv},
    {"attn_output.weight", Dim::kQ, Dim::kEmbd, TensorKind::kMatrix, kReq, &L::wo},
    {"attn_q_norm.weight", Dim::kHeadDim, Dim::kNone, TensorKind::kNorm, kReq, &L::qNorm},
    {"attn_k_norm.weight", Dim::kHeadDim, Dim::kNone, TensorKind::kNorm, kReq, &L::kNorm},
    {"post_attention_norm.weight", Dim::kEmbd, Dim::kNone, TensorKind::kNorm, kReq,
     &L::attnPostNorm},
    {"ffn_norm.weight", Dim::kEmbd, Dim::kNone, TensorKind::kNorm, kReq, &L::ffnNorm},
    {"ffn_gate.weight", Dim::kEmbd, Dim::kFf, TensorKind::kMatrix, kReq, &L::gate},
    {"ffn_up.weight", Dim::kEmbd, Dim::kFf, TensorKind::kMatrix, kReq, &L::up},
    {"ffn_down.weight", Dim::kFf, Dim::kEmbd, TensorKind::kMatrix, kReq, &L::down},
    {"post_ffw_norm.weight", Dim::kEmbd, Dim::kNone, TensorKind::kNorm, kReq, &L::ffnPostNorm},
};

static_assert(std::ranges::none_of(kLayer, [](const auto& r) { return r.name.empty(); }));

// Gemma3ForCausalLM's names where they are not llama's (its
// post_attention_layernorm is the attention output's norm, not the FFN's).
constexpr std::pair<std::string_view, std::string_view> kHfLayerNames[] = {
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
};

Status gemma3Forward(const ForwardPlan& p, ForwardOps& ops) {
  const ModelConfig& c = *p.config;
  const ModelWeights& w = *p.weights;
  // Queries are scaled by 1/sqrt(query_pre_attn_scalar), one value for the
  // model: a Hugging Face config says it; GGUF files carry no key for it, so
  // there llama.cpp decides by the layer count (head dim, but width / heads
  // for the 62-layer 27B model), and so do we.
  const float queryScale =
      c.queryScale != 0.0f
          ? c.queryScale
          : 1.0f / std::sqrt(static_cast<float>(c.nLayer == 62 ? c.nEmbd / c.nHead : c.headDim));
  RopeSpec globalQuery = p.rope, windowQuery = p.windowRope;
  globalQuery.scale = windowQuery.scale = queryScale;

  const Act x = ops.act("x", c.nEmbd);  // the residual stream
  const Act h = ops.act("h", c.nEmbd);  // a block's normed input, then its sub-layer's output

  KVS_TRY(ops.embed(*w.tokenEmbd, x, std::sqrt(static_cast<float>(c.nEmbd)), {"inp_scaled"}));
  for (uint32_t l = 0; l < c.nLayer; ++l) {
    const LayerWeights& lw = w.layers[l];
    const int il = static_cast<int>(l);
    const bool window = c.isWindowLayer(l);
    const uint32_t headDim = c.headDimOf(l);
    const Act q = ops.act("q", c.qDimOf(l));
    const Act k = ops.act("k", c.kvDimOf(l));
    const Act v = ops.act("v", c.kvDimOf(l));
    const Act att = ops.act("att", c.qDimOf(l));  // attention output, before wo
    const Act ffn = ops.act("ffn", c.ffOf(l));    // the gate, then gelu(gate) * up
    KVS_TRY(ops.rmsnorm(x, lw.attnNorm, h, c.nEmbd, c.rmsEps, {"attn_norm", il}));
    KVS_TRY(ops.matmul(*lw.wq, h, q, {}, {"Qcur", il}));
    KVS_TRY(ops.matmul(*lw.wk, h, k, {}, {"Kcur", il}));
    KVS_TRY(ops.matmul(*lw.wv, h, v, {}, {"Vcur", il}));
    KVS_TRY(ops.rmsnorm(q, lw.qNorm, q, headDim, c.rmsEps, {"Qcur_normed", il}));
    KVS_TRY(ops.rmsnorm(k, lw.kNorm, k, headDim, c.rmsEps, {"Kcur_normed", il}));
    KVS_TRY(
        ops.rope(q, c.headsOf(l), headDim, window ? windowQuery : globalQuery, {"Qcur_rope", il}));
    KVS_TRY(ops.rope(k, c.headsKvOf(l), headDim, p.ropeOf(l), {"Kcur_rope", il}));
    AttentionSpec attention = p.attention(l);
    attention.scale = 1.0f;
    KVS_TRY(ops.attention(q, k, v, att, attention, {"kqv_out", il}));
    KVS_TRY(ops.matmul(*lw.wo, att, h, {}, {"attn_out", il}));
    KVS_TRY(ops.rmsnormAdd(h, *lw.attnPostNorm, x, c.rmsEps, {"sa_out", il}));
    KVS_TRY(ops.rmsnorm(x, lw.ffnNorm, h, c.nEmbd, c.rmsEps, {"ffn_norm", il}));
    KVS_TRY(ops.matmul(*lw.gate, h, ffn, {}, {"ffn_gate", il}));
    KVS_TRY(ops.matmul(*lw.up, h, ffn, {.gate = Gate::kGelu}, {"ffn_geglu", il}));
    KVS_TRY(ops.matmul(*lw.down, ffn, h, {}, {"ffn_out", il}));
    KVS_TRY(ops.rmsnormAdd(h, *lw.ffnPostNorm, x, c.rmsEps, {"l_out", il}));
  }
  KVS_ASSIGN_OR_RETURN(const Act last, ops.logitRows(x, {"result_rows"}));
  KVS_TRY(ops.rmsnorm(last, w.outputNorm, last, c.nEmbd, c.rmsEps, {"result_norm"}));
  return ops.matmul(*w.output, last, ops.logits(c.nVocab), {}, {"result_output"});
}

}  // namespace

const ArchDescription kGemma3{.globals = kLlamaGlobals,
                              .layer = kLayer,
                              .forward = gemma3Forward,
                              .windowPeriod = 6,
                              .hfLayerNames = kHfLayerNames,
                              .hfNormsMinusOne = true};

}  // namespace kvscope::model
