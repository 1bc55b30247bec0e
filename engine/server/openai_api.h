#pragma once
// The OpenAI HTTP API as kvscope serves it, without any networking: request
// bodies parsed and validated into typed structs, and the JSON of responses,
// stream chunks and errors built from plain values. Pure functions, so tests
// can pin every shape against hand-written JSON.
//
// Accepted request fields (others are ignored, as OpenAI clients send many):
//   chat:        messages (required; role system|developer|user|assistant,
//                content a string, null, or an array of {type:"text",text} parts)
//   completions: prompt (required; a string or an array holding one string)
//   both:        model, max_tokens, max_completion_tokens, temperature, top_p,
//                seed, stop (string or array of strings), stream,
//                stream_options.include_usage, n (only 1)
// A value of the wrong type or out of range is an ApiError naming its field.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_template.h"

namespace kvscope::server {

// An error as OpenAI reports it: the HTTP status and the fields of
// {"error":{"message","type","param","code"}}; empty param/code are null.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;
  std::string code;
};

nlohmann::json errorJson(const ApiError& error);

// What both endpoints share. Unset optionals take the server's defaults.
struct SamplingRequest {
  std::string model;                  // "" when the request names none
  std::optional<uint32_t> maxTokens;  // max_completion_tokens, else max_tokens
  std::optional<float> temperature;   // [0, 2]
  std::optional<float> topP;          // (0, 1]
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;  // non-empty strings
  bool stream = false;
  bool includeUsage = false;  // stream_options.include_usage
};

struct ChatRequest {
  std::vector<tokenizer::ChatMessage> messages;  // "developer" arrives as "system"
  // The request's "tools" (an array of objects) as JSON text, for templates that
  // describe tools to the model; empty when it sent none. The reply stays text:
  // tool calls the model writes are not parsed into "tool_calls".
  std::string toolsJson;
  SamplingRequest sampling;
};

struct CompletionRequest {
  std::string prompt;
  SamplingRequest sampling;
};

// Parse a request body; on failure `out` is unspecified and the error says
// which field is wrong (malformed JSON has no param).
std::optional<ApiError> parseChatRequest(std::string_view body, ChatRequest& out);
std::optional<ApiError> parseCompletionRequest(std::string_view body, CompletionRequest& out);

enum class FinishReason { kStop, kLength };
const char* finishReasonName(FinishReason reason);

struct Usage {
  uint32_t promptTokens = 0;
  uint32_t completionTokens = 0;
  uint32_t cachedTokens = 0;  // prompt tokens reused from the KV cache
};
nlohmann::json usageJson(const Usage& usage);

// The fields every response object of one request repeats.
struct ResponseMeta {
  std::string id;       // "chatcmpl-…" or "cmpl-…"
  int64_t created = 0;  // Unix seconds
  std::string model;
  bool includeUsage = false;  // streams: every chunk carries "usage" (null but the last)
};

// The message's reasoning_content is there only when the model reasoned
// (tokenizer/reasoning.h), as DeepSeek's and llama.cpp's servers send it.
nlohmann::json chatCompletionJson(const ResponseMeta& meta, std::string_view text,
                                  std::string_view reasoning, FinishReason finish,
                                  const Usage& usage);
// One chat.completion.chunk. The first of a stream carries the role
// (delta {"role":"assistant","content":""}), the next ones text, the last an
// empty delta and the finish reason.
nlohmann::json chatRoleChunkJson(const ResponseMeta& meta);
nlohmann::json chatTextChunkJson(const ResponseMeta& meta, std::string_view text);
// A delta of reasoning: {"reasoning_content": …}.
nlohmann::json chatReasoningChunkJson(const ResponseMeta& meta, std::string_view reasoning);
nlohmann::json chatFinishChunkJson(const ResponseMeta& meta, FinishReason finish);

nlohmann::json completionJson(const ResponseMeta& meta, std::string_view text, FinishReason finish,
                              const Usage& usage);
// A text_completion chunk: text, and the finish reason on the last one.
nlohmann::json completionChunkJson(const ResponseMeta& meta, std::string_view text,
                                   std::optional<FinishReason> finish);

// The chunk stream_options.include_usage adds after the last choice chunk:
// empty choices and the usage. `object` is the stream's chunk object name.
nlohmann::json usageChunkJson(const ResponseMeta& meta, std::string_view object,
                              const Usage& usage);

// GET /v1/models with the one model served.
nlohmann::json modelsJson(std::string_view modelId, int64_t created);

// Compact JSON text; invalid UTF-8 in strings becomes U+FFFD.
std::string jsonText(const nlohmann::json& value);
// One server-sent event carrying `data`, and the stream's end marker.
std::string sseEvent(const nlohmann::json& data);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace kvscope::server
