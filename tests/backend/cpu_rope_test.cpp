// cpu::ropeApply rounds as the definition does: each of a pair's four
// products rounded to float once, then one float sum or difference, with no
// fused multiply-add anywhere. The device kernel, llama.cpp's recorded
// references and the Release build's compiler all see this expression; GCC 12
// at -O3 once turned the interleaved layout into fused complex products
// (vfmaddsub), which moved a Release build's logits away from every other
// build's. The oracle forms each product exactly in double and rounds it to
// float, so no contraction can reach it.
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu_ops.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

float product(float a, float b) {
  return static_cast<float>(static_cast<double>(a) * b);
}

TEST(CpuRope, EachProductAndSumIsRoundedOnce) {
  constexpr uint32_t kHeadDim = 80, kDims = 64, kPositions = 40;
  std::vector<float> table(size_t{kPositions} * kDims);
  cpu::ropeTable({.dims = kDims, .theta = 10000.0f}, 5, kPositions, table);
  uint32_t differFromFused = 0;
  for (const bool neox : {false, true}) {
    for (uint32_t t = 0; t < kPositions; ++t) {
      SCOPED_TRACE(testing::Message() << "neox " << neox << " position " << t);
      const std::vector<float> x = randomFloats(kHeadDim, 100 + t, -4.0f, 4.0f);
      const std::span<const float> cosSin = std::span(table).subspan(size_t{t} * kDims, kDims);
      std::vector<float> got = x;
      cpu::ropeApply(got, kDims, neox, cosSin, 0.5f);
      std::vector<float> want = x;
      for (uint32_t i = 0; i < kDims / 2; ++i) {
        const uint32_t a = neox ? i : 2 * i, b = neox ? i + kDims / 2 : 2 * i + 1;
        const float c = cosSin[2 * i], s = cosSin[2 * i + 1];
        want[a] = product(x[a], c) - product(x[b], s);
        want[b] = product(x[a], s) + product(x[b], c);
        // What a fused x0 * c - (x1 * s) gives: the oracle must tell them apart.
        const float fused = static_cast<float>(static_cast<double>(x[a]) * c - product(x[b], s));
        differFromFused += fused != want[a] ? 1 : 0;
      }
      for (uint32_t i = kDims; i < kHeadDim; ++i) want[i] = x[i] * 0.5f;
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)));
    }
  }
  EXPECT_GT(differFromFused, 100u);
}

}  // namespace
}  // namespace kvscope::test
