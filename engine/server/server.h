#pragma once
// Server: an OpenAI-compatible HTTP server over one Session.
//
//   POST /v1/chat/completions   chat, rendered with the model's template
//   POST /v1/completions        plain prompt completion
//   GET  /v1/models             the one model served
//   GET  /v1/kv                 the latest KV snapshot as JSON (kv_json.h)
//   GET  /metrics               Prometheus text (metrics.h)
//   GET  /health                {"status":"ok"}; never needs the API key
//
// Every request must name the server by an IP address, localhost or a name
// the operator allowed (Host), and a browser's request must come from a page
// on this machine (Origin): anything else is 403, against DNS rebinding and
// cross-site requests (server/host_check.h). Request bodies nest at most
// kMaxJsonDepth levels (400 beyond).
//
// Threads: HTTP requests are parsed and answered on the server's own
// threads; every call into the engine runs as a job posted to the
// SessionRunner, which runs jobs one at a time, in the order posted, on the
// engine's thread. So the sessions stay single-threaded and requests are
// served in arrival order. Requests run in the server's own session slots
// (server/session_slots.h), never in a conversation the app holds; a slot's
// KV cache persists between requests, and a request whose prompt shares a
// prefix with a slot's cache reuses it (usage.prompt_tokens_details.
// cached_tokens). At most `queueLimit` requests wait behind the one running;
// more are refused with 429. A client that disconnects cancels its
// generation within about 100 ms plus one engine step; one that leaves while
// its request waits is dropped before its prompt is read.
//
// Errors are OpenAI-style JSON ({"error":{message,type,param,code}}); a
// request never takes the server down. A generation that fails after its
// response has started ends a stream with an error event, or answers a
// non-streaming request 200 with the error object (the status was sent).

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/error.h"
#include "runtime/observer.h"
#include "runtime/session.h"
#include "server/generation_job.h"
#include "server/openai_api.h"
#include "server/session_slots.h"

namespace httplib {
class Server;
}

namespace kvscope::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;     // 0: any free port (Server::port() tells which)
  std::string apiKey;  // non-empty: requests need "Authorization: Bearer KEY"
  // Host names answered besides IP literals and localhost, and the web
  // origins' hosts allowed besides loopback (server/host_check.h); "*": any.
  // Other requests get 403.
  std::vector<std::string> allowedHosts;
  std::string modelId;             // what /v1/models lists; requests naming another get 404
  size_t queueLimit = 8;           // requests that may wait behind the running one
  size_t slotCount = 2;            // sessions requests run in, each with its KV cache
  size_t maxBodyBytes = 8u << 20;  // larger bodies get 413
  // What a request leaves out: its sampler, max tokens and prefill chunking.
  runtime::GenerateOptions defaults;
  // A prompt longer than the context: 400 (kStop) or old turns dropped.
  runtime::ContextOverflow contextOverflow = runtime::ContextOverflow::kStop;
};

// Where the server's jobs run and where its sessions come from.
class SessionRunner {
 public:
  virtual ~SessionRunner() = default;
  // Runs `job` later on the engine's thread, after every job posted before
  // it. Called from the server's HTTP threads; must not block. Every posted
  // job must eventually run (a job cancelled meanwhile returns at once), or
  // its HTTP request waits until the server stops.
  virtual void post(std::function<void()> job) = 0;
  // The session of the server's first slot (its other slots are siblings of
  // it: Session::sibling). Called from a job, on the engine's thread.
  virtual Expected<std::unique_ptr<runtime::Session>> makeSession() = 0;
};

// One finished generation, as a chat turn for the app's history.
struct ServedRequest {
  GenerationJob::Kind kind = GenerationJob::Kind::kChat;
  std::vector<tokenizer::ChatMessage> messages;  // chat
  std::string prompt;                            // completion
  std::string reply;                             // what the client got
  FinishReason finish = FinishReason::kStop;
  Usage usage;
  runtime::StepStats stats;
  bool cancelled = false;  // the client left before the end
};

struct ServerHooks {
  // Receives every served generation's Observer calls (session thread), so
  // the app's panels follow served requests like chat turns.
  runtime::Observer* observer = nullptr;
  // After each generation that ran (session thread).
  std::function<void(const ServedRequest&)> onServed;
  // Notices for the operator, such as an unrecognised chat template (any thread).
  std::function<void(std::string_view)> log;
  // activeRequests() changed (any thread): for a live request count.
  std::function<void(size_t active)> onActiveChanged;
};

class Server {
 public:
  Server(ServerOptions options, SessionRunner& runner, ServerHooks hooks = {});
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and starts serving on a thread of its own; fails (address in use,
  // bad host) without serving. Posts one job to read the initial KV snapshot.
  Status start();
  // Cancels waiting and running requests, closes the listening socket, waits
  // for the HTTP threads and for a job running on the session's thread;
  // after it returns no hook is called. Idempotent; not from a hook.
  void stop();

  int port() const { return m_port; }
  // "http://HOST:PORT/v1"
  std::string baseUrl() const;
  // Requests waiting or running, from any thread.
  size_t activeRequests() const;

  struct State;  // shared with the jobs, which may outlive a request

 private:
  void routes();

  std::shared_ptr<State> m_state;
  SessionRunner& m_runner;
  std::unique_ptr<httplib::Server> m_http;
  std::thread m_listener;
  int m_port = 0;
};

}  // namespace kvscope::server
