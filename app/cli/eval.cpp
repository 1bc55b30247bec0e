// `kvscope-cli eval -m MODEL -f TEXT`: KV cache fidelity of a policy against
// the f16 cache on the same backend kind, by forced decoding of a text
// (runtime/eval.h): KL divergence per step, top-1 agreement, perplexity, bits
// per value and per-layer round-trip error. A table, or one JSON object.
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "model/model_tokenizer.h"
#include "runtime/auto_plan_json.h"
#include "runtime/eval.h"
#include "runtime/kv_auto.h"

namespace kvscope::cli {
namespace {

struct EvalArgs {
  std::string model;
  std::string file;
  uint32_t prefill = 16;
  std::string keyScheme = "f16";
  std::string valueScheme = "f16";
  std::string policy;
  std::string indexer;
  std::string backend = "cpu";
  uint32_t context = 0;
  unsigned threads = 0;
  bool json = false;
};

struct Evaluation {
  std::string modelName;
  runtime::EvalResult result;
};

Expected<Evaluation> evaluate(const EvalArgs& a, const std::string& policy,
                              const GlobalOptions& global) {
  KVS_ASSIGN_OR_RETURN(auto file, openModelOrDemo(a.model));
  std::shared_ptr<const model::ModelFile> model(std::move(file));
  KVS_ASSIGN_OR_RETURN(const auto tokenizer, model::loadTokenizer(*model));
  KVS_ASSIGN_OR_RETURN(const auto tokens, forcedTextTokens(tokenizer, a.file));
  KVS_ASSIGN_OR_RETURN(kv::KvPolicy parsed, kv::KvPolicy::parse(policy));
  const runtime::BackendChoice choice{.kind = a.backend,
                                      .contextLimit = a.context,
                                      .device = global.device,
                                      .threads = a.threads,
                                      .timing = false,
                                      .kvPolicy = std::move(parsed),
                                      // With an indexer, report the mass it captured.
                                      .indexerDiagnostic = true,
                                      // eval measures the backend it names, like bench.
                                      .vetDevice = false};
  KVS_ASSIGN_OR_RETURN(auto result,
                       runtime::evaluateKvPolicy(model, tokens, choice, {.prefill = a.prefill}));
  const std::string& name = model->config().name;
  return Evaluation{name.empty() ? model->path().filename().string() : name,
                    std::move(result)};
}

// A run error the backend did not measure is null.
nlohmann::json runError(double error) {
  return error < 0.0 ? nlohmann::json(nullptr) : nlohmann::json(error);
}

void printJson(const EvalArgs& a, const std::string& policy, const Evaluation& e) {
  const runtime::EvalResult& r = e.result;
  nlohmann::json layers = nlohmann::json::array();
  for (size_t l = 0; l < r.layers.size(); ++l) {
    const runtime::EvalLayer& x = r.layers[l];
    layers.push_back({{"layer", l},
                      {"k_scheme", x.keyScheme},
                      {"v_scheme", x.valueScheme},
                      {"k_bits_per_value", x.keyBitsPerValue},
                      {"v_bits_per_value", x.valueBitsPerValue},
                      {"k_rel_rms_error", x.keyError},
                      {"v_rel_rms_error", x.valueError},
                      {"k_run_rel_rms_error", runError(x.keyRunError)},
                      {"v_run_rel_rms_error", runError(x.valueRunError)}});
  }
  const nlohmann::json out = {
      {"model", e.modelName},
      {"backend", a.backend},
      {"kv_policy", policy},
      {"tokens", r.tokens},
      {"prefill", r.prefill},
      {"steps", r.steps.size()},
      {"kld_mean", r.kldMean},
      {"kld_median", r.kldMedian},
      {"kld_p99", r.kldP99},
      {"kld_p999", r.kldP999},
      {"top1", r.top1},
      {"ppl", r.ppl},
      {"ppl_f16", r.pplF16},
      {"bits_per_value_k", r.bitsPerValueK},
      {"bits_per_value_v", r.bitsPerValueV},
      {"rows_read", r.rowsRead < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.rowsRead)},
      {"captured_mass",
       r.capturedMass < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.capturedMass)},
      {"per_layer", layers}};
  nlohmann::json full = out;
  full["kv_policy_used"] = r.policy;
  if (r.autoPlan) full["auto"] = runtime::autoPlanJson(*r.autoPlan);
  if (!r.autoHeads.empty()) full["auto_heads"] = r.autoHeads;
  fmt::print("{}\n", full.dump(2));
}

void printTable(const EvalArgs& a, const std::string& policy, const Evaluation& e) {
  const runtime::EvalResult& r = e.result;
  fmt::print("{} on {}: {} against f16, {} tokens (prefill {}, {} forced steps)\n", e.modelName,
             a.backend, policy, r.tokens, r.prefill, r.steps.size());
  fmt::print("  KLD (nats)   mean {:.3e}  median {:.3e}  p99 {:.3e}  p99.9 {:.3e}\n", r.kldMean,
             r.kldMedian, r.kldP99, r.kldP999);
  fmt::print("  top-1        {:.2f}%\n", 100.0 * r.top1);
  fmt::print("  perplexity   {:.4f} (f16 {:.4f})\n", r.ppl, r.pplF16);
  fmt::print("  bits/value   K {:.3f}  V {:.3f}\n", r.bitsPerValueK, r.bitsPerValueV);
  if (r.rowsRead >= 0.0) {
    fmt::print("  indexer      {:.1f}% of the rows read, {:.2f}% of the attention mass captured\n",
               100.0 * r.rowsRead, 100.0 * r.capturedMass);
  }
  if (!r.autoHeads.empty()) fmt::print("  {}\n", r.autoHeads);
  if (r.autoPlan) fmt::print("\n{}chose {}\n", runtime::describeAutoPlan(*r.autoPlan), r.policy);
  fmt::print("\n");
  // rel err: round trip of the f16 run's rows; run err: the test run's own
  // rows, where the backend measures them ("-" elsewhere).
  fmt::print(
      "| layer | K scheme | K bits | K rel err | K run err "
      "| V scheme | V bits | V rel err | V run err |\n");
  fmt::print(
      "|------:|----------|-------:|----------:|----------:"
      "|----------|-------:|----------:|----------:|\n");
  auto run = [](double err) { return err < 0.0 ? std::string("-") : fmt::format("{:.3e}", err); };
  for (size_t l = 0; l < r.layers.size(); ++l) {
    const runtime::EvalLayer& x = r.layers[l];
    fmt::print(
        "| {:>5} | {:<8} | {:>6.3f} | {:>9.3e} | {:>9} | {:<8} | {:>6.3f} | {:>9.3e} | {:>9} |\n",
        l, x.keyScheme, x.keyBitsPerValue, x.keyError, run(x.keyRunError), x.valueScheme,
        x.valueBitsPerValue, x.valueError, run(x.valueRunError));
  }
}

int runEval(const EvalArgs& a, const GlobalOptions& global) {
  const std::string policy = withIndexer(
      a.policy.empty() ? fmt::format("k={},v={}", a.keyScheme, a.valueScheme) : a.policy,
      a.indexer);
  auto e = evaluate(a, policy, global);
  if (!e.ok()) {
    fmt::print(stderr, "error: {}\n", e.error().message);
    return 1;
  }
  if (a.json) {
    printJson(a, policy, *e);
  } else {
    printTable(a, policy, *e);
  }
  return 0;
}

}  // namespace

void registerEval(CLI::App& app, const GlobalOptions& global, int& exitCode) {
  static EvalArgs args;
  auto* cmd = app.add_subcommand(
      "eval", "KV cache fidelity of a policy against the f16 cache (KLD, top-1, perplexity)");
  addModelPathOption(cmd, args.model);
  cmd->add_option("-f,--file", args.file, "Text to feed (forced decoding)")->required();
  cmd->add_option("--prefill", args.prefill, "Tokens run as one batch before forced decoding")
      ->default_val(args.prefill);
  auto* ctk =
      cmd->add_option("--ctk,--cache-type-k", args.keyScheme, "KV cache scheme of K in every layer")
          ->default_val("f16");
  auto* ctv = cmd->add_option("--ctv,--cache-type-v", args.valueScheme,
                              "KV cache scheme of V in every layer")
                  ->default_val("f16");
  cmd->add_option("--kv-policy", args.policy, "KV cache policy, e.g. k=q8_0,v=turbo3,boundary=2")
      ->excludes(ctk)
      ->excludes(ctv);
  addIndexerOption(cmd, args.indexer);
  addBackendOptions(cmd, args.backend, args.threads);
  cmd->add_option("-c,--ctx", args.context, "Context length in tokens (default: the model's)");
  cmd->add_flag("--json", args.json, "Print one JSON object instead of a table");
  cmd->callback([&global, &exitCode] { exitCode = runEval(args, global); });
}

}  // namespace kvscope::cli
