#pragma once
// Splits Jinja source into text and the tokens inside {{ … }} and {% … %},
// applying whitespace control the way jinja2 does in the environment Hugging
// Face renders chat templates with:
//   - trim_blocks: the first newline after a {% … %} or {# … #} tag is dropped;
//   - lstrip_blocks: spaces and tabs from the start of a line up to a {% or {#
//     are dropped;
//   - "{%-", "{{-", "{#-" strip all whitespace before the tag, "-%}", "-}}",
//     "-#}" all whitespace after it; "{%+" / "+%}" turn lstrip / trim off for
//     one tag;
//   - keep_trailing_newline off: one newline at the end of the source is dropped;
//   - line endings become "\n".
// Comments vanish; {% raw %}…{% endraw %} becomes text.

#include <string>
#include <string_view>
#include <vector>

namespace kvscope::jinja {

enum class TokenKind {
  kText,        // literal template text
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,        // identifiers and keywords (if, for, and, not, true, …)
  kString,      // a string literal, unescaped
  kInt,
  kFloat,
  kOperator,  // + - * / // % ** ~ ( ) [ ] { } , . : | = == != < > <= >=
  kEnd,       // end of the source
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string text;
  int line = 1;  // 1-based line where the token starts
};

// Throws TemplateError (with the line) on an unterminated tag, comment or string.
std::vector<Token> tokenize(std::string_view source);

}  // namespace kvscope::jinja
