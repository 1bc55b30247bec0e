// gpt-oss (gpt-oss-20b, gpt-oss-120b): the llama decoder with biases on the
// q/k/v and output projections, one attention-sink logit per head, NeoX RoPE
// with YaRN scaling on every layer, and a mixture of experts in every layer:
// the router (with a bias) keeps the top experts_used logits and weighs them
// by their softmax; each expert (with biases) runs the clamped SwiGLU
// (Gate::kSwigluOai). Layers alternate between a sliding window (even ones)
// and the whole context. Its post_attention_norm is the FFN's input norm.
#include "model/arch/architectures.h"

#include <algorithm>

namespace kvscope::model {
namespace {

using L = LayerWeights;
constexpr auto kReq = Presence::kRequired;

constexpr TensorRule<L> kLayer[] = {
    {"attn_norm.weight", Dim::kEmbd, Dim::kNone, TensorKind::kNorm, kReq, &L::attnNorm},
    {"attn_q.weight", Dim::kEmbd, Dim::kQ, TensorKind::kMatrix, kReq, &L::wq},
    {"attn_q.bias", Dim::kQ, Dim::kNone, TensorKind::kBias, kReq, &L::bq},
    {"attn_k.weight", Dim::kEmbd, Dim::kKv, TensorKind::kMatrix, kReq, &L::wk},
    {"attn_k.bias", Dim::kKv, Dim::kNone, TensorKind::kBias, kReq, &L::bk},
    {"attn_v.weight", Dim::kEmbd, Dim::kKv, TensorKind::kMatrix, kReq, &L::wv},
    {"attn_v.bias", Dim::kKv, Dim::kNone, TensorKind::kBias, kReq, &L::bv},
    {"attn_output.weight", Dim::kQ, Dim::kEmbd, TensorKind::kMatrix, kReq, &L::wo},
    {"attn_output.bias", Dim::kEmbd, Dim::kNone, TensorKind::kBias, kReq, &L::bo},
    {"attn_sinks.weight", Dim::kHead, Dim::kNone, TensorKind::kSinks, kReq, &L::attnSinks},
    {"post_attention_norm.weight", Dim::kEmbd, Dim::kNone, TensorKind::kNorm, kReq, &L::ffnNorm},
    {"ffn_gate_inp.weight", Dim::kEmbd, Dim::kExpert, TensorKind::kMatrix, kReq, &L::gateInp},
    {"ffn_gate_inp.bias", Dim::kExpert, Dim::kNone, TensorKind::kBias, kReq, &L::gateInpBias},
    {"ffn_gate_exps.weight", Dim::kEmbd, Dim::kFfExp, TensorKind::kMatrix, kReq, &L::gateExps,
     Dim::kExpert},
    {"ffn_gate_exps.bias", Dim::kFfExp, Dim::kExpert, TensorKind::kBias, kReq, &L::gateExpsBias},
    {"ffn_up_exps.weight", Dim::kEmbd, Dim::kFfExp, TensorKind::kMatrix, kReq, &L::upExps,
     Dim::kExpert},
    {"ffn_up_exps.bias", Dim::kFfExp, Dim::kExpert, TensorKind::kBias, kReq, &L::upExpsBias},
    {"ffn_down_exps.weight", Dim::kFfExp, Dim::kEmbd, TensorKind::kMatrix, kReq, &L::downExps,
     Dim::kExpert},
    {"ffn_down_exps.bias", Dim::kEmbd, Dim::kExpert, TensorKind::kBias, kReq, &L::downExpsBias},
};

static_assert(std::ranges::none_of(kLayer, [](const auto& r) { return r.name.empty(); }));

// GptOssForCausalLM's names where they are not llama's; the experts are
// repacked from their MXFP4 blocks (model/hf_experts.h).
constexpr std::pair<std::string_view, std::string_view> kHfLayerNames[] = {
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"self_attn.o_proj.bias", "attn_output.bias"},
    {"self_attn.sinks", "attn_sinks.weight"},
    {"mlp.router.weight", "ffn_gate_inp.weight"},
    {"mlp.router.bias", "ffn_gate_inp.bias"},
};

Status gptOssForward(const ForwardPlan& p, ForwardOps& ops) {
  return llamaDecoder(
      p, ops, {.expertWeighting = ExpertWeighting::kTopKSoftmax, .expertAct = Gate::kSwigluOai});
}

}  // namespace

const ArchDescription kGptOss{.globals = kLlamaGlobals,
                              .layer = kLayer,
                              .forward = gptOssForward,
                              .windowPeriod = 2,
                              .windowRopeScaled = true,
                              .hfLayerNames = kHfLayerNames,
                              .hfExperts = HfExperts::kGptOssMxfp4};

}  // namespace kvscope::model
