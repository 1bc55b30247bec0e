// Context shift (GenerateOptions::shift) on stories260K with a 64-token
// context: a 120-token reply goes on past the end of the context, the cache
// then holds the kept prefix and the newest tokens of the conversation (an
// analytic slice of prompt + reply), its logits equal a fresh session's
// prefill of that history, and the Vulkan backend shifts the same way.
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "backend/vulkan_backend.h"
#include "support/stories_session.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

constexpr uint32_t kContext = 64;

runtime::GenerateOptions greedy(uint32_t maxTokens, bool shift) {
  runtime::GenerateOptions o;
  o.maxTokens = maxTokens;
  o.sampler.temperature = 0.0f;
  o.prefillChunk = 16;
  o.shift = {.enabled = shift, .keep = 1};  // the BOS
  return o;
}

// Checks a 120-token shifted reply and returns the session's history.
std::vector<int32_t> expectShiftedReply(runtime::Session& s) {
  const std::vector<int32_t> prompt = s.tokenizeCompletion("Once upon a time");
  EXPECT_EQ(prompt.front(), s.tokenizer().vocab().bos);
  auto r = s.generate(prompt, greedy(120, true));
  EXPECT_TRUE(r.ok()) << r.error().describe();
  if (!r.ok()) return {};
  EXPECT_EQ(r->tokens.size(), 120u);
  EXPECT_EQ(r->stop, runtime::StopReason::kMaxTokens);
  EXPECT_GE(r->stats.contextShifts, 2u);
  EXPECT_GT(r->stats.shiftedTokens, 0u);
  // Everything that was run: the prompt and the reply but its last token.
  std::vector<int32_t> stream = prompt;
  stream.insert(stream.end(), r->tokens.begin(), r->tokens.end() - 1);
  const std::vector<int32_t>& h = s.history();
  EXPECT_LE(h.size(), kContext);
  EXPECT_EQ(h.size() + r->stats.shiftedTokens, stream.size());
  // BOS, then the newest tokens with nothing left out between them.
  std::vector<int32_t> expected{prompt.front()};
  expected.insert(expected.end(), stream.end() - static_cast<std::ptrdiff_t>(h.size() - 1),
                  stream.end());
  EXPECT_EQ(h, expected);
  EXPECT_EQ(s.backend().cachedTokens(), h.size());
  return h;
}

TEST(ContextShift, AReplyGoesOnPastTheContextKeepingThePrefixAndTheNewestTokens) {
  KVS_REQUIRE_FIXTURE(sharedFile("models/stories260K.gguf"));
  auto s = openStoriesSession(kContext);
  ASSERT_TRUE(s);
  const std::vector<int32_t> history = expectShiftedReply(*s);
  ASSERT_FALSE(history.empty());

  // The shifted cache is the cache of that history: the next token equals a
  // fresh session's after prefilling it (the reference path).
  std::vector<int32_t> next = history;
  next.push_back(history.back());
  auto a = s->generate(next, greedy(1, false));
  ASSERT_TRUE(a.ok());
  auto f = openStoriesSession(kContext);
  ASSERT_TRUE(f);
  auto b = f->generate(next, greedy(1, false));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->stats.reusedTokens, history.size()) << "the shifted cache was not reused";
  EXPECT_EQ(b->stats.reusedTokens, 0u);
  EXPECT_EQ(a->tokens, b->tokens);
}

TEST(ContextShift, WithoutItTheReplyStopsAtTheEndOfTheContext) {
  KVS_REQUIRE_FIXTURE(sharedFile("models/stories260K.gguf"));
  auto s = openStoriesSession(kContext);
  ASSERT_TRUE(s);
  auto r = s->generate(s->tokenizeCompletion("Once upon a time"), greedy(120, false));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stop, runtime::StopReason::kContextFull);
  EXPECT_EQ(r->stats.contextShifts, 0u);
  EXPECT_EQ(s->history().size(), kContext);
}

TEST(ContextShift, TheVulkanBackendShiftsTheSameWay) {
  KVS_REQUIRE_FIXTURE(sharedFile("models/stories260K.gguf"));
  auto file = model::ModelFile::open(sharedFile("models/stories260K.gguf"));
  ASSERT_TRUE(file.ok());
  std::shared_ptr<const model::ModelFile> m(std::move(file).value());
  auto b = backend::VulkanBackend::create(m, {.contextLimit = kContext});
  ASSERT_TRUE(b.ok()) << b.error().describe();
  auto tok = model::loadTokenizer(*m);
  ASSERT_TRUE(tok.ok());
  runtime::Session s(m, std::move(b).value(), std::move(tok).value());
  EXPECT_FALSE(expectShiftedReply(s).empty());
}

}  // namespace
}  // namespace kvscope::test
