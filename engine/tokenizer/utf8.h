#pragma once
// UTF-8 and GPT-2 byte-level helpers shared by the tokenizers and detokenizers.
//
// Everything works on byte strings. sanitize() reproduces how llama.cpp decodes
// text before pre-tokenizing it (a byte that does not start a well-formed
// sequence becomes U+FFFD), so byte-level BPE sees exactly the codepoints
// llama.cpp sees. The byte-level map is GPT-2's bytes_to_unicode(): every byte
// gets a printable stand-in character so merges never see raw control bytes.

#include <cstdint>
#include <string>
#include <string_view>

#include "core/utf8_encode.h"

namespace kvscope::tokenizer::utf8 {

// Bytes in the sequence a lead byte announces, counted by its high nibble as
// llama.cpp does (a stray continuation byte counts as 1).
size_t sequenceLength(uint8_t lead);

using ::kvscope::appendCodepoint;  // core/utf8_encode.h

// Decodes and re-encodes `text`: malformed bytes, surrogates and codepoints past
// U+10FFFF each become U+FFFD, so the result is valid UTF-8.
std::string sanitize(std::string_view text);

// GPT-2 byte-level encoding: each byte becomes its stand-in character (UTF-8).
std::string byteLevelEncode(std::string_view bytes);
// Maps stand-in characters back to bytes; a character with no byte keeps its
// own UTF-8 encoding.
std::string byteLevelDecode(std::string_view text);

// For streaming: moves the longest prefix of `pending` that ends on a character
// boundary into the result, with malformed bytes replaced by U+FFFD. A tail that
// may still become a valid character stays in `pending`.
std::string takeComplete(std::string& pending);

}  // namespace kvscope::tokenizer::utf8
