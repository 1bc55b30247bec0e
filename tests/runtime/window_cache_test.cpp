// A conversation on a sliding-window model long enough for its window layers'
// ring to wrap (gemma3's shape: a window of 8, one global layer), through the
// Session on each backend: the cache saved and restored gives the
// uninterrupted session's logits bit for bit; going back behind what the ring
// still holds runs the prompt again and gives a fresh session's logits; a
// file of the format before rings is refused saying so.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include <gtest/gtest.h>

#include "gpu/device_info.h"
#include "kv/auto_policy.h"
#include "model/synthetic_model.h"
#include "runtime/kv_auto.h"
#include "runtime/memory_estimate.h"
#include "runtime/session_load.h"
#include "support/policy.h"
#include "support/window_model_specs.h"

namespace kvscope::test {
namespace {

constexpr uint32_t kWindow = 8;
constexpr uint32_t kContext = 1024;  // the ring: 8 - 1 + 512 = 519 rows

// Layer 0 a window layer, layer 1 global.
model::SyntheticModelSpec windowSpec() {
  model::SyntheticModelSpec spec = smallGemma3Spec(2, kWindow, 2, 77);
  spec.contextLength = kContext;
  return spec;
}

// Token ids past the byte tokens, a function of i.
std::vector<int32_t> tokens(size_t n, uint32_t salt) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>(260 + (i * 37 + salt * 11) % 250);
  return t;
}

runtime::GenerateOptions greedy(uint32_t maxTokens) {
  runtime::GenerateOptions options;
  options.maxTokens = maxTokens;
  options.sampler.temperature = 0.0f;
  return options;
}

// The logits of `more` after the session's history, then the cache back.
std::vector<float> logitsAfter(runtime::Session& s, std::span<const int32_t> more) {
  backend::Backend& b = const_cast<backend::Backend&>(s.backend());
  const uint32_t rows = b.cachedTokens();
  backend::Logits logits;
  EXPECT_TRUE(b.forward({more}, logits).ok());
  EXPECT_TRUE(b.trim(rows).ok());
  return {logits.last().begin(), logits.last().end()};
}

std::unique_ptr<runtime::Session> openSession(const std::filesystem::path& model,
                                              const char* backend, const std::string& policy) {
  auto checked = runtime::checkLoad(model, {.kind = backend,
                                            .contextLimit = kContext,
                                            .threads = 2,
                                            .matmul = cpu::MatmulPrecision::kExact,
                                            .timing = false,
                                            .kvPolicy = policyOf(policy),
                                            .vetDevice = false});
  EXPECT_TRUE(checked.ok()) << checked.error().describe();
  if (!checked.ok()) return nullptr;
  auto session = runtime::startSession(std::move(checked).value(), nullptr);
  EXPECT_TRUE(session.ok()) << session.error().describe();
  return session.ok() ? std::move(session).value() : nullptr;
}

class WindowCacheTest : public testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (std::string_view(GetParam()) == "vulkan") {
      auto devices = gpu::listDevices();
      if (!devices.ok() || devices->empty()) GTEST_SKIP() << "no Vulkan device";
    }
    m_dir = std::filesystem::temp_directory_path() /
            ("kvscope-window-" + std::to_string(::getpid()) + "-" + GetParam());
    std::filesystem::create_directories(m_dir);
    ASSERT_TRUE(model::writeSyntheticModel(windowSpec(), m_dir / "model.gguf").ok());
  }
  void TearDown() override { std::filesystem::remove_all(m_dir); }

  std::unique_ptr<runtime::Session> open(const std::string& policy) {
    return openSession(m_dir / "model.gguf", GetParam(), policy);
  }

  std::filesystem::path m_dir;
};

TEST_P(WindowCacheTest, ARingCacheRestoredGivesTheUninterruptedLogits) {
  const std::string policy = "k=q8_0,v=turbo4";
  auto original = open(policy);
  ASSERT_TRUE(original);
  ASSERT_TRUE(original->generate(tokens(700, 1), greedy(8)).ok());
  const std::vector<int32_t> history = original->history();
  ASSERT_GE(history.size(), 701u);
  // The window layer holds its ring's 519 rows, the global layer every row.
  const auto layers = original->backend().kvBytes();
  EXPECT_TRUE(layers[0].ring);
  EXPECT_EQ(layers[0].window, kWindow);
  EXPECT_EQ(layers[0].rows, 519u);
  EXPECT_FALSE(layers[1].ring);
  EXPECT_EQ(layers[1].rows, history.size());
  ASSERT_TRUE(original->saveCache(m_dir / "chat.kvcache").ok());

  auto reopened = open(policy);
  ASSERT_TRUE(reopened);
  const Status restored = reopened->restoreCache(m_dir / "chat.kvcache");
  ASSERT_TRUE(restored.ok()) << restored.error().describe();
  EXPECT_EQ(reopened->history(), history);
  // Restored: the window layer's last 7 rows, all that the next token sees.
  EXPECT_EQ(reopened->backend().kvBytes()[0].rows, kWindow - 1);
  EXPECT_EQ(reopened->backend().trimFloor(), history.size());

  const std::vector<int32_t> more = tokens(5, 9);
  const std::vector<float> uninterrupted = logitsAfter(*original, more);
  const std::vector<float> afterRestore = logitsAfter(*reopened, more);
  ASSERT_EQ(uninterrupted.size(), afterRestore.size());
  EXPECT_EQ(
      std::memcmp(uninterrupted.data(), afterRestore.data(), uninterrupted.size() * sizeof(float)),
      0);

  // The next turn reuses the whole restored history.
  std::vector<int32_t> turn = history;
  turn.insert(turn.end(), more.begin(), more.end());
  auto a = original->generate(turn, greedy(6));
  auto b = reopened->generate(turn, greedy(6));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(b->stats.reusedTokens, history.size());
  EXPECT_EQ(a->tokens, b->tokens);
}

TEST_P(WindowCacheTest, APromptThatDivergesBehindTheRingRunsAgainFromTheStart) {
  auto s = open("kv=f16");
  ASSERT_TRUE(s);
  const std::vector<int32_t> first = tokens(700, 2);
  ASSERT_TRUE(s->generate(first, greedy(4)).ok());
  // The ring holds the last 519 rows; token n needs rows n - 7 .. n - 1.
  const auto held = static_cast<uint32_t>(s->history().size());
  ASSERT_GT(held, 600u);
  EXPECT_EQ(s->backend().trimFloor(), held - 519 + kWindow - 1);

  // Diverging at 300 (past the floor, below 200): the cached prefix is reused.
  std::vector<int32_t> late(first.begin(), first.begin() + 300);
  const std::vector<int32_t> tail = tokens(40, 3);
  late.insert(late.end(), tail.begin(), tail.end());
  auto reused = s->generate(late, greedy(4));
  ASSERT_TRUE(reused.ok()) << reused.error().describe();
  EXPECT_EQ(reused->stats.reusedTokens, 300u);

  // Make the ring wrap again, then diverge at 100: below the floor.
  ASSERT_TRUE(s->generate(first, greedy(4)).ok());
  std::vector<int32_t> early(first.begin(), first.begin() + 100);
  early.insert(early.end(), tail.begin(), tail.end());
  auto rerun = s->generate(early, greedy(4));
  ASSERT_TRUE(rerun.ok()) << rerun.error().describe();
  EXPECT_EQ(rerun->stats.reusedTokens, 0u);

  auto fresh = open("kv=f16");
  ASSERT_TRUE(fresh);
  auto expected = fresh->generate(early, greedy(4));
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(rerun->tokens, expected->tokens);
  const std::vector<int32_t> more = tokens(3, 4);
  EXPECT_EQ(logitsAfter(*s, more), logitsAfter(*fresh, more));
}

// auto plans over the values the cache will hold at the session's context:
// the window layer's ring (519 of 1024 rows) weighs half a global layer.
TEST_P(WindowCacheTest, AutoWeighsTheWindowLayerByItsRing) {
  auto s = open("auto");
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->generate(tokens(600, 7), greedy(2)).ok());
  const kv::AutoPlan* plan = s->autoPlan();
  ASSERT_NE(plan, nullptr);
  const double share[2] = {519.0 / kContext, 1.0};
  double weighted = 0.0, shares = 0.0;
  for (uint32_t l = 0; l < 2; ++l) {
    weighted += share[l] * (plan->layers[l].key.bits + plan->layers[l].value.bits);
    shares += 2 * share[l];
  }
  EXPECT_NEAR(plan->bitsPerValue, weighted / shares, 1e-9);
  EXPECT_LE(plan->bitsPerValue, plan->budget + 1e-9);
  // Its candidates were tried, though a copy of a ring cannot forget rows
  // (the trials then run the window's first tokens again).
  EXPECT_EQ(plan->untried, "");
  EXPECT_GE(plan->trials.size(), 2u);
  EXPECT_EQ(plan->trialTokens, runtime::kAutoTrialTokens);
}

INSTANTIATE_TEST_SUITE_P(Backends, WindowCacheTest, testing::Values("cpu", "vulkan"));

// Formats 2 (before rings) and 3 (before per-layer shapes).
TEST(WindowCacheFile, FilesOfEarlierFormatsAreRefusedSayingSo) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("kvscope-window-format-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(model::writeSyntheticModel(windowSpec(), dir / "model.gguf").ok());
  auto checked = runtime::checkLoad(dir / "model.gguf", {.kind = "cpu", .threads = 2});
  ASSERT_TRUE(checked.ok());
  auto s = runtime::startSession(std::move(checked).value(), nullptr);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->generate(tokens(20, 5), greedy(2)).ok());
  ASSERT_TRUE((*s)->saveCache(dir / "chat.kvcache").ok());
  const size_t history = (*s)->history().size();
  std::string bytes;
  {
    std::ifstream in(dir / "chat.kvcache", std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  for (const char major : {2, 3}) {
    bytes[8] = major;  // u16 major, little-endian
    bytes[9] = 0;
    std::ofstream(dir / "old.kvcache", std::ios::binary) << bytes;
    const Status st = (*s)->restoreCache(dir / "old.kvcache");
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().code, ErrorCode::kBadFile);
    EXPECT_NE(st.error().message.find("older kvscope"), std::string::npos) << st.error().message;
    EXPECT_EQ((*s)->history().size(), history) << "a refused file leaves the session as it was";
  }
  std::filesystem::remove_all(dir);
}

// A CPU session of the model at `path` under `policy` with its whole context
// cached, the estimate made before it loaded, and the KV bytes it allocated.
struct FullContext {
  std::shared_ptr<const model::ModelFile> file;
  runtime::MemoryEstimate estimate;
  std::unique_ptr<runtime::Session> session;
  uint64_t allocated = 0;
  const backend::Backend& backend() const { return session->backend(); }
};

std::optional<FullContext> fullContext(const std::filesystem::path& path, const char* policy) {
  auto checked = runtime::checkLoad(path, {.kind = "cpu",
                                           .contextLimit = kContext,
                                           .threads = 2,
                                           .kvPolicy = policyOf(policy),
                                           .vetDevice = false});
  EXPECT_TRUE(checked.ok()) << checked.error().describe();
  if (!checked.ok()) return std::nullopt;
  FullContext f{.file = checked->model};
  auto e = runtime::estimateMemory(*f.file, kContext, policyOf(policy));
  EXPECT_TRUE(e.ok()) << e.error().describe();
  auto s = runtime::startSession(std::move(checked).value(), nullptr);
  EXPECT_TRUE(s.ok());
  if (!e.ok() || !s.ok()) return std::nullopt;
  f.estimate = *e;
  f.session = std::move(s).value();
  backend::Backend& b = const_cast<backend::Backend&>(f.session->backend());
  backend::Logits logits;
  EXPECT_TRUE(b.forward({tokens(kContext, 6)}, logits).ok());
  for (const backend::KvLayerBytes& l : b.kvBytes())
    f.allocated += l.keyBytes.total() + l.valueBytes.total();
  return f;
}

// The estimate before load is what the loaded cache allocates once the context
// is full: the global layer's rows per token, the window layer's ring once.
TEST(WindowCacheMemory, TheEstimateIsWhatAFullContextAllocates) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("kvscope-window-memory-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(model::writeSyntheticModel(windowSpec(), dir / "model.gguf").ok());
  for (const char* policy : {"kv=f16", "k=q8_0,v=turbo4"}) {
    const auto f = fullContext(dir / "model.gguf", policy);
    ASSERT_TRUE(f);
    const runtime::MemoryEstimate* e = &f->estimate;
    const backend::Backend& b = f->backend();
    EXPECT_EQ(e->kvBytes, f->allocated) << policy;
    // The ring: 519 rows of layer 0's K and V, 2 KV heads.
    const uint64_t ring =
        519u * 2 * (b.kvBytes()[0].key->rowBytes() + b.kvBytes()[0].value->rowBytes());
    EXPECT_EQ(e->kvRingBytes, ring) << policy;
    EXPECT_EQ(e->kvBytesPerToken,
              2u * (b.kvBytes()[1].key->rowBytes() + b.kvBytes()[1].value->rowBytes()));
    // The longest context that fits counts the ring once.
    const uint64_t memory = e->weightBytes + ring + 700 * e->kvBytesPerToken;
    auto fits = runtime::estimateMemory(*f->file, kContext, policyOf(policy), memory);
    ASSERT_TRUE(fits.ok());
    EXPECT_EQ(fits->maxContextThatFits, 700u) << policy;
  }
  std::filesystem::remove_all(dir);
}

// Gemma 4's shape (the golden model's, tests/data/golden/gemma4.json): window
// layer 0 and global layer 1 store K/V rows of their own widths; layers 2
// (window) and 3 (global) are KV-shared and read them. The cache holds two
// layers; it saves and restores like any other, and the estimate before
// load counts the storing layers only.
model::SyntheticModelSpec gemma4Spec() {
  model::SyntheticModelSpec spec = smallGemma4Spec(kWindow, 77);
  spec.contextLength = kContext;
  spec.layerFf = {256, 256, 512, 512};
  spec.nEmbdPerLayer = 16;
  spec.nExpert = 4;
  spec.nExpertUsed = 2;
  spec.nFfExp = 32;
  spec.globalValueIsKey = true;
  spec.finalLogitSoftcap = 30.0f;
  return spec;
}

class Gemma4CacheTest : public testing::Test {
 protected:
  void SetUp() override {
    m_dir = std::filesystem::temp_directory_path() /
            ("kvscope-gemma4-cache-" + std::to_string(::getpid()));
    std::filesystem::create_directories(m_dir);
    ASSERT_TRUE(model::writeSyntheticModel(gemma4Spec(), m_dir / "model.gguf").ok());
  }
  void TearDown() override { std::filesystem::remove_all(m_dir); }
  std::filesystem::path m_dir;
};

// The save and restore on each backend.
class Gemma4RestoreTest : public Gemma4CacheTest, public testing::WithParamInterface<const char*> {
 protected:
  void SetUp() override {
    if (std::string_view(GetParam()) == "vulkan") {
      auto devices = gpu::listDevices();
      if (!devices.ok() || devices->empty()) GTEST_SKIP() << "no Vulkan device";
    }
    Gemma4CacheTest::SetUp();
  }
};

TEST_P(Gemma4RestoreTest, ASharedKvCacheRestoredGivesTheUninterruptedLogits) {
  const std::string policy = "k=q8_0,v=turbo4";
  auto original = openSession(m_dir / "model.gguf", GetParam(), policy);
  ASSERT_TRUE(original);
  ASSERT_TRUE(original->generate(tokens(600, 3), greedy(8)).ok());
  const std::vector<int32_t> history = original->history();
  const auto layers = original->backend().kvBytes();
  ASSERT_EQ(layers.size(), 2u);  // the storing layers only
  EXPECT_TRUE(layers[0].ring);
  EXPECT_EQ(layers[0].rows, kWindow - 1 + backend::kMaxStepRows);
  EXPECT_EQ(layers[1].rows, history.size());
  EXPECT_EQ(layers[0].key->dim(), 32u);
  EXPECT_EQ(layers[1].key->dim(), 64u);
  ASSERT_TRUE(original->saveCache(m_dir / "chat.kvcache").ok());

  auto reopened = openSession(m_dir / "model.gguf", GetParam(), policy);
  ASSERT_TRUE(reopened);
  const Status restored = reopened->restoreCache(m_dir / "chat.kvcache");
  ASSERT_TRUE(restored.ok()) << restored.error().describe();
  EXPECT_EQ(reopened->history(), history);
  const std::vector<int32_t> more = tokens(5, 4);
  const std::vector<float> uninterrupted = logitsAfter(*original, more);
  const std::vector<float> afterRestore = logitsAfter(*reopened, more);
  ASSERT_EQ(uninterrupted.size(), afterRestore.size());
  EXPECT_EQ(
      std::memcmp(uninterrupted.data(), afterRestore.data(), uninterrupted.size() * sizeof(float)),
      0);
}

TEST_F(Gemma4CacheTest, TheEstimateCountsTheStoringLayersOnly) {
  for (const char* policy : {"kv=f16", "k=q8_0,v=turbo4"}) {
    const auto f = fullContext(m_dir / "model.gguf", policy);
    ASSERT_TRUE(f);
    const runtime::MemoryEstimate* e = &f->estimate;
    const backend::Backend& b = f->backend();
    EXPECT_EQ(e->kvBytes, f->allocated) << policy;
    // Per token: the global storing layer's one KV head of 64 values, K and V.
    EXPECT_EQ(e->kvBytesPerToken, b.kvBytes()[1].key->rowBytes() + b.kvBytes()[1].value->rowBytes())
        << policy;
    if (std::string_view(policy) == "kv=f16") {
      EXPECT_EQ(e->kvBytesPerToken, 64u * 2 * 2);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Gemma4RestoreTest, testing::Values("cpu", "vulkan"));

}  // namespace
}  // namespace kvscope::test
