// Reference quantizers: encoded blocks decode (through dequantize, itself
// checked against hand-built blocks) to within a bound that follows from each
// format's step size, on several value distributions; inputs the format
// represents exactly come back byte-exact and value-exact.
#include <cmath>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "gguf/dequant.h"
#include "gguf/quantize.h"
#include "support/test_support.h"

namespace kvscope::gguf {
namespace {

struct Bound {
  TensorType type;
  // Largest error allowed, as a fraction of the largest magnitude in the block
  // (32 values; 256 for k-quants). Derivations: a symmetric format with levels
  // [-n, n-1] loses up to one step (amax / n) on the side opposite its extreme;
  // an affine one with n levels is within half of range / n; k-quants add the
  // rounding of their sub-block scales.
  double maxError;
};

constexpr Bound kBounds[] = {
    {TensorType::kQ8_0, 0.5 / 127 + 1e-3},
    {TensorType::kQ4_0, 1.0 / 8 + 1e-3},
    {TensorType::kQ4_1, 1.0 / 15 + 1e-3},
    {TensorType::kQ5_0, 1.0 / 16 + 1e-3},
    {TensorType::kQ5_1, 1.0 / 31 + 1e-3},
    {TensorType::kQ2_K, 0.37},
    {TensorType::kQ3_K, 0.27},
    {TensorType::kQ4_K, 0.075},
    {TensorType::kQ5_K, 0.037},
    {TensorType::kQ6_K, 1.0 / 32 + 2e-3},
    // IQ4: the scale puts the extreme on -127 or 113. A negative extreme
    // leaves positive values above 113/127 of it clamped: 14 / 127, more than
    // half the codebook's widest gap (12 / 113). IQ4_XS adds its 6-bit
    // sub-block scales: half a step of d = largest / 31, 1 / 62 of the
    // super-block's largest value.
    // MXFP4: the scale puts the largest magnitude in (3, 6] (a power of two
    // above amax / 6); the widest gap there is 4 to 6, so an error of 1 in
    // at least 3: 1 / 3.
    {TensorType::kMXFP4, 1.0 / 3 + 1e-3},
    {TensorType::kIQ4_NL, 14.0 / 127 + 2e-3},
    {TensorType::kIQ4_XS, 14.0 / 127 + 1.0 / 62 + 2e-3},
    {TensorType::kF16, 1.0 / 2048},
    {TensorType::kBF16, 1.0 / 256},
    {TensorType::kF32, 0.0},
};

std::vector<float> roundTrip(TensorType type, const std::vector<float>& x) {
  auto q = quantize(type, x);
  EXPECT_TRUE(q.ok()) << q.error().describe();
  if (!q.ok()) return {};
  EXPECT_EQ(q->size(), byteSize(type, x.size()));
  std::vector<float> y(x.size());
  const Status s = dequantize(type, *q, y);
  EXPECT_TRUE(s.ok()) << s.error().describe();
  return y;
}

// Worst error over blocks, relative to each block's largest magnitude.
double worstRelativeError(TensorType type, const std::vector<float>& x,
                          const std::vector<float>& y) {
  const size_t block = std::max<size_t>(traits(type).blockElements, 32);
  double worst = 0;
  for (size_t b = 0; b < x.size(); b += block) {
    double amax = 0, err = 0;
    for (size_t i = b; i < b + block; ++i) {
      amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
      err = std::max(err, std::fabs(static_cast<double>(x[i]) - y[i]));
    }
    if (amax > 0) worst = std::max(worst, err / amax);
  }
  return worst;
}

std::vector<std::vector<float>> distributions() {
  std::vector<std::vector<float>> d;
  d.push_back(kvscope::test::randomFloats(1024, 1));                 // symmetric
  d.push_back(kvscope::test::randomFloats(1024, 2, 0.5f, 2.0f));     // all positive, offset
  d.push_back(kvscope::test::randomFloats(1024, 3, -30.0f, -1.0f));  // all negative
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> weights(1024);
  for (float& w : weights) w = normal(rng);  // like trained weights
  weights[77] = 0.5f;                        // with outliers
  weights[700] = -0.8f;
  d.push_back(weights);
  return d;
}

TEST(Quantize, RoundTripErrorIsWithinTheFormatsStep) {
  const auto inputs = distributions();
  for (const Bound& bound : kBounds) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      const auto y = roundTrip(bound.type, inputs[i]);
      ASSERT_EQ(y.size(), inputs[i].size());
      EXPECT_LE(worstRelativeError(bound.type, inputs[i], y), bound.maxError)
          << traits(bound.type).name << ", distribution " << i;
    }
  }
}

TEST(Quantize, ZerosStayZero) {
  const std::vector<float> zeros(512, 0.0f);
  for (const Bound& bound : kBounds) {
    const auto y = roundTrip(bound.type, zeros);
    for (float v : y) ASSERT_EQ(v, 0.0f) << traits(bound.type).name;
  }
}

TEST(Quantize, ConstantBlocks) {
  for (const float c : {1.0f, -3.0f, 1e-3f}) {
    const std::vector<float> x(256, c);
    for (const Bound& bound : kBounds) {
      const auto y = roundTrip(bound.type, x);
      for (float v : y)
        ASSERT_NEAR(v, c, std::fabs(c) * (bound.maxError + 1e-6)) << traits(bound.type).name;
    }
  }
}

TEST(Quantize, Q8_0ExactInputIsByteExact) {
  // Multiples of 0.25 with largest magnitude 127 * 0.25: d = 0.25 (fp16 0x3400), quants = k.
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = 0.25f * static_cast<float>(j * 8 - 127);
  const auto q = quantize(TensorType::kQ8_0, x);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ((*q)[0], 0x00);
  EXPECT_EQ((*q)[1], 0x34);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(static_cast<int8_t>((*q)[2 + j]), j * 8 - 127) << j;
  EXPECT_EQ(roundTrip(TensorType::kQ8_0, x), x);
}

TEST(Quantize, Q4_0ExactInputIsByteExact) {
  // Values (k - 8) * 0.5 with the extreme -4 first: d = -4 / -8 = 0.5 (0x3800), nibbles = k.
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = 0.5f * static_cast<float>((j % 16) - 8);
  const auto q = quantize(TensorType::kQ4_0, x);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ((*q)[0], 0x00);
  EXPECT_EQ((*q)[1], 0x38);
  for (int j = 0; j < 16; ++j) EXPECT_EQ((*q)[2 + j], j | j << 4) << j;
  EXPECT_EQ(roundTrip(TensorType::kQ4_0, x), x);
}

TEST(Quantize, KQuantsRepresentExactGrids) {
  // Grids q * step whose sub-blocks all reach the extreme quant and whose
  // step is (largest sub-scale) * 2^-k: the super-block scale is then exact in
  // fp16, every sub-scale is the largest code, and the round trip is exact.
  struct Grid {
    TensorType type;
    float (*value)(int v);
  };
  const Grid grids[] = {
      {TensorType::kQ2_K, [](int v) { return static_cast<float>(v % 4) * 15 / 16; }},
      {TensorType::kQ3_K, [](int v) { return static_cast<float>(v % 8 - 4) * 31 / 32; }},
      {TensorType::kQ4_K, [](int v) { return static_cast<float>(v % 16) * 63 / 64; }},
      {TensorType::kQ5_K, [](int v) { return static_cast<float>(v % 32) * 63 / 64; }},
      {TensorType::kQ6_K, [](int v) { return static_cast<float>(v % 16 * 4 - 32) * 127 / 128; }},
  };
  for (const Grid& g : grids) {
    std::vector<float> x(512);
    for (int v = 0; v < 512; ++v) x[v] = g.value(v);
    EXPECT_EQ(roundTrip(g.type, x), x) << traits(g.type).name;
  }
  // Q4_K: d = 2^-6 (0x2400), dmin = 0, all eight scales 63 and mins 0.
  std::vector<float> x(256);
  for (int v = 0; v < 256; ++v) x[v] = grids[2].value(v);
  const auto q = quantize(TensorType::kQ4_K, x);
  ASSERT_TRUE(q.ok());
  const std::vector<uint8_t> head(q->begin(), q->begin() + 16);
  EXPECT_EQ(head, (std::vector<uint8_t>{0x00, 0x24, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00,
                                        0x00, 0x00, 0x0f, 0x0f, 0x0f, 0x0f}));
}

TEST(Quantize, Deterministic) {
  const auto x = kvscope::test::randomFloats(512, 9);
  for (const Bound& bound : kBounds) EXPECT_EQ(*quantize(bound.type, x), *quantize(bound.type, x));
}

TEST(Quantize, RefusesBadInput) {
  std::vector<float> x(32, 1.0f);
  x[5] = std::numeric_limits<float>::quiet_NaN();
  auto nan = quantize(TensorType::kQ8_0, x);
  ASSERT_FALSE(nan.ok());
  EXPECT_EQ(nan.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(nan.error().message.find("value 5"), std::string::npos);
  x[5] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(quantize(TensorType::kQ4_K, std::vector<float>(256, x[5])).ok());

  // fp16 scales top out at 65504.
  const std::vector<float> huge(256, 1e30f);
  for (TensorType t : {TensorType::kQ8_0, TensorType::kQ4_1, TensorType::kQ4_K, TensorType::kQ6_K,
                       TensorType::kF16}) {
    auto r = quantize(t, huge);
    ASSERT_FALSE(r.ok()) << traits(t).name;
    EXPECT_NE(r.error().message.find("too large"), std::string::npos) << r.error().message;
  }
  EXPECT_EQ(quantize(TensorType::kQ4_0, std::vector<float>(31)).error().code,
            ErrorCode::kInvalidArgument);
  std::vector<uint8_t> out(17);
  EXPECT_EQ(quantize(TensorType::kQ4_0, std::vector<float>(32), out).error().code,
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(quantize(TensorType::kQ8_K, std::vector<float>(256)).error().code,
            ErrorCode::kUnsupported);
  EXPECT_FALSE(canQuantize(TensorType::kI32));
}

}  // namespace
}  // namespace kvscope::gguf
