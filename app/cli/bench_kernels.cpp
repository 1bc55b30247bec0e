// `kvscope-cli bench-kernels`: throughput of the weight kernels
// (gpu/weight_kernels.h) for every supported GGUF type on the selected device.
// matvec at a large square shape and at the shapes of a ~40M-parameter model
// (dim 512, FFN 1536), of Llama-3.2-1B (dim 2048, FFN 8192, vocabulary
// 128256), of a gpt-oss-20b expert (2880 x 2880) and of Gemma-3-4B (dim 2560,
// FFN 10240, vocabulary 262144); matmul (prefill) at n = 16, 64, 256 tokens. Each figure
// is the best of 3 runs of back-to-back dispatches separated by barriers, as
// in a forward step: wall-clock time of the submission divided by the
// dispatches (per-dispatch timestamps would add their own cost on lavapipe).
// --matvec-wg/--matvec-rows sweep the GPU matvec's launch (gpu::MatvecLaunch).
#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "gguf/quantize.h"
#include "gpu/buffer.h"
#include "gpu/context.h"
#include "gpu/recorder.h"
#include "gpu/weight_kernels.h"

namespace kvscope::cli {
namespace {

using gguf::TensorType;

struct BenchType {
  TensorType type;
  const char* name;
};
constexpr BenchType kBenchTypes[] = {
    {TensorType::kF32, "F32"},     {TensorType::kF16, "F16"},   {TensorType::kBF16, "BF16"},
    {TensorType::kQ8_0, "Q8_0"},   {TensorType::kQ4_0, "Q4_0"}, {TensorType::kQ4_K, "Q4_K"},
    {TensorType::kQ5_K, "Q5_K"},   {TensorType::kQ6_K, "Q6_K"}, {TensorType::kIQ4_XS, "IQ4_XS"},
    {TensorType::kMXFP4, "MXFP4"},
};

std::vector<std::string> typeNames() {
  std::vector<std::string> names;
  for (const BenchType& bt : kBenchTypes) names.emplace_back(bt.name);
  return names;
}

// experts > 0: a decode step's expert product, `used` experts of a stack of
// `experts` (each rows x cols) on one token's input.
struct Shape {
  uint32_t n, rows, cols;
  uint32_t experts = 0, used = 0;
};
constexpr Shape kShapes[] = {
    // matvec
    {1, 4096, 4096},
    {1, 512, 512},
    {1, 1536, 512},
    {1, 512, 1536},
    // matvec, Llama-3.2-1B
    {1, 2048, 2048},
    {1, 8192, 2048},
    {1, 2048, 8192},
    {1, 128256, 2048},
    // matvec, gpt-oss-20b and Gemma-3-4B
    {1, 2880, 2880},
    {1, 10240, 2560},
    {1, 2560, 10240},
    {1, 262144, 2560},
    // gpt-oss-20b's experts: 4 of 32
    {1, 2880, 2880, 32, 4},
    // matmul
    {16, 1536, 512},
    {64, 1536, 512},
    {256, 1536, 512},
};

// Row products per call: the tokens, or the experts a token uses (an
// expert shape has one token).
uint32_t products(const Shape& s) {
  return s.experts ? s.used : s.n;
}

struct Result {
  std::string type;
  Shape shape;
  gpu::MatvecLaunch launch;
  double us = 0.0;  // per dispatch
  double weightBytes = 0.0;
};

// Device bytes of a random `rows` x `cols` tensor of `type`. Quantizing is
// slow on the CPU, so 64 quantized rows are repeated: timing needs valid
// blocks (finite scales), not distinct ones.
Expected<std::vector<uint8_t>> randomWeights(TensorType type, uint32_t rows, uint32_t cols) {
  const uint32_t seedRows = std::min(rows, 64u);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(size_t{seedRows} * cols);
  for (float& v : values) v = dist(rng);
  KVS_ASSIGN_OR_RETURN(auto raw, gguf::quantize(type, values));
  KVS_ASSIGN_OR_RETURN(auto seed, gpu::WeightKernels::repack(type, cols, raw));
  const uint64_t rowBytes = *gpu::WeightKernels::rowBytes(type, cols);
  std::vector<uint8_t> out((rows * rowBytes + 3) / 4 * 4);
  for (uint32_t r = 0; r < rows; ++r) {
    std::copy_n(seed.begin() + static_cast<ptrdiff_t>((r % seedRows) * rowBytes), rowBytes,
                out.begin() + static_cast<ptrdiff_t>(r * rowBytes));
  }
  return out;
}

Expected<Result> benchOne(gpu::Context& ctx, gpu::WeightKernels& wk, gpu::Recorder& rec,
                          const BenchType& bt, const Shape& s, uint32_t iters) {
  const uint32_t stacked = s.experts ? s.experts : 1;
  KVS_ASSIGN_OR_RETURN(auto weights, randomWeights(bt.type, s.rows * stacked, s.cols));
  std::vector<float> x(size_t{s.n} * s.cols, 0.5f);
  KVS_ASSIGN_OR_RETURN(auto wb, gpu::Buffer::create(ctx, weights.size()));
  KVS_ASSIGN_OR_RETURN(auto xb, gpu::Buffer::create(ctx, x.size() * sizeof(float)));
  KVS_ASSIGN_OR_RETURN(auto yb,
                       gpu::Buffer::create(ctx, size_t{products(s)} * s.rows * sizeof(float)));
  KVS_TRY(wb.upload(std::span<const uint8_t>(weights)));
  KVS_TRY(xb.upload(std::span<const float>(x)));
  // Experts spread over the stack: 0, experts / used, 2 experts / used, ...
  std::vector<uint32_t> ids(std::max(s.used, 1u));
  for (uint32_t i = 0; i < ids.size(); ++i) ids[i] = i * stacked / ids.size();
  KVS_ASSIGN_OR_RETURN(auto idb, gpu::Buffer::create(ctx, ids.size() * sizeof(uint32_t)));
  KVS_TRY(idb.upload(std::span<const uint32_t>(ids)));
  const gpu::BufferRange idRange(idb);
  const gpu::ExpertRouting routing{&idRange, nullptr, 1, s.used, s.experts, true};

  // The bytes a product reads: the chosen experts' rows only.
  const double read = static_cast<double>(weights.size()) / stacked * std::max(s.used, 1u);
  Result result{bt.name, s, wk.matvecLaunch(s.cols), 1e30, read};
  for (int run = 0; run < 4; ++run) {  // the first run compiles lavapipe's shader
    const uint32_t count = run == 0 ? 1 : iters;
    KVS_TRY(rec.begin());
    for (uint32_t i = 0; i < count; ++i) {
      if (i) rec.barrier();
      KVS_TRY(s.experts  ? wk.expertMatvec(rec, bt.type, wb, xb, yb, s.rows, s.cols, routing)
              : s.n == 1 ? wk.matvec(rec, bt.type, wb, xb, yb, s.rows, s.cols)
                         : wk.matmul(rec, bt.type, wb, xb, yb, s.n, s.rows, s.cols));
    }
    const auto t0 = std::chrono::steady_clock::now();
    KVS_TRY(rec.submitAndWait());
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (run > 0) result.us = std::min(result.us, us / count);
  }
  return result;
}

int run(int device, uint32_t iters, const std::vector<std::string>& only, bool json,
        const std::vector<uint32_t>& sweepWg, const std::vector<uint32_t>& sweepRows) {
  gpu::ContextOptions options;
  options.device = device;
  auto ctx = gpu::Context::create(options);
  if (!ctx.ok()) {
    fmt::print(stderr, "error: {}\n", ctx.error().message);
    return 1;
  }
  auto rec = gpu::Recorder::create(**ctx, {.maxDispatches = iters + 1});
  if (!rec.ok()) {
    fmt::print(stderr, "error: {}\n", rec.error().message);
    return 1;
  }
  // The default (per-shape) launch, then each swept one (matvec shapes only).
  std::vector<std::optional<gpu::MatvecLaunch>> launches = {std::nullopt};
  const gpu::MatvecLaunch fallback;
  if (!sweepWg.empty() || !sweepRows.empty()) {
    for (uint32_t w : sweepWg.empty() ? std::vector<uint32_t>{fallback.workgroup} : sweepWg) {
      for (uint32_t r : sweepRows.empty() ? std::vector<uint32_t>{fallback.rows} : sweepRows)
        launches.push_back(gpu::MatvecLaunch{w, r});
    }
  }
  std::vector<Result> results;
  std::string shape;
  for (size_t l = 0; l < launches.size(); ++l) {
    gpu::WeightKernels wk(**ctx, gpu::WeightShape::kAuto, launches[l]);
    shape = gpu::weightShapeName(wk.shape());
    for (const BenchType& bt : kBenchTypes) {
      if (!only.empty() && std::find(only.begin(), only.end(), bt.name) == only.end()) continue;
      for (const Shape& s : kShapes) {
        if (l > 0 && s.n != 1) continue;
        // Rows that are not whole blocks of the type (gpt-oss's 2880 in a
        // 256-value type) are left out, as is a tensor larger than one binding
        // (lavapipe: 128 MiB), which the backend splits into row ranges.
        const auto rowBytes = gpu::WeightKernels::rowBytes(bt.type, s.cols);
        if (!rowBytes ||
            *rowBytes * s.rows * std::max(s.experts, 1u) > (*ctx)->limits().maxStorageBufferRange) {
          continue;
        }
        auto r = benchOne(**ctx, wk, **rec, bt, s, iters);
        if (!r.ok()) {
          fmt::print(stderr, "error: {} {}x{} n={}: {}\n", bt.name, s.rows, s.cols, s.n,
                     r.error().message);
          return 1;
        }
        results.push_back(*r);
      }
    }
  }
  if (json) {
    nlohmann::json out = {
        {"device", (*ctx)->info().name}, {"shape", shape}, {"results", nlohmann::json::array()}};
    for (const Result& r : results) {
      const double macs = static_cast<double>(products(r.shape)) * r.shape.rows * r.shape.cols;
      out["results"].push_back({{"type", r.type},
                                {"n", r.shape.n},
                                {"experts", r.shape.experts},
                                {"experts_used", r.shape.used},
                                {"rows", r.shape.rows},
                                {"cols", r.shape.cols},
                                {"matvec_wg", r.launch.workgroup},
                                {"matvec_rows", r.launch.rows},
                                {"us", r.us},
                                {"gmacs", macs / r.us * 1e-3},
                                {"weight_gbs", r.weightBytes / r.us * 1e-3},
                                {"tokens_per_s", r.shape.n / r.us * 1e6}});
    }
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  fmt::print("device {} | launch shape {} | {} dispatches per run, best of 3\n",
             (*ctx)->info().name, shape, iters);
  fmt::print("{:<6} {:>5} {:>12} {:>7} {:>11} {:>9} {:>12} {:>12}\n", "type", "n", "rows x cols",
             "wg/rows", "us/call", "G MAC/s", "weight GB/s", "tokens/s");
  for (const Result& r : results) {
    const double macs = static_cast<double>(products(r.shape)) * r.shape.rows * r.shape.cols;
    const std::string n = r.shape.experts ? fmt::format("{}/{}", r.shape.used, r.shape.experts)
                                          : fmt::format("{}", r.shape.n);
    const std::string launch =
        r.shape.n == 1 && shape != "cpu"
            ? fmt::format("{}/{}", r.launch.workgroup, r.launch.rows)
            : "-";
    fmt::print("{:<6} {:>5} {:>6}x{:<5} {:>7} {:>11.1f} {:>9.2f} {:>12.2f} {:>12.0f}\n", r.type, n,
               r.shape.rows, r.shape.cols, launch, r.us, macs / r.us * 1e-3,
               r.weightBytes / r.us * 1e-3, r.shape.n / r.us * 1e6);
  }
  return 0;
}

}  // namespace

void registerBenchKernels(CLI::App& app, const GlobalOptions& global, int& exitCode) {
  auto* cmd = app.add_subcommand("bench-kernels",
                                 "Measure the weight kernels (matvec, matmul) for every GGUF type");
  static uint32_t iters = 20;
  static bool json = false;
  static std::vector<std::string> types;
  cmd->add_option("--iters", iters, "Dispatches per timed run")->check(CLI::Range(1u, 4000u));
  cmd->add_option("--types", types, "Only these types")
      ->delimiter(',')
      ->check(CLI::IsMember(typeNames()));
  cmd->add_flag("--json", json, "Print JSON instead of a table");
  static std::vector<uint32_t> sweepWg, sweepRows;
  cmd->add_option("--matvec-wg", sweepWg, "Also time the GPU matvec at these workgroup sizes")
      ->delimiter(',')
      ->check(CLI::IsMember({32u, 64u, 128u, 256u, 512u}));
  cmd->add_option("--matvec-rows", sweepRows, "Also time the GPU matvec at these rows per group")
      ->delimiter(',')
      ->check(CLI::Range(1u, 16u));
  cmd->callback([&global, &exitCode] {
    exitCode = run(global.device, iters, types, json, sweepWg, sweepRows);
  });
}

}  // namespace kvscope::cli
