// SessionSlots on the demo model: a request goes to the slot whose cache
// shares at least half of its prompt, else to a new slot while there is room,
// else to the least recently used one; the first slot is the runner's session
// and the others its siblings, with caches of their own.
#include "server/session_slots.h"

#include <gtest/gtest.h>

#include "model/model_tokenizer.h"
#include "runtime/backend_factory.h"
#include "support/demo_model.h"
#include "support/served_session.h"

namespace kvscope::server {
namespace {

std::unique_ptr<runtime::Session> demoSession() {
  return test::openServedDemoSession();
}

// Runs `text` in the slot the slots choose; returns that slot's session.
runtime::Session* run(SessionSlots& slots, const std::string& text, uint32_t& reused) {
  auto any = slots.any();
  if (!any.ok()) return nullptr;
  const std::vector<int32_t> prompt = (*any)->tokenizeCompletion(text);
  auto slot = slots.acquire(prompt);
  if (!slot.ok()) return nullptr;
  runtime::GenerateOptions options;
  options.maxTokens = 4;
  options.sampler.temperature = 0;
  auto result = (*slot)->generate(prompt, options);
  if (!result.ok()) return nullptr;
  reused = result->stats.reusedTokens;
  return *slot;
}

TEST(SessionSlots, PrefixReuseNewSlotsThenLeastRecentlyUsed) {
  int made = 0;
  SessionSlots slots(2, [&]() -> Expected<std::unique_ptr<runtime::Session>> {
    ++made;
    auto s = demoSession();
    if (!s) return makeError(ErrorCode::kNotFound, "no demo model");
    return s;
  });
  uint32_t reused = 0;
  runtime::Session* a = run(slots, "Once upon a time there was a little dog", reused);
  ASSERT_TRUE(a);
  EXPECT_EQ(reused, 0u);
  // The same conversation, longer: slot a, its cache reused.
  const std::vector<int32_t> history = a->history();
  EXPECT_EQ(run(slots, "Once upon a time there was a little dog named Max", reused), a);
  EXPECT_GE(reused, 8u);
  // Another text: a second slot; slot a keeps its cache.
  const std::vector<int32_t> aHistory = a->history();
  runtime::Session* b = run(slots, "The sun was hot and the birds sang", reused);
  ASSERT_TRUE(b);
  EXPECT_NE(b, a);
  EXPECT_EQ(reused, 0u);
  EXPECT_EQ(a->history(), aHistory);
  EXPECT_EQ(slots.size(), 2u);
  EXPECT_EQ(made, 1);  // a is the maker's session (the first slot), b its sibling
  // Back to a's conversation: a again, not b.
  EXPECT_EQ(run(slots, "Once upon a time there was a little dog named Max", reused), a);
  EXPECT_GT(reused, 0u);
  // A third text with no room left: the least recently used slot, b.
  EXPECT_EQ(run(slots, "Tom liked to eat apples in the garden", reused), b);
  EXPECT_EQ(slots.size(), 2u);
}

// A second slot that cannot be made (here: a session without a factory; in the
// app, a GPU without room for another copy of the weights) is no failure:
// requests share the slot there is.
TEST(SessionSlots, ASlotThatCannotBeMadeFallsBackToTheOnesThereAre) {
  SessionSlots slots(2, []() -> Expected<std::unique_ptr<runtime::Session>> {
    auto model = test::openDemoModel();
    if (!model) return makeError(ErrorCode::kNotFound, "no demo model");
    auto backend = runtime::makeBackend(model, {.kind = "cpu", .threads = 1});
    if (!backend.ok()) return backend.takeError();
    return std::make_unique<runtime::Session>(model, std::move(*backend),
                                              model::loadTokenizer(*model).value());
  });
  uint32_t reused = 0;
  runtime::Session* a = run(slots, "Once upon a time there was a little dog", reused);
  ASSERT_TRUE(a);
  EXPECT_EQ(run(slots, "The sun was hot and the birds sang", reused), a);
  EXPECT_EQ(slots.size(), 1u);
}

TEST(SessionSlots, AFirstSessionThatCannotBeMadeIsAnError) {
  SessionSlots slots(2, []() -> Expected<std::unique_ptr<runtime::Session>> {
    return makeError(ErrorCode::kOutOfMemory, "no room for another cache");
  });
  auto any = slots.any();
  ASSERT_FALSE(any.ok());
  EXPECT_EQ(any.error().message, "no room for another cache");
  EXPECT_EQ(slots.size(), 0u);
}

}  // namespace
}  // namespace kvscope::server
