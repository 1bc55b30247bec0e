#include "backend/cpu_kv_rows.h"

#include <algorithm>
#include <cstring>
#include <span>

#include "backend/cpu_features.h"
#include "core/float_convert.h"
#include "kv/code_packing.h"
#include "kv/scheme_turbo.h"

#if defined(KVSCOPE_CPU_AVX2)
#include <immintrin.h>
#endif

namespace kvscope::cpu {

#if defined(KVSCOPE_CPU_AVX2)
// One function per row format; each writes the row's dim values, 8 at a time.
struct RowKernels {
  static float half(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
  }
  static uint32_t load32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  static uint32_t load16(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  // Codes j = 0..7 of a packed word: (word >> (bits * j)) & mask.
  static __m256i unpack(uint32_t word, int bits) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i shifts = _mm256_mullo_epi32(lane, _mm256_set1_epi32(bits));
    return _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(word)), shifts),
                            _mm256_set1_epi32((1 << bits) - 1));
  }
  // Codes k..k+7 of a row's packed codes (layouts in kv_scheme.h).
  static __m256i codes(const KvRowDecoder& s, const uint8_t* row, uint32_t k) {
    const uint8_t* c = row + s.m_codesAt;
    switch (s.m_bits) {
      case 4:
        return unpack(load32(c + k / 2), 4);
      case 2:
        return unpack(load16(c + k / 4), 2);
      default: {  // 3: the low 2-bit plane, then the high bit plane
        const __m256i high = unpack(c[(s.m_dim + 3) / 4 + k / 8], 1);
        return _mm256_or_si256(unpack(load16(c + k / 4), 2), _mm256_slli_epi32(high, 2));
      }
    }
  }
  // table[idx] for a codebook of 2^bits <= 16 entries.
  static __m256 lookup(const KvRowDecoder& s, __m256i idx) {
#if defined(__AVX512VL__)
    if (s.m_bits == 4)  // one two-table permute picks among all 16 entries
      return _mm256_permutex2var_ps(_mm256_load_ps(s.m_table), idx, _mm256_load_ps(s.m_table + 8));
#endif
    const __m256 low = _mm256_permutevar8x32_ps(_mm256_load_ps(s.m_table), idx);
    if (s.m_bits < 4) return low;
    const __m256 high = _mm256_permutevar8x32_ps(_mm256_load_ps(s.m_table + 8), idx);
    return _mm256_blendv_ps(low, high, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
  }

  static void f16(const KvRowDecoder& s, const uint8_t* row, float* out) {
    for (uint32_t k = 0; k < s.m_dim; k += 8) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * k));
      _mm256_storeu_ps(out + k, _mm256_cvtph_ps(h));
    }
  }
  static void q8_0(const KvRowDecoder& s, const uint8_t* row, float* out) {
    for (uint32_t k = 0; k < s.m_dim; k += 8) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + s.m_codesAt + k));
      const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
      _mm256_storeu_ps(out + k, _mm256_mul_ps(v, _mm256_set1_ps(half(row + 2 * (k / 32)))));
    }
  }
  static void q4_0(const KvRowDecoder& s, const uint8_t* row, float* out) {
    for (uint32_t k = 0; k < s.m_dim; k += 8) {
      const __m256i q =
          _mm256_sub_epi32(unpack(load32(row + s.m_codesAt + k / 2), 4), _mm256_set1_epi32(8));
      _mm256_storeu_ps(
          out + k, _mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(half(row + 2 * (k / 32)))));
    }
  }
  static void fp8(const KvRowDecoder& s, const uint8_t* row, float* out) {
    for (uint32_t k = 0; k < s.m_dim; k += 8) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + s.m_codesAt + k));
      const __m256 v = _mm256_i32gather_ps(s.m_table, _mm256_cvtepu8_epi32(q), 4);
      _mm256_storeu_ps(out + k, _mm256_mul_ps(v, _mm256_set1_ps(ue8m0ToFloat(row[k / 32]))));
    }
  }
  static void affine4(const KvRowDecoder& s, const uint8_t* row, float* out) {
    const uint32_t nb = kv::blockCount(s.m_dim, kv::kKvBlock);
    for (uint32_t k = 0; k < s.m_dim; k += 8) {
      const __m256 q = _mm256_cvtepi32_ps(unpack(load32(row + s.m_codesAt + k / 2), 4));
      const __m256 scaled = _mm256_mul_ps(q, _mm256_set1_ps(half(row + 2 * (nb + k / 32))));
      _mm256_storeu_ps(out + k, _mm256_add_ps(_mm256_set1_ps(half(row + 2 * (k / 32))), scaled));
    }
  }
  static void turbo(const KvRowDecoder& s, const uint8_t* row, float* out) {
    for (uint32_t k = 0; k < s.m_dim; k += 8) {
      const __m256 gamma = _mm256_set1_ps(half(row + 2 * (k / s.m_scaleWidth)));
      _mm256_storeu_ps(out + k, _mm256_mul_ps(gamma, lookup(s, codes(s, row, k))));
    }
  }
};
#else
struct RowKernels {};
#endif

KvRowDecoder::KvRowDecoder(const kv::KvScheme& scheme, bool portable)
    : m_scheme(scheme), m_dim(scheme.dim()), m_rowBytes(scheme.rowBytes()) {
#if defined(KVSCOPE_CPU_AVX2)
  if (portable || m_dim % 8 != 0) return;
  const std::string_view name = scheme.name();
  m_codesAt = scheme.rowLayout().scaleBytes;
  m_scaleWidth = kv::kKvBlock;
  if (name == "f16") {
    m_kernel = RowKernels::f16;
  } else if (name == "q8_0") {
    m_kernel = RowKernels::q8_0;
  } else if (name == "q4_0") {
    m_kernel = RowKernels::q4_0;
  } else if (name == "affine4") {
    m_kernel = RowKernels::affine4;
  } else if (name == "fp8") {
    for (int c = 0; c < 256; ++c) m_table[c] = e4m3ToFloat(static_cast<uint8_t>(c));
    m_kernel = RowKernels::fp8;
  } else if (const auto* t = dynamic_cast<const kv::TurboScheme*>(&scheme)) {
    const std::span<const float> codebook = t->codebook();
    std::copy(codebook.begin(), codebook.end(), m_table);
    m_bits = t->bits();
    m_scaleWidth = t->grouped() ? kv::kTurboGroup : m_dim;
    m_kernel = RowKernels::turbo;
  }
#else
  (void)portable;
#endif
}

void KvRowDecoder::decode(const uint8_t* rows, uint32_t count, float* out, size_t stride) const {
  for (uint32_t r = 0; r < count; ++r) {
    const uint8_t* row = rows + size_t{r} * m_rowBytes;
    if (m_kernel) {
      m_kernel(*this, row, out + r * stride);
    } else {
      m_scheme.decodeRotated({row, m_rowBytes}, {out + r * stride, m_dim});
    }
  }
}

}  // namespace kvscope::cpu
