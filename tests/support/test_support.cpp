#include "support/test_support.h"

#include <cstdlib>

namespace kvscope::test {

std::filesystem::path sharedDir() {
  if (const char* env = std::getenv("KVSCOPE_SHARED"); env && env[0]) return env;
  return KVSCOPE_DEFAULT_SHARED;
}

std::filesystem::path sharedFile(const std::filesystem::path& relative) {
  return sharedDir() / relative;
}

std::vector<float> randomFloats(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace kvscope::test
