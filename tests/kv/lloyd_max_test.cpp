// Lloyd-Max codebooks: the N(0,1) ones against Max's published tables, the
// unit-vector ones against their laws (large-d limit, exact variance).
//
// Reference: J. Max, "Quantizing for minimum distortion", IRE Trans. Inform.
// Theory IT-6 (1960) 7-12, Table I (optimum quantizer for a normal input):
// output levels and mean squared error for N = 2, 4, 8, 16. Max prints four
// significant digits, so the centroids are compared to 5e-4 and the
// distortions to 0.1%.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include <gtest/gtest.h>

#include "kv/lloyd_max.h"

namespace kvscope::kv {
namespace {

struct MaxTable {
  uint32_t bits;
  std::vector<double> positiveLevels;
  double distortion;
};

const MaxTable kMax1960[] = {
    {1, {0.7979}, 0.3634},
    {2, {0.4528, 1.510}, 0.1175},
    {3, {0.2451, 0.7560, 1.344, 2.152}, 0.03454},
    {4, {0.1284, 0.3881, 0.6568, 0.9424, 1.256, 1.618, 2.069, 2.733}, 0.009497},
};

TEST(LloydMax, GaussianMatchesMax1960) {
  for (const auto& t : kMax1960) {
    const LloydMaxCodebook book = gaussianCodebook(t.bits);
    const size_t levels = size_t{1} << t.bits, half = levels / 2;
    ASSERT_EQ(book.centroids.size(), levels);
    for (size_t i = 0; i < half; ++i) {
      EXPECT_NEAR(book.centroids[half + i], t.positiveLevels[i], 5e-4) << t.bits << " bits, " << i;
      EXPECT_DOUBLE_EQ(book.centroids[half - 1 - i], -book.centroids[half + i]);
    }
    EXPECT_NEAR(book.distortion, t.distortion, 1e-3 * t.distortion) << t.bits << " bits";
  }
}

// Past Max's table (5 and 6 bits, turbo5b/turbo6b): the distortion times 4^b
// grows with b towards the Panter-Dite limit pi sqrt(3) / 2 (Panter and Dite
// 1951: high-resolution quantization of a density f, D ~ (int f^(1/3))^3 /
// 12 * 4^-b, which is pi sqrt(3) / 2 * 4^-b for N(0, 1)).
TEST(LloydMax, GaussianApproachesPanterDite) {
  const double limit = std::numbers::pi * std::sqrt(3.0) / 2.0;
  double previous = 0.0;
  for (uint32_t bits = 1; bits <= 6; ++bits) {
    const LloydMaxCodebook book = gaussianCodebook(bits);
    ASSERT_EQ(book.centroids.size(), size_t{1} << bits);
    EXPECT_TRUE(std::is_sorted(book.centroids.begin(), book.centroids.end()));
    const double scaled = book.distortion * std::pow(4.0, bits);
    EXPECT_GT(scaled, previous) << bits << " bits";
    EXPECT_LT(scaled, limit) << bits << " bits";
    previous = scaled;
  }
  EXPECT_GT(previous, 0.95 * limit) << "6 bits is close to the limit";
}

// The coordinate of a random unit vector in R^d, times sqrt(d), tends to
// N(0,1): the scaled unit-vector codebook approaches Max's as d grows.
TEST(LloydMax, UnitVectorTendsToGaussian) {
  for (uint32_t bits = 1; bits <= 4; ++bits) {
    const LloydMaxCodebook gauss = gaussianCodebook(bits);
    double previous = INFINITY;
    for (uint32_t d : {16u, 64u, 256u, 1024u}) {
      const LloydMaxCodebook unit = unitVectorCodebook(bits, d);
      double worst = 0.0;
      for (size_t i = 0; i < unit.centroids.size(); ++i) {
        worst = std::max(worst, std::fabs(unit.centroids[i] * std::sqrt(d) - gauss.centroids[i]));
      }
      EXPECT_LT(worst, previous) << bits << " bits, d " << d;
      previous = worst;
      // d * D_d approaches the N(0,1) distortion.
      EXPECT_NEAR(unit.distortion * d, gauss.distortion, 0.2 * gauss.distortion * 16.0 / d);
    }
    EXPECT_LT(previous, 2e-3 * (1 << bits)) << bits << " bits";
  }
}

// Independent check of the unit-vector law's 1-bit codebook: the centroid is
// E|t| = Gamma(d/2) / (sqrt(pi) Gamma((d+1)/2)), exactly, and the distortion
// is 1/d - (E|t|)^2.
TEST(LloydMax, UnitVectorOneBitIsExact) {
  for (uint32_t d : {8u, 48u, 80u, 100u, 128u}) {
    const double meanAbs = std::exp(std::lgamma(d / 2.0) - std::lgamma((d + 1) / 2.0)) /
                           std::sqrt(3.14159265358979323846);
    const LloydMaxCodebook book = unitVectorCodebook(1, d);
    EXPECT_NEAR(book.centroids[1], meanAbs, 1e-7 * meanAbs) << d;
    EXPECT_NEAR(book.distortion, 1.0 / d - meanAbs * meanAbs, 1e-6 / d) << d;
  }
}

TEST(LloydMax, CachedCodebookIsStableAndAscending) {
  const auto a = cachedUnitVectorCodebook(3, 96);
  const auto b = cachedUnitVectorCodebook(3, 96);
  EXPECT_EQ(a.data(), b.data());
  ASSERT_EQ(a.size(), 8u);
  for (size_t i = 1; i < a.size(); ++i) EXPECT_LT(a[i - 1], a[i]);
  const LloydMaxCodebook exact = unitVectorCodebook(3, 96);
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_FLOAT_EQ(a[i], static_cast<float>(exact.centroids[i]));
}

}  // namespace
}  // namespace kvscope::kv
