// auto tries its candidate plans (runtime/kv_auto.h) on the demo model and
// story-a, through eval as the CLI runs it (CPU backend):
//   - every candidate kv::autoPlanCandidates makes is tried, once, over the
//     last 64 tokens of the 512-token calibration window (story-a's first
//     512 tokens: the demo model's context), and the plan taken
//     is the one with the lowest trial KLD;
//   - a trial measures its own plan's cache: the trials differ, none is 0,
//     and each is within 1.5x of eval's KLD for that plan's explicit policy over
//     the same 64 predictions (eval runs the whole text under the policy, so
//     earlier layers' errors reach the rows too: near, not equal);
//   - without a backend factory, the first candidate is taken untried, and
//     the plan says why.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu_backend.h"
#include "model/model_tokenizer.h"
#include "runtime/eval.h"
#include "runtime/kv_auto.h"
#include "support/demo_model.h"
#include "support/policy.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

std::vector<int32_t> storyTokens(const model::ModelFile& m) {
  std::ifstream in(sharedFile("fixtures/story-a.txt"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto tokenizer = model::loadTokenizer(m);
  EXPECT_TRUE(tokenizer.ok());
  return tokenizer.ok() ? tokenizer->encode(text, {.addSpecial = true}) : std::vector<int32_t>{};
}

TEST(AutoTrials, TheCandidateWithTheLowestTrialKldIsTaken) {
  KVS_REQUIRE_FIXTURE(sharedFile("fixtures/story-a.txt"));
  const auto model = openDemoModel();
  ASSERT_TRUE(model);
  // The calibration window and one more token: eval feeds all but the last,
  // the demo model's whole context.
  std::vector<int32_t> tokens = storyTokens(*model);
  ASSERT_GT(tokens.size(), kv::kAutoCalibrationTokens);
  tokens.resize(kv::kAutoCalibrationTokens + 1);
  constexpr uint32_t kPrefill = 16;
  const runtime::BackendChoice cpu{.kind = "cpu", .threads = 2};
  auto result = runtime::evaluateKvPolicy(
      model, tokens, {.kind = "cpu", .threads = 2, .kvPolicy = policyOf("auto:4.5")},
      {.prefill = kPrefill});
  ASSERT_TRUE(result.ok()) << result.error().describe();
  ASSERT_TRUE(result->autoPlan);
  const kv::AutoPlan& plan = *result->autoPlan;

  // The candidates, made again from the f16 rows of the calibration window.
  auto f16 = backend::CpuBackend::create(model, {.threads = 2});
  ASSERT_TRUE(f16.ok());
  backend::Logits logits;
  ASSERT_TRUE((*f16)->forward({std::span(tokens).first(kv::kAutoCalibrationTokens)}, logits).ok());
  auto untried = runtime::chooseAutoPolicy(**f16, policyOf("auto:4.5"), {});
  ASSERT_TRUE(untried.ok()) << untried.error().describe();
  EXPECT_TRUE(untried->plan.trials.empty());
  EXPECT_EQ(untried->plan.method, "mix, V weighted 1/3");
  EXPECT_EQ(untried->plan.untried, "no backend to try them on");
  EXPECT_EQ(plan.untried, "");

  ASSERT_GE(plan.trials.size(), 3u) << "the demo model's candidates at 4.5 bits";
  EXPECT_EQ(plan.trialTokens, runtime::kAutoTrialTokens);
  const kv::AutoTrial* best = &plan.trials.front();
  for (const kv::AutoTrial& t : plan.trials) {
    if (t.kld < best->kld) best = &t;
    EXPECT_GT(t.kld, 0.0) << t.method;
    EXPECT_LE(t.bitsPerValue, 4.5 + 1e-9) << t.method;
    EXPECT_EQ(std::count_if(plan.trials.begin(), plan.trials.end(),
                            [&](const kv::AutoTrial& o) { return o.method == t.method; }),
              1)
        << t.method;
  }
  EXPECT_EQ(plan.method, best->method);
  EXPECT_NE(plan.trials.front().kld, plan.trials.back().kld);

  // Each tried plan's trial against eval of its explicit policy: the trial's
  // row r predicts token 448 + r + 1, eval's step s token kPrefill + s.
  const uint32_t keep = kv::kAutoCalibrationTokens - runtime::kAutoTrialTokens;
  for (const std::string& method :
       {std::string("mix, V weighted 1/3"), std::string("uniform turbo4b")}) {
    const auto tried = std::find_if(plan.trials.begin(), plan.trials.end(),
                                    [&](const kv::AutoTrial& t) { return t.method == method; });
    ASSERT_NE(tried, plan.trials.end()) << method;
    runtime::BackendChoice choice = cpu;
    choice.kvPolicy = method.starts_with("uniform") ? policyOf("kv=turbo4b") : untried->policy;
    auto full = runtime::evaluateKvPolicy(model, tokens, choice, {.prefill = kPrefill});
    ASSERT_TRUE(full.ok()) << full.error().describe();
    double sum = 0.0;
    for (uint32_t r = 0; r < runtime::kAutoTrialTokens; ++r)
      sum += full->steps[keep + r + 1 - kPrefill].kld;
    const double evalKld = sum / runtime::kAutoTrialTokens;
    std::printf("%-22s trial %.3e  eval over the same predictions %.3e\n", method.c_str(),
                tried->kld, evalKld);
    EXPECT_GT(tried->kld, evalKld / 1.5) << method;
    EXPECT_LT(tried->kld, evalKld * 1.5) << method;
  }
}

}  // namespace
}  // namespace kvscope::test
