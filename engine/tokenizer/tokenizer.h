#pragma once
// Tokenizer: text <-> token ids, matching llama.cpp's llama_tokenize and
// token_to_piece for SentencePiece ("llama") and byte-level BPE ("gpt2")
// vocabularies.
//
// encode(): special tokens are cut out of the text first — user-defined tokens
// always, control/unknown tokens only with parseSpecial — longest text first,
// honouring each token's lstrip/rstrip. The remaining fragments are tokenized by
// the vocabulary's scheme (vocab.h). addSpecial adds BOS/EOS as the vocabulary
// asks (add_bos_token / add_eos_token).
//
// decode() concatenates pieces; control tokens render only with renderSpecial.
// For streaming, use IncrementalDecoder (detokenizer.h), which never splits a
// UTF-8 character. All methods are const and thread-safe.

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "tokenizer/vocab.h"

namespace kvscope::tokenizer {

struct EncodeOptions {
  bool addSpecial = true;     // BOS/EOS per the vocabulary's add_bos/add_eos
  bool parseSpecial = false;  // match control tokens such as "<|im_start|>" in the text
};

struct DecodeOptions {
  bool renderSpecial = false;  // render control tokens as their text
  // Remove one space from the start of the output. Unset: do so when the
  // vocabulary adds a space prefix, i.e. when decoding text from its start.
  std::optional<bool> stripLeadingSpace;
};

class Tokenizer {
 public:
  // Checks the vocabulary (sizes, duplicates, special ids, merges) and builds
  // the lookup tables and pre-tokenizer.
  static Expected<Tokenizer> create(Vocab vocab);
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  std::vector<TokenId> encode(std::string_view text, const EncodeOptions& options = {}) const;
  std::string decode(std::span<const TokenId> ids, const DecodeOptions& options = {}) const;
  // The bytes one token contributes (possibly part of a UTF-8 character);
  // empty for an id out of range.
  std::string_view piece(TokenId id, bool renderSpecial = false) const;

  const Vocab& vocab() const;
  size_t size() const;
  std::optional<TokenId> find(std::string_view tokenText) const;
  TokenType type(TokenId id) const;
  // End of generation: eos, eot and the end-of-turn tokens llama.cpp knows by
  // name (<|im_end|>, <|eot_id|>, <end_of_turn>, ...).
  bool isEndOfGeneration(TokenId id) const;
  std::span<const TokenId> endOfGenerationIds() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

}  // namespace kvscope::tokenizer
