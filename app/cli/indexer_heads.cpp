// `kvscope-cli indexer-heads -m MODEL -f TEXT --indexer K`: which KV heads to
// keep on dense attention under the indexer (runtime/indexer_heads.h). The
// text is teacher-forced with every layer selecting; each (layer, KV head)'s
// captured share of the dense softmax mass is printed, and the heads below
// --below as the policy item that keeps them dense (indexer_dense_heads=...).
// A table, or one JSON object.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "kv/kv_policy.h"
#include "model/model_tokenizer.h"
#include "runtime/backend_factory.h"
#include "runtime/indexer_heads.h"

namespace kvscope::cli {
namespace {

struct HeadsArgs {
  std::string model;
  std::string file;
  std::string policy;
  std::string indexer;
  uint32_t steps = 256;
  double below = 0.5;
  std::string backend = "cpu";
  uint32_t context = 0;
  unsigned threads = 0;
  bool json = false;
};

struct Measured {
  std::string modelName;
  runtime::IndexerHeadMass mass;
  std::vector<kv::KvHeadRef> dense;
};

Expected<Measured> measure(const HeadsArgs& a, const GlobalOptions& global) {
  KVS_ASSIGN_OR_RETURN(auto file, openModelOrDemo(a.model));
  std::shared_ptr<const model::ModelFile> model(std::move(file));
  KVS_ASSIGN_OR_RETURN(const auto tokenizer, model::loadTokenizer(*model));
  KVS_ASSIGN_OR_RETURN(const auto tokens, forcedTextTokens(tokenizer, a.file));
  KVS_ASSIGN_OR_RETURN(kv::KvPolicy policy, sessionlessPolicy(withIndexer(a.policy, a.indexer)));
  if (!policy.attention.enabled())
    return makeError(ErrorCode::kInvalidArgument, "indexer-heads needs --indexer TOP_K");
  if (policy.autoBits)
    return makeError(ErrorCode::kInvalidArgument,
                     "indexer-heads measures under an explicit KV policy, not auto");
  const kv::IndexerOptions options = policy.attention;
  policy.attention = {};  // the backend starts without the indexer; the measurement sets it
  const runtime::BackendChoice choice{.kind = a.backend,
                                      .contextLimit = a.context,
                                      .device = global.device,
                                      .threads = a.threads,
                                      .timing = false,
                                      .kvPolicy = std::move(policy),
                                      .vetDevice = false};
  KVS_ASSIGN_OR_RETURN(auto backend, runtime::makeBackend(model, choice));
  Measured m;
  KVS_ASSIGN_OR_RETURN(m.mass, runtime::measureIndexerHeads(*backend, tokens, options, a.steps));
  m.dense = runtime::headsBelow(m.mass, a.below);
  const std::string& name = model->config().name;
  m.modelName = name.empty() ? model->path().filename().string() : name;
  return m;
}

std::string policyItem(const std::vector<kv::KvHeadRef>& heads) {
  return "indexer_dense_heads=" + kv::IndexerOptions{.denseHeads = heads}.denseHeadsText();
}

void printJson(const HeadsArgs& a, const Measured& m) {
  nlohmann::json layers = nlohmann::json::array();
  for (size_t l = 0; l < m.mass.mass.size(); ++l)
    layers.push_back({{"layer", l}, {"captured_mass", m.mass.mass[l]}});
  nlohmann::json dense = nlohmann::json::array();
  for (const kv::KvHeadRef& h : m.dense) dense.push_back({{"layer", h.layer}, {"head", h.head}});
  const nlohmann::json out = {{"model", m.modelName},
                              {"backend", a.backend},
                              {"indexer", m.mass.options.selectionText()},
                              {"indexer_scorer", m.mass.options.scorerText()},
                              {"prefill", m.mass.prefill},
                              {"steps", m.mass.steps},
                              {"below", a.below},
                              {"per_layer", layers},
                              {"dense_heads", dense},
                              {"policy_item", policyItem(m.dense)}};
  fmt::print("{}\n", out.dump(2));
}

void printTable(const HeadsArgs& a, const Measured& m) {
  const runtime::IndexerHeadMass& r = m.mass;
  fmt::print("{} on {}: indexer {} ({}) in every layer, {} decode steps after {} tokens\n",
             m.modelName, a.backend, r.options.selectionText(), r.options.scorerText(), r.steps,
             r.prefill);
  fmt::print("share of dense attention's softmax mass each KV head's selection captured:\n\n");
  size_t heads = 0;
  for (const auto& layer : r.mass) heads = std::max(heads, layer.size());
  fmt::print("| layer |");
  for (size_t h = 0; h < heads; ++h) fmt::print(" head {:<2} |", h);
  fmt::print("\n|------:|");
  for (size_t h = 0; h < heads; ++h) fmt::print("--------:|");
  fmt::print("\n");
  for (size_t l = 0; l < r.mass.size(); ++l) {
    fmt::print("| {:>5} |", l);
    for (size_t h = 0; h < heads; ++h) {
      if (h < r.mass[l].size()) {
        fmt::print(" {:>7.4f} |", r.mass[l][h]);
      } else {
        fmt::print(" {:>7} |", "");
      }
    }
    fmt::print("\n");
  }
  fmt::print("\n{} of {} KV heads captured less than {:.2f}: {}\n", m.dense.size(), r.kvHeads(),
             a.below, policyItem(m.dense));
}

int runHeads(const HeadsArgs& a, const GlobalOptions& global) {
  auto m = measure(a, global);
  if (!m.ok()) {
    fmt::print(stderr, "error: {}\n", m.error().message);
    return 1;
  }
  if (a.json) {
    printJson(a, *m);
  } else {
    printTable(a, *m);
  }
  return 0;
}

}  // namespace

void registerIndexerHeads(CLI::App& app, const GlobalOptions& global, int& exitCode) {
  static HeadsArgs args;
  auto* cmd = app.add_subcommand(
      "indexer-heads",
      "Measure which KV heads the indexer should keep on dense attention (captured mass per head)");
  addModelPathOption(cmd, args.model);
  cmd->add_option("-f,--file", args.file,
                  "Text to feed (forced decoding); running text, not the "
                  "task the heads will serve")
      ->required();
  addIndexerOption(cmd, args.indexer);
  cmd->add_option("--kv-policy", args.policy,
                  "KV cache policy to measure under, e.g. k=q8_0,indexer_scorer=meanstd16");
  cmd->add_option("--steps", args.steps, "Decode steps measured: the text's last tokens")
      ->default_val(args.steps)
      ->check(CLI::Range(1u, 1u << 20));
  cmd->add_option("--below", args.below,
                  "Heads capturing less than this share of the mass are listed to stay dense")
      ->default_val(args.below)
      ->check(CLI::Range(0.0, 1.0));
  addBackendOptions(cmd, args.backend, args.threads);
  cmd->add_option("-c,--ctx", args.context, "Context length in tokens (default: the model's)");
  cmd->add_flag("--json", args.json, "Print one JSON object instead of a table");
  cmd->callback([&global, &exitCode] { exitCode = runHeads(args, global); });
}

}  // namespace kvscope::cli
