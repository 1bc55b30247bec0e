// cpu::geluMul (GELU's tanh form times the up projection, Gemma's gate)
// against the definition in double precision, over gates from -12 to 12
// (both tails, where tanh is +-1, and the steep middle) and a length whose
// last values take the scalar tail of the SIMD loop. Bound: the tanh error
// (the vector tanh's ~3e-7 absolute; std::tanh's ulp) scaled by 0.5 |g| |up|,
// plus a few float roundings of the result.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu_ops.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

TEST(CpuGelu, GateMatchesTheTanhFormInDoublePrecision) {
  constexpr size_t kN = 1003;
  std::vector<float> gate(kN), up = randomFloats(kN, 7, -3.0f, 3.0f), out(kN);
  for (size_t i = 0; i < kN; ++i) gate[i] = -12.0f + 24.0f * static_cast<float>(i) / (kN - 1);
  cpu::geluMul(gate, up, out);
  double worst = 0.0;
  for (size_t i = 0; i < kN; ++i) {
    const double g = gate[i];
    const double ref =
        0.5 * g * (1.0 + std::tanh(0.7978845608 * g * (1.0 + 0.044715 * g * g))) * up[i];
    const double bound = 4e-7 * 0.5 * std::fabs(g * up[i]) + 4 * 0x1p-24 * std::fabs(ref) + 1e-30;
    const double err = std::fabs(out[i] - ref);
    ASSERT_LE(err, bound) << "gate " << g << " up " << up[i];
    worst = std::max(worst, err / bound);
  }
  EXPECT_GT(worst, 0.0);  // not every value exact: the bound is not vacuous
  // In place, as the forward pass calls it (out aliases the gate).
  std::vector<float> inPlace = gate;
  cpu::geluMul(inPlace, up, inPlace);
  EXPECT_EQ(inPlace, out);
}

}  // namespace
}  // namespace kvscope::test
