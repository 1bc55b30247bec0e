// ReasoningSplitter against hand-written splits of replies in the two formats
// (tokenizer/reasoning.h), whole and streamed in every way: one byte at a
// time and cut in two at every position, which must give the same parts.
// reasoningFormatOf against the real chat templates of tests/data.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "tokenizer/reasoning.h"

namespace kvscope::tokenizer {
namespace {

struct Case {
  const char* name;
  ReasoningFormat format;
  bool startsInReasoning;
  std::string reply;
  std::string reasoning, content;
};

const Case kCases[] = {
    {"qwen3", ReasoningFormat::kThinkTags, false,
     "<think>\nThe user greets me.\n</think>\n\nHello! How can I help?", "The user greets me.\n",
     "Hello! How can I help?"},
    {"thinking off (an empty block)", ReasoningFormat::kThinkTags, false,
     "<think>\n\n</think>\n\nPlain answer.", "", "Plain answer."},
    {"opened by the prompt (DeepSeek-R1)", ReasoningFormat::kThinkTags, true,
     "\nLet me count: 2 + 2.\n</think>\n\nIt is 4.", "Let me count: 2 + 2.\n", "It is 4."},
    {"no block", ReasoningFormat::kThinkTags, false, "Just text < with <thin brackets>.", "",
     "Just text < with <thin brackets>."},
    {"unclosed block", ReasoningFormat::kThinkTags, false, "<think>still going", "still going", ""},
    {"text before the block", ReasoningFormat::kThinkTags, false, "Hm. <think>x</think>y", "x",
     "Hm. y"},
    {"harmony", ReasoningFormat::kHarmony, false,
     "<|channel|>analysis<|message|>User says hi. Reply briefly.<|end|><|start|>assistant"
     "<|channel|>final<|message|>Hi there!<|return|>",
     "User says hi. Reply briefly.", "Hi there!"},
    {"harmony tool call", ReasoningFormat::kHarmony, false,
     "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>"
     "commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Oslo\"}<|call|>",
     "Need the weather.", "{\"city\":\"Oslo\"}"},
    {"harmony without channels", ReasoningFormat::kHarmony, false, "Plain < text.", "",
     "Plain < text."},
    {"harmony cut in a header", ReasoningFormat::kHarmony, false,
     "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|chan", "a", ""},
    {"no format", ReasoningFormat::kNone, false, "<think>kept</think>", "", "<think>kept</think>"},
};

ReasoningParts streamed(const Case& c, const std::vector<std::string_view>& pieces) {
  ReasoningSplitter s(c.format, c.startsInReasoning);
  ReasoningParts all;
  for (std::string_view p : pieces) {
    const ReasoningParts got = s.push(p);
    all.reasoning += got.reasoning;
    all.content += got.content;
  }
  const ReasoningParts last = s.finish();
  all.reasoning += last.reasoning;
  all.content += last.content;
  return all;
}

TEST(ReasoningSplitter, SplitsEveryCaseHoweverItStreams) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const ReasoningParts whole = streamed(c, {c.reply});
    EXPECT_EQ(whole.reasoning, c.reasoning);
    EXPECT_EQ(whole.content, c.content);
    std::vector<std::string_view> bytes;
    for (size_t i = 0; i < c.reply.size(); ++i)
      bytes.push_back(std::string_view(c.reply).substr(i, 1));
    const ReasoningParts byByte = streamed(c, bytes);
    EXPECT_EQ(byByte.reasoning, c.reasoning) << "one byte at a time";
    EXPECT_EQ(byByte.content, c.content) << "one byte at a time";
    for (size_t cut = 1; cut < c.reply.size(); ++cut) {
      const std::string_view r = c.reply;
      const ReasoningParts two = streamed(c, {r.substr(0, cut), r.substr(cut)});
      ASSERT_EQ(two.reasoning, c.reasoning) << "cut at " << cut;
      ASSERT_EQ(two.content, c.content) << "cut at " << cut;
    }
  }
}

// Nothing is released that a later piece could turn into a marker, and
// plain text is not held longer than that.
TEST(ReasoningSplitter, HoldsBackOnlyWhatMayBeAMarker) {
  ReasoningSplitter s(ReasoningFormat::kThinkTags);
  EXPECT_EQ(s.push("Hello <th").content, "Hello ");
  EXPECT_EQ(s.push("ink>").content, "");
  EXPECT_EQ(s.push("why").reasoning, "why");
  EXPECT_EQ(s.push("</").reasoning, "");
  const ReasoningParts closed = s.push("think> done");
  EXPECT_EQ(closed.reasoning, "");
  EXPECT_EQ(closed.content, "done");
}

std::string readTemplate(const char* name) {
  std::ifstream in(std::filesystem::path(KVSCOPE_TEST_DATA) / "chat_templates" / name);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_FALSE(text.str().empty()) << name;
  return text.str();
}

TEST(ReasoningFormat, FromTheModelsTemplates) {
  EXPECT_EQ(reasoningFormatOf(readTemplate("openai-gpt-oss-120b.jinja")),
            ReasoningFormat::kHarmony);
  EXPECT_EQ(reasoningFormatOf(readTemplate("Qwen-Qwen3-0.6B.jinja")), ReasoningFormat::kThinkTags);
  EXPECT_EQ(reasoningFormatOf(readTemplate("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja")),
            ReasoningFormat::kThinkTags);
  EXPECT_EQ(reasoningFormatOf(readTemplate("google-gemma-3.jinja")), ReasoningFormat::kNone);
  EXPECT_EQ(reasoningFormatOf(readTemplate("meta-llama-Llama-3.2-3B-Instruct.jinja")),
            ReasoningFormat::kNone);
  EXPECT_TRUE(promptOpensThinking("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(promptOpensThinking("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(promptOpensThinking("<|im_start|>assistant\n"));
}

}  // namespace
}  // namespace kvscope::tokenizer
