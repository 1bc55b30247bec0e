#pragma once
// Reference quantizers: float32 to ggml block formats, for writing test models
// and feeding GPU kernel tests. They produce valid blocks whose dequantization
// (dequant.h) stays within about half a quantization step of the input, but
// they do not replicate llama.cpp's iterative scale search, so their bytes
// differ from llama-quantize's.
// Encodes F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K
// and Q6_K.

#include <cstdint>
#include <span>
#include <vector>

#include "core/error.h"
#include "gguf/tensor_type.h"

namespace kvscope::gguf {

// True for the types quantize() encodes.
bool canQuantize(TensorType type);

// Encodes `in` (a whole number of blocks of finite values) into `out`, which
// must be exactly byteSize(type, in.size()) bytes. kInvalidArgument for a size
// mismatch, a NaN or infinity, or values too large for the block's fp16
// scales; kUnsupported for a type canQuantize() refuses.
Status quantize(TensorType type, std::span<const float> in, std::span<uint8_t> out);
Expected<std::vector<uint8_t>> quantize(TensorType type, std::span<const float> in);

}  // namespace kvscope::gguf
