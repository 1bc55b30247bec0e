// phi3 (Phi-3, Phi-3.5 and Phi-4 mini): the llama decoder with NeoX RoPE,
// whose files fuse the q, k and v projections into one attn_qkv tensor and
// the gate and up projections into one ffn_up tensor (gate rows first, as
// llama.cpp's swiglu splits it). The 128K variants scale RoPE by LongRoPE:
// per-frequency factors, long ones beyond the original context, and a
// magnitude factor (model/description.h planForward). Its queries are scaled
// by 1/sqrt(head dim) before attention.
#include "model/arch/architectures.h"

namespace kvscope::model {
namespace {

using M = ModelWeights;
using L = LayerWeights;
constexpr auto kReq = Presence::kRequired;
constexpr auto kOpt = Presence::kOptional;

constexpr TensorRule<M> kGlobals[] = {
    {"token_embd.weight", Dim::kEmbd, Dim::kVocab, TensorKind::kEmbedding, kReq, &M::tokenEmbd},
    {"output_norm.weight", Dim::kEmbd, Dim::kNone, TensorKind::kNorm, kReq, &M::outputNorm},
    {"output.weight", Dim::kEmbd, Dim::kVocab, TensorKind::kMatrix, Presence::kUnlessTied,
     &M::output},
    {"rope_factors_long.weight", Dim::kRopeHalf, Dim::kNone, TensorKind::kRopeFactors, kOpt,
     &M::ropeLong},
    {"rope_factors_short.weight", Dim::kRopeHalf, Dim::kNone, TensorKind::kRopeFactors, kOpt,
     &M::ropeShort},
};

constexpr TensorRule<L> kLayer[] = {
    {"attn_norm.weight", Dim::kEmbd, Dim::kNone, TensorKind::kNorm, kReq, &L::attnNorm},
    {"attn_qkv.weight", Dim::kEmbd, Dim::kQkv, TensorKind::kMatrix, kReq, &L::wqkv},
    {"attn_output.weight", Dim::kQ, Dim::kEmbd, TensorKind::kMatrix, kReq, &L::wo},
    {"ffn_norm.weight", Dim::kEmbd, Dim::kNone, TensorKind::kNorm, kReq, &L::ffnNorm},
    {"ffn_up.weight", Dim::kEmbd, Dim::kFf2, TensorKind::kMatrix, kReq, &L::gateUp},
    {"ffn_down.weight", Dim::kFf, Dim::kEmbd, TensorKind::kMatrix, kReq, &L::down},
};

// q, k and v are row ranges of attn_qkv; gate and up the halves of ffn_up.
Status split(const ModelConfig& c, ModelWeights& w) {
  const auto view = [&](const TensorView* fused, uint64_t first, uint64_t rows,
                        std::string_view part) -> Expected<const TensorView*> {
    KVS_ASSIGN_OR_RETURN(auto v,
                         rowRange(*fused, first, rows, fmt::format("{}[{}]", fused->name, part)));
    return &w.views->emplace_back(std::move(v));
  };
  for (uint32_t i = 0; i < w.layers.size(); ++i) {
    LayerWeights& l = w.layers[i];
    const uint32_t q = c.qDimOf(i), kv = c.kvDimOf(i);
    KVS_ASSIGN_OR_RETURN(l.wq, view(l.wqkv, 0, q, "q"));
    KVS_ASSIGN_OR_RETURN(l.wk, view(l.wqkv, q, kv, "k"));
    KVS_ASSIGN_OR_RETURN(l.wv, view(l.wqkv, q + kv, kv, "v"));
    const uint32_t ff = c.ffOf(i);
    KVS_ASSIGN_OR_RETURN(l.gate, view(l.gateUp, 0, ff, "gate"));
    KVS_ASSIGN_OR_RETURN(l.up, view(l.gateUp, ff, ff, "up"));
  }
  return okStatus();
}

// The llama decoder over the split views; the queries are scaled before
// attention, as in phi3's reference graph.
Status forward(const ForwardPlan& p, ForwardOps& ops) {
  return llamaDecoder(p, ops, {.scaleQueries = true});
}

}  // namespace

const ArchDescription kPhi3{
    .globals = kGlobals, .layer = kLayer, .split = split, .forward = forward};

}  // namespace kvscope::model
