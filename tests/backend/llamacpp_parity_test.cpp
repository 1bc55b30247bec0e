// CpuBackend against llama.cpp's recorded outputs on stories260K (f16 KV
// cache, CPU backend, build c392e509 of Feb 2025, whose default is the
// non-flash-attention path; see FIXTURES.md).
//
// What is asserted, and why not 1e-3 everywhere. llama.cpp rounds four things
// to f16 in this path: keys and values when they enter the cache, the query
// (the f32 operand of an f16 matrix product takes the f16 type) and the
// softmax weights. CpuBackend does the same. A float32 value that sits within
// an ulp or two of an f16 rounding boundary then rounds either way depending on
// summation order, and a key or value that rounds the other way stays in the
// cache for every later step. Measured on this model:
//  - changing only the matmul summation order moves the forced logits by up
//    to 1.6e-2 (mean 3e-4); with an f32 cache and no f16 rounding the same
//    change moves them by 2e-5 at most;
//  - with correctly rounded matmul dot products, greedy steps 0-10 agree with
//    llama.cpp to 9e-5 (some to 3e-6), then one step jumps to 1.3e-3 and
//    the difference persists;
//  - emulating ggml's SIMD orders (tinyBLAS lanes, vec_dot reductions,
//    ggml_v_expf in softmax and SiLU, double softmax sums, for AVX2 and
//    AVX-512) leaves forced max 2.5e-2 to 3.1e-2, mean 1.66e-3 to 1.70e-3;
//    flash-attention semantics (f16 V accumulator) give mean 3.8e-3 and an
//    f16-accumulating ARM path 2.9e-3, so neither is what was recorded.
// Reaching 1e-3 on every logit would need llama.cpp's float32 arithmetic
// bit for bit (machine ISA and compiler contractions included). This build
// measures: greedy 64/64 tokens identical, top-10 within 9.5e-3, the first
// 8 steps within 5.0e-4; forced max 2.8e-2, mean 1.64e-3, argmax identical on
// every step. Dropping the query/weight f16 rounding gives greedy 3.6e-3 in
// the first 8 steps and forced mean 3.2e-3; a wrong RoPE, norm or GQA mapping
// gives errors of order 1.
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

constexpr int kEarlySteps = 8;

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
  double worst = 0.0, worstEarly = 0.0;
  int step = 0;
  for (const auto& s : j["steps"]) {
    const int32_t expected = s["token"];
    ASSERT_EQ(argmax(logits.last()), expected) << "step " << step;
    for (const auto& top : s["top"]) {
      worst = std::max(worst, std::fabs(logits.last()[top[0].get<int>()] - top[1].get<double>()));
    }
    // Before rounding-boundary differences have reached the cache, the match
    // is tight; this is what catches a wrong f16 rounding model.
    if (step < kEarlySteps) worstEarly = worst;
    ASSERT_TRUE(b->forward({std::span(&expected, 1)}, logits).ok());
    ++step;
  }
  EXPECT_EQ(step, 64);
  EXPECT_LE(worstEarly, 1e-3);
  EXPECT_LE(worst, 2e-2);
  std::printf("greedy: %d tokens identical, max |top-10 logit diff| %.2e (first %d steps %.2e)\n",
              step, worst, kEarlySteps, worstEarly);
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
