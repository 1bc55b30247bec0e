#include "backend/cpu_quant_avx2.h"

#if defined(KVSCOPE_CPU_AVX2)
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>
#include <vector>

#include "gguf/block_layout.h"

namespace kvscope::cpu::avx2 {
namespace {

using namespace gguf::blocks;

[[gnu::always_inline]] inline float half(const uint8_t* p) {
  return _cvtsh_ss(loadU16(p));
}

[[gnu::always_inline]] inline __m256i load32(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

[[gnu::always_inline]] inline float horizontalSum(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

[[gnu::always_inline]] inline int horizontalSum(__m256i v) {
  const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  const __m128i s2 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
  return _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, 1)));
}

// 16 bytes split into 32 nibbles: low nibbles are values 0-15, high 16-31.
[[gnu::always_inline]] inline __m256i nibbles16(const uint8_t* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0x0f));
}

// Bits 0-31 of `bits` as bytes 0-31 holding 16 where the bit is set.
[[gnu::always_inline]] inline __m256i fifthBits(uint32_t bits) {
  const __m256i byteOfBit =
      _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), byteOfBit);
  const __m256i bitOfByte = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bitOfByte), bitOfByte);
  return _mm256_and_si256(set, _mm256_set1_epi8(16));
}

// Each byte shifted right by `shift` and masked (the shift works on 16-bit
// lanes; the mask drops the bits that crossed over from the next byte).
[[gnu::always_inline]] inline __m256i bitsOfBytes(__m256i v, int shift, int mask) {
  return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(shift)),
                          _mm256_set1_epi8(static_cast<char>(mask)));
}

// Q4_K/Q5_K's twelve bytes of six-bit fields gathered four to a 32-bit
// word: bytes 0-7 are the eight sub-blocks' scales, bytes 8-15 their mins.
[[gnu::always_inline]] inline __m128i kQuantFields(const uint8_t* b) {
  const uint8_t* s = b + q4_k::kScales;
  const uint32_t w0 = loadU32(s), w1 = loadU32(s + 4), w2 = loadU32(s + 8);
  return _mm_setr_epi32(static_cast<int>(w0 & 0x3f3f3f3fu),
                        static_cast<int>((w2 & 0x0f0f0f0fu) | ((w0 >> 2) & 0x30303030u)),
                        static_cast<int>(w1 & 0x3f3f3f3fu),
                        static_cast<int>(((w2 >> 4) & 0x0f0f0f0fu) | ((w1 >> 2) & 0x30303030u)));
}

// Q4_K/Q5_K scales (kQuantScales), vectorized: the fields widened and scaled
// eight at a time.
[[gnu::always_inline]] inline void kQuantScalesAvx2(const uint8_t* b, float* scale, float* offset) {
  const __m128i fields = kQuantFields(b);
  const __m256 sc = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(fields)),
                                  _mm256_set1_ps(half(b + q4_k::kD)));
  const __m256 m =
      _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(fields, fields))),
                    _mm256_set1_ps(-half(b + q4_k::kDmin)));
  // Each of the eight pairs covers two groups of 16.
  const __m256i first = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
  const __m256i second = _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7);
  _mm256_storeu_ps(scale, _mm256_permutevar8x32_ps(sc, first));
  _mm256_storeu_ps(scale + 8, _mm256_permutevar8x32_ps(sc, second));
  _mm256_storeu_ps(offset, _mm256_permutevar8x32_ps(m, first));
  _mm256_storeu_ps(offset + 8, _mm256_permutevar8x32_ps(m, second));
}

// A super-block's scales in integer form, for the dots against
// ActSuperBlocks: value i of group g (16 values) is
// d * scale[g] * c_i + dOffset * offset[g], c_i its code (codes(): unsigned
// for the K-quants, the codebook's signed values for IQ4_XS).
struct SuperScales {
  __m256i scale;   // int16 [16]
  __m256i offset;  // int16 [16]
  float d, dOffset;
};

// Q4_K/Q5_K: six-bit scale j and min j cover values 32j .. 32j+31, groups
// 2j and 2j+1; value = d * scale * u - dmin * min.
[[gnu::always_inline]] inline SuperScales kQuantSuperScales(const uint8_t* b) {
  const __m128i fields = kQuantFields(b);
  const __m128i twice = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  const __m128i scales = _mm_shuffle_epi8(fields, twice);
  const __m128i mins = _mm_shuffle_epi8(fields, _mm_add_epi8(twice, _mm_set1_epi8(8)));
  return {_mm256_cvtepu8_epi16(scales), _mm256_cvtepu8_epi16(mins), half(b + q4_k::kD),
          -half(b + q4_k::kDmin)};
}

// Block formats: scales() writes the block's per-group scale and offset
// (cpu_quant_decode.h), quants(b, c) returns values 32c .. 32c+31 as int8.

struct Q8_0 {
  static constexpr size_t kBytes = q8_0::kBytes, kValues = kQK;
  static constexpr bool kOffsets = false;
  static void scales(const uint8_t* b, float* scale, float*) {
    scale[0] = scale[1] = half(b + q8_0::kD);
  }
  static __m256i quants(const uint8_t* b, size_t) { return load32(b + q8_0::kQs); }
};

struct Q4_0 {
  static constexpr size_t kBytes = q4_0::kBytes, kValues = kQK;
  static constexpr bool kOffsets = false;
  static void scales(const uint8_t* b, float* scale, float*) {
    scale[0] = scale[1] = half(b + q4_0::kD);
  }
  static __m256i quants(const uint8_t* b, size_t) {
    return _mm256_sub_epi8(nibbles16(b + q4_0::kQs), _mm256_set1_epi8(8));
  }
};

struct Q4_1 {
  static constexpr size_t kBytes = q4_1::kBytes, kValues = kQK;
  static constexpr bool kOffsets = true;
  static void scales(const uint8_t* b, float* scale, float* offset) {
    scale[0] = scale[1] = half(b + q4_1::kD);
    offset[0] = offset[1] = half(b + q4_1::kM);
  }
  static __m256i quants(const uint8_t* b, size_t) { return nibbles16(b + q4_1::kQs); }
};

struct Q5_0 {
  static constexpr size_t kBytes = q5_0::kBytes, kValues = kQK;
  static constexpr bool kOffsets = false;
  static void scales(const uint8_t* b, float* scale, float*) {
    scale[0] = scale[1] = half(b + q5_0::kD);
  }
  static __m256i quants(const uint8_t* b, size_t) {
    const __m256i v = _mm256_or_si256(nibbles16(b + q5_0::kQs), fifthBits(loadU32(b + q5_0::kQh)));
    return _mm256_sub_epi8(v, _mm256_set1_epi8(16));
  }
};

struct Q5_1 {
  static constexpr size_t kBytes = q5_1::kBytes, kValues = kQK;
  static constexpr bool kOffsets = true;
  static void scales(const uint8_t* b, float* scale, float* offset) {
    scale[0] = scale[1] = half(b + q5_1::kD);
    offset[0] = offset[1] = half(b + q5_1::kM);
  }
  static __m256i quants(const uint8_t* b, size_t) {
    return _mm256_or_si256(nibbles16(b + q5_1::kQs), fifthBits(loadU32(b + q5_1::kQh)));
  }
};

// A 16-entry int8 codebook in both 128-bit lanes, for _mm256_shuffle_epi8.
[[gnu::always_inline]] inline __m256i codebook(const int8_t (&values)[16]) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(values));
  return _mm256_set_m128i(t, t);
}

// IQ4_NL and MXFP4: Q4_0's nibbles, looked up in the codebook (MXFP4's
// values doubled, its scale 2^(e - 128)).
struct IQ4_NL {
  static constexpr size_t kBytes = iq4_nl::kBytes, kValues = kQK;
  static constexpr bool kOffsets = false;
  static void scales(const uint8_t* b, float* scale, float*) {
    scale[0] = scale[1] = half(b + iq4_nl::kD);
  }
  static __m256i quants(const uint8_t* b, size_t) {
    return _mm256_shuffle_epi8(codebook(iq4::kValues), nibbles16(b + iq4_nl::kQs));
  }
};

// mxfp4::scale of every exponent: a load per block where the bit arithmetic
// and its branch took four of a decode dot's ~20 operations.
constexpr auto kMxfp4Scales = [] {
  std::array<float, 256> t{};
  for (size_t e = 0; e < t.size(); ++e) t[e] = mxfp4::scale(static_cast<uint8_t>(e));
  return t;
}();

struct MXFP4 {
  static constexpr size_t kBytes = mxfp4::kBytes, kValues = kQK;
  static constexpr bool kOffsets = false;
  static void scales(const uint8_t* b, float* scale, float*) {
    scale[0] = scale[1] = kMxfp4Scales[b[mxfp4::kE]];
  }
  static __m256i quants(const uint8_t* b, size_t) {
    return _mm256_shuffle_epi8(codebook(mxfp4::kDoubled), nibbles16(b + mxfp4::kQs));
  }
};

// IQ4_XS: chunk c is sub-block c, IQ4_NL-coded at qs + 16 c, its scale
// d * (6-bit - 32) on both of its groups of 16.
struct IQ4_XS {
  static constexpr size_t kBytes = iq4_xs::kBytes, kValues = kQK_K;
  static constexpr bool kOffsets = false;
  static void scales(const uint8_t* b, float* scale, float*) {
    const float d = half(b + iq4_xs::kD);
    const uint32_t high = loadU16(b + iq4_xs::kScalesH), low = loadU32(b + iq4_xs::kScalesL);
    for (size_t ib = 0; ib < kValues / 32; ++ib) {
      const int ls = static_cast<int>(((low >> (4 * ib)) & 0x0f) | (((high >> (2 * ib)) & 3) << 4));
      scale[2 * ib] = scale[2 * ib + 1] = d * static_cast<float>(ls - 32);
    }
  }
  static __m256i quants(const uint8_t* b, size_t c) {
    return _mm256_shuffle_epi8(codebook(iq4::kValues), nibbles16(b + iq4_xs::kQs + 16 * c));
  }
  // Signed codes (the codebook's), no offsets: value = d * (ls - 32) * code.
  static constexpr bool kSignedCodes = true;
  static SuperScales superScales(const uint8_t* b) {
    alignas(32) int16_t scale[kValues / kGroup];
    for (int ib = 0; ib < static_cast<int>(kValues / 32); ++ib)
      scale[2 * ib] = scale[2 * ib + 1] = static_cast<int16_t>(iq4_xs::subScale(b, ib));
    return {_mm256_load_si256(reinterpret_cast<const __m256i*>(scale)), _mm256_setzero_si256(),
            half(b + iq4_xs::kD), 0.0f};
  }
  static __m256i codes(const uint8_t* b, size_t c) { return quants(b, c); }
};

// Q4_K/Q5_K: chunk c is the low (even c) or high nibbles of qs[32 * (c / 2)];
// Q5_K's fifth bit of value l of chunk c is bit c of qh[l].
struct Q4_K {
  static constexpr size_t kBytes = q4_k::kBytes, kValues = kQK_K;
  static constexpr bool kOffsets = true;
  static void scales(const uint8_t* b, float* scale, float* offset) {
    kQuantScalesAvx2(b, scale, offset);
  }
  static __m256i quants(const uint8_t* b, size_t c) {
    return bitsOfBytes(load32(b + q4_k::kQs + 32 * (c / 2)), c % 2 ? 4 : 0, 0x0f);
  }
  static constexpr bool kSignedCodes = false;
  static SuperScales superScales(const uint8_t* b) { return kQuantSuperScales(b); }
  static __m256i codes(const uint8_t* b, size_t c) { return quants(b, c); }
};

struct Q5_K {
  static constexpr size_t kBytes = q5_k::kBytes, kValues = kQK_K;
  static constexpr bool kOffsets = true;
  static void scales(const uint8_t* b, float* scale, float* offset) {
    kQuantScalesAvx2(b, scale, offset);
  }
  static __m256i quants(const uint8_t* b, size_t c) {
    const __m256i low = bitsOfBytes(load32(b + q5_k::kQs + 32 * (c / 2)), c % 2 ? 4 : 0, 0x0f);
    const __m256i high = bitsOfBytes(load32(b + q5_k::kQh), static_cast<int>(c), 0x01);
    return _mm256_or_si256(low, _mm256_slli_epi16(high, 4));
  }
  static constexpr bool kSignedCodes = false;
  static SuperScales superScales(const uint8_t* b) { return kQuantSuperScales(b); }
  static __m256i codes(const uint8_t* b, size_t c) { return quants(b, c); }
};

// Q6_K: chunk c = 4 * half + k takes a nibble of ql[64 * half + 32 * (k % 2)]
// (high for k >= 2) and bits 2k..2k+1 of qh[32 * half], minus 32.
struct Q6_K {
  static constexpr size_t kBytes = q6_k::kBytes, kValues = kQK_K;
  static constexpr bool kOffsets = false;
  static void scales(const uint8_t* b, float* scale, float*) {
    const float d = half(b + q6_k::kD);
    const auto* sc = reinterpret_cast<const int8_t*>(b + q6_k::kScales);
    for (size_t g = 0; g < kValues / kGroup; ++g) scale[g] = d * sc[g];
  }
  static __m256i quants(const uint8_t* b, size_t c) {
    return _mm256_sub_epi8(codes(b, c), _mm256_set1_epi8(32));
  }
  // value = d * sc[g] * (u - 32) = d * sc[g] * u - d * (32 * sc[g]).
  static constexpr bool kSignedCodes = false;
  static SuperScales superScales(const uint8_t* b) {
    const __m256i sc =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + q6_k::kScales)));
    const float d = half(b + q6_k::kD);
    return {sc, _mm256_slli_epi16(sc, 5), d, -d};
  }
  // The unsigned 6-bit codes (0-63) of chunk c.
  static __m256i codes(const uint8_t* b, size_t c) {
    const size_t half = c / 4, k = c % 4;
    const __m256i ql = load32(b + q6_k::kQl + 64 * half + 32 * (k % 2));
    const __m256i qh = load32(b + q6_k::kQh + 32 * half);
    const __m256i low = bitsOfBytes(ql, k >= 2 ? 4 : 0, 0x0f);
    const __m256i high = _mm256_slli_epi16(bitsOfBytes(qh, static_cast<int>(2 * k), 0x03), 4);
    return _mm256_or_si256(low, high);
  }
};

constexpr size_t kChunk = 32;  // values per quants() call and per ActBlock

// Exact step: sum_g scale[g] * sum_i q[i] * x[i] for the two groups of one
// chunk, accumulated per group so both scales stay separate multiplies.
[[gnu::always_inline]] inline void exactStep(__m128i q0, __m128i q1, const float* x,
                                             const float* scale, __m256& acc0, __m256& acc1) {
  const auto widen = [](__m128i q) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)); };
  __m256 p0 = _mm256_mul_ps(widen(q0), _mm256_loadu_ps(x));
  p0 = _mm256_fmadd_ps(widen(_mm_srli_si128(q0, 8)), _mm256_loadu_ps(x + 8), p0);
  __m256 p1 = _mm256_mul_ps(widen(q1), _mm256_loadu_ps(x + 16));
  p1 = _mm256_fmadd_ps(widen(_mm_srli_si128(q1, 8)), _mm256_loadu_ps(x + 24), p1);
  acc0 = _mm256_fmadd_ps(_mm256_broadcast_ss(scale), p0, acc0);
  acc1 = _mm256_fmadd_ps(_mm256_broadcast_ss(scale + 1), p1, acc1);
}

// The two group scales of a chunk spread over the lanes of their sums: lanes
// 0-3 hold the first group's partial sums, lanes 4-7 the second's.
[[gnu::always_inline]] inline __m256 chunkScales(const float* scale) {
  const __m128 twoScales = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(scale)));
  return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(twoScales),
                                  _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
}

// Integer step: per-group int32 sums of w * a (int8Sums), scaled by
// scale[g] * a.d.
[[gnu::always_inline]] inline __m256 int8Step(__m256i w, const ActBlock& a, const float* scale,
                                              __m256 acc) {
  const __m256i sums = int8Sums(_mm256_sign_epi8(w, w), _mm256_sign_epi8(load32(a.q), w));
  const __m256 scales = _mm256_mul_ps(chunkScales(scale), _mm256_broadcast_ss(&a.d));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scales, acc);
}

// dot() of R weight rows with T input rows: dot()'s eight lanes per pair,
// multiplied and added separately in the same order, then reduced the way
// dot() reduces, so every result equals dot() bit for bit. The R * T
// independent chains hide the add latency a single dot() waits on, and each
// weight vector is loaded once for T inputs.
constexpr size_t kTileInputs = 2;

template <size_t R, size_t T>
void tile(const float* const* w, const float* x, size_t in, float* y, size_t yStride) {
  // The accumulators must live in registers: unroll every R and T loop.
  __m256 acc[R][T];
#pragma GCC unroll 8
  for (size_t r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (size_t t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= in; i += 8) {
    __m256 wv[R];
#pragma GCC unroll 8
    for (size_t r = 0; r < R; ++r) wv[r] = _mm256_loadu_ps(w[r] + i);
#pragma GCC unroll 8
    for (size_t t = 0; t < T; ++t) {
      const __m256 xv = _mm256_loadu_ps(x + t * in + i);
#pragma GCC unroll 8
      for (size_t r = 0; r < R; ++r) acc[r][t] = _mm256_add_ps(acc[r][t], _mm256_mul_ps(wv[r], xv));
    }
  }
#pragma GCC unroll 8
  for (size_t r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (size_t t = 0; t < T; ++t) {
      float lane[8];
      _mm256_storeu_ps(lane, acc[r][t]);
      float tail = 0.0f;
      for (size_t j = i; j < in; ++j) tail += w[r][j] * x[t * in + j];
      y[t * yStride + r] = ((lane[0] + lane[4]) + (lane[1] + lane[5])) +
                           ((lane[2] + lane[6]) + (lane[3] + lane[7])) + tail;
    }
  }
}

template <class F>
void decodeRowOf(const uint8_t* row, size_t in, const DecodedRow& out) {
  constexpr size_t kGroups = F::kValues / kGroup;
  int8_t* q = out.q;
  float* scale = out.scale;
  float* offset = out.offset;
  for (size_t b = 0; b < in / F::kValues; ++b) {
    const uint8_t* block = row + b * F::kBytes;
    if constexpr (!F::kOffsets) {
      for (size_t g = 0; g < kGroups; ++g) offset[b * kGroups + g] = 0.0f;
    }
    F::scales(block, scale + b * kGroups, offset + b * kGroups);
#pragma GCC unroll 8
    for (size_t c = 0; c < F::kValues / kChunk; ++c) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * F::kValues + c * kChunk),
                          F::quants(block, c));
    }
  }
}

template <class F>
float fusedDotExact(const uint8_t* row, const float* x, const float* xGroupSums, size_t in) {
  constexpr size_t kGroups = F::kValues / kGroup;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  float off = 0.0f;
  for (size_t b = 0; b < in / F::kValues; ++b) {
    const uint8_t* block = row + b * F::kBytes;
    float scale[kGroups], offset[kGroups];
    F::scales(block, scale, offset);
    // Unrolled so the per-chunk shifts and offsets of quants() are constants.
#pragma GCC unroll 8
    for (size_t c = 0; c < F::kValues / kChunk; ++c) {
      const __m256i q = F::quants(block, c);
      exactStep(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1),
                x + b * F::kValues + c * kChunk, scale + 2 * c, acc0, acc1);
    }
    if constexpr (F::kOffsets) {
      for (size_t g = 0; g < kGroups; ++g) off += offset[g] * xGroupSums[b * kGroups + g];
    }
  }
  return horizontalSum(_mm256_add_ps(acc0, acc1)) + off;
}

// One block of a 32-value format (one scale) against its ActBlock: the
// block's scale and the activation's multiplied once, as a scalar.
template <class F>
[[gnu::always_inline]] inline void blockStep(const uint8_t* block, const ActBlock& a, __m256& acc,
                                             float& off) {
  float scale[2], offset[2];
  F::scales(block, scale, offset);
  const __m256i w = F::quants(block, 0);
  const __m256i sums = int8Sums(_mm256_sign_epi8(w, w), _mm256_sign_epi8(load32(a.q), w));
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_set1_ps(scale[0] * a.d), acc);
  if constexpr (F::kOffsets) off += a.d * (offset[0] * (a.sum[0] + a.sum[1]));
}

// The 32-value formats' one-row int8 dot (the super-block formats have
// superDotInt8): blocks in pairs on two accumulators, since a block is short
// and one chain of multiply-adds would wait on its own latency.
template <class F>
float fusedDotInt8(const uint8_t* row, const ActBlock* x, size_t in) {
  static_assert(F::kValues == kChunk);
  const size_t blocks = in / kChunk;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  float off0 = 0.0f, off1 = 0.0f;
  size_t b = 0;
  for (; b + 2 <= blocks; b += 2) {
    blockStep<F>(row + b * F::kBytes, x[b], acc0, off0);
    blockStep<F>(row + (b + 1) * F::kBytes, x[b + 1], acc1, off1);
  }
  if (b < blocks) blockStep<F>(row + b * F::kBytes, x[b], acc0, off0);
  return horizontalSum(_mm256_add_ps(acc0, acc1)) + (off0 + off1);
}

// acc + per 32-bit lane, the sum of the products of its two int16 pairs.
[[gnu::always_inline]] inline __m256i int16Accumulate(__m256i acc, __m256i a, __m256i b) {
#if defined(__AVXVNNI__)
  return _mm256_dpwssd_avx_epi32(acc, a, b);
#elif defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpwssd_epi32(acc, a, b);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
}

// The int16 scales of chunk c's two groups (words 2c and 2c+1 of `scale`):
// the first in every word of the low 128-bit lane, the second in the high.
[[gnu::always_inline]] inline __m256i chunkScale(__m256i scale, size_t c) {
  const __m256i pair = _mm256_permutevar8x32_epi32(scale, _mm256_set1_epi32(static_cast<int>(c)));
  const __m256i spread = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,  //
                                          2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
  return _mm256_shuffle_epi8(pair, spread);
}

// A super-block row (the K-quants, IQ4_XS) against activations in
// super-blocks of 256 (ggml's q4_K x q8_K scheme): within a super-block
// everything is an exact int32 sum, code * a in int16 pairs (unsigned codes
// < 64, or signed ones moved onto |code| <= 127 and sign(a): at most 32258),
// times the int16 group scales, and the offset term
// sum_g offset[g] * a.sum[g]; each super-block then costs two conversions
// and two multiply-adds in float, where fusedDotInt8 pays them per 32 values.
template <class F>
float superDotInt8(const uint8_t* row, const ActSuperBlock* x, size_t in) {
  __m256 acc = _mm256_setzero_ps(), accOffset = _mm256_setzero_ps();
  for (size_t b = 0; b < in / kQK_K; ++b) {
    const uint8_t* block = row + b * F::kBytes;
    const ActSuperBlock& a = x[b];
    const SuperScales s = F::superScales(block);
    __m256i sum = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (size_t c = 0; c < kQK_K / kChunk; ++c) {
      const __m256i w = F::codes(block, c), aq = load32(a.q + kChunk * c);
      __m256i pairs;
      if constexpr (F::kSignedCodes) {
        pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(aq, w));
      } else {
        pairs = _mm256_maddubs_epi16(w, aq);
      }
      sum = int16Accumulate(sum, pairs, chunkScale(s.scale, c));
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(s.d * a.d), acc);
    if constexpr (!F::kSignedCodes) {
      const __m256i offsets = _mm256_madd_epi16(s.offset, load32(a.sum));
      accOffset =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(offsets), _mm256_set1_ps(s.dOffset * a.d), accOffset);
    }
  }
  return horizontalSum(_mm256_add_ps(acc, accOffset));
}

// The int8 products of R weight rows and T input rows at once (a batch
// without VNNI): each weight chunk is decoded once for T inputs, each
// activation block loaded once for R rows, one chain of chunks per pair.
template <class F, size_t R, size_t T>
void fusedTileInt8(const uint8_t* w, size_t rowBytes, const ActBlock* x, size_t in, float* y,
                   size_t yStride) {
  constexpr size_t kGroups = F::kValues / kGroup, kChunks = F::kValues / kChunk;
  const size_t xStride = in / kChunk;  // activation blocks per input row
  __m256 acc[R][T];
  float off[R][T];
#pragma GCC unroll 8
  for (size_t r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (size_t t = 0; t < T; ++t) {
      acc[r][t] = _mm256_setzero_ps();
      off[r][t] = 0.0f;
    }
  for (size_t b = 0; b < in / F::kValues; ++b) {
    // Zeroed although scales() writes every entry: GCC 12 with AVX-512 cannot
    // see that through iq4_xs's loop and warns (-Wmaybe-uninitialized).
    float scale[R][kGroups] = {}, offset[R][kGroups];
#pragma GCC unroll 8
    for (size_t r = 0; r < R; ++r) F::scales(w + r * rowBytes + b * F::kBytes, scale[r], offset[r]);
#pragma GCC unroll 8
    for (size_t c = 0; c < kChunks; ++c) {
      // int8Step with its per-row and per-input parts hoisted out of the pairs.
      __m256i q[R], absW[R];
      __m256 wScale[R];
#pragma GCC unroll 8
      for (size_t r = 0; r < R; ++r) {
        q[r] = F::quants(w + r * rowBytes + b * F::kBytes, c);
        absW[r] = _mm256_sign_epi8(q[r], q[r]);
        wScale[r] = chunkScales(scale[r] + 2 * c);
      }
#pragma GCC unroll 8
      for (size_t t = 0; t < T; ++t) {
        const ActBlock& a = x[t * xStride + b * kChunks + c];
        const __m256i aq = load32(a.q);
        const __m256 ad = _mm256_broadcast_ss(&a.d);
#pragma GCC unroll 8
        for (size_t r = 0; r < R; ++r) {
          const __m256i sums = int8Sums(absW[r], _mm256_sign_epi8(aq, q[r]));
          acc[r][t] =
              _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_mul_ps(wScale[r], ad), acc[r][t]);
          if constexpr (F::kOffsets) {
            off[r][t] += a.d * (offset[r][2 * c] * a.sum[0] + offset[r][2 * c + 1] * a.sum[1]);
          }
        }
      }
    }
  }
#pragma GCC unroll 8
  for (size_t r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (size_t t = 0; t < T; ++t) y[t * yStride + r] = horizontalSum(acc[r][t]) + off[r][t];
}

// With 32 vector registers (AVX-512VL) a 4 x 4 tile's 16 accumulators stay in
// registers; with AVX2's 16, 4 x 2.
#if defined(__AVX512VL__)
constexpr size_t kInt8TileRows = 4, kInt8TileInputs = 4;
#else
constexpr size_t kInt8TileRows = 4, kInt8TileInputs = 2;
#endif

#if defined(KVSCOPE_CPU_VNNI)
// Packed tiles (VNNI): the int8 products of 8 weight rows and many inputs
// with the rows in the lanes. The tile's codes are repacked so that each
// 32-byte vector holds 4 consecutive codes of each of the 8 rows; one dpbusd
// against 4 of an input's codes (broadcast) then adds 4 products to every
// row's lane, and a row's sum over a scale's span stays an exact int32 until
// it is scaled once, as llama.cpp's q8_0 dot scales each block's integer sum.
// dpbusd multiplies unsigned by signed bytes, so the inputs go in as
// a + 128 (unsigned) and 128 * (sum of the span's codes) comes off again.
// Packing costs a few operations per code, paid once per tile for a block
// of inputs.

// Inputs per packed tile: T int32 sums and T float accumulators stay in
// registers (32 with AVX-512VL, 16 with AVX2).
constexpr size_t kPackRows = 8;
#if defined(__AVX512VL__)
constexpr size_t kPackedInputs = 8;
#else
constexpr size_t kPackedInputs = 4;
#endif

// Values per scale: one per block of 32 in the legacy formats, one per group
// of 16 in the K-quants.
template <class F>
constexpr size_t scaleSpan() {
  return F::kValues == kQK ? kQK : kGroup;
}

// One 32-byte vector of 8 lanes, storable in a std::vector.
struct alignas(32) Lanes {
  uint32_t lane[8];
  __m256i i() const { return _mm256_load_si256(reinterpret_cast<const __m256i*>(lane)); }
  __m256 f() const { return _mm256_load_ps(reinterpret_cast<const float*>(lane)); }
  void set(__m256i v) { _mm256_store_si256(reinterpret_cast<__m256i*>(lane), v); }
  void set(__m256 v) { _mm256_store_ps(reinterpret_cast<float*>(lane), v); }
};

struct PackedTile {
  std::vector<Lanes> codes;    // [in / 4]: lane r = codes 4j..4j+3 of row r
  std::vector<Lanes> bias;     // [in / span]: lane r = 128 * sum of row r's codes in the span
  std::vector<Lanes> scales;   // [in / span]: lane r = row r's scale for the span (float)
  std::vector<Lanes> offsets;  // [in / 16]: lane r = row r's offset (float; formats with offsets)
};

// Lanes j of the 8 rows: out[j] lane r = rows[r] lane j (8 x 8 dwords).
[[gnu::always_inline]] inline void transpose8(const __m256i* rows, __m256i* out) {
  __m256i t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(rows[2 * i], rows[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(rows[2 * i], rows[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    out[j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x20);
    out[4 + j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x31);
  }
}

// Packs `rows` <= 8 rows (rowBytes apart, `in` values each); missing rows
// get zero codes and scales.
template <class F>
void packRows(const uint8_t* w, size_t rowBytes, size_t rows, size_t in, PackedTile& p) {
  constexpr size_t kGroups = F::kValues / kGroup, kChunks = F::kValues / kChunk;
  constexpr size_t kSpan = scaleSpan<F>();
  p.codes.resize(in / 4);
  p.bias.resize(in / kSpan);
  p.scales.resize(in / kSpan);
  if constexpr (F::kOffsets) p.offsets.resize(in / kGroup);
  const __m256i ones = _mm256_set1_epi8(1);
  for (size_t b = 0; b < in / F::kValues; ++b) {
    alignas(32) float scale[kPackRows][kGroups] = {}, offset[kPackRows][kGroups] = {};
    for (size_t r = 0; r < rows; ++r) F::scales(w + r * rowBytes + b * F::kBytes, scale[r], offset[r]);
    for (size_t g = 0; g < F::kValues / kSpan; ++g) {
      const size_t group = g * kSpan / kGroup;
      p.scales[b * F::kValues / kSpan + g].set(
          _mm256_setr_ps(scale[0][group], scale[1][group], scale[2][group], scale[3][group],
                         scale[4][group], scale[5][group], scale[6][group], scale[7][group]));
    }
    if constexpr (F::kOffsets) {
      for (size_t g = 0; g < kGroups; ++g)
        p.offsets[b * kGroups + g].set(
            _mm256_setr_ps(offset[0][g], offset[1][g], offset[2][g], offset[3][g], offset[4][g],
                           offset[5][g], offset[6][g], offset[7][g]));
    }
    for (size_t c = 0; c < kChunks; ++c) {
      __m256i q[kPackRows];
      for (size_t r = 0; r < kPackRows; ++r)
        q[r] = r < rows ? F::quants(w + r * rowBytes + b * F::kBytes, c) : _mm256_setzero_si256();
      __m256i out[8];
      transpose8(q, out);
      for (size_t j = 0; j < 8; ++j) p.codes[(b * F::kValues + c * kChunk) / 4 + j].set(out[j]);
      // Sum of codes per row and span: dpbusd of ones (unsigned) by codes.
      for (size_t g = 0; g < kChunk / kSpan; ++g) {
        __m256i sum = _mm256_setzero_si256();
        for (size_t j = 0; j < kSpan / 4; ++j) sum = int8Accumulate(sum, ones, out[g * kSpan / 4 + j]);
        p.bias[(b * F::kValues + c * kChunk) / kSpan + g].set(_mm256_slli_epi32(sum, 7));
      }
    }
  }
}

// y[t][r] for the packed rows and T inputs: xu holds the inputs' codes plus
// 128 ([t][in] bytes), x their ActBlocks.
template <class F, size_t T>
void packedTile(const PackedTile& p, const uint8_t* xu, const ActBlock* x, size_t in, size_t rows,
                float* y, size_t yStride) {
  constexpr size_t kSpan = scaleSpan<F>();
  const size_t xStride = in / kChunk;
  __m256 acc[T], off[T];
  for (size_t t = 0; t < T; ++t) acc[t] = off[t] = _mm256_setzero_ps();
  for (size_t g = 0; g < in / kSpan; ++g) {
    __m256i sum[T];
#pragma GCC unroll 8
    for (size_t t = 0; t < T; ++t) sum[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (size_t j = 0; j < kSpan / 4; ++j) {
      const __m256i codes = p.codes[g * kSpan / 4 + j].i();
#pragma GCC unroll 8
      for (size_t t = 0; t < T; ++t) {
        const __m256i a = _mm256_set1_epi32(static_cast<int>(loadU32(xu + t * in + g * kSpan + 4 * j)));
        sum[t] = int8Accumulate(sum[t], a, codes);
      }
    }
    const __m256i bias = p.bias[g].i();
    const __m256 scale = p.scales[g].f();
#pragma GCC unroll 8
    for (size_t t = 0; t < T; ++t) {
      const ActBlock& a = x[t * xStride + g * kSpan / kChunk];
      const __m256 products = _mm256_mul_ps(scale, _mm256_broadcast_ss(&a.d));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(sum[t], bias)), products, acc[t]);
    }
  }
  if constexpr (F::kOffsets) {
    for (size_t g = 0; g < in / kGroup; ++g) {
      const __m256 offset = p.offsets[g].f();
      for (size_t t = 0; t < T; ++t) {
        const ActBlock& a = x[t * xStride + g / 2];
        off[t] = _mm256_fmadd_ps(offset, _mm256_set1_ps(a.d * a.sum[g % 2]), off[t]);
      }
    }
  }
  for (size_t t = 0; t < T; ++t) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, _mm256_add_ps(acc[t], off[t]));
    std::copy_n(lanes, rows, y + t * yStride);
  }
}
#endif

template <class F>
void tileInt8Of(const uint8_t* w, size_t rowBytes, size_t rows, const ActBlock* x, size_t n,
                size_t in, float* y, size_t yStride) {
  using Tile = void (*)(const uint8_t*, size_t, const ActBlock*, size_t, float*, size_t);
  static constexpr Tile kTiles[4][4] = {{fusedTileInt8<F, 1, 1>, fusedTileInt8<F, 1, 2>,
                                         fusedTileInt8<F, 1, 3>, fusedTileInt8<F, 1, 4>},
                                        {fusedTileInt8<F, 2, 1>, fusedTileInt8<F, 2, 2>,
                                         fusedTileInt8<F, 2, 3>, fusedTileInt8<F, 2, 4>},
                                        {fusedTileInt8<F, 3, 1>, fusedTileInt8<F, 3, 2>,
                                         fusedTileInt8<F, 3, 3>, fusedTileInt8<F, 3, 4>},
                                        {fusedTileInt8<F, 4, 1>, fusedTileInt8<F, 4, 2>,
                                         fusedTileInt8<F, 4, 3>, fusedTileInt8<F, 4, 4>}};
  // Inputs in blocks of 64, whose activations (64 x in bytes) stay in the L2
  // cache while every row passes over them; rows then stream once per block.
  constexpr size_t kInputBlock = 64;
#if defined(KVSCOPE_CPU_VNNI)
  if (n > 1) {
    using Packed = void (*)(const PackedTile&, const uint8_t*, const ActBlock*, size_t, size_t,
                            float*, size_t);
    static constexpr auto kPacked = []<size_t... T>(std::index_sequence<T...>) {
      return std::array<Packed, sizeof...(T)>{packedTile<F, T + 1>...};
    }(std::make_index_sequence<kPackedInputs>());
    // Per thread, sized by one block of inputs and one tile, whatever n is.
    thread_local std::vector<uint8_t> xu;  // [input of the block][in]: codes + 128
    thread_local PackedTile packed;
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    for (size_t t0 = 0; t0 < n; t0 += kInputBlock) {
      const size_t tEnd = std::min(n, t0 + kInputBlock);
      xu.resize((tEnd - t0) * in);
      const ActBlock* xBlock = x + t0 * (in / kChunk);
      for (size_t b = 0; b < (tEnd - t0) * in / kChunk; ++b)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(&xu[b * kChunk]),
                            _mm256_xor_si256(load32(xBlock[b].q), flip));
      for (size_t r = 0; r < rows; r += kPackRows) {
        const size_t tileRows = std::min(kPackRows, rows - r);
        packRows<F>(w + r * rowBytes, rowBytes, tileRows, in, packed);
        for (size_t t = t0; t < tEnd; t += kPackedInputs) {
          const size_t inputs = std::min(kPackedInputs, tEnd - t);
          kPacked[inputs - 1](packed, &xu[(t - t0) * in], x + t * (in / kChunk), in, tileRows,
                              y + t * yStride + r, yStride);
        }
      }
    }
    return;
  }
#endif
  for (size_t t0 = 0; t0 < n; t0 += kInputBlock) {
    const size_t tEnd = std::min(n, t0 + kInputBlock);
    for (size_t r = 0; r < rows; r += kInt8TileRows) {
      const size_t tileRows = std::min(kInt8TileRows, rows - r);
      for (size_t t = t0; t < tEnd; t += kInt8TileInputs) {
        const size_t inputs = std::min(kInt8TileInputs, tEnd - t);
        kTiles[tileRows - 1][inputs - 1](w + r * rowBytes, rowBytes, x + t * (in / kChunk), in,
                                         y + t * yStride + r, yStride);
      }
    }
  }
}

template <class F>
RowKernels kernelsOf() {
  RowKernels k{decodeRowOf<F>, fusedDotExact<F>, nullptr, tileInt8Of<F>};
  if constexpr (requires(const uint8_t* b) { F::superScales(b); }) {
    k.superDotInt8 = superDotInt8<F>;
  } else {
    k.dotInt8 = fusedDotInt8<F>;
  }
  return k;
}

}  // namespace

namespace {

// The int8 scale of n values (a multiple of 8): max |x| / 127.
float activationScale(const float* x, size_t n) {
  const __m256 signBit = _mm256_set1_ps(-0.0f);
  __m256 amax = _mm256_setzero_ps();
  for (size_t i = 0; i < n; i += 8)
    amax = _mm256_max_ps(amax, _mm256_andnot_ps(signBit, _mm256_loadu_ps(x + i)));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  return _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4))) / 127.0f;
}

// x[0..32) rounded to codes x * id (to nearest even, like nearbyint in the
// default mode) into q, and the codes' sums over each half.
void roundChunk(const float* x, __m256 id, int8_t* q, int32_t (&sums)[2]) {
  __m256i c[4];
  for (int k = 0; k < 4; ++k)
    c[k] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), id));
  sums[0] = horizontalSum(_mm256_add_epi32(c[0], c[1]));
  sums[1] = horizontalSum(_mm256_add_epi32(c[2], c[3]));
  // The packs work per 128-bit lane; the permute restores value order.
  const __m256i bytes =
      _mm256_packs_epi16(_mm256_packs_epi32(c[0], c[1]), _mm256_packs_epi32(c[2], c[3]));
  _mm256_storeu_si256(
      reinterpret_cast<__m256i*>(q),
      _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

__m256 inverseScale(float d) {
  return _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
}

}  // namespace

void quantizeActivations(const float* x, size_t in, ActBlock* out) {
  for (size_t b = 0; b < in / kChunk; ++b) {
    const float* xb = x + b * kChunk;
    const float d = activationScale(xb, kChunk);
    int32_t sums[2];
    roundChunk(xb, inverseScale(d), out[b].q, sums);
    out[b].d = d;
    out[b].sum[0] = static_cast<float>(sums[0]);
    out[b].sum[1] = static_cast<float>(sums[1]);
  }
}

void quantizeSuperBlocks(const float* x, size_t in, ActSuperBlock* out) {
  for (size_t b = 0; b < in / kActSuperBlock; ++b) {
    const float* xb = x + b * kActSuperBlock;
    const float d = activationScale(xb, kActSuperBlock);
    out[b].d = d;
    for (size_t c = 0; c < kActSuperBlock / kChunk; ++c) {
      int32_t sums[2];
      roundChunk(xb + kChunk * c, inverseScale(d), out[b].q + kChunk * c, sums);
      out[b].sum[2 * c] = static_cast<int16_t>(sums[0]);
      out[b].sum[2 * c + 1] = static_cast<int16_t>(sums[1]);
    }
  }
}

void expandRow(const DecodedRow& w, size_t in, float* out) {
  for (size_t i = 0; i < in; i += 2 * 8) {
    const __m256 scale = _mm256_broadcast_ss(w.scale + i / kGroup);
    const __m256 offset = _mm256_broadcast_ss(w.offset + i / kGroup);
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.q + i));
    for (size_t k = 0; k < 2; ++k) {
      const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(k ? _mm_srli_si128(q, 8) : q));
      // Multiply, then add: one rounding each, as gguf::dequantize does.
      _mm256_storeu_ps(out + i + 8 * k, _mm256_add_ps(_mm256_mul_ps(scale, v), offset));
    }
  }
}

void dotTile(const float* const* w, size_t rows, const float* x, size_t n, size_t in, float* y,
             size_t yStride) {
  using Tile = void (*)(const float* const*, const float*, size_t, float*, size_t);
  static constexpr Tile kTiles[kTileRows][kTileInputs] = {{tile<1, 1>, tile<1, 2>},
                                                          {tile<2, 1>, tile<2, 2>},
                                                          {tile<3, 1>, tile<3, 2>},
                                                          {tile<4, 1>, tile<4, 2>}};
  for (size_t t = 0; t < n; t += kTileInputs) {
    const size_t inputs = std::min(kTileInputs, n - t);
    kTiles[rows - 1][inputs - 1](w, x + t * in, in, y + t * yStride, yStride);
  }
}

float dotInt8(const DecodedRow& w, const ActBlock* x, size_t in) {
  __m256 acc = _mm256_setzero_ps();
  for (size_t b = 0; b < in / kChunk; ++b)
    acc = int8Step(load32(w.q + b * kChunk), x[b], w.scale + 2 * b, acc);
  return horizontalSum(acc);
}

void f16RowToFloat(const uint8_t* row, size_t n, float* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = half(row + 2 * i);
}

RowKernels rowKernels(gguf::TensorType type) {
  using gguf::TensorType;
  switch (type) {
    case TensorType::kQ8_0:
      return kernelsOf<Q8_0>();
    case TensorType::kQ4_0:
      return kernelsOf<Q4_0>();
    case TensorType::kQ4_1:
      return kernelsOf<Q4_1>();
    case TensorType::kQ5_0:
      return kernelsOf<Q5_0>();
    case TensorType::kQ5_1:
      return kernelsOf<Q5_1>();
    case TensorType::kQ4_K:
      return kernelsOf<Q4_K>();
    case TensorType::kQ5_K:
      return kernelsOf<Q5_K>();
    case TensorType::kQ6_K:
      return kernelsOf<Q6_K>();
    case TensorType::kIQ4_NL:
      return kernelsOf<IQ4_NL>();
    case TensorType::kIQ4_XS:
      return kernelsOf<IQ4_XS>();
    case TensorType::kMXFP4:
      return kernelsOf<MXFP4>();
    default:
      return {};
  }
}

}  // namespace kvscope::cpu::avx2
#endif
