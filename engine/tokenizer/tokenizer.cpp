#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <optional>

#include "core/log.h"
#include "tokenizer/normalize.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vocab_index.h"

namespace kvscope::tokenizer {
namespace {

constexpr std::string_view kSpaceEscape = "\xE2\x96\x81";  // U+2581 "▁"

// Tokens that end a turn, which llama.cpp recognises by text because converters
// rarely record them; llama.cpp also forces them to control type.
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|eom_id|>",
    "<|return|>",
    "<|call|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "<end_of_utterance>",
    "<｜end▁of▁sentence｜>",
};

// Fill-in-the-middle markers, which llama.cpp likewise forces to control type.
constexpr std::string_view kFimTexts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>",        "▁<PRE>",
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>",        "▁<SUF>",
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>",        "▁<MID>",
    "<|fim_pad|>",    "<fim-pad>",    "<fim_pad>",    "<|fim_repo|>", "<|repo_name|>",
    "<fim-repo>",     "<|file_sep|>",
};

bool isAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

bool isSpecialType(TokenType type) {
  return type == TokenType::kControl || type == TokenType::kUnknown;
}

std::string escapeSpaces(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 2);
  for (const char c : text) {
    if (c == ' ') {
      out += kSpaceEscape;
    } else {
      out += c;
    }
  }
  return out;
}

std::string unescapeSpaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t at = 0;
  while (at < text.size()) {
    if (text.substr(at, kSpaceEscape.size()) == kSpaceEscape) {
      out += ' ';
      at += kSpaceEscape.size();
    } else {
      out += text[at++];
    }
  }
  return out;
}

// "<0xAB>" -> 0xAB
std::optional<uint8_t> parseByteToken(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text.back() != '>') return std::nullopt;
  uint8_t value = 0;
  for (const char c : text.substr(3, 2)) {
    const int digit = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                             : -1;
    if (digit < 0) return std::nullopt;
    value = static_cast<uint8_t>(value * 16 + digit);
  }
  return value;
}

std::string renderPiece(const Vocab& vocab, const TokenData& token) {
  switch (token.type) {
    case TokenType::kControl:
    case TokenType::kUnknown:
    case TokenType::kUserDefined:
      return token.text;
    case TokenType::kNormal:
      if (vocab.kind == VocabKind::kBpe && vocab.byteLevel) {
        return utf8::byteLevelDecode(token.text);
      }
      return unescapeSpaces(token.text);
    case TokenType::kByte:
      if (const auto byte = parseByteToken(token.text)) {
        return std::string(1, static_cast<char>(*byte));
      }
      return token.text;
    case TokenType::kUnused:
    case TokenType::kUndefined:
      break;
  }
  return {};
}

struct Fragment {
  TokenId id = kNoToken;  // kNoToken: raw text
  size_t offset = 0;
  size_t length = 0;
};

}  // namespace

struct Tokenizer::Impl {
  Vocab vocab;
  VocabIndex index;
  std::optional<Normalizer> normalizer;  // kBpe with a pipeline
  std::optional<PreTokenizer> pre;       // kBpe only
  std::vector<TokenId> specials;         // matched in text, longest text first
  std::vector<std::string> pieces;       // rendered with renderSpecial
  std::vector<TokenId> endOfGeneration;

  Status build();
  Status indexTokens();
  void markEndOfGeneration();
  std::vector<Fragment> partition(std::string_view text, bool parseSpecial) const;
  Status buildPipeline();
  void encodeText(std::string_view text, bool atTextStart, std::vector<TokenId>& out) const;
};

Status Tokenizer::Impl::indexTokens() {
  const auto n = static_cast<TokenId>(vocab.tokens.size());
  index.vocab = &vocab;
  index.textToId.reserve(vocab.tokens.size());
  for (TokenId id = 0; id < n; ++id) {
    std::string& text = vocab.tokens[id].text;
    if (text.empty()) text = fmt::format("[EMPTY_{}]", id);  // as llama.cpp: unique, unmatchable
    const auto [it, inserted] = index.textToId.emplace(text, id);
    if (!inserted) {
      return makeError(ErrorCode::kBadFile, "the vocabulary lists token '{}' twice (ids {} and {})",
                       text, it->second, id);
    }
  }
  for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    const std::string& merge = vocab.merges[rank];
    if (merge.find(' ', 1) == std::string::npos) continue;
    index.mergeRank.emplace(merge, static_cast<int32_t>(rank));
  }
  // Byte fallback tokens; byte-level BPE spells every byte with its own
  // stand-in character instead.
  index.byteTokens.fill(kNoToken);
  if (vocab.kind == VocabKind::kBpe && vocab.byteLevel) return okStatus();
  for (int b = 0; b < 256; ++b) {
    index.byteTokens[b] = index.find(fmt::format("<0x{:02X}>", b));
    if (index.byteTokens[b] == kNoToken && vocab.kind == VocabKind::kSpm) {
      index.byteTokens[b] = index.find(std::string(1, static_cast<char>(b)));
    }
  }
  return okStatus();
}

void Tokenizer::Impl::markEndOfGeneration() {
  const auto add = [&](TokenId id) {
    if (id != kNoToken &&
        std::find(endOfGeneration.begin(), endOfGeneration.end(), id) == endOfGeneration.end()) {
      endOfGeneration.push_back(id);
    }
  };
  const auto forceControl = [&](std::string_view text) {
    const TokenId id = index.find(text);
    if (id != kNoToken && vocab.tokens[id].type != TokenType::kControl) {
      log::debug("token {} '{}' looks like a control token; treating it as one", id, text);
      vocab.tokens[id].type = TokenType::kControl;
    }
    return id;
  };
  for (const auto text : kEndOfGenerationTexts) add(forceControl(text));
  for (const auto text : kFimTexts) forceControl(text);
  add(vocab.eos);
  add(vocab.eot);
  std::sort(endOfGeneration.begin(), endOfGeneration.end());
}

Status Tokenizer::Impl::build() {
  if (vocab.tokens.empty()) return makeError(ErrorCode::kBadFile, "the vocabulary is empty");
  const auto n = static_cast<TokenId>(vocab.tokens.size());
  for (const TokenId id : {vocab.bos, vocab.eos, vocab.eot, vocab.unk, vocab.pad}) {
    if (id < kNoToken || id >= n) {
      return makeError(ErrorCode::kBadFile, "special token id {} is outside the vocabulary of {}",
                       id, n);
    }
  }
  if ((vocab.addBos && vocab.bos == kNoToken) || (vocab.addEos && vocab.eos == kNoToken)) {
    return makeError(ErrorCode::kBadFile,
                     "the vocabulary asks for a BOS/EOS token to be added but does not name one");
  }
  KVS_TRY(indexTokens());
  markEndOfGeneration();
  if (vocab.kind == VocabKind::kBpe) KVS_TRY(buildPipeline());
  pieces.reserve(vocab.tokens.size());
  for (TokenId id = 0; id < n; ++id) {
    const TokenType type = vocab.tokens[id].type;
    if (isSpecialType(type) || type == TokenType::kUserDefined) specials.push_back(id);
    pieces.push_back(renderPiece(vocab, vocab.tokens[id]));
  }
  std::stable_sort(specials.begin(), specials.end(), [&](TokenId a, TokenId b) {
    return vocab.tokens[a].text.size() > vocab.tokens[b].text.size();
  });
  return okStatus();
}

Status Tokenizer::Impl::buildPipeline() {
  if (!vocab.pipeline) {
    if (!vocab.byteLevel) {
      return makeError(ErrorCode::kUnsupported,
                       "a SentencePiece-style BPE vocabulary needs its tokenizer.json pipeline");
    }
    KVS_ASSIGN_OR_RETURN(pre, PreTokenizer::named(vocab.preTokenizer));
    return okStatus();
  }
  KVS_ASSIGN_OR_RETURN(normalizer, Normalizer::create(vocab.pipeline->normalizer));
  KVS_ASSIGN_OR_RETURN(pre, PreTokenizer::create(vocab.pipeline->preTokenizer));
  return okStatus();
}

// Cuts special tokens out of the text, one token at a time, longest first, as
// llama.cpp's tokenizer_st_partition does.
std::vector<Fragment> Tokenizer::Impl::partition(std::string_view text, bool parseSpecial) const {
  std::vector<Fragment> fragments{{kNoToken, 0, text.size()}};
  for (const TokenId special : specials) {
    const TokenData& token = vocab.tokens[special];
    if (!parseSpecial && isSpecialType(token.type)) continue;
    std::vector<Fragment> next;
    next.reserve(fragments.size());
    for (const Fragment& fragment : fragments) {
      if (fragment.id != kNoToken) {
        next.push_back(fragment);
        continue;
      }
      size_t begin = fragment.offset;
      const size_t end = fragment.offset + fragment.length;
      const std::string_view scope = text.substr(0, end);
      for (size_t match = scope.find(token.text, begin); match != std::string_view::npos;
           match = scope.find(token.text, begin)) {
        size_t leftEnd = match;
        while (token.lstrip && leftEnd > begin && isAsciiSpace(text[leftEnd - 1])) --leftEnd;
        if (leftEnd > begin) next.push_back({kNoToken, begin, leftEnd - begin});
        next.push_back({special, match, token.text.size()});
        begin = match + token.text.size();
        while (token.rstrip && begin < end && isAsciiSpace(text[begin])) ++begin;
      }
      if (begin < end) next.push_back({kNoToken, begin, end - begin});
    }
    fragments = std::move(next);
  }
  return fragments;
}

// SentencePiece adds the space prefix where a fragment begins; BPE runs the
// normalizer and pre-tokenizer on each fragment, as Hugging Face does.
void Tokenizer::Impl::encodeText(std::string_view text, bool atTextStart,
                                 std::vector<TokenId>& out) const {
  if (vocab.kind == VocabKind::kSpm) {
    const std::string prefixed =
        vocab.addSpacePrefix ? fmt::format(" {}", text) : std::string(text);
    spmEncode(index, escapeSpaces(prefixed), out);
    return;
  }
  std::string clean = utf8::sanitize(text);
  if (normalizer) clean = normalizer->apply(clean);
  for (const std::string& word : pre->split(clean, atTextStart)) {
    bpeEncodeWord(index, vocab.byteLevel ? utf8::byteLevelEncode(word) : word, out);
  }
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Expected<Tokenizer> Tokenizer::create(Vocab vocab) {
  auto impl = std::make_unique<Impl>();
  impl->vocab = std::move(vocab);
  KVS_TRY(impl->build());
  return Tokenizer(std::move(impl));
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  const Vocab& vocab = m_impl->vocab;
  std::vector<TokenId> out;
  if (options.addSpecial && vocab.addBos) out.push_back(vocab.bos);
  if (!text.empty()) {
    for (const Fragment& fragment : m_impl->partition(text, options.parseSpecial)) {
      if (fragment.id != kNoToken) {
        out.push_back(fragment.id);
      } else {
        m_impl->encodeText(text.substr(fragment.offset, fragment.length), fragment.offset == 0,
                           out);
      }
    }
  }
  if (options.addSpecial && vocab.addEos) out.push_back(vocab.eos);
  return out;
}

std::string Tokenizer::decode(std::span<const TokenId> ids, const DecodeOptions& options) const {
  bool strip = options.stripLeadingSpace.value_or(m_impl->vocab.addSpacePrefix);
  std::string out;
  for (const TokenId id : ids) {
    std::string_view p = piece(id, options.renderSpecial);
    if (strip && !p.empty()) {
      if (p.front() == ' ') p.remove_prefix(1);
      strip = false;
    }
    out += p;
  }
  return out;
}

std::string_view Tokenizer::piece(TokenId id, bool renderSpecial) const {
  if (id < 0 || static_cast<size_t>(id) >= m_impl->pieces.size()) return {};
  if (!renderSpecial && isSpecialType(m_impl->vocab.tokens[id].type)) return {};
  return m_impl->pieces[id];
}

const Vocab& Tokenizer::vocab() const {
  return m_impl->vocab;
}
size_t Tokenizer::size() const {
  return m_impl->vocab.tokens.size();
}

std::optional<TokenId> Tokenizer::find(std::string_view tokenText) const {
  const TokenId id = m_impl->index.find(tokenText);
  if (id == kNoToken) return std::nullopt;
  return id;
}

TokenType Tokenizer::type(TokenId id) const {
  if (id < 0 || static_cast<size_t>(id) >= size()) return TokenType::kUndefined;
  return m_impl->vocab.tokens[id].type;
}

bool Tokenizer::isEndOfGeneration(TokenId id) const {
  return std::binary_search(m_impl->endOfGeneration.begin(), m_impl->endOfGeneration.end(), id);
}

std::span<const TokenId> Tokenizer::endOfGenerationIds() const {
  return m_impl->endOfGeneration;
}

}  // namespace kvscope::tokenizer
