#pragma once
// The descriptions of the architectures kvscope runs, one file each; the
// registry (model/architecture.cpp) points its rows at them.

#include "core/error.h"
#include "model/description.h"

namespace kvscope::model {

extern const ArchDescription kLlama;  // llama, mistral
extern const ArchDescription kQwen2;
extern const ArchDescription kQwen3;
extern const ArchDescription kPhi3;
extern const ArchDescription kQwen3Moe;
extern const ArchDescription kGemma3;
extern const ArchDescription kGemma4;
extern const ArchDescription kGptOss;

// llama's tensor tables, which qwen2 and qwen3 share (their descriptions
// require the biases and the q/k norms the table lists as optional).
// (Arrays, so other descriptions' spans of them are constant-initialized;
// arch/llama.cpp checks every entry is filled.)
extern const TensorRule<ModelWeights> kLlamaGlobals[4];
extern const TensorRule<LayerWeights> kLlamaLayer[14];

// The llama decoder (arch/llama.cpp). qwen2, qwen3, phi3, qwen3moe and
// gpt-oss run it with their own tensor tables: a bias, a q/k norm, attention
// sinks or a mixture of experts (and its biases) runs where the table bound
// one.
struct LlamaVariant {
  // Scale the queries by 1/sqrt(head dim) before attention, attention then at
  // scale 1 (phi3's graph does; the query's f16 rounding comes after the
  // scaling). The scale rides on the query's RoPE (RopeSpec::scale).
  bool scaleQueries = false;
  // How the router weighs the experts it picks, and their activation.
  ExpertWeighting expertWeighting = ExpertWeighting::kSoftmaxTopK;
  Gate expertAct = Gate::kSilu;
};
Status llamaDecoder(const ForwardPlan& plan, ForwardOps& ops, const LlamaVariant& variant);
Status llamaForward(const ForwardPlan& plan, ForwardOps& ops);  // llamaDecoder(…, {})

}  // namespace kvscope::model
