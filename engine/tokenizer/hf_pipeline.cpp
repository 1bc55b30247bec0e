#include "tokenizer/hf_pipeline.h"

#include <algorithm>
#include <initializer_list>
#include <string_view>
#include <utility>

namespace kvscope::tokenizer {
namespace {

using Json = nlohmann::json;
using Kind = PreTokenizeStep::Kind;

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // "▁"

// The Split regexes of Llama 3's and Qwen 2/3's tokenizer.json, as written there.
constexpr std::string_view kLlama3Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Hugging Face's Whitespace pre-tokenizer keeps the matches of this regex.
constexpr std::string_view kWordsOrSymbols = R"(\w+|[^\w\s]+)";
// Punctuation: Unicode P* categories and every ASCII punctuation character
// (some of which, such as "$" and "+", Unicode files as symbols).
constexpr std::string_view kPunctuation = R"([\p{P}!-/:-@\[-`{-~])";

constexpr std::pair<std::string_view, SplitBehavior> kBehaviors[] = {
    {"Removed", SplitBehavior::kRemoved},
    {"Isolated", SplitBehavior::kIsolated},
    {"MergedWithPrevious", SplitBehavior::kMergedWithPrevious},
    {"MergedWithNext", SplitBehavior::kMergedWithNext},
    {"Contiguous", SplitBehavior::kContiguous},
};

constexpr std::pair<std::string_view, PreTokenizeStep::Prepend> kPrependSchemes[] = {
    {"always", PreTokenizeStep::Prepend::kAlways},
    {"first", PreTokenizeStep::Prepend::kFirst},
    {"never", PreTokenizeStep::Prepend::kNever},
};

constexpr std::pair<std::string_view, NormalizeStep::Kind> kForms[] = {
    {"NFC", NormalizeStep::Kind::kNfc},
    {"NFD", NormalizeStep::Kind::kNfd},
    {"NFKC", NormalizeStep::Kind::kNfkc},
    {"NFKD", NormalizeStep::Kind::kNfkd},
};

template <typename T, size_t N>
const std::string_view* nameOf(const std::pair<std::string_view, T> (&table)[N], T value) {
  for (const auto& [name, v] : table)
    if (v == value) return &name;
  return nullptr;
}

template <typename T, size_t N>
const T* valueOf(const std::pair<std::string_view, T> (&table)[N], std::string_view name) {
  for (const auto& [n, value] : table)
    if (n == name) return &value;
  return nullptr;
}

std::string typeOf(const Json& node) {
  const auto it = node.find("type");
  return it != node.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Expected<bool> boolOr(const Json& node, const char* key, bool fallback) {
  const auto it = node.find(key);
  if (it == node.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) {
    return makeError(ErrorCode::kBadFile, "tokenizer.json: {} '{}' is not true or false",
                     typeOf(node), key);
  }
  return it->get<bool>();
}

Expected<std::string> stringAt(const Json& node, const char* key) {
  const auto it = node.find(key);
  if (it == node.end() || !it->is_string()) {
    return makeError(ErrorCode::kBadFile, "tokenizer.json: {} has no string '{}'", typeOf(node),
                     key);
  }
  return it->get<std::string>();
}

// {"Regex": "..."} or {"String": "..."} -> (pattern, literal)
Expected<std::pair<std::string, bool>> readPattern(const Json& node) {
  const auto it = node.find("pattern");
  if (it != node.end() && it->is_object()) {
    if (it->contains("String") && (*it)["String"].is_string()) {
      return std::pair((*it)["String"].get<std::string>(), true);
    }
    if (it->contains("Regex") && (*it)["Regex"].is_string()) {
      return std::pair((*it)["Regex"].get<std::string>(), false);
    }
  }
  return makeError(ErrorCode::kBadFile,
                   "tokenizer.json: {} has no pattern {{\"Regex\": ...}} or {{\"String\": ...}}",
                   typeOf(node));
}

Expected<SplitBehavior> readBehavior(const Json& node, SplitBehavior fallback) {
  const auto it = node.find("behavior");
  if (it == node.end()) return fallback;
  const std::string name = it->is_string() ? it->get<std::string>() : it->dump();
  if (const auto* behavior = valueOf(kBehaviors, name)) return *behavior;
  return makeError(ErrorCode::kUnsupported, "tokenizer.json: split behavior '{}' is not supported",
                   name);
}

PreTokenizeStep splitStep(std::string_view pattern, SplitBehavior behavior, bool invert = false) {
  return {.pattern = std::string(pattern), .behavior = behavior, .invert = invert};
}

Expected<PreTokenizeStep> readMetaspace(const Json& node) {
  KVS_ASSIGN_OR_RETURN(const std::string replacement, stringAt(node, "replacement"));
  if (replacement != kSpaceMark) {
    return makeError(ErrorCode::kUnsupported,
                     "tokenizer.json: Metaspace with replacement '{}' is not supported (only "
                     "\"\xE2\x96\x81\")",
                     replacement);
  }
  PreTokenizeStep step{.kind = Kind::kMetaspace};
  if (const auto it = node.find("prepend_scheme"); it != node.end() && it->is_string()) {
    const auto* scheme = valueOf(kPrependSchemes, it->get<std::string>());
    if (!scheme) {
      return makeError(ErrorCode::kUnsupported,
                       "tokenizer.json: Metaspace prepend_scheme '{}' is not supported",
                       it->get<std::string>());
    }
    step.prepend = *scheme;
  } else {
    KVS_ASSIGN_OR_RETURN(const bool prefix, boolOr(node, "add_prefix_space", true));
    step.prepend = prefix ? PreTokenizeStep::Prepend::kAlways : PreTokenizeStep::Prepend::kNever;
  }
  KVS_ASSIGN_OR_RETURN(step.split, boolOr(node, "split", true));
  return step;
}

Status readPreTokenizer(const Json& node, std::vector<PreTokenizeStep>& out) {
  if (node.is_null()) return okStatus();
  const std::string type = typeOf(node);
  if (type == "Sequence") {
    const auto list = node.find("pretokenizers");
    if (list == node.end() || !list->is_array()) {
      return makeError(ErrorCode::kBadFile, "tokenizer.json: a Sequence without pretokenizers");
    }
    for (const Json& child : *list) KVS_TRY(readPreTokenizer(child, out));
  } else if (type == "Split") {
    if (!node.contains("behavior")) {
      return makeError(ErrorCode::kBadFile, "tokenizer.json: a Split without a behavior");
    }
    KVS_ASSIGN_OR_RETURN(auto pattern, readPattern(node));
    KVS_ASSIGN_OR_RETURN(const SplitBehavior behavior, readBehavior(node, SplitBehavior::kRemoved));
    KVS_ASSIGN_OR_RETURN(const bool invert, boolOr(node, "invert", false));
    out.push_back({.pattern = std::move(pattern.first),
                   .literal = pattern.second,
                   .behavior = behavior,
                   .invert = invert});
  } else if (type == "ByteLevel") {
    PreTokenizeStep step{.kind = Kind::kByteLevel};
    KVS_ASSIGN_OR_RETURN(step.addPrefixSpace, boolOr(node, "add_prefix_space", true));
    KVS_ASSIGN_OR_RETURN(step.useRegex, boolOr(node, "use_regex", true));
    out.push_back(step);
  } else if (type == "Metaspace") {
    KVS_ASSIGN_OR_RETURN(PreTokenizeStep step, readMetaspace(node));
    out.push_back(std::move(step));
  } else if (type == "Digits") {
    KVS_ASSIGN_OR_RETURN(const bool individual, boolOr(node, "individual_digits", false));
    out.push_back(
        splitStep(R"(\p{N})", individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous));
  } else if (type == "Punctuation") {
    KVS_ASSIGN_OR_RETURN(const SplitBehavior behavior,
                         readBehavior(node, SplitBehavior::kIsolated));
    out.push_back(splitStep(kPunctuation, behavior));
  } else if (type == "Whitespace") {
    out.push_back(splitStep(kWordsOrSymbols, SplitBehavior::kRemoved, /*invert=*/true));
  } else if (type == "WhitespaceSplit") {
    out.push_back(splitStep(R"(\s+)", SplitBehavior::kRemoved));
  } else {
    return makeError(ErrorCode::kUnsupported,
                     "tokenizer.json: pre-tokenizer '{}' is not supported; convert the model to "
                     "GGUF with a tool that knows it",
                     type);
  }
  return okStatus();
}

Status readNormalizer(const Json& node, std::vector<NormalizeStep>& out) {
  if (node.is_null()) return okStatus();
  const std::string type = typeOf(node);
  if (type == "Sequence") {
    const auto list = node.find("normalizers");
    if (list == node.end() || !list->is_array()) {
      return makeError(ErrorCode::kBadFile, "tokenizer.json: a Sequence without normalizers");
    }
    for (const Json& child : *list) KVS_TRY(readNormalizer(child, out));
  } else if (type == "Replace") {
    KVS_ASSIGN_OR_RETURN(auto pattern, readPattern(node));
    KVS_ASSIGN_OR_RETURN(std::string content, stringAt(node, "content"));
    out.push_back({.kind = NormalizeStep::Kind::kReplace,
                   .pattern = std::move(pattern.first),
                   .literal = pattern.second,
                   .content = std::move(content)});
  } else if (type == "Prepend") {
    KVS_ASSIGN_OR_RETURN(std::string prepend, stringAt(node, "prepend"));
    out.push_back({.kind = NormalizeStep::Kind::kPrepend, .content = std::move(prepend)});
  } else if (const auto* form = valueOf(kForms, type)) {
    out.push_back({.kind = *form});
  } else {
    return makeError(ErrorCode::kUnsupported,
                     "tokenizer.json: normalizer '{}' is not supported; convert the model to GGUF "
                     "with a tool that knows it",
                     type);
  }
  return okStatus();
}

Json patternJson(const std::string& pattern, bool literal) {
  return {{literal ? "String" : "Regex", pattern}};
}

Json stepJson(const PreTokenizeStep& step) {
  switch (step.kind) {
    case Kind::kSplit:
      return {{"type", "Split"},
              {"pattern", patternJson(step.pattern, step.literal)},
              {"behavior", *nameOf(kBehaviors, step.behavior)},
              {"invert", step.invert}};
    case Kind::kByteLevel:
      return {{"type", "ByteLevel"},
              {"add_prefix_space", step.addPrefixSpace},
              {"use_regex", step.useRegex}};
    case Kind::kMetaspace:
      return {{"type", "Metaspace"},
              {"replacement", kSpaceMark},
              {"prepend_scheme", *nameOf(kPrependSchemes, step.prepend)},
              {"split", step.split}};
  }
  return nullptr;
}

Json stepJson(const NormalizeStep& step) {
  switch (step.kind) {
    case NormalizeStep::Kind::kReplace:
      return {{"type", "Replace"},
              {"pattern", patternJson(step.pattern, step.literal)},
              {"content", step.content}};
    case NormalizeStep::Kind::kPrepend:
      return {{"type", "Prepend"}, {"prepend", step.content}};
    default:
      return {{"type", *nameOf(kForms, step.kind)}};
  }
}

}  // namespace

Expected<TextPipeline> pipelineFromHfJson(const nlohmann::json& tokenizer) {
  TextPipeline pipeline;
  const auto member = [&](const char* key) {
    const auto it = tokenizer.find(key);
    return it == tokenizer.end() ? Json() : *it;
  };
  KVS_TRY(readNormalizer(member("normalizer"), pipeline.normalizer));
  KVS_TRY(readPreTokenizer(member("pre_tokenizer"), pipeline.preTokenizer));
  const auto& steps = pipeline.preTokenizer;
  const auto byteLevel = std::find_if(steps.begin(), steps.end(),
                                      [](const auto& s) { return s.kind == Kind::kByteLevel; });
  if (byteLevel != steps.end() && byteLevel + 1 != steps.end()) {
    return makeError(ErrorCode::kUnsupported,
                     "tokenizer.json: a pre-tokenizer after ByteLevel (it would see mapped bytes) "
                     "is not supported");
  }
  const bool metaspace = std::any_of(steps.begin(), steps.end(),
                                     [](const auto& s) { return s.kind == Kind::kMetaspace; });
  if (byteLevel != steps.end() && metaspace) {
    return makeError(ErrorCode::kUnsupported,
                     "tokenizer.json: ByteLevel together with Metaspace is not supported");
  }
  return pipeline;
}

nlohmann::json pipelineToHfJson(const TextPipeline& pipeline) {
  Json normalizers = Json::array();
  for (const NormalizeStep& step : pipeline.normalizer) normalizers.push_back(stepJson(step));
  Json preTokenizers = Json::array();
  for (const PreTokenizeStep& step : pipeline.preTokenizer) preTokenizers.push_back(stepJson(step));
  return {{"normalizer", {{"type", "Sequence"}, {"normalizers", normalizers}}},
          {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", preTokenizers}}}};
}

std::string llamaCppPreTokenizerName(const TextPipeline& pipeline) {
  const PreTokenizeStep byteLevel{
      .kind = Kind::kByteLevel, .addPrefixSpace = false, .useRegex = false};
  for (const auto& [name, regex] :
       {std::pair{"llama-bpe", kLlama3Split}, std::pair{"qwen2", kQwen2Split}}) {
    const std::vector<PreTokenizeStep> steps{splitStep(regex, SplitBehavior::kIsolated), byteLevel};
    if (pipeline.preTokenizer == steps) return name;
  }
  return {};
}

}  // namespace kvscope::tokenizer
