#include "backend/cpu_attention_tile.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu_features.h"
#include "backend/cpu_quant_avx2.h"
#include "backend/cpu_simd_math.h"
#include "core/float_convert.h"
#include "kv/code_packing.h"

#if defined(KVSCOPE_CPU_AVX2)
#include <immintrin.h>
#endif

namespace kvscope::cpu::tile {

namespace {

// ---------------------------------------------------------------- portable

void scoresPortable(const float* q, uint32_t nq, const float* k, uint32_t rows, size_t stride,
                    float* out) {
  for (uint32_t r = 0; r < rows; ++r) {
    for (uint32_t i = 0; i < kLanes; ++i) {
      float sum = 0.0f;
      for (size_t c = 0; i < nq && c < stride; ++c) sum += q[i * stride + c] * k[r * stride + c];
      out[r * kLanes + i] = sum;
    }
  }
}

void scoresQ8Portable(const ActBlock* q, uint32_t nq, const uint8_t* rows, uint32_t rowBytes,
                      uint32_t count, uint32_t dim, float* out) {
  const uint32_t nb = dim / kActBlock;
  for (uint32_t r = 0; r < count; ++r) {
    const uint8_t* row = rows + size_t{r} * rowBytes;
    const auto* codes = reinterpret_cast<const int8_t*>(row + 2 * nb);
    for (uint32_t i = 0; i < kLanes; ++i) {
      float sum = 0.0f;
      for (uint32_t b = 0; i < nq && b < nb; ++b) {
        const ActBlock& a = q[i * nb + b];
        int32_t dot = 0;
        for (uint32_t k = 0; k < kActBlock; ++k) dot += int32_t{codes[b * kActBlock + k]} * a.q[k];
        sum += static_cast<float>(dot) * (kv::loadHalf({row, rowBytes}, b) * a.d);
      }
      out[r * kLanes + i] = sum;
    }
  }
}

void maskMaxPortable(float* scores, uint32_t rows, uint32_t first, const uint32_t* from,
                     const uint32_t* last, float* max) {
  for (uint32_t r = 0; r < rows; ++r) {
    for (uint32_t i = 0; i < kLanes; ++i) {
      float& x = scores[r * kLanes + i];
      if (first + r > last[i] || first + r < from[i]) x = -INFINITY;
      max[i] = std::max(max[i], x);
    }
  }
}

void expSumPortable(float* scores, uint32_t rows, const float* max, float* sum) {
  for (uint32_t r = 0; r < rows; ++r) {
    for (uint32_t i = 0; i < kLanes; ++i) {
      float& x = scores[r * kLanes + i];
      x = max[i] == -INFINITY ? 0.0f : std::exp(x - max[i]);
      sum[i] += x;
    }
  }
}

void scalePortable(float* w, uint32_t rows, const float* factor, bool toF16) {
  for (uint32_t r = 0; r < rows; ++r) {
    for (uint32_t i = 0; i < kLanes; ++i) {
      float& x = w[r * kLanes + i];
      x *= factor[i];
      if (toF16) x = roundToFp16(x);
    }
  }
}

void accumulatePortable(const float* w, uint32_t nq, const float* v, uint32_t rows, size_t stride,
                        float* acc) {
  for (uint32_t i = 0; i < nq; ++i)
    for (uint32_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < stride; ++c)
        acc[i * stride + c] += w[r * kLanes + i] * v[r * stride + c];
}

#if defined(KVSCOPE_CPU_AVX2)
// -------------------------------------------------------------------- AVX2

// The 8 horizontal sums of a[0..7], in lane order.
[[gnu::always_inline]] inline __m256 sums8(const __m256* a) {
  const __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// With 32 vector registers (AVX-512VL), two rows (scores) or two 8-value
// chunks (accumulate) at a time: 16 accumulators, and each query or weight
// load feeds two FMAs, where one at a time the loads bound the speed.
#if defined(__AVX512VL__)
constexpr uint32_t kPair = 2;
#else
constexpr uint32_t kPair = 1;
#endif

template <uint32_t NQ>
void scoresAvx(const float* q, const float* k, uint32_t rows, size_t stride, float* out) {
  uint32_t r = 0;
  for (; r + kPair <= rows; r += kPair) {
    __m256 acc[kPair][kLanes];
#pragma GCC unroll 8
    for (uint32_t p = 0; p < kPair; ++p)
#pragma GCC unroll 8
      for (uint32_t i = 0; i < kLanes; ++i) acc[p][i] = _mm256_setzero_ps();
    for (size_t c = 0; c < stride; c += 8) {
      __m256 kv[kPair];
#pragma GCC unroll 8
      for (uint32_t p = 0; p < kPair; ++p) kv[p] = _mm256_loadu_ps(k + (r + p) * stride + c);
#pragma GCC unroll 8
      for (uint32_t i = 0; i < NQ; ++i) {
        const __m256 qv = _mm256_loadu_ps(q + i * stride + c);
#pragma GCC unroll 8
        for (uint32_t p = 0; p < kPair; ++p) acc[p][i] = _mm256_fmadd_ps(qv, kv[p], acc[p][i]);
      }
    }
#pragma GCC unroll 8
    for (uint32_t p = 0; p < kPair; ++p) _mm256_storeu_ps(out + (r + p) * kLanes, sums8(acc[p]));
  }
  for (; r < rows; ++r) {
    __m256 acc[kLanes];
#pragma GCC unroll 8
    for (uint32_t i = 0; i < kLanes; ++i) acc[i] = _mm256_setzero_ps();
    for (size_t c = 0; c < stride; c += 8) {
      const __m256 kv = _mm256_loadu_ps(k + r * stride + c);
#pragma GCC unroll 8
      for (uint32_t i = 0; i < NQ; ++i)
        acc[i] = _mm256_fmadd_ps(_mm256_loadu_ps(q + i * stride + c), kv, acc[i]);
    }
    _mm256_storeu_ps(out + r * kLanes, sums8(acc));
  }
}

template <uint32_t NQ>
void accumulateAvx(const float* w, const float* v, uint32_t rows, size_t stride, float* acc) {
  size_t c = 0;
  for (; c + 8 * kPair <= stride; c += 8 * kPair) {
    __m256 a[kPair][NQ];
#pragma GCC unroll 8
    for (uint32_t p = 0; p < kPair; ++p)
#pragma GCC unroll 8
      for (uint32_t i = 0; i < NQ; ++i) a[p][i] = _mm256_loadu_ps(acc + i * stride + c + 8 * p);
    for (uint32_t r = 0; r < rows; ++r) {
      __m256 vr[kPair];
#pragma GCC unroll 8
      for (uint32_t p = 0; p < kPair; ++p) vr[p] = _mm256_loadu_ps(v + r * stride + c + 8 * p);
#pragma GCC unroll 8
      for (uint32_t i = 0; i < NQ; ++i) {
        const __m256 wi = _mm256_broadcast_ss(w + r * kLanes + i);
#pragma GCC unroll 8
        for (uint32_t p = 0; p < kPair; ++p) a[p][i] = _mm256_fmadd_ps(wi, vr[p], a[p][i]);
      }
    }
#pragma GCC unroll 8
    for (uint32_t p = 0; p < kPair; ++p)
#pragma GCC unroll 8
      for (uint32_t i = 0; i < NQ; ++i) _mm256_storeu_ps(acc + i * stride + c + 8 * p, a[p][i]);
  }
  for (; c < stride; c += 8) {
    __m256 a[NQ];
#pragma GCC unroll 8
    for (uint32_t i = 0; i < NQ; ++i) a[i] = _mm256_loadu_ps(acc + i * stride + c);
    for (uint32_t r = 0; r < rows; ++r) {
      const __m256 vr = _mm256_loadu_ps(v + r * stride + c);
#pragma GCC unroll 8
      for (uint32_t i = 0; i < NQ; ++i)
        a[i] = _mm256_fmadd_ps(_mm256_broadcast_ss(w + r * kLanes + i), vr, a[i]);
    }
#pragma GCC unroll 8
    for (uint32_t i = 0; i < NQ; ++i) _mm256_storeu_ps(acc + i * stride + c, a[i]);
  }
}

// Per row and lane, one float vector of per-block partial sums; maddubs and
// dpbusd take one unsigned operand, so the key's sign moves onto the query.
template <uint32_t NQ>
void scoresQ8Avx(const ActBlock* q, const uint8_t* rows, uint32_t rowBytes, uint32_t count,
                 uint32_t dim, float* out) {
  const uint32_t nb = dim / kActBlock;
  for (uint32_t r = 0; r < count; ++r) {
    const uint8_t* row = rows + size_t{r} * rowBytes;
    __m256 acc[kLanes];
#pragma GCC unroll 8
    for (uint32_t i = 0; i < kLanes; ++i) acc[i] = _mm256_setzero_ps();
    for (uint32_t b = 0; b < nb; ++b) {
      uint16_t h;
      std::memcpy(&h, row + 2 * b, 2);
      const __m256 kScale = _mm256_set1_ps(_cvtsh_ss(h));
      const __m256i k = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * nb + 32 * b));
      const __m256i absK = _mm256_sign_epi8(k, k);
#pragma GCC unroll 8
      for (uint32_t i = 0; i < NQ; ++i) {
        const ActBlock& a = q[i * nb + b];
        const __m256i qv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q));
        const __m256 sums = _mm256_cvtepi32_ps(avx2::int8Sums(absK, _mm256_sign_epi8(qv, k)));
        acc[i] = _mm256_fmadd_ps(sums, _mm256_mul_ps(kScale, _mm256_broadcast_ss(&a.d)), acc[i]);
      }
    }
    _mm256_storeu_ps(out + r * kLanes, sums8(acc));
  }
}

template <template <uint32_t> class F, class... Args>
void byLanes(uint32_t nq, Args... args) {
  switch (nq) {
    case 1:
      return F<1>::run(args...);
    case 2:
      return F<2>::run(args...);
    case 3:
      return F<3>::run(args...);
    case 4:
      return F<4>::run(args...);
    case 5:
      return F<5>::run(args...);
    case 6:
      return F<6>::run(args...);
    case 7:
      return F<7>::run(args...);
    default:
      return F<8>::run(args...);
  }
}
template <uint32_t NQ>
struct Scores {
  static void run(const float* q, const float* k, uint32_t rows, size_t stride, float* out) {
    scoresAvx<NQ>(q, k, rows, stride, out);
  }
};
template <uint32_t NQ>
struct ScoresQ8 {
  static void run(const ActBlock* q, const uint8_t* rows, uint32_t rowBytes, uint32_t count,
                  uint32_t dim, float* out) {
    scoresQ8Avx<NQ>(q, rows, rowBytes, count, dim, out);
  }
};
template <uint32_t NQ>
struct Accumulate {
  static void run(const float* w, const float* v, uint32_t rows, size_t stride, float* acc) {
    accumulateAvx<NQ>(w, v, rows, stride, acc);
  }
};

void maskMaxAvx(float* scores, uint32_t rows, uint32_t first, const uint32_t* from,
                const uint32_t* last, float* max) {
  const __m256i lastPos = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(last));
  const __m256i fromPos = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from));
  const __m256 negInf = _mm256_set1_ps(-INFINITY);
  __m256 m = _mm256_loadu_ps(max);
  if (first + rows - 1 <= *std::min_element(last, last + kLanes) &&
      first >= *std::max_element(from, from + kLanes)) {
    // Every row visible to every lane (decode, and prefill away from the
    // diagonal and the window's start): only the max.
    for (uint32_t r = 0; r < rows; ++r) m = _mm256_max_ps(m, _mm256_loadu_ps(scores + r * kLanes));
    _mm256_storeu_ps(max, m);
    return;
  }
  for (uint32_t r = 0; r < rows; ++r) {
    // Positions stay below 2^31, so the signed compare is exact.
    const __m256i pos = _mm256_set1_epi32(static_cast<int>(first + r));
    const __m256i masked =
        _mm256_or_si256(_mm256_cmpgt_epi32(pos, lastPos), _mm256_cmpgt_epi32(fromPos, pos));
    const __m256 x =
        _mm256_blendv_ps(_mm256_loadu_ps(scores + r * kLanes), negInf, _mm256_castsi256_ps(masked));
    _mm256_storeu_ps(scores + r * kLanes, x);
    m = _mm256_max_ps(m, x);
  }
  _mm256_storeu_ps(max, m);
}

void expSumAvx(float* scores, uint32_t rows, const float* max, float* sum) {
  const __m256 m = _mm256_loadu_ps(max);
  // A lane with nothing visible subtracts 0 from its -inf scores: exp gives 0.
  const __m256 ref = _mm256_blendv_ps(m, _mm256_setzero_ps(),
                                      _mm256_cmp_ps(m, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ));
  __m256 s = _mm256_loadu_ps(sum);
  for (uint32_t r = 0; r < rows; ++r) {
    const __m256 p = exp256(_mm256_sub_ps(_mm256_loadu_ps(scores + r * kLanes), ref));
    _mm256_storeu_ps(scores + r * kLanes, p);
    s = _mm256_add_ps(s, p);
  }
  _mm256_storeu_ps(sum, s);
}

void scaleAvx(float* w, uint32_t rows, const float* factor, bool toF16) {
  const __m256 f = _mm256_loadu_ps(factor);
  for (uint32_t r = 0; r < rows; ++r) {
    __m256 x = _mm256_mul_ps(_mm256_loadu_ps(w + r * kLanes), f);
    if (toF16) x = _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    _mm256_storeu_ps(w + r * kLanes, x);
  }
}
#endif

}  // namespace

void scores(const float* q, uint32_t nq, const float* k, uint32_t rows, size_t stride, float* out,
            bool portable) {
#if defined(KVSCOPE_CPU_AVX2)
  if (!portable && stride % 8 == 0) return byLanes<Scores>(nq, q, k, rows, stride, out);
#endif
  (void)portable;
  scoresPortable(q, nq, k, rows, stride, out);
}

void scoresQ8(const ActBlock* q, uint32_t nq, const uint8_t* rows, uint32_t rowBytes,
              uint32_t count, uint32_t dim, float* scores, bool portable) {
#if defined(KVSCOPE_CPU_AVX2)
  if (!portable) return byLanes<ScoresQ8>(nq, q, rows, rowBytes, count, dim, scores);
#endif
  (void)portable;
  scoresQ8Portable(q, nq, rows, rowBytes, count, dim, scores);
}

void maskMax(float* scores, uint32_t rows, uint32_t first, const uint32_t* from,
             const uint32_t* last, float* max, bool portable) {
#if defined(KVSCOPE_CPU_AVX2)
  if (!portable) return maskMaxAvx(scores, rows, first, from, last, max);
#endif
  (void)portable;
  maskMaxPortable(scores, rows, first, from, last, max);
}

void expSum(float* scores, uint32_t rows, const float* max, float* sum, bool portable) {
#if defined(KVSCOPE_CPU_AVX2)
  if (!portable) return expSumAvx(scores, rows, max, sum);
#endif
  (void)portable;
  expSumPortable(scores, rows, max, sum);
}

void scale(float* weights, uint32_t rows, const float* factor, bool toF16, bool portable) {
#if defined(KVSCOPE_CPU_AVX2)
  if (!portable) return scaleAvx(weights, rows, factor, toF16);
#endif
  (void)portable;
  scalePortable(weights, rows, factor, toF16);
}

void accumulate(const float* weights, uint32_t nq, const float* v, uint32_t rows, size_t stride,
                float* acc, bool portable) {
#if defined(KVSCOPE_CPU_AVX2)
  if (!portable && stride % 8 == 0) return byLanes<Accumulate>(nq, weights, v, rows, stride, acc);
#endif
  (void)portable;
  accumulatePortable(weights, nq, v, rows, stride, acc);
}

}  // namespace kvscope::cpu::tile
