#pragma once
// Byte layouts of ggml's quantized blocks (ggml-common.h), shared by the
// dequantizer and the reference quantizers (internal to engine/gguf).
// Offsets are in bytes from the start of a block; fp16 fields are IEEE half,
// little-endian, like every multi-byte field.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/float_convert.h"

namespace kvscope::gguf::blocks {

inline constexpr int kQK = 32;     // values per Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 block
inline constexpr int kQK_K = 256;  // values per k-quant super-block

namespace q4_0 {
inline constexpr size_t kD = 0, kQs = 2, kBytes = 18;
}
namespace q4_1 {
inline constexpr size_t kD = 0, kM = 2, kQs = 4, kBytes = 20;
}
namespace q5_0 {
inline constexpr size_t kD = 0, kQh = 2, kQs = 6, kBytes = 22;
}
namespace q5_1 {
inline constexpr size_t kD = 0, kM = 2, kQh = 4, kQs = 8, kBytes = 24;
}
namespace q8_0 {
inline constexpr size_t kD = 0, kQs = 2, kBytes = 34;
}
// MXFP4 (OCP microscaling): an E8M0 scale byte, then 32 E2M1 codes as
// nibbles (value j low, value 16 + j high, as Q4_0).
namespace mxfp4 {
inline constexpr size_t kE = 0, kQs = 1, kBytes = 17;
// The E2M1 values doubled (so integers): 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their
// negatives; the scale is then 2^(e - 128), half the block's 2^(e - 127).
inline constexpr int8_t kDoubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
// 2^(e - 128), the doubled codes' scale, from the float's bits (std::ldexp
// is a library call, and a decode step takes one per block): biased
// exponent e - 1, or for e < 2 the subnormals 2^-128 and 2^-127.
constexpr float scale(uint8_t e) {
  return std::bit_cast<float>(e < 2 ? uint32_t{0x00200000} << e : uint32_t{e - 1u} << 23);
}
}
// IQ4_NL: an fp16 scale, then 32 4-bit indices into a fixed non-uniform
// codebook (value j low nibble, value 16 + j high, as Q4_0).
namespace iq4 {
inline constexpr int8_t kValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                       1,    13,   25,  38,  53,  69,  89,  113};
}
namespace iq4_nl {
inline constexpr size_t kD = 0, kQs = 2, kBytes = 18;
}
// IQ4_XS: 256 values in 8 sub-blocks of 32, each with a 6-bit scale (low 4
// bits in scales_l, two nibbles a byte; high 2 bits in the 16-bit scales_h)
// times d, minus 32; sub-block ib's codes are 16 bytes at qs + 16 ib, laid
// out as IQ4_NL's.
namespace iq4_xs {
inline constexpr size_t kD = 0, kScalesH = 2, kScalesL = 4, kQs = 8, kBytes = 136;
// Sub-block ib's signed scale multiplier: its 6-bit field minus 32.
inline int subScale(const uint8_t* b, int ib) {
  const int low = (b[kScalesL + ib / 2] >> (4 * (ib % 2))) & 0x0f;
  const int high = ((b[kScalesH] | b[kScalesH + 1] << 8) >> (2 * ib)) & 3;
  return (low | high << 4) - 32;
}
}
namespace q2_k {
inline constexpr size_t kScales = 0, kQs = 16, kD = 80, kDmin = 82, kBytes = 84;
}
namespace q3_k {
inline constexpr size_t kHmask = 0, kQs = 32, kScales = 96, kD = 108, kBytes = 110;
}
namespace q4_k {
inline constexpr size_t kD = 0, kDmin = 2, kScales = 4, kQs = 16, kBytes = 144;
}
namespace q5_k {
inline constexpr size_t kD = 0, kDmin = 2, kScales = 4, kQh = 16, kQs = 48, kBytes = 176;
}
namespace q6_k {
inline constexpr size_t kQl = 0, kQh = 128, kScales = 192, kD = 208, kBytes = 210;
}

inline uint16_t loadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline uint32_t loadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void storeU16(uint8_t* p, uint16_t v) {
  std::memcpy(p, &v, sizeof v);
}
inline void storeU32(uint8_t* p, uint32_t v) {
  std::memcpy(p, &v, sizeof v);
}
inline float loadHalf(const uint8_t* p) {
  return fp16ToFloat(loadU16(p));
}

// Q4_K/Q5_K keep eight 6-bit (scale, min) pairs in 12 bytes: bytes 0-3 hold
// scales 0-3 in their low 6 bits, bytes 4-7 mins 0-3; bytes 8-11 hold the low
// 4 bits of scale (low nibble) and min (high nibble) 4-7, whose top 2 bits sit
// in the spare top bits of bytes 0-3 (scales) and 4-7 (mins).
inline void kScaleMin(const uint8_t* s, int j, uint8_t& scale, uint8_t& min) {
  if (j < 4) {
    scale = s[j] & 0x3f;
    min = s[j + 4] & 0x3f;
  } else {
    scale = static_cast<uint8_t>((s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4));
    min = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

// Inverse of kScaleMin; `s` must start zeroed.
inline void packKScaleMin(uint8_t* s, int j, uint8_t scale, uint8_t min) {
  if (j < 4) {
    s[j] |= scale;
    s[j + 4] |= min;
  } else {
    s[j + 4] |= static_cast<uint8_t>((scale & 0x0f) | ((min & 0x0f) << 4));
    s[j - 4] |= static_cast<uint8_t>((scale >> 4) << 6);
    s[j] |= static_cast<uint8_t>((min >> 4) << 6);
  }
}

// Q3_K keeps sixteen 6-bit scales, biased by 32, in 12 bytes: the low 4 bits
// of scale j in byte j (j < 8, low nibble) or byte j - 8 (high nibble), the top
// 2 bits in byte 8 + j % 4 at bit 2 * (j / 4).
inline int q3kScale(const uint8_t* s, int j) {
  const int low = j < 8 ? (s[j] & 0x0f) : (s[j - 8] >> 4);
  const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// Inverse of q3kScale for scale in [-32, 31]; `s` must start zeroed.
inline void packQ3kScale(uint8_t* s, int j, int scale) {
  const auto biased = static_cast<uint8_t>(scale + 32);
  if (j < 8) {
    s[j] |= biased & 0x0f;
  } else {
    s[j - 8] |= static_cast<uint8_t>((biased & 0x0f) << 4);
  }
  s[8 + j % 4] |= static_cast<uint8_t>((biased >> 4) << (2 * (j / 4)));
}

}  // namespace kvscope::gguf::blocks
