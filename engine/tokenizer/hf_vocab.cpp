#include "tokenizer/hf_vocab.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/json_depth.h"
#include "core/text_file.h"
#include "tokenizer/hf_pipeline.h"

namespace kvscope::tokenizer {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kSpaceEscape = "\xE2\x96\x81";  // "▁"

Expected<Json> readJson(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return makeError(ErrorCode::kNotFound, "cannot open '{}'", path.string());
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  if (jsonNestingDepth(text) > kMaxJsonDepth) {
    return makeError(ErrorCode::kBadFile, "'{}' nests deeper than {} levels", path.string(),
                     kMaxJsonDepth);
  }
  Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return makeError(ErrorCode::kBadFile, "'{}' is not valid JSON", path.string());
  }
  return json;
}

std::string stringOr(const Json& object, const char* key, std::string fallback = {}) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : fallback;
}

bool boolOr(const Json& object, const char* key, bool fallback) {
  const auto it = object.find(key);
  return it != object.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

Status readModel(const Json& model, Vocab& vocab) {
  const auto& entries = model.value("vocab", Json::object());
  if (!entries.is_object() || entries.empty()) {
    return makeError(ErrorCode::kBadFile, "tokenizer.json has no model vocabulary");
  }
  for (const auto& [text, id] : entries.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > 10'000'000) {
      return makeError(ErrorCode::kBadFile, "tokenizer.json gives token '{}' an invalid id", text);
    }
    const auto index = id.get<size_t>();
    if (index >= vocab.tokens.size()) vocab.tokens.resize(index + 1);
    vocab.tokens[index].text = text;
  }
  for (const Json& merge : model.value("merges", Json::array())) {
    if (merge.is_string()) {
      vocab.merges.push_back(merge.get<std::string>());
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      vocab.merges.push_back(merge[0].get<std::string>() + " " + merge[1].get<std::string>());
    } else {
      return makeError(ErrorCode::kBadFile, "tokenizer.json has a malformed merge");
    }
  }
  vocab.fuseUnknown = boolOr(model, "fuse_unk", false);
  vocab.ignoreMerges = boolOr(model, "ignore_merges", false);
  return okStatus();
}

void readAddedTokens(const Json& root, Vocab& vocab) {
  for (const Json& added : root.value("added_tokens", Json::array())) {
    if (!added.is_object() || !added.contains("id") || !added["id"].is_number_integer()) continue;
    const auto id = added["id"].get<size_t>();
    if (id > 10'000'000) continue;
    if (id >= vocab.tokens.size()) vocab.tokens.resize(id + 1);
    TokenData& token = vocab.tokens[id];
    token.text = stringOr(added, "content", token.text);
    token.type = boolOr(added, "special", false) ? TokenType::kControl : TokenType::kUserDefined;
    token.lstrip = boolOr(added, "lstrip", false);
    token.rstrip = boolOr(added, "rstrip", false);
  }
}

// The normalizer and pre-tokenizer, and from them the scheme: byte-level BPE
// with a ByteLevel step, else SentencePiece-style BPE, whose spaces the
// pipeline must turn into "▁" (the form its decoding undoes).
Status readPipeline(const Json& root, Vocab& vocab) {
  KVS_ASSIGN_OR_RETURN(TextPipeline pipeline, pipelineFromHfJson(root));
  const auto hasStep = [&](PreTokenizeStep::Kind kind) {
    return std::any_of(pipeline.preTokenizer.begin(), pipeline.preTokenizer.end(),
                       [&](const PreTokenizeStep& s) { return s.kind == kind; });
  };
  const auto hasNormalizer = [&](NormalizeStep::Kind kind, std::string_view pattern,
                                 std::string_view content) {
    return std::any_of(
        pipeline.normalizer.begin(), pipeline.normalizer.end(), [&](const NormalizeStep& s) {
          return s.kind == kind && s.literal && s.pattern == pattern && s.content == content;
        });
  };
  vocab.byteLevel = hasStep(PreTokenizeStep::Kind::kByteLevel);
  if (!vocab.byteLevel) {
    const bool metaspace = hasStep(PreTokenizeStep::Kind::kMetaspace);
    if (!metaspace && !hasNormalizer(NormalizeStep::Kind::kReplace, " ", kSpaceEscape)) {
      return makeError(ErrorCode::kUnsupported,
                       "this tokenizer.json neither maps bytes (ByteLevel) nor spaces to \"{}\" "
                       "(Metaspace, or a Replace normalizer); its decoding is not supported",
                       kSpaceEscape);
    }
    const auto prepends = [](const PreTokenizeStep& s) {
      return s.kind == PreTokenizeStep::Kind::kMetaspace &&
             s.prepend != PreTokenizeStep::Prepend::kNever;
    };
    vocab.addSpacePrefix =
        hasNormalizer(NormalizeStep::Kind::kPrepend, "", kSpaceEscape) ||
        std::any_of(pipeline.preTokenizer.begin(), pipeline.preTokenizer.end(), prepends);
  }
  const std::string name = llamaCppPreTokenizerName(pipeline);
  vocab.preTokenizer = name.empty() ? std::string(kCustomPreTokenizer) : name;
  vocab.pipeline = std::move(pipeline);
  return okStatus();
}

TokenId idOf(const Vocab& vocab, const std::string& text) {
  for (size_t id = 0; id < vocab.tokens.size(); ++id) {
    if (vocab.tokens[id].text == text) return static_cast<TokenId>(id);
  }
  return kNoToken;
}

// A special token in tokenizer_config.json is a string or {"content": ...}.
std::string configToken(const Json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end()) return {};
  if (it->is_string()) return it->get<std::string>();
  return it->is_object() ? stringOr(*it, "content") : std::string();
}

// BOS/EOS from the post-processor template, then tokenizer_config.json.
void readSpecials(const Json& root, const Json& config, Vocab& vocab) {
  const Json& post = root.contains("post_processor") ? root["post_processor"] : Json();
  if (post.is_object() && post.value("type", "") == "TemplateProcessing") {
    const Json& single = post.value("single", Json::array());
    const auto specialId = [&](const Json& item) {
      return item.contains("SpecialToken") ? idOf(vocab, stringOr(item["SpecialToken"], "id"))
                                           : kNoToken;
    };
    if (!single.empty()) {
      vocab.bos = specialId(single.front());
      vocab.eos = specialId(single.back());
      vocab.addBos = vocab.bos != kNoToken;
      vocab.addEos = vocab.eos != kNoToken && single.size() > 1;
    }
  }
  if (const std::string bos = configToken(config, "bos_token"); !bos.empty()) {
    vocab.bos = idOf(vocab, bos);
  }
  if (const std::string eos = configToken(config, "eos_token"); !eos.empty()) {
    vocab.eos = idOf(vocab, eos);
  }
  vocab.addBos = boolOr(config, "add_bos_token", vocab.addBos) && vocab.bos != kNoToken;
  vocab.addEos = boolOr(config, "add_eos_token", vocab.addEos) && vocab.eos != kNoToken;
  // The template is a string, or a list of named templates of which "default" is the chat one.
  const auto tmpl = config.find("chat_template");
  if (tmpl == config.end()) return;
  if (tmpl->is_string()) vocab.chatTemplate = tmpl->get<std::string>();
  if (!tmpl->is_array()) return;
  for (const Json& named : *tmpl) {
    if (!named.is_object()) continue;
    const std::string name = stringOr(named, "name");
    if (name == "default") {
      vocab.chatTemplate = stringOr(named, "template");
    } else if (!name.empty()) {
      vocab.namedChatTemplates.emplace_back(name, stringOr(named, "template"));
    }
  }
}

}  // namespace

Expected<Vocab> vocabFromHfTokenizerJson(const std::filesystem::path& tokenizerJson) {
  KVS_ASSIGN_OR_RETURN(const Json root, readJson(tokenizerJson));
  if (!root.is_object() || !root.contains("model") || !root["model"].is_object()) {
    return makeError(ErrorCode::kBadFile, "'{}' has no tokenizer model", tokenizerJson.string());
  }
  const Json& model = root["model"];
  if (const std::string type = stringOr(model, "type"); type != "BPE") {
    return makeError(ErrorCode::kUnsupported,
                     "tokenizer.json model type '{}' is not supported (only BPE); convert the "
                     "model to GGUF",
                     type);
  }
  Vocab vocab;
  vocab.kind = VocabKind::kBpe;
  KVS_TRY(readModel(model, vocab));
  readAddedTokens(root, vocab);
  KVS_TRY(readPipeline(root, vocab));
  for (size_t id = 0; id < vocab.tokens.size(); ++id) {
    TokenData& token = vocab.tokens[id];
    if (token.text.empty()) token.type = TokenType::kUnused;  // a hole in the id range
    const bool byteToken = token.text.size() == 6 && token.text.starts_with("<0x");
    if (byteToken && token.type == TokenType::kNormal) token.type = TokenType::kByte;
  }
  if (const std::string unk = stringOr(model, "unk_token"); !unk.empty()) {
    vocab.unk = idOf(vocab, unk);
    if (vocab.unk != kNoToken) vocab.tokens[vocab.unk].type = TokenType::kUnknown;
  }
  Json config = Json::object();
  const auto configPath = tokenizerJson.parent_path() / "tokenizer_config.json";
  if (std::filesystem::exists(configPath)) {
    KVS_ASSIGN_OR_RETURN(config, readJson(configPath));
  }
  readSpecials(root, config, vocab);
  // Newer folders keep the template in its own file, which wins over the
  // config's (as in transformers).
  const auto jinjaPath = tokenizerJson.parent_path() / "chat_template.jinja";
  if (std::filesystem::exists(jinjaPath)) {
    KVS_ASSIGN_OR_RETURN(vocab.chatTemplate, readTextFile(jinjaPath));
  }
  return vocab;
}

}  // namespace kvscope::tokenizer
