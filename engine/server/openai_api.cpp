#include "server/openai_api.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "core/json_depth.h"

namespace kvscope::server {
namespace {

using nlohmann::json;

ApiError badField(std::string param, std::string message) {
  return ApiError{.status = 400,
                  .message = std::move(message),
                  .type = "invalid_request_error",
                  .param = std::move(param),
                  .code = ""};
}

// The body as a JSON object, or the error that says why it is not one. The
// nesting is checked on the text first: every later walk (dump(), the chat
// template's tools) recurses once per level.
std::optional<ApiError> parseObject(std::string_view body, json& out) {
  if (jsonNestingDepth(body) > kMaxJsonDepth) {
    return badField("", fmt::format("the request body nests arrays and objects deeper than {} "
                                    "levels",
                                    kMaxJsonDepth));
  }
  try {
    out = json::parse(body);
  } catch (const json::parse_error& e) {
    return badField("", fmt::format("the request body is not valid JSON: {}", e.what()));
  }
  if (!out.is_object()) return badField("", "the request body must be a JSON object");
  return std::nullopt;
}

// A field that is absent or null counts as not given.
const json* field(const json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<ApiError> parseMaxTokens(const json& body, const char* name,
                                       std::optional<uint32_t>& out) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  // nlohmann stores every non-negative integer as unsigned.
  if (!v->is_number_unsigned() || v->get<uint64_t>() < 1)
    return badField(name, fmt::format("'{}' must be an integer of at least 1", name));
  // Beyond the largest context anything is "until the context is full".
  const uint64_t n = v->get<uint64_t>();
  out = static_cast<uint32_t>(std::min<uint64_t>(n, std::numeric_limits<uint32_t>::max()));
  return std::nullopt;
}

std::optional<ApiError> parseStop(const json& body, std::vector<std::string>& out) {
  const json* v = field(body, "stop");
  if (!v) return std::nullopt;
  const char* message = "'stop' must be a string or an array of strings";
  if (v->is_string()) {
    if (!v->get_ref<const std::string&>().empty()) out.push_back(v->get<std::string>());
    return std::nullopt;
  }
  if (!v->is_array()) return badField("stop", message);
  for (const json& s : *v) {
    if (!s.is_string()) return badField("stop", message);
    if (!s.get_ref<const std::string&>().empty()) out.push_back(s.get<std::string>());
  }
  return std::nullopt;
}

std::optional<ApiError> parseSampling(const json& body, SamplingRequest& out) {
  if (const json* v = field(body, "model")) {
    if (!v->is_string()) return badField("model", "'model' must be a string");
    out.model = v->get<std::string>();
  }
  if (auto e = parseMaxTokens(body, "max_tokens", out.maxTokens)) return e;
  // The newer name wins when a client sends both.
  if (auto e = parseMaxTokens(body, "max_completion_tokens", out.maxTokens)) return e;
  if (const json* v = field(body, "temperature")) {
    if (!v->is_number() || v->get<double>() < 0.0 || v->get<double>() > 2.0)
      return badField("temperature", "'temperature' must be a number from 0 to 2");
    out.temperature = v->get<float>();
  }
  if (const json* v = field(body, "top_p")) {
    if (!v->is_number() || v->get<double>() <= 0.0 || v->get<double>() > 1.0)
      return badField("top_p", "'top_p' must be a number above 0 and at most 1");
    out.topP = v->get<float>();
  }
  if (const json* v = field(body, "seed")) {
    if (!v->is_number_integer()) return badField("seed", "'seed' must be an integer");
    out.seed =
        v->is_number_unsigned() ? v->get<uint64_t>() : static_cast<uint64_t>(v->get<int64_t>());
  }
  if (auto e = parseStop(body, out.stop)) return e;
  if (const json* v = field(body, "stream")) {
    if (!v->is_boolean()) return badField("stream", "'stream' must be true or false");
    out.stream = v->get<bool>();
  }
  if (const json* v = field(body, "stream_options")) {
    if (!v->is_object()) return badField("stream_options", "'stream_options' must be an object");
    if (const json* u = field(*v, "include_usage")) {
      if (!u->is_boolean())
        return badField("stream_options.include_usage", "'include_usage' must be true or false");
      out.includeUsage = u->get<bool>();
    }
  }
  if (const json* v = field(body, "n")) {
    if (!v->is_number_integer() || v->get<int64_t>() != 1)
      return badField("n", "only one choice per request is supported ('n' must be 1)");
  }
  return std::nullopt;
}

// A message's content: a string, or the text parts of an array joined.
std::optional<ApiError> parseContent(const json& message, const std::string& param,
                                     std::string& out) {
  const json* content = field(message, "content");
  if (!content) return std::nullopt;  // an assistant turn may carry only tool calls
  if (content->is_string()) {
    out = content->get<std::string>();
    return std::nullopt;
  }
  if (!content->is_array())
    return badField(param, "'content' must be a string or an array of text parts");
  for (const json& part : *content) {
    const json* type = part.is_object() ? field(part, "type") : nullptr;
    const json* text = part.is_object() ? field(part, "text") : nullptr;
    if (!type || *type != "text" || !text || !text->is_string())
      return badField(param,
                      "only text content parts ({\"type\":\"text\",\"text\":…}) are "
                      "supported");
    out += text->get<std::string>();
  }
  return std::nullopt;
}

std::optional<ApiError> parseMessages(const json& body, std::vector<tokenizer::ChatMessage>& out) {
  const json* messages = field(body, "messages");
  if (!messages) return badField("messages", "'messages' is required");
  if (!messages->is_array() || messages->empty())
    return badField("messages", "'messages' must be a non-empty array");
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string param = fmt::format("messages[{}]", i);
    if (!m.is_object()) return badField(param, "each message must be an object");
    const json* role = field(m, "role");
    if (!role || !role->is_string())
      return badField(param + ".role", "each message needs a 'role' string");
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";  // OpenAI's newer name for the system role
    if (r != "system" && r != "user" && r != "assistant")
      return badField(param + ".role",
                      fmt::format("role '{}' is not supported (system, developer, user, "
                                  "assistant)",
                                  role->get<std::string>()));
    tokenizer::ChatMessage message{std::move(r), {}};
    if (auto e = parseContent(m, param + ".content", message.content)) return e;
    out.push_back(std::move(message));
  }
  return std::nullopt;
}

std::optional<ApiError> parseTools(const json& body, std::string& out) {
  const json* tools = field(body, "tools");
  if (!tools) return std::nullopt;
  if (!tools->is_array()) return badField("tools", "'tools' must be an array of tool objects");
  if (tools->empty()) return std::nullopt;
  for (size_t i = 0; i < tools->size(); ++i) {
    if (!(*tools)[i].is_object())
      return badField(fmt::format("tools[{}]", i), "each tool must be an object");
  }
  out = tools->dump();
  return std::nullopt;
}

json choiceBase(const ResponseMeta& meta, const char* object) {
  return {{"id", meta.id}, {"object", object}, {"created", meta.created}, {"model", meta.model}};
}

json chatChunk(const ResponseMeta& meta, json delta, std::optional<FinishReason> finish) {
  json chunk = choiceBase(meta, "chat.completion.chunk");
  chunk["choices"] =
      json::array({{{"index", 0},
                    {"delta", std::move(delta)},
                    {"logprobs", nullptr},
                    {"finish_reason", finish ? json(finishReasonName(*finish)) : json(nullptr)}}});
  if (meta.includeUsage) chunk["usage"] = nullptr;
  return chunk;
}

}  // namespace

json errorJson(const ApiError& e) {
  return {{"error",
           {{"message", e.message},
            {"type", e.type},
            {"param", e.param.empty() ? json(nullptr) : json(e.param)},
            {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

std::optional<ApiError> parseChatRequest(std::string_view body, ChatRequest& out) {
  // nlohmann's accessors throw on surprises parseObject did not rule out;
  // any of those is a bad request, never a crash.
  try {
    json j;
    if (auto e = parseObject(body, j)) return e;
    if (auto e = parseMessages(j, out.messages)) return e;
    if (auto e = parseTools(j, out.toolsJson)) return e;
    return parseSampling(j, out.sampling);
  } catch (const json::exception& e) {
    return badField("", fmt::format("malformed request: {}", e.what()));
  }
}

std::optional<ApiError> parseCompletionRequest(std::string_view body, CompletionRequest& out) {
  try {
    json j;
    if (auto e = parseObject(body, j)) return e;
    const json* prompt = field(j, "prompt");
    if (!prompt) return badField("prompt", "'prompt' is required");
    if (prompt->is_array() && prompt->size() == 1) prompt = &(*prompt)[0];
    if (!prompt->is_string())
      return badField("prompt", "'prompt' must be a string (or an array of one string)");
    out.prompt = prompt->get<std::string>();
    return parseSampling(j, out.sampling);
  } catch (const json::exception& e) {
    return badField("", fmt::format("malformed request: {}", e.what()));
  }
}

const char* finishReasonName(FinishReason reason) {
  return reason == FinishReason::kLength ? "length" : "stop";
}

json usageJson(const Usage& u) {
  return {{"prompt_tokens", u.promptTokens},
          {"completion_tokens", u.completionTokens},
          {"total_tokens", u.promptTokens + u.completionTokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cachedTokens}}}};
}

json chatCompletionJson(const ResponseMeta& meta, std::string_view text, std::string_view reasoning,
                        FinishReason finish, const Usage& usage) {
  json r = choiceBase(meta, "chat.completion");
  json message = {{"role", "assistant"}, {"content", text}};
  if (!reasoning.empty()) message["reasoning_content"] = reasoning;
  r["choices"] = json::array({{{"index", 0},
                               {"message", std::move(message)},
                               {"logprobs", nullptr},
                               {"finish_reason", finishReasonName(finish)}}});
  r["usage"] = usageJson(usage);
  return r;
}

json chatRoleChunkJson(const ResponseMeta& meta) {
  return chatChunk(meta, {{"role", "assistant"}, {"content", ""}}, std::nullopt);
}

json chatTextChunkJson(const ResponseMeta& meta, std::string_view text) {
  return chatChunk(meta, {{"content", text}}, std::nullopt);
}

json chatReasoningChunkJson(const ResponseMeta& meta, std::string_view reasoning) {
  return chatChunk(meta, {{"reasoning_content", reasoning}}, std::nullopt);
}

json chatFinishChunkJson(const ResponseMeta& meta, FinishReason finish) {
  return chatChunk(meta, json::object(), finish);
}

json completionJson(const ResponseMeta& meta, std::string_view text, FinishReason finish,
                    const Usage& usage) {
  json r = choiceBase(meta, "text_completion");
  r["choices"] = json::array({{{"index", 0},
                               {"text", text},
                               {"logprobs", nullptr},
                               {"finish_reason", finishReasonName(finish)}}});
  r["usage"] = usageJson(usage);
  return r;
}

json completionChunkJson(const ResponseMeta& meta, std::string_view text,
                         std::optional<FinishReason> finish) {
  json chunk = choiceBase(meta, "text_completion");
  chunk["choices"] =
      json::array({{{"index", 0},
                    {"text", text},
                    {"logprobs", nullptr},
                    {"finish_reason", finish ? json(finishReasonName(*finish)) : json(nullptr)}}});
  if (meta.includeUsage) chunk["usage"] = nullptr;
  return chunk;
}

json usageChunkJson(const ResponseMeta& meta, std::string_view object, const Usage& usage) {
  json chunk = {{"id", meta.id},       {"object", object},         {"created", meta.created},
                {"model", meta.model}, {"choices", json::array()}, {"usage", usageJson(usage)}};
  return chunk;
}

json modelsJson(std::string_view modelId, int64_t created) {
  return {{"object", "list"},
          {"data", json::array({{{"id", modelId},
                                 {"object", "model"},
                                 {"created", created},
                                 {"owned_by", "kvscope"}}})}};
}

std::string jsonText(const json& value) {
  // A model can emit invalid UTF-8 (a byte-fallback token cut short by a
  // stop); replacing it keeps the response valid instead of throwing.
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sseEvent(const json& data) {
  return "data: " + jsonText(data) + "\n\n";
}

}  // namespace kvscope::server
