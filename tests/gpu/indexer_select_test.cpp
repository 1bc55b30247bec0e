// The indexer's selection on the device (shaders/index_select.comp) against
// kv::selectRows, the host rule: for the same page scores every KV head's
// list must be exactly the rows of the host's runs, in cache order. Scores
// come from a handful of values, so ties are everywhere, with NaN, both
// infinities and both zeros among them (ties go to the lower page, NaN ranks
// lowest, -0 equals +0); one head gets distinct scores.
#include <cmath>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "gpu/attention_kernels.h"
#include "gpu_fixture.h"
#include "kv/indexer.h"

namespace kvscope::test {
namespace {

class IndexerSelectTest : public GpuTest {};

TEST_F(IndexerSelectTest, PicksTheRowsTheHostRulePicks) {
  gpu::AttentionKernels attention(ctx());
  constexpr uint32_t kHeads = 3, kLayers = 2, kLayer = 1, kMaxRows = 2048;
  const gpu::KvPageLayout layout = gpu::KvPageLayout::f16(kLayers, kHeads, 64, 256);
  const float values[] = {0.0f, -0.0f, 1.0f, 2.5f, -3.0f, NAN, INFINITY, -INFINITY, 1e-30f};
  std::mt19937 rng(5);
  struct Case {
    uint32_t topK, window, sinks, pageRows;
  };
  const Case cases[] = {{64, 64, 4, 16}, {1, 0, 0, 16}, {200, 17, 21, 32}, {512, 64, 4, 64},
                        {16, 100, 40, 16}};
  uint32_t sparseSteps = 0;
  for (const Case& k : cases) {
    kv::IndexerOptions options;
    options.topK = k.topK;
    options.window = k.window;
    options.sinks = k.sinks;
    options.pageRows = k.pageRows;
    const gpu::IndexerShape shape{.pageRows = k.pageRows,
                                  .sinks = k.sinks,
                                  .window = k.window,
                                  .pickedPages = kv::pickedPages(options),
                                  .entryBytes = 132};
    auto index = attention.makeIndexer(layout, kHeads, kMaxRows, shape);
    ASSERT_TRUE(index.ok()) << index.error().describe();
    for (uint32_t rows : {70u, 100u, 333u, 1000u, 2047u, 2048u}) {
      if (kv::selectsAll(options, rows)) continue;
      SCOPED_TRACE(fmt::format("{}:{}:{} page {} rows {}", k.topK, k.window, k.sinks, k.pageRows,
                               rows));
      ++sparseSteps;
      const uint32_t pages = (rows + k.pageRows - 1) / k.pageRows;
      std::vector<float> scores(size_t{kHeads} * pages);
      std::uniform_int_distribution<size_t> pick(0, std::size(values) - 1);
      std::normal_distribution<float> normal;
      for (size_t i = 0; i < scores.size(); ++i)
        scores[i] = i / pages == 2 ? normal(rng) : values[pick(rng)];
      ASSERT_TRUE(index->pageScores.upload(std::span<const float>(scores)).ok());
      ASSERT_TRUE(rec().begin().ok());
      ASSERT_TRUE(attention.selectRows(rec(), *index, kLayer, rows).ok());
      ASSERT_TRUE(rec().submitAndWait().ok());
      const auto* lists = static_cast<const uint32_t*>(index->lists.mapped());
      for (uint32_t h = 0; h < kHeads; ++h) {
        std::vector<kv::RowRun> runs;
        ASSERT_TRUE(kv::selectRows(options, rows, &scores[size_t{h} * pages], runs));
        std::vector<uint32_t> want;
        for (const kv::RowRun& r : runs)
          for (uint32_t row = r.begin; row < r.end; ++row) want.push_back(row);
        const uint32_t* list = lists + index->listAt(kLayer, h);
        ASSERT_LE(list[0], index->gatherRows) << "head " << h;
        const std::vector<uint32_t> got(list + 1, list + 1 + list[0]);
        EXPECT_EQ(got, want) << "head " << h;
      }
    }
  }
  EXPECT_GE(sparseSteps, 20u);
}

}  // namespace
}  // namespace kvscope::test
