#pragma once
// A Hugging Face mixture-of-experts checkpoint's expert tensors as GGUF's
// stacked ones, {in, out, nExpert} with expert e's rows at e * out
// (model/description.h HfExperts says which layout an architecture ships):
//  - kPerExpert: mlp.experts.E.{gate,up,down}_proj.weight, each [out, in],
//    copied one after another into ffn_{gate,up,down}_exps.weight (same type);
//  - kGptOssMxfp4: mlp.experts.gate_up_proj_blocks [E, 2 ff, in / 32, 16] and
//    _scales [E, 2 ff, in / 32] (gate rows even, up rows odd) become
//    ffn_gate_exps / ffn_up_exps in GGUF's MXFP4 blocks (the exponent byte,
//    then 16 bytes holding value j in the low nibble of byte j and value
//    j + 16 in its high one); down_proj_blocks/_scales likewise ffn_down_exps;
//    gate_up_proj_bias [E, 2 ff] splits into ffn_{gate,up}_exps.bias, and
//    down_proj_bias [E, width] is ffn_down_exps.bias as stored.
// A missing or misshapen expert tensor is kBadFile naming it.

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "core/error.h"
#include "model/model_config.h"
#include "model/safetensors.h"
#include "model/weight_source.h"

namespace kvscope::model {

// `unmapped`: the checkpoint's tensors hfToGgufName had no name for. The
// stacked tensors are appended to `tensors`; bytes made here live in `owned`.
Status assembleHfExperts(const ModelConfig& config,
                         std::span<const SafetensorsEntry* const> unmapped,
                         std::vector<TensorView>& tensors, std::deque<std::vector<uint8_t>>& owned);

}  // namespace kvscope::model
