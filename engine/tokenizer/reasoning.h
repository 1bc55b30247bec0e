#pragma once
// ReasoningSplitter: separates a reply's reasoning from its answer as the
// text streams in, for the formats models write them in:
//  - kThinkTags (Qwen3, QwQ, DeepSeek-R1): reasoning between "<think>" and
//    "</think>"; a template whose generation prompt opens the block itself
//    makes the reply start inside it.
//  - kHarmony (gpt-oss): messages "<|channel|>NAME<|message|>TEXT" ended by
//    "<|end|>", "<|return|>" or "<|call|>", each after a "<|start|>ROLE"
//    header but the first; the "analysis" channel is reasoning, the others
//    ("final", "commentary") the answer. The markers are special tokens, so
//    the reply must be decoded with them rendered.
// Markers never reach either part; the whitespace a model writes right after
// a marker ("<think>\n", "</think>\n\n") is dropped. A marker split across
// pieces is held back until it is whole or cannot be one, so the parts of
// any split of a text into pieces concatenate to the parts of the whole.

#include <string>
#include <string_view>

namespace kvscope::tokenizer {

enum class ReasoningFormat { kNone, kThinkTags, kHarmony };

// The format a chat template's model writes, from the markers its source
// uses: Harmony's channels, else think tags, else none.
ReasoningFormat reasoningFormatOf(std::string_view templateSource);

// Whether a rendered prompt leaves the reply inside a think block: its last
// "<think>" comes after its last "</think>" (DeepSeek-R1's generation prompt).
bool promptOpensThinking(std::string_view prompt);

struct ReasoningParts {
  std::string reasoning;
  std::string content;
};

class ReasoningSplitter {
 public:
  // kNone passes every piece to the content.
  explicit ReasoningSplitter(ReasoningFormat format, bool startsInReasoning = false);

  ReasoningParts push(std::string_view piece);
  // The end of the reply: text held back for a marker that never came.
  ReasoningParts finish();

 private:
  enum class State { kContent, kReasoning, kHeader };
  void run(ReasoningParts& out, bool final);
  // Moves `n` bytes of the held text to the current part.
  void place(ReasoningParts& out, size_t n);

  ReasoningFormat m_format;
  State m_state;
  bool m_skipSpace = false;  // drop whitespace before the next text
  std::string m_held;        // not yet placed: may begin a marker
  std::string m_header;      // kHarmony: the current message's header so far
};

}  // namespace kvscope::tokenizer
