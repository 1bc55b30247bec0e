#include "tokenizer/gguf_vocab.h"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "core/json_depth.h"
#include "core/log.h"
#include "tokenizer/hf_pipeline.h"

namespace kvscope::tokenizer {
namespace {

bool isOneOf(std::string_view name, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

TokenType tokenTypeFromGguf(int64_t value) {
  if (value >= 0 && value <= static_cast<int64_t>(TokenType::kByte)) {
    return static_cast<TokenType>(value);
  }
  return TokenType::kUndefined;
}

// Scores may be stored as float32 or int32; absent scores mean all zero.
Expected<std::vector<float>> readScores(const gguf::GgufFile& file, size_t count) {
  constexpr std::string_view kKey = "tokenizer.ggml.scores";
  if (!file.find(kKey)) return std::vector<float>(count, 0.0f);
  std::vector<float> scores;
  if (auto floats = file.getFloatArray(kKey)) {
    scores = std::move(*floats);
  } else if (auto ints = file.getIntArray(kKey)) {
    scores.assign(ints->begin(), ints->end());
  } else {
    return makeError(ErrorCode::kBadFile, "{} is not an array of numbers", kKey);
  }
  if (scores.size() < count) {
    return makeError(ErrorCode::kBadFile, "{} has {} entries for {} tokens", kKey, scores.size(),
                     count);
  }
  return scores;
}

Status readTokens(const gguf::GgufFile& file, Vocab& vocab) {
  auto texts = file.getStringArray("tokenizer.ggml.tokens");
  if (!texts) {
    return makeError(ErrorCode::kBadFile,
                     "the model file has no token list (tokenizer.ggml.tokens); re-convert it "
                     "with its tokenizer");
  }
  const size_t count = texts->size();
  KVS_ASSIGN_OR_RETURN(const auto scores, readScores(file, count));
  std::vector<int64_t> types;
  if (file.find("tokenizer.ggml.token_type")) {
    auto read = file.getIntArray("tokenizer.ggml.token_type");
    if (!read || read->size() < count) {
      return makeError(ErrorCode::kBadFile,
                       "tokenizer.ggml.token_type is not an integer array with one entry per "
                       "token");
    }
    types = std::move(*read);
  }
  vocab.tokens.resize(count);
  for (size_t i = 0; i < count; ++i) {
    TokenData& token = vocab.tokens[i];
    token.text = std::move((*texts)[i]);
    token.score = scores[i];
    token.type = types.empty() ? TokenType::kNormal : tokenTypeFromGguf(types[i]);
  }
  return okStatus();
}

// The special ids: llama.cpp's defaults per model, overridden by the file.
void readSpecialIds(const gguf::GgufFile& file, Vocab& vocab) {
  const auto n = static_cast<TokenId>(vocab.tokens.size());
  if (vocab.kind == VocabKind::kSpm) {
    vocab.bos = 1;
    vocab.eos = 2;
    vocab.unk = 0;
  } else {
    vocab.bos = 11;
    vocab.eos = 11;
  }
  const std::pair<std::string_view, TokenId Vocab::*> keys[] = {
      {"tokenizer.ggml.bos_token_id", &Vocab::bos},
      {"tokenizer.ggml.eos_token_id", &Vocab::eos},
      {"tokenizer.ggml.eot_token_id", &Vocab::eot},
      {"tokenizer.ggml.unknown_token_id", &Vocab::unk},
      {"tokenizer.ggml.padding_token_id", &Vocab::pad},
  };
  for (const auto& [key, field] : keys) {
    TokenId& id = vocab.*field;
    if (id >= n) id = kNoToken;
    const auto value = file.getUint(key);
    if (!value) continue;
    if (*value < static_cast<uint64_t>(n)) {
      id = static_cast<TokenId>(*value);
    } else {
      log::info("ignoring {} = {}: outside the vocabulary of {} tokens", key, *value, n);
    }
  }
}

// kvscope's copy of a tokenizer.json pipeline, when the file has one.
Status readPipeline(const gguf::GgufFile& file, Vocab& vocab) {
  const auto text = file.getString(kPipelineKey);
  if (!text) return okStatus();
  if (jsonNestingDepth(*text) > kMaxJsonDepth)
    return makeError(ErrorCode::kBadFile, "{} nests deeper than {} levels", kPipelineKey,
                     kMaxJsonDepth);
  const auto json = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded())
    return makeError(ErrorCode::kBadFile, "{} is not valid JSON", kPipelineKey);
  KVS_ASSIGN_OR_RETURN(vocab.pipeline, pipelineFromHfJson(json));
  const auto& steps = vocab.pipeline->preTokenizer;
  if (vocab.byteLevel &&
      (steps.empty() || steps.back().kind != PreTokenizeStep::Kind::kByteLevel)) {
    return makeError(ErrorCode::kBadFile, "{} lacks the ByteLevel step a gpt2 tokenizer needs",
                     kPipelineKey);
  }
  return okStatus();
}

Status readBpeSettings(const gguf::GgufFile& file, Vocab& vocab) {
  auto merges = file.getStringArray("tokenizer.ggml.merges");
  if (!merges) {
    return makeError(ErrorCode::kBadFile,
                     "the model file has a BPE tokenizer but no merges (tokenizer.ggml.merges)");
  }
  vocab.merges = std::move(*merges);
  const auto pre = file.getString("tokenizer.ggml.pre");
  vocab.preTokenizer = pre ? std::string(*pre) : "default";
  KVS_TRY(readPipeline(file, vocab));
  if (!pre && !vocab.pipeline) {
    log::warn(
        "the model file names no pre-tokenizer; using 'default', which may degrade "
        "generation quality");
  }
  const std::string_view name = vocab.preTokenizer;
  if (isOneOf(name,
              {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "tekken"})) {
    vocab.ignoreMerges = true;
    vocab.addBos = true;
  }
  if (isOneOf(name, {"chatglm-bpe", "glm4"})) vocab.bos = kNoToken;
  vocab.ignoreMerges = file.getBool(kIgnoreMergesKey).value_or(vocab.ignoreMerges);
  return okStatus();
}

// llama.cpp strips whitespace after Phi-3's special tokens (except a few),
// recognising the model by name.
void applyPhi3Quirk(const gguf::GgufFile& file, Vocab& vocab) {
  std::string name(file.getString("general.name").value_or(""));
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (name.find("phi-3") == std::string::npos && name.find("phi3") == std::string::npos) return;
  for (TokenData& token : vocab.tokens) {
    const bool special = token.type == TokenType::kControl || token.type == TokenType::kUnknown ||
                         token.type == TokenType::kUserDefined;
    if (special || token.text == "</s>") token.rstrip = true;
    if (isOneOf(token.text, {"<unk>", "<s>", "<|endoftext|>"})) token.rstrip = false;
  }
}

}  // namespace

Expected<Vocab> vocabFromGguf(const gguf::GgufFile& file) {
  const auto model = file.getString("tokenizer.ggml.model");
  if (!model || *model == "none" || *model == "no_vocab") {
    return makeError(ErrorCode::kUnsupported,
                     "the model file carries no tokenizer (tokenizer.ggml.model is missing)");
  }
  Vocab vocab;
  if (*model == "llama" && file.find(kPipelineKey) && file.find("tokenizer.ggml.merges")) {
    // kvscope's form of a SentencePiece-style BPE tokenizer.json (gguf_vocab.h).
    vocab.kind = VocabKind::kBpe;
    vocab.byteLevel = false;
    vocab.addBos = true;
  } else if (*model == "llama") {
    vocab.kind = VocabKind::kSpm;
    vocab.addBos = true;
    vocab.addSpacePrefix = true;
  } else if (*model == "gpt2") {
    vocab.kind = VocabKind::kBpe;
  } else if (*model == "gemma4") {
    // Gemma 4's files (llama.cpp's "gemma4" tokenizer): Gemma's
    // SentencePiece-style BPE, merges by rank over the text with spaces as
    // "\u2581" and byte fallback, unknown fallbacks fused, as its
    // tokenizer.json states it (Replace " " -> "\u2581", no split).
    vocab.kind = VocabKind::kBpe;
    vocab.byteLevel = false;
    vocab.addBos = true;
    vocab.fuseUnknown = true;
    vocab.pipeline = TextPipeline{.normalizer = {{.pattern = " ", .content = "\u2581"}}};
  } else {
    return makeError(ErrorCode::kUnsupported,
                     "tokenizer type '{}' is not supported (supported: llama, gpt2, gemma4)",
                     *model);
  }
  KVS_TRY(readTokens(file, vocab));
  readSpecialIds(file, vocab);
  if (vocab.kind == VocabKind::kBpe) KVS_TRY(readBpeSettings(file, vocab));
  vocab.fuseUnknown = file.getBool(kFuseUnknownKey).value_or(vocab.fuseUnknown);
  vocab.addSpacePrefix =
      file.getBool("tokenizer.ggml.add_space_prefix").value_or(vocab.addSpacePrefix);
  vocab.addBos = file.getBool("tokenizer.ggml.add_bos_token").value_or(vocab.addBos);
  vocab.addEos = file.getBool("tokenizer.ggml.add_eos_token").value_or(vocab.addEos);
  if ((vocab.addBos && vocab.bos == kNoToken) || (vocab.addEos && vocab.eos == kNoToken)) {
    return makeError(ErrorCode::kBadFile,
                     "the model file asks for a BOS/EOS token to be added but names none");
  }
  applyPhi3Quirk(file, vocab);
  vocab.chatTemplate = std::string(file.getString("tokenizer.chat_template").value_or(""));
  // Named variants: their names in tokenizer.chat_templates, each source in
  // tokenizer.chat_template.NAME.
  for (const std::string& name :
       file.getStringArray("tokenizer.chat_templates").value_or(std::vector<std::string>{})) {
    if (const auto source = file.getString("tokenizer.chat_template." + name)) {
      vocab.namedChatTemplates.emplace_back(name, std::string(*source));
    }
  }
  return vocab;
}

}  // namespace kvscope::tokenizer
