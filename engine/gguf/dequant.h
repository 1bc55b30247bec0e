#pragma once
// CPU dequantization of ggml tensor data to float32: the reference every GPU
// kernel is tested against. The arithmetic follows ggml's dequantize_row_*
// product for product and in the same order (fp16 scales widened exactly,
// integer quants converted to float before multiplying), so on a build without
// FMA contraction the floats match ggml bit for bit.
// Decodes F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K,
// Q5_K and Q6_K. Arbitrary input bytes are safe: only the size is checked.

#include <cstdint>
#include <span>
#include <vector>

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "gguf/tensor_type.h"

namespace kvscope::gguf {

// True for the types dequantize() decodes.
bool canDequantize(TensorType type);

// Decodes out.size() values of `type` from `in`. out.size() must be a whole
// number of blocks and `in` exactly byteSize(type, out.size()) bytes
// (kInvalidArgument otherwise); a type canDequantize() refuses is kUnsupported.
Status dequantize(TensorType type, std::span<const uint8_t> in, std::span<float> out);

// Decodes row `row` (tensor.shape[0] values) of a tensor of `file` into `out`,
// which must hold exactly shape[0] floats.
Status dequantizeRow(const GgufFile& file, const TensorInfo& tensor, uint64_t row,
                     std::span<float> out);

// Decodes a whole tensor of `file`: tensor.elements() floats, ne[0] fastest.
Expected<std::vector<float>> dequantizeTensor(const GgufFile& file, const TensorInfo& tensor);

}  // namespace kvscope::gguf
