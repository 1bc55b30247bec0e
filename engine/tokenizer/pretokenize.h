#pragma once
// Regex pre-tokenization for byte-level BPE, as llama.cpp does it.
//
// A pre-tokenizer is an ordered list of regexes. Each one refines the pieces
// left by the previous: inside every piece, the matches and the gaps between
// them all become pieces, and a regex never sees past its piece (so `$` and
// lookaheads stop at the piece's end). The regexes are llama.cpp's (their
// "adapted" forms, which is what llama.cpp runs), compiled with PCRE2 in UTF +
// UCP mode, JIT-compiled where available. To reproduce llama.cpp's treatment of
// non-ASCII whitespace (always plain `\s`, never part of an explicit range) the
// matcher runs on a copy of the text in which every such character is "\v";
// pieces are mapped back and cut from the real text.
//
// Input must be valid UTF-8 (see utf8::sanitize). Thread-safe after create().

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace kvscope::tokenizer {

// The regex list llama.cpp uses for a `tokenizer.ggml.pre` name, or kUnsupported.
Expected<std::vector<std::string>> preTokenizerRegexes(std::string_view name);

class PreTokenizer {
 public:
  static Expected<PreTokenizer> create(const std::vector<std::string>& regexes);
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Splits valid UTF-8 text into pieces that concatenate back to `text`.
  std::vector<std::string> split(std::string_view text) const;

 private:
  struct Compiled;
  PreTokenizer();
  std::vector<std::unique_ptr<Compiled>> m_regexes;
};

}  // namespace kvscope::tokenizer
