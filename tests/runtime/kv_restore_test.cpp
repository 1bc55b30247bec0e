// A conversation's KV cache saved and restored (Session::saveCache /
// restoreCache, runtime/kv_file.h), on each backend: a ~400-token conversation
// on the demo model, saved, reopened in a new session, must give the first
// reply token's logits bit for bit as the uninterrupted session does, without
// running the history again; a damaged file, another policy or another model
// is refused with the session left as it was, and re-prefill then gives the
// same reply.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "gpu/device_info.h"
#include "model/model_tokenizer.h"
#include "runtime/backend_factory.h"
#include "runtime/session.h"
#include "support/demo_model.h"
#include "support/policy.h"
#include "support/stories_session.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

constexpr uint32_t kContext = 1024;

struct Case {
  const char* kind;
  const char* policy;
};

std::string caseName(const testing::TestParamInfo<Case>& info) {
  std::string name = std::string(info.param.kind) + "_" + info.param.policy;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

class KvRestoreTest : public testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (std::string_view(GetParam().kind) == "vulkan") {
      auto devices = gpu::listDevices();
      if (!devices.ok() || devices->empty()) GTEST_SKIP() << "no Vulkan device";
    }
    m_model = openDemoModel();
    ASSERT_TRUE(m_model);
    m_dir = std::filesystem::temp_directory_path() /
            ("kvscope-restore-" + std::to_string(::getpid()) + "-" + caseName({GetParam(), 0}));
    std::filesystem::create_directories(m_dir);
  }
  void TearDown() override { std::filesystem::remove_all(m_dir); }

  // A session whose backends the test can reach: every backend the factory
  // builds is remembered (the session owns it).
  struct Opened {
    std::unique_ptr<runtime::Session> session;
    std::vector<backend::Backend*> built;
    backend::Backend* current() { return built.back(); }
  };
  std::unique_ptr<Opened> open(const std::string& policy) {
    auto o = std::make_unique<Opened>();
    const runtime::BackendFactory inner =
        runtime::makeBackendFactory(m_model, {.kind = GetParam().kind,
                                              .contextLimit = kContext,
                                              .threads = 2,
                                              .timing = false,
                                              .vetDevice = false});
    Opened* raw = o.get();
    runtime::BackendFactory factory = [inner, raw](const kv::KvPolicy& p) {
      auto b = inner(p);
      if (b.ok()) raw->built.push_back(b->get());
      return b;
    };
    auto first = factory(policyOf(policy));
    auto tok = model::loadTokenizer(*m_model);
    EXPECT_TRUE(first.ok() && tok.ok());
    if (!first.ok() || !tok.ok()) return nullptr;
    o->session = std::make_unique<runtime::Session>(m_model, std::move(first).value(),
                                                    std::move(tok).value(), factory,
                                                    policyOf(policy));
    return o;
  }

  // The conversation so far: a long prompt and a greedy reply, >= 400 tokens.
  std::vector<int32_t> converse(runtime::Session& s) {
    std::string text;
    for (int i = 0; text.size() < 1500; ++i)
      text += "The little robot counted the stars over the quiet village, one by one. ";
    std::vector<int32_t> prompt = s.tokenizeCompletion(text);
    prompt.resize(392);
    runtime::GenerateOptions options;
    options.maxTokens = 16;
    options.sampler.temperature = 0.0f;
    auto r = s.generate(prompt, options);
    EXPECT_TRUE(r.ok()) << r.error().describe();
    EXPECT_GE(s.history().size(), 400u);
    return s.history();
  }

  // A session under the test's policy that had the conversation, its cache
  // saved to `path`; null (with a failure recorded) when something failed.
  std::unique_ptr<Opened> conversationSavedTo(const std::filesystem::path& path) {
    auto o = open(GetParam().policy);
    if (!o) return nullptr;
    converse(*o->session);
    const Status saved = o->session->saveCache(path);
    EXPECT_TRUE(saved.ok()) << saved.error().describe();
    return saved.ok() && !HasFailure() ? std::move(o) : nullptr;
  }
  std::filesystem::path file() const { return m_dir / "chat.kvcache"; }

  // The next turn: the history and a few new tokens.
  std::vector<int32_t> nextTurn(const runtime::Session& s) {
    std::vector<int32_t> turn = s.history();
    const auto more = s.tokenizer().encode(" Then the robot said", {});
    turn.insert(turn.end(), more.begin(), more.end());
    return turn;
  }

  runtime::GenerationResult reply(runtime::Session& s, std::span<const int32_t> prompt) {
    runtime::GenerateOptions options;
    options.maxTokens = 8;
    options.sampler.temperature = 0.0f;
    auto r = s.generate(prompt, options);
    EXPECT_TRUE(r.ok()) << r.error().describe();
    return r.ok() ? *r : runtime::GenerationResult{};
  }

  std::shared_ptr<const model::ModelFile> m_model;
  std::filesystem::path m_dir;
};

std::vector<float> lastLogits(backend::Backend& b, std::span<const int32_t> tokens) {
  backend::Logits logits;
  const Status st = b.forward({tokens}, logits);
  EXPECT_TRUE(st.ok()) << st.error().describe();
  return st.ok() ? std::vector<float>(logits.last().begin(), logits.last().end())
                 : std::vector<float>{};
}

TEST_P(KvRestoreTest, ARestoredCacheGivesTheUninterruptedLogitsWithoutPrefill) {
  const std::string policy = GetParam().policy;
  auto original = conversationSavedTo(file());
  ASSERT_TRUE(original);
  const std::vector<int32_t> history = original->session->history();

  auto reopened = open(policy);
  ASSERT_TRUE(reopened);
  const Status restored = reopened->session->restoreCache(file());
  ASSERT_TRUE(restored.ok()) << restored.error().describe();
  EXPECT_EQ(reopened->session->history(), history);
  EXPECT_EQ(reopened->current()->cachedTokens(), history.size());
  EXPECT_EQ(reopened->session->backend().kvLayout()->layerSchemes(),
            original->session->backend().kvLayout()->layerSchemes());
  if (original->session->autoPlan()) {
    ASSERT_NE(reopened->session->autoPlan(), nullptr);
    const kv::AutoPlan &was = *original->session->autoPlan(), &now = *reopened->session->autoPlan();
    EXPECT_EQ(now.schemes(), was.schemes());
    EXPECT_EQ(now.method, was.method);
    EXPECT_EQ(now.trialTokens, was.trialTokens);
    ASSERT_EQ(now.trials.size(), was.trials.size());
    for (size_t i = 0; i < was.trials.size(); ++i) {
      EXPECT_EQ(now.trials[i].method, was.trials[i].method);
      EXPECT_EQ(now.trials[i].bitsPerValue, was.trials[i].bitsPerValue);
      EXPECT_EQ(now.trials[i].kld, was.trials[i].kld);
    }
  }

  // The first reply token's logits, bit for bit.
  const std::vector<int32_t> turn = nextTurn(*original->session);
  const auto added = std::span(turn).subspan(history.size());
  const std::vector<float> uninterrupted = lastLogits(*original->current(), added);
  const std::vector<float> afterRestore = lastLogits(*reopened->current(), added);
  ASSERT_EQ(uninterrupted.size(), afterRestore.size());
  ASSERT_FALSE(uninterrupted.empty());
  EXPECT_EQ(
      std::memcmp(uninterrupted.data(), afterRestore.data(), uninterrupted.size() * sizeof(float)),
      0);
  ASSERT_TRUE(original->current()->trim(history.size()).ok());
  ASSERT_TRUE(reopened->current()->trim(history.size()).ok());

  // The whole reply, with only the new tokens run.
  const runtime::GenerationResult a = reply(*original->session, turn);
  const runtime::GenerationResult b = reply(*reopened->session, turn);
  EXPECT_EQ(b.stats.reusedTokens, history.size());
  EXPECT_EQ(a.tokens, b.tokens);
}

TEST_P(KvRestoreTest, ADamagedOrMismatchedFileLeavesTheSessionToReprefill) {
  const std::string policy = GetParam().policy;
  auto original = conversationSavedTo(file());
  ASSERT_TRUE(original);
  std::string bytes;
  {
    std::ifstream in(file(), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const auto writeVariant = [&](const std::string& name, const std::string& data) {
    std::ofstream(m_dir / name, std::ios::binary) << data;
    return m_dir / name;
  };
  std::string flipped = bytes;
  flipped[flipped.size() - 7] ^= 0x10;  // inside the last rows
  const std::filesystem::path damaged[] = {
      writeVariant("flipped", flipped),
      writeVariant("truncated", bytes.substr(0, bytes.size() / 2)), writeVariant("empty", ""),
      m_dir / "missing"};

  auto fresh = open(policy);
  ASSERT_TRUE(fresh);
  for (const auto& path : damaged) {
    const Status st = fresh->session->restoreCache(path);
    ASSERT_FALSE(st.ok()) << path;
    EXPECT_TRUE(st.error().code == ErrorCode::kBadFile || st.error().code == ErrorCode::kIo)
        << st.error().describe();
    EXPECT_TRUE(fresh->session->history().empty());
    EXPECT_EQ(fresh->session->backend().cachedTokens(), 0u) << path;
  }

  // Another policy: refused by name.
  auto other = open("k=q4_0,v=q4_0");
  ASSERT_TRUE(other);
  const Status wrongPolicy = other->session->restoreCache(file());
  ASSERT_FALSE(wrongPolicy.ok());
  EXPECT_NE(wrongPolicy.error().message.find("k=q4_0,v=q4_0"), std::string::npos)
      << wrongPolicy.error().message;

  // The fallback, re-prefill, gives the uninterrupted reply.
  const std::vector<int32_t> turn = nextTurn(*original->session);
  const runtime::GenerationResult a = reply(*original->session, turn);
  const runtime::GenerationResult b = reply(*fresh->session, turn);
  EXPECT_EQ(b.stats.reusedTokens, 0u);
  EXPECT_EQ(a.tokens, b.tokens);
}

INSTANTIATE_TEST_SUITE_P(Backends, KvRestoreTest,
                         testing::Values(Case{"cpu", "k=q8_0,v=turbo4"}, Case{"cpu", "auto"},
                                         Case{"cpu", "k=q8_0,v=turbo4,two_phase"},
                                         Case{"cpu", "k=turbo4,v=turbo4,indexer=16:8:2"},
                                         Case{"cpu", "k=q4_0,v=turbo3,tail=48"},
                                         Case{"cpu", "k=q8_0,v=turbo4,two_phase,tail=32"},
                                         Case{"vulkan", "k=q8_0,v=turbo4"},
                                         Case{"vulkan", "k=turbo4,v=turbo4,indexer=16:8:2"},
                                         Case{"vulkan", "k=q8_0r,v=q4_0r,indexer=16:8:2"},
                                         Case{"vulkan", "k=q8_0,v=turbo4,two_phase"},
                                         Case{"vulkan", "k=q8_0,v=turbo4,two_phase,tail=32"}),
                         caseName);

std::vector<uint8_t> exportedRows(const backend::Backend& b) {
  std::vector<uint8_t> rows;
  const Status st = b.exportKv([&](std::span<const uint8_t> run) {
    rows.insert(rows.end(), run.begin(), run.end());
    return okStatus();
  });
  EXPECT_TRUE(st.ok()) << st.error().describe();
  return rows;
}

// One file format for both backends: a cache saved on one restores on the
// other with the same bytes in every row.
TEST(KvRestore, ACacheSavedOnOneBackendRestoresOnTheOther) {
  auto devices = gpu::listDevices();
  if (!devices.ok() || devices->empty()) GTEST_SKIP() << "no Vulkan device";
  auto model = openDemoModel();
  ASSERT_TRUE(model);
  const std::string policy = "k=q8_0,v=turbo4";
  const auto open = [&](const char* kind) {
    const runtime::BackendFactory factory =
        runtime::makeBackendFactory(model, {.kind = kind,
                                            .contextLimit = kContext,
                                            .threads = 2,
                                            .timing = false,
                                            .vetDevice = false});
    auto b = factory(policyOf(policy));
    auto tok = model::loadTokenizer(*model);
    EXPECT_TRUE(b.ok() && tok.ok());
    return std::make_unique<runtime::Session>(model, std::move(b).value(), std::move(tok).value(),
                                              factory, policyOf(policy));
  };
  const auto file = std::filesystem::temp_directory_path() /
                    ("kvscope-cross-" + std::to_string(::getpid()) + ".kvcache");
  for (const auto& [from, to] : {std::pair{"cpu", "vulkan"}, std::pair{"vulkan", "cpu"}}) {
    auto source = open(from);
    runtime::GenerateOptions options;
    options.maxTokens = 16;
    options.sampler.temperature = 0.0f;
    ASSERT_TRUE(
        source->generate(source->tokenizeCompletion("Once upon a time, a robot"), options).ok());
    ASSERT_TRUE(source->saveCache(file).ok());
    auto target = open(to);
    const Status st = target->restoreCache(file);
    ASSERT_TRUE(st.ok()) << from << " to " << to << ": " << st.error().describe();
    EXPECT_EQ(target->history(), source->history());
    const std::vector<uint8_t> rows = exportedRows(target->backend());
    EXPECT_FALSE(rows.empty());
    EXPECT_TRUE(rows == exportedRows(source->backend())) << from << " to " << to;
    // Read back through the pages, not the export: the same values decoded.
    for (uint32_t l = 0; l < model->config().nLayer; ++l) {
      for (kv::KvPart p : {kv::KvPart::kKey, kv::KvPart::kValue}) {
        auto a = source->backend().readKv(l, p);
        auto b = target->backend().readKv(l, p);
        ASSERT_TRUE(a.ok() && b.ok());
        EXPECT_TRUE(*a == *b) << from << " to " << to << ", layer " << l;
      }
    }
  }
  std::filesystem::remove(file);
}

TEST(KvRestore, AnotherModelsCacheIsRefusedByName) {
  auto demo = openDemoModel();
  ASSERT_TRUE(demo);
  auto tok = model::loadTokenizer(*demo);
  auto b = runtime::makeBackend(demo, {.kind = "cpu", .contextLimit = 256, .threads = 2});
  ASSERT_TRUE(tok.ok() && b.ok());
  runtime::Session session(demo, std::move(b).value(), std::move(tok).value());
  runtime::GenerateOptions options;
  options.maxTokens = 4;
  ASSERT_TRUE(session.generate(session.tokenizeCompletion("Once upon a time"), options).ok());
  const auto file = std::filesystem::temp_directory_path() /
                    ("kvscope-other-model-" + std::to_string(::getpid()) + ".kvcache");
  ASSERT_TRUE(session.saveCache(file).ok());

  auto stories = openStoriesSession(256);
  ASSERT_TRUE(stories);
  const Status st = stories->restoreCache(file);
  std::filesystem::remove(file);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(st.error().message.find("kvscope-demo.gguf"), std::string::npos) << st.error().message;
  EXPECT_TRUE(stories->history().empty());
}

}  // namespace
}  // namespace kvscope::test
