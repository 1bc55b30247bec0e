// What the server refuses before any engine work: Host and Origin headers
// that do not name this machine (DNS rebinding, cross-site pages), request
// bodies nested past kMaxJsonDepth; and a request whose client left while it
// waited is dropped before its prompt is read. Each against a running server
// on a free loopback port, driven by raw sockets where a client library would
// add or fix the headers.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>

#include "server/host_check.h"
#include "server/server.h"
#include "server/session_thread.h"
#include "support/served_session.h"

namespace kvscope::server {
namespace {

using nlohmann::json;

std::unique_ptr<runtime::Session> demoSession() {
  return test::openServedDemoSession();
}

ServerOptions loopback() {
  ServerOptions o;
  o.port = 0;
  o.modelId = "kvscope-demo.gguf";
  o.defaults.maxTokens = 4;
  o.defaults.sampler.temperature = 0;
  return o;
}

int connectTo(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

std::string request(const std::string& method, const std::string& path, const std::string& headers,
                    const std::string& body = "") {
  return method + " " + path + " HTTP/1.1\r\n" + headers +
         "Connection: close\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Sends a raw request and returns the status code of the answer (0: none).
int statusOf(int port, const std::string& raw, std::string* body = nullptr) {
  const int fd = connectTo(port);
  if (fd < 0) return 0;
  size_t sent = 0;
  while (sent < raw.size()) {
    const ssize_t n = send(fd, raw.data() + sent, raw.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  std::string answer;
  char buf[4096];
  ssize_t n = 0;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) answer.append(buf, static_cast<size_t>(n));
  close(fd);
  if (answer.size() < 12) return 0;
  if (body) *body = answer.substr(answer.find("\r\n\r\n") + 4);
  return std::stoi(answer.substr(9, 3));
}

TEST(HostCheck, NamesOnlyThisMachineControls) {
  const std::vector<std::string> none;
  for (const char* ok :
       {"127.0.0.1:8080", "127.0.0.1", "localhost:8080", "LOCALHOST", "app.localhost:1",
        "[::1]:8080", "::1", "192.168.1.20:8080", "[fe80::1]", ""})
    EXPECT_TRUE(hostAllowed(ok, none)) << ok;
  for (const char* bad : {"evil.example.com", "evil.example.com:8080", "localhost.evil.com",
                          "127.0.0.1.nip.io", "[::1", "[::1]x"})
    EXPECT_FALSE(hostAllowed(bad, none)) << bad;
  EXPECT_TRUE(hostAllowed("MyBox.lan:8080", {"mybox.lan"}));
  EXPECT_TRUE(hostAllowed("anything.example", {"*"}));

  for (const char* ok : {"", "http://localhost:3000", "https://127.0.0.1", "http://[::1]:5173"})
    EXPECT_TRUE(originAllowed(ok, "127.0.0.1", none)) << ok;
  for (const char* bad : {"null", "http://evil.example.com", "http://192.168.1.20:3000", "file://",
                          "chrome-extension://abc", "http://localhost/path"})
    EXPECT_FALSE(originAllowed(bad, "127.0.0.1", none)) << bad;
  EXPECT_TRUE(originAllowed("http://192.168.1.20:3000", "192.168.1.20", none));
  EXPECT_TRUE(originAllowed("https://ui.example", "127.0.0.1", {"ui.example"}));
}

TEST(RequestGuard, ForeignHostOrOriginGets403) {
  SessionThread engine(demoSession());
  ServerOptions options = loopback();
  options.allowedHosts = {"kvscope.test"};
  Server server(options, engine);
  ASSERT_TRUE(server.start().ok());
  const int port = server.port();
  std::string body;
  EXPECT_EQ(statusOf(port, request("GET", "/v1/models", "Host: evil.example.com\r\n"), &body), 403);
  EXPECT_EQ(json::parse(body)["error"]["code"], "host_not_allowed");
  EXPECT_EQ(statusOf(port, request("GET", "/health", "Host: evil.example.com:8080\r\n")), 403);
  EXPECT_EQ(statusOf(port,
                     request("GET", "/v1/models",
                             "Host: 127.0.0.1\r\nOrigin: http://evil.example.com\r\n"),
                     &body),
            403);
  EXPECT_EQ(json::parse(body)["error"]["code"], "origin_not_allowed");
  // This machine's names and pages, and the allowed name, are answered.
  EXPECT_EQ(statusOf(port, request("GET", "/v1/models", "Host: localhost\r\n")), 200);
  EXPECT_EQ(statusOf(port, request("GET", "/v1/models",
                                   "Host: 127.0.0.1\r\nOrigin: http://localhost:5173\r\n")),
            200);
  EXPECT_EQ(statusOf(port, request("GET", "/v1/models", "Host: kvscope.test:1234\r\n")), 200);
}

TEST(RequestGuard, DeeplyNestedJsonGets400AndServingGoesOn) {
  SessionThread engine(demoSession());
  Server server(loopback(), engine);
  ASSERT_TRUE(server.start().ok());
  const int port = server.port();
  // The issue's request: tools[0].function.parameters nested 100,000 levels (200 KB).
  const size_t n = 100000;
  const std::string deep =
      R"({"model":"x","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function",)"
      R"("function":{"name":"f","parameters":)" +
      std::string(n, '[') + std::string(n, ']') + "}}]}";
  std::string body;
  const std::string headers = "Host: 127.0.0.1\r\n";
  ASSERT_EQ(statusOf(port, request("POST", "/v1/chat/completions", headers, deep), &body), 400);
  EXPECT_NE(json::parse(body)["error"]["message"].get<std::string>().find("64 levels"),
            std::string::npos)
      << body;
  // Nesting inside strings does not count; 64 levels are accepted.
  std::string at64 = R"({"prompt":"[[[[[[{{{{","max_tokens":1,"x":)";
  at64 += std::string(63, '[') + std::string(63, ']') + "}";
  EXPECT_EQ(statusOf(port, request("POST", "/v1/completions", headers, at64)), 200);
  std::string at65 = R"({"prompt":"x","x":)" + std::string(64, '[') + std::string(64, ']') + "}";
  EXPECT_EQ(statusOf(port, request("POST", "/v1/completions", headers, at65)), 400);
  EXPECT_EQ(statusOf(port, request("POST", "/v1/chat/completions", headers, deep)), 400);
  EXPECT_EQ(statusOf(port, request("GET", "/health", headers)), 200);
}

template <typename F>
bool eventually(F condition) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < end) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

TEST(RequestGuard, ClientThatLeavesWhileQueuedIsDroppedBeforeItsPrefill) {
  test::ManualRunner runner(demoSession());
  std::atomic<int> progress{0};
  struct Counter : runtime::Observer {
    std::atomic<int>& n;
    explicit Counter(std::atomic<int>& c) : n(c) {}
    void onProgress(uint32_t, uint32_t) override { ++n; }
  } counter(progress);
  std::atomic<int> served{0};
  ServerHooks hooks;
  hooks.observer = &counter;
  hooks.onServed = [&](const ServedRequest&) { ++served; };
  Server server(loopback(), runner, hooks);
  ASSERT_TRUE(server.start().ok());
  ASSERT_TRUE(runner.waitForPosted(1));  // the first KV snapshot
  runner.runAll();

  const int fd = connectTo(server.port());
  ASSERT_GE(fd, 0);
  const std::string raw = request("POST", "/v1/completions", "Host: 127.0.0.1\r\n",
                                  json{{"prompt", "Once upon a time"}}.dump());
  ASSERT_EQ(send(fd, raw.data(), raw.size(), MSG_NOSIGNAL), static_cast<ssize_t>(raw.size()));
  ASSERT_TRUE(runner.waitForPosted(1));  // queued, not run
  close(fd);
  // The waiting handler notices within its poll and gives the request up.
  std::string metrics;
  ASSERT_TRUE(eventually([&] {
    statusOf(server.port(), request("GET", "/metrics", "Host: 127.0.0.1\r\n"), &metrics);
    return metrics.find("status=\"499\"} 1") != std::string::npos;
  })) << metrics;
  runner.runAll();
  EXPECT_EQ(progress.load(), 0) << "the dropped request was prefilled";
  EXPECT_EQ(served.load(), 0);
  EXPECT_EQ(server.activeRequests(), 0u);
}

}  // namespace
}  // namespace kvscope::server
