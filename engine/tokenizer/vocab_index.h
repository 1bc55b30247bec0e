#pragma once
// Internal to the tokenizer library: lookup tables built once from a Vocab and
// the two merge algorithms that use them (spm.cpp, bpe.cpp). Both encoders
// append to `out` and never fail: text the vocabulary cannot spell falls back
// to byte tokens, then to the unknown token, then is dropped.

#include <array>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/vocab.h"

namespace kvscope::tokenizer {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct VocabIndex {
  const Vocab* vocab = nullptr;
  StringMap textToId;                   // every token's text, special ones included
  StringMap mergeRank;                  // "left right" -> rank (first occurrence wins)
  std::array<TokenId, 256> byteTokens;  // the token spelling each raw byte, or kNoToken

  TokenId find(std::string_view text) const {
    const auto it = textToId.find(text);
    return it == textToId.end() ? kNoToken : it->second;
  }
};

// SentencePiece: `text` has spaces already escaped as "▁".
void spmEncode(const VocabIndex& index, std::string_view text, std::vector<TokenId>& out);

// BPE on one pre-tokenized piece: byte-level encoded for byteLevel vocabularies,
// "▁"-escaped UTF-8 otherwise.
void bpeEncodeWord(const VocabIndex& index, std::string_view word, std::vector<TokenId>& out);

}  // namespace kvscope::tokenizer
