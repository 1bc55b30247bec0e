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
// One function per row format, called once per run of rows so that its
// constants stay in registers; each writes a row's dim values 8 at a time.
struct RowKernels {
  static float half(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
  }
  static __m256 halfVector(const uint8_t* p) { return _mm256_set1_ps(half(p)); }
  static __m256i broadcast16(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return _mm256_set1_epi32(v);
  }
  // Codes 0..7 of 8 packed nibbles (4 bytes, code 2i low): each byte twice,
  // shifted right by 0 or 4.
  static __m256i nibbles(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    const __m256i w = _mm256_set1_epi32(static_cast<int>(v));
    const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    return _mm256_and_si256(_mm256_srlv_epi32(w, shifts), _mm256_set1_epi32(15));
  }
  // Codes k..k+7 of a turbo row's codes c (layouts in code_packing.h).
  template <uint32_t Bits>
  static __m256i codes(const uint8_t* c, uint32_t dim, uint32_t k) {
    if constexpr (Bits == 4) return nibbles(c + k / 2);
    if constexpr (Bits >= 5) {
      // The low nibbles, then the high plane: 1 bit (5) or 2 bits (6) per
      // code from byte k / 8 or 16 bits from byte k / 4 of the plane.
      const uint8_t* high = c + (dim + 1) / 2;
      const __m256i hi =
          Bits == 5
              ? _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(high[k / 8]),
                                                   _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
                                 _mm256_set1_epi32(1))
              : _mm256_and_si256(_mm256_srlv_epi32(broadcast16(high + k / 4),
                                                   _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                                 _mm256_set1_epi32(3));
      return _mm256_or_si256(nibbles(c + k / 2), _mm256_slli_epi32(hi, 4));
    }
    const __m256i twoBit = _mm256_and_si256(
        _mm256_srlv_epi32(broadcast16(c + k / 4), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
        _mm256_set1_epi32(3));
    if constexpr (Bits == 2) return twoBit;
    // 3: the low 2-bit plane, then the high bit plane, one byte per 8 codes
    const __m256i high =
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(c[(dim + 3) / 4 + k / 8]),
                                           _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
                         _mm256_set1_epi32(1));
    return _mm256_or_si256(twoBit, _mm256_slli_epi32(high, 2));
  }
  // table[idx] for a codebook of 2^Bits entries, held in t0 (entries 0..7)
  // and t1 (8..15).
  template <uint32_t Bits>
  static __m256 lookup(__m256 t0, __m256 t1, __m256i idx) {
    if constexpr (Bits < 4) {
      return _mm256_permutevar8x32_ps(t0, idx);
    } else {
#if defined(__AVX512VL__)
      return _mm256_permutex2var_ps(t0, idx, t1);
#else
      const __m256 low = _mm256_permutevar8x32_ps(t0, idx);
      const __m256 high = _mm256_permutevar8x32_ps(t1, idx);
      return _mm256_blendv_ps(low, high, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
#endif
    }
  }

  // Calls row(row bytes, output row) for each row of a run.
  template <class F>
  static void forRows(const KvRowDecoder& s, const uint8_t* rows, uint32_t count, float* out,
                      size_t stride, F row) {
    for (uint32_t r = 0; r < count; ++r) row(rows + size_t{r} * s.m_rowBytes, out + r * stride);
  }
  // Calls block(row bytes, output row, block b, its values [k0, k1)) for each
  // scale block of each row, so that a block's scales are read once.
  template <class F>
  static void forBlocks(const KvRowDecoder& s, const uint8_t* rows, uint32_t count, float* out,
                        size_t stride, F block) {
    forRows(s, rows, count, out, stride, [&](const uint8_t* row, float* o) {
      for (uint32_t b = 0, k0 = 0; k0 < s.m_dim; ++b, k0 += kv::kKvBlock)
        block(row, o, b, k0, std::min(s.m_dim, k0 + kv::kKvBlock));
    });
  }

  static void f16(const KvRowDecoder& s, const uint8_t* rows, uint32_t count, float* out,
                  size_t stride) {
    forRows(s, rows, count, out, stride, [&](const uint8_t* row, float* o) {
      for (uint32_t k = 0; k < s.m_dim; k += 8)
        _mm256_storeu_ps(
            o + k, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * k))));
    });
  }
  // Formats whose value is code * the block's f16 scale; codes(c, k) gives
  // the int32 codes k..k+7 of a row's codes c.
  template <class Codes>
  static void scaled(const KvRowDecoder& s, const uint8_t* rows, uint32_t count, float* out,
                     size_t stride, Codes codes) {
    forBlocks(s, rows, count, out, stride,
              [&](const uint8_t* row, float* o, uint32_t b, uint32_t k0, uint32_t k1) {
                const __m256 scale = halfVector(row + 2 * b);
                for (uint32_t k = k0; k < k1; k += 8) {
                  const __m256 q = _mm256_cvtepi32_ps(codes(row + s.m_codesAt, k));
                  _mm256_storeu_ps(o + k, _mm256_mul_ps(q, scale));
                }
              });
  }
  static void q8_0(const KvRowDecoder& s, const uint8_t* rows, uint32_t count, float* out,
                   size_t stride) {
    scaled(s, rows, count, out, stride, [](const uint8_t* c, uint32_t k) {
      return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(c + k)));
    });
  }
  static void q4_0(const KvRowDecoder& s, const uint8_t* rows, uint32_t count, float* out,
                   size_t stride) {
    scaled(s, rows, count, out, stride, [](const uint8_t* c, uint32_t k) {
      return _mm256_sub_epi32(nibbles(c + k / 2), _mm256_set1_epi32(8));
    });
  }
  // e4m3 as float32 bits: magnitude bits shifted left by 20, sign to bit 31.
  // Subnormals of both formats line up, and the float is the e4m3 value times
  // 2^-120 exactly (biases 127 and 7), so a multiply by 2^120 is exact. An
  // e4m3 subnormal is a float32 subnormal before that multiply: exact as long
  // as denormals-are-zero stays off (kvscope never sets it). 0x7f/0xff are
  // e4m3's NaN, signed like e4m3ToFloat's.
  static void fp8(const KvRowDecoder& s, const uint8_t* rows, uint32_t count, float* out,
                  size_t stride) {
    const __m256i magnitude = _mm256_set1_epi32(0x7f), sign = _mm256_set1_epi32(INT32_MIN);
    const __m256i quietNan = _mm256_set1_epi32(0x7fc00000);
    const __m256 unbias = _mm256_set1_ps(0x1p120f);
    forBlocks(s, rows, count, out, stride,
              [&](const uint8_t* row, float* o, uint32_t b, uint32_t k0, uint32_t k1) {
                const __m256 scale = _mm256_set1_ps(ue8m0ToFloat(row[b]));
                for (uint32_t k = k0; k < k1; k += 8) {
                  const __m256i x = _mm256_cvtepu8_epi32(
                      _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + s.m_codesAt + k)));
                  const __m256i m = _mm256_and_si256(x, magnitude);
                  const __m256i signBit = _mm256_and_si256(_mm256_slli_epi32(x, 24), sign);
                  __m256i bits = _mm256_or_si256(_mm256_slli_epi32(m, 20), signBit);
                  bits = _mm256_blendv_epi8(bits, _mm256_or_si256(quietNan, signBit),
                                            _mm256_cmpeq_epi32(m, magnitude));
                  const __m256 v = _mm256_mul_ps(_mm256_castsi256_ps(bits), unbias);
                  _mm256_storeu_ps(o + k, _mm256_mul_ps(v, scale));
                }
              });
  }
  static void affine4(const KvRowDecoder& s, const uint8_t* rows, uint32_t count, float* out,
                      size_t stride) {
    const uint32_t nb = kv::blockCount(s.m_dim, kv::kKvBlock);
    forBlocks(s, rows, count, out, stride,
              [&](const uint8_t* row, float* o, uint32_t b, uint32_t k0, uint32_t k1) {
                const __m256 min = halfVector(row + 2 * b), step = halfVector(row + 2 * (nb + b));
                for (uint32_t k = k0; k < k1; k += 8) {
                  const __m256 q = _mm256_cvtepi32_ps(nibbles(row + s.m_codesAt + k / 2));
                  _mm256_storeu_ps(o + k, _mm256_add_ps(min, _mm256_mul_ps(q, step)));
                }
              });
  }
  // One scale per row, per kTurboGroup or per kKvBlock values (Scale).
  template <uint32_t Bits, kv::TurboScale Scale>
  static void turbo(const KvRowDecoder& s, const uint8_t* rows, uint32_t count, float* out,
                    size_t stride) {
    const __m256 t0 = _mm256_load_ps(s.m_table), t1 = _mm256_load_ps(s.m_table + 8);
    forRows(s, rows, count, out, stride, [&](const uint8_t* row, float* o) {
      const uint8_t* c = row + s.m_codesAt;
      __m256 gamma = halfVector(row);
      for (uint32_t k = 0; k < s.m_dim; k += 8) {
        if constexpr (Scale == kv::TurboScale::kGroup)
          gamma = halfVector(row + 2 * (k / kv::kTurboGroup));
        if constexpr (Scale == kv::TurboScale::kBlock)
          gamma = halfVector(row + 2 * (k / kv::kKvBlock));
        const __m256i idx = codes<Bits>(c, s.m_dim, k);
        __m256 centroids;
        if constexpr (Bits >= 5) {
          centroids = _mm256_i32gather_ps(s.m_table, idx, 4);  // 32 or 64 entries
        } else {
          centroids = lookup<Bits>(t0, t1, idx);
        }
        _mm256_storeu_ps(o + k, _mm256_mul_ps(gamma, centroids));
      }
    });
  }
  template <kv::TurboScale Scale>
  static KvRowDecoder::Kernel turboOf(uint32_t bits) {
    switch (bits) {
      case 2:
        return turbo<2, Scale>;
      case 3:
        return turbo<3, Scale>;
      case 5:
        return turbo<5, Scale>;
      case 6:
        return turbo<6, Scale>;
      default:
        return turbo<4, Scale>;
    }
  }
  static KvRowDecoder::Kernel turboOf(kv::TurboScale scale, uint32_t bits) {
    switch (scale) {
      case kv::TurboScale::kGroup:
        return turboOf<kv::TurboScale::kGroup>(bits);
      case kv::TurboScale::kBlock:
        return turboOf<kv::TurboScale::kBlock>(bits);
      default:
        return turboOf<kv::TurboScale::kRow>(bits);
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
  m_codesAt = scheme.rowLayout().scaleBytes;
  switch (scheme.rowCode()) {
    case kv::RowCode::kF16:
      m_kernel = RowKernels::f16;
      break;
    case kv::RowCode::kQ8_0:
      m_kernel = RowKernels::q8_0;
      break;
    case kv::RowCode::kQ4_0:
      m_kernel = RowKernels::q4_0;
      break;
    case kv::RowCode::kAffine4:
      m_kernel = RowKernels::affine4;
      break;
    case kv::RowCode::kFp8:
      m_kernel = RowKernels::fp8;
      break;
    case kv::RowCode::kTurbo: {
      const auto& t = static_cast<const kv::TurboScheme&>(scheme);
      const std::span<const float> codebook = t.codebook();
      if (t.bits() < 2 || t.bits() > 6 || codebook.size() > std::size(m_table)) return;
      std::copy(codebook.begin(), codebook.end(), m_table);
      m_kernel = RowKernels::turboOf(t.scale(), t.bits());
      break;
    }
  }
#else
  (void)portable;
#endif
}

void KvRowDecoder::decode(const uint8_t* rows, uint32_t count, float* out, size_t stride) const {
  if (m_kernel) return m_kernel(*this, rows, count, out, stride);
  for (uint32_t r = 0; r < count; ++r)
    m_scheme.decodeRotated({rows + size_t{r} * m_rowBytes, m_rowBytes}, {out + r * stride, m_dim});
}

}  // namespace kvscope::cpu
