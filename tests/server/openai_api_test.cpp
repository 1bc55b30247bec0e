// Request parsing and validation, and the JSON of responses, stream chunks and
// errors, against hand-written OpenAI shapes.
#include "server/openai_api.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace kvscope::server {
namespace {

using nlohmann::json;

std::optional<ApiError> parseChat(const std::string& body) {
  ChatRequest r;
  return parseChatRequest(body, r);
}

TEST(OpenAiRequest, ParsesAFullChatRequest) {
  ChatRequest r;
  const auto error = parseChatRequest(R"({
      "model": "demo.gguf",
      "messages": [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]},
        {"role": "assistant", "content": null}
      ],
      "max_tokens": 7, "max_completion_tokens": 9, "temperature": 0, "top_p": 0.5,
      "seed": -1, "stop": ["\n\n", ""], "stream": true,
      "stream_options": {"include_usage": true}, "n": 1, "user": "ignored",
      "tools": [{"type": "function", "function": {"name": "now", "parameters": {}}}]})",
                                      r);
  ASSERT_FALSE(error) << error->message;
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[0].content, "Be brief.");
  EXPECT_EQ(r.messages[1].content, "Hi there");
  EXPECT_EQ(r.messages[2].role, "assistant");
  EXPECT_EQ(r.messages[2].content, "");
  EXPECT_EQ(nlohmann::json::parse(r.toolsJson),
            nlohmann::json::parse(
                R"([{"type": "function", "function": {"name": "now", "parameters": {}}}])"));
  const SamplingRequest& s = r.sampling;
  EXPECT_EQ(s.model, "demo.gguf");
  EXPECT_EQ(s.maxTokens, 9u);  // max_completion_tokens wins
  EXPECT_EQ(s.temperature, 0.0f);
  EXPECT_EQ(s.topP, 0.5f);
  EXPECT_EQ(s.seed, ~uint64_t{0});
  EXPECT_EQ(s.stop, std::vector<std::string>{"\n\n"});
  EXPECT_TRUE(s.stream);
  EXPECT_TRUE(s.includeUsage);
}

TEST(OpenAiRequest, LeavesUnsetFieldsUnset) {
  ChatRequest r;
  ASSERT_FALSE(parseChatRequest(R"({"messages":[{"role":"user","content":"x"}],
                                    "temperature":null,"stop":"END"})",
                                r));
  EXPECT_EQ(r.sampling.model, "");
  EXPECT_FALSE(r.sampling.maxTokens);
  EXPECT_FALSE(r.sampling.temperature);
  EXPECT_FALSE(r.sampling.topP);
  EXPECT_FALSE(r.sampling.seed);
  EXPECT_EQ(r.sampling.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(r.toolsJson, "");
  EXPECT_FALSE(r.sampling.stream);
}

TEST(OpenAiRequest, NamesTheBadField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"messages": "hi"})", "messages"},
      {R"({"messages": []})", "messages"},
      {R"({})", "messages"},
      {R"({"messages": [1]})", "messages[0]"},
      {R"({"messages": [{"role": "tool", "content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": "x"}], "temperature": "hot"})", "temperature"},
      {R"({"messages": [{"role": "user", "content": "x"}], "temperature": 3})", "temperature"},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_p": 0})", "top_p"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0})", "max_tokens"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 2.5})", "max_tokens"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": -3})", "max_tokens"},
      {R"({"messages": [{"role": "user", "content": "x"}], "seed": "7"})", "seed"},
      {R"({"messages": [{"role": "user", "content": "x"}], "stop": [1]})", "stop"},
      {R"({"messages": [{"role": "user", "content": "x"}], "stream": 1})", "stream"},
      {R"({"messages": [{"role": "user", "content": "x"}], "n": 2})", "n"},
      {R"({"messages": [{"role": "user", "content": "x"}], "model": 3})", "model"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": {"type": "function"}})",
       "tools"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": ["f"]})", "tools[0]"},
  };
  for (const auto& [body, param] : cases) {
    const auto e = parseChat(body);
    ASSERT_TRUE(e) << body;
    EXPECT_EQ(e->status, 400) << body;
    EXPECT_EQ(e->type, "invalid_request_error") << body;
    EXPECT_EQ(e->param, param) << body;
  }
}

TEST(OpenAiRequest, MalformedJsonIsABadRequestWithoutParam) {
  for (const char* body : {"{\"messages\": [", "", "[1, 2]", "null", "\"text\""}) {
    const auto e = parseChat(body);
    ASSERT_TRUE(e) << body;
    EXPECT_EQ(e->status, 400);
    EXPECT_EQ(e->param, "");
  }
}

TEST(OpenAiRequest, ParsesCompletionPrompts) {
  CompletionRequest r;
  ASSERT_FALSE(parseCompletionRequest(R"({"prompt": ["Once"], "max_tokens": 4})", r));
  EXPECT_EQ(r.prompt, "Once");
  EXPECT_EQ(r.sampling.maxTokens, 4u);
  for (const char* body : {R"({"prompt": 3})", R"({"prompt": ["a", "b"]})", R"({})"}) {
    CompletionRequest bad;
    const auto e = parseCompletionRequest(body, bad);
    ASSERT_TRUE(e) << body;
    EXPECT_EQ(e->param, "prompt") << body;
  }
}

const ResponseMeta kMeta{.id = "chatcmpl-1", .created = 1700000000, .model = "demo.gguf"};
const Usage kUsage{.promptTokens = 10, .completionTokens = 4, .cachedTokens = 6};

TEST(OpenAiResponse, ChatCompletion) {
  EXPECT_EQ(chatCompletionJson(kMeta, "Hello", "", FinishReason::kLength, kUsage), json::parse(R"({
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "demo.gguf",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"},
                 "logprobs": null, "finish_reason": "length"}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14,
              "prompt_tokens_details": {"cached_tokens": 6}}})"));
  // A model that reasoned: its reasoning beside the answer, as DeepSeek's API
  // and llama.cpp's server send it.
  EXPECT_EQ(
      chatCompletionJson(kMeta, "4.", "2 + 2.", FinishReason::kStop,
                         kUsage)["choices"][0]["message"],
      json::parse(R"({"role": "assistant", "content": "4.", "reasoning_content": "2 + 2."})"));
}

TEST(OpenAiResponse, ChatStreamChunks) {
  EXPECT_EQ(chatRoleChunkJson(kMeta), json::parse(R"({
    "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000,
    "model": "demo.gguf", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                       "logprobs": null, "finish_reason": null}]})"));
  EXPECT_EQ(chatTextChunkJson(kMeta, "lo"), json::parse(R"({
    "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000,
    "model": "demo.gguf", "choices": [{"index": 0, "delta": {"content": "lo"},
                                       "logprobs": null, "finish_reason": null}]})"));
  EXPECT_EQ(chatReasoningChunkJson(kMeta, "hm"), json::parse(R"({
    "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000,
    "model": "demo.gguf", "choices": [{"index": 0, "delta": {"reasoning_content": "hm"},
                                       "logprobs": null, "finish_reason": null}]})"));
  ResponseMeta withUsage = kMeta;
  withUsage.includeUsage = true;
  EXPECT_EQ(chatFinishChunkJson(withUsage, FinishReason::kStop), json::parse(R"({
    "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000,
    "model": "demo.gguf", "choices": [{"index": 0, "delta": {},
                                       "logprobs": null, "finish_reason": "stop"}],
    "usage": null})"));
  EXPECT_EQ(usageChunkJson(withUsage, "chat.completion.chunk", kUsage), json::parse(R"({
    "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000,
    "model": "demo.gguf", "choices": [],
    "usage": {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14,
              "prompt_tokens_details": {"cached_tokens": 6}}})"));
}

TEST(OpenAiResponse, Completions) {
  const ResponseMeta meta{.id = "cmpl-1", .created = 5, .model = "m"};
  EXPECT_EQ(completionJson(meta, "text", FinishReason::kStop, kUsage), json::parse(R"({
    "id": "cmpl-1", "object": "text_completion", "created": 5, "model": "m",
    "choices": [{"index": 0, "text": "text", "logprobs": null, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14,
              "prompt_tokens_details": {"cached_tokens": 6}}})"));
  EXPECT_EQ(completionChunkJson(meta, "te", std::nullopt), json::parse(R"({
    "id": "cmpl-1", "object": "text_completion", "created": 5, "model": "m",
    "choices": [{"index": 0, "text": "te", "logprobs": null, "finish_reason": null}]})"));
}

TEST(OpenAiResponse, ModelsErrorsAndEvents) {
  EXPECT_EQ(modelsJson("demo.gguf", 9), json::parse(R"({"object": "list", "data": [
    {"id": "demo.gguf", "object": "model", "created": 9, "owned_by": "kvscope"}]})"));
  EXPECT_EQ(
      errorJson({.status = 404, .message = "no", .param = "model", .code = "model_not_found"}),
      json::parse(R"({"error": {"message": "no", "type": "invalid_request_error",
                                      "param": "model", "code": "model_not_found"}})"));
  EXPECT_EQ(errorJson({.message = "bad"}),
            json::parse(R"({"error": {"message": "bad", "type": "invalid_request_error",
                                      "param": null, "code": null}})"));
  EXPECT_EQ(sseEvent({{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
  // Invalid UTF-8 from a model is replaced, not thrown.
  EXPECT_EQ(jsonText(json("a\xff")), "\"a\xEF\xBF\xBD\"");
}

}  // namespace
}  // namespace kvscope::server
