// cpu::matmul in every weight type, SIMD and portable kernels, both
// precisions, odd row counts and n in {1, 3, 17}, against the dequantized
// weights (gguf::dequantize):
//  - kExact must equal dot() on the dequantized row bit for bit, except in
//    the fused SIMD kernels (quantized, n = 1), which must stay within
//    (in + 32) * eps * T of a double-precision product, T as in cpu_matmul.h;
//  - kInt8Activations must stay within sum_b (a_b / 254) * sum_{i in b} |w_i|
//    for the activation rounding plus twice that float term (the rounded
//    activations are up to one step larger), b running over blocks of 32, or
//    of 256 where the super-block types' fused SIMD kernels take one input
//    row (the K-quants, IQ4_XS).
// A wrong nibble, scale or offset gives errors of the order of the result.
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "backend/cpu_features.h"
#include "backend/cpu_matmul.h"
#include "backend/cpu_quant_decode.h"
#include "backend/cpu_quant_dot.h"
#include "gguf/dequant.h"
#include "gguf/quantize.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

using cpu::MatmulPrecision;
using gguf::TensorType;

constexpr double kEps = 0x1p-24;

struct Weights {
  model::TensorView view;
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // [out, in], as gguf::dequantize decodes them
};

// `misaligned`: one spare byte in front puts the data off its natural
// alignment, as in an alignment=1 GGUF file (F32 rows are then copied).
Weights makeWeights(TensorType type, size_t in, size_t out, uint32_t seed, bool misaligned = true) {
  Weights w;
  const auto raw = randomFloats(in * out, seed);
  auto bytes = gguf::quantize(type, raw);
  EXPECT_TRUE(bytes.ok());
  const size_t front = misaligned ? 1 : 0;
  w.bytes.assign(front, 0);
  w.bytes.insert(w.bytes.end(), bytes->begin(), bytes->end());
  w.values.resize(in * out);
  EXPECT_TRUE(gguf::dequantize(type, std::span(w.bytes).subspan(front), w.values).ok());
  w.view.name = "w";
  w.view.type = type;
  w.view.shape = {in, out};
  w.view.data = std::span<const uint8_t>(w.bytes).subspan(front);
  return w;
}

// Activation rows with one large value per row, so block scales differ.
std::vector<float> makeActivations(size_t in, size_t n, uint32_t seed) {
  auto x = randomFloats(in * n, seed, -2.0f, 2.0f);
  for (size_t t = 0; t < n; ++t) x[t * in + (t * 7) % in] = 9.0f;
  return x;
}

// T = sum_i (|w_i| + 2 |o_i|) * |x_i| of cpu_matmul.h, o_i the offset of
// w_i's group.
double termMagnitude(const Weights& w, size_t r, const float* x) {
  const size_t in = w.view.shape[0];
  const bool quantized = cpu::canDecodeRow(w.view.type);
  std::vector<float> offset(quantized ? in / cpu::kGroup : 0);
  if (quantized) {
    std::vector<int8_t> q(in);
    std::vector<float> scale(in / cpu::kGroup);
    const size_t rowBytes = gguf::byteSize(w.view.type, in).value();
    cpu::decodeRow(w.view.type, w.view.data.data() + r * rowBytes, in,
                   {q.data(), scale.data(), offset.data()});
  }
  double s = 0.0;
  for (size_t i = 0; i < in; ++i) {
    const double o = quantized ? std::fabs(double{offset[i / cpu::kGroup]}) : 0.0;
    s += (std::fabs(double{w.values[r * in + i]}) + 2 * o) * std::fabs(x[i]);
  }
  return s;
}

// `block`: the values sharing one activation scale.
double activationRoundingBound(const Weights& w, size_t r, const float* x, size_t block) {
  const size_t in = w.view.shape[0];
  double bound = 0.0;
  for (size_t b = 0; b < in / block; ++b) {
    double amax = 0.0, wsum = 0.0;
    for (size_t i = b * block; i < (b + 1) * block; ++i) {
      amax = std::max(amax, double{std::fabs(x[i])});
      wsum += std::fabs(double{w.values[r * in + i]});
    }
    bound += amax / 254.0 * (1.0 + 1e-6) * wsum;
  }
  return bound;
}

bool isFloatType(TensorType type) {
  return type == TensorType::kF32 || type == TensorType::kF16 || type == TensorType::kBF16;
}

// The activation block of kInt8Activations: 256 (ggml's Q8_K) in the fused
// SIMD super-block kernels of one input row, else 32.
size_t activationBlock(TensorType type, size_t n, bool portable) {
#if defined(KVSCOPE_CPU_AVX2)
  const bool superBlocks = type == TensorType::kQ4_K || type == TensorType::kQ5_K ||
                           type == TensorType::kQ6_K || type == TensorType::kIQ4_XS;
  if (superBlocks && n == 1 && !portable) return 256;
#else
  (void)type, (void)n, (void)portable;
#endif
  return cpu::kActBlock;
}

struct Case {
  TensorType type;
  size_t in;
  bool misaligned = true;
};

class CpuMatmul : public ::testing::TestWithParam<Case> {};

TEST_P(CpuMatmul, MatchesDoublePrecisionWithinTheStatedBound) {
  const auto [type, in, misaligned] = GetParam();
  constexpr size_t kOut = 37;
  const Weights w = makeWeights(type, in, kOut, 11, misaligned);
  ThreadPool pool(2);
  for (size_t n : {1, 3, 17, 67}) {  // 67: a second block of 64 inputs
    const auto x = makeActivations(in, n, static_cast<uint32_t>(100 + n));
    for (auto precision : {MatmulPrecision::kExact, MatmulPrecision::kInt8Activations}) {
      const bool int8 = precision == MatmulPrecision::kInt8Activations && !isFloatType(type);
      for (bool portable : {false, true}) {
        std::vector<float> y(n * kOut, NAN);
        if (portable) {
          cpu::matmulPortable(w.view, x, y, n, pool, precision);
        } else {
          cpu::matmul(w.view, x, y, n, pool, precision);
        }
        // kExact is dot() on the dequantized row, bit for bit, except in the
        // fused SIMD kernels (quantized rows, one input row).
        const bool bitExact = !int8 && (isFloatType(type) || n > 1 || portable);
        double worstRatio = 0.0;
        for (size_t t = 0; t < n; ++t) {
          const float* xt = x.data() + t * in;
          for (size_t r = 0; r < kOut; ++r) {
            const float got = y[t * kOut + r];
            const std::string where = "row " + std::to_string(r) + " input " + std::to_string(t) +
                                      " n " + std::to_string(n) +
                                      (portable ? " portable" : " simd") +
                                      (int8 ? " int8" : " exact");
            if (bitExact) {
              ASSERT_EQ(got, cpu::dot(&w.values[r * in], xt, in)) << where;
              continue;
            }
            double ref = 0.0;
            for (size_t i = 0; i < in; ++i) ref += double{w.values[r * in + i]} * xt[i];
            const double act =
                int8 ? activationRoundingBound(w, r, xt, activationBlock(type, n, portable)) : 0.0;
            const double tol = act + (in + 32) * kEps * termMagnitude(w, r, xt) * (int8 ? 2 : 1);
            const double err = std::fabs(got - ref);
            ASSERT_LE(err, tol) << where;
            worstRatio = std::max(worstRatio, err / tol);
          }
        }
        // The bound must not be so loose that it hides errors: the int8
        // error is a sizeable part of its bound.
        if (int8) {
          EXPECT_GT(worstRatio, 0.02) << "n " << n;
        }
      }
    }
  }
}

std::string caseName(const ::testing::TestParamInfo<Case>& info) {
  return std::string(gguf::traits(info.param.type).name) + "_" + std::to_string(info.param.in) +
         (info.param.misaligned ? "" : "_aligned");
}

// Odd block counts: 13 blocks of 32, 3 super-blocks of 256, and float rows
// whose length is no multiple of the SIMD width; F32 read in place too.
INSTANTIATE_TEST_SUITE_P(
    Types, CpuMatmul,
    ::testing::Values(
        Case{TensorType::kF32, 83}, Case{TensorType::kF32, 84, false}, Case{TensorType::kF16, 83},
        Case{TensorType::kBF16, 83}, Case{TensorType::kQ8_0, 416}, Case{TensorType::kQ4_0, 416},
        Case{TensorType::kQ4_1, 416}, Case{TensorType::kQ5_0, 416}, Case{TensorType::kQ5_1, 416},
        Case{TensorType::kQ2_K, 768}, Case{TensorType::kQ3_K, 768}, Case{TensorType::kQ4_K, 768},
        Case{TensorType::kQ5_K, 768}, Case{TensorType::kQ6_K, 768}, Case{TensorType::kIQ4_NL, 416},
        Case{TensorType::kIQ4_XS, 768}, Case{TensorType::kMXFP4, 416}),
    caseName);

TEST(CpuMatmul, DecodedRowsEqualTheDequantizer) {
  for (auto type :
       {TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ4_1, TensorType::kQ5_0,
        TensorType::kQ5_1, TensorType::kQ2_K, TensorType::kQ3_K, TensorType::kQ4_K,
        TensorType::kQ5_K, TensorType::kQ6_K, TensorType::kIQ4_NL, TensorType::kIQ4_XS}) {
    constexpr size_t kIn = 512;
    const Weights w = makeWeights(type, kIn, 1, 21);
    std::vector<int8_t> q[2] = {std::vector<int8_t>(kIn), std::vector<int8_t>(kIn)};
    std::vector<float> scale[2], offset[2];
    for (int portable = 0; portable < 2; ++portable) {
      scale[portable].resize(kIn / cpu::kGroup);
      offset[portable].resize(kIn / cpu::kGroup);
      cpu::decodeRow(type, w.view.data.data(), kIn,
                     {q[portable].data(), scale[portable].data(), offset[portable].data()},
                     portable == 1);
    }
    EXPECT_EQ(q[0], q[1]) << gguf::traits(type).name;
    EXPECT_EQ(scale[0], scale[1]) << gguf::traits(type).name;
    EXPECT_EQ(offset[0], offset[1]) << gguf::traits(type).name;
    for (size_t i = 0; i < kIn; ++i) {
      const size_t g = i / cpu::kGroup;
      const double value = double{scale[0][g]} * q[0][i] + offset[0][g];
      const double magnitude = std::fabs(double{scale[0][g]} * q[0][i]) + std::fabs(offset[0][g]);
      ASSERT_LE(std::fabs(value - w.values[i]), 2 * kEps * magnitude)
          << gguf::traits(type).name << " value " << i;
    }
  }
}

// MXFP4 has no quantizer here (gguf/quantize.h): random blocks with scales
// 2^-8 .. 2^7, decoded by decodeRow (both kernels) and by the dequantizer,
// equal exactly (a power of two times a small integer), and a product over
// them matches the dequantized weights' product.
TEST(CpuMatmul, Mxfp4RowsEqualTheDequantizer) {
  constexpr size_t kIn = 256, kOut = 8;
  std::vector<uint8_t> bytes(kOut * kIn / 32 * 17);
  const auto noise = randomFloats(bytes.size(), 5, 0.0f, 255.99f);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(noise[i]);
  for (size_t b = 0; b < bytes.size(); b += 17) bytes[b] = static_cast<uint8_t>(120 + b / 17 % 16);
  std::vector<float> values(kOut * kIn);
  ASSERT_TRUE(gguf::dequantize(TensorType::kMXFP4, bytes, values).ok());
  ASSERT_TRUE(cpu::canDecodeRow(TensorType::kMXFP4));
  for (int portable = 0; portable < 2; ++portable) {
    std::vector<int8_t> q(kIn);
    std::vector<float> scale(kIn / cpu::kGroup), offset(kIn / cpu::kGroup);
    for (size_t r = 0; r < kOut; ++r) {
      cpu::decodeRow(TensorType::kMXFP4, bytes.data() + r * (kIn / 32 * 17), kIn,
                     {q.data(), scale.data(), offset.data()}, portable == 1);
      for (size_t i = 0; i < kIn; ++i) {
        ASSERT_EQ(scale[i / cpu::kGroup] * q[i] + offset[i / cpu::kGroup], values[r * kIn + i])
            << "row " << r << " value " << i;
      }
    }
  }
  model::TensorView w{"w", TensorType::kMXFP4, {kIn, kOut}, bytes};
  const auto x = makeActivations(kIn, 3, 9);
  std::vector<float> y(3 * kOut);
  ThreadPool pool(2);
  cpu::matmul(w, x, y, 3, pool, cpu::MatmulPrecision::kExact);
  for (size_t t = 0; t < 3; ++t) {
    for (size_t r = 0; r < kOut; ++r) {
      double want = 0.0, magnitude = 0.0;
      for (size_t i = 0; i < kIn; ++i) {
        want += double{values[r * kIn + i]} * x[t * kIn + i];
        magnitude += std::fabs(double{values[r * kIn + i]} * x[t * kIn + i]);
      }
      EXPECT_NEAR(y[t * kOut + r], want, (kIn + 32) * kEps * magnitude) << t << " " << r;
    }
  }
}

TEST(CpuMatmul, SimdAndPortableActivationRoundingAgree) {
  constexpr size_t kIn = 256;
  auto x = makeActivations(kIn, 1, 31);
  std::fill(x.begin() + 64, x.begin() + 96, 0.0f);  // an all-zero block
  std::vector<cpu::ActBlock> simd(kIn / cpu::kActBlock), portable(simd.size());
  cpu::quantizeActivations(x.data(), kIn, simd.data());
  cpu::quantizeActivations(x.data(), kIn, portable.data(), true);
  for (size_t b = 0; b < simd.size(); ++b) {
    EXPECT_EQ(simd[b].d, portable[b].d) << b;
    EXPECT_EQ(std::memcmp(simd[b].q, portable[b].q, cpu::kActBlock), 0) << b;
    int sums[2] = {};
    for (size_t i = 0; i < cpu::kActBlock; ++i) {
      sums[i / cpu::kGroup] += portable[b].q[i];
      EXPECT_LE(std::fabs(portable[b].d * portable[b].q[i] - x[b * cpu::kActBlock + i]),
                portable[b].d * 0.5f * (1 + 1e-6f));
    }
    EXPECT_EQ(simd[b].sum[0], sums[0]);
    EXPECT_EQ(simd[b].sum[1], sums[1]);
  }
  EXPECT_EQ(simd[2].d, 0.0f);
}

// cpu::matmuls runs a batch of products as matmul runs each alone, bit for
// bit: single rows (a decode step's experts: one parallel loop over every
// product's rows, inputs rounded once per distinct input) and a batch with
// a multi-row product (each product on its own). The batch mixes types,
// widths and heights, two products share an input, and two others have
// different inputs of the same width, so a row handed to the wrong product
// or the wrong input changes results.
TEST(CpuMatmul, BatchedProductsEqualEachProductAlone) {
  struct Spec {
    TensorType type;
    size_t in, out;
    int input;  // which input row
  };
  // Input 2 feeds a super-block product (Q4_K) and a 32-value one (Q8_0):
  // each needs its own rounding of the same row.
  const Spec specs[] = {{TensorType::kMXFP4, 416, 301, 0}, {TensorType::kMXFP4, 416, 301, 0},
                        {TensorType::kQ8_0, 416, 77, 1},   {TensorType::kQ4_K, 768, 190, 2},
                        {TensorType::kQ8_0, 768, 33, 2},   {TensorType::kQ6_K, 768, 5, 3},
                        {TensorType::kF16, 83, 9, 4}};
  std::vector<Weights> weights;
  for (size_t i = 0; i < std::size(specs); ++i)
    weights.push_back(makeWeights(specs[i].type, specs[i].in, specs[i].out, 40 + i));
  ThreadPool pool(2);
  for (size_t multiRow : {size_t{1}, size_t{3}}) {
    std::vector<std::vector<float>> inputs;
    for (int k = 0; k < 5; ++k) {
      const size_t in = k == 0 || k == 1 ? 416 : k == 4 ? 83 : 768;
      inputs.push_back(makeActivations(in, k == 2 ? multiRow : 1, 300 + k));
    }
    for (bool quantizedOnly : {true, false}) {
      for (auto precision : {MatmulPrecision::kExact, MatmulPrecision::kInt8Activations}) {
        std::vector<cpu::Product> batch;
        std::vector<std::vector<float>> got, want;
        for (size_t i = 0; i < std::size(specs); ++i) {
          if (quantizedOnly && isFloatType(specs[i].type)) continue;
          const size_t n = specs[i].input == 2 ? multiRow : 1;
          const std::vector<float>& x = inputs[specs[i].input];
          want.emplace_back(n * specs[i].out, NAN);
          cpu::matmul(weights[i].view, x, want.back(), n, pool, precision);
          got.emplace_back(n * specs[i].out, NAN);
        }
        for (size_t i = 0, j = 0; i < std::size(specs); ++i) {
          if (quantizedOnly && isFloatType(specs[i].type)) continue;
          const size_t n = specs[i].input == 2 ? multiRow : 1;
          batch.push_back({&weights[i].view, inputs[specs[i].input], got[j++], n});
        }
        cpu::matmuls(batch, pool, precision);
        for (size_t j = 0; j < got.size(); ++j) {
          for (size_t r = 0; r < got[j].size(); ++r) {
            ASSERT_EQ(got[j][r], want[j][r])
                << "product " << j << " value " << r << " multi-row " << multiRow
                << (quantizedOnly ? " quantized" : " with F16")
                << (precision == MatmulPrecision::kExact ? " exact" : " int8");
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvscope::test
