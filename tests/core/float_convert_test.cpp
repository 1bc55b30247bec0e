// Conversions are checked against values that follow from the format
// definitions (IEEE 754 binary16, bfloat16, OCP FP8 E4M3), not against our code.
#include "core/float_convert.h"

#include <bit>
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace kvscope {
namespace {

TEST(Fp16, KnownEncodings) {
  EXPECT_EQ(floatToFp16(0.0f), 0x0000);
  EXPECT_EQ(floatToFp16(-0.0f), 0x8000);
  EXPECT_EQ(floatToFp16(1.0f), 0x3c00);
  EXPECT_EQ(floatToFp16(-2.0f), 0xc000);
  EXPECT_EQ(floatToFp16(65504.0f), 0x7bff);               // largest finite half
  EXPECT_EQ(floatToFp16(65520.0f), 0x7c00);               // halfway to 65536 rounds to inf
  EXPECT_EQ(floatToFp16(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(floatToFp16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(floatToFp16(std::ldexp(1.0f, -25)), 0x0000);  // tie rounds to even (0)
  EXPECT_EQ(floatToFp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_TRUE(std::isnan(fp16ToFloat(floatToFp16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Fp16, TiesRoundToEven) {
  // 1 + 2^-11 lies exactly between 1 and 1 + 2^-10: rounds down to the even 1.0.
  EXPECT_EQ(floatToFp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3*2^-11 lies between 1+2^-10 (odd) and 1+2^-9 (even): rounds up.
  EXPECT_EQ(floatToFp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
}

TEST(Fp16, EveryHalfRoundTripsExactly) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16ToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(floatToFp16(f), h) << "half 0x" << std::hex << h;
  }
}

TEST(Bf16, KnownEncodingsAndRounding) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBf16(-3.0f), 0xc040);
  EXPECT_EQ(bf16ToFloat(0x3f80), 1.0f);
  // 1 + 2^-8 is a tie between 1.0 and 1 + 2^-7: even mantissa (1.0) wins.
  EXPECT_EQ(floatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(floatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
}

TEST(E4m3, KnownEncodings) {
  EXPECT_EQ(floatToE4m3(0.0f), 0x00);
  EXPECT_EQ(floatToE4m3(1.0f), 0x38);     // exponent 7 (bias 7), mantissa 0
  EXPECT_EQ(floatToE4m3(448.0f), 0x7e);   // largest finite
  EXPECT_EQ(floatToE4m3(1000.0f), 0x7e);  // saturates
  EXPECT_EQ(floatToE4m3(-448.0f), 0xfe);
  EXPECT_EQ(floatToE4m3(std::ldexp(1.0f, -9)), 0x01);  // smallest subnormal
  EXPECT_EQ(floatToE4m3(std::ldexp(1.0f, -6)), 0x08);  // smallest normal
  EXPECT_EQ(e4m3ToFloat(0x7e), 448.0f);
  EXPECT_TRUE(std::isnan(e4m3ToFloat(0x7f)));
}

TEST(E4m3, EveryCodeRoundTrips) {
  for (uint32_t v = 0; v < 256; ++v) {
    const float f = e4m3ToFloat(static_cast<uint8_t>(v));
    if (std::isnan(f) || v == 0x80) continue;  // NaN and -0 have no unique float
    ASSERT_EQ(floatToE4m3(f), v) << "code " << v;
  }
}

TEST(E4m3, RoundsToNearest) {
  // Between 1.0 (0x38) and 1.125 (0x39): 1.05 is nearer 1.0, 1.07 nearer 1.125.
  EXPECT_EQ(floatToE4m3(1.05f), 0x38);
  EXPECT_EQ(floatToE4m3(1.07f), 0x39);
  EXPECT_EQ(floatToE4m3(1.0625f), 0x38);  // tie -> even mantissa
}

TEST(Ue8m0, PowersOfTwo) {
  EXPECT_EQ(ue8m0ToFloat(127), 1.0f);
  EXPECT_EQ(ue8m0ToFloat(130), 8.0f);
  for (int e = 0; e < 255; ++e) EXPECT_EQ(ue8m0ToFloat(static_cast<uint8_t>(e)), std::ldexp(1.0f, e - 127)) << e;
  EXPECT_TRUE(std::isnan(ue8m0ToFloat(255)));
  EXPECT_EQ(floatToUe8m0Ceil(1.0f), 127);
  EXPECT_EQ(floatToUe8m0Ceil(1.5f), 128);
  EXPECT_EQ(floatToUe8m0Ceil(0.25f), 125);
  EXPECT_EQ(floatToUe8m0Ceil(0.3f), 126);
}

}  // namespace
}  // namespace kvscope
