#pragma once
// A compiled PCRE2 pattern for the tokenizer's normalizers and pre-tokenizers:
// UTF + UCP mode (\s, \w, \d and POSIX classes are Unicode-aware, as in the
// Oniguruma engine Hugging Face tokenizers use), `$` only at the very end,
// JIT-compiled where available. A literal pattern matches its text exactly.
//
// Subjects must be valid UTF-8 (see utf8::sanitize). Thread-safe after compile().

#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"

namespace kvscope::tokenizer {

using Span = std::pair<size_t, size_t>;  // byte offset, byte length

class Regex {
 public:
  // kUnsupported naming the pattern when PCRE2 cannot compile it.
  static Expected<Regex> compile(std::string_view pattern, bool literal = false);
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;
  ~Regex();

  // The successive leftmost non-overlapping matches in `subject`. Empty
  // matches cut nothing and are left out.
  std::vector<Span> findAll(std::string_view subject) const;

 private:
  struct Code;
  Regex();
  std::unique_ptr<Code> m_code;
};

}  // namespace kvscope::tokenizer
