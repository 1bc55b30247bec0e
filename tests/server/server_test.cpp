// The HTTP server over the demo model, driven with httplib's client on a free
// loopback port: a full queue answers 429 and serving goes on, the KV prefix
// is reused across requests, a client that disconnects cancels its
// generation, and bad requests get OpenAI-style errors.
#include "server/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>

#include "kv/kv_policy.h"
#include "model/model_tokenizer.h"
#include "runtime/backend_factory.h"
#include "server/session_thread.h"
#include "support/demo_model.h"
#include "support/served_session.h"

namespace kvscope::server {
namespace {

using nlohmann::json;
constexpr auto kWait = std::chrono::seconds(60);  // a bound, never expected to pass

using test::ManualRunner;

std::unique_ptr<runtime::Session> openDemoSession(uint32_t context = 0) {
  return test::openServedDemoSession(context);
}

ServerOptions loopback() {
  ServerOptions o;
  o.port = 0;
  o.modelId = "kvscope-demo.gguf";
  o.defaults.maxTokens = 16;
  o.defaults.sampler.temperature = 0;
  return o;
}

std::string chatBody(const std::string& user, int maxTokens = 4, bool stream = false) {
  return json{{"model", "kvscope-demo.gguf"},
              {"messages", {{{"role", "user"}, {"content", user}}}},
              {"max_tokens", maxTokens},
              {"temperature", 0},
              {"stream", stream}}
      .dump();
}

httplib::Result post(int port, const std::string& path, const std::string& body,
                     const std::string& key = "") {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(kWait);
  if (!key.empty()) client.set_bearer_token_auth(key);
  return client.Post(path, body, "application/json");
}

httplib::Result get(int port, const std::string& path) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(kWait);
  return client.Get(path);
}

void expectError(const httplib::Result& r, int status, const std::string& param = "") {
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, status) << r->body;
  const json body = json::parse(r->body, nullptr, false);
  ASSERT_TRUE(body.contains("error")) << r->body;
  EXPECT_TRUE(body["error"]["message"].is_string());
  EXPECT_TRUE(body["error"]["type"].is_string());
  EXPECT_EQ(body["error"]["param"], param.empty() ? json(nullptr) : json(param));
}

TEST(Server, FullQueueAnswers429AndServingGoesOn) {
  auto session = openDemoSession();
  ASSERT_TRUE(session);
  ManualRunner runner(std::move(session));
  ServerOptions options = loopback();
  options.queueLimit = 1;  // one running + one waiting
  Server server(options, runner);
  ASSERT_TRUE(server.start().ok());
  ASSERT_TRUE(runner.waitForPosted(1));  // the first KV snapshot
  const int port = server.port();
  auto a = std::async(std::launch::async,
                      [&] { return post(port, "/v1/chat/completions", chatBody("Once")); });
  ASSERT_TRUE(runner.waitForPosted(2));
  auto b = std::async(std::launch::async,
                      [&] { return post(port, "/v1/chat/completions", chatBody("Lily")); });
  ASSERT_TRUE(runner.waitForPosted(3));
  EXPECT_EQ(server.activeRequests(), 2u);

  const auto refused = post(port, "/v1/chat/completions", chatBody("Tom"));
  expectError(refused, 429);
  ASSERT_TRUE(refused);
  EXPECT_EQ(json::parse(refused->body)["error"]["code"], "rate_limit_exceeded");
  EXPECT_EQ(refused->get_header_value("Retry-After"), "1");

  runner.runAll();
  for (auto* f : {&a, &b}) {
    const auto r = f->get();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(json::parse(r->body)["object"], "chat.completion");
  }
  EXPECT_EQ(server.activeRequests(), 0u);
  EXPECT_EQ(get(port, "/health")->status, 200);
  // The server counts a request in httplib's logger, which runs after the
  // reply went out: the client can read /metrics before the count of its own
  // request lands (seen once in ctest), so poll for it, up to 2 s.
  const std::string ok = "kvscope_requests_total{route=\"/v1/chat/completions\",status=\"200\"} 2";
  std::string metrics;
  for (int i = 0; i < 200 && metrics.find(ok) == std::string::npos; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const auto r = get(port, "/metrics");
    ASSERT_TRUE(r);
    metrics = r->body;
  }
  EXPECT_NE(metrics.find(ok), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("kvscope_requests_total{route=\"/v1/chat/completions\",status=\"429\"} 1"),
            std::string::npos)
      << metrics;
  server.stop();
}

TEST(Server, APortInUseIsAnError) {
  ManualRunner runner(nullptr);
  Server first(loopback(), runner);
  ASSERT_TRUE(first.start().ok());
  ServerOptions options = loopback();
  options.port = first.port();
  Server second(options, runner);
  const Status st = second.start();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("cannot listen"), std::string::npos);
}

TEST(Server, ReusesTheCachedPrefixAcrossRequests) {
  SessionThread engine(openDemoSession());
  Server server(loopback(), engine);
  ASSERT_TRUE(server.start().ok());
  const auto first = post(server.port(), "/v1/chat/completions", chatBody("Once upon a time", 8));
  ASSERT_TRUE(first);
  ASSERT_EQ(first->status, 200) << first->body;
  const json one = json::parse(first->body);
  EXPECT_EQ(one["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  const std::string reply = one["choices"][0]["message"]["content"];

  const json next = {{"messages",
                      {{{"role", "user"}, {"content", "Once upon a time"}},
                       {{"role", "assistant"}, {"content", reply}},
                       {{"role", "user"}, {"content", " there was"}}}},
                     {"max_tokens", 4}};
  const auto second = post(server.port(), "/v1/chat/completions", next.dump());
  ASSERT_EQ(second->status, 200) << second->body;
  const json usage = json::parse(second->body)["usage"];
  EXPECT_GE(usage["prompt_tokens_details"]["cached_tokens"].get<int>(),
            one["usage"]["prompt_tokens"].get<int>());
  EXPECT_EQ(usage["total_tokens"],
            usage["prompt_tokens"].get<int>() + usage["completion_tokens"].get<int>());

  const json kv = json::parse(get(server.port(), "/v1/kv")->body);
  EXPECT_GT(kv["rows"].get<int>(), 0);
  EXPECT_FALSE(kv["layers"].empty());
  EXPECT_EQ(kv["layers"][0]["key"]["scheme"], "f16");
}

// /v1/kv says which KV heads read every row under the indexer, and for
// indexer_dense_heads=auto what the session says: on the demo model (512
// tokens of context, less than auto measures at) every layer keeps reading
// every row, and the note says so.
TEST(Server, KvSnapshotNamesTheIndexersDenseHeads) {
  auto session = openDemoSession();
  ASSERT_TRUE(session);
  auto policy = kv::KvPolicy::parse("indexer=64,indexer_dense_heads=auto");
  ASSERT_TRUE(policy.ok()) << policy.error().message;
  ASSERT_TRUE(session->setKvPolicy(*policy).ok());
  SessionThread engine(std::move(session));
  Server server(loopback(), engine);
  ASSERT_TRUE(server.start().ok());
  const auto reply = post(server.port(), "/v1/chat/completions", chatBody("Once upon a time", 4));
  ASSERT_TRUE(reply);
  ASSERT_EQ(reply->status, 200) << reply->body;
  const json indexer = json::parse(get(server.port(), "/v1/kv")->body)["indexer"];
  ASSERT_TRUE(indexer.is_object()) << indexer.dump();
  EXPECT_EQ(indexer["selection"], "64:64:4");
  EXPECT_EQ(indexer["dense_heads"], "none");
  EXPECT_TRUE(indexer["dense_heads_measuring"].get<bool>());
  EXPECT_NE(indexer["dense_heads_note"].get<std::string>().find("more than this context holds"),
            std::string::npos)
      << indexer["dense_heads_note"];
}

// A request's tools reach the chat template: with a template that lists tool
// names before the messages, a request with the tool get_weather and the text
// "Hello" gets the same prompt, so the same greedy reply, as one without tools
// whose text is what the template should have rendered.
TEST(Server, ToolsReachTheChatTemplate) {
  auto session = openDemoSession();
  ASSERT_TRUE(session);
  session->setChatTemplateSource(
      "{% for t in tools or [] %}[tool {{ t.function.name }}]{% endfor %}"
      "{% for m in messages %}{{ m.content }}{% endfor %}");
  SessionThread engine(std::move(session));
  Server server(loopback(), engine);
  ASSERT_TRUE(server.start().ok());
  const json tools =
      json::array({{{"type", "function"},
                    {"function", {{"name", "get_weather"}, {"parameters", json::object()}}}}});
  json withTools = json::parse(chatBody("Hello", 6));
  withTools["tools"] = tools;
  const auto a = post(server.port(), "/v1/chat/completions", withTools.dump());
  const auto b =
      post(server.port(), "/v1/chat/completions", chatBody("[tool get_weather]Hello", 6));
  const auto c = post(server.port(), "/v1/chat/completions", chatBody("Hello", 6));
  ASSERT_TRUE(a && b && c);
  ASSERT_EQ(a->status, 200) << a->body;
  const json ja = json::parse(a->body), jb = json::parse(b->body), jc = json::parse(c->body);
  EXPECT_EQ(ja["usage"]["prompt_tokens"], jb["usage"]["prompt_tokens"]);
  EXPECT_EQ(ja["choices"][0]["message"]["content"], jb["choices"][0]["message"]["content"]);
  EXPECT_LT(jc["usage"]["prompt_tokens"].get<int>(), ja["usage"]["prompt_tokens"].get<int>());
}

// Under --context-overflow rolling a conversation longer than the context is
// answered from its newest turns; under stop (the default) it is a 400.
TEST(Server, ContextOverflowAnswersALongChatFromItsNewestTurns) {
  json messages = json::array();
  for (int i = 0; i < 12; ++i) {
    messages.push_back({{"role", "user"}, {"content", "Once upon a time there was a dog."}});
    messages.push_back({{"role", "assistant"}, {"content", "The dog ran to the park and played."}});
  }
  messages.push_back({{"role", "user"}, {"content", "What happened next?"}});
  const std::string body = json{{"messages", messages}, {"max_tokens", 4}}.dump();
  {
    SessionThread engine(openDemoSession(128));
    Server server(loopback(), engine);
    ASSERT_TRUE(server.start().ok());
    const auto refused = post(server.port(), "/v1/chat/completions", body);
    expectError(refused, 400, "messages");
    EXPECT_EQ(json::parse(refused->body)["error"]["code"], "context_length_exceeded");
  }
  SessionThread engine(openDemoSession(128));
  ServerOptions options = loopback();
  options.contextOverflow = runtime::ContextOverflow::kRolling;
  Server server(options, engine);
  ASSERT_TRUE(server.start().ok());
  const auto answered = post(server.port(), "/v1/chat/completions", body);
  ASSERT_TRUE(answered);
  ASSERT_EQ(answered->status, 200) << answered->body;
  const json usage = json::parse(answered->body)["usage"];
  // The prompt kept room for the reply: 4 tokens (the request's max_tokens).
  EXPECT_LE(usage["prompt_tokens"].get<int>() + 4, 128);
}

// Reports each served request to the test.
struct ServedLog {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<ServedRequest> served;
  ServerHooks hooks() {
    ServerHooks h;
    h.onServed = [this](const ServedRequest& s) {
      {
        std::lock_guard lock(mutex);
        served.push_back(s);
      }
      changed.notify_all();
    };
    return h;
  }
  bool waitFor(size_t n) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, kWait, [&] { return served.size() >= n; });
  }
};

TEST(Server, ClientThatDisconnectsCancelsItsGeneration) {
  ServedLog log;
  SessionThread engine(openDemoSession());
  ServerOptions options = loopback();
  options.defaults.maxTokens = 100000;  // until the context is full, unless cancelled
  Server server(options, engine, log.hooks());
  ASSERT_TRUE(server.start().ok());

  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server.port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string body = json{{"prompt", "Once upon a time"}, {"temperature", 0}}.dump();
  const std::string request =
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
      "application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  // Not streamed, so nothing is written until the end: only the server's
  // check of the connection can notice that the client left.
  char buffer[256];
  ASSERT_GT(recv(fd, buffer, sizeof buffer, 0), 0);  // the status line and headers
  close(fd);

  ASSERT_TRUE(log.waitFor(1));
  EXPECT_TRUE(log.served[0].cancelled);
  EXPECT_LT(log.served[0].stats.cachedTokens + 1, log.served[0].stats.contextLimit)
      << "the generation ran until the context was full";
  EXPECT_NE(get(server.port(), "/metrics")->body.find("kvscope_requests_cancelled_total 1"),
            std::string::npos);
}

TEST(Server, BadRequestsGetOpenAiErrorsAndServingGoesOn) {
  SessionThread engine(openDemoSession(32));
  ServerOptions options = loopback();
  options.maxBodyBytes = 4096;
  options.apiKey = "secret";
  Server server(options, engine);
  ASSERT_TRUE(server.start().ok());
  const int port = server.port();
  const std::string key = "secret";
  expectError(post(port, "/v1/chat/completions", chatBody("hi")), 401);
  expectError(post(port, "/v1/chat/completions", chatBody("hi"), "wrong"), 401);
  expectError(post(port, "/v1/chat/completions", "{\"messages\": [", key), 400);
  expectError(post(port, "/v1/chat/completions", R"({"messages": {}})", key), 400, "messages");
  expectError(post(port, "/v1/chat/completions",
                   R"({"messages": [{"role":"user","content":"x"}], "temperature": "0"})", key),
              400, "temperature");
  expectError(post(port, "/v1/completions", R"({"prompt": "x", "model": "gpt-4o"})", key), 404,
              "model");
  std::string longPrompt;
  for (int i = 0; i < 200; ++i) longPrompt += "Once upon a time ";
  const auto tooLong = post(port, "/v1/completions", json{{"prompt", longPrompt}}.dump(), key);
  expectError(tooLong, 400, "prompt");
  EXPECT_EQ(json::parse(tooLong->body)["error"]["code"], "context_length_exceeded");
  expectError(post(port, "/v1/completions", std::string(8192, ' '), key), 413);
  httplib::Client client("127.0.0.1", port);
  client.set_bearer_token_auth(key);
  expectError(client.Get("/v1/nothing"), 404);
  EXPECT_EQ(get(port, "/health")->status, 200);  // open without the key
  const auto ok =
      post(port, "/v1/completions", json{{"prompt", "Once"}, {"max_tokens", 2}}.dump(), key);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
}

}  // namespace
}  // namespace kvscope::server
