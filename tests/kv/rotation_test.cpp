// The turbo rotations: orthogonal, invertible, deterministic from the seed;
// and the measurement that chose the dense rotation for non-power-of-two d.
#include <bit>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kv/lloyd_max.h"
#include "kv/rotation.h"

namespace kvscope::kv {
namespace {

constexpr uint32_t kDims[] = {8, 16, 48, 64, 80, 96, 100, 128, 256};

double maxOrthogonalityError(const std::vector<float>& r, uint32_t d) {
  double worst = 0.0;
  for (uint32_t i = 0; i < d; ++i) {
    for (uint32_t j = 0; j < d; ++j) {
      double dot = 0.0;
      for (uint32_t k = 0; k < d; ++k) dot += double{r[i * d + k]} * r[j * d + k];
      worst = std::max(worst, std::fabs(dot - (i == j ? 1.0 : 0.0)));
    }
  }
  return worst;
}

TEST(Rotation, IsOrthogonal) {
  for (uint32_t d : kDims) {
    EXPECT_LT(maxOrthogonalityError(makeRotation(d, 7), d), 1e-5) << d;
    EXPECT_LT(maxOrthogonalityError(blockHadamardRotation(d, 7), d), 1e-5) << d;
    EXPECT_LT(maxOrthogonalityError(denseRotation(d, 7), d), 1e-5) << d;
  }
}

TEST(Rotation, HadamardIsSignedWalshHadamard) {
  const uint32_t d = 16;
  const auto r = hadamardRotation(d, 3);
  for (uint32_t j = 0; j < d; ++j) {
    // Column j is s_j times column j of H: compare signs against row 0.
    const float s = r[j] * 4.0f;
    ASSERT_EQ(std::fabs(s), 1.0f);
    for (uint32_t i = 0; i < d; ++i) {
      const float h = (std::popcount(i & j) & 1) ? -0.25f : 0.25f;
      EXPECT_EQ(r[i * d + j], h * s) << i << "," << j;
    }
  }
  EXPECT_EQ(makeRotation(d, 3), r);
}

TEST(Rotation, RotateBackInverts) {
  for (uint32_t d : kDims) {
    const auto r = makeRotation(d, 11);
    std::mt19937 rng(d);
    std::normal_distribution<float> normal;
    std::vector<float> x(d), y(d), back(d);
    for (float& v : x) v = normal(rng);
    rotateVector(r, x, y);
    rotateVectorBack(r, y, back);
    for (uint32_t i = 0; i < d; ++i) EXPECT_NEAR(back[i], x[i], 1e-5) << d;
  }
}

// The fast transform against the dense matrix product in double: float32
// additions over log2 d stages leave a few ulps of the row's norm.
TEST(Rotation, FastHadamardEqualsTheMatrix) {
  for (uint32_t d : {8u, 16u, 64u, 128u, 256u}) {
    const auto r = hadamardRotation(d, 13);
    std::vector<float> signs(d);
    for (uint32_t j = 0; j < d; ++j) signs[j] = r[j] > 0 ? 1.0f : -1.0f;
    std::mt19937 rng(d + 1);
    std::normal_distribution<float> normal;
    std::vector<float> x(d), want(d), got(d), wantBack(d), gotBack(d);
    for (float& v : x) v = normal(rng);
    double norm = 0.0;
    for (float v : x) norm += double{v} * v;
    const double tol = 8.0 * std::log2(d) * 0x1p-24 * std::sqrt(norm);
    rotateVector(r, x, want);
    hadamardRotate(signs, x.data(), got.data());
    rotateVectorBack(r, x, wantBack);
    hadamardRotateBack(signs, x.data(), gotBack.data());
    for (uint32_t i = 0; i < d; ++i) {
      EXPECT_NEAR(got[i], want[i], tol) << d << " " << i;
      EXPECT_NEAR(gotBack[i], wantBack[i], tol) << d << " back " << i;
    }
  }
}

TEST(Rotation, DeterministicFromSeed) {
  EXPECT_EQ(makeRotation(80, 5), makeRotation(80, 5));
  EXPECT_NE(makeRotation(80, 5), makeRotation(80, 6));
  EXPECT_EQ(makeRotation(64, 5), makeRotation(64, 5));
  EXPECT_NE(makeRotation(64, 5), makeRotation(64, 6));
}

// Round-trip MSE of a 3-bit norm-corrected quantizer (u = R x / |x|, nearest
// centroid, rescale to |x|, rotate back) over 2000 unit rows of five kinds:
// 0 isotropic Gaussian; 1 channels scaled 10^U(-1,1); 2 one-hot rows;
// 3 four channels x30; 4 the last channel x30 (an outlier in block-WHT's
// smallest Hadamard piece).
double roundTripMse(const std::vector<float>& r, uint32_t d, int kind) {
  const auto book = cachedUnitVectorCodebook(3, d);
  std::mt19937 rng(1234 + kind);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<double> scale(d, 1.0);
  if (kind == 1)
    for (double& s : scale) s = std::pow(10.0, uniform(rng));
  if (kind == 3)
    for (uint32_t i = 0; i < d; i += d / 4) scale[(i * 7 + 3) % d] = 30.0;
  if (kind == 4) scale[d - 1] = 30.0;
  double total = 0.0;
  const int n = 2000;
  std::vector<float> x(d), y(d), c(d), back(d);
  for (int t = 0; t < n; ++t) {
    double norm = 0.0;
    for (uint32_t i = 0; i < d; ++i) {
      x[i] = kind == 2 ? (i == t % d ? 1.0f : 0.0f) : static_cast<float>(scale[i] * normal(rng));
      norm += double{x[i]} * x[i];
    }
    for (float& v : x) v = static_cast<float>(v / std::sqrt(norm));
    rotateVector(r, x, y);
    double cNorm = 0.0;
    for (uint32_t i = 0; i < d; ++i) {
      float best = book[0];
      for (float v : book)
        if (std::fabs(v - y[i]) < std::fabs(best - y[i])) best = v;
      c[i] = best;
      cNorm += double{best} * best;
    }
    for (float& v : c) v = static_cast<float>(v / std::sqrt(cNorm));
    rotateVectorBack(r, c, back);
    for (uint32_t i = 0; i < d; ++i) total += (double{back[i]} - x[i]) * (double{back[i]} - x[i]);
  }
  return total / n;
}

// The choice for non-power-of-two d. Measured (seed 9; block-WHT / dense):
//   d=48  iso .0320/.0322  log-uni .0343/.0318  one-hot .0198/.0333  4x30 .0267/.0361  last
//   .0331/.0336 d=80  iso .0333/.0330  log-uni .0318/.0336  one-hot .0169/.0350  4x30 .0283/.0355
//   last .0316/.0310 d=96  iso .0334/.0336  log-uni .0317/.0333  one-hot .0196/.0324  4x30
//   .0281/.0343  last .0326/.0316 d=100 iso .0334/.0333  log-uni .0321/.0333  one-hot .0310/.0328
//   4x30 .0285/.0312  last .1291/.0313
// Block-WHT is up to ~40% better on sparse rows but 4x worse when an outlier
// lands in a small piece (d=100 = 64+32+4); the dense (Haar) rotation gives
// the codebook's design error for every row. The worst case decides: dense.
TEST(Rotation, DenseBeatsBlockHadamardForOtherDims) {
  for (uint32_t d : {48u, 80u, 96u, 100u}) {
    const auto block = blockHadamardRotation(d, 9), dense = denseRotation(d, 9);
    double worstBlock = 0, worstDense = 0, isotropic = 0;
    for (int kind = 0; kind < 5; ++kind) {
      const double b = roundTripMse(block, d, kind), q = roundTripMse(dense, d, kind);
      std::printf("d=%u rows=%s block-WHT %.5f dense %.5f\n", d,
                  kind == 0   ? "isotropic"
                  : kind == 1 ? "log-uniform"
                  : kind == 2 ? "one-hot"
                  : kind == 3 ? "4 outliers x30"
                              : "last channel x30",
                  b, q);
      if (kind == 0) {
        // Isotropic rows see every rotation alike.
        EXPECT_NEAR(b, q, 0.05 * q) << d;
        isotropic = q;
      }
      // The Haar rotation makes every row look isotropic.
      EXPECT_NEAR(q, isotropic, 0.15 * isotropic) << d << " kind " << kind;
      worstBlock = std::max(worstBlock, b);
      worstDense = std::max(worstDense, q);
    }
    EXPECT_LE(worstDense, worstBlock * 1.1) << d;
  }
  // The piece of 4 in d=100 is where block-WHT breaks down.
  EXPECT_GT(roundTripMse(blockHadamardRotation(100, 9), 100, 4),
            2.0 * roundTripMse(denseRotation(100, 9), 100, 4));
}

}  // namespace
}  // namespace kvscope::kv
