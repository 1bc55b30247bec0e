// Session::setKvPolicy on stories260K and the CPU backend: re-encoding the
// history under another policy yields the cache (and so the next logits) a
// fresh session prefilled under that policy has, switching back to f16 gives
// the original logits bit for bit, and bad policies or a stop change nothing.
// The auto policy: measured on the first prompt (or once the conversation is
// long enough), then the same cache a fresh session under its choice has.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include <gtest/gtest.h>

#include "kv/auto_policy.h"
#include "kv/kv_layout.h"
#include "kv/kv_policy.h"
#include "model/model_tokenizer.h"
#include "model/synthetic_model.h"
#include "runtime/backend_factory.h"
#include "runtime/session.h"
#include "runtime/session_load.h"
#include "support/policy.h"
#include "support/synthetic_model_file.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

constexpr uint32_t kChunk = 7;  // several chunks over the history

// A session whose factory remembers the last backend it built, so the test
// can run one extra token through it and read the next-step logits.
struct Probe {
  std::unique_ptr<runtime::Session> session;
  backend::Backend* backend = nullptr;
  int factoryCalls = 0;
};

std::unique_ptr<Probe> openProbe(const std::string& policy) {
  auto file = model::ModelFile::open(sharedFile("models/stories260K.gguf"));
  EXPECT_TRUE(file.ok());
  if (!file.ok()) return nullptr;
  std::shared_ptr<const model::ModelFile> m(std::move(file).value());
  auto tok = model::loadTokenizer(*m);
  EXPECT_TRUE(tok.ok());
  auto probe = std::make_unique<Probe>();
  runtime::BackendFactory factory = [build = runtime::makeBackendFactory(m, {.kind = "cpu"}),
                                     p = probe.get()](const kv::KvPolicy& asked) {
    auto b = build(asked);
    ++p->factoryCalls;
    if (b.ok()) p->backend = b->get();
    return b;
  };
  auto first = factory(policyOf(policy));
  EXPECT_TRUE(first.ok());
  if (!first.ok() || !tok.ok()) return nullptr;
  probe->session = std::make_unique<runtime::Session>(
      m, std::move(first).value(), std::move(tok).value(), factory, policyOf(policy));
  probe->factoryCalls = 0;
  return probe;
}

// The backends auto's trials built (runtime/kv_auto.h): the f16 start, the
// f16 reference and one per candidate, where it tried them.
int trialBackends(const kv::AutoPlan& plan) {
  return plan.trials.empty() ? 0 : static_cast<int>(plan.trials.size()) + 2;
}

// Logits after `token`, leaving the cache as it was.
std::vector<float> nextLogits(Probe& p, int32_t token) {
  const uint32_t n = p.backend->cachedTokens();
  backend::Logits logits;
  EXPECT_TRUE(p.backend->forward({std::span(&token, 1)}, logits).ok());
  EXPECT_TRUE(p.backend->trim(n).ok());
  return logits.values;
}

runtime::GenerateOptions greedy(uint32_t n) {
  runtime::GenerateOptions o;
  o.maxTokens = n;
  o.sampler.temperature = 0.0f;
  o.prefillChunk = kChunk;
  return o;
}

class CountingObserver : public runtime::Observer {
 public:
  void onProgress(uint32_t done, uint32_t of) override {
    last = done;
    total = of;
    ++calls;
  }
  void onKv(const runtime::KvSnapshot& s) override { snapshot = s; }
  void onIndexer(const runtime::IndexerSnapshot& s) override {
    indexer = s;
    ++indexerCalls;
  }
  uint32_t last = 0, total = 0;
  int calls = 0, indexerCalls = 0;
  runtime::KvSnapshot snapshot;
  runtime::IndexerSnapshot indexer;
};

class KvPolicySwitchTest : public ::testing::Test {
 protected:
  void SetUp() override { KVS_REQUIRE_FIXTURE(sharedFile("models/stories260K.gguf")); }
};

// From an f16 cache a switch re-encodes the stored rows (no forward pass):
// each new row is the f16 row round-tripped through its new scheme; from a
// compressed cache to other schemes it runs the history again and equals a
// fresh session; f16 again is the original cache.
TEST_F(KvPolicySwitchTest, SwitchesReEncodeF16RowsElseRunTheHistoryAgain) {
  const std::string compact = "k=q8_0,v=turbo3";
  auto p = openProbe("");
  ASSERT_TRUE(p);
  runtime::Session& s = *p->session;
  auto reply = s.generate(s.tokenizeCompletion("Once upon a time, there was"), greedy(12));
  ASSERT_TRUE(reply.ok()) << reply.error().describe();
  const std::vector<int32_t> history = s.history();
  const int32_t next = reply->tokens.back();  // sampled, not yet run
  const std::vector<float> f16Logits = nextLogits(*p, next);
  const model::ModelConfig& c = s.config();
  std::vector<std::vector<float>> f16Rows[2];  // [K, V][layer]
  for (uint32_t l = 0; l < c.nLayer; ++l) {
    for (kv::KvPart part : {kv::KvPart::kKey, kv::KvPart::kValue})
      f16Rows[static_cast<int>(part)].push_back(s.backend().readKv(l, part).value());
  }

  CountingObserver observer;
  auto switched = s.setKvPolicy(policyOf(compact), &observer, kChunk);
  ASSERT_TRUE(switched.ok()) << switched.error().describe();
  EXPECT_EQ(p->factoryCalls, 1);
  EXPECT_EQ(s.history(), history) << "the conversation stays";
  EXPECT_EQ(s.backend().cachedTokens(), history.size());
  EXPECT_EQ(s.kvPolicy().toString(), compact);
  EXPECT_EQ(observer.total, history.size());
  EXPECT_EQ(observer.last, history.size());
  EXPECT_EQ(observer.calls, 1) << "no chunks: no forward pass";
  // Each row: the f16 row encoded and decoded by the new scheme.
  auto layout = kv::KvLayout::create(kv::KvGeometry::uniform(c.nLayer, c.nHeadKv, c.headDim),
                                     std::vector<kv::LayerSchemes>(c.nLayer, {"q8_0", "turbo3"}));
  ASSERT_TRUE(layout.ok());
  std::vector<uint8_t> code;
  std::vector<float> want(c.headDim);
  for (uint32_t l = 0; l < c.nLayer; ++l) {
    for (kv::KvPart part : {kv::KvPart::kKey, kv::KvPart::kValue}) {
      const std::vector<float> got = s.backend().readKv(l, part).value();
      const std::vector<float>& f16 = f16Rows[static_cast<int>(part)][l];
      ASSERT_EQ(got.size(), f16.size());
      const kv::KvScheme& scheme = layout->scheme(l, part);
      code.resize(layout->rowBytes(l, part));
      for (size_t at = 0; at < f16.size(); at += c.headDim) {
        scheme.encode(std::span(f16).subspan(at, c.headDim), code);
        scheme.decode(code, want);
        ASSERT_TRUE(std::equal(want.begin(), want.end(), got.begin() + static_cast<ptrdiff_t>(at)))
            << "layer " << l << " row " << at / c.headDim;
      }
    }
  }
  ASSERT_FALSE(observer.snapshot.layers.empty());
  EXPECT_EQ(observer.snapshot.layers[0].keyScheme, "q8_0");
  EXPECT_EQ(observer.snapshot.layers[0].valueScheme, "turbo3");
  EXPECT_EQ(observer.snapshot.rows, history.size());
  for (const auto& layer : observer.snapshot.layers) {
    EXPECT_GT(layer.keyError, 0.0) << "the new cache's codec error is measured";
    EXPECT_GT(layer.valueError, layer.keyError) << "turbo3 loses more than q8_0";
  }
  const std::vector<float> compactLogits = nextLogits(*p, next);
  EXPECT_NE(compactLogits, f16Logits) << "the cache really changed codec";

  // Compressed to other schemes: the history runs again, in chunks, and the
  // cache equals that of a session that prefills the same tokens.
  const std::string other = "kv=q4_0";
  observer = {};
  ASSERT_TRUE(s.setKvPolicy(policyOf(other), &observer, kChunk).ok());
  EXPECT_EQ(observer.calls, int((history.size() + kChunk - 1) / kChunk));
  auto fresh = openProbe(other);
  ASSERT_TRUE(fresh);
  auto prefill = fresh->session->generate(history, greedy(1));
  ASSERT_TRUE(prefill.ok());
  ASSERT_EQ(fresh->backend->cachedTokens(), history.size());
  EXPECT_EQ(nextLogits(*fresh, next), nextLogits(*p, next));

  ASSERT_TRUE(s.setKvPolicy({}, nullptr, kChunk).ok());
  EXPECT_EQ(nextLogits(*p, next), f16Logits) << "f16 again is the original cache";

  // The next turn reuses the whole re-encoded history.
  std::vector<int32_t> prompt = history;
  prompt.push_back(next);
  auto more = s.generate(prompt, greedy(4));
  ASSERT_TRUE(more.ok());
  EXPECT_EQ(more->stats.reusedTokens, history.size());
}

// The indexer and sparse_v change how attention reads the cache, not what it
// holds: switching them is immediate (no backend built, no progress) and the
// sidecar's bytes come and go in the accounting.
TEST_F(KvPolicySwitchTest, IndexerOptionsApplyWithoutReEncoding) {
  auto p = openProbe("k=q8_0,v=turbo3");
  ASSERT_TRUE(p);
  runtime::Session& s = *p->session;
  auto reply = s.generate(s.tokenizeCompletion("Once upon a time, there was"), greedy(12));
  ASSERT_TRUE(reply.ok());
  CountingObserver observer;
  ASSERT_TRUE(
      s.setKvPolicy(policyOf("k=q8_0,v=turbo3,indexer=16:4:1,sparse_v=0.001"), &observer).ok());
  EXPECT_EQ(p->factoryCalls, 0) << "no re-encode";
  EXPECT_EQ(observer.calls, 0) << "no progress to report";
  EXPECT_EQ(s.backend().indexer().topK, 16u);
  EXPECT_FLOAT_EQ(s.backend().indexer().sparseV, 0.001f);
  EXPECT_EQ(observer.indexerCalls, 1);
  uint64_t sidecar = 0;
  for (const auto& l : observer.snapshot.layers) sidecar += l.key.sidecar + l.value.sidecar;
  EXPECT_GT(sidecar, 0u) << "the sidecar is counted";
  // Decoding reports the selection, and diagnostic mode the captured mass.
  ASSERT_TRUE(s.setIndexerDiagnostic(true).ok());
  std::vector<int32_t> prompt = s.history();
  prompt.push_back(reply->tokens.back());
  ASSERT_TRUE(s.generate(prompt, greedy(8), &observer).ok());
  const runtime::IndexerSnapshot& last = observer.indexer;
  ASSERT_EQ(last.step.layers.size(), s.config().nLayer);
  EXPECT_EQ(last.step.rows, s.backend().cachedTokens());
  for (uint32_t l = 0; l < last.step.layers.size(); ++l) {
    const auto& layer = last.step.layers[l];
    EXPECT_GT(layer.capturedMass, 0.0);
    EXPECT_LE(layer.capturedMass, 1.0 + 1e-9);
    // The first layers attend every row (IndexerOptions::denseLayers).
    const bool dense = l < kv::IndexerOptions{}.denseLayers;
    for (const auto& runs : layer.heads) EXPECT_EQ(runs.empty(), dense) << "layer " << l;
  }
  // Off again: the same backend, no sidecar.
  ASSERT_TRUE(s.setKvPolicy(policyOf("k=q8_0,v=turbo3"), &observer).ok());
  EXPECT_EQ(p->factoryCalls, 0);
  EXPECT_FALSE(s.backend().indexer().enabled());
  EXPECT_TRUE(s.backend().indexer().diagnostic) << "the diagnostic mode is the session's";
  for (const auto& l : observer.snapshot.layers) EXPECT_EQ(l.key.sidecar, 0u);
}

// A policy the model cannot hold (a layer past its last) fails before any work.
TEST_F(KvPolicySwitchTest, PolicyTheModelCannotHoldFailsBeforeAnyWork) {
  auto p = openProbe("");
  ASSERT_TRUE(p);
  runtime::Session& s = *p->session;
  ASSERT_TRUE(s.generate(s.tokenizeCompletion("Once upon a time"), greedy(4)).ok());
  const auto history = s.history();
  const backend::Backend* before = &s.backend();
  CountingObserver observer;
  auto r = s.setKvPolicy(policyOf("k@99=q8_0"), &observer);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(observer.calls, 0);
  EXPECT_EQ(p->factoryCalls, 0) << "nothing was built";
  EXPECT_EQ(&s.backend(), before);
  EXPECT_EQ(s.history(), history);
  EXPECT_EQ(s.kvPolicy().toString(), kv::KvPolicy{}.toString());
}

// A stream that keeps its scheme is copied as stored and keeps the codec
// error measured on it; the re-encoded stream gets one measured on its rows.
TEST_F(KvPolicySwitchTest, CopiedStreamsKeepTheirMeasuredError) {
  auto p = openProbe("k=q8_0,v=f16");
  ASSERT_TRUE(p);
  runtime::Session& s = *p->session;
  CountingObserver observer;
  ASSERT_TRUE(
      s.generate(s.tokenizeCompletion("Once upon a time, there was"), greedy(40), &observer).ok());
  const runtime::KvSnapshot before = observer.snapshot;
  observer.calls = 0;
  ASSERT_TRUE(s.setKvPolicy(policyOf("k=q8_0,v=turbo3"), &observer, kChunk).ok());
  EXPECT_EQ(observer.calls, 1) << "re-encoded, not run again";
  ASSERT_EQ(observer.snapshot.layers.size(), before.layers.size());
  for (size_t l = 0; l < before.layers.size(); ++l) {
    EXPECT_GT(before.layers[l].keyError, 0.0) << l;
    EXPECT_EQ(observer.snapshot.layers[l].keyError, before.layers[l].keyError) << l;
    EXPECT_GT(observer.snapshot.layers[l].valueError, 0.0) << l;
  }
}

// A switch that runs the history again (compressed to other schemes).
TEST_F(KvPolicySwitchTest, StopDuringReEncodeKeepsTheOldCache) {
  auto p = openProbe("kv=q4_0");
  ASSERT_TRUE(p);
  runtime::Session& s = *p->session;
  ASSERT_TRUE(s.generate(s.tokenizeCompletion("Once upon a time, there was"), greedy(8)).ok());
  const backend::Backend* before = &s.backend();
  const auto history = s.history();

  class StopAfterFirstChunk : public runtime::Observer {
   public:
    explicit StopAfterFirstChunk(runtime::Session& s) : m_session(s) {}
    void onProgress(uint32_t, uint32_t) override { m_session.requestStop(); }

   private:
    runtime::Session& m_session;
  } stopper(s);
  auto r = s.setKvPolicy(policyOf("k=q8_0,v=turbo3"), &stopper, kChunk);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kCancelled);
  EXPECT_EQ(&s.backend(), before);
  EXPECT_EQ(s.backend().cachedTokens(), history.size());
  EXPECT_EQ(s.kvPolicy().toString(), "k=q4_0,v=q4_0");
  EXPECT_EQ(s.backend().kvBytes()[0].value->name(), "q4_0");
}

std::string storyText() {
  std::ifstream in(sharedFile("fixtures/story-a.txt"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Checks that `s` settled: its cache holds the plan's schemes, the snapshot
// says so, and the next logits equal those of a fresh session that prefilled
// the same history under the explicit policy the plan stands for.
void expectSettled(Probe& p, const CountingObserver& observer, int32_t next) {
  runtime::Session& s = *p.session;
  const kv::AutoPlan* plan = s.autoPlan();
  ASSERT_NE(plan, nullptr);
  EXPECT_LE(plan->bitsPerValue, plan->budget + 1e-9);
  const auto schemes = plan->schemes();
  ASSERT_EQ(observer.snapshot.layers.size(), schemes.size());
  bool compressed = false;
  for (size_t l = 0; l < schemes.size(); ++l) {
    EXPECT_EQ(observer.snapshot.layers[l].keyScheme, schemes[l].key) << l;
    EXPECT_EQ(observer.snapshot.layers[l].valueScheme, schemes[l].value) << l;
    EXPECT_EQ(observer.snapshot.layers[l].keyPromotion, plan->layers[l].key.reason) << l;
    compressed |= schemes[l].key != "f16" || schemes[l].value != "f16";
  }
  EXPECT_TRUE(compressed);
  EXPECT_NE(observer.snapshot.autoStatus.find("chose"), std::string::npos)
      << observer.snapshot.autoStatus;
  const std::vector<float> logits = nextLogits(p, next);
  auto explicitPolicy = s.kvPolicy().withLayers(schemes);
  auto fresh = openProbe(explicitPolicy.toString());
  ASSERT_TRUE(fresh);
  ASSERT_TRUE(fresh->session->generate(s.history(), greedy(1)).ok());
  EXPECT_EQ(nextLogits(*fresh, next), logits);
}

TEST_F(KvPolicySwitchTest, AutoChoosesOnTheFirstPromptAndEqualsAFreshSessionUnderItsChoice) {
  auto p = openProbe("auto:10");
  ASSERT_TRUE(p);
  runtime::Session& s = *p->session;
  CountingObserver observer;
  const auto prompt = s.tokenizeCompletion(storyText());
  ASSERT_GT(prompt.size(), kv::kAutoCalibrationTokens);  // measured on the first 512
  auto reply = s.generate(prompt, greedy(3), &observer);
  ASSERT_TRUE(reply.ok()) << reply.error().describe();
  EXPECT_EQ(s.kvPolicy().toString(), "auto:10");
  ASSERT_NE(s.autoPlan(), nullptr);
  EXPECT_EQ(s.autoPlan()->untried, "");
  EXPECT_EQ(p->factoryCalls, 1 + trialBackends(*s.autoPlan())) << "one re-encode under the choice";
  expectSettled(*p, observer, reply->tokens.back());
}

TEST_F(KvPolicySwitchTest, AutoWaitsInF16UntilTheConversationIsLongEnough) {
  auto p = openProbe("auto:10");
  ASSERT_TRUE(p);
  runtime::Session& s = *p->session;
  CountingObserver observer;
  auto first = s.generate(s.tokenizeCompletion("Once upon a time"), greedy(8), &observer);
  ASSERT_TRUE(first.ok()) << first.error().describe();
  ASSERT_LT(s.history().size(), kv::kAutoMinTokens);
  EXPECT_EQ(s.autoPlan(), nullptr);
  EXPECT_EQ(observer.snapshot.layers[0].keyScheme, "f16");
  EXPECT_NE(observer.snapshot.autoStatus.find("f16 until"), std::string::npos);
  std::vector<int32_t> prompt = s.history();
  prompt.push_back(first->tokens.back());
  auto second = s.generate(prompt, greedy(80), &observer);
  ASSERT_TRUE(second.ok()) << second.error().describe();
  ASSERT_GE(s.history().size(), kv::kAutoMinTokens);
  expectSettled(*p, observer, second->tokens.back());
}

TEST_F(KvPolicySwitchTest, SwitchingToAutoMeasuresTheHistory) {
  auto p = openProbe("k=q8_0,v=q8_0");
  ASSERT_TRUE(p);
  runtime::Session& s = *p->session;
  auto reply = s.generate(s.tokenizeCompletion(storyText().substr(0, 600)), greedy(2));
  ASSERT_TRUE(reply.ok()) << reply.error().describe();
  CountingObserver observer;
  ASSERT_TRUE(s.setKvPolicy(policyOf("auto:9"), &observer, kChunk).ok());
  ASSERT_NE(s.autoPlan(), nullptr);
  EXPECT_EQ(p->factoryCalls, 2 + trialBackends(*s.autoPlan())) << "f16 to measure, then the choice";
  expectSettled(*p, observer, reply->tokens.back());
  // Another policy drops the plan.
  ASSERT_TRUE(s.setKvPolicy(policyOf("k=q8_0,v=q8_0"), &observer, kChunk).ok());
  EXPECT_EQ(s.autoPlan(), nullptr);
  EXPECT_TRUE(observer.snapshot.autoStatus.empty());
}

// When auto cannot re-encode (here: no factory; on a device, out of memory)
// the reply goes on in the f16 cache, the snapshot says why, and it does not
// try again at every turn.
TEST_F(KvPolicySwitchTest, AutoThatCannotReEncodeStaysF16AndSaysWhy) {
  auto file = model::ModelFile::open(sharedFile("models/stories260K.gguf"));
  ASSERT_TRUE(file.ok());
  std::shared_ptr<const model::ModelFile> m(std::move(file).value());
  auto tok = model::loadTokenizer(*m);
  ASSERT_TRUE(tok.ok());
  auto backend = runtime::makeBackend(m, {.kind = "cpu", .kvPolicy = policyOf("auto:10")});
  ASSERT_TRUE(backend.ok());
  runtime::Session s(m, std::move(backend).value(), std::move(tok).value(), {},
                     policyOf("auto:10"));
  CountingObserver observer;
  auto reply = s.generate(s.tokenizeCompletion(storyText()), greedy(3), &observer);
  ASSERT_TRUE(reply.ok()) << reply.error().describe();
  EXPECT_EQ(s.autoPlan(), nullptr);
  EXPECT_EQ(observer.snapshot.layers[0].keyScheme, "f16");
  EXPECT_NE(observer.snapshot.autoStatus.find("could not re-encode"), std::string::npos)
      << observer.snapshot.autoStatus;
  std::vector<int32_t> prompt = s.history();
  prompt.push_back(reply->tokens.back());
  ASSERT_TRUE(s.generate(prompt, greedy(2), &observer).ok());
}

TEST_F(KvPolicySwitchTest, SessionWithoutFactoryRefuses) {
  auto file = model::ModelFile::open(sharedFile("models/stories260K.gguf"));
  ASSERT_TRUE(file.ok());
  std::shared_ptr<const model::ModelFile> m(std::move(file).value());
  auto tok = model::loadTokenizer(*m);
  auto b = runtime::makeBackend(m, {.kind = "cpu"});
  ASSERT_TRUE(tok.ok() && b.ok());
  runtime::Session s(m, std::move(b).value(), std::move(tok).value());
  auto r = s.setKvPolicy(policyOf("k=q8_0"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnsupported);
}

// A model with experts: the inspector's expert counts describe the cached rows,
// so a switch that re-encodes them keeps them, and one that runs the history
// again logs the same picks afresh.
TEST(KvPolicySwitchExperts, ExpertCountsFollowTheCachedRows) {
  model::SyntheticModelSpec spec = test::smallMoeSpec();
  spec.contextLength = 256;
  const auto path = std::filesystem::temp_directory_path() /
                    ("kvscope-switch-experts-" + std::to_string(::getpid()) + ".gguf");
  ASSERT_TRUE(model::writeSyntheticModel(spec, path).ok());
  auto checked = runtime::checkLoad(path, {.kind = "cpu", .threads = 2});
  ASSERT_TRUE(checked.ok()) << checked.error().describe();
  auto session = runtime::startSession(std::move(checked).value(), nullptr);
  ASSERT_TRUE(session.ok()) << session.error().describe();
  runtime::Session& s = **session;
  const std::vector<int32_t> prompt = {1, 40, 77, 120, 5, 260, 33, 90, 151, 7, 8};
  ASSERT_TRUE(s.generate(prompt, greedy(6)).ok());
  const backend::ExpertUsage before = s.backend().expertUsage();
  EXPECT_EQ(before.rows, s.history().size());

  ASSERT_TRUE(s.setKvPolicy(policyOf("k=q8_0,v=q8_0")).ok());  // from f16: re-encoded
  backend::ExpertUsage after = s.backend().expertUsage();
  EXPECT_EQ(after.rows, before.rows);
  EXPECT_EQ(after.counts, before.counts);
  EXPECT_EQ(after.lastStep, before.lastStep);

  ASSERT_TRUE(s.setKvPolicy(policyOf("kv=q4_0")).ok());  // the history runs again
  after = s.backend().expertUsage();
  EXPECT_EQ(after.rows, before.rows);
  for (const auto& layer : after.counts)
    EXPECT_EQ(std::accumulate(layer.begin(), layer.end(), 0u), before.rows * 2);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace kvscope::test
