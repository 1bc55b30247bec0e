// gemma4 (Gemma 4 E2B, E4B, 26B-A4B, 31B, text): Gemma 3's pre- and
// post-normed blocks, sqrt(width)-scaled embeddings, GeGLU and q/k norms, with
//  - attention at scale 1 and V rows RMS-normed without a weight; global
//    layers may take V from the K projection (no attn_v, 26B/31B), and have
//    their own head width, KV heads and proportional RoPE (rope_freqs);
//  - the window layers flagged one by one (sliding_window_pattern) with their
//    own RoPE base and rotated dimensions;
//  - KV-shared layers (E2B/E4B): the last attention.shared_kv_layers layers
//    have no K/V projections and attend the rows of the last storing layer of
//    their kind (ModelConfig::kvSourceOf), which the cache holds once;
//  - per-layer inputs (E2B/E4B): a token's own row of every layer's input
//    (per_layer_token_embd) plus a normed projection of its embedding; each
//    layer adds proj(gelu(inp_gate x) * its input), normed, to the residual;
//  - a mixture of experts beside the dense FFN (26B-A4B): the router reads
//    the residual RMS-normed times ffn_gate_inp.scale / sqrt(width), keeps
//    the top experts by softmax, renormalised, each expert's output scaled by
//    ffn_down_exps.scale; the dense and expert halves are normed apart
//    (post_ffw_norm_1/_2), summed, and normed again (post_ffw_norm);
//  - a scale on each layer's output (layer_output_scale) and soft-capped
//    final logits.
// GGUF norm weights multiply as they are (the converter adds no 1).
#include "model/arch/architectures.h"

#include <algorithm>
#include <cmath>

namespace kvscope::model {
namespace {

using M = ModelWeights;
using L = LayerWeights;
constexpr auto kReq = Presence::kRequired;
constexpr auto kKv = Presence::kStoresKv;
constexpr auto kExp = Presence::kExperts;
constexpr auto kPl = Presence::kPerLayer;

constexpr TensorRule<M> kGlobals[] = {
    {"token_embd.weight", Dim::kEmbd, Dim::kVocab, TensorKind::kEmbedding, kReq, &M::tokenEmbd},
    {"per_layer_token_embd.weight", Dim::kPerLayerAll, Dim::kVocab, TensorKind::kEmbedding, kPl,
     &M::perLayerTokenEmbd},
    {"per_layer_model_proj.weight", Dim::kEmbd, Dim::kPerLayerAll, TensorKind::kMatrix, kPl,
     &M::perLayerModelProj},
    {"per_layer_proj_norm.weight", Dim::kPerLayer, Dim::kNone, TensorKind::kNorm, kPl,
     &M::perLayerProjNorm},
    {"output_norm.weight", Dim::kEmbd, Dim::kNone, TensorKind::kNorm, kReq, &M::outputNorm},
    {"output.weight", Dim::kEmbd, Dim::kVocab, TensorKind::kMatrix, Presence::kUnlessTied,
     &M::output},
    // GGUF files ship the global layers' proportional RoPE as factors; a
    // Hugging Face config states it (RopeScaling::kProportional).
    {"rope_freqs.weight", Dim::kRopeHalf, Dim::kNone, TensorKind::kRopeFactors,
     Presence::kUnlessRopeStated, &M::ropeFreqs},
};

constexpr TensorRule<L> kLayer[] = {
    {"attn_norm.weight", Dim::kEmbd, Dim::kNone, TensorKind::kNorm, kReq, &L::attnNorm},
    {"attn_q.weight", Dim::kEmbd, Dim::kQ, TensorKind::kMatrix, kReq, &L::wq},
    {"attn_k.weight", Dim::kEmbd, Dim::kKv, TensorKind::kMatrix, kKv, &L::wk},
    {"attn_v.weight", Dim::kEmbd, Dim::kKv, TensorKind::kMatrix, Presence::kValueProjection,
     &L::wv},
    {"attn_output.weight", Dim::kQ, Dim::kEmbd, TensorKind::kMatrix, kReq, &L::wo},
    {"attn_q_norm.weight", Dim::kHeadDim, Dim::kNone, TensorKind::kNorm, kReq, &L::qNorm},
    {"attn_k_norm.weight", Dim::kHeadDim, Dim::kNone, TensorKind::kNorm, kKv, &L::kNorm},
    {"post_attention_norm.weight", Dim::kEmbd, Dim::kNone, TensorKind::kNorm, kReq,
     &L::attnPostNorm},
    {"layer_output_scale.weight", Dim::kNone, Dim::kNone, TensorKind::kNorm, kReq,
     &L::layerOutputScale},
    {"ffn_norm.weight", Dim::kEmbd, Dim::kNone, TensorKind::kNorm, kReq, &L::ffnNorm},
    {"ffn_gate.weight", Dim::kEmbd, Dim::kFf, TensorKind::kMatrix, kReq, &L::gate},
    {"ffn_up.weight", Dim::kEmbd, Dim::kFf, TensorKind::kMatrix, kReq, &L::up},
    {"ffn_down.weight", Dim::kFf, Dim::kEmbd, TensorKind::kMatrix, kReq, &L::down},
    {"post_ffw_norm.weight", Dim::kEmbd, Dim::kNone, TensorKind::kNorm, kReq, &L::ffnPostNorm},
    {"ffn_gate_inp.weight", Dim::kEmbd, Dim::kExpert, TensorKind::kMatrix, kExp, &L::gateInp},
    {"ffn_gate_inp.scale", Dim::kEmbd, Dim::kNone, TensorKind::kNorm, kExp, &L::gateInpScale},
    {"pre_ffw_norm_2.weight", Dim::kEmbd, Dim::kNone, TensorKind::kNorm, kExp, &L::ffnPreNorm2},
    {"post_ffw_norm_1.weight", Dim::kEmbd, Dim::kNone, TensorKind::kNorm, kExp, &L::ffnPostNorm1},
    {"post_ffw_norm_2.weight", Dim::kEmbd, Dim::kNone, TensorKind::kNorm, kExp, &L::ffnPostNorm2},
    {"ffn_gate_up_exps.weight", Dim::kEmbd, Dim::kFfExp2, TensorKind::kMatrix, kExp, &L::gateUpExps,
     Dim::kExpert},
    {"ffn_down_exps.weight", Dim::kFfExp, Dim::kEmbd, TensorKind::kMatrix, kExp, &L::downExps,
     Dim::kExpert},
    {"ffn_down_exps.scale", Dim::kExpert, Dim::kNone, TensorKind::kNorm, kExp, &L::downExpsScale},
    {"inp_gate.weight", Dim::kEmbd, Dim::kPerLayer, TensorKind::kMatrix, kPl, &L::perLayerGate},
    {"proj.weight", Dim::kPerLayer, Dim::kEmbd, TensorKind::kMatrix, kPl, &L::perLayerProj},
    {"post_norm.weight", Dim::kEmbd, Dim::kNone, TensorKind::kNorm, kPl, &L::perLayerPostNorm},
};

static_assert(std::ranges::none_of(kGlobals, [](const auto& r) { return r.name.empty(); }));
static_assert(std::ranges::none_of(kLayer, [](const auto& r) { return r.name.empty(); }));

// Gemma4ForCausalLM's names where they are not llama's (the norms hold w,
// as in GGUF files; the expert stacks are [experts, rows, width] already).
constexpr std::pair<std::string_view, std::string_view> kHfLayerNames[] = {
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
    {"pre_feedforward_layernorm_2.weight", "pre_ffw_norm_2.weight"},
    {"post_feedforward_layernorm_1.weight", "post_ffw_norm_1.weight"},
    {"post_feedforward_layernorm_2.weight", "post_ffw_norm_2.weight"},
    {"router.proj.weight", "ffn_gate_inp.weight"},
    {"router.scale", "ffn_gate_inp.scale"},
    {"router.per_expert_scale", "ffn_down_exps.scale"},
    {"experts.gate_up_proj", "ffn_gate_up_exps.weight"},
    {"experts.down_proj", "ffn_down_exps.weight"},
    {"per_layer_input_gate.weight", "inp_gate.weight"},
    {"per_layer_projection.weight", "proj.weight"},
    {"post_per_layer_input_norm.weight", "post_norm.weight"},
    {"layer_scalar", "layer_output_scale.weight"},
};

constexpr std::pair<std::string_view, std::string_view> kHfGlobalNames[] = {
    {"model.embed_tokens_per_layer.weight", "per_layer_token_embd.weight"},
    {"model.per_layer_model_projection.weight", "per_layer_model_proj.weight"},
    {"model.per_layer_projection_norm.weight", "per_layer_proj_norm.weight"},
};

Status gemma4Forward(const ForwardPlan& p, ForwardOps& ops) {
  const ModelConfig& c = *p.config;
  const ModelWeights& w = *p.weights;
  const uint32_t nPl = c.nEmbdPerLayer;
  const float invSqrtWidth = 1.0f / std::sqrt(static_cast<float>(c.nEmbd));

  const Act x = ops.act("x", c.nEmbd);  // the residual stream
  const Act h = ops.act("h", c.nEmbd);  // a block's normed input, then its sub-layer's output
  KVS_TRY(ops.embed(*w.tokenEmbd, x, std::sqrt(static_cast<float>(c.nEmbd)), {"inp_scaled"}));

  // Every layer's per-layer input, [rows, nLayer * nPl]: (the token's own
  // rows * sqrt(nPl) + the embedding's projection / sqrt(width), normed per
  // layer) / sqrt(2).
  Act perLayer{};
  if (nPl > 0) {
    perLayer = ops.act("per_layer_inp", nPl * c.nLayer);
    const Act projected = ops.act("per_layer_proj", nPl * c.nLayer);
    KVS_TRY(ops.embed(*w.perLayerTokenEmbd, perLayer, std::sqrt(static_cast<float>(nPl)),
                      {"inp_per_layer_selected"}));
    KVS_TRY(ops.matmul(*w.perLayerModelProj, x, projected, {}, {"per_layer_proj_raw"}));
    KVS_TRY(ops.scale(projected, invSqrtWidth, {"per_layer_proj_scaled"}));
    KVS_TRY(
        ops.rmsnorm(projected, w.perLayerProjNorm, projected, nPl, c.rmsEps, {"per_layer_proj"}));
    KVS_TRY(ops.add(projected, perLayer, {"per_layer_sum"}));
    KVS_TRY(ops.scale(perLayer, 1.0f / std::sqrt(2.0f), {"inp_per_layer"}));
  }

  for (uint32_t l = 0; l < c.nLayer; ++l) {
    const LayerWeights& lw = w.layers[l];
    const int il = static_cast<int>(l);
    const uint32_t headDim = c.headDimOf(l);
    const Act q = ops.act("q", c.qDimOf(l));
    const Act att = ops.act("att", c.qDimOf(l));  // attention output, before wo
    KVS_TRY(ops.rmsnorm(x, lw.attnNorm, h, c.nEmbd, c.rmsEps, {"attn_norm", il}));
    KVS_TRY(ops.matmul(*lw.wq, h, q, {}, {"Qcur", il}));
    KVS_TRY(ops.rmsnorm(q, lw.qNorm, q, headDim, c.rmsEps, {"Qcur_normed", il}));
    KVS_TRY(ops.rope(q, c.headsOf(l), headDim, p.ropeOf(l), {"Qcur_pos", il}));
    AttentionSpec attention = p.attention(l);
    attention.scale = 1.0f;
    if (c.storesKv(l)) {
      const Act k = ops.act("k", c.kvDimOf(l));
      const Act v = ops.act("v", c.kvDimOf(l));
      KVS_TRY(ops.matmul(*lw.wk, h, k, {}, {"Kcur", il}));
      // V: its own projection, or the K projection before the K norm.
      if (lw.wv) KVS_TRY(ops.matmul(*lw.wv, h, v, {}, {"Vcur", il}));
      KVS_TRY(ops.rmsnorm(lw.wv ? v : k, nullptr, v, headDim, c.rmsEps, {"Vcur_normed", il}));
      KVS_TRY(ops.rmsnorm(k, lw.kNorm, k, headDim, c.rmsEps, {"Kcur_normed", il}));
      KVS_TRY(ops.rope(k, c.headsKvOf(l), headDim, p.ropeOf(l), {"Kcur_pos", il}));
      KVS_TRY(ops.attention(q, k, v, att, attention, {"kqv_out", il}));
    } else {
      KVS_TRY(ops.attendCache(q, att, attention, {"kqv_out", il}));
    }
    KVS_TRY(ops.matmul(*lw.wo, att, h, {}, {"attn_out", il}));
    KVS_TRY(ops.rmsnormAdd(h, *lw.attnPostNorm, x, c.rmsEps, {"attn_out_res", il}));

    // The dense GeGLU feed-forward, beside the experts where the layer has them.
    const Act ffn = ops.act("ffn", c.ffOf(l));  // the gate, then gelu(gate) * up
    KVS_TRY(ops.rmsnorm(x, lw.ffnNorm, h, c.nEmbd, c.rmsEps, {"ffn_norm", il}));
    KVS_TRY(ops.matmul(*lw.gate, h, ffn, {}, {"ffn_gate", il}));
    KVS_TRY(ops.matmul(*lw.up, h, ffn, {.gate = Gate::kGelu}, {"ffn_geglu", il}));
    KVS_TRY(ops.matmul(*lw.down, ffn, h, {}, {"ffn_mlp_raw", il}));
    if (lw.gateInp) {
      const Act expertsIn = ops.act("experts_in", c.nEmbd);
      const Act routerIn = ops.act("router_in", c.nEmbd);
      const Act experts = ops.act("experts", c.nEmbd);
      KVS_TRY(ops.rmsnorm(x, lw.ffnPreNorm2, expertsIn, c.nEmbd, c.rmsEps, {"ffn_norm_2", il}));
      KVS_TRY(ops.rmsnorm(x, lw.gateInpScale, routerIn, c.nEmbd, c.rmsEps, {"router_norm", il}));
      KVS_TRY(ops.scale(routerIn, invSqrtWidth, {"router_in", il}));
      const MoeSpec moe{.router = lw.gateInp,
                        .gateUp = lw.gateUpExps,
                        .down = lw.downExps,
                        .downScale = lw.downExpsScale,
                        .routerInput = routerIn,
                        .nExpert = c.nExpert,
                        .nUsed = c.nExpertUsed,
                        .ff = c.nFfExp,
                        .weighting = ExpertWeighting::kSoftmaxTopK,
                        .act = Gate::kGelu,
                        .accumulate = false};
      KVS_TRY(ops.moe(expertsIn, moe, experts, {"ffn_moe", il}));
      KVS_TRY(ops.rmsnorm(experts, lw.ffnPostNorm2, experts, c.nEmbd, c.rmsEps,
                          {"ffn_moe_normed", il}));
      // experts + the dense half normed: llama.cpp's ffn_moe_combined.
      KVS_TRY(ops.rmsnormAdd(h, *lw.ffnPostNorm1, experts, c.rmsEps, {"ffn_moe_combined", il}));
      KVS_TRY(ops.rmsnormAdd(experts, *lw.ffnPostNorm, x, c.rmsEps, {"ffn_out_res", il}));
    } else {
      KVS_TRY(ops.rmsnormAdd(h, *lw.ffnPostNorm, x, c.rmsEps, {"ffn_out_res", il}));
    }

    if (nPl > 0) {
      const Act gate = ops.act("per_layer_gate", nPl);
      KVS_TRY(ops.matmul(*lw.perLayerGate, x, gate, {}, {"per_layer_gate", il}));
      KVS_TRY(ops.gatedMul(Gate::kGelu, gate, perLayer, l * nPl, {"per_layer_gated", il}));
      KVS_TRY(ops.matmul(*lw.perLayerProj, gate, h, {}, {"per_layer_out", il}));
      KVS_TRY(ops.rmsnormAdd(h, *lw.perLayerPostNorm, x, c.rmsEps, {"per_layer_embd_out", il}));
    }
    if (!p.layerOutputScales.empty()) KVS_TRY(ops.scale(x, p.layerOutputScales[l], {"l_out", il}));
  }
  KVS_ASSIGN_OR_RETURN(const Act last, ops.logitRows(x, {"result_rows"}));
  KVS_TRY(ops.rmsnorm(last, w.outputNorm, last, c.nEmbd, c.rmsEps, {"result_norm"}));
  const Act logits = ops.logits(c.nVocab);
  KVS_TRY(ops.matmul(*w.output, last, logits, {}, {"result_output_raw"}));
  if (c.finalLogitSoftcap > 0.0f)
    KVS_TRY(ops.softCap(logits, c.finalLogitSoftcap, {"result_output"}));
  return okStatus();
}

}  // namespace

const ArchDescription kGemma4{.globals = kGlobals,
                              .layer = kLayer,
                              .forward = gemma4Forward,
                              .hfLayerNames = kHfLayerNames,
                              .hfGlobalNames = kHfGlobalNames,
                              .defaultLogitSoftcap = 30.0f};

}  // namespace kvscope::model
