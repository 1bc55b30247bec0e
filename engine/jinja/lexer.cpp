#include "jinja/lexer.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "core/utf8_encode.h"
#include "jinja/value.h"

namespace kvscope::jinja {
namespace {

bool isSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool isNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool isDigit(char c) {
  return c >= '0' && c <= '9';
}

std::string normalizeNewlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : m_src(normalizeNewlines(source)) {
    if (!m_src.empty() && m_src.back() == '\n') m_src.pop_back();
  }

  std::vector<Token> run() {
    bool lineStarting = true;
    while (m_pos < m_src.size()) {
      const size_t open = findOpener(m_pos);
      std::string text = m_src.substr(m_pos, open - m_pos);
      if (open == m_src.size()) {
        emitText(std::move(text));
        break;
      }
      const char kind = m_src[open + 1];  // '{', '%' or '#'
      const char modifier = open + 2 < m_src.size() ? m_src[open + 2] : '\0';
      if (modifier == '-') {
        text.erase(
            std::find_if(text.rbegin(), text.rend(), [](char c) { return !isSpace(c); }).base(),
            text.end());
      } else if (modifier != '+' && kind != '{') {
        lstripLine(text, lineStarting);
      }
      emitText(std::move(text));
      m_pos = open + 2 + (modifier == '-' || modifier == '+' ? 1 : 0);
      if (kind == '#') {
        skipComment();
      } else if (kind == '%' && tryRaw()) {
        // the raw block's text is emitted
      } else {
        lexTag(kind == '{');
      }
      lineStarting = m_pos > 0 && m_src[m_pos - 1] == '\n';
    }
    m_tokens.push_back({TokenKind::kEnd, {}, m_line});
    return std::move(m_tokens);
  }

 private:
  [[noreturn]] void fail(const std::string& message) const { throw TemplateError{message, m_line}; }

  size_t findOpener(size_t from) const {
    for (size_t i = from; i + 1 < m_src.size(); ++i) {
      if (m_src[i] == '{' && (m_src[i + 1] == '{' || m_src[i + 1] == '%' || m_src[i + 1] == '#'))
        return i;
    }
    return m_src.size();
  }

  // lstrip_blocks: drop the spaces between a line's start and a block tag.
  static void lstripLine(std::string& text, bool lineStarting) {
    const size_t lpos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
    if (lpos == 0 && !lineStarting) return;
    if (lpos == text.size()) return;
    const bool blank =
        std::all_of(text.begin() + static_cast<std::ptrdiff_t>(lpos), text.end(),
                    [](char c) { return c == ' ' || c == '\t' || c == '\v' || c == '\f'; });
    if (blank) text.resize(lpos);
  }

  void emitText(std::string text) {
    const int line = m_line;
    m_line += static_cast<int>(std::count(text.begin(), text.end(), '\n'));
    if (!text.empty()) m_tokens.push_back({TokenKind::kText, std::move(text), line});
  }

  void advance(size_t n) {
    for (size_t i = 0; i < n && m_pos < m_src.size(); ++i, ++m_pos) {
      if (m_src[m_pos] == '\n') ++m_line;
    }
  }

  bool at(std::string_view s) const { return std::string_view(m_src).substr(m_pos).starts_with(s); }

  // After a tag's closing delimiter: "-" strips all following whitespace,
  // trim_blocks (block tags and comments only) one newline, "+" nothing.
  void afterClose(char modifier, bool trimNewline) {
    if (modifier == '-') {
      while (m_pos < m_src.size() && isSpace(m_src[m_pos])) advance(1);
    } else if (modifier != '+' && trimNewline && m_pos < m_src.size() && m_src[m_pos] == '\n') {
      advance(1);
    }
  }

  void skipComment() {
    const size_t end = m_src.find("#}", m_pos);
    if (end == std::string::npos) fail("unterminated comment: missing '#}'");
    const char modifier =
        end > m_pos && (m_src[end - 1] == '-' || m_src[end - 1] == '+') ? m_src[end - 1] : '\0';
    advance(end + 2 - m_pos);
    afterClose(modifier, true);
  }

  // {% raw %} … {% endraw %}: everything between is text.
  bool tryRaw() {
    size_t p = m_pos;
    while (p < m_src.size() && isSpace(m_src[p])) ++p;
    if (std::string_view(m_src).substr(p, 3) != "raw") return false;
    p += 3;
    while (p < m_src.size() && isSpace(m_src[p])) ++p;
    char openModifier = '\0';
    if (p < m_src.size() && (m_src[p] == '-' || m_src[p] == '+')) openModifier = m_src[p++];
    if (std::string_view(m_src).substr(p, 2) != "%}") return false;
    advance(p + 2 - m_pos);
    afterClose(openModifier, true);
    // Find "{%[-+]? endraw [-+]?%}".
    for (size_t i = m_src.find("{%", m_pos); i != std::string::npos; i = m_src.find("{%", i + 2)) {
      size_t q = i + 2;
      const char innerModifier =
          q < m_src.size() && (m_src[q] == '-' || m_src[q] == '+') ? m_src[q++] : '\0';
      while (q < m_src.size() && isSpace(m_src[q])) ++q;
      if (std::string_view(m_src).substr(q, 6) != "endraw") continue;
      q += 6;
      while (q < m_src.size() && isSpace(m_src[q])) ++q;
      char closeModifier = '\0';
      if (q < m_src.size() && (m_src[q] == '-' || m_src[q] == '+')) closeModifier = m_src[q++];
      if (std::string_view(m_src).substr(q, 2) != "%}") continue;
      std::string text = m_src.substr(m_pos, i - m_pos);
      if (innerModifier == '-') {
        while (!text.empty() && isSpace(text.back())) text.pop_back();
      }
      emitText(std::move(text));
      m_pos = i;
      advance(q + 2 - i);
      afterClose(closeModifier, true);
      return true;
    }
    fail("unterminated {% raw %} block: missing {% endraw %}");
  }

  void lexTag(bool variable) {
    m_tokens.push_back({variable ? TokenKind::kVarBegin : TokenKind::kBlockBegin, {}, m_line});
    int depth = 0;
    while (true) {
      while (m_pos < m_src.size() && isSpace(m_src[m_pos])) advance(1);
      if (m_pos >= m_src.size()) {
        fail(variable ? "unterminated '{{': missing '}}'" : "unterminated '{%': missing '%}'");
      }
      if (depth == 0) {
        const std::string_view close = variable ? "}}" : "%}";
        for (const char modifier : {'-', '+', '\0'}) {
          if (modifier == '+' && variable) continue;
          const std::string delimiter =
              modifier ? std::string(1, modifier) + std::string(close) : std::string(close);
          if (at(delimiter)) {
            m_tokens.push_back({variable ? TokenKind::kVarEnd : TokenKind::kBlockEnd, {}, m_line});
            advance(delimiter.size());
            afterClose(modifier, !variable);
            return;
          }
        }
      }
      const char c = m_src[m_pos];
      if (isNameStart(c)) {
        size_t end = m_pos;
        while (end < m_src.size() && (isNameStart(m_src[end]) || isDigit(m_src[end]))) ++end;
        m_tokens.push_back({TokenKind::kName, m_src.substr(m_pos, end - m_pos), m_line});
        advance(end - m_pos);
      } else if (isDigit(c)) {
        lexNumber();
      } else if (c == '\'' || c == '"') {
        lexString(c);
      } else {
        lexOperator(depth);
      }
    }
  }

  void lexNumber() {
    size_t end = m_pos;
    bool isFloat = false;
    while (end < m_src.size() && (isDigit(m_src[end]) || m_src[end] == '_')) ++end;
    if (end + 1 < m_src.size() && m_src[end] == '.' && isDigit(m_src[end + 1])) {
      isFloat = true;
      ++end;
      while (end < m_src.size() && (isDigit(m_src[end]) || m_src[end] == '_')) ++end;
    }
    if (end < m_src.size() && (m_src[end] == 'e' || m_src[end] == 'E')) {
      size_t e = end + 1;
      if (e < m_src.size() && (m_src[e] == '+' || m_src[e] == '-')) ++e;
      if (e < m_src.size() && isDigit(m_src[e])) {
        isFloat = true;
        end = e;
        while (end < m_src.size() && isDigit(m_src[end])) ++end;
      }
    }
    std::string text;
    for (size_t i = m_pos; i < end; ++i) {
      if (m_src[i] != '_') text += m_src[i];
    }
    m_tokens.push_back({isFloat ? TokenKind::kFloat : TokenKind::kInt, std::move(text), m_line});
    advance(end - m_pos);
  }

  // Python string-literal escapes; an unknown escape keeps its backslash.
  void lexString(char quote) {
    const int line = m_line;
    std::string value;
    size_t p = m_pos + 1;
    while (true) {
      if (p >= m_src.size()) fail("unterminated string literal");
      const char c = m_src[p];
      if (c == quote) break;
      if (c != '\\' || p + 1 >= m_src.size()) {
        value += c;
        ++p;
        continue;
      }
      const char e = m_src[p + 1];
      p += 2;
      switch (e) {
        case 'n':
          value += '\n';
          break;
        case 't':
          value += '\t';
          break;
        case 'r':
          value += '\r';
          break;
        case '0':
          value += '\0';
          break;
        case 'b':
          value += '\b';
          break;
        case 'f':
          value += '\f';
          break;
        case 'v':
          value += '\v';
          break;
        case '\\':
        case '\'':
        case '"':
          value += e;
          break;
        case '\n':
          break;  // a backslash-newline continues the literal
        case 'x':
        case 'u':
        case 'U': {
          const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (size_t i = 0; i < digits; ++i) {
            const char h = p + i < m_src.size() ? m_src[p + i] : '\0';
            const int d = isDigit(h)               ? h - '0'
                          : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                          : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                                   : -1;
            if (d < 0) fail(fmt::format("bad \\{} escape in a string literal", e));
            cp = cp * 16 + static_cast<uint32_t>(d);
          }
          p += digits;
          if (cp > 0x10FFFF) fail("a \\U escape past U+10FFFF in a string literal");
          appendCodepoint(value, cp);
          break;
        }
        default:
          value += '\\';
          value += e;
      }
    }
    m_tokens.push_back({TokenKind::kString, std::move(value), line});
    advance(p + 1 - m_pos);
  }

  void lexOperator(int& depth) {
    static constexpr std::array<std::string_view, 6> kTwo = {"//", "**", "==", "!=", "<=", ">="};
    for (const std::string_view op : kTwo) {
      if (at(op)) {
        m_tokens.push_back({TokenKind::kOperator, std::string(op), m_line});
        advance(2);
        return;
      }
    }
    const char c = m_src[m_pos];
    if (std::string_view("+-*/%~()[]{},.:|=<>").find(c) == std::string_view::npos) {
      fail(fmt::format("unexpected character '{}'", c));
    }
    if (c == '(' || c == '[' || c == '{') ++depth;
    if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
    m_tokens.push_back({TokenKind::kOperator, std::string(1, c), m_line});
    advance(1);
  }

  std::string m_src;
  size_t m_pos = 0;
  int m_line = 1;
  std::vector<Token> m_tokens;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  return Lexer(source).run();
}

}  // namespace kvscope::jinja
