#include "core/float_convert.h"

#include <bit>
#include <cassert>
#include <cmath>
#include <limits>

namespace kvscope {

float fp16ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: value = mant * 2^-24, exact in float32
      float v = std::ldexp(static_cast<float>(mant), -24);
      return sign ? -v : v;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t floatToFp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) {  // inf or NaN; keep NaN quiet
    return sign | (absx > 0x7f800000u ? 0x7e00u : 0x7c00u);
  }
  if (absx >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520 -> inf
  if (absx < 0x38800000u) {                        // below the smallest normal half
    // Subnormal half: round |f| * 2^24 to an integer, ties to even.
    const float scaled = std::bit_cast<float>(absx) * 16777216.0f;
    const float r = std::nearbyint(scaled);  // default FP env rounds to even
    return sign | static_cast<uint16_t>(r);
  }
  // Normal: rebias the exponent, then round the 13 dropped mantissa bits.
  uint32_t v = absx - 0x38000000u;  // exponent bias 127 -> 15
  const uint32_t lsb = (v >> 13) & 1u;
  v += 0x0fffu + lsb;
  return sign | static_cast<uint16_t>(v >> 13);
}

float bf16ToFloat(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

uint16_t floatToBf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  const uint32_t lsb = (x >> 16) & 1u;
  return static_cast<uint16_t>((x + 0x7fffu + lsb) >> 16);
}

float e4m3ToFloat(uint8_t v) {
  const bool neg = v & 0x80u;
  const uint32_t exp = (v >> 3) & 0xfu;
  const uint32_t mant = v & 0x7u;
  float r;
  if (exp == 0xf && mant == 0x7) {
    r = std::numeric_limits<float>::quiet_NaN();
  } else if (exp == 0) {
    r = std::ldexp(static_cast<float>(mant), -9);  // subnormal: mant/8 * 2^-6
  } else {
    r = std::ldexp(1.0f + static_cast<float>(mant) / 8.0f, static_cast<int>(exp) - 7);
  }
  return neg ? -r : r;
}

uint8_t floatToE4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  float a = std::fabs(f);
  if (a >= kE4m3Max) return sign | 0x7e;  // saturate to 448
  if (a < std::ldexp(1.0f, -6)) {
    // Subnormal grid: multiples of 2^-9.
    const float q = std::nearbyint(a * 512.0f);
    return sign | static_cast<uint8_t>(q);  // q == 8 is exactly the smallest normal
  }
  int e;
  const float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  // a = (1 + k/8) * 2^(e-1): round k to nearest even on the 3-bit grid.
  float k = std::nearbyint((m * 2.0f - 1.0f) * 8.0f);
  int exp = e - 1 + 7;
  if (k >= 8.0f) {
    k = 0.0f;
    ++exp;
  }
  if (exp > 15 || (exp == 15 && k > 6.0f)) return sign | 0x7e;
  return sign | static_cast<uint8_t>((exp << 3) | static_cast<int>(k));
}

uint8_t floatToUe8m0Ceil(float f) {
  assert(f > 0.0f && std::isfinite(f));
  int e;
  const float m = std::frexp(f, &e);  // f = m * 2^e
  int p = (m == 0.5f) ? e - 1 : e;    // smallest p with 2^p >= f
  p += 127;
  if (p < 0) p = 0;
  if (p > 254) p = 254;
  return static_cast<uint8_t>(p);
}

void fp16ToFloat(std::span<const uint16_t> in, std::span<float> out) {
  assert(in.size() == out.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = fp16ToFloat(in[i]);
}

void floatToFp16(std::span<const float> in, std::span<uint16_t> out) {
  assert(in.size() == out.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = floatToFp16(in[i]);
}

}  // namespace kvscope
