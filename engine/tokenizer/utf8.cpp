#include "tokenizer/utf8.h"

#include <array>

namespace kvscope::tokenizer::utf8 {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

bool isContinuation(uint8_t byte) {
  return (byte & 0xC0) == 0x80;
}

// Decodes one sequence the way llama.cpp's unicode_cpt_from_utf8 does: the
// lead byte's high bits decide the length, only the continuation pattern is
// checked. Returns false (and leaves `length` unset) for a malformed sequence.
bool decodeLenient(std::string_view text, size_t at, uint32_t& codepoint, size_t& length) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[at + k]); };
  const uint8_t lead = byte(0);
  if (lead < 0x80) {
    codepoint = lead;
    length = 1;
    return true;
  }
  size_t n = 0;
  if ((lead & 0x40) == 0) return false;
  if ((lead & 0x20) == 0) {
    n = 2;
    codepoint = lead & 0x1F;
  } else if ((lead & 0x10) == 0) {
    n = 3;
    codepoint = lead & 0x0F;
  } else if ((lead & 0x08) == 0) {
    n = 4;
    codepoint = lead & 0x07;
  } else {
    return false;
  }
  if (at + n > text.size()) return false;
  for (size_t k = 1; k < n; ++k) {
    if (!isContinuation(byte(k))) return false;
    codepoint = (codepoint << 6) | (byte(k) & 0x3F);
  }
  length = n;
  return true;
}

// Strict sequence length for a lead byte (RFC 3629); 0 for a byte that can
// never start a character.
size_t strictLength(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// The second byte of some sequences has a narrower range, which rules out
// overlong forms, surrogates and codepoints past U+10FFFF.
bool validFollower(uint8_t lead, size_t index, uint8_t byte) {
  if (index == 1) {
    if (lead == 0xE0) return byte >= 0xA0 && byte <= 0xBF;
    if (lead == 0xED) return byte >= 0x80 && byte <= 0x9F;
    if (lead == 0xF0) return byte >= 0x90 && byte <= 0xBF;
    if (lead == 0xF4) return byte >= 0x80 && byte <= 0x8F;
  }
  return isContinuation(byte);
}

struct ByteLevelTables {
  std::array<std::string, 256> toUnicode;
  std::array<int, 512> toByte{};  // indexed by codepoint; -1 where no byte maps there
};

const ByteLevelTables& byteLevelTables() {
  static const ByteLevelTables tables = [] {
    ByteLevelTables t;
    t.toByte.fill(-1);
    const auto printable = [](int b) {
      return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cp = printable(b) ? static_cast<uint32_t>(b) : static_cast<uint32_t>(next++);
      appendCodepoint(t.toUnicode[b], cp);
      t.toByte[cp] = b;
    }
    return t;
  }();
  return tables;
}

}  // namespace

size_t sequenceLength(uint8_t lead) {
  static constexpr size_t kByNibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kByNibble[lead >> 4];
}

std::string sanitize(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t at = 0;
  while (at < text.size()) {
    uint32_t cp = 0;
    size_t length = 0;
    if (!decodeLenient(text, at, cp, length)) {
      out += kReplacement;
      ++at;
      continue;
    }
    const bool representable = cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF);
    if (representable) {
      appendCodepoint(out, cp);
    } else {
      out += kReplacement;
    }
    at += length;
  }
  return out;
}

std::string byteLevelEncode(std::string_view bytes) {
  const auto& toUnicode = byteLevelTables().toUnicode;
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) out += toUnicode[static_cast<uint8_t>(c)];
  return out;
}

std::string byteLevelDecode(std::string_view text) {
  const auto& toByte = byteLevelTables().toByte;
  std::string out;
  out.reserve(text.size());
  size_t at = 0;
  while (at < text.size()) {
    uint32_t cp = 0;
    size_t length = 0;
    if (!decodeLenient(text, at, cp, length)) {
      out += text[at++];
      continue;
    }
    if (cp < toByte.size() && toByte[cp] >= 0) {
      out += static_cast<char>(toByte[cp]);
    } else {
      out.append(text.substr(at, length));
    }
    at += length;
  }
  return out;
}

std::string takeComplete(std::string& pending) {
  std::string out;
  size_t at = 0;
  const size_t n = pending.size();
  while (at < n) {
    const auto lead = static_cast<uint8_t>(pending[at]);
    const size_t need = strictLength(lead);
    bool malformed = need == 0;
    for (size_t k = 1; !malformed && k < need && at + k < n; ++k) {
      malformed = !validFollower(lead, k, static_cast<uint8_t>(pending[at + k]));
    }
    if (malformed) {
      out += kReplacement;
      ++at;
      continue;
    }
    if (at + need > n) break;  // a prefix of a valid character: wait for more bytes
    out.append(pending, at, need);
    at += need;
  }
  pending.erase(0, at);
  return out;
}

}  // namespace kvscope::tokenizer::utf8
