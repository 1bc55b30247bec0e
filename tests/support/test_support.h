#pragma once
// Helpers shared by all test areas: fixture paths and seeded random data.

#include <cstdint>
#include <filesystem>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace kvscope::test {

// $KVSCOPE_SHARED, else the shared/ folder beside the repository.
std::filesystem::path sharedDir();

// Path to a file under sharedDir(); empty when the shared folder is missing.
std::filesystem::path sharedFile(const std::filesystem::path& relative);

// Uniform floats in [lo, hi) from a fixed seed, so failures reproduce.
std::vector<float> randomFloats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f);

}  // namespace kvscope::test

// Skips the current test with a clear message when a shared fixture is absent.
#define KVS_REQUIRE_FIXTURE(path)                                    \
  do {                                                               \
    if (!std::filesystem::exists(path))                              \
      GTEST_SKIP() << "fixture not found: " << (path)                \
                   << " (set KVSCOPE_SHARED to the shared/ folder)"; \
  } while (0)
