#pragma once
// Weight rows of every quantized GGUF type decoded to one common form, so a
// single pair of dot kernels (cpu_quant_dot.h) serves all of them. For each
// group g of kGroup consecutive values there is one float scale and offset,
// and every value has an int8 quant:
//     value[i] = scale[i / kGroup] * q[i] + offset[i / kGroup]
// scale and offset are the gguf dequantizer's own float expressions (d,
// d * sc, -(dmin * m), ...), so value[i] is the dequantized weight of
// gguf::dequantize up to the rounding of that one multiply-add.
// Q4_1/Q5_1/Q2_K/Q4_K/Q5_K have offsets; for the others they are all zero.

#include <cstddef>
#include <cstdint>

#include "gguf/tensor_type.h"

namespace kvscope::cpu {

inline constexpr size_t kGroup = 16;  // values per (scale, offset) pair

struct DecodedRow {
  int8_t* q;      // [in]
  float* scale;   // [in / kGroup]
  float* offset;  // [in / kGroup]
};

// True for the types decodeRow handles: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4
// and Q2_K to Q6_K.
bool canDecodeRow(gguf::TensorType type);

// True when `type` has non-zero offsets, so the dots must add their term.
bool hasOffsets(gguf::TensorType type);

// Decodes one row of `in` values (a whole number of blocks) stored at `row`.
// `portable` selects the plain C++ decoders even where SIMD ones are built,
// so tests can check both against the gguf dequantizer.
void decodeRow(gguf::TensorType type, const uint8_t* row, size_t in, const DecodedRow& out,
               bool portable = false);

// Shared with the SIMD kernels: a Q4_K/Q5_K block's eight 6-bit (scale, min)
// pairs as scale[16] and offset[16] (one pair per 32 values, so each twice).
void kQuantScales(const uint8_t* block, float* scale, float* offset);

}  // namespace kvscope::cpu
