// CpuBackend with every KV scheme on stories260K: it runs, compressed caches
// stay close to the f16 cache, the rotated-space attention equals attention
// over decoded rows, and two-phase caching compresses at the first decode.
#include <algorithm>
#include <cmath>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backend/cpu_attention.h"
#include "backend/cpu_backend.h"
#include "kv/kv_scheme.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

constexpr int32_t kPrompt[] = {1, 403, 407, 261, 378, 429, 267, 400, 263, 9, 370, 290};

std::shared_ptr<const model::ModelFile> stories() {
  auto model = model::ModelFile::open(sharedFile("models/stories260K.gguf"));
  EXPECT_TRUE(model.ok()) << model.error().describe();
  return model.ok() ? std::shared_ptr<const model::ModelFile>(std::move(model).value()) : nullptr;
}

// The first 128 tokens of story-a.txt, as llama.cpp tokenized them for its
// recorded reference run.
std::vector<int32_t> storyTokens() {
  std::ifstream in(sharedFile("reference/stories260K.forced-f16.json"));
  auto tokens = nlohmann::json::parse(in)["prompt_tokens"].get<std::vector<int32_t>>();
  EXPECT_GE(tokens.size(), 128u);
  tokens.resize(std::min<size_t>(tokens.size(), 128));
  return tokens;
}

// Logits of every position: prefill of the first 8 tokens, then one token at a time.
std::vector<std::vector<float>> run(backend::Backend& b, std::span<const int32_t> prompt) {
  std::vector<std::vector<float>> out;
  backend::Logits logits;
  EXPECT_TRUE(b.forward({.tokens = prompt.first(8), .allLogits = true}, logits).ok());
  for (uint32_t r = 0; r < logits.rows; ++r)
    out.emplace_back(logits.row(r).begin(), logits.row(r).end());
  for (size_t i = 8; i < prompt.size(); ++i) {
    EXPECT_TRUE(b.forward({.tokens = prompt.subspan(i, 1)}, logits).ok());
    out.emplace_back(logits.last().begin(), logits.last().end());
  }
  return out;
}

std::unique_ptr<backend::CpuBackend> cpu(std::shared_ptr<const model::ModelFile> m,
                                         backend::CpuBackendOptions o = {}) {
  o.threads = 2;
  auto b = backend::CpuBackend::create(std::move(m), o);
  EXPECT_TRUE(b.ok()) << b.error().describe();
  return b.ok() ? std::move(b).value() : nullptr;
}

TEST(CpuKvSchemes, ExplicitF16IsTheDefault) {
  KVS_REQUIRE_FIXTURE(sharedFile("models/stories260K.gguf"));
  auto m = stories();
  const uint32_t nLayer = m->config().nLayer;
  auto a = cpu(m), b = cpu(m, {.kvSchemes = std::vector<kv::LayerSchemes>(nLayer), .kvSeed = 5});
  EXPECT_EQ(run(*a, kPrompt), run(*b, kPrompt));
}

// Each scheme against the f16 cache over 128 positions of a story: the relative
// RMS error of the K and V rows it stored (the backend's codec-error meter,
// averaged over layers), the mean |logit difference| (relative to the largest
// logit spread) and the positions whose argmax agrees. head_dim is 8 here, the hardest case for
// every codec (a block scale or a gamma per 8 values, Lloyd-Max codebooks for d = 8). Bounds: the
// measured row error with a 1.15x margin, the logit difference with 1.3x and 4 argmax positions,
// margins the scheme's own arithmetic does not move: the run is seeded and deterministic, and
// float32 differences between builds change these means in the third digit at most. The margins are
// tighter than the gaps between the schemes (q8_0 2.8e-3 vs fp8 8.4e-3; turbo4 4.0e-2 and 92 argmax
// vs turbo3 6.1e-2 and 55), so a codec that loses a bit of precision, drops a scale or rounds the
// wrong way fails: q8_0 truncating instead of rounding doubles its RMS row error (uniform error in
// [0, s) instead of [-s/2, s/2)). turbo*g equal turbo* here: one group of 16 coordinates covers the
// whole row of 8.
struct SchemeBound {
  const char* name;
  double rowError;     // measured x 1.15
  double meanRel;      // measured x 1.3
  size_t argmaxAgree;  // measured - 4, of 128
};
// Measured (row error, mean |logit diff|, argmax of 128): q8_0 0.0045, 2.8e-3,
// 128; fp8 0.0267, 8.4e-3, 123; affine4 0.0512, 2.52e-2, 100; q4_0 0.0729,
// 4.27e-2, 79; turbo4 0.0732, 4.01e-2, 92; turbo3 0.1439, 6.13e-2, 55; turbo2
// 0.2785, 7.72e-2, 35; turbo4b 0.0591, 3.41e-2, 103; turbo3b 0.1211, 5.05e-2,
// 64; turbo2b 0.2587, 7.47e-2, 33; q8_0r 0.0027, 1.4e-3, 127; q4_0r 0.0618,
// 3.12e-2, 105; fp8r 0.0263, 1.39e-2, 119; affine4r 0.0486, 2.93e-2, 112;
// turbo6b 0.0144, 9.3e-3, 124; turbo5b 0.0287, 1.78e-2, 119.
constexpr SchemeBound kBounds[] = {
    {"q8_0", 0.0052, 0.0037, 124},   {"fp8", 0.031, 0.011, 119},
    {"affine4", 0.059, 0.033, 96},   {"q4_0", 0.084, 0.056, 75},
    {"turbo4", 0.084, 0.052, 88},    {"turbo3", 0.166, 0.080, 51},
    {"turbo2", 0.32, 0.100, 31},     {"turbo4g", 0.084, 0.052, 88},
    {"turbo3g", 0.166, 0.080, 51},   {"turbo2g", 0.32, 0.100, 31},
    {"turbo4b", 0.068, 0.044, 99},   {"turbo3b", 0.139, 0.066, 60},
    {"turbo2b", 0.30, 0.097, 29},    {"q8_0r", 0.0031, 0.0018, 123},
    {"q4_0r", 0.071, 0.041, 101},    {"fp8r", 0.030, 0.018, 115},
    {"affine4r", 0.056, 0.038, 108}, {"turbo6b", 0.0166, 0.0121, 120},
    {"turbo5b", 0.033, 0.0231, 115},
};

TEST(CpuKvSchemes, EverySchemeStaysWithinItsMeasuredDistance) {
  KVS_REQUIRE_FIXTURE(sharedFile("models/stories260K.gguf"));
  KVS_REQUIRE_FIXTURE(sharedFile("reference/stories260K.forced-f16.json"));
  auto m = stories();
  const auto tokens = storyTokens();
  const auto reference = run(*cpu(m), tokens);
  double spread = 0;
  for (const auto& row : reference) {
    spread = std::max(spread, double{*std::max_element(row.begin(), row.end()) -
                                     *std::min_element(row.begin(), row.end())});
  }
  size_t checked = 0;
  for (auto name : kv::schemeNames()) {
    std::vector<kv::LayerSchemes> layers(m->config().nLayer,
                                         {std::string(name), std::string(name)});
    auto backend = cpu(m, {.kvSchemes = layers, .errorStride = 1});
    const auto got = run(*backend, tokens);
    ASSERT_EQ(got.size(), reference.size());
    double rowError = 0;
    for (const backend::KvLayerError& e : backend->kvErrors()) rowError += e.key + e.value;
    rowError /= 2.0 * m->config().nLayer;
    if (name == "f16") {
      EXPECT_EQ(got, reference);
      continue;
    }
    double sum = 0;
    size_t count = 0, agree = 0;
    for (size_t r = 0; r < got.size(); ++r) {
      for (size_t i = 0; i < got[r].size(); ++i, ++count)
        sum += std::fabs(got[r][i] - reference[r][i]);
      agree += std::max_element(got[r].begin(), got[r].end()) - got[r].begin() ==
               std::max_element(reference[r].begin(), reference[r].end()) - reference[r].begin();
    }
    const double mean = sum / static_cast<double>(count) / spread;
    std::printf("%-8s row error %.4f, mean |logit diff| %.4f of the spread, argmax %zu/%zu\n",
                std::string(name).c_str(), rowError, mean, agree, got.size());
    const auto bound = std::find_if(std::begin(kBounds), std::end(kBounds),
                                    [&](const SchemeBound& b) { return name == b.name; });
    ASSERT_NE(bound, std::end(kBounds)) << "no bound for the scheme " << name;
    EXPECT_LE(rowError, bound->rowError) << name;
    // And not far below it: a meter that stopped measuring would pass the bound.
    EXPECT_GE(rowError, 0.75 * bound->rowError) << name;
    EXPECT_LE(mean, bound->meanRel) << name;
    EXPECT_GE(agree, bound->argmaxAgree) << name;
    ++checked;
  }
  EXPECT_EQ(checked, std::size(kBounds));
}

// The backend's attention (cpu::attention) on rotated schemes, which scores in
// rotated space and rotates the V sum back once, equals textbook attention in
// double precision over the rows decoded back to model space (KvCache::read):
// rotation preserves dot products, so the two differ only by float32 rounding.
// Keys turbo3 and values turbo4g, head_dim 64, GQA 4, 37 cached rows, queries
// at the last 5 positions. Tolerance: float32 scores, softmax and sums over 37
// rows of O(1) values are good to ~1e-6 relative; 2e-5 of the output's scale
// (the largest |V| value) leaves margin, while a wrong rotation (R instead of
// R^T on the V sum, an unrotated query, a wrong seed) moves outputs by O(1).
TEST(CpuKvSchemes, RotatedAttentionMatchesDecodedRows) {
  constexpr uint32_t kHeadDim = 64, kHeadsKv = 2, kHeads = 8, kRows = 37, kQueries = 5;
  const kv::LayerSchemes schemes{"turbo3", "turbo4g"};
  auto made = kv::KvCache::create(kv::KvGeometry::uniform(1, kHeadsKv, kHeadDim, 16),
                                  std::span(&schemes, 1), 11);
  ASSERT_TRUE(made.ok()) << made.error().describe();
  kv::KvCache& cache = **made;
  ASSERT_TRUE(cache.scheme(0, kv::KvPart::kKey).rotated());
  ASSERT_TRUE(cache.append(kRows).ok());
  for (uint32_t j = 0; j < kRows; ++j) {
    for (uint32_t h = 0; h < kHeadsKv; ++h) {
      cache.write(0, kv::KvPart::kKey, h, j, randomFloats(kHeadDim, 100 + j * 7 + h, -2.0f, 2.0f));
      cache.write(0, kv::KvPart::kValue, h, j, randomFloats(kHeadDim, 900 + j * 7 + h));
    }
  }
  const auto q = randomFloats(size_t{kQueries} * kHeads * kHeadDim, 5, -2.0f, 2.0f);
  std::vector<float> got(q.size());
  ThreadPool pool(2);
  cpu::attention(cache, 0, q.data(), kQueries, kRows - kQueries, kHeads, pool, got.data());

  std::vector<float> k(kHeadDim), v(kHeadDim);
  double scale = 0;
  std::vector<double> want(q.size(), 0.0);
  for (uint32_t t = 0; t < kQueries; ++t) {
    const uint32_t visible = kRows - kQueries + t + 1;
    for (uint32_t h = 0; h < kHeads; ++h) {
      const uint32_t kvHead = h / (kHeads / kHeadsKv);
      const float* qh = &q[(size_t{t} * kHeads + h) * kHeadDim];
      std::vector<double> s(visible);
      double top = -INFINITY, sum = 0;
      for (uint32_t j = 0; j < visible; ++j) {
        cache.read(0, kv::KvPart::kKey, kvHead, j, k);
        for (uint32_t i = 0; i < kHeadDim; ++i) s[j] += double{qh[i]} * k[i];
        s[j] /= std::sqrt(double{kHeadDim});
        top = std::max(top, s[j]);
      }
      for (double& x : s) sum += (x = std::exp(x - top));
      double* o = &want[(size_t{t} * kHeads + h) * kHeadDim];
      for (uint32_t j = 0; j < visible; ++j) {
        cache.read(0, kv::KvPart::kValue, kvHead, j, v);
        for (uint32_t i = 0; i < kHeadDim; ++i) {
          o[i] += s[j] / sum * v[i];
          scale = std::max(scale, std::fabs(double{v[i]}));
        }
      }
    }
  }
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
  std::printf("rotated-space attention vs decoded rows: max |diff| %.2e of %.2f\n", worst, scale);
  EXPECT_LT(worst, 2e-5 * scale);
}

TEST(CpuKvSchemes, TwoPhaseCompressesAtFirstDecode) {
  KVS_REQUIRE_FIXTURE(sharedFile("models/stories260K.gguf"));
  auto m = stories();
  const uint32_t nLayer = m->config().nLayer;
  const std::vector<kv::LayerSchemes> layers(nLayer, {"q8_0", "turbo3"});
  auto twoPhase = cpu(m, {.kvSchemes = layers, .twoPhase = true});
  auto f16 = cpu(m);
  backend::Logits a, b;
  const std::vector<int32_t> prompt(kPrompt, kPrompt + 8);
  ASSERT_TRUE(twoPhase->forward({.tokens = prompt}, a).ok());
  ASSERT_TRUE(f16->forward({.tokens = prompt}, b).ok());
  EXPECT_EQ(a.values, b.values);  // prefill attends an f16 cache
  EXPECT_EQ(twoPhase->cache().scheme(0, kv::KvPart::kValue).name(), "f16");
  ASSERT_TRUE(twoPhase->forward({.tokens = std::span(&kPrompt[8], 1)}, a).ok());
  EXPECT_EQ(twoPhase->cache().scheme(0, kv::KvPart::kValue).name(), "turbo3");
  EXPECT_EQ(twoPhase->cache().rows(), 9u);
  // After the switch the prefilled rows hold exactly what encoding the f16
  // cache's (rounded) rows gives: re-encode them and compare.
  std::vector<float> row(m->config().headDim);
  const kv::KvCache& cache = twoPhase->cache();
  std::vector<uint8_t> bytes(cache.rowBytes(1, kv::KvPart::kKey));
  for (uint32_t r = 0; r < 8; ++r) {
    f16->cache().read(1, kv::KvPart::kKey, 0, r, row);
    cache.scheme(1, kv::KvPart::kKey).encode(row, bytes);
    const auto got = cache.row(1, kv::KvPart::kKey, 0, r);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), bytes.begin())) << r;
  }
}

// A prefill longer than a step runs as several, and a prompt may come in
// chunks of its own (Batch::prompt); a last step or chunk of one token is
// still prefill, not the first decode step.
TEST(CpuKvSchemes, TwoPhaseKeepsAPromptsLastOneTokenStepAtF16) {
  KVS_REQUIRE_FIXTURE(sharedFile("models/stories260K.gguf"));
  auto m = stories();
  const std::vector<kv::LayerSchemes> layers(m->config().nLayer, {"q8_0", "turbo3"});
  auto twoPhase = cpu(m, {.kvSchemes = layers, .twoPhase = true, .stepRows = 8});
  backend::Logits logits;
  ASSERT_TRUE(twoPhase->forward({.tokens = std::span(kPrompt, 9)}, logits).ok());
  EXPECT_EQ(twoPhase->cache().scheme(0, kv::KvPart::kValue).name(), "f16");
  ASSERT_TRUE(
      twoPhase->forward({.tokens = std::span(&kPrompt[9], 1), .prompt = true}, logits).ok());
  EXPECT_EQ(twoPhase->cache().scheme(0, kv::KvPart::kValue).name(), "f16");
  ASSERT_TRUE(twoPhase->forward({.tokens = std::span(&kPrompt[10], 1)}, logits).ok());
  EXPECT_EQ(twoPhase->cache().scheme(0, kv::KvPart::kValue).name(), "turbo3");
  EXPECT_EQ(twoPhase->cache().rows(), 11u);
}

}  // namespace
}  // namespace kvscope::test
