#pragma once
// The code of a value under a scalar codebook: the number of decision
// boundaries (midpoints between neighbouring centroids) strictly below it,
// i.e. the nearest centroid, the lower one on a tie; a NaN value gets 0.
// One rule for the turbo schemes' encoders (scheme_turbo.cpp) and, in AVX2,
// for 8 values at once in the turbo*b scale search; kv_encode.comp computes
// the same on the device.
//
// Up to 15 midpoints (4-bit codes) the code is a branch-free count. Above,
// the scalar form bisects; the AVX2 form reads the count below the edge of
// the value's bin in a table of equal bins (each under half the closest two
// midpoints' gap wide, so the count is within one of the answer) and corrects
// it with one compare each way: two rounds of gathers (the bin's count, then
// both neighbouring midpoints at once) where a bisection needs six.

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace kvscope::kv {

class MidpointSearch {
 public:
  MidpointSearch() = default;
  // Strictly ascending midpoints, at most 63.
  explicit MidpointSearch(std::vector<float> midpoints);

  std::span<const float> midpoints() const { return m_midpoints; }
  uint8_t code(float u) const {
    if (m_midpoints.size() > 15) {
      return static_cast<uint8_t>(std::lower_bound(m_midpoints.begin(), m_midpoints.end(), u) -
                                  m_midpoints.begin());
    }
    uint8_t code = 0;
    for (const float m : m_midpoints) code += m < u ? 1 : 0;
    return code;
  }

#if defined(__AVX2__)
  // code() of each lane of u.
  [[gnu::always_inline]] __m256i codes8(__m256 u) const {
    const auto count = static_cast<int>(m_midpoints.size());
    if (count <= 15) {
      __m256i code = _mm256_setzero_si256();
      for (const float m : m_midpoints) {
        const __m256 below = _mm256_cmp_ps(_mm256_set1_ps(m), u, _CMP_LT_OQ);
        code = _mm256_sub_epi32(code, _mm256_castps_si256(below));  // -1 per midpoint below
      }
      return code;
    }
    // max before min: a NaN position lands in bin 0 (max_ps returns its
    // second operand on NaN), an infinite one in the first or last bin.
    const __m256 at =
        _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(_mm256_add_ps(u, _mm256_set1_ps(m_binOrigin)),
                                                  _mm256_set1_ps(m_binsPerUnit)),
                                    _mm256_setzero_ps()),
                      _mm256_set1_ps(static_cast<float>(m_binBelow.size() - 1)));
    const __m256i c = _mm256_i32gather_epi32(m_binBelow.data(), _mm256_cvttps_epi32(at), 4);
    const __m256i zero = _mm256_setzero_si256();
    const __m256 next = _mm256_i32gather_ps(m_midpoints.data(),
                                            _mm256_min_epi32(c, _mm256_set1_epi32(count - 1)), 4);
    const __m256 previous = _mm256_i32gather_ps(
        m_midpoints.data(), _mm256_max_epi32(_mm256_sub_epi32(c, _mm256_set1_epi32(1)), zero), 4);
    // All-ones (-1) masks: up when the next midpoint is below u, down when
    // the previous one is not.
    const __m256i up = _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(count), c),
                                        _mm256_castps_si256(_mm256_cmp_ps(next, u, _CMP_LT_OQ)));
    const __m256i down = _mm256_and_si256(
        _mm256_cmpgt_epi32(c, zero), _mm256_castps_si256(_mm256_cmp_ps(previous, u, _CMP_GE_OQ)));
    return _mm256_add_epi32(_mm256_sub_epi32(c, up), down);
  }
#endif

 private:
  std::vector<float> m_midpoints;
  // Above 15 midpoints: u's bin is (u + m_binOrigin) * m_binsPerUnit,
  // clamped; m_binBelow[bin] counts the midpoints below the bin's left edge.
  float m_binOrigin = 0.0f, m_binsPerUnit = 0.0f;
  std::vector<int32_t> m_binBelow;
};

}  // namespace kvscope::kv
