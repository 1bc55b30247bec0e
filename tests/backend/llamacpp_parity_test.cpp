// CpuBackend against llama.cpp's recorded outputs on stories260K (f16 KV
// cache, CPU backend, build c392e509; see FIXTURES.md).
//
// What is asserted, and why not 1e-3 everywhere: this 64-wide model amplifies
// 1e-7 differences in values that are then rounded to f16 (queries and softmax
// weights in f16-cache attention) into logit differences of 1e-3 and more, and
// llama.cpp's SIMD summation order and exp approximation cannot be replicated
// without copying them. Measured (this build): greedy top-10 within 9.5e-3 with
// all 64 tokens identical; forced max 2.8e-2, mean 1.6e-3, argmax identical on
// every step. A wrong RoPE, norm or GQA mapping gives errors of order 1.
#include <algorithm>
#include <cmath>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backend/cpu_backend.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

nlohmann::json readJson(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

std::unique_ptr<backend::CpuBackend> makeBackend() {
  auto model = model::ModelFile::open(sharedFile("models/stories260K.gguf"));
  EXPECT_TRUE(model.ok()) << model.error().describe();
  if (!model.ok()) return nullptr;
  auto b = backend::CpuBackend::create(
      std::shared_ptr<const model::ModelFile>(std::move(model).value()));
  EXPECT_TRUE(b.ok()) << b.error().describe();
  return b.ok() ? std::move(b).value() : nullptr;
}

int32_t argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

TEST(LlamaCppParity, GreedyTokensAndTop10Logits) {
  const auto ref = sharedFile("reference/stories260K.greedy.json");
  KVS_REQUIRE_FIXTURE(ref);
  auto j = readJson(ref);
  auto b = makeBackend();
  ASSERT_TRUE(b);
  std::vector<int32_t> prompt = j["prompt_tokens"].get<std::vector<int32_t>>();
  backend::Logits logits;
  ASSERT_TRUE(b->forward({prompt}, logits).ok());
  double worst = 0.0;
  int step = 0;
  for (const auto& s : j["steps"]) {
    const int32_t expected = s["token"];
    ASSERT_EQ(argmax(logits.last()), expected) << "step " << step;
    for (const auto& top : s["top"]) {
      worst = std::max(worst, std::fabs(logits.last()[top[0].get<int>()] - top[1].get<double>()));
    }
    ASSERT_TRUE(b->forward({std::span(&expected, 1)}, logits).ok());
    ++step;
  }
  EXPECT_EQ(step, 64);
  EXPECT_LE(worst, 2e-2);
  std::printf("greedy: %d tokens identical, max |top-10 logit diff| = %.2e\n", step, worst);
}

TEST(LlamaCppParity, ForcedStepsEveryLogit) {
  const auto ref = sharedFile("reference/stories260K.forced-f16.json");
  KVS_REQUIRE_FIXTURE(ref);
  auto j = readJson(ref);
  auto b = makeBackend();
  ASSERT_TRUE(b);
  const auto tokens = j["prompt_tokens"].get<std::vector<int32_t>>();
  const size_t prefill = j["prefill"];
  const auto& expected = j["logits"];
  ASSERT_EQ(expected.size(), tokens.size() - prefill);
  backend::Logits logits;
  ASSERT_TRUE(b->forward({std::span(tokens).first(prefill)}, logits).ok());
  double worst = 0.0, sum = 0.0;
  size_t count = 0, argmaxAgree = 0;
  for (size_t s = 0; s < expected.size(); ++s) {
    const auto want = expected[s].get<std::vector<float>>();
    ASSERT_EQ(want.size(), logits.vocab);
    for (size_t v = 0; v < want.size(); ++v) {
      const double diff = std::fabs(logits.last()[v] - want[v]);
      worst = std::max(worst, diff);
      sum += diff;
      ++count;
    }
    argmaxAgree += argmax(logits.last()) == argmax(want) ? 1 : 0;
    if (s + 1 < expected.size()) {
      ASSERT_TRUE(b->forward({std::span(&tokens[prefill + s], 1)}, logits).ok());
    }
  }
  const double mean = sum / static_cast<double>(count);
  std::printf("forced: %zu steps, max |logit diff| %.2e, mean %.2e, argmax agreement %zu/%zu\n",
              expected.size(), worst, mean, argmaxAgree, expected.size());
  EXPECT_LE(worst, 5e-2);
  EXPECT_LE(mean, 3e-3);
  EXPECT_EQ(argmaxAgree, expected.size());
}

}  // namespace
}  // namespace kvscope::test
