// `kvscope-cli serve`: an OpenAI-compatible HTTP server for one model
// (engine/server/server.h). Loopback only unless an API key guards it; Ctrl-C or
// SIGTERM stops it cleanly (running requests are cancelled).
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/model_options.h"
#include "model/default_model.h"
#include "server/server.h"
#include "server/session_thread.h"

namespace kvscope::cli {
namespace {

struct ServeArgs {
  ModelOptions model;
  ChatTemplateOptions chat;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string apiKey;
  std::vector<std::string> allowHosts;
  size_t queue = 8;
  size_t slots = 2;
  uint32_t maxTokens = 0;
  bool indexerDiagnostic = false;
  std::string overflow = "stop";
};

bool isLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// The id clients name the model by: its file or folder name.
Expected<std::string> modelId(const std::string& model) {
  std::filesystem::path path = model;
  if (path.empty()) {
    KVS_ASSIGN_OR_RETURN(path, model::findDefaultModel());
  }
  if (!path.has_filename()) path = path.parent_path();  // a folder given as "dir/"
  return path.filename().string();
}

int runServe(const ServeArgs& a, const GlobalOptions& global) {
  if (!isLoopback(a.host) && a.apiKey.empty()) {
    fmt::print(stderr,
               "error: serving on {} would expose the model to the network; pass --api-key KEY "
               "as well (clients then send 'Authorization: Bearer KEY')\n",
               a.host);
    return 1;
  }
  auto id = modelId(a.model.model);
  if (!id.ok()) {
    fmt::print(stderr, "error: {}\n", id.error().message);
    return 1;
  }
  auto loaded = loadSession(a.model, global);
  if (!loaded.ok()) {
    fmt::print(stderr, "error: {}\n", loaded.error().message);
    return 1;
  }
  if (const Status applied = applyChatTemplateOptions(a.chat, **loaded); !applied.ok()) {
    fmt::print(stderr, "error: {}\n", applied.error().message);
    return 1;
  }
  if (a.indexerDiagnostic) {
    if (auto st = (*loaded)->setIndexerDiagnostic(true); !st.ok()) {
      fmt::print(stderr, "error: {}\n", st.error().message);
      return 1;
    }
  }

  server::ServerOptions options;
  options.host = a.host;
  options.port = a.port;
  options.apiKey = a.apiKey;
  options.allowedHosts = a.allowHosts;
  options.modelId = *id;
  options.queueLimit = a.queue;
  options.slotCount = a.slots;
  options.contextOverflow = runtime::parseContextOverflow(a.overflow).value();
  // Without -n a reply may run until the context is full, as OpenAI's API.
  options.defaults.maxTokens = a.maxTokens ? a.maxTokens : std::numeric_limits<uint32_t>::max();
  options.defaults.sampler = a.model.sampler;
  if (a.model.seedSet) options.defaults.sampler.seed = a.model.seed;

  // The signals go to sigwait() below, never to a handler: every thread
  // started from here on inherits this mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  server::SessionThread engine(std::move(*loaded));
  server::ServerHooks hooks;
  hooks.log = [](std::string_view message) { fmt::print(stderr, "warning: {}\n", message); };
  server::Server http(options, engine, hooks);
  if (auto st = http.start(); !st.ok()) {
    fmt::print(stderr, "error: {}\n", st.error().message);
    return 1;
  }
  fmt::print("kvscope serving {} at {}\n", *id, http.baseUrl());
  std::fflush(stdout);
  int signal = 0;
  sigwait(&signals, &signal);
  fmt::print(stderr, "stopping ({})\n", signal == SIGINT ? "interrupted" : "terminated");
  http.stop();
  return 0;
}

}  // namespace

void registerServe(CLI::App& app, const GlobalOptions& global, int& exitCode) {
  static ServeArgs args;
  auto* cmd = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API");
  addModelOptions(cmd, args.model);
  addChatTemplateOptions(cmd, args.chat);
  cmd->add_option("--host", args.host,
                  "Address to listen on; anything but loopback needs --api-key")
      ->default_val(args.host);
  cmd->add_option("--port", args.port, "Port to listen on (0: any free port)")
      ->default_val(args.port)
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", args.apiKey,
                  "Require 'Authorization: Bearer KEY' on every request but /health");
  cmd->add_option("--allow-host", args.allowHosts,
                  "Also answer requests that name the server NAME (Host header) and browser "
                  "pages from NAME (Origin); repeatable, '*' for any. IP addresses and localhost "
                  "are always answered");
  cmd->add_option("--queue", args.queue, "Requests that may wait for the model; more get 429")
      ->default_val(args.queue);
  cmd->add_option("--slots", args.slots,
                  "Conversations kept at once, each in a KV cache of its own: a request reuses "
                  "the slot whose cache shares most of its prompt, else the least recently "
                  "used one (on a GPU each slot also holds a copy of the weights)")
      ->default_val(args.slots)
      ->check(CLI::Range(1, 64));
  cmd->add_option("-n,--n-predict", args.maxTokens,
                  "Most tokens per reply when a request sets no max_tokens (default: until the "
                  "context is full)");
  addContextOverflowOption(cmd, args.overflow);
  cmd->add_flag("--indexer-diagnostic", args.indexerDiagnostic,
                "With --indexer, also score densely so /metrics reports the attention mass the "
                "indexer captured (slower)");
  cmd->callback([&global, &exitCode] { exitCode = runServe(args, global); });
}

}  // namespace kvscope::cli
