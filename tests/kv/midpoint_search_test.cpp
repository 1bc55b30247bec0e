// kv::MidpointSearch (kv/midpoint_search.h) against its definition, counted
// here: a value's code is the number of midpoints strictly below it. The
// values probed are every midpoint and its float neighbours, a fine sweep
// (which crosses every bin edge of the AVX2 table), and the special values.
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "kv/lloyd_max.h"
#include "kv/midpoint_search.h"

namespace kvscope::kv {
namespace {

std::vector<float> midpointsOf(uint32_t bits) {
  const auto book = gaussianCodebook(bits).centroids;
  std::vector<float> m;
  for (size_t j = 0; j + 1 < book.size(); ++j)
    m.push_back(static_cast<float>(0.5 * (book[j] + book[j + 1])));
  return m;
}

std::vector<float> probes(const std::vector<float>& midpoints) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  std::vector<float> u = {0.0f,
                          -0.0f,
                          kInf,
                          -kInf,
                          std::numeric_limits<float>::quiet_NaN(),
                          1e30f,
                          -1e30f,
                          std::numeric_limits<float>::denorm_min()};
  for (float m : midpoints) {
    for (float v : {m, std::nextafter(m, kInf), std::nextafter(m, -kInf)}) {
      u.push_back(v);
      u.push_back(std::nextafter(v, kInf));
    }
  }
  for (int i = -600000; i <= 600000; ++i) u.push_back(static_cast<float>(i) * 1e-5f);
  return u;
}

uint32_t countBelow(const std::vector<float>& midpoints, float u) {
  uint32_t n = 0;
  for (float m : midpoints) n += m < u ? 1 : 0;
  return n;
}

TEST(MidpointSearch, CodeIsTheCountOfMidpointsBelow) {
  for (uint32_t bits = 1; bits <= 6; ++bits) {
    const auto midpoints = midpointsOf(bits);
    const MidpointSearch search(midpoints);
    size_t checked = 0;
    for (float u : probes(midpoints)) {
      ASSERT_EQ(search.code(u), countBelow(midpoints, u)) << bits << " bits, u " << u;
      ++checked;
    }
    EXPECT_GT(checked, 1200000u);
  }
}

#if defined(__AVX2__)
TEST(MidpointSearch, EightLanesMatchTheDefinition) {
  for (uint32_t bits = 1; bits <= 6; ++bits) {
    const auto midpoints = midpointsOf(bits);
    const MidpointSearch search(midpoints);
    auto u = probes(midpoints);
    u.resize((u.size() + 7) / 8 * 8, 0.5f);
    for (size_t i = 0; i < u.size(); i += 8) {
      alignas(32) int32_t codes[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(codes), search.codes8(_mm256_loadu_ps(&u[i])));
      for (size_t k = 0; k < 8; ++k) {
        ASSERT_EQ(codes[k], static_cast<int32_t>(countBelow(midpoints, u[i + k])))
            << bits << " bits, u " << u[i + k];
      }
    }
  }
}
#endif

}  // namespace
}  // namespace kvscope::kv
