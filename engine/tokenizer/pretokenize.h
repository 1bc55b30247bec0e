#pragma once
// Pre-tokenization for BPE: cuts text into the pieces BPE merges within.
//
// A PreTokenizer runs a list of PreTokenizeStep (pipeline.h) in order, each on
// every piece the previous steps left, with Hugging Face tokenizers'
// semantics: a Split finds the leftmost non-overlapping matches inside one
// piece (a regex never sees past its piece, so `$` and lookaheads stop at the
// piece's end), marks the matches — or with `invert` the text between them —
// as delimiters and groups the delimiters and the rest per its behaviour.
// Regexes are PCRE2 in UTF + UCP mode (regex.h); Hugging Face uses Oniguruma,
// whose `\s` differs only in U+180E MONGOLIAN VOWEL SEPARATOR (whitespace to
// PCRE2 only).
//
// named() builds llama.cpp's pre-tokenizer for a GGUF `tokenizer.ggml.pre`
// name: its regex list (the "adapted" forms llama.cpp runs), each an Isolated
// split. To reproduce llama.cpp's treatment of non-ASCII whitespace (always
// plain `\s`, never part of an explicit range) those regexes run on a copy of
// each piece in which every such character is "\v"; pieces are mapped back
// and cut from the real text.
//
// Input must be valid UTF-8 (see utf8::sanitize). Thread-safe after creation.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "tokenizer/pipeline.h"

namespace kvscope::tokenizer {

// The regex list llama.cpp uses for a `tokenizer.ggml.pre` name, or kUnsupported.
Expected<std::vector<std::string>> preTokenizerRegexes(std::string_view name);

class PreTokenizer {
 public:
  // kUnsupported when a step's regex does not compile.
  static Expected<PreTokenizer> create(const std::vector<PreTokenizeStep>& steps);
  // llama.cpp's pre-tokenizer for a `tokenizer.ggml.pre` name, or kUnsupported.
  static Expected<PreTokenizer> named(std::string_view name);
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Splits valid UTF-8 text into pieces, none empty. Split steps alone keep
  // every byte (the pieces concatenate back to `text`) unless a behaviour
  // removes delimiters; ByteLevel and Metaspace steps may add a prefix.
  // `atTextStart`: the text begins the input rather than following a special
  // token (Metaspace's "first" prepend scheme).
  std::vector<std::string> split(std::string_view text, bool atTextStart = true) const;

 private:
  struct Ops;
  PreTokenizer();
  std::unique_ptr<Ops> m_ops;
  bool m_llamaCppWhitespace = false;
};

}  // namespace kvscope::tokenizer
