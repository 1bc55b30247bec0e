#pragma once
// UTF-8 encoding of one code point, shared by the tokenizers and the Jinja
// lexer (string-literal escapes).

#include <cstdint>
#include <string>

namespace kvscope {

// Appends `codepoint`'s UTF-8 bytes; the caller keeps it at most U+10FFFF.
void appendCodepoint(std::string& out, uint32_t codepoint);

}  // namespace kvscope
