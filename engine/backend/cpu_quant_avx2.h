#pragma once
// AVX2 versions of the kernels of cpu_quant_decode.h and cpu_quant_dot.h,
// built only when the compiler targets AVX2, FMA and F16C (KVSCOPE_NATIVE on
// such a machine). They compute the same quantities as the portable kernels:
// integer results are identical, float results differ only in the order of
// float32 additions and in fused multiply-adds.
//
// Beyond the portable set they offer fused row dots for the common weight
// types, which decode each block in registers instead of through a decoded
// row: the decode step (n = 1) reads every weight once, so a separate decode
// pass would cost as much as the dot itself.

#include "backend/cpu_features.h"
#include "backend/cpu_quant_decode.h"
#include "backend/cpu_quant_dot.h"

#if defined(KVSCOPE_CPU_AVX2)
#include <immintrin.h>

namespace kvscope::cpu::avx2 {

// KVSCOPE_CPU_VNNI: dpbusd on 256-bit vectors (AVX-VNNI or AVX512-VNNI+VL).
#if defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))
#define KVSCOPE_CPU_VNNI 1
// acc + per 4-byte group, the int32 sum of unsignedA * signedW (8 lanes).
[[gnu::always_inline]] inline __m256i int8Accumulate(__m256i acc, __m256i unsignedA,
                                                     __m256i signedW) {
#if defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(acc, unsignedA, signedW);
#else
  return _mm256_dpbusd_epi32(acc, unsignedA, signedW);
#endif
}
#endif

// Per 4-byte group, the int32 sum of absW * signedA (8 lanes). Both
// instructions take one unsigned operand, so the caller moves one factor's
// sign onto the other (|w| and sign(a, w)); without VNNI, |w| <= 128 and
// |a| <= 127 keep maddubs's pair sums within int16, so both forms give the
// same integers.
[[gnu::always_inline]] inline __m256i int8Sums(__m256i absW, __m256i signedA) {
#if defined(KVSCOPE_CPU_VNNI)
  return int8Accumulate(_mm256_setzero_si256(), absW, signedA);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(absW, signedA), _mm256_set1_epi16(1));
#endif
}

void quantizeActivations(const float* x, size_t in, ActBlock* out);

// Activations rounded in super-blocks of 256 (ggml's Q8_K) for the
// super-block formats' decode dots: the same rule as ActBlock's (scale
// amax / 127 over the super-block, round to nearest even).
inline constexpr size_t kActSuperBlock = 256;
struct alignas(32) ActSuperBlock {
  int8_t q[kActSuperBlock];
  int16_t sum[kActSuperBlock / kGroup];  // the sum of q over each group of 16
  float d = 0.0f;                        // value[i] ~ d * q[i]
};
// Rounds x[in] (a multiple of 256) to in / 256 super-blocks.
void quantizeSuperBlocks(const float* x, size_t in, ActSuperBlock* out);

void expandRow(const DecodedRow& w, size_t in, float* out);
void dotTile(const float* const* w, size_t rows, const float* x, size_t n, size_t in, float* y,
             size_t yStride);
// The decoded-row int8 dot without its offset term (added by the caller).
float dotInt8(const DecodedRow& w, const ActBlock* x, size_t in);

void f16RowToFloat(const uint8_t* row, size_t n, float* out);

// Kernels on one weight row in its GGUF block layout (`in` values), offsets
// included. Null for types without a fused kernel.
struct RowKernels {
  void (*decode)(const uint8_t* row, size_t in, const DecodedRow& out) = nullptr;
  float (*dotExact)(const uint8_t* row, const float* x, const float* xGroupSums,
                    size_t in) = nullptr;
  // The 32-value formats' one-row int8 dot (null for the super-block ones,
  // which have superDotInt8).
  float (*dotInt8)(const uint8_t* row, const ActBlock* x, size_t in) = nullptr;
  // y[t][r] = the int8 product of row r and input t (ActBlocks, in / 32 per
  // input) for `rows` rows from `w` (rowBytes apart) and n inputs, in tiles
  // of rows x inputs so that each block is read once per tile (with VNNI and
  // n > 1, packed tiles of exact int32 sums per scale span).
  void (*tileInt8)(const uint8_t* w, size_t rowBytes, size_t rows, const ActBlock* x, size_t n,
                   size_t in, float* y, size_t yStride) = nullptr;
  // The super-block formats' (Q4_K, Q5_K, Q6_K, IQ4_XS) one-row int8 dot
  // against super-block activations: the exact product of the dequantized
  // row with the rounded activations up to float32 rounding, as dotInt8's,
  // but with one activation scale per 256 values (so the rounding bound of
  // cpu_matmul.h sums over super-blocks). Null for the other types.
  float (*superDotInt8)(const uint8_t* row, const ActSuperBlock* x, size_t in) = nullptr;
};
RowKernels rowKernels(gguf::TensorType type);

}  // namespace kvscope::cpu::avx2
#endif
