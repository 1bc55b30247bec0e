// backend::LogitComparison: differences relative to the reference row's
// spread, and top tokens that agree or tie within the step's own differences.
#include "backend/logit_comparison.h"

#include <vector>

#include <gtest/gtest.h>

namespace kvscope::test {
namespace {

TEST(LogitComparison, MeasuresDifferencesAgainstTheSpread) {
  backend::LogitComparison c;
  c.add(std::vector<float>{0.0f, 2.0f, 1.0f}, std::vector<float>{0.0f, 2.0f, 1.5f});
  EXPECT_DOUBLE_EQ(c.worstRel, 0.25);  // 0.5 of a spread of 2
  EXPECT_DOUBLE_EQ(c.meanRel, 0.25 / 3);
  EXPECT_EQ(c.argmaxAgree, 1u);
}

TEST(LogitComparison, AFlipCountsAsAgreementOnlyWithinTheTieBound) {
  // Top tokens 1 and 2 are 1e-4 of the spread apart in the reference; the
  // tested row flips them.
  const std::vector<float> ref{0.0f, 1.0f, 0.9999f}, got{0.0f, 0.9998f, 0.9999f};
  backend::LogitComparison exact;
  exact.add(ref, got);
  EXPECT_EQ(exact.argmaxAgree, 0u);
  EXPECT_NEAR(exact.lastGap, 1e-4, 1e-7);
  backend::LogitComparison ties;
  ties.tieRel = 2e-4;
  ties.add(ref, got);
  EXPECT_EQ(ties.argmaxAgree, 1u);
  ties.tieRel = 5e-5;
  ties.add(ref, got);
  EXPECT_EQ(ties.argmaxAgree, 1u);
  EXPECT_EQ(ties.steps, 2u);
}

}  // namespace
}  // namespace kvscope::test
