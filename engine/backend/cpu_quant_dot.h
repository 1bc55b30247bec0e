#pragma once
// The building blocks of cpu::matmul's two precisions:
//  - kExact: weight rows widened to the floats gguf::dequantize gives
//    (expandRow, or the 16-bit conversions) and dotted by dotTile exactly as
//    dot() would; the fused SIMD kernels of cpu_quant_avx2.h take a faster
//    route for one input row.
//  - kInt8Activations: activations rounded to 8-bit blocks of 32 (ActBlock:
//    scale amax / 127, round to nearest even, as ggml's Q8_0) and dotInt8:
//    integer products summed in int32 per group of kGroup, float32 across
//    groups. That is the exact product of the dequantized weights with the
//    rounded activations, so its error against the float product is the
//    activation rounding's (bound in cpu_matmul.h) plus float32 rounding.
//    (A single row against super-block weights takes the SIMD kernels'
//    blocks of 256 instead: cpu_quant_avx2.h, ActSuperBlock.)
// Lengths of quantized rows and activations are whole numbers of 32-value
// blocks. `portable` selects the plain C++ kernels even where SIMD ones are
// built, so tests cover both.

#include <cstddef>
#include <cstdint>

#include "backend/cpu_quant_decode.h"

namespace kvscope::cpu {

inline constexpr size_t kActBlock = 32;  // activation values per int8 block

struct ActBlock {
  float d = 0.0f;       // value[i] ~ d * q[i]
  // The sum of q over each half of kGroup values, exact in a float (at most
  // 16 x 127): kept as float because the offset terms of the dot kernels
  // multiply it by floats, and an int-to-float conversion per block per
  // weight row costs more than the multiply (a decode of a Q4_K model).
  float sum[2] = {};
  int8_t q[kActBlock] = {};
};

// Rounds x[in] to in / kActBlock blocks.
void quantizeActivations(const float* x, size_t in, ActBlock* out, bool portable = false);

// out[in / kGroup]: the sum of each group of kGroup values of x, the second
// factor of the offset term of the fused kExact kernels.
void groupSums(const float* x, size_t in, float* out);

// `offsets`: hasOffsets() of the row's type (otherwise the term is skipped).
float dotInt8(const DecodedRow& w, const ActBlock* x, size_t in, bool offsets,
              bool portable = false);

// out[i] = scale * q[i] + offset, multiplied and added in two roundings like
// gguf::dequantize: the dequantized row, bit for bit.
void expandRow(const DecodedRow& w, size_t in, float* out, bool portable = false);

// y[t * yStride + r] = dot(w[r], x + t * in, in) (cpu_matmul.h) for r < rows
// (at most kTileRows) and t < n, bit for bit: the SIMD tile keeps dot()'s
// eight lanes and order of additions, and loads each weight once for
// several input rows.
inline constexpr size_t kTileRows = 4;
void dotTile(const float* const* w, size_t rows, const float* x, size_t n, size_t in, float* y,
             size_t yStride, bool portable = false);

// Row conversions of the 16-bit float weight types, exact (every fp16 and
// bf16 value is a float).
void f16RowToFloat(const uint8_t* row, size_t n, float* out, bool portable = false);
void bf16RowToFloat(const uint8_t* row, size_t n, float* out);

}  // namespace kvscope::cpu
