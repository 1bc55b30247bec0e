#pragma once
// Vector math the AVX2 kernels share (KVSCOPE_CPU_AVX2 builds only): e^x
// for the attention softmax and tanh for the GELU gate.

#include "backend/cpu_features.h"

#if defined(KVSCOPE_CPU_AVX2)
#include <immintrin.h>

namespace kvscope::cpu {

// e^x for x <= 0: x = n ln2 + r, |r| <= ln2 / 2, e^r by its degree-7 Taylor
// polynomial (truncation < 0.347^8 / 8! = 5e-9), scaled by 2^n through the
// exponent bits; x < -87.3 (below the smallest normal) gives 0, as does -inf.
[[gnu::always_inline]] inline __m256 exp256(__m256 x) {
  const __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_LT_OQ);
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // ln 2 in two parts, the first exact in float, so n ln2 subtracts exactly.
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i scale =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(tiny, _mm256_mul_ps(p, _mm256_castsi256_ps(scale)));
}

// tanh(u) = sign(u) (1 - e) / (1 + e), e = e^(-2|u|) <= 1, so exp256's
// domain; absolute error ~3e-7 (exp256's relative error, and the rounding
// of 1 - e where e is near 1), which a GELU's 1 + tanh(u) keeps absolute.
[[gnu::always_inline]] inline __m256 tanh256(__m256 u) {
  const __m256 signBit = _mm256_set1_ps(-0.0f);
  const __m256 e = exp256(_mm256_mul_ps(_mm256_set1_ps(-2.0f), _mm256_andnot_ps(signBit, u)));
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 t = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
  return _mm256_or_ps(t, _mm256_and_ps(signBit, u));
}

}  // namespace kvscope::cpu

#endif
