// `kvscope-cli bench -m MODEL`: llama-bench-style throughput. For each backend,
// KV policy (--kv) and context depth d: the cache is filled to d tokens (not
// timed), then a prefill of -p tokens, the decode step right after it and a
// decode of -n tokens are timed at that depth (a two_phase cache is emptied
// at each depth, so it fills and prefills at f16 and the step after the
// prefill encodes every row again; at depth 0 its timed decode starts from
// an empty cache, whose second step encodes the first row). Each backend is warmed up untimed first
// (lazy drivers compile pipelines on first use). Also reported: cold start (model open, weight
// upload, first token) and peak host memory. Everything runs one after the
// other in this process, so the figures compare side by side (f16 against
// compressed caches, CPU against Vulkan); compare ratios across machines.
// With --indexer, each depth's decode is timed once per indexer setting on
// the same filled cache (Backend::setIndexer), dense ("off") beside indexed.
#include <sys/resource.h>

#include <chrono>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "kv/kv_policy.h"
#include "runtime/backend_factory.h"
#include "runtime/kv_auto.h"

namespace kvscope::cli {
namespace {

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct BenchArgs {
  std::string model;
  uint32_t prefill = 512;
  uint32_t decode = 128;
  std::vector<uint32_t> depths = {0};
  std::vector<std::string> backends = {"cpu", "vulkan"};
  unsigned threads = 0;
  bool json = false;
  bool kernels = false;  // device time per kernel class of the prefill and of one decode step
  std::vector<std::string> kvPolicies = {"f16"};  // see policyOf()
  std::vector<std::string> indexers;              // --indexer settings; empty: the policy's own
};

struct Row {
  std::string backend;
  std::string indexer;  // the --indexer setting decode ran with ("" : the policy's own)
  uint32_t depth = 0;
  double prefillTps = 0, decodeTps = 0;
  double lastDecodeMs = 0;                     // wall time of the last decode step
  // Wall time of the decode step right after the prefill (a reply's second
  // token): under two_phase it first encodes every cached row again.
  double firstDecodeMs = 0;
  std::vector<backend::KernelTiming> kernels;  // its device time by kernel class
  std::vector<backend::KernelTiming> prefillKernels;  // the prefill's
};

// " matvec 1.46 ms (113; 1.31e+03 MB at 897 GB/s, 1.79e+03 GFLOP/s)," per kernel class:
// the roofline figures of the traffic and arithmetic the kernels declare.
std::string kernelBreakdown(const std::vector<backend::KernelTiming>& kernels) {
  std::string out;
  for (const auto& k : kernels) {
    out += fmt::format(" {} {:.2f} ms ({}", k.kernelClass, k.ms, k.dispatches);
    const double s = k.ms * 1e-3;
    if (k.bytes > 0 && s > 0)
      out += fmt::format("; {:.3g} MB at {:.3g} GB/s", k.bytes * 1e-6, k.bytes * 1e-9 / s);
    if (k.flops > 0 && s > 0) out += fmt::format(", {:.3g} GFLOP/s", k.flops * 1e-9 / s);
    out += "),";
  }
  if (!out.empty()) out.pop_back();
  return out;
}

nlohmann::json kernelJson(const std::vector<backend::KernelTiming>& kernels) {
  auto out = nlohmann::json::array();
  for (const auto& k : kernels)
    out.push_back({{"class", k.kernelClass},
                   {"ms", k.ms},
                   {"dispatches", k.dispatches},
                   {"bytes", k.bytes},
                   {"flops", k.flops}});
  return out;
}

std::vector<int32_t> benchTokens(uint32_t n, uint32_t vocab, uint32_t salt) {
  std::vector<int32_t> t(n);
  for (uint32_t i = 0; i < n; ++i)
    t[i] = static_cast<int32_t>((uint64_t{i} * 7919 + salt * 104729 + 3) % vocab);
  return t;
}

// Times a decode of a.decode tokens, one by one, into `row`.
Status timeDecode(backend::Backend& b, const BenchArgs& a, Row& row) {
  if (a.decode == 0) return okStatus();
  backend::Logits logits;
  const auto tokens = benchTokens(a.decode, b.config().nVocab, 3);
  const auto t0 = Clock::now();
  auto step = Clock::now();
  for (int32_t t : tokens) {
    step = Clock::now();
    KVS_TRY(b.forward({std::span(&t, 1)}, logits));
  }
  row.lastDecodeMs = secondsSince(step) * 1e3;
  row.decodeTps = a.decode / secondsSince(t0);
  row.kernels = b.kernelTimings();
  return okStatus();
}

// Back to `depth` cached tokens: a trim or, where the sliding-window layers
// no longer hold what token `depth` sees, the fill again.
Status rewind(backend::Backend& b, uint32_t depth) {
  if (depth == 0 || depth >= b.trimFloor()) return b.trim(depth);
  KVS_TRY(b.trim(0));
  backend::Logits logits;
  return b.forward({benchTokens(depth, b.config().nVocab, 1)}, logits);
}

// Times one depth: fill to `depth`, prefill, trim back, then per indexer
// setting decode one by one and trim back.
Expected<std::vector<Row>> benchDepth(backend::Backend& b, const BenchArgs& a, uint32_t depth) {
  Row first;
  first.depth = depth;
  const uint32_t vocab = b.config().nVocab;
  backend::Logits logits;
  KVS_TRY(b.trim(0));
  if (depth > 0) KVS_TRY(b.forward({benchTokens(depth, vocab, 1)}, logits));
  if (a.prefill > 0) {
    const auto tokens = benchTokens(a.prefill, vocab, 2);
    const auto t0 = Clock::now();
    KVS_TRY(b.forward({tokens}, logits));
    first.prefillTps = a.prefill / secondsSince(t0);
    first.prefillKernels = b.kernelTimings();  // of the prefill's last chunk
    const int32_t next = 1;
    const auto t1 = Clock::now();
    KVS_TRY(b.forward({std::span(&next, 1)}, logits));
    first.firstDecodeMs = secondsSince(t1) * 1e3;
    KVS_TRY(rewind(b, depth));
  }
  // One untimed step at this depth first: a driver that builds pipelines on
  // first use (NVIDIA's, lavapipe) would otherwise build the split-attention
  // ones (first used past 64 rows) inside the first timed depth; on an H200
  // that halved its decode figure (depth 2048: 232.8 tok/s, 4096: 450.2).
  const int32_t warm = 1;
  KVS_TRY(b.forward({std::span(&warm, 1)}, logits));
  KVS_TRY(rewind(b, depth));
  const kv::IndexerOptions own = b.indexer();
  std::vector<Row> rows;
  for (size_t i = 0; i < std::max<size_t>(a.indexers.size(), 1); ++i) {
    Row row = first;
    if (!a.indexers.empty()) {
      row.indexer = a.indexers[i];
      kv::IndexerOptions options = own;
      KVS_TRY(kv::IndexerOptions::parseInto(row.indexer, options));
      KVS_TRY(b.setIndexer(options));
    }
    KVS_TRY(timeDecode(b, a, row));
    KVS_TRY(rewind(b, depth));
    rows.push_back(std::move(row));
  }
  KVS_TRY(b.setIndexer(own));
  return rows;
}

long peakRssMiB() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024;
}

// "f16" is shorthand for the plain f16 cache and a bare scheme name X for
// k=X,v=X; anything else (auto[:BITS] included) is a full --kv-policy text.
Expected<kv::KvPolicy> policyOf(const std::string& kv) {
  if (kv == "f16") return kv::KvPolicy{};
  if (kv.find('=') == std::string::npos && !kv.starts_with("auto"))
    return kv::KvPolicy::parse(fmt::format("k={},v={}", kv, kv));
  return sessionlessPolicy(kv);
}

struct BenchOutput {
  nlohmann::json results = nlohmann::json::array();
  std::vector<std::string> lines, breakdown;
};

// Loads the model on one backend with one KV policy and times every depth.
Status benchBackend(const BenchArgs& a, const GlobalOptions& global, const std::string& kind,
                    const std::string& kv, BenchOutput& out) {
  const auto t0 = Clock::now();
  KVS_ASSIGN_OR_RETURN(auto file, openModelOrDemo(a.model));
  std::shared_ptr<const model::ModelFile> m(std::move(file));
  uint32_t maxDepth = 0;
  for (uint32_t d : a.depths) maxDepth = std::max(maxDepth, d);
  // A depth holds its prefill and the step after it, or its decode.
  const uint32_t ctx =
      std::max(m->config().contextLength, maxDepth + std::max(a.prefill + 1, a.decode));
  // Without per-dispatch timestamps: they are for the throughput panel and
  // cost about a fifth of decode speed on lavapipe. No device vetting: bench
  // measures the backend it is told to, and its cold start must not include
  // the vetting run.
  KVS_ASSIGN_OR_RETURN(const kv::KvPolicy policy, policyOf(kv));
  runtime::BackendChoice choice{.kind = kind,
                                .contextLimit = ctx,
                                .device = global.device,
                                .threads = a.threads,
                                .timing = a.kernels,
                                .timingEvery = 1,  // the prefill and the last step themselves
                                .kvPolicy = policy,
                                .vetDevice = false};
  auto b = runtime::makeBackend(m, choice);
  if (!b.ok()) {
    return makeError(b.error().code, "{} backend: {}", kind, b.error().message);
  }
  backend::Logits logits;
  // An auto policy measures a calibration prefill of bench tokens in f16 and
  // is timed under the schemes it chose.
  std::string label = kv;
  if (policy.autoBits) {
    const uint32_t n = std::min(kv::kAutoCalibrationTokens, ctx);
    const auto calibration = benchTokens(n, m->config().nVocab, 5);
    KVS_TRY((*b)->forward({calibration}, logits));
    const runtime::BackendFactory factory = runtime::makeBackendFactory(m, choice);
    KVS_ASSIGN_OR_RETURN(
        runtime::AutoChoice chosen,
        runtime::chooseAutoPolicy(**b, policy, {.factory = &factory, .tokens = calibration}));
    label = kv + " (" + chosen.policy.toString() + ")";
    choice.kvPolicy = chosen.policy;
    b = runtime::makeBackend(m, choice);
    if (!b.ok()) return makeError(b.error().code, "{} backend: {}", kind, b.error().message);
  }
  const int32_t first = 1;
  KVS_TRY((*b)->forward({std::span(&first, 1)}, logits));
  const double coldStart = secondsSince(t0);
  // Warm-up, not timed: lazy drivers (lavapipe) compile each pipeline on its
  // first dispatch; a short prefill and decode reach every kernel once.
  const auto warm =
      benchTokens(std::min<uint32_t>(16, std::max<uint32_t>(a.prefill, 2)), m->config().nVocab, 4);
  KVS_TRY((*b)->forward({warm}, logits));
  KVS_TRY((*b)->forward({std::span(&first, 1)}, logits));
  for (uint32_t d : a.depths) {
    KVS_ASSIGN_OR_RETURN(const std::vector<Row> rows, benchDepth(**b, a, d));
    for (const Row& row : rows) {
      const std::string rowLabel = row.indexer.empty() ? label : label + " idx " + row.indexer;
      out.results.push_back(
          {{"backend", kind},
           {"kv", kv},
           {"kv_label", label},
           {"indexer", row.indexer.empty() ? (*b)->indexer().selectionText() : row.indexer},
           {"model", m->config().name},
           {"depth", d},
           {"prefill_tokens", a.prefill},
           {"prefill_tps", row.prefillTps},
           {"decode_tokens", a.decode},
           {"decode_tps", row.decodeTps},
           {"first_decode_ms", row.firstDecodeMs},
           {"cold_start_s", coldStart},
           {"peak_rss_mib", peakRssMiB()}});
      out.lines.push_back(
          fmt::format("| {:<7} | {:<18} | {:>6} | {:>12.1f} | {:>11.1f} | {:>11.2f} | {:>11.2f} "
                      "| {:>13} |",
                      kind, rowLabel, d, row.prefillTps, row.decodeTps, row.firstDecodeMs,
                      coldStart, peakRssMiB()));
      if (a.kernels && !row.kernels.empty()) {
        double device = 0;
        for (const auto& k : row.kernels) device += k.ms;
        out.breakdown.push_back(fmt::format(
            "    {} {} depth {}: last decode step {:.2f} ms wall, {:.2f} ms on the device:{}", kind,
            rowLabel, d, row.lastDecodeMs, device, kernelBreakdown(row.kernels)));
        out.results.back()["kernels"] = kernelJson(row.kernels);
      }
      if (a.kernels && !row.prefillKernels.empty()) {
        double device = 0;
        for (const auto& k : row.prefillKernels) device += k.ms;
        out.breakdown.push_back(fmt::format(
            "    {} {} depth {}: prefill (its last forward chunk), {:.2f} ms on the device:{}",
            kind, rowLabel, d, device, kernelBreakdown(row.prefillKernels)));
        out.results.back()["prefill_kernels"] = kernelJson(row.prefillKernels);
      }
    }
  }
  return okStatus();
}

int runBench(const BenchArgs& a, const GlobalOptions& global) {
  BenchOutput out;
  for (const auto& kind : a.backends) {
    for (const auto& kv : a.kvPolicies) {
      if (auto s = benchBackend(a, global, kind, kv, out); !s.ok()) {
        fmt::print(stderr, "error: {}\n", s.error().message);
        return 1;
      }
    }
  }
  const auto& results = out.results;
  if (a.json) {
    fmt::print("{}\n", results.dump(2));
    return 0;
  }
  fmt::print("model: {}  prefill {} tokens, decode {} tokens\n\n",
             a.model.empty() ? std::string("the demo model") : a.model, a.prefill, a.decode);
  fmt::print(
      "| backend | KV cache           | depth  | prefill t/s  | decode t/s  | 1st step ms | cold "
      "start s| peak RSS MiB  |\n");
  fmt::print(
      "|---------|--------------------|--------|--------------|-------------|-------------|-------"
      "------|---------------|\n");
  for (const auto& l : out.lines) fmt::print("{}\n", l);
  for (const auto& l : out.breakdown) fmt::print("{}\n", l);
  return 0;
}

}  // namespace

void registerBench(CLI::App& app, const GlobalOptions& global, int& exitCode) {
  static BenchArgs args;
  auto* cmd = app.add_subcommand(
      "bench", "Measure prefill and decode tokens/s per backend and context depth");
  addModelPathOption(cmd, args.model);
  cmd->add_option("-p,--n-prompt", args.prefill, "Prefill tokens to time")
      ->default_val(args.prefill);
  cmd->add_option("-n,--n-gen", args.decode, "Decode tokens to time")->default_val(args.decode);
  cmd->add_option("--ctx,-d,--depth", args.depths, "Context depths, comma-separated")
      ->delimiter(',');
  cmd->add_option("--backend", args.backends, "Backends, comma-separated (cpu, vulkan)")
      ->delimiter(',')
      ->check(CLI::IsMember({"cpu", "vulkan"}));
  cmd->add_option("--threads", args.threads, "CPU threads (default: all)");
  cmd->add_option("--kv", args.kvPolicies,
                  "KV cache to bench, repeatable: f16, a scheme name for K and V, or a "
                  "--kv-policy text (default: f16)");
  cmd->add_option("--indexer", args.indexers,
                  "Indexer settings to time decode with, comma-separated, on the same cache: "
                  "off or TOP_K[:WINDOW[:SINKS]] (default: the policy's own)")
      ->delimiter(',');
  cmd->add_flag("--json", args.json, "Print JSON");
  cmd->add_flag(
      "--kernels", args.kernels,
      "Time every GPU dispatch and print, per kernel class of the prefill and of a decode step, "
      "the "
      "device time, the bytes the kernels move and the GB/s and FLOP/s they reach (slower)");
  cmd->callback([&global, &exitCode] { exitCode = runBench(args, global); });
}

}  // namespace kvscope::cli
