// A measurement, not a test (disabled; docs/RESULTS.md "Switching the KV
// policy" quotes it): a switch from an f16 cache re-encodes the stored rows
// (runtime/kv_reencode.h) where running the history again would compute each
// layer's rows under the compressed caches below it. How far each is from
// the f16 session, teacher-forced over the rest of the text:
//   M=model.gguf test_runtime --gtest_also_run_disabled_tests
//     --gtest_filter='KvSwitchFidelity.*'
// (M unset: stories260K.) Prints per policy the mean KLD against f16 of both
// caches over the forced steps, the switch's time and a prefill's.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "model/model_tokenizer.h"
#include "runtime/backend_factory.h"
#include "runtime/eval.h"
#include "runtime/session.h"
#include "support/policy.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

TEST(KvSwitchFidelity, DISABLED_ReEncodeAgainstRunningTheHistoryAgain) {
  const char* path = std::getenv("M");
  auto file = model::ModelFile::open(path && *path ? std::filesystem::path(path)
                                          : sharedFile("models/stories260K.gguf"));
  ASSERT_TRUE(file.ok()) << file.error().describe();
  std::shared_ptr<const model::ModelFile> m(std::move(file).value());
  std::ifstream in(sharedFile("fixtures/story-a.txt"));
  std::stringstream story;
  story << in.rdbuf();
  auto tokenizer = model::loadTokenizer(*m);
  ASSERT_TRUE(tokenizer.ok());
  const auto ids = tokenizer->encode(story.str(), {.addSpecial = true});
  const size_t prefill = std::min<size_t>(ids.size() / 2, 300);
  const size_t steps = std::min<size_t>(ids.size() - prefill - 1, 150);
  const auto open = [&](const kv::KvPolicy& policy) {
    const runtime::BackendChoice choice{.kind = "cpu", .threads = 2, .kvPolicy = policy};
    auto backend = runtime::makeBackend(m, choice);
    auto tok = model::loadTokenizer(*m);
    EXPECT_TRUE(backend.ok() && tok.ok());
    return std::make_unique<runtime::Session>(m, std::move(backend).value(), std::move(tok).value(),
                                              runtime::makeBackendFactory(m, choice), policy);
  };
  runtime::GenerateOptions once;
  once.maxTokens = 1;
  once.sampler.temperature = 0.0f;
  const std::span<const int32_t> head(ids.data(), prefill);
  for (const char* text : {"k=q8_0,v=turbo3", "kv=turbo3", "kv=q4_0", "k=q8_0,v=turbo4b",
                           "kv=turbo2"}) {
    const kv::KvPolicy policy = policyOf(text);
    auto f16 = open({}), reencoded = open({});
    ASSERT_TRUE(f16->generate(head, once).ok());
    ASSERT_TRUE(reencoded->generate(head, once).ok());
    auto t0 = Clock::now();
    ASSERT_TRUE(reencoded->setKvPolicy(policy).ok());
    const double switchMs = msSince(t0);
    auto again = open(policy);
    t0 = Clock::now();
    ASSERT_TRUE(again->generate(head, once).ok());
    const double prefillMs = msSince(t0);
    double kldReencoded = 0.0, kldAgain = 0.0;
    for (size_t i = 0; i < steps; ++i) {
      const int32_t token = ids[prefill + i];
      std::vector<float> logits[3];
      runtime::Session* sessions[3] = {f16.get(), reencoded.get(), again.get()};
      for (int k = 0; k < 3; ++k) {
        backend::Logits out;
        auto& b = const_cast<backend::Backend&>(sessions[k]->backend());
        ASSERT_TRUE(b.forward({std::span(&token, 1)}, out).ok());
        logits[k] = out.values;
      }
      kldReencoded += runtime::klDivergence(logits[0], logits[1]);
      kldAgain += runtime::klDivergence(logits[0], logits[2]);
    }
    std::printf("| %s | %zu + %zu | %.3e | %.3e | %.2f | %.1f ms | %.1f ms |\n", text, prefill,
                steps, kldReencoded / steps, kldAgain / steps, kldReencoded / kldAgain, switchMs,
                prefillMs);
  }
}

}  // namespace
}  // namespace kvscope::test
