#pragma once
// A tiny SentencePiece vocabulary built in code, so tokenizer behaviour can be
// tested without fixtures. Ids: 0 <unk>, 1 <s>, 2 </s>, 3..258 the byte tokens
// <0x00>..<0xFF>, then the pieces below.

#include <fmt/format.h>

#include "tokenizer/vocab.h"

namespace kvscope::tokenizer::handmade {

inline constexpr TokenId kByteBase = 3;
inline constexpr TokenId kSpace = 259;    // "▁"
inline constexpr TokenId kH = 260;        // "h"
inline constexpr TokenId kI = 261;        // "i"
inline constexpr TokenId kSpaceH = 262;   // "▁h"
inline constexpr TokenId kHi = 263;       // "hi" (scores above "▁h", so merges first)
inline constexpr TokenId kImStart = 264;  // "<|im_start|>" (control)
inline constexpr TokenId kTool = 265;     // "<tool>" (user-defined)

inline Vocab spmVocab() {
  Vocab v;
  v.kind = VocabKind::kSpm;
  v.tokens.push_back({"<unk>", 0.0f, TokenType::kUnknown});
  v.tokens.push_back({"<s>", 0.0f, TokenType::kControl});
  v.tokens.push_back({"</s>", 0.0f, TokenType::kControl});
  for (int b = 0; b < 256; ++b)
    v.tokens.push_back({fmt::format("<0x{:02X}>", b), 0.0f, TokenType::kByte});
  v.tokens.push_back({"\xE2\x96\x81", -1.0f});
  v.tokens.push_back({"h", -2.0f});
  v.tokens.push_back({"i", -2.0f});
  v.tokens.push_back({"\xE2\x96\x81h", -3.0f});
  v.tokens.push_back({"hi", -1.5f});
  v.tokens.push_back({"<|im_start|>", 0.0f, TokenType::kControl});
  v.tokens.push_back({"<tool>", 0.0f, TokenType::kUserDefined});
  v.bos = 1;
  v.eos = 2;
  v.unk = 0;
  v.addBos = true;
  v.addSpacePrefix = true;
  return v;
}

}  // namespace kvscope::tokenizer::handmade
