// Dequantization against hand-built blocks. Each block's bytes are written
// here by hand; expected values come from the format definitions in
// ggml-common.h / ggml-quants.c, as spot values worked out by hand (see the
// comments) and as a per-element formula written index by index, deliberately
// unlike the block loops of dequant.cpp. fp16 scales are powers of two or small
// integers, so every expected value is exact.
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gguf/dequant.h"
#include "gguf/gguf_writer.h"
#include "support/test_support.h"

namespace kvscope::gguf {
namespace {

// fp16 encodings of the scales used below.
constexpr uint16_t kHalfOne = 0x3c00, kHalfHalf = 0x3800, kHalfQuarter = 0x3400;
constexpr uint16_t kHalfTwo = 0x4000, kHalfMinusOne = 0xbc00;

void putHalf(uint8_t* p, uint16_t h) {
  std::memcpy(p, &h, 2);
}

std::vector<float> decode(TensorType type, std::span<const uint8_t> block, size_t n) {
  std::vector<float> out(n);
  const Status s = dequantize(type, block, out);
  EXPECT_TRUE(s.ok()) << s.error().describe();
  return out;
}

// Legacy blocks share this nibble pattern: qs[j] = j | (15 - j) << 4, so value
// j < 16 has nibble j and value 16 + j has nibble 15 - j.
int legacyNibble(int v) {
  return v < 16 ? v : 15 - (v - 16);
}

TEST(Dequant, Q4_0) {
  std::array<uint8_t, 18> b{};
  putHalf(&b[0], kHalfHalf);  // d = 0.5
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | (15 - j) << 4);
  const auto y = decode(TensorType::kQ4_0, b, 32);
  EXPECT_EQ(y[0], -4.0f);   // (0 - 8) * 0.5
  EXPECT_EQ(y[15], 3.5f);   // (15 - 8) * 0.5
  EXPECT_EQ(y[16], 3.5f);   // high nibble of qs[0] = 15
  EXPECT_EQ(y[31], -4.0f);  // high nibble of qs[15] = 0
  for (int v = 0; v < 32; ++v) EXPECT_EQ(y[v], (legacyNibble(v) - 8) * 0.5f) << v;
}

TEST(Dequant, Q4_1) {
  std::array<uint8_t, 20> b{};
  putHalf(&b[0], kHalfQuarter);   // d = 0.25
  putHalf(&b[2], kHalfMinusOne);  // m = -1
  for (int j = 0; j < 16; ++j) b[4 + j] = static_cast<uint8_t>(j | (15 - j) << 4);
  const auto y = decode(TensorType::kQ4_1, b, 32);
  EXPECT_EQ(y[0], -1.0f);   // 0 * 0.25 - 1
  EXPECT_EQ(y[15], 2.75f);  // 15 * 0.25 - 1
  EXPECT_EQ(y[17], 2.5f);   // nibble 14
  for (int v = 0; v < 32; ++v) EXPECT_EQ(y[v], legacyNibble(v) * 0.25f - 1.0f) << v;
}

// qh = 0x80010001: the fifth bit is set for values 0, 16 and 31 only.
constexpr std::array<uint8_t, 4> kQh = {0x01, 0x00, 0x01, 0x80};
int fifthBit(int v) {
  return v == 0 || v == 16 || v == 31 ? 16 : 0;
}

TEST(Dequant, Q5_0) {
  std::array<uint8_t, 22> b{};
  putHalf(&b[0], kHalfOne);
  std::memcpy(&b[2], kQh.data(), 4);
  for (int j = 0; j < 16; ++j) b[6 + j] = static_cast<uint8_t>(j | (15 - j) << 4);
  const auto y = decode(TensorType::kQ5_0, b, 32);
  EXPECT_EQ(y[0], 0.0f);    // (0 | 16) - 16
  EXPECT_EQ(y[1], -15.0f);  // 1 - 16
  EXPECT_EQ(y[16], 15.0f);  // (15 | 16) - 16
  EXPECT_EQ(y[17], -2.0f);  // 14 - 16
  EXPECT_EQ(y[31], 0.0f);   // (0 | 16) - 16
  for (int v = 0; v < 32; ++v) EXPECT_EQ(y[v], legacyNibble(v) + fifthBit(v) - 16.0f) << v;
}

TEST(Dequant, Q5_1) {
  std::array<uint8_t, 24> b{};
  putHalf(&b[0], kHalfHalf);  // d = 0.5
  putHalf(&b[2], kHalfTwo);   // m = 2
  std::memcpy(&b[4], kQh.data(), 4);
  for (int j = 0; j < 16; ++j) b[8 + j] = static_cast<uint8_t>(j | (15 - j) << 4);
  const auto y = decode(TensorType::kQ5_1, b, 32);
  EXPECT_EQ(y[0], 10.0f);   // 16 * 0.5 + 2
  EXPECT_EQ(y[1], 2.5f);    // 1 * 0.5 + 2
  EXPECT_EQ(y[16], 17.5f);  // 31 * 0.5 + 2
  for (int v = 0; v < 32; ++v) EXPECT_EQ(y[v], (legacyNibble(v) + fifthBit(v)) * 0.5f + 2.0f) << v;
}

TEST(Dequant, Q8_0) {
  std::array<uint8_t, 34> b{};
  putHalf(&b[0], kHalfQuarter);
  for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(8 * j - 128);  // int8 -128..120
  b[2 + 31] = 127;
  const auto y = decode(TensorType::kQ8_0, b, 32);
  EXPECT_EQ(y[0], -32.0f);   // -128 * 0.25
  EXPECT_EQ(y[16], 0.0f);    // 0
  EXPECT_EQ(y[31], 31.75f);  // 127 * 0.25
  for (int v = 0; v < 31; ++v) EXPECT_EQ(y[v], 2.0f * v - 32.0f) << v;
}

// MXFP4 (OCP microscaling formats spec; ggml's block_mxfp4): value j of the
// block is the E2M1 number of its nibble times 2^(e - 127). E2M1, written out:
// sign bit, two exponent bits, one mantissa bit.
TEST(Dequant, MXFP4) {
  const float e2m1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                          -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  std::array<uint8_t, 17> b{};
  for (int j = 0; j < 16; ++j) b[1 + j] = static_cast<uint8_t>(j | (15 - j) << 4);
  b[0] = 127;  // 2^0
  auto y = decode(TensorType::kMXFP4, b, 32);
  EXPECT_EQ(y[1], 0.5f);
  EXPECT_EQ(y[7], 6.0f);
  EXPECT_EQ(y[16], -6.0f);  // high nibble of qs[0] = 15
  for (int v = 0; v < 32; ++v) EXPECT_EQ(y[v], e2m1[legacyNibble(v)]) << v;
  b[0] = 130;  // 2^3
  y = decode(TensorType::kMXFP4, b, 32);
  for (int v = 0; v < 32; ++v) EXPECT_EQ(y[v], 8.0f * e2m1[legacyNibble(v)]) << v;
  b[0] = 0;  // 2^-127: 0.5 of it is the subnormal 2^-128
  y = decode(TensorType::kMXFP4, b, 32);
  EXPECT_EQ(y[1], static_cast<float>(std::exp2(-128.0)));
  EXPECT_EQ(y[7], static_cast<float>(6.0 * std::exp2(-127.0)));
}

// A k-quant byte pattern with no structure to hide behind.
uint8_t mix(int i, int mul, int add = 0) {
  return static_cast<uint8_t>((i * mul + add) & 0xff);
}

// Q2_K: scales[j] = j | (15 - j) << 4 (scale j, min 15 - j); d = 0.5, dmin = 0.25.
// Value v: sub-block v / 16; 2 bits at shift 2 * ((v % 128) / 32) of
// qs[32 * (v / 128) + v % 32]; y = d * scale * q - dmin * min.
// The IQ4 codebook as ggml-common.h lists it (kvalues_iq4nl), written here
// again rather than read from block_layout.h.
constexpr int kIq4[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

TEST(Dequant, IQ4_NL) {
  std::array<uint8_t, 18> b{};
  putHalf(&b[0], kHalfHalf);  // d = 0.5
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | (15 - j) << 4);
  const auto y = decode(TensorType::kIQ4_NL, b, 32);
  EXPECT_EQ(y[0], -63.5f);   // -127 * 0.5
  EXPECT_EQ(y[8], 0.5f);     // index 8: 1 * 0.5
  EXPECT_EQ(y[15], 56.5f);   // 113 * 0.5
  EXPECT_EQ(y[16], 56.5f);   // high nibble of qs[0] = 15
  EXPECT_EQ(y[31], -63.5f);  // high nibble of qs[15] = 0
  for (int v = 0; v < 32; ++v) EXPECT_EQ(y[v], kIq4[legacyNibble(v)] * 0.5f) << v;
}

// IQ4_XS: d = 0.25; sub-block ib's 6-bit scale is ls = 32 + ib - 4 (28..35),
// low 4 bits in scales_l (two a byte, sub-block 2k low), high 2 bits at bits
// 2ib of scales_h; every sub-block's codes are the IQ4_NL block's above.
TEST(Dequant, IQ4_XS) {
  std::array<uint8_t, 136> b{};
  putHalf(&b[0], kHalfQuarter);
  uint16_t scalesH = 0;
  for (int ib = 0; ib < 8; ++ib) {
    const int ls = 32 + ib - 4;
    b[4 + ib / 2] |= static_cast<uint8_t>((ls & 15) << (ib % 2 ? 4 : 0));
    scalesH |= static_cast<uint16_t>((ls >> 4) << (2 * ib));
    for (int j = 0; j < 16; ++j) b[8 + 16 * ib + j] = static_cast<uint8_t>(j | (15 - j) << 4);
  }
  std::memcpy(&b[2], &scalesH, 2);
  const auto y = decode(TensorType::kIQ4_XS, b, 256);
  EXPECT_EQ(y[0], 127.0f);            // sub-block 0: (28 - 32) * 0.25 = -1; -127 * -1
  EXPECT_EQ(y[32 * 4], 0.0f);         // sub-block 4: ls 32, scale 0
  EXPECT_EQ(y[32 * 7 + 15], 84.75f);  // sub-block 7: 3 * 0.25 * 113
  for (int v = 0; v < 256; ++v) {
    const int ib = v / 32;
    EXPECT_EQ(y[v], kIq4[legacyNibble(v % 32)] * (0.25f * static_cast<float>(ib - 4))) << v;
  }
}

// Random IQ4 and MXFP4 blocks as ggml itself dequantizes them
// (tests/data/llamacpp/dequant-iq4-mxfp4.json says how they were recorded):
// bit for bit, every scale and code an independent implementation's reading.
TEST(Dequant, IQ4AndMXFP4MatchGgml) {
  std::ifstream in(std::filesystem::path(__FILE__).parent_path() /
                   "../data/llamacpp/dequant-iq4-mxfp4.json");
  ASSERT_TRUE(in);
  const auto doc = nlohmann::json::parse(in);
  for (const auto& c : doc.at("cases")) {
    const std::string name = c.at("type");
    const TensorType type = name == "IQ4_NL"   ? TensorType::kIQ4_NL
                            : name == "IQ4_XS" ? TensorType::kIQ4_XS
                                               : TensorType::kMXFP4;
    const std::string hex = c.at("blocks_hex");
    std::vector<uint8_t> bytes(hex.size() / 2);
    for (size_t i = 0; i < bytes.size(); ++i)
      bytes[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
    const auto expected = c.at("values").get<std::vector<float>>();
    const auto y = decode(type, bytes, expected.size());
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], expected[i]) << name << " value " << i;
  }
}

TEST(Dequant, Q2_K) {
  std::array<uint8_t, 84> b{};
  for (int j = 0; j < 16; ++j) b[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  for (int i = 0; i < 64; ++i) b[16 + i] = mix(i, 37);
  putHalf(&b[80], kHalfHalf);
  putHalf(&b[82], kHalfQuarter);
  const auto y = decode(TensorType::kQ2_K, b, 256);
  EXPECT_EQ(y[0], -3.75f);   // q 0; scale 0, min 15: -0.25 * 15
  EXPECT_EQ(y[17], -3.0f);   // qs[17] = 117 = 0b01110101 -> q 1; 0.5 * 1 - 0.25 * 14
  EXPECT_EQ(y[49], -1.5f);   // same byte, bits 2-3 = 1; scale 3, min 12
  EXPECT_EQ(y[113], 1.5f);   // same byte, bits 6-7 = 1; scale 7, min 8
  EXPECT_EQ(y[208], 19.0f);  // qs[48] = 240, bits 4-5 = 3; scale 13, min 2: 19.5 - 0.5
  for (int v = 0; v < 256; ++v) {
    const int j = v / 16;
    const int q = (b[16 + 32 * (v / 128) + v % 32] >> (2 * ((v % 128) / 32))) & 3;
    EXPECT_EQ(y[v], 0.5f * j * q - 0.25f * (15 - j)) << v;
  }
}

// Q3_K signed scales and their hand packing (biased by 32 into 6 bits; low
// nibbles in bytes 0-7, top 2 bits in bytes 8-11).
constexpr int kQ3Scales[16] = {-32, -31, -1, 0, 1, 2, 15, 16, 31, -16, 5, -5, 10, -10, 20, -20};
constexpr std::array<uint8_t, 12> kQ3Packed = {0xf0, 0x01, 0x5f, 0xb0, 0xa1, 0x62,
                                               0x4f, 0xc0, 0xb8, 0x58, 0xe9, 0x1e};

// Value v: low 2 bits as in Q2_K; high bit (v / 32) of hmask[v % 32]; a clear
// high bit subtracts 4; y = d * scale * q with d = 0.5.
TEST(Dequant, Q3_K) {
  std::array<uint8_t, 110> b{};
  for (int i = 0; i < 32; ++i) b[i] = mix(i, 11, 5);
  for (int i = 0; i < 64; ++i) b[32 + i] = mix(i, 37);
  std::memcpy(&b[96], kQ3Packed.data(), 12);
  putHalf(&b[108], kHalfHalf);
  const auto y = decode(TensorType::kQ3_K, b, 256);
  EXPECT_EQ(y[1], 48.0f);    // low 1, hmask[1] = 16 bit 0 clear: q -3; scale -32
  EXPECT_EQ(y[32], 2.0f);    // low 0, hmask[0] = 5 bit 1 clear: q -4; scale -1
  EXPECT_EQ(y[64], 0.0f);    // low 0, hmask[0] bit 2 set: q 0
  EXPECT_EQ(y[130], 31.0f);  // qs[34] = 234 low 2, hmask[2] = 27 bit 4 set: q 2; scale 31
  EXPECT_EQ(y[255],
            40.0f);  // qs[63] = 27 bits 6-7 = 0, hmask[31] = 90 bit 7 clear: q -4; scale -20
  for (int v = 0; v < 256; ++v) {
    const int low = (b[32 + 32 * (v / 128) + v % 32] >> (2 * ((v % 128) / 32))) & 3;
    const int high = (b[v % 32] >> (v / 32)) & 1;
    EXPECT_EQ(y[v], 0.5f * kQ3Scales[v / 16] * (low - (high ? 0 : 4))) << v;
  }
}

// Q4_K/Q5_K 6-bit scales and mins of the eight sub-blocks, and their hand
// packing: bytes 0-3 scales 0-3 with the top 2 bits of scales 4-7 in bits
// 6-7; bytes 4-7 the same for mins; bytes 8-11 low nibbles of scale | min << 4.
constexpr int kKScales[8] = {1, 2, 3, 4, 17, 33, 50, 63};
constexpr int kKMins[8] = {0, 1, 2, 3, 20, 40, 60, 5};
constexpr std::array<uint8_t, 12> kKPacked = {0x41, 0x82, 0xc3, 0xc4, 0x40, 0x81,
                                              0xc2, 0x03, 0x41, 0x81, 0xc2, 0x5f};

// Value v: sub-block v / 32; byte qs[32 * (v / 64) + v % 32], low nibble for
// (v % 64) < 32; y = d * scale * q - dmin * min with d = 1, dmin = 0.5.
TEST(Dequant, Q4_K) {
  std::array<uint8_t, 144> b{};
  putHalf(&b[0], kHalfOne);
  putHalf(&b[2], kHalfHalf);
  std::memcpy(&b[4], kKPacked.data(), 12);
  for (int i = 0; i < 128; ++i) b[16 + i] = static_cast<uint8_t>(i);
  const auto y = decode(TensorType::kQ4_K, b, 256);
  EXPECT_EQ(y[1], 1.0f);      // q 1, scale 1, min 0
  EXPECT_EQ(y[32], -0.5f);    // high nibble of qs[0] = 0; min 1
  EXPECT_EQ(y[63], 1.5f);     // high nibble of qs[31] = 1; scale 2, min 1
  EXPECT_EQ(y[128], -10.0f);  // qs[64] low 0; min 20
  EXPECT_EQ(y[129], 7.0f);    // qs[65] low 1; 17 - 10
  EXPECT_EQ(y[255], 438.5f);  // qs[127] high 7; 63 * 7 - 2.5
  for (int v = 0; v < 256; ++v) {
    const uint8_t byte = b[16 + 32 * (v / 64) + v % 32];
    const int q = (v % 64) < 32 ? (byte & 15) : (byte >> 4);
    EXPECT_EQ(y[v], 1.0f * kKScales[v / 32] * q - 0.5f * kKMins[v / 32]) << v;
  }
}

// Q5_K adds 16 when bit (2 * (v / 64) + ((v % 64) >= 32)) of qh[v % 32] is set.
TEST(Dequant, Q5_K) {
  std::array<uint8_t, 176> b{};
  putHalf(&b[0], kHalfOne);
  putHalf(&b[2], kHalfHalf);
  std::memcpy(&b[4], kKPacked.data(), 12);
  for (int i = 0; i < 32; ++i) b[16 + i] = mix(i, 37);
  for (int i = 0; i < 128; ++i) b[48 + i] = static_cast<uint8_t>(i);
  const auto y = decode(TensorType::kQ5_K, b, 256);
  EXPECT_EQ(y[1], 17.0f);     // qh[1] = 37 = 0b100101 bit 0: q 1 + 16
  EXPECT_EQ(y[33], -0.5f);    // bit 1 clear; high nibble of qs[1] = 0; min 1
  EXPECT_EQ(y[65], 50.0f);    // bit 2 set: q 17; scale 3, min 2
  EXPECT_EQ(y[97], 6.5f);     // bit 3 clear: high nibble of qs[33] = 2; 4 * 2 - 1.5
  EXPECT_EQ(y[161], 640.0f);  // bit 5 set: high nibble of qs[65] = 4; 33 * 20 - 20
  for (int v = 0; v < 256; ++v) {
    const uint8_t byte = b[48 + 32 * (v / 64) + v % 32];
    const bool high = (v % 64) >= 32;
    const int bit = (b[16 + v % 32] >> (2 * (v / 64) + (high ? 1 : 0))) & 1;
    const int q = (high ? (byte >> 4) : (byte & 15)) + 16 * bit;
    EXPECT_EQ(y[v], 1.0f * kKScales[v / 32] * q - 0.5f * kKMins[v / 32]) << v;
  }
}

// Q6_K value v = 128h + 32k + l: nibble of ql[64h + l + 32(k % 2)] (high for
// k >= 2) plus bits 2k..2k+1 of qh[32h + l] as bits 4-5, minus 32;
// y = d * scale[v / 16] * q with d = 0.5.
TEST(Dequant, Q6_K) {
  constexpr int8_t kScales[16] = {1, -1, 2, -2, 3, -3, 4, -4, 5, -5, 6, -6, 7, -7, 127, -128};
  std::array<uint8_t, 210> b{};
  for (int i = 0; i < 128; ++i) b[i] = static_cast<uint8_t>(i);
  for (int i = 0; i < 64; ++i) b[128 + i] = mix(i, 37);
  std::memcpy(&b[192], kScales, 16);
  putHalf(&b[208], kHalfHalf);
  const auto y = decode(TensorType::kQ6_K, b, 256);
  EXPECT_EQ(y[0], -16.0f);      // q -32; scale 1
  EXPECT_EQ(y[224], 381.0f);    // ql[96] high 6, qh[32] = 160 bits 6-7 = 2: q 6; scale 127
  EXPECT_EQ(y[240], -1472.0f);  // ql[112] high 7, qh[48] = 240 bits 6-7 = 3: q 23; scale -128
  EXPECT_EQ(y[255], 1600.0f);   // ql[127] high 7, qh[63] = 27 bits 6-7 = 0: q -25; scale -128
  for (int v = 0; v < 256; ++v) {
    const int h = v / 128, k = (v % 128) / 32, l = v % 32;
    const uint8_t lo = b[64 * h + l + 32 * (k % 2)];
    const int nibble = k >= 2 ? lo >> 4 : lo & 15;
    const int top = (b[128 + 32 * h + l] >> (2 * k)) & 3;
    EXPECT_EQ(y[v], 0.5f * kScales[v / 16] * ((nibble | top << 4) - 32)) << v;
  }
}

template <typename T, size_t N>
std::span<const uint8_t> bytesOf(const T (&a)[N]) {
  return {reinterpret_cast<const uint8_t*>(a), sizeof(a)};
}

TEST(Dequant, PlainFloatTypes) {
  const uint16_t halves[4] = {0x3c00, 0xc000, 0x7bff, 0x0001};  // 1, -2, 65504, 2^-24
  EXPECT_EQ(decode(TensorType::kF16, bytesOf(halves), 4),
            (std::vector<float>{1.0f, -2.0f, 65504.0f, std::ldexp(1.0f, -24)}));
  const uint16_t bf[2] = {0x3f80, 0xc040};  // 1, -3
  EXPECT_EQ(decode(TensorType::kBF16, bytesOf(bf), 2), (std::vector<float>{1.0f, -3.0f}));
  const float f[2] = {0.1f, -7.5f};
  EXPECT_EQ(decode(TensorType::kF32, bytesOf(f), 2), (std::vector<float>{0.1f, -7.5f}));
}

TEST(Dequant, SizeAndTypeErrors) {
  std::vector<float> out(32);
  std::vector<uint8_t> in(18);
  EXPECT_TRUE(dequantize(TensorType::kQ4_0, in, out).ok());
  EXPECT_EQ(dequantize(TensorType::kQ4_0, std::span(in).first(17), out).error().code,
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(dequantize(TensorType::kQ4_0, in, std::span(out).first(31)).error().code,
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(dequantize(TensorType::kQ8_K, in, out).error().code, ErrorCode::kUnsupported);
  EXPECT_EQ(dequantize(TensorType::kI32, in, out).error().code, ErrorCode::kUnsupported);
  EXPECT_EQ(dequantize(static_cast<TensorType>(77), in, out).error().code, ErrorCode::kUnsupported);
  for (TensorType t :
       {TensorType::kF32, TensorType::kF16, TensorType::kBF16, TensorType::kQ4_0, TensorType::kQ4_1,
        TensorType::kQ5_0, TensorType::kQ5_1, TensorType::kQ8_0, TensorType::kQ2_K,
        TensorType::kQ3_K, TensorType::kQ4_K, TensorType::kQ5_K, TensorType::kQ6_K})
    EXPECT_TRUE(canDequantize(t)) << traits(t).name;
}

TEST(Dequant, RowsOfAFileTensor) {
  // Three Q8_0 rows of 64 values whose block scales are 1, so values are the int8 quants.
  std::vector<uint8_t> data;
  for (int block = 0; block < 6; ++block) {
    data.push_back(0x00);
    data.push_back(0x3c);
    for (int j = 0; j < 32; ++j) data.push_back(static_cast<uint8_t>(block * 10 + j % 5));
  }
  GgufWriter w;
  ASSERT_TRUE(w.addTensor("m", {64, 3}, TensorType::kQ8_0, data).ok());
  auto file = GgufFile::fromBytes(*w.toBytes());
  ASSERT_TRUE(file.ok()) << file.error().describe();
  const TensorInfo& t = *(*file)->findTensor("m");
  std::vector<float> row(64);
  ASSERT_TRUE(dequantizeRow(**file, t, 2, row).ok());
  EXPECT_EQ(row[0], 40.0f);   // block 4, j 0
  EXPECT_EQ(row[33], 51.0f);  // block 5, j 1
  const auto all = dequantizeTensor(**file, t);
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(std::equal(row.begin(), row.end(), all->begin() + 128));
  EXPECT_FALSE(dequantizeRow(**file, t, 3, row).ok());
  EXPECT_FALSE(dequantizeRow(**file, t, 0, std::span(row).first(32)).ok());
}

TEST(Dequant, Stories260KTensorsAreTheirRawFloats) {
  const auto path = kvscope::test::sharedFile("models/stories260K.gguf");
  KVS_REQUIRE_FIXTURE(path);
  auto file = GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().describe();
  for (const TensorInfo& t : (*file)->tensors()) {
    const auto values = dequantizeTensor(**file, t);
    ASSERT_TRUE(values.ok()) << t.name;
    ASSERT_EQ(values->size(), t.elements());
    EXPECT_EQ(std::memcmp(values->data(), (*file)->tensorData(t).data(), t.bytes), 0) << t.name;
  }
}

}  // namespace
}  // namespace kvscope::gguf
