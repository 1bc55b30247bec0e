#pragma once
// Vocab: the plain data a Tokenizer is built from.
//
// Two loaders fill it — vocabFromGguf() (gguf_vocab.h) from GGUF metadata and
// vocabFromHfTokenizerJson() (hf_vocab.h) from a Hugging Face tokenizer.json —
// and Tokenizer::create() checks and indexes it. It holds no behaviour of its
// own, so tests can build small vocabularies by hand.
//
// Three tokenization schemes are covered:
//   kSpm                   SentencePiece: merges adjacent pieces by score;
//                          spaces become "▁"; unknown bytes fall back to <0xXX>.
//   kBpe, byteLevel=true   GPT-2 byte-level BPE: regex pre-tokenizer, every byte
//                          mapped to a printable character, merges by rank.
//   kBpe, byteLevel=false  SentencePiece-style BPE: merges by rank over raw
//                          UTF-8 with "▁" for spaces and <0xXX> byte fallback.

#include <cstdint>
#include <string>
#include <vector>

namespace kvscope::tokenizer {

using TokenId = int32_t;
inline constexpr TokenId kNoToken = -1;

// Numbered as GGUF's tokenizer.ggml.token_type.
enum class TokenType : uint8_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // special: matched in text only when parseSpecial, rendered on request
  kUserDefined = 4,  // always matched in text before tokenizing, always rendered
  kUnused = 5,
  kByte = 6,  // <0xXX>
};

enum class VocabKind { kSpm, kBpe };

struct TokenData {
  std::string text;
  float score = 0.0f;  // SPM merge priority (higher merges first)
  TokenType type = TokenType::kNormal;
  bool lstrip = false;  // when matched as a special token, drop the whitespace before it
  bool rstrip = false;  // ... and after it
};

struct Vocab {
  VocabKind kind = VocabKind::kSpm;
  std::vector<TokenData> tokens;    // [n_vocab], indexed by TokenId
  std::vector<std::string> merges;  // kBpe: "left right"; a merge's rank is its index
  bool byteLevel = true;            // kBpe: GPT-2 byte mapping (see above)
  // kBpe: tokenizer.ggml.pre name selecting the regex list (pretokenize.h);
  // "none" keeps the whole text as one piece.
  std::string preTokenizer = "default";
  bool ignoreMerges = false;  // kBpe: a piece that is already a token is taken whole (llama3)
  bool fuseUnknown = false;   // consecutive unknown-token fallbacks collapse into one

  TokenId bos = kNoToken;
  TokenId eos = kNoToken;
  TokenId eot = kNoToken;  // end of turn, when the model has one besides eos
  TokenId unk = kNoToken;
  TokenId pad = kNoToken;
  bool addBos = false;
  bool addEos = false;
  // Prefix " " to text at the start and after each special token (kSpm and
  // SentencePiece-style kBpe); decoding strips it again.
  bool addSpacePrefix = false;

  std::string chatTemplate;  // Jinja source from the model, possibly empty
};

}  // namespace kvscope::tokenizer
