// The indexer on the CPU backend: a budget that covers every row is dense
// attention bit for bit; a smaller one attends the selection (sinks and
// window included) and reports it per step; the query heads of a GQA group
// share one selection that serves each of them; the captured mass is the
// softmax mass of dense attention on the selection.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "backend/cpu_backend.h"
#include "backend/cpu_indexer.h"
#include "kv/kv_index.h"
#include "kv/rotation.h"
#include "support/demo_model.h"
#include "support/test_support.h"

namespace kvscope {
namespace {

using kv::KvPart;
using test::openDemoModel;

// Logits of 300 tokens (a prefill of 200, then one by one), every step.
std::vector<std::vector<float>> decodeRun(backend::CpuBackend& b) {
  std::vector<int32_t> tokens(300);
  for (uint32_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(3 + (i * 37) % 500);
  std::vector<std::vector<float>> out;
  backend::Logits logits;
  EXPECT_TRUE(b.forward({std::span(tokens).first(200)}, logits).ok());
  for (uint32_t i = 200; i < tokens.size(); ++i) {
    EXPECT_TRUE(b.forward({std::span(tokens).subspan(i, 1)}, logits).ok());
    out.emplace_back(logits.last().begin(), logits.last().end());
  }
  return out;
}

TEST(CpuIndexer, ABudgetOfEveryRowIsDenseAttentionBitForBit) {
  const auto model = openDemoModel();
  ASSERT_TRUE(model);
  for (const char* key : {"f16", "q8_0"}) {
    const std::vector<kv::LayerSchemes> schemes(model->config().nLayer, {key, "turbo4"});
    auto dense = backend::CpuBackend::create(model, {.threads = 2, .kvSchemes = schemes});
    auto covered = backend::CpuBackend::create(
        model, {.threads = 2, .kvSchemes = schemes, .indexer = {.topK = 300}});
    auto sparse = backend::CpuBackend::create(
        model, {.threads = 2,
                .kvSchemes = schemes,
                .indexer = {.topK = 32, .window = 16, .denseLayers = 0}});
    ASSERT_TRUE(dense.ok() && covered.ok() && sparse.ok());
    const auto want = decodeRun(**dense), same = decodeRun(**covered), other = decodeRun(**sparse);
    for (size_t s = 0; s < want.size(); ++s) {
      ASSERT_EQ(0, std::memcmp(want[s].data(), same[s].data(), want[s].size() * sizeof(float)))
          << key << " step " << s;
    }
    EXPECT_NE(want.back(), other.back()) << "32 rows of 300 are not dense attention";
    // The last step's selection: 4 sinks, the 16-row window, two pages of 16.
    const backend::IndexerStep step = (*sparse)->indexerStep();
    ASSERT_EQ(step.rows, 300u);
    ASSERT_EQ(step.layers.size(), model->config().nLayer);
    for (const auto& layer : step.layers) {
      for (const auto& runs : layer.heads) {
        ASSERT_FALSE(runs.empty());
        EXPECT_EQ(runs.front().begin, 0u);
        EXPECT_GE(runs.front().end, 4u);
        EXPECT_EQ(runs.back().end, 300u);
        EXPECT_LE(runs.back().begin, 284u);
        EXPECT_LE(kv::rowCount(runs), 4u + 16u + 32u + 16u);
      }
      EXPECT_LT(layer.capturedMass, 0.0) << "not in diagnostic mode";
    }
  }
}

// The first denseLayers cache layers attend every row: with the default 2
// of the demo model's 4, layers 0 and 1 report no selection (every row) and
// layers 2 and 3 select; with all 4 dense the run is dense attention bit for
// bit, and keeping none dense changes the logits.
TEST(CpuIndexer, TheFirstLayersAttendEveryRow) {
  const auto model = openDemoModel();
  ASSERT_TRUE(model);
  const std::vector<kv::LayerSchemes> schemes(model->config().nLayer, {"f16", "turbo4"});
  const auto run = [&](std::optional<uint32_t> denseLayers) {
    kv::IndexerOptions indexer{.topK = 32, .window = 16};
    if (denseLayers) indexer.denseLayers = *denseLayers;
    auto b = backend::CpuBackend::create(model,
                                         {.threads = 2,
                                          .kvSchemes = schemes,
                                          .indexer = denseLayers ? indexer : kv::IndexerOptions{}});
    EXPECT_TRUE(b.ok());
    auto logits = decodeRun(**b);
    return std::make_pair(std::move(logits), (*b)->indexerStep());
  };
  ASSERT_EQ(kv::IndexerOptions{}.denseLayers, 2u);
  const auto [mixed, step] = run(2);
  ASSERT_EQ(step.layers.size(), 4u);
  for (uint32_t l = 0; l < 4; ++l) {
    for (const auto& runs : step.layers[l].heads) EXPECT_EQ(runs.empty(), l < 2) << "layer " << l;
  }
  const auto dense = run(std::nullopt).first, allDense = run(4).first, none = run(0).first;
  ASSERT_EQ(dense.size(), allDense.size());
  for (size_t s = 0; s < dense.size(); ++s) {
    ASSERT_EQ(0, std::memcmp(dense[s].data(), allDense[s].data(), dense[s].size() * sizeof(float)))
        << "step " << s;
  }
  EXPECT_NE(mixed.back(), dense.back());
  EXPECT_NE(mixed.back(), none.back());
}

// IndexerOptions::denseHeads: a listed KV head attends every row while the
// others of its layer select. Listing every head of every layer is dense
// attention bit for bit; listing one leaves its list empty (every row) and
// the others' not, and changes the logits against both extremes. A head the
// model does not have is refused. On the recall model: two KV heads per layer
// (the demo model has one).
TEST(CpuIndexer, ADenseHeadAttendsEveryRow) {
  const auto model = test::openBundledModel("kvscope-recall-4k.gguf");
  ASSERT_TRUE(model);
  const model::ModelConfig& c = model->config();
  const std::vector<kv::LayerSchemes> schemes(c.nLayer, {"f16", "turbo4"});
  const auto run = [&](std::vector<kv::KvHeadRef> denseHeads, bool indexer = true) {
    const kv::IndexerOptions options{
        .topK = 32, .window = 16, .denseLayers = 0, .denseHeads = std::move(denseHeads)};
    auto b = backend::CpuBackend::create(
        model,
        {.threads = 2, .kvSchemes = schemes, .indexer = indexer ? options : kv::IndexerOptions{}});
    EXPECT_TRUE(b.ok()) << b.error().message;
    auto logits = decodeRun(**b);
    return std::make_pair(std::move(logits), (*b)->indexerStep());
  };
  std::vector<kv::KvHeadRef> every;
  for (uint32_t l = 0; l < c.kvLayers(); ++l)
    for (uint32_t h = 0; h < c.headsKvOf(l); ++h) every.push_back({l, h});
  ASSERT_GE(c.headsKvOf(2), 2u);
  const auto dense = run({}, false).first, allHeads = run(every).first;
  const auto [one, step] = run({{2, 1}});
  const auto none = run({}).first;
  for (size_t s = 0; s < dense.size(); ++s) {
    ASSERT_EQ(0, std::memcmp(dense[s].data(), allHeads[s].data(), dense[s].size() * sizeof(float)))
        << "step " << s;
  }
  ASSERT_EQ(step.layers.size(), c.kvLayers());
  for (uint32_t l = 0; l < c.kvLayers(); ++l) {
    for (uint32_t h = 0; h < c.headsKvOf(l); ++h)
      EXPECT_EQ(step.layers[l].heads[h].empty(), l == 2 && h == 1)
          << "layer " << l << " head " << h;
  }
  EXPECT_NE(one.back(), dense.back());
  EXPECT_NE(one.back(), none.back());

  auto bad = backend::CpuBackend::create(
      model, {.threads = 2, .indexer = {.topK = 32, .denseHeads = {{2, c.headsKvOf(2)}}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find(fmt::format("layer 2 has KV heads 0-{}", c.headsKvOf(2) - 1)),
            std::string::npos)
      << bad.error().message;
}

// One KV head, two query heads: page 5 holds keys along query head 0,
// page 9 along query head 1, everything else is small. A budget of two
// pages must take both, each needed by one head only.
TEST(CpuIndexer, TheHeadsOfAGroupShareOneSelection) {
  constexpr uint32_t d = 16, rows = 400;
  const kv::LayerSchemes schemes{"f16", "f16"};
  auto made = kv::KvCache::create(kv::KvGeometry::uniform(1, 1, d, 256), std::span(&schemes, 1));
  ASSERT_TRUE(made.ok());
  kv::KvCache& cache = **made;
  const kv::IndexerOptions options{.topK = 32, .window = 8, .sinks = 0};
  cache.enableIndex(options);
  ASSERT_TRUE(cache.append(rows).ok());
  auto noise = test::randomFloats(size_t{rows} * d, 4, -0.1f, 0.1f);
  std::vector<float> q(2 * d, 0.0f);
  q[0] = 1.0f;       // head 0 looks along channel 0
  q[d + 1] = 1.0f;   // head 1 along channel 1
  for (uint32_t r = 0; r < rows; ++r) {
    std::vector<float> k(noise.begin() + size_t{r} * d, noise.begin() + size_t{r + 1} * d);
    if (r / 16 == 5) k[0] = 3.0f;
    if (r / 16 == 9) k[1] = 2.0f;
    cache.write(0, KvPart::kKey, 0, r, k);
    cache.write(0, KvPart::kValue, 0, r, k);
  }
  ThreadPool pool(2);
  cpu::LayerSelection selection;
  ASSERT_TRUE(cpu::selectLayerRows(cache, 0, q.data(), 2, options, pool, selection));
  ASSERT_EQ(selection.size(), 1u);
  const std::vector<kv::RowRun> want = {{80, 96}, {144, 160}, {392, 400}};
  EXPECT_EQ(selection[0], want);
}

// The AVX2 group scorers against the reference (KvIndex::scorePages per
// query, keeping the highest): the same scores up to float rounding of the sums.
TEST(CpuIndexer, TheFastGroupScorerEqualsTheReference) {
  for (uint32_t d : {64u, 128u, 80u, 8u}) {
    for (uint32_t nq : {1u, 4u, 11u}) {
      for (kv::PageScore kind : {kv::PageScore::kBounds, kv::PageScore::kMeanStd}) {
        const std::vector<kv::KvLayerShape> one = {{2, d}};
        kv::KvIndex index(one, 16, kind);
        const auto keys = test::randomFloats(size_t{300} * d, d + nq, -4.0f, 4.0f);
        for (uint32_t r = 0; r < 300; ++r) {
          std::vector<float> k(keys.begin() + size_t{r} * d, keys.begin() + size_t{r + 1} * d);
          for (float& v : k) v *= 1.0f + static_cast<float>(r % 7);
          index.add(0, 1, r, k.data());
        }
        const auto q = test::randomFloats(size_t{nq} * d, 3 * d + nq, -2.0f, 2.0f);
        const uint32_t pages = (300 + 15) / 16;
        std::vector<float> fast(pages), reference(pages);
        cpu::scoreGroupPages(index, 0, 1, q.data(), nq, pages, fast.data());
        cpu::scoreGroupPages(index, 0, 1, q.data(), nq, pages, reference.data(), true);
        for (uint32_t p = 0; p < pages; ++p) {
          // Each sum has 2d terms of |q_i| * |code| * 2^e: float rounding of 1e-5 of that.
          double scale = 0;
          for (uint32_t j = 0; j < nq; ++j)
            for (uint32_t i = 0; i < d; ++i) scale += std::fabs(q[size_t{j} * d + i]) * 8.0 * 127;
          ASSERT_NEAR(fast[p], reference[p], 1e-6 * scale)
              << "d " << d << " nq " << nq << " page " << p << " kind " << static_cast<int>(kind);
        }
      }
    }
  }
}

// The captured mass against a double-precision softmax over every stored key.
TEST(CpuIndexer, CapturedMassIsTheDenseSoftmaxMassOnTheSelection) {
  constexpr uint32_t d = 64, rows = 333, gqa = 2;
  for (const char* key : {"q8_0", "turbo3"}) {
    const kv::LayerSchemes schemes{key, "f16"};
    auto made = kv::KvCache::create(kv::KvGeometry::uniform(1, 2, d, 128), std::span(&schemes, 1));
    ASSERT_TRUE(made.ok());
    kv::KvCache& cache = **made;
    ASSERT_TRUE(cache.append(rows).ok());
    const auto x = test::randomFloats(size_t{rows} * 2 * d, 6, -2.0f, 2.0f);
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t h = 0; h < 2; ++h) {
        cache.write(0, KvPart::kKey, h, r, std::span(x).subspan((size_t{r} * 2 + h) * d, d));
        cache.write(0, KvPart::kValue, h, r, std::span(x).subspan((size_t{r} * 2 + h) * d, d));
      }
    const auto q = test::randomFloats(size_t{2} * gqa * d, 7, -2.0f, 2.0f);
    const cpu::LayerSelection selection = {{{0, 10}, {200, 260}}, {{300, 333}}};
    ThreadPool pool(2);
    const std::vector<double> got = cpu::capturedMass(cache, 0, q.data(), 2 * gqa, selection, pool);
    const kv::KvScheme& ks = cache.scheme(0, KvPart::kKey);
    std::vector<double> want(2, 0.0);  // per KV head
    std::vector<float> k(d), qr(d);
    for (uint32_t head = 0; head < 2 * gqa; ++head) {
      std::vector<float> qh(q.begin() + head * d, q.begin() + (head + 1) * d);
      if (ks.rotated()) {
        kv::rotateVector(ks.rotation(), qh, qr);
      } else {
        qr = qh;
      }
      std::vector<double> s(rows);
      for (uint32_t r = 0; r < rows; ++r) {
        cache.readRotated(0, KvPart::kKey, head / gqa, r, k);
        for (uint32_t i = 0; i < d; ++i) s[r] += double{qr[i]} * k[i] / 8.0;
      }
      const double top = *std::max_element(s.begin(), s.end());
      double all = 0, picked = 0;
      for (uint32_t r = 0; r < rows; ++r) {
        const double w = std::exp(s[r] - top);
        all += w;
        for (const kv::RowRun& run : selection[head / gqa])
          if (r >= run.begin && r < run.end) picked += w;
      }
      want[head / gqa] += picked / all / gqa;
    }
    ASSERT_EQ(got.size(), 2u);
    for (uint32_t h = 0; h < 2; ++h) {
      EXPECT_NEAR(got[h], want[h], 1e-5) << key << " KV head " << h;
      EXPECT_GT(want[h], 0.05);
      EXPECT_LT(want[h], 0.95);
    }
  }
}

}  // namespace
}  // namespace kvscope
