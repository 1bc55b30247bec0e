#include "tokenizer/detokenizer.h"

#include "tokenizer/utf8.h"

namespace kvscope::tokenizer {

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, DecodeOptions options)
    : m_tokenizer(&tokenizer), m_options(options) {
  reset();
}

void IncrementalDecoder::reset() {
  m_pending.clear();
  m_stripPending = m_options.stripLeadingSpace.value_or(m_tokenizer->vocab().addSpacePrefix);
}

std::string IncrementalDecoder::push(TokenId id) {
  std::string_view piece = m_tokenizer->piece(id, m_options.renderSpecial);
  if (m_stripPending && !piece.empty()) {
    if (piece.front() == ' ') piece.remove_prefix(1);
    m_stripPending = false;
  }
  m_pending.append(piece);
  return utf8::takeComplete(m_pending);
}

std::string IncrementalDecoder::flush() {
  std::string out = utf8::takeComplete(m_pending);
  if (!m_pending.empty()) out += "\xEF\xBF\xBD";  // an unfinished character
  m_pending.clear();
  return out;
}

}  // namespace kvscope::tokenizer
