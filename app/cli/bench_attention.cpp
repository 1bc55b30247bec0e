// `kvscope-cli bench-attention`: time of the attention kernels
// (gpu/attention_kernels.h) for one layer over an f16 KV cache on the
// selected device: decode (one query token) at several context lengths and
// one prefill batch, plus writeKv. The default layer is a llama-8B one: 32
// query heads over 8 KV heads, head_dim 128. Each figure is the best of three
// runs of back-to-back calls separated by barriers, timed by GPU timestamps
// when the queue has them, else by the wall clock.
//
// With --kv, decode is timed instead over caches of each listed scheme (a
// name for K and V, or KEY/VALUE), side by side with the first one, e.g.
// --kv f16,q8_0,turbo4,q8_0/turbo3. The rows hold real codes (a pool of
// rows encoded by the CPU scheme, repeated). `turbo3w10` is turbo3 with
// 10 codes per 32-bit word instead of bit planes (gpu/kv_codec.h), to time
// that layout; its codes are random.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/float_convert.h"
#include "gpu/attention_kernels.h"
#include "gpu/buffer.h"
#include "gpu/context.h"
#include "gpu/kv_codec.h"
#include "gpu/recorder.h"
#include "kv/kv_scheme.h"

namespace kvscope::cli {
namespace {

struct BenchOptions {
  uint32_t heads = 32, kvHeads = 8, headDim = 128;
  std::vector<uint32_t> contexts{512, 2048, 8192};
  uint32_t prefill = 256;  // tokens of the prefill batch, starting at position 0
  uint32_t iters = 10;
  std::string shape = "auto";
  std::vector<std::string> kv;  // schemes to compare (decode only); empty: f16 table
  bool json = false;
};

struct Result {
  std::string what;  // "decode", "prefill", "kv_write"
  uint32_t n = 0, rows = 0;
  uint32_t splits = 0, groups = 0;
  double ms = 0.0;  // per call
};

// A one-layer cache holding `rows` random rows, in pages of rows/16 (rounded
// up to 64) so that every context fits the page-array binding.
struct BenchCache {
  gpu::KvPageLayout layout;
  std::vector<gpu::Buffer> pages;
  std::vector<const gpu::Buffer*> pointers;
};

Expected<BenchCache> makeCache(gpu::Context& ctx, const BenchOptions& o, uint32_t rows) {
  const uint32_t maxPages = gpu::AttentionKernels::kMaxPages;
  const uint32_t perPage = std::max(64u, (rows + maxPages - 1) / maxPages + 63) / 64 * 64;
  BenchCache c{gpu::KvPageLayout::f16(1, o.kvHeads, o.headDim, perPage), {}, {}};
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<uint16_t> halves(c.layout.pageBytes() / 2);
  for (uint16_t& h : halves) h = floatToFp16(dist(rng));
  for (uint32_t p = 0; p * perPage < rows; ++p) {
    KVS_ASSIGN_OR_RETURN(auto page, gpu::Buffer::create(ctx, c.layout.pageBytes()));
    KVS_TRY(page.upload(std::span<const uint16_t>(halves)));
    c.pages.push_back(std::move(page));
  }
  for (const gpu::Buffer& p : c.pages) c.pointers.push_back(&p);
  return c;
}

// A one-layer cache of `rows` rows whose K and V streams use `key` and
// `value`: every page holds the same image, built from a pool of rows
// encoded by the CPU schemes (random codes for turbo3w10).
struct CodecCache {
  BenchCache cache;
  std::vector<gpu::Buffer> rotations;  // cache.layout.streams point into it
};

Expected<std::unique_ptr<CodecCache>> makeCodecCache(gpu::Context& ctx, const BenchOptions& o,
                                                     uint32_t rows, const std::string& key,
                                                     const std::string& value) {
  constexpr uint32_t kPool = 64;
  const uint32_t maxPages = gpu::AttentionKernels::kMaxPages;
  const uint32_t perPage = std::max(64u, (rows + maxPages - 1) / maxPages + 63) / 64 * 64;
  auto c = std::make_unique<CodecCache>();
  c->cache.layout = gpu::KvPageLayout::f16(1, o.kvHeads, o.headDim, perPage);
  c->rotations.reserve(2);
  std::vector<std::vector<uint8_t>> pool(2);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (uint32_t part = 0; part < 2; ++part) {
    const std::string& name = part == 0 ? key : value;
    gpu::KvStream& stream = c->cache.layout.streams[part];
    KVS_ASSIGN_OR_RETURN(stream.codec, gpu::kvCodecFor(name));
    const bool w10 = stream.codec == gpu::KvCodec::kTurbo3w10;
    KVS_ASSIGN_OR_RETURN(auto scheme, kv::makeScheme(w10 ? "turbo3" : name,
                                                     {o.headDim, kv::streamSeed(1, 0, part)}));
    if (scheme->rotated()) {
      stream.codebook.assign(scheme->codebook().begin(), scheme->codebook().end());
      KVS_ASSIGN_OR_RETURN(auto r, gpu::uploadRotation(ctx, scheme->rotation()));
      c->rotations.push_back(std::move(r));
      stream.rotation = &c->rotations.back();
    }
    const uint32_t bytes = c->cache.layout.rowBytes(0, part);
    pool[part].resize(size_t{kPool} * bytes);
    std::vector<float> x(o.headDim);
    for (uint32_t r = 0; r < kPool; ++r) {
      uint8_t* row = &pool[part][size_t{r} * bytes];
      if (w10) {
        const uint16_t gamma = floatToFp16(1.0f);
        std::memcpy(row, &gamma, 2);
        for (uint32_t b = 4; b < bytes; b += 4) {
          const uint32_t word = static_cast<uint32_t>(rng()) & 0x3fffffffu;
          std::memcpy(row + b, &word, 4);
        }
        continue;
      }
      for (float& f : x) f = dist(rng);
      scheme->encode(x, {row, bytes});
    }
  }
  const gpu::KvPageLayout& layout = c->cache.layout;
  std::vector<uint8_t> image(layout.pageBytes());
  for (uint32_t part = 0; part < 2; ++part) {
    const uint32_t bytes = layout.rowBytes(0, part);
    for (uint32_t h = 0; h < o.kvHeads; ++h) {
      for (uint32_t r = 0; r < perPage; ++r) {
        std::memcpy(&image[layout.rowOffset(0, part, h, r)],
                    &pool[part][size_t{(r * 7 + h) % kPool} * bytes], bytes);
      }
    }
  }
  for (uint32_t p = 0; p * perPage < rows; ++p) {
    KVS_ASSIGN_OR_RETURN(auto page, gpu::Buffer::create(ctx, layout.pageBytes()));
    KVS_TRY(page.upload(image.data(), image.size()));
    c->cache.pages.push_back(std::move(page));
  }
  for (const gpu::Buffer& p : c->cache.pages) c->cache.pointers.push_back(&p);
  return c;
}

// Best per-call time of three runs of `iters` calls recorded by `record`.
template <typename Record>
Expected<double> timeCalls(gpu::Recorder& rec, uint32_t iters, Record&& record) {
  double best = 1e30;
  for (int run = 0; run < 4; ++run) {  // the first run compiles lavapipe's shaders
    const uint32_t count = run == 0 ? 1 : iters;
    KVS_TRY(rec.begin());
    for (uint32_t i = 0; i < count; ++i) {
      if (i) rec.barrier();
      KVS_TRY(record());
    }
    const auto t0 = std::chrono::steady_clock::now();
    KVS_TRY(rec.submitAndWait());
    const double wallMs =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const double ms = rec.timingEnabled() ? rec.lastGpuMs() : wallMs;
    if (run > 0) best = std::min(best, ms / count);
  }
  return best;
}

Expected<Result> benchAttend(gpu::Context& ctx, gpu::AttentionKernels& att, gpu::Recorder& rec,
                             const BenchOptions& o, uint32_t n, uint32_t rows) {
  KVS_ASSIGN_OR_RETURN(BenchCache cache, makeCache(ctx, o, rows));
  const size_t floats = size_t{n} * o.heads * o.headDim;
  std::vector<float> q(floats);
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& x : q) x = dist(rng);
  KVS_ASSIGN_OR_RETURN(auto qb, gpu::Buffer::create(ctx, floats * sizeof(float)));
  KVS_ASSIGN_OR_RETURN(auto out, gpu::Buffer::create(ctx, floats * sizeof(float)));
  KVS_TRY(qb.upload(std::span<const float>(q)));
  KVS_ASSIGN_OR_RETURN(auto scratch, att.makeScratch(cache.layout, o.heads, n, rows));
  const uint32_t pos0 = rows - n;
  const gpu::AttentionPlan plan = att.plan(cache.layout, o.heads, n, pos0);
  KVS_ASSIGN_OR_RETURN(double ms, timeCalls(rec, o.iters, [&] {
                         return att.attend(rec, cache.layout, cache.pointers, 0, qb, out, n, pos0,
                                           o.heads, scratch);
                       }));
  return Result{n == 1 ? "decode" : "prefill", n, rows, plan.splits, plan.groups, ms};
}

// Decode time (one query token over `rows` rows) for each K/V scheme pair.
Expected<double> benchCodecDecode(gpu::Context& ctx, gpu::AttentionKernels& att, gpu::Recorder& rec,
                                  const BenchOptions& o, uint32_t rows, const std::string& key,
                                  const std::string& value) {
  KVS_ASSIGN_OR_RETURN(auto cache, makeCodecCache(ctx, o, rows, key, value));
  const gpu::KvPageLayout& layout = cache->cache.layout;
  const size_t floats = size_t{o.heads} * o.headDim;
  std::vector<float> q(floats);
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& x : q) x = dist(rng);
  KVS_ASSIGN_OR_RETURN(auto qb, gpu::Buffer::create(ctx, floats * sizeof(float)));
  KVS_ASSIGN_OR_RETURN(auto out, gpu::Buffer::create(ctx, floats * sizeof(float)));
  KVS_TRY(qb.upload(std::span<const float>(q)));
  KVS_ASSIGN_OR_RETURN(auto scratch, att.makeScratch(layout, o.heads, 1, rows));
  return timeCalls(rec, o.iters, [&] {
    return att.attend(rec, layout, cache->cache.pointers, 0, qb, out, 1, rows - 1, o.heads,
                      scratch);
  });
}

// The --kv table: decode ms per context (rows) and scheme, with the ratio to
// the first scheme.
int runCodecs(gpu::Context& ctx, gpu::AttentionKernels& att, gpu::Recorder& rec,
              const BenchOptions& o) {
  std::vector<std::vector<double>> ms(o.contexts.size(), std::vector<double>(o.kv.size()));
  for (size_t s = 0; s < o.kv.size(); ++s) {
    const std::string& label = o.kv[s];
    const size_t slash = label.find('/');
    const std::string key = label.substr(0, slash);
    const std::string value = slash == std::string::npos ? key : label.substr(slash + 1);
    for (size_t c = 0; c < o.contexts.size(); ++c) {
      auto r = benchCodecDecode(ctx, att, rec, o, o.contexts[c], key, value);
      if (!r.ok()) {
        fmt::print(stderr, "error: {}: {}\n", label, r.error().message);
        return 1;
      }
      ms[c][s] = *r;
    }
  }
  if (o.json) {
    nlohmann::json out = {
        {"device", ctx.info().name}, {"shape", gpu::attentionShapeName(att.shape())},
        {"heads", o.heads},          {"kv_heads", o.kvHeads},
        {"head_dim", o.headDim},     {"results", nlohmann::json::array()}};
    for (size_t c = 0; c < o.contexts.size(); ++c) {
      for (size_t s = 0; s < o.kv.size(); ++s)
        out["results"].push_back({{"kv", o.kv[s]}, {"rows", o.contexts[c]}, {"ms", ms[c][s]}});
    }
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  fmt::print(
      "device {} | launch shape {} | {} heads, {} KV heads, head_dim {} | decode ms/call, best of "
      "3 runs of {} calls (x: relative to {})\n",
      ctx.info().name, gpu::attentionShapeName(att.shape()), o.heads, o.kvHeads, o.headDim, o.iters,
      o.kv[0]);
  fmt::print("{:>7}", "rows");
  for (const std::string& label : o.kv) fmt::print(" {:>20}", label);
  fmt::print("\n");
  for (size_t c = 0; c < o.contexts.size(); ++c) {
    fmt::print("{:>7}", o.contexts[c]);
    for (size_t s = 0; s < o.kv.size(); ++s)
      fmt::print(" {:>20}", fmt::format("{:.3f} ({:.2f}x)", ms[c][s], ms[c][s] / ms[c][0]));
    fmt::print("\n");
  }
  return 0;
}

Expected<Result> benchWriteKv(gpu::Context& ctx, gpu::AttentionKernels& att, gpu::Recorder& rec,
                              const BenchOptions& o, uint32_t n) {
  KVS_ASSIGN_OR_RETURN(BenchCache cache, makeCache(ctx, o, n));
  const size_t floats = size_t{n} * o.kvHeads * o.headDim;
  std::vector<float> values(floats, 0.25f);
  KVS_ASSIGN_OR_RETURN(auto k, gpu::Buffer::create(ctx, floats * sizeof(float)));
  KVS_ASSIGN_OR_RETURN(auto v, gpu::Buffer::create(ctx, floats * sizeof(float)));
  KVS_TRY(k.upload(std::span<const float>(values)));
  KVS_TRY(v.upload(std::span<const float>(values)));
  KVS_ASSIGN_OR_RETURN(double ms, timeCalls(rec, o.iters, [&] {
                         return att.writeKv(rec, cache.layout, cache.pointers, 0, k, v, n, 0);
                       }));
  return Result{"kv_write", n, n, 0, 0, ms};
}

int run(int device, const BenchOptions& o) {
  if (o.kvHeads == 0 || o.heads % o.kvHeads != 0) {
    fmt::print(stderr, "error: --heads must be a multiple of --kv-heads\n");
    return 1;
  }
  gpu::ContextOptions options;
  options.device = device;
  auto ctx = gpu::Context::create(options);
  if (!ctx.ok()) {
    fmt::print(stderr, "error: {}\n", ctx.error().message);
    return 1;
  }
  const auto shape = o.shape == "cpu"   ? gpu::AttentionShape::kCpu
                     : o.shape == "gpu" ? gpu::AttentionShape::kGpu
                                        : gpu::AttentionShape::kAuto;
  gpu::AttentionKernels att(**ctx, shape);
  auto rec = gpu::Recorder::create(**ctx, {.maxDispatches = 3 * o.iters + 3, .timing = true});
  if (!rec.ok()) {
    fmt::print(stderr, "error: {}\n", rec.error().message);
    return 1;
  }
  if (!o.kv.empty()) return runCodecs(**ctx, att, **rec, o);
  std::vector<Expected<Result>> runs;
  for (uint32_t rows : o.contexts) runs.push_back(benchAttend(**ctx, att, **rec, o, 1, rows));
  if (o.prefill) {
    runs.push_back(benchAttend(**ctx, att, **rec, o, o.prefill, o.prefill));
    runs.push_back(benchWriteKv(**ctx, att, **rec, o, o.prefill));
  }
  runs.push_back(benchWriteKv(**ctx, att, **rec, o, 1));
  std::vector<Result> results;
  for (auto& r : runs) {
    if (!r.ok()) {
      fmt::print(stderr, "error: {}\n", r.error().message);
      return 1;
    }
    results.push_back(*r);
  }
  // The cached K and V bytes per call time. A shape that recomputes the
  // scores in its second pass reads K twice, so moves more than this.
  auto decodeGbs = [&](const Result& r) {
    return 2.0 * o.kvHeads * r.rows * gpu::KvPageLayout::f16(1, 1, o.headDim, 1).rowBytes(0, 0) /
           (r.ms * 1e6);
  };
  if (o.json) {
    nlohmann::json out = {{"device", (*ctx)->info().name},
                          {"shape", gpu::attentionShapeName(att.shape())},
                          {"heads", o.heads},
                          {"kv_heads", o.kvHeads},
                          {"head_dim", o.headDim},
                          {"results", nlohmann::json::array()}};
    for (const Result& r : results) {
      out["results"].push_back({{"kernel", r.what},
                                {"n", r.n},
                                {"rows", r.rows},
                                {"splits", r.splits},
                                {"groups", r.groups},
                                {"ms", r.ms}});
    }
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  fmt::print(
      "device {} | launch shape {} | {} heads, {} KV heads, head_dim {} | best of 3 runs of {} "
      "calls\n",
      (*ctx)->info().name, gpu::attentionShapeName(att.shape()), o.heads, o.kvHeads, o.headDim,
      o.iters);
  fmt::print("{:<9} {:>5} {:>7} {:>7} {:>7} {:>10} {:>12}\n", "kernel", "n", "rows", "splits",
             "groups", "ms/call", "KV GB/s");
  for (const Result& r : results) {
    const std::string rate = r.what == "decode" ? fmt::format("{:.2f}", decodeGbs(r)) : "-";
    fmt::print("{:<9} {:>5} {:>7} {:>7} {:>7} {:>10.3f} {:>12}\n", r.what, r.n, r.rows, r.splits,
               r.groups, r.ms, rate);
  }
  return 0;
}

}  // namespace

void registerBenchAttention(CLI::App& app, const GlobalOptions& global, int& exitCode) {
  auto* cmd = app.add_subcommand(
      "bench-attention", "Measure the attention kernels (decode, prefill, KV write) for one layer");
  static BenchOptions options;
  cmd->add_option("--heads", options.heads, "Query heads")->check(CLI::Range(1u, 256u));
  cmd->add_option("--kv-heads", options.kvHeads, "KV heads")->check(CLI::Range(1u, 256u));
  cmd->add_option("--head-dim", options.headDim, "Head dimension")->check(CLI::Range(1u, 512u));
  cmd->add_option("--contexts", options.contexts, "Decode context lengths (rows)")
      ->delimiter(',')
      ->check(CLI::Range(1u, 1u << 20));
  cmd->add_option("--prefill", options.prefill, "Prefill batch at position 0 (0: none)")
      ->check(CLI::Range(0u, 4096u));
  cmd->add_option("--iters", options.iters, "Calls per timed run")->check(CLI::Range(1u, 1000u));
  cmd->add_option("--shape", options.shape, "Launch shape")
      ->check(CLI::IsMember({"auto", "cpu", "gpu"}));
  cmd->add_option("--kv", options.kv,
                  "Time decode over these KV schemes side by side (NAME or KEY/VALUE, e.g. "
                  "f16,q8_0,turbo4,q8_0/turbo3; turbo3w10: the 10-codes-per-word layout)")
      ->delimiter(',');
  cmd->add_flag("--json", options.json, "Print JSON instead of a table");
  cmd->callback([&global, &exitCode] { exitCode = run(global.device, options); });
}

}  // namespace kvscope::cli
