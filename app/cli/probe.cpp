// `kvscope-cli probe -m MODEL --ctx N --depth D --seed S`: the retrieval probe
// of runtime/probe.h, run twice on one model: with the f16 cache and no
// indexer (accuracy_dense), then with the asked KV policy and indexer
// (accuracy; the indexer in its diagnostic mode, so the attention mass it
// captured is reported too). --depth and --seed take lists: every pair runs,
// the model and its backends loaded once, and the means follow. A line of text per run, or one
// JSON object (with several runs: the runs in "runs", the means beside them).
#include <vector>

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
  std::vector<double> depths{0.5};
  uint32_t span = 32;
  std::vector<uint64_t> seeds{1};
  std::string policy;
  std::string indexer;
  std::string backend = "cpu";
  unsigned threads = 0;
  bool json = false;
};

struct ProbeRuns {
  runtime::ProbeResult dense, test;
  double depth = 0.0;
  uint64_t seed = 0;
  uint32_t context = 0;
  std::string policy;   // as run: the policy text with the indexer added
  std::string indexer;  // TOP_K:WINDOW:SINKS or off
};

// The backends a grid's runs share: runProbe trims each to 0 first. An auto
// policy's test backend is not kept (each run chooses its own).
struct ProbeBackends {
  std::unique_ptr<backend::Backend> dense, test;
};

Expected<ProbeRuns> probe(const ProbeArgs& a, std::shared_ptr<const model::ModelFile> model,
                          const tokenizer::Tokenizer& tokenizer, double depth, uint64_t seed,
                          const GlobalOptions& global, ProbeBackends& kept) {
  ProbeRuns runs;
  runs.depth = depth;
  runs.seed = seed;
  runs.policy = withIndexer(a.policy, a.indexer);
  KVS_ASSIGN_OR_RETURN(const kv::KvPolicy policy, kv::KvPolicy::parse(runs.policy));
  runs.indexer = policy.attention.selectionText();
  runs.context = a.context ? a.context : model->config().contextLength;
  KVS_ASSIGN_OR_RETURN(
      const runtime::ProbeLayout layout,
      runtime::buildProbe(tokenizer,
                          {.context = runs.context, .depth = depth, .span = a.span, .seed = seed}));
  runtime::BackendChoice choice{.kind = a.backend,
                                .contextLimit = runs.context,
                                .device = global.device,
                                .threads = a.threads,
                                .timing = false,
                                .indexerDiagnostic = true,
                                .vetDevice = false};
  choice.kvPolicy = policy;
  if (!kept.dense) {
    runtime::BackendChoice f16 = choice;
    f16.kvPolicy = {};
    KVS_ASSIGN_OR_RETURN(kept.dense, runtime::makeBackend(model, f16));
  }
  KVS_ASSIGN_OR_RETURN(runs.dense, runtime::runProbe(*kept.dense, layout));
  // An auto policy chooses from the dense run's f16 rows, as eval does, and
  // gets a test backend of its own.
  if (policy.autoBits) {
    const runtime::BackendFactory factory = runtime::makeBackendFactory(model, choice);
    KVS_ASSIGN_OR_RETURN(runtime::AutoChoice chosen,
                         runtime::chooseAutoPolicy(*kept.dense, policy,
                                                   {.factory = &factory, .tokens = layout.tokens}));
    runs.policy = chosen.policy.toString();
    choice.kvPolicy = chosen.policy;
    KVS_ASSIGN_OR_RETURN(auto test, runtime::makeBackend(model, choice));
    KVS_ASSIGN_OR_RETURN(runs.test, runtime::runProbe(*test, layout));
    return runs;
  }
  if (!kept.test) {
    KVS_ASSIGN_OR_RETURN(kept.test, runtime::makeBackend(model, choice));
  }
  // Each run is a new conversation: indexer_dense_heads=auto measures on its
  // own prompt (runProbe leaves the heads it measured in the backend).
  kv::IndexerOptions attention = policy.attention;
  attention.diagnostic = true;
  KVS_TRY(kept.test->setIndexer(attention));
  KVS_ASSIGN_OR_RETURN(runs.test, runtime::runProbe(*kept.test, layout));
  return runs;
}

nlohmann::json orNull(double x) {
  return x < 0.0 ? nlohmann::json(nullptr) : nlohmann::json(x);
}

std::string policyText(const ProbeRuns& r) {
  return r.policy.empty() ? "f16" : r.policy;
}

nlohmann::json runJson(const ProbeRuns& r, uint32_t span) {
  return {{"accuracy", r.test.accuracy},
          {"accuracy_dense", r.dense.accuracy},
          {"ctx", r.context},
          {"depth", r.depth},
          {"span", span},
          {"seed", r.seed},
          {"kv_policy", policyText(r)},
          {"indexer", r.indexer},
          {"rows_read", orNull(r.test.rowsRead)},
          {"captured_mass", orNull(r.test.capturedMass)},
          {"auto_heads", r.test.autoHeads}};
}

void printRun(const ProbeRuns& r, uint32_t span) {
  fmt::print("probe ctx {} depth {:.2f} seed {} span {}: {} {}/{} = {:.1f}% (f16 dense {:.1f}%)",
             r.context, r.depth, r.seed, span, policyText(r), r.test.correct, r.test.scored,
             100.0 * r.test.accuracy, 100.0 * r.dense.accuracy);
  if (r.test.capturedMass >= 0.0)
    fmt::print("; indexer read {:.1f}% of the rows, captured {:.2f}% of the attention mass",
               100.0 * r.test.rowsRead, 100.0 * r.test.capturedMass);
  fmt::print("\n");
  if (!r.test.autoHeads.empty()) fmt::print("  {}\n", r.test.autoHeads);
}

int runProbe(const ProbeArgs& a, const GlobalOptions& global) {
  std::vector<ProbeRuns> runs;
  const Status status = [&]() -> Status {
    KVS_ASSIGN_OR_RETURN(auto file, openModelOrDemo(a.model));
    std::shared_ptr<const model::ModelFile> model(std::move(file));
    KVS_ASSIGN_OR_RETURN(const auto tokenizer, model::loadTokenizer(*model));
    ProbeBackends kept;
    for (uint64_t seed : a.seeds) {
      for (double depth : a.depths) {
        KVS_ASSIGN_OR_RETURN(ProbeRuns r, probe(a, model, tokenizer, depth, seed, global, kept));
        if (!a.json) printRun(r, a.span);
        runs.push_back(std::move(r));
      }
    }
    return okStatus();
  }();
  if (!status.ok()) {
    fmt::print(stderr, "error: {}\n", status.error().message);
    return 1;
  }
  if (runs.size() == 1) {
    if (a.json) fmt::print("{}\n", runJson(runs[0], a.span).dump(2));
    return 0;
  }
  // The means: over every run, and per depth over the seeds.
  double test = 0.0, dense = 0.0;
  for (const ProbeRuns& r : runs) {
    test += r.test.accuracy / static_cast<double>(runs.size());
    dense += r.dense.accuracy / static_cast<double>(runs.size());
  }
  nlohmann::json byDepth = nlohmann::json::array();
  for (size_t d = 0; d < a.depths.size(); ++d) {
    double t = 0.0, f = 0.0;
    for (size_t s = 0; s < a.seeds.size(); ++s) {
      t += runs[s * a.depths.size() + d].test.accuracy / static_cast<double>(a.seeds.size());
      f += runs[s * a.depths.size() + d].dense.accuracy / static_cast<double>(a.seeds.size());
    }
    byDepth.push_back({{"depth", a.depths[d]}, {"accuracy", t}, {"accuracy_dense", f}});
    if (!a.json && a.seeds.size() > 1)
      fmt::print("depth {:.2f}, mean of {} seeds: {:.1f}% (f16 dense {:.1f}%)\n", a.depths[d],
                 a.seeds.size(), 100.0 * t, 100.0 * f);
  }
  if (!a.json) {
    fmt::print("mean of {} runs: {:.1f}% (f16 dense {:.1f}%)\n", runs.size(), 100.0 * test,
               100.0 * dense);
    return 0;
  }
  nlohmann::json all = nlohmann::json::array();
  for (const ProbeRuns& r : runs) all.push_back(runJson(r, a.span));
  const nlohmann::json out = {{"accuracy", test}, {"accuracy_dense", dense}, {"by_depth", byDepth},
                              {"runs", all},      {"ctx", runs[0].context},  {"span", a.span}};
  fmt::print("{}\n", out.dump(2));
  return 0;
}

}  // namespace

void registerProbe(CLI::App& app, const GlobalOptions& global, int& exitCode) {
  static ProbeArgs args;
  auto* cmd = app.add_subcommand(
      "probe", "Retrieval probe: copy a random span planted at a depth of the context");
  addModelPathOption(cmd, args.model);
  cmd->add_option("-c,--ctx", args.context, "Tokens of context (default: the model's)");
  cmd->add_option("--depth", args.depths,
                  "Where the span is planted, 0 (start) to 1 (end); a list runs each "
                  "(0.1,0.5,0.9)")
      ->delimiter(',')
      ->default_str("0.5")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--span", args.span, "Tokens in the span")->default_val(args.span);
  cmd->add_option("--seed", args.seeds, "Seed of the span's tokens; a list runs each (1,2,3)")
      ->delimiter(',')
      ->default_str("1");
  cmd->add_option("--kv-policy", args.policy, "KV cache policy, e.g. k=q8_0,v=turbo4");
  addIndexerOption(cmd, args.indexer);
  addBackendOptions(cmd, args.backend, args.threads);
  cmd->add_flag("--json", args.json, "Print one JSON object");
  cmd->callback([&global, &exitCode] { exitCode = runProbe(args, global); });
}

}  // namespace kvscope::cli
