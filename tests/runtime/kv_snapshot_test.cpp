// KvSnapshot and Observer::onKv on stories260K (5 layers, 4 KV heads, head_dim 8): the
// accounting equals the analytic f16 size, and the Session reports the cache at the end
// of every generation with the final row count.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "backend/cpu_backend.h"
#include "model/model_tokenizer.h"
#include "kv/auto_policy.h"
#include "runtime/backend_factory.h"
#include "runtime/kv_snapshot.h"
#include "runtime/session.h"
#include "support/demo_model.h"
#include "support/policy.h"
#include "support/stories_session.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

// f16 bytes of one token: 5 layers x 4 KV heads x (K + V) x 8 values x 2 bytes.
constexpr uint64_t kF16BytesPerToken = 5 * 4 * 2 * 8 * 2;

struct KvRecorder : runtime::Observer {
  std::vector<runtime::KvSnapshot> snapshots;
  void onKv(const runtime::KvSnapshot& s) override { snapshots.push_back(s); }
};

class KvSnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override { KVS_REQUIRE_FIXTURE(sharedFile("models/stories260K.gguf")); }
};

TEST_F(KvSnapshotTest, EmptyCacheHasLayersAndNoBytes) {
  auto s = openStoriesSession();
  ASSERT_TRUE(s);
  const runtime::KvSnapshot snap = runtime::snapshotKv(s->backend());
  EXPECT_EQ(snap.rows, 0u);
  EXPECT_EQ(snap.contextLimit, s->config().contextLength);
  ASSERT_EQ(snap.layers.size(), 5u);
  EXPECT_EQ(snap.usedBytes(), 0u);
  EXPECT_EQ(snap.f16Bytes(), 0u);
}

TEST_F(KvSnapshotTest, SessionReportsTheCacheAtTheEndOfAGeneration) {
  auto s = openStoriesSession();
  ASSERT_TRUE(s);
  runtime::GenerateOptions o;
  o.maxTokens = 20;
  o.sampler.temperature = 0.0f;
  KvRecorder recorder;
  auto r = s->generate(s->tokenizeCompletion("Once upon a time"), o, &recorder);
  ASSERT_TRUE(r.ok()) << r.error().describe();
  ASSERT_GE(recorder.snapshots.size(), 2u) << "one after the prompt, one at the end";

  const runtime::KvSnapshot& after = recorder.snapshots.front();
  EXPECT_EQ(after.rows, r->stats.promptTokens);
  const runtime::KvSnapshot& last = recorder.snapshots.back();
  EXPECT_EQ(last.rows, r->stats.cachedTokens);
  EXPECT_EQ(last.rows, s->history().size());
  EXPECT_EQ(last.usedBytes(), last.rows * kF16BytesPerToken);
  EXPECT_EQ(last.f16Bytes(), last.usedBytes());
  EXPECT_GE(last.allocatedBytes(), last.usedBytes()) << "pages hold rows not yet filled";
  for (const auto& layer : last.layers) {
    EXPECT_EQ(layer.keyScheme, "f16");
    EXPECT_EQ(layer.valueScheme, "f16");
    EXPECT_DOUBLE_EQ(layer.keyBitsPerValue, 16.0);
    EXPECT_EQ(layer.key.codes, uint64_t{last.rows} * 4 * 8 * 2);
    EXPECT_EQ(layer.key.scales, 0u);
  }
}

// Under auto, a conversation shorter than kAutoMinTokens is f16 on purpose:
// the snapshot says it is measuring and how far the conversation has come,
// until auto chooses.
TEST_F(KvSnapshotTest, AutoSaysItIsMeasuringUntilItChooses) {
  auto model = openDemoModel();
  ASSERT_TRUE(model);
  const runtime::BackendChoice choice{.kind = "cpu", .threads = 1, .kvPolicy = policyOf("auto")};
  auto backend = runtime::makeBackend(model, choice);
  ASSERT_TRUE(backend.ok()) << backend.error().describe();
  runtime::Session s(model, std::move(*backend), model::loadTokenizer(*model).value(),
                     runtime::makeBackendFactory(model, choice), choice.kvPolicy);
  runtime::GenerateOptions o;
  o.maxTokens = 4;
  o.sampler.temperature = 0.0f;
  KvRecorder recorder;
  ASSERT_TRUE(s.generate(s.tokenizeCompletion("Once upon a time"), o, &recorder).ok());
  const runtime::KvSnapshot& measuring = recorder.snapshots.back();
  EXPECT_TRUE(measuring.autoMeasuring);
  EXPECT_EQ(measuring.autoMeasureTokens, kv::kAutoMinTokens);
  EXPECT_NE(measuring.autoStatus.find(fmt::format("reaches {} tokens (now {})", kv::kAutoMinTokens,
                                                  s.history().size())),
            std::string::npos)
      << measuring.autoStatus;
  o.maxTokens = 80;
  recorder.snapshots.clear();
  ASSERT_TRUE(s.generate(s.tokenizeCompletion("Once upon a time there was a dog"), o, &recorder)
                  .ok());
  EXPECT_FALSE(recorder.snapshots.back().autoMeasuring);
  EXPECT_NE(recorder.snapshots.back().autoStatus.find("chose"), std::string::npos)
      << recorder.snapshots.back().autoStatus;
}

}  // namespace
}  // namespace kvscope::test
