#pragma once
// Normalizer: runs a tokenizer.json's normalizer steps (pipeline.h) on one
// fragment of text (the text between special tokens), in order, as Hugging
// Face tokenizers does: Replace (literal or PCRE2 regex, every leftmost
// non-overlapping match), Prepend, and the Unicode normalization forms
// NFC/NFD/NFKC/NFKD (ICU).
//
// Input must be valid UTF-8 (see utf8::sanitize). Thread-safe after create().

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "tokenizer/pipeline.h"

namespace kvscope::tokenizer {

class Normalizer {
 public:
  // kUnsupported when a regex does not compile or ICU lacks a normalization form.
  static Expected<Normalizer> create(const std::vector<NormalizeStep>& steps);
  Normalizer(Normalizer&&) noexcept;
  Normalizer& operator=(Normalizer&&) noexcept;
  ~Normalizer();

  std::string apply(std::string_view text) const;

 private:
  struct Steps;
  Normalizer();
  std::unique_ptr<Steps> m_steps;
};

}  // namespace kvscope::tokenizer
