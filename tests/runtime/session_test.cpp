// Session on the real stories260K model and CPU backend: the greedy reply
// equals llama.cpp's recorded one, prompts reuse the cached prefix, stop and a
// full context are explicit outcomes, and bad prompts are errors.
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backend/cpu_backend.h"
#include "model/model_tokenizer.h"
#include "runtime/session.h"
#include "support/stories_session.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

runtime::GenerateOptions greedy(uint32_t n) {
  runtime::GenerateOptions o;
  o.maxTokens = n;
  o.sampler.temperature = 0.0f;
  return o;
}

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override { KVS_REQUIRE_FIXTURE(sharedFile("models/stories260K.gguf")); }
};

// A model with a "tool_use" template (GGUF tokenizer.chat_template.tool_use)
// renders with it when tools are given, and with its default template otherwise.
TEST_F(SessionTest, ToolsSelectTheToolUseTemplate) {
  auto file = model::ModelFile::open(sharedFile("models/stories260K.gguf"));
  ASSERT_TRUE(file.ok());
  std::shared_ptr<const model::ModelFile> m(std::move(file).value());
  auto stories = model::loadTokenizer(*m);
  ASSERT_TRUE(stories.ok());
  tokenizer::Vocab vocab = stories->vocab();
  vocab.chatTemplate = "chat:{% for m in messages %}{{ m.content }}{% endfor %}";
  vocab.namedChatTemplates = {{"tool_use",
                               "tools:{{ tools | map(attribute='name') | join(',') }}|"
                               "{% for m in messages %}{{ m.content }}{% endfor %}"}};
  auto tok = tokenizer::Tokenizer::create(std::move(vocab));
  auto b = backend::CpuBackend::create(m, {});
  ASSERT_TRUE(tok.ok() && b.ok());
  runtime::Session s(m, std::move(b).value(), std::move(tok).value());
  const std::vector<tokenizer::ChatMessage> messages{{"user", "hi"}};
  const auto plain = s.renderChat(messages);
  ASSERT_TRUE(plain.ok()) << plain.error().describe();
  EXPECT_EQ(plain->text, "chat:hi");
  const auto withTools = s.renderChat(messages, true, R"([{"name": "now"}, {"name": "add"}])");
  ASSERT_TRUE(withTools.ok()) << withTools.error().describe();
  EXPECT_EQ(withTools->text, "tools:now,add|hi");
}

TEST_F(SessionTest, GreedyReplyMatchesLlamaCpp) {
  const auto refPath = sharedFile("reference/stories260K.greedy.json");
  KVS_REQUIRE_FIXTURE(refPath);
  std::ifstream in(refPath);
  const auto ref = nlohmann::json::parse(in);
  auto s = openStoriesSession();
  ASSERT_TRUE(s);
  const auto prompt = s->tokenizeCompletion("Once upon a time");
  EXPECT_EQ(prompt, ref["prompt_tokens"].get<std::vector<int32_t>>())
      << "tokenizer agrees with llama.cpp";
  auto r = s->generate(prompt, greedy(64));
  ASSERT_TRUE(r.ok()) << r.error().describe();
  std::vector<int32_t> expected;
  for (const auto& step : ref["steps"]) expected.push_back(step["token"]);
  EXPECT_EQ(r->tokens, expected);
  EXPECT_EQ(r->text, ref["text"].get<std::string>());
  EXPECT_EQ(r->stop, runtime::StopReason::kMaxTokens);
  EXPECT_EQ(r->stats.promptTokens, 5u);
  EXPECT_EQ(r->stats.decodeSteps, 63u) << "the last sampled token is never run";
}

TEST_F(SessionTest, SecondTurnReusesTheCachedPrefix) {
  auto s = openStoriesSession();
  ASSERT_TRUE(s);
  auto first = s->generate(s->tokenizeCompletion("Once upon a time"), greedy(10));
  ASSERT_TRUE(first.ok());
  std::vector<int32_t> next = s->history();
  next.push_back(first->tokens.back());  // the reply's last token was not run yet
  const auto more = s->tokenizeCompletion(" Then");
  next.insert(next.end(), more.begin() + 1, more.end());  // without a second BOS
  const size_t cached = s->history().size();
  auto second = s->generate(next, greedy(5));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->stats.reusedTokens, cached);
  // A cold session given the same prompt produces the same reply.
  auto cold = openStoriesSession();
  auto fresh = cold->generate(next, greedy(5));
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->stats.reusedTokens, 0u);
  EXPECT_EQ(second->tokens, fresh->tokens);
}

// A prompt whose last chunk is one token long is still a prompt: a
// two-phase cache holds it at f16 until the reply's first decode step.
TEST_F(SessionTest, ATwoPhaseCacheStaysF16ThroughAPromptsLastOneTokenChunk) {
  auto file = model::ModelFile::open(sharedFile("models/stories260K.gguf"));
  ASSERT_TRUE(file.ok());
  std::shared_ptr<const model::ModelFile> m(std::move(file).value());
  auto tok = model::loadTokenizer(*m);
  const std::vector<kv::LayerSchemes> layers(m->config().nLayer, {"q8_0", "q8_0"});
  auto b = backend::CpuBackend::create(m, {.kvSchemes = layers, .twoPhase = true});
  ASSERT_TRUE(tok.ok() && b.ok());
  runtime::Session s(m, std::move(b).value(), std::move(tok).value());
  const std::vector<int32_t> prompt = s.tokenizeCompletion("Once upon a time, a");
  runtime::GenerateOptions o = greedy(1);
  o.prefillChunk = static_cast<uint32_t>(prompt.size()) - 1;
  ASSERT_TRUE(s.generate(prompt, o).ok());
  EXPECT_EQ(s.backend().kvLayout()->scheme(0, kv::KvPart::kKey).name(), "f16");
  ASSERT_TRUE(s.generate(prompt, greedy(2)).ok());
  EXPECT_EQ(s.backend().kvLayout()->scheme(0, kv::KvPart::kKey).name(), "q8_0");
}

TEST_F(SessionTest, EditingAnEarlierTokenTrimsTheCache) {
  auto s = openStoriesSession();
  ASSERT_TRUE(s);
  auto prompt = s->tokenizeCompletion("Once upon a time there was a dog");
  ASSERT_TRUE(s->generate(prompt, greedy(3)).ok());
  prompt[4] = s->tokenizeCompletion(" cat")[1];  // change the 5th token
  auto r = s->generate(prompt, greedy(3));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stats.reusedTokens, 4u);
  auto cold = openStoriesSession();
  auto fresh = cold->generate(prompt, greedy(3));
  EXPECT_EQ(r->tokens, fresh->tokens);
}

TEST_F(SessionTest, FullContextIsAnExplicitOutcome) {
  auto s = openStoriesSession(16);
  ASSERT_TRUE(s);
  auto r = s->generate(s->tokenizeCompletion("Once upon a time"), greedy(100));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stop, runtime::StopReason::kContextFull);
  EXPECT_EQ(s->history().size(), 16u);
  EXPECT_EQ(r->tokens.size(), 16u - 5u + 1u)
      << "fills the context, then reports the last sampled token";
}

TEST_F(SessionTest, PromptLongerThanTheContextIsAnError) {
  auto s = openStoriesSession(8);
  ASSERT_TRUE(s);
  auto r = s->generate(s->tokenizeCompletion("Once upon a time there was a little girl named Lily"),
                       greedy(4));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find("the context holds 8"), std::string::npos) << r.error().message;
  EXPECT_FALSE(s->generate({}, greedy(4)).ok());
}

class StopAfter : public runtime::Observer {
 public:
  StopAfter(runtime::Session& s, int n) : m_session(s), m_left(n) {}
  void onToken(std::string_view, int32_t) override {
    if (--m_left == 0) m_session.requestStop();
  }

 private:
  runtime::Session& m_session;
  int m_left;
};

TEST_F(SessionTest, StopRequestEndsTheReplyWithinOneStep) {
  auto s = openStoriesSession();
  ASSERT_TRUE(s);
  StopAfter stop(*s, 3);
  auto r = s->generate(s->tokenizeCompletion("Once upon a time"), greedy(50), &stop);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stop, runtime::StopReason::kStopRequested);
  EXPECT_EQ(r->tokens.size(), 3u);
  // The next request is not affected by the earlier stop.
  auto again = s->generate(s->tokenizeCompletion("Once upon a time"), greedy(5));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->tokens.size(), 5u);
}

TEST_F(SessionTest, SeededSamplingIsReproducible) {
  auto a = openStoriesSession(), b = openStoriesSession();
  runtime::GenerateOptions o;
  o.maxTokens = 20;
  o.sampler.temperature = 1.0f;
  o.sampler.seed = 42;
  auto ra = a->generate(a->tokenizeCompletion("Once upon a time"), o);
  auto rb = b->generate(b->tokenizeCompletion("Once upon a time"), o);
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_EQ(ra->tokens, rb->tokens);
  EXPECT_EQ(ra->seed, 42u);
}

}  // namespace
}  // namespace kvscope::test
