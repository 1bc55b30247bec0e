#include "server/server.h"

#include <condition_variable>
#include <ctime>
#include <mutex>
#include <random>
#include <set>

#include <sys/socket.h>

#include <fmt/format.h>
#include <httplib.h>

#include "server/client_probe.h"
#include "server/host_check.h"
#include "server/kv_json.h"
#include "server/metrics.h"

namespace kvscope::server {
namespace {

using nlohmann::json;
using Kind = GenerationJob::Kind;

// How often a waiting response checks that its client is still there.
constexpr std::chrono::milliseconds kPollInterval{100};
// HTTP threads beyond one per admitted generation, so /health, /metrics and
// 429 answers never queue behind streams.
constexpr size_t kSpareHttpThreads = 4;

void reply(httplib::Response& res, const ApiError& error) {
  res.status = error.status;
  res.set_content(jsonText(errorJson(error)), "application/json");
}

void replyJson(httplib::Response& res, const json& body) {
  res.status = 200;
  res.set_content(jsonText(body), "application/json");
}

// The route a request counts under in /metrics: known paths, else "other",
// so a scan of random paths cannot grow the label set.
std::string routeLabel(const std::string& path) {
  for (const char* known :
       {"/v1/chat/completions", "/v1/completions", "/v1/models", "/v1/kv", "/metrics", "/health"}) {
    if (path == known) return known;
  }
  return "other";
}

bool authorized(const httplib::Request& req, const std::string& key) {
  const std::string header = req.get_header_value("Authorization");
  const std::string expected = "Bearer " + key;
  // Compares every byte whatever the first difference, so response time does
  // not tell how much of a guessed key was right.
  unsigned diff = header.size() == expected.size() ? 0u : 1u;
  for (size_t i = 0; i < header.size() && i < expected.size(); ++i)
    diff |= static_cast<unsigned char>(header[i] ^ expected[i]);
  return diff == 0;
}

std::string requestId(Kind kind) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}-{:016x}", kind == Kind::kChat ? "chatcmpl" : "cmpl", rng());
}

}  // namespace

// Shared by the server, its HTTP handlers and the jobs on the session's
// thread (a job can outlive the Server object until it has run).
struct Server::State {
  // Updates the server's KV telemetry and passes every report on.
  class Relay : public runtime::Observer {
   public:
    explicit Relay(State& state) : m_state(state) {}
    void onToken(std::string_view text, int32_t token) override {
      if (auto* o = m_state.hooks.observer) o->onToken(text, token);
    }
    void onProgress(uint32_t done, uint32_t total) override {
      if (auto* o = m_state.hooks.observer) o->onProgress(done, total);
    }
    void onStep(const runtime::StepStats& stats) override {
      if (auto* o = m_state.hooks.observer) o->onStep(stats);
    }
    void onKv(const runtime::KvSnapshot& snapshot) override {
      {
        std::lock_guard lock(m_state.mutex);
        m_state.metrics.kv = snapshot;
      }
      if (auto* o = m_state.hooks.observer) o->onKv(snapshot);
    }
    void onIndexer(const runtime::IndexerSnapshot& snapshot) override {
      {
        std::lock_guard lock(m_state.mutex);
        m_state.metrics.indexer = snapshot;
      }
      if (auto* o = m_state.hooks.observer) o->onIndexer(snapshot);
    }

   private:
    State& m_state;
  };

  State(ServerOptions o, ServerHooks h, SessionRunner& runner)
      : options(std::move(o)),
        hooks(std::move(h)),
        relay(*this),
        slots(options.slotCount, [&runner] { return runner.makeSession(); }) {}

  const ServerOptions options;
  const ServerHooks hooks;
  Relay relay;
  SessionSlots slots;  // the session's thread only

  mutable std::mutex mutex;  // guards everything below
  std::condition_variable idle;
  bool stopped = false;
  bool running = false;                           // a job is on the session's thread
  std::set<std::shared_ptr<GenerationJob>> jobs;  // admitted, not yet run to the end
  ServerMetrics metrics;
  bool warned = false;  // the chat template warning was logged

  // Takes `job` into the queue, or says why not (429, 503).
  std::optional<ApiError> admit(const std::shared_ptr<GenerationJob>& job) {
    size_t active = 0;
    {
      std::lock_guard lock(mutex);
      if (stopped)
        return ApiError{
            .status = 503, .message = "the server is shutting down", .type = "server_error"};
      if (jobs.size() > options.queueLimit) {
        return ApiError{
            .status = 429,
            .message = fmt::format("the server is busy: {} requests are waiting for the model; "
                                   "retry later",
                                   options.queueLimit),
            .type = "rate_limit_exceeded",
            .code = "rate_limit_exceeded"};
      }
      jobs.insert(job);
      active = jobs.size();
    }
    if (hooks.onActiveChanged) hooks.onActiveChanged(active);
    return std::nullopt;
  }

  // The session's thread enters to run a job, unless the server has stopped
  // (then no hook may be called any more), and leaves when done.
  bool enter() {
    std::lock_guard lock(mutex);
    if (stopped) return false;
    running = true;
    return true;
  }
  void leave() {
    {
      std::lock_guard lock(mutex);
      running = false;
    }
    idle.notify_all();
  }

  // The session's thread: runs one job and does its bookkeeping.
  void run(const std::shared_ptr<GenerationJob>& job) {
    if (!enter()) {
      job->cancel();  // its HTTP thread is already gone or leaving
      std::lock_guard lock(mutex);
      jobs.erase(job);
      return;
    }
    std::optional<JobOutcome> outcome;
    std::string warning;
    try {
      outcome = runJob(slots, *job, options.defaults, options.contextOverflow, &relay, warning);
    } catch (const std::exception& e) {
      job->fail({.status = 500, .message = e.what(), .type = "server_error"});
    }
    logWarningOnce(warning);
    size_t active = 0;
    {
      std::lock_guard lock(mutex);
      if (outcome) {
        metrics.addGeneration(outcome->stats, outcome->usage.completionTokens);
        if (outcome->cancelled) ++metrics.cancelled;
      }
      jobs.erase(job);
      active = jobs.size();
    }
    if (outcome && hooks.onServed) hooks.onServed(served(*job, *outcome));
    if (hooks.onActiveChanged) hooks.onActiveChanged(active);
    leave();
  }

  void logWarningOnce(const std::string& warning) {
    if (warning.empty() || !hooks.log) return;
    {
      std::lock_guard lock(mutex);
      if (std::exchange(warned, true)) return;
    }
    hooks.log(warning);
  }

  static ServedRequest served(const GenerationJob& job, const JobOutcome& outcome) {
    ServedRequest s;
    s.kind = job.kind();
    if (job.kind() == Kind::kChat)
      s.messages = job.chat().messages;
    else
      s.prompt = job.completion().prompt;
    s.reply = outcome.text;
    s.finish = outcome.finish;
    s.usage = outcome.usage;
    s.stats = outcome.stats;
    s.cancelled = outcome.cancelled;
    return s;
  }
};

namespace {

// Writes one generation's response as its job releases text: server-sent
// events for a stream, one JSON object at the end otherwise. Called by
// httplib until it calls sink.done() or returns false (client gone).
class ResponseWriter {
 public:
  ResponseWriter(std::shared_ptr<GenerationJob> job, ResponseMeta meta)
      : m_job(std::move(job)), m_meta(std::move(meta)) {}

  bool operator()(size_t, httplib::DataSink& sink) {
    const GenerationJob::Update u = m_job->take(kPollInterval);
    if (!sink.is_writable()) {
      m_job->cancel();
      return false;
    }
    const bool ended =
        u.phase == GenerationJob::Phase::kFinished || u.phase == GenerationJob::Phase::kFailed;
    const std::string out = m_job->sampling().stream ? streamText(u) : bodyText(u);
    if (!out.empty() && !sink.write(out.data(), out.size())) {
      m_job->cancel();
      return false;
    }
    if (ended) sink.done();
    return true;
  }

 private:
  std::string streamText(const GenerationJob::Update& u) {
    const bool chat = m_job->kind() == Kind::kChat;
    std::string out;
    if (chat && !m_roleSent) {
      out += sseEvent(chatRoleChunkJson(m_meta));
      m_roleSent = true;
    }
    if (chat && !u.reasoning.empty()) out += sseEvent(chatReasoningChunkJson(m_meta, u.reasoning));
    if (!u.text.empty()) {
      out += sseEvent(chat ? chatTextChunkJson(m_meta, u.text)
                           : completionChunkJson(m_meta, u.text, std::nullopt));
    }
    if (u.phase == GenerationJob::Phase::kFailed) {
      out += sseEvent(errorJson(*u.error));
      out += kSseDone;
    } else if (u.phase == GenerationJob::Phase::kFinished) {
      out += sseEvent(chat ? chatFinishChunkJson(m_meta, u.finish)
                           : completionChunkJson(m_meta, "", u.finish));
      if (m_meta.includeUsage)
        out += sseEvent(
            usageChunkJson(m_meta, chat ? "chat.completion.chunk" : "text_completion", u.usage));
      out += kSseDone;
    }
    return out;
  }

  std::string bodyText(const GenerationJob::Update& u) {
    m_text += u.text;
    m_reasoning += u.reasoning;
    if (u.phase == GenerationJob::Phase::kFailed) return jsonText(errorJson(*u.error));
    if (u.phase != GenerationJob::Phase::kFinished) return {};
    return jsonText(m_job->kind() == Kind::kChat
                        ? chatCompletionJson(m_meta, m_text, m_reasoning, u.finish, u.usage)
                        : completionJson(m_meta, m_text, u.finish, u.usage));
  }

  std::shared_ptr<GenerationJob> m_job;
  ResponseMeta m_meta;
  bool m_roleSent = false;
  std::string m_text;       // a non-streaming reply so far
  std::string m_reasoning;  // and its reasoning
};

// Parses the body of a generation request into a job, or the error.
std::shared_ptr<GenerationJob> parseJob(Kind kind, const std::string& body, ApiError& error) {
  if (kind == Kind::kChat) {
    ChatRequest r;
    if (auto e = parseChatRequest(body, r)) {
      error = *e;
      return nullptr;
    }
    return std::make_shared<GenerationJob>(std::move(r));
  }
  CompletionRequest r;
  if (auto e = parseCompletionRequest(body, r)) {
    error = *e;
    return nullptr;
  }
  return std::make_shared<GenerationJob>(std::move(r));
}

void serveGeneration(const std::shared_ptr<Server::State>& state, SessionRunner& runner, Kind kind,
                     const httplib::Request& req, httplib::Response& res) {
  ApiError error;
  std::shared_ptr<GenerationJob> job = parseJob(kind, req.body, error);
  if (!job) return reply(res, error);
  const SamplingRequest& sampling = job->sampling();
  const std::string& modelId = state->options.modelId;
  if (!sampling.model.empty() && sampling.model != modelId) {
    return reply(res, {.status = 404,
                       .message = fmt::format("the model '{}' does not exist; this server "
                                              "serves '{}'",
                                              sampling.model, modelId),
                       .param = "model",
                       .code = "model_not_found"});
  }
  if (auto refused = state->admit(job)) {
    if (refused->status == 429) res.set_header("Retry-After", "1");
    return reply(res, *refused);
  }
  runner.post([state, job] { state->run(job); });
  // While it waits, a client that leaves cancels it, so it is dropped before
  // its prompt is read.
  // The probe looks for the socket only once the request really waits.
  std::optional<ClientProbe> client;
  bool left = false;
  GenerationJob::Phase phase = GenerationJob::Phase::kQueued;
  while ((phase = job->waitStarted(error, kPollInterval)) == GenerationJob::Phase::kQueued) {
    if (!client) client.emplace(req);
    if (!left && client->gone()) {
      left = true;
      job->cancel();
    }
  }
  if (left) {
    // Nobody reads it; the request counters show why the request ended.
    error = {.status = 499, .message = "the client closed the connection", .type = "server_error"};
  }
  if (phase == GenerationJob::Phase::kFailed) return reply(res, error);

  ResponseMeta meta{.id = requestId(kind),
                    .created = static_cast<int64_t>(std::time(nullptr)),
                    .model = modelId,
                    .includeUsage = sampling.stream && sampling.includeUsage};
  if (sampling.stream) res.set_header("Cache-Control", "no-cache");
  res.status = 200;
  res.set_chunked_content_provider(sampling.stream ? "text/event-stream" : "application/json",
                                   ResponseWriter(job, std::move(meta)), [job](bool success) {
                                     if (!success) job->cancel();
                                   });
}

}  // namespace

Server::Server(ServerOptions options, SessionRunner& runner, ServerHooks hooks)
    : m_state(std::make_shared<State>(std::move(options), std::move(hooks), runner)),
      m_runner(runner),
      m_http(std::make_unique<httplib::Server>()) {
  routes();
}

Server::~Server() {
  stop();
}

void Server::routes() {
  httplib::Server& http = *m_http;
  const std::shared_ptr<State> state = m_state;
  SessionRunner& runner = m_runner;
  const size_t threads = state->options.queueLimit + 1 + kSpareHttpThreads;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_payload_max_length(state->options.maxBodyBytes);
  // httplib's default also sets SO_REUSEPORT, which lets a second server bind
  // the same port and take half the requests; SO_REUSEADDR alone still allows
  // a restart while old connections linger in TIME_WAIT.
  http.set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  // An idle keep-alive connection holds an HTTP thread, and stop() waits for
  // it up to this long.
  http.set_keep_alive_timeout(1);

  http.set_pre_routing_handler([state](const httplib::Request& req, httplib::Response& res) {
    const ServerOptions& o = state->options;
    const std::string host = req.get_header_value("Host");
    if (!hostAllowed(host, o.allowedHosts)) {
      reply(res, {.status = 403,
                  .message = fmt::format("requests for host '{}' are not answered: use an IP "
                                         "address or localhost, or allow the name (--allow-host)",
                                         host),
                  .code = "host_not_allowed"});
      return httplib::Server::HandlerResponse::Handled;
    }
    const std::string origin = req.get_header_value("Origin");
    if (!originAllowed(origin, o.host, o.allowedHosts)) {
      reply(res, {.status = 403,
                  .message = fmt::format("requests from web pages at '{}' are not answered: only "
                                         "pages on this machine may call this server, or hosts "
                                         "allowed with --allow-host",
                                         origin),
                  .code = "origin_not_allowed"});
      return httplib::Server::HandlerResponse::Handled;
    }
    const std::string& key = o.apiKey;
    if (key.empty() || req.path == "/health" || authorized(req, key))
      return httplib::Server::HandlerResponse::Unhandled;
    reply(res, {.status = 401,
                .message = "missing or wrong API key: send the header 'Authorization: Bearer KEY'",
                .code = "invalid_api_key"});
    return httplib::Server::HandlerResponse::Handled;
  });

  http.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    replyJson(res, {{"status", "ok"}});
  });
  http.Get("/v1/models", [state](const httplib::Request&, httplib::Response& res) {
    replyJson(res, modelsJson(state->options.modelId, static_cast<int64_t>(std::time(nullptr))));
  });
  http.Get("/v1/kv", [state](const httplib::Request&, httplib::Response& res) {
    std::lock_guard lock(state->mutex);
    if (!state->metrics.kv)
      return reply(res, {.status = 503, .message = "no KV snapshot yet", .type = "server_error"});
    const auto& indexer = state->metrics.indexer;
    replyJson(res, kvJson(*state->metrics.kv, indexer ? &*indexer : nullptr));
  });
  http.Get("/metrics", [state](const httplib::Request&, httplib::Response& res) {
    std::lock_guard lock(state->mutex);
    res.set_content(prometheusText(state->metrics, state->options.modelId, state->jobs.size()),
                    "text/plain; version=0.0.4; charset=utf-8");
  });
  http.Post("/v1/chat/completions",
            [state, &runner](const httplib::Request& req, httplib::Response& res) {
              serveGeneration(state, runner, Kind::kChat, req, res);
            });
  http.Post("/v1/completions",
            [state, &runner](const httplib::Request& req, httplib::Response& res) {
              serveGeneration(state, runner, Kind::kCompletion, req, res);
            });

  // httplib's own refusals (no route, body too large, bad request line) as
  // OpenAI errors; the handlers' errors already have their body.
  http.set_error_handler(httplib::Server::HandlerWithResponse(
      [state](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        std::string message = fmt::format("the request was refused (HTTP {})", res.status);
        if (res.status == 404) message = fmt::format("no route {} {}", req.method, req.path);
        if (res.status == 413)
          message =
              fmt::format("the request body is larger than {} bytes", state->options.maxBodyBytes);
        if (res.status == 400) message = "malformed HTTP request";
        reply(res, {.status = res.status, .message = message});
        return httplib::Server::HandlerResponse::Handled;
      }));
  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
        std::string message = "internal error";
        try {
          if (error) std::rethrow_exception(error);
        } catch (const std::exception& e) {
          message = e.what();
        } catch (...) {
        }
        reply(res, {.status = 500, .message = message, .type = "server_error"});
      });
  http.set_logger([state](const httplib::Request& req, const httplib::Response& res) {
    std::lock_guard lock(state->mutex);
    ++state->metrics.requests[{routeLabel(req.path), res.status}];
  });
}

Status Server::start() {
  const ServerOptions& o = m_state->options;
  if (o.port == 0) {
    m_port = m_http->bind_to_any_port(o.host);
  } else if (m_http->bind_to_port(o.host, o.port)) {
    m_port = o.port;
  } else {
    m_port = -1;
  }
  if (m_port <= 0) {
    return makeError(ErrorCode::kIo,
                     "cannot listen on {}:{} (address in use, or not an "
                     "address of this machine)",
                     o.host, o.port);
  }
  // The first snapshot, so /v1/kv and /metrics show the cache before any request.
  const std::shared_ptr<State> state = m_state;
  m_runner.post([state] {
    if (!state->enter()) return;
    auto session = state->slots.any();
    if (session.ok()) {
      state->relay.onKv(runtime::snapshotKv((*session)->backend()));
    } else if (state->hooks.log) {
      state->hooks.log(session.error().message);
    }
    state->leave();
  });
  auto ended = std::make_shared<std::atomic<bool>>(false);
  m_listener = std::thread([this, ended] {
    m_http->listen_after_bind();
    ended->store(true);
  });
  // httplib's stop() only takes effect once the listener runs.
  while (!m_http->is_running() && !ended->load()) std::this_thread::yield();
  return okStatus();
}

void Server::stop() {
  std::vector<std::shared_ptr<GenerationJob>> jobs;
  {
    std::lock_guard lock(m_state->mutex);
    m_state->stopped = true;
    jobs.assign(m_state->jobs.begin(), m_state->jobs.end());
  }
  for (const auto& job : jobs) job->cancel();
  m_http->stop();
  if (m_listener.joinable()) m_listener.join();
  std::unique_lock lock(m_state->mutex);
  m_state->idle.wait(lock, [&] { return !m_state->running; });
  // No job touches the slots any more (stopped): their backends go now, not
  // when the last queued job is dropped, so a model loaded next never shares
  // the device with them.
  m_state->slots.clear();
}

std::string Server::baseUrl() const {
  const std::string& host = m_state->options.host;
  // An IPv6 literal needs brackets in a URL.
  const bool v6 = host.find(':') != std::string::npos;
  return fmt::format("http://{}{}{}:{}/v1", v6 ? "[" : "", host, v6 ? "]" : "", m_port);
}

size_t Server::activeRequests() const {
  std::lock_guard lock(m_state->mutex);
  return m_state->jobs.size();
}

}  // namespace kvscope::server
