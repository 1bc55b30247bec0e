// qwen3moe (Qwen3-30B-A3B, Qwen3-235B-A22B): qwen3's attention (q/k RMSNorm,
// NeoX RoPE) with a mixture-of-experts feed-forward in every layer: a softmax
// router over the experts, the top experts_used kept and their weights
// renormalised, each a SwiGLU of width expert_feed_forward_length.
#include "model/arch/architectures.h"

#include <algorithm>

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
    {"ffn_norm.weight", Dim::kEmbd, Dim::kNone, TensorKind::kNorm, kReq, &L::ffnNorm},
    {"ffn_gate_inp.weight", Dim::kEmbd, Dim::kExpert, TensorKind::kMatrix, kReq, &L::gateInp},
    {"ffn_gate_exps.weight", Dim::kEmbd, Dim::kFfExp, TensorKind::kMatrix, kReq, &L::gateExps,
     Dim::kExpert},
    {"ffn_up_exps.weight", Dim::kEmbd, Dim::kFfExp, TensorKind::kMatrix, kReq, &L::upExps,
     Dim::kExpert},
    {"ffn_down_exps.weight", Dim::kFfExp, Dim::kEmbd, TensorKind::kMatrix, kReq, &L::downExps,
     Dim::kExpert},
};

static_assert(std::ranges::none_of(kLayer, [](const auto& r) { return r.name.empty(); }));

// Qwen3MoeForCausalLM's router; its experts are stacked at load
// (model/hf_experts.h).
constexpr std::pair<std::string_view, std::string_view> kHfLayerNames[] = {
    {"mlp.gate.weight", "ffn_gate_inp.weight"},
};

}  // namespace

const ArchDescription kQwen3Moe{.globals = kLlamaGlobals,
                                .layer = kLayer,
                                .forward = llamaForward,
                                .hfLayerNames = kHfLayerNames,
                                .hfExperts = HfExperts::kPerExpert};

}  // namespace kvscope::model
