#pragma once
// IncrementalDecoder: turns a stream of token ids into text for display, one
// token at a time, without ever emitting part of a UTF-8 character.
//
// A token's piece may end inside a character (byte-fallback tokens such as
// <0xF0>, or byte-level BPE tokens that split an emoji); those bytes wait until
// the character is complete. Bytes that can never form a character are emitted
// as U+FFFD, so every returned string is valid UTF-8. Concatenating all push()
// results and the final flush() gives Tokenizer::decode() of the same ids
// (with malformed bytes replaced). Not thread-safe; one decoder per stream.

#include <string>

#include "tokenizer/tokenizer.h"

namespace kvscope::tokenizer {

class IncrementalDecoder {
 public:
  // For generated text that continues a prompt, pass stripLeadingSpace = false:
  // its first "▁" is a real space.
  explicit IncrementalDecoder(const Tokenizer& tokenizer, DecodeOptions options = {});

  // The complete characters that are now available (often empty or one piece).
  std::string push(TokenId id);
  // Ends the stream: returns held-back bytes, an unfinished character as U+FFFD.
  std::string flush();
  // Starts a new stream with the same options.
  void reset();

 private:
  const Tokenizer* m_tokenizer;
  DecodeOptions m_options;
  bool m_stripPending = false;  // the next non-empty piece loses one leading space
  std::string m_pending;        // bytes of an unfinished character
};

}  // namespace kvscope::tokenizer
