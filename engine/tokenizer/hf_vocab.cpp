#include "tokenizer/hf_vocab.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace kvscope::tokenizer {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kSpaceEscape = "\xE2\x96\x81";  // "▁"

Expected<Json> readJson(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return makeError(ErrorCode::kNotFound, "cannot open '{}'", path.string());
  std::stringstream buffer;
  buffer << in.rdbuf();
  Json json = Json::parse(buffer.str(), nullptr, /*allow_exceptions=*/false);
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

// True when `node` (a normalizer, pre-tokenizer or decoder, possibly a
// Sequence of them) contains a component satisfying `match`.
template <typename Match>
bool containsComponent(const Json& node, const char* listKey, const Match& match) {
  if (!node.is_object()) return false;
  if (match(node)) return true;
  const auto list = node.find(listKey);
  if (list == node.end() || !list->is_array()) return false;
  for (const Json& child : *list) {
    if (containsComponent(child, listKey, match)) return true;
  }
  return false;
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

// Chooses between byte-level and SentencePiece-style BPE from the pipeline.
Status readPipeline(const Json& root, Vocab& vocab) {
  const Json& pre = root.contains("pre_tokenizer") ? root["pre_tokenizer"] : Json();
  const Json& normalizer = root.contains("normalizer") ? root["normalizer"] : Json();
  const auto isType = [](const char* type) {
    return [type](const Json& n) { return n.value("type", "") == type; };
  };
  if (containsComponent(pre, "pretokenizers", isType("ByteLevel"))) {
    if (containsComponent(pre, "pretokenizers", isType("Split"))) {
      return makeError(ErrorCode::kUnsupported,
                       "this tokenizer.json uses a custom split pattern; convert the model to "
                       "GGUF, which names its pre-tokenizer");
    }
    vocab.byteLevel = true;
    vocab.preTokenizer = "gpt-2";
    return okStatus();
  }
  const bool escapesSpaces = containsComponent(normalizer, "normalizers", [](const Json& n) {
    return n.value("type", "") == "Replace" && n.contains("pattern") &&
           stringOr(n["pattern"], "String") == " " && stringOr(n, "content") == kSpaceEscape;
  });
  if (!pre.is_null() || !escapesSpaces) {
    return makeError(ErrorCode::kUnsupported,
                     "this tokenizer.json's pre-tokenization is not supported; convert the model "
                     "to GGUF");
  }
  vocab.byteLevel = false;
  vocab.preTokenizer = "none";
  vocab.addSpacePrefix = containsComponent(normalizer, "normalizers", [](const Json& n) {
    return n.value("type", "") == "Prepend" && stringOr(n, "prepend") == kSpaceEscape;
  });
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
    if (named.is_object() && stringOr(named, "name") == "default") {
      vocab.chatTemplate = stringOr(named, "template");
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
  return vocab;
}

}  // namespace kvscope::tokenizer
