#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/log.h"
#include "tokenizer/utf8.h"

namespace kvscope::tokenizer {

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

namespace {

// Match data and JIT stack reused by every match on one thread.
struct MatchScratch {
  pcre2_match_data* match = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  // Long runs of whitespace make `\s+(?!\S)` backtrack deeply; the default
  // 32 KiB JIT stack is too small for that.
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);

  MatchScratch() {
    if (stack) pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchScratch() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(match);
  }
  MatchScratch(const MatchScratch&) = delete;
  MatchScratch& operator=(const MatchScratch&) = delete;
};

}  // namespace

Regex::Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;
Regex::~Regex() = default;

Expected<Regex> Regex::compile(std::string_view pattern, bool literal) {
  // PCRE2 refuses pattern-syntax options beside PCRE2_LITERAL.
  const uint32_t options =
      literal ? PCRE2_UTF | PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY;
  int errorCode = 0;
  PCRE2_SIZE errorOffset = 0;
  Regex regex;
  regex.m_code = std::make_unique<Code>();
  regex.m_code->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     options, &errorCode, &errorOffset, nullptr);
  if (!regex.m_code->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(errorCode, message, sizeof(message));
    return makeError(ErrorCode::kUnsupported,
                     "the tokenizer's regex '{}' is not supported: {} (at offset {})", pattern,
                     reinterpret_cast<const char*>(message), errorOffset);
  }
  // JIT is an optimisation only: the interpreter gives the same matches.
  pcre2_jit_compile(regex.m_code->code, PCRE2_JIT_COMPLETE);
  return regex;
}

std::vector<Span> Regex::findAll(std::string_view subject) const {
  thread_local MatchScratch scratch;
  const auto text = reinterpret_cast<PCRE2_SPTR>(subject.data());
  std::vector<Span> out;
  size_t start = 0;
  while (start < subject.size()) {
    const int rc = pcre2_match(m_code->code, text, subject.size(), start, PCRE2_NO_UTF_CHECK,
                               scratch.match, scratch.context);
    if (rc < 0) {
      if (rc != PCRE2_ERROR_NOMATCH) log::warn("tokenizer regex failed with code {}", rc);
      break;
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(scratch.match);
    const size_t begin = ovector[0];
    const size_t end = ovector[1];
    if (end == begin) {  // step over one character and search again
      if (begin >= subject.size()) break;
      start = begin + utf8::sequenceLength(static_cast<uint8_t>(subject[begin]));
      continue;
    }
    out.emplace_back(begin, end - begin);
    start = end;
  }
  return out;
}

}  // namespace kvscope::tokenizer
