// `kvscope-cli bench-restore -m MODEL`: time to first token when a long
// conversation is reopened, its saved KV cache restored (Session::restoreCache)
// against its history prefilled again, side by side in one process. A session
// prefills --tokens tokens under --kv and saves its cache (timed: the save
// and the file's size); then, --runs times in a rotating order, a new session
// restores that file, or first holds another conversation and then restores
// it (the app's case), or prefills the history, and answers one new token.
// Every session gets its backend before the clock starts: reopening a chat in
// the app finds the model loaded.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <vector>

#include <fmt/format.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "model/model_tokenizer.h"
#include "runtime/backend_factory.h"
#include "runtime/session.h"

namespace kvscope::cli {
namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct RestoreArgs {
  std::string model;
  std::string backend = "cpu";
  std::string kv = "k=q8_0,v=turbo4";
  uint32_t tokens = 4096;
  uint32_t runs = 3;
  unsigned threads = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Status run(const RestoreArgs& a) {
  KVS_ASSIGN_OR_RETURN(auto file, openModelOrDemo(a.model));
  std::shared_ptr<const model::ModelFile> model(std::move(file));
  runtime::BackendChoice choice;
  choice.kind = a.backend;
  choice.contextLimit = a.tokens + 64;
  choice.threads = a.threads;
  choice.timing = false;
  choice.vetDevice = false;
  KVS_ASSIGN_OR_RETURN(choice.kvPolicy, kv::KvPolicy::parse(a.kv));
  const runtime::BackendFactory factory = runtime::makeBackendFactory(model, choice);
  const auto session = [&]() -> Expected<std::unique_ptr<runtime::Session>> {
    KVS_ASSIGN_OR_RETURN(auto backend, factory(choice.kvPolicy));
    KVS_ASSIGN_OR_RETURN(auto tok, model::loadTokenizer(*model));
    return std::make_unique<runtime::Session>(model, std::move(backend), std::move(tok), factory,
                                              choice.kvPolicy);
  };
  const uint32_t vocab = model->config().nVocab;
  std::vector<int32_t> history(a.tokens);
  for (uint32_t i = 0; i < a.tokens; ++i)
    history[i] = static_cast<int32_t>((uint64_t{i} * 7919 + 3) % vocab);
  runtime::GenerateOptions one;
  one.maxTokens = 1;
  one.sampler.temperature = 0.0f;
  one.prefillChunk = 512;

  // The conversation, and its saved cache.
  KVS_ASSIGN_OR_RETURN(auto original, session());
  KVS_TRY(original->generate(history, one));
  history = original->history();
  const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                     fmt::format("kvscope-bench-restore-{}.kvcache", ::getpid());
  const auto saveStart = Clock::now();
  KVS_TRY(original->saveCache(path));
  const double saveMs = msSince(saveStart);
  const double fileMiB = std::filesystem::file_size(path) / double(1 << 20);
  original.reset();

  std::vector<int32_t> next = history;
  next.push_back(static_cast<int32_t>(11 % vocab));
  // Three ways to the first token, in a rotating order: restore into a fresh
  // session, restore into a session that holds another conversation of the
  // same length (the app's case: the file is checked whole before that
  // cache is emptied), and prefill again.
  enum Way { kFresh, kBusy, kPrefill };
  std::vector<double> times[3];
  std::vector<int32_t> other(history.size());
  for (size_t i = 0; i < other.size(); ++i)
    other[i] = static_cast<int32_t>((uint64_t{i} * 104729 + 17) % vocab);
  for (uint32_t r = 0; r < a.runs; ++r) {
    for (int k = 0; k < 3; ++k) {
      const auto way = static_cast<Way>((k + r) % 3);
      KVS_ASSIGN_OR_RETURN(auto s, session());
      if (way == kBusy) KVS_TRY(s->generate(other, one));
      const auto t0 = Clock::now();
      if (way != kPrefill) KVS_TRY(s->restoreCache(path));
      KVS_ASSIGN_OR_RETURN(const runtime::GenerationResult result, s->generate(next, one));
      const double ms = msSince(t0);
      if (way != kPrefill && result.stats.reusedTokens != history.size())
        return makeError(ErrorCode::kInternal, "the restored session re-read its history");
      times[way].push_back(ms);
    }
  }
  std::filesystem::remove(path);
  fmt::print(
      "bench-restore {} {} {}: {} tokens, cache file {:.1f} MiB saved in {:.0f} ms; first token "
      "{:.0f} ms restored ({:.0f} ms into a session holding another conversation) vs {:.0f} ms "
      "re-prefilled (median of {}), {:.1f}x\n",
      model->path().filename().string(), a.backend, a.kv, history.size(), fileMiB, saveMs,
      median(times[kFresh]), median(times[kBusy]), median(times[kPrefill]), a.runs,
      median(times[kPrefill]) / median(times[kFresh]));
  return okStatus();
}

}  // namespace

void registerBenchRestore(CLI::App& app, const GlobalOptions&, int& exitCode) {
  static RestoreArgs args;
  auto* cmd = app.add_subcommand(
      "bench-restore",
      "Time to first token reopening a long conversation: saved KV cache restored vs re-prefilled");
  addModelPathOption(cmd, args.model);
  cmd->add_option("--backend", args.backend, "cpu or vulkan")->default_val(args.backend);
  cmd->add_option("--kv", args.kv, "KV cache policy")->default_val(args.kv);
  cmd->add_option("--tokens", args.tokens, "Conversation length in tokens")
      ->default_val(args.tokens);
  cmd->add_option("--runs", args.runs, "Pairs of timed reopenings")
      ->default_val(args.runs)
      ->check(CLI::PositiveNumber);
  cmd->add_option("--threads", args.threads, "CPU threads (default: all)");
  cmd->callback([&exitCode] {
    if (const Status st = run(args); !st.ok()) {
      fmt::print(stderr, "error: {}\n", st.error().message);
      exitCode = 1;
    }
  });
}

}  // namespace kvscope::cli
