// `kvscope-cli probe -m MODEL --ctx N --depth D`: the retrieval probe of
// runtime/probe.h, run twice on one model: with the f16 cache and no indexer
// (accuracy_dense), then with the asked KV policy and indexer (accuracy; the
// indexer in its diagnostic mode, so the attention mass it captured is
// reported too). A line of text, or one JSON object.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "kv/kv_policy.h"
#include "model/model_tokenizer.h"
#include "runtime/backend_factory.h"
#include "runtime/kv_auto.h"
#include "runtime/probe.h"

namespace kvscope::cli {
namespace {

struct ProbeArgs {
  std::string model;
  uint32_t context = 0;
  double depth = 0.5;
  uint32_t span = 32;
  uint64_t seed = 1;
  std::string policy;
  std::string indexer;
  std::string backend = "cpu";
  unsigned threads = 0;
  bool json = false;
};

struct ProbeRuns {
  runtime::ProbeResult dense, test;
  uint32_t context = 0;
  std::string policy;   // as run: the policy text with the indexer added
  std::string indexer;  // TOP_K:WINDOW:SINKS or off
};

Expected<ProbeRuns> probe(const ProbeArgs& a, const GlobalOptions& global) {
  KVS_ASSIGN_OR_RETURN(auto file, openModelOrDemo(a.model));
  std::shared_ptr<const model::ModelFile> model(std::move(file));
  KVS_ASSIGN_OR_RETURN(const auto tokenizer, model::loadTokenizer(*model));
  ProbeRuns runs;
  runs.policy = withIndexer(a.policy, a.indexer);
  KVS_ASSIGN_OR_RETURN(const kv::KvPolicy policy, kv::KvPolicy::parse(runs.policy));
  runs.indexer = policy.attention.selectionText();
  runs.context = a.context ? a.context : model->config().contextLength;
  KVS_ASSIGN_OR_RETURN(
      const runtime::ProbeLayout layout,
      runtime::buildProbe(
          tokenizer, {.context = runs.context, .depth = a.depth, .span = a.span, .seed = a.seed}));
  runtime::BackendChoice choice{.kind = a.backend,
                                .contextLimit = runs.context,
                                .device = global.device,
                                .threads = a.threads,
                                .timing = false,
                                .indexerDiagnostic = true,
                                .vetDevice = false};
  choice.kvPolicy = policy;
  {
    runtime::BackendChoice f16 = choice;
    f16.kvPolicy = {};
    KVS_ASSIGN_OR_RETURN(auto dense, runtime::makeBackend(model, f16));
    KVS_ASSIGN_OR_RETURN(runs.dense, runtime::runProbe(*dense, layout));
    // An auto policy chooses from the dense run's f16 rows, as eval does.
    if (policy.autoBits) {
      const runtime::BackendFactory factory = runtime::makeBackendFactory(model, choice);
      KVS_ASSIGN_OR_RETURN(runtime::AutoChoice chosen,
                           runtime::chooseAutoPolicy(
                               *dense, policy, {.factory = &factory, .tokens = layout.tokens}));
      runs.policy = chosen.policy.toString();
      choice.kvPolicy = chosen.policy;
    }
  }
  KVS_ASSIGN_OR_RETURN(auto test, runtime::makeBackend(model, choice));
  KVS_ASSIGN_OR_RETURN(runs.test, runtime::runProbe(*test, layout));
  return runs;
}

nlohmann::json orNull(double x) {
  return x < 0.0 ? nlohmann::json(nullptr) : nlohmann::json(x);
}

int runProbe(const ProbeArgs& a, const GlobalOptions& global) {
  auto r = probe(a, global);
  if (!r.ok()) {
    fmt::print(stderr, "error: {}\n", r.error().message);
    return 1;
  }
  const std::string policy = r->policy.empty() ? "f16" : r->policy;
  if (a.json) {
    const nlohmann::json out = {{"accuracy", r->test.accuracy},
                                {"accuracy_dense", r->dense.accuracy},
                                {"ctx", r->context},
                                {"depth", a.depth},
                                {"span", a.span},
                                {"seed", a.seed},
                                {"kv_policy", policy},
                                {"indexer", r->indexer},
                                {"rows_read", orNull(r->test.rowsRead)},
                                {"captured_mass", orNull(r->test.capturedMass)}};
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  fmt::print("probe ctx {} depth {:.2f} span {}: {} {}/{} = {:.1f}% (f16 dense {:.1f}%)",
             r->context, a.depth, a.span, policy, r->test.correct, r->test.scored,
             100.0 * r->test.accuracy, 100.0 * r->dense.accuracy);
  if (r->test.capturedMass >= 0.0)
    fmt::print("; indexer read {:.1f}% of the rows, captured {:.2f}% of the attention mass",
               100.0 * r->test.rowsRead, 100.0 * r->test.capturedMass);
  fmt::print("\n");
  return 0;
}

}  // namespace

void registerProbe(CLI::App& app, const GlobalOptions& global, int& exitCode) {
  static ProbeArgs args;
  auto* cmd = app.add_subcommand(
      "probe", "Retrieval probe: copy a random span planted at a depth of the context");
  addModelPathOption(cmd, args.model);
  cmd->add_option("-c,--ctx", args.context, "Tokens of context (default: the model's)");
  cmd->add_option("--depth", args.depth, "Where the span is planted, 0 (start) to 1 (end)")
      ->default_val(args.depth)
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--span", args.span, "Tokens in the span")->default_val(args.span);
  cmd->add_option("--seed", args.seed, "Seed of the span's tokens")->default_val(args.seed);
  cmd->add_option("--kv-policy", args.policy, "KV cache policy, e.g. k=q8_0,v=turbo4");
  addIndexerOption(cmd, args.indexer);
  cmd->add_option("--backend", args.backend, "Backend to run on")
      ->check(CLI::IsMember({"cpu", "vulkan"}))
      ->default_val(args.backend);
  cmd->add_option("--threads", args.threads, "CPU threads (default: all)");
  cmd->add_flag("--json", args.json, "Print one JSON object");
  cmd->callback([&global, &exitCode] { exitCode = runProbe(args, global); });
}

}  // namespace kvscope::cli
