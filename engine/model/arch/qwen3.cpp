// qwen3: the llama decoder with an RMSNorm over each q and k head before
// RoPE, and NeoX RoPE (its registry row).
#include "model/arch/architectures.h"

namespace kvscope::model {
namespace {

constexpr std::string_view kRequired[] = {"attn_q_norm.weight", "attn_k_norm.weight"};

}  // namespace

const ArchDescription kQwen3{
    .globals = kLlamaGlobals, .layer = kLlamaLayer, .required = kRequired, .forward = llamaForward};

}  // namespace kvscope::model
