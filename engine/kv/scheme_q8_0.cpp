#include "kv/scheme_q8_0.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstring>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "core/float_convert.h"
#include "kv/block_scale_search.h"
#include "kv/code_packing.h"

namespace kvscope::kv {

namespace {
RowLayout q8Layout(uint32_t dim) {
  const uint32_t scales = 2 * blockCount(dim, kKvBlock);
  return {dim, scales, padTo4(scales + dim)};
}

// The searched rule's code of x under scale s: std::round, clamped; 0 when
// s is not positive (an all-zero block, or one whose scale fp16 rounds to 0).
float searchedCode(float x, float s) {
  return s > 0.0f ? std::clamp(std::round(x / s), -127.0f, 127.0f) : 0.0f;
}

// The squared error of x coded under scale s, summed in order.
float searchedError(std::span<const float> x, float s) {
  float e = 0.0f;
  for (float v : x) {
    const float r = v - s * searchedCode(v, s);
    e += r * r;
  }
  return e;
}

#if defined(__AVX2__)
// The errors of 8 scales at once (all > 0), lane c in searchedError's order
// (multiply then add: the build has -ffp-contract=off), so bit for bit the
// scalar sums. std::round is trunc plus one away from zero when the dropped
// fraction is >= 0.5 (exact: x - trunc(x) is).
void searchedErrors8(std::span<const float> x, const float* scales, float* errors) {
  const __m256 s = _mm256_loadu_ps(scales);
  const __m256 signMask = _mm256_set1_ps(-0.0f), half = _mm256_set1_ps(0.5f);
  const __m256 one = _mm256_set1_ps(1.0f), lo = _mm256_set1_ps(-127.0f),
               hi = _mm256_set1_ps(127.0f);
  __m256 e = _mm256_setzero_ps();
  for (float v : x) {
    const __m256 xv = _mm256_set1_ps(v), u = _mm256_div_ps(xv, s);
    const __m256 a = _mm256_andnot_ps(signMask, u);
    const __m256 t = _mm256_round_ps(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 up = _mm256_and_ps(_mm256_cmp_ps(_mm256_sub_ps(a, t), half, _CMP_GE_OQ), one);
    const __m256 r = _mm256_or_ps(_mm256_add_ps(t, up), _mm256_and_ps(signMask, u));
    const __m256 q = _mm256_min_ps(_mm256_max_ps(r, lo), hi);
    const __m256 d = _mm256_sub_ps(xv, _mm256_mul_ps(s, q));
    e = _mm256_add_ps(e, _mm256_mul_ps(d, d));
  }
  _mm256_storeu_ps(errors, e);
}
#endif

// The searched rule's scale of one block (scheme_q8_0.h).
float searchedScale(std::span<const float> x) {
  float amax = 0.0f;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  constexpr size_t kSteps = std::size(kQ8BlockSteps);
  std::array<float, kSteps> scales, errors;
  for (size_t t = 0; t < kSteps; ++t) scales[t] = roundToFp16(amax * kQ8BlockSteps[t] / 127.0f);
#if defined(__AVX2__)
  if (scales[0] > 0.0f) {
    static_assert(kSteps % 8 == 0);
    for (size_t t = 0; t < kSteps; t += 8) searchedErrors8(x, &scales[t], &errors[t]);
  } else {
    for (size_t t = 0; t < kSteps; ++t) errors[t] = searchedError(x, scales[t]);
  }
#else
  for (size_t t = 0; t < kSteps; ++t) errors[t] = searchedError(x, scales[t]);
#endif
  const size_t chosen = firstLeastError(errors);
  float best = scales[chosen];
  float num = 0.0f, den = 0.0f;
  for (float v : x) {
    const float q = searchedCode(v, best);
    num += v * q;
    den += q * q;
  }
  if (den > 0.0f) {
    const float s = roundToFp16(num / den);
    if (searchedError(x, s) < errors[chosen]) best = s;
  }
  return best;
}
}  // namespace

Q8_0Scheme::Q8_0Scheme(const SchemeParams& params, Q8Scale scale)
    : KvScheme(params, q8Layout(params.dim)), m_scale(scale) {}

void Q8_0Scheme::encode(std::span<const float> row, std::span<uint8_t> out) const {
  assert(row.size() == dim() && out.size() >= rowBytes());
  const uint32_t nb = blockCount(dim(), kKvBlock), codes = rowLayout().scaleBytes;
  for (uint32_t b = 0; b < nb; ++b) {
    const uint32_t begin = b * kKvBlock, end = std::min(dim(), begin + kKvBlock);
    if (m_scale == Q8Scale::kSearched) {
      const float s = searchedScale(row.subspan(begin, end - begin));
      storeHalf(out, b, s);
      for (uint32_t i = begin; i < end; ++i) {
        out[codes + i] = static_cast<uint8_t>(static_cast<int8_t>(searchedCode(row[i], s)));
      }
      continue;
    }
    float amax = 0.0f;
    for (uint32_t i = begin; i < end; ++i) amax = std::max(amax, std::fabs(row[i]));
    const float s = amax / 127.0f;
    storeHalf(out, b, s);
    for (uint32_t i = begin; i < end; ++i) {
      const float q = s != 0.0f ? std::round(row[i] / s) : 0.0f;
      out[codes + i] = static_cast<uint8_t>(static_cast<int8_t>(q));
    }
  }
  std::memset(out.data() + codes + dim(), 0, rowLayout().paddingBytes);
}

void Q8_0Scheme::decode(std::span<const uint8_t> in, std::span<float> row) const {
  assert(row.size() == dim() && in.size() >= rowBytes());
  const uint32_t codes = rowLayout().scaleBytes;
  for (uint32_t i = 0; i < dim(); ++i) {
    row[i] = static_cast<float>(static_cast<int8_t>(in[codes + i])) * loadHalf(in, i / kKvBlock);
  }
}

}  // namespace kvscope::kv
