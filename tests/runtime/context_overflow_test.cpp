// Context overflow policies on stories260K with a small context and a simple
// template (<role>content per message): what truncate-middle and rolling keep
// (system prompt, first exchange, newest exchanges), that the result fits and
// is the largest that does, that stop refuses with a way out, and the
// token-level form for plain prompts against hand-computed slices.
#include <numeric>

#include <gtest/gtest.h>

#include "backend/cpu_backend.h"
#include "model/model_tokenizer.h"
#include "runtime/context_overflow.h"
#include "support/stories_session.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

using runtime::ContextOverflow;
using tokenizer::ChatMessage;

constexpr uint32_t kContext = 192;
constexpr uint32_t kReserve = 8;

std::unique_ptr<runtime::Session> openSession() {
  auto s = openStoriesSession(kContext);
  if (s)
    s->setChatTemplateSource("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}");
  return s;
}

// A system prompt and six exchanges of ~45 tokens each (the model's vocabulary
// is small): 313 tokens, where the context holds 192; the system prompt, the
// first exchange and the last message take 101.
std::vector<ChatMessage> longChat() {
  std::vector<ChatMessage> m{{"system", "You tell short stories."}};
  for (int i = 1; i <= 6; ++i) {
    m.push_back({"user", "Tell me about the little dog number " + std::to_string(i) + "."});
    if (i < 6) m.push_back({"assistant", "The dog ran to the park and played with a ball."});
  }
  return m;
}

size_t tokensOf(const runtime::Session& s, const std::vector<ChatMessage>& messages) {
  return s.tokenizeChat(s.renderChat(messages).value()).size();
}

std::vector<ChatMessage> without(const std::vector<ChatMessage>& messages,
                                 const std::vector<size_t>& dropped) {
  std::vector<ChatMessage> kept;
  for (size_t i = 0; i < messages.size(); ++i)
    if (std::find(dropped.begin(), dropped.end(), i) == dropped.end()) kept.push_back(messages[i]);
  return kept;
}

class ContextOverflowTest : public ::testing::Test {
 protected:
  void SetUp() override { KVS_REQUIRE_FIXTURE(sharedFile("models/stories260K.gguf")); }
};

TEST_F(ContextOverflowTest, AConversationThatFitsIsLeftAlone) {
  auto s = openSession();
  const auto all = longChat();
  const std::vector<ChatMessage> chat(all.begin(), all.begin() + 4);
  auto fit = runtime::fitChat(*s, chat, ContextOverflow::kStop, kReserve);
  ASSERT_TRUE(fit.ok()) << fit.error().describe();
  EXPECT_TRUE(fit->dropped.empty());
  EXPECT_EQ(fit->tokens.size(), tokensOf(*s, chat));
  EXPECT_EQ(fit->prefill, fit->tokens.size()) << "nothing cached yet";
}

TEST_F(ContextOverflowTest, StopRefusesWithAWayOut) {
  auto s = openSession();
  ASSERT_GT(tokensOf(*s, longChat()) + kReserve, kContext);
  auto fit = runtime::fitChat(*s, longChat(), ContextOverflow::kStop, kReserve);
  ASSERT_FALSE(fit.ok());
  EXPECT_NE(fit.error().message.find("the context holds 192"), std::string::npos)
      << fit.error().message;
  EXPECT_NE(fit.error().message.find("truncate-middle or rolling"), std::string::npos);
}

TEST_F(ContextOverflowTest, TruncateMiddleKeepsTheSystemPromptAndTheFirstExchange) {
  auto s = openSession();
  const auto chat = longChat();
  auto fit = runtime::fitChat(*s, chat, ContextOverflow::kTruncateMiddle, kReserve);
  ASSERT_TRUE(fit.ok()) << fit.error().describe();
  ASSERT_FALSE(fit->dropped.empty());
  // Exchanges 2, 3, … go first, whole (user and reply), oldest first.
  EXPECT_EQ(fit->dropped.front(), 3u);
  for (size_t i = 1; i < fit->dropped.size(); ++i)
    EXPECT_EQ(fit->dropped[i], fit->dropped[i - 1] + 1);
  EXPECT_EQ(fit->dropped.size() % 2, 0u);
  EXPECT_EQ(fit->messages.front().content, chat[0].content);
  EXPECT_EQ(fit->messages[1].content, chat[1].content);
  EXPECT_EQ(fit->messages.back().content, chat.back().content);
  EXPECT_EQ(fit->tokens.size(), tokensOf(*s, without(chat, fit->dropped)));
  EXPECT_LE(fit->tokens.size() + kReserve, kContext);
  // The largest that fits: one exchange fewer dropped does not.
  std::vector<size_t> fewer(fit->dropped.begin(), fit->dropped.end() - 2);
  EXPECT_GT(tokensOf(*s, without(chat, fewer)) + kReserve, kContext);
}

TEST_F(ContextOverflowTest, RollingKeepsTheNewestExchanges) {
  auto s = openSession();
  const auto chat = longChat();
  auto fit = runtime::fitChat(*s, chat, ContextOverflow::kRolling, kReserve);
  ASSERT_TRUE(fit.ok()) << fit.error().describe();
  ASSERT_FALSE(fit->dropped.empty());
  std::vector<size_t> oldest(fit->dropped.size());
  std::iota(oldest.begin(), oldest.end(), size_t{1});
  EXPECT_EQ(fit->dropped, oldest) << "the oldest exchanges, right after the system prompt";
  EXPECT_EQ(fit->messages.front().role, "system");
  EXPECT_LE(fit->tokens.size() + kReserve, kContext);
  std::vector<size_t> fewer(fit->dropped.begin(), fit->dropped.end() - 2);
  EXPECT_GT(tokensOf(*s, without(chat, fewer)) + kReserve, kContext);
  // More room for the reply: more exchanges go.
  auto roomy = runtime::fitChat(*s, chat, ContextOverflow::kRolling, 100);
  ASSERT_TRUE(roomy.ok()) << roomy.error().describe();
  EXPECT_LE(roomy->tokens.size() + 100, kContext);
  EXPECT_GT(roomy->dropped.size(), fit->dropped.size());
}

// After a drop the cached system prompt and first exchange are reused and the
// rest is prefilled again.
TEST_F(ContextOverflowTest, PrefillCountsWhatTheCacheCannotReuse) {
  auto s = openSession();
  const auto chat = longChat();
  const std::vector<ChatMessage> start(chat.begin(), chat.begin() + 4);
  auto first = runtime::fitChat(*s, start, ContextOverflow::kTruncateMiddle, kReserve);
  ASSERT_TRUE(first.ok());
  runtime::GenerateOptions one;
  one.maxTokens = 1;
  one.sampler.temperature = 0.0f;
  ASSERT_TRUE(s->generate(first->tokens, one).ok());
  auto fit = runtime::fitChat(*s, chat, ContextOverflow::kTruncateMiddle, kReserve);
  ASSERT_TRUE(fit.ok());
  const size_t keptPrefix = tokensOf(*s, {chat[0], chat[1], chat[2]});
  EXPECT_LE(fit->prefill, fit->tokens.size() - keptPrefix + 1);
  EXPECT_GT(fit->prefill, 0u);
}

// A single exchange that fits without room for the reply runs under every
// policy, as it would under stop: there is nothing to leave out for it.
TEST_F(ContextOverflowTest, ALoneMessageThatFitsRunsWithoutTheReserve) {
  auto s = openSession();
  const std::vector<ChatMessage> chat{{"user", std::string(150, 'a')}};
  const size_t tokens = tokensOf(*s, chat);
  ASSERT_LE(tokens, kContext);
  ASSERT_GT(tokens + 100, kContext);
  for (auto overflow : {ContextOverflow::kTruncateMiddle, ContextOverflow::kRolling}) {
    auto fit = runtime::fitChat(*s, chat, overflow, 100);
    ASSERT_TRUE(fit.ok()) << fit.error().describe();
    EXPECT_TRUE(fit->dropped.empty());
    EXPECT_EQ(fit->tokens.size(), tokens);
  }
}

TEST_F(ContextOverflowTest, ALastMessageTooLongForAnyPolicyIsAnError) {
  auto s = openSession();
  std::vector<ChatMessage> chat{{"system", "Be brief."}, {"user", std::string(600, 'a')}};
  for (auto overflow : {ContextOverflow::kTruncateMiddle, ContextOverflow::kRolling}) {
    auto fit = runtime::fitChat(*s, chat, overflow, kReserve);
    ASSERT_FALSE(fit.ok());
    EXPECT_NE(fit.error().message.find("even the system prompt and the last message"),
              std::string::npos);
  }
}

// prepareChatTurn says which step refused a turn: a template that raises, or
// a conversation the context cannot hold; a turn that runs gets the context
// shift its overflow policy keeps (rolling: the system prompt's tokens).
TEST_F(ContextOverflowTest, PreparedTurnSaysWhichStepRefusedAndCarriesTheShift) {
  auto s = openSession();
  const auto chat = longChat();
  runtime::TurnStage failedAt = runtime::TurnStage::kTemplate;
  auto tooLong = runtime::prepareChatTurn(
      *s, {.messages = chat, .overflow = ContextOverflow::kStop}, &failedAt);
  ASSERT_FALSE(tooLong.ok());
  EXPECT_EQ(failedAt, runtime::TurnStage::kContext);

  // A reply that can reach the end of the context: the shift keeps a head.
  runtime::GenerateOptions options;
  options.maxTokens = 100;
  auto rolling = runtime::prepareChatTurn(
      *s, {.messages = chat, .overflow = ContextOverflow::kRolling, .options = options}, &failedAt);
  ASSERT_TRUE(rolling.ok()) << rolling.error().describe();
  EXPECT_FALSE(rolling->fit.dropped.empty());
  EXPECT_LE(rolling->fit.tokens.size() + kContext / 4, kContext) << "a quarter kept for the reply";
  EXPECT_EQ(rolling->options.maxTokens, 100u);
  EXPECT_TRUE(rolling->options.shift.enabled);
  // The kept head is the rendered system prompt: "<system>You tell short stories."
  const std::vector<ChatMessage> system(chat.begin(), chat.begin() + 1);
  const auto head = s->tokenizeChat(s->renderChat(system, /*addGenerationPrompt=*/false).value());
  EXPECT_EQ(rolling->options.shift.keep, head.size());

  s->setChatTemplateSource("{{ raise_exception('roles must alternate') }}");
  auto refused = runtime::prepareChatTurn(*s, {.messages = chat}, &failedAt);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(failedAt, runtime::TurnStage::kTemplate);
  EXPECT_NE(refused.error().message.find("roles must alternate"), std::string::npos)
      << refused.error().message;
}

TEST(ContextOverflowPrompt, KeepsHeadAndTailOrTheTail) {
  std::vector<int32_t> prompt(100);
  std::iota(prompt.begin(), prompt.end(), 0);
  uint32_t dropped = 0;
  auto middle = runtime::fitPrompt(prompt, ContextOverflow::kTruncateMiddle, 50, 10, -1, dropped);
  ASSERT_TRUE(middle.ok());
  std::vector<int32_t> want(20);
  std::iota(want.begin(), want.end(), 0);
  for (int32_t t = 80; t < 100; ++t) want.push_back(t);
  EXPECT_EQ(*middle, want);
  EXPECT_EQ(dropped, 60u);
  auto rolling = runtime::fitPrompt(prompt, ContextOverflow::kRolling, 50, 10, -1, dropped);
  ASSERT_TRUE(rolling.ok());
  std::vector<int32_t> tail(40);
  std::iota(tail.begin(), tail.end(), 60);
  EXPECT_EQ(*rolling, tail);
  EXPECT_FALSE(runtime::fitPrompt(prompt, ContextOverflow::kStop, 50, 10, -1, dropped).ok());
  EXPECT_FALSE(runtime::fitPrompt(prompt, ContextOverflow::kRolling, 50, 50, -1, dropped).ok());
  // BOS (here token 0) stays at the front under rolling.
  auto withBos = runtime::fitPrompt(prompt, ContextOverflow::kRolling, 50, 10, 0, dropped);
  ASSERT_TRUE(withBos.ok());
  std::vector<int32_t> bosTail{0};
  for (int32_t t = 61; t < 100; ++t) bosTail.push_back(t);
  EXPECT_EQ(*withBos, bosTail);
  // A prompt the context holds is left as given, even with little room for the reply.
  const std::vector<int32_t> short45(prompt.begin(), prompt.begin() + 45);
  auto kept = runtime::fitPrompt(short45, ContextOverflow::kRolling, 50, 10, -1, dropped);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, short45);
  auto fits = runtime::fitPrompt(prompt, ContextOverflow::kStop, 200, 10, -1, dropped);
  ASSERT_TRUE(fits.ok());
  EXPECT_EQ(*fits, prompt);
  EXPECT_EQ(dropped, 0u);
}

TEST(ContextOverflowNames, ParseAndName) {
  for (auto o :
       {ContextOverflow::kStop, ContextOverflow::kTruncateMiddle, ContextOverflow::kRolling})
    EXPECT_EQ(runtime::parseContextOverflow(runtime::contextOverflowName(o)).value(), o);
  EXPECT_FALSE(runtime::parseContextOverflow("middle").ok());
}

}  // namespace
}  // namespace kvscope::test
