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
//   kBpe, byteLevel=true   GPT-2 byte-level BPE: pre-tokenized, every byte
//                          mapped to a printable character, merges by rank.
//   kBpe, byteLevel=false  SentencePiece-style BPE: merges by rank over the
//                          UTF-8 its tokenizer.json pipeline leaves (spaces as
//                          "▁"), with <0xXX> byte fallback.
//
// A kBpe vocabulary cuts text before merging either as its tokenizer.json
// says (`pipeline`: normalizer and pre-tokenizer steps, pipeline.h) or, for a
// GGUF without kvscope's pipeline key, as llama.cpp does for the
// `preTokenizer` name.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/pipeline.h"

namespace kvscope::tokenizer {

using TokenId = int32_t;
inline constexpr TokenId kNoToken = -1;

// Vocab::preTokenizer of a tokenizer.json pipeline llama.cpp has no name for.
inline constexpr std::string_view kCustomPreTokenizer = "tokenizer.json";

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
  // kBpe: llama.cpp's tokenizer.ggml.pre name for the pre-tokenizer
  // (pretokenize.h; "none" keeps the whole text as one piece). With a
  // `pipeline` it only names it: the llama.cpp name the pipeline equals, else
  // kCustomPreTokenizer.
  std::string preTokenizer = "default";
  std::optional<TextPipeline> pipeline;  // kBpe from tokenizer.json: run instead
  bool ignoreMerges = false;  // kBpe: a piece that is already a token is taken whole (llama3)
  bool fuseUnknown = false;   // consecutive unknown-token fallbacks collapse into one

  TokenId bos = kNoToken;
  TokenId eos = kNoToken;
  TokenId eot = kNoToken;  // end of turn, when the model has one besides eos
  TokenId unk = kNoToken;
  TokenId pad = kNoToken;
  bool addBos = false;
  bool addEos = false;
  // kSpm: prefix " " to text at the start and after each special token.
  // Decoding strips one leading space again (also for SentencePiece-style
  // kBpe, whose pipeline adds the "▁").
  bool addSpacePrefix = false;

  std::string chatTemplate;  // Jinja source from the model, possibly empty
  // The model's other named templates (GGUF tokenizer.chat_template.NAME, a
  // tokenizer_config.json list entry), e.g. "tool_use" for requests with tools.
  std::vector<std::pair<std::string, std::string>> namedChatTemplates;
};

}  // namespace kvscope::tokenizer
