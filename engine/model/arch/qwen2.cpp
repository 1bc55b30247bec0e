// qwen2: the llama decoder with biases on the q, k and v projections, and
// NeoX RoPE (its registry row).
#include "model/arch/architectures.h"

namespace kvscope::model {
namespace {

constexpr std::string_view kRequired[] = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};

}  // namespace

const ArchDescription kQwen2{
    .globals = kLlamaGlobals, .layer = kLlamaLayer, .required = kRequired, .forward = llamaForward};

}  // namespace kvscope::model
