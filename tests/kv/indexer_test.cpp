// The indexer's selection rule (kv::selectRows), its options text, and the
// sidecar (kv::KvIndex) inside a KvCache: bounds that hold and stay within
// their rounding, and the same bytes whether pages were appended, trimmed
// and re-appended, or rebuilt from the cached rows; the sidecar's bytes in
// the cache's accounting.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kv/indexer.h"
#include "kv/kv_cache.h"
#include "kv/kv_index.h"
#include "kv/kv_policy.h"
#include "support/test_support.h"

namespace kvscope::kv {
namespace {

using test::randomFloats;

// The rule of kv/indexer.h written out row by row: a mask of the rows kept.
std::vector<char> expectedMask(const IndexerOptions& o, uint32_t rows,
                               const std::vector<float>& scores) {
  const uint32_t P = o.pageRows, pages = (rows + P - 1) / P;
  std::vector<char> mask(rows, 0);
  for (uint32_t r = 0; r < rows; ++r) mask[r] = r < o.sinks || r + o.window >= rows;
  std::vector<uint32_t> candidates;
  for (uint32_t p = 0; p < pages; ++p) {
    bool open = false;
    for (uint32_t r = p * P; r < std::min(rows, (p + 1) * P); ++r) open |= !mask[r];
    if (open) candidates.push_back(p);
  }
  std::stable_sort(candidates.begin(), candidates.end(), [&](uint32_t a, uint32_t b) {
    const float sa = std::isnan(scores[a]) ? -INFINITY : scores[a];
    const float sb = std::isnan(scores[b]) ? -INFINITY : scores[b];
    return sa > sb;  // stable: equal scores keep the lower page first
  });
  const size_t wanted = (o.topK + P - 1) / P;
  for (size_t i = 0; i < std::min(wanted, candidates.size()); ++i)
    for (uint32_t r = candidates[i] * P; r < std::min(rows, (candidates[i] + 1) * P); ++r)
      mask[r] = 1;
  return mask;
}

std::vector<char> maskOf(const std::vector<RowRun>& runs, uint32_t rows) {
  std::vector<char> mask(rows, 0);
  for (const RowRun& r : runs) std::fill(mask.begin() + r.begin, mask.begin() + r.end, 1);
  return mask;
}

TEST(IndexerSelection, KeepsSinksWindowAndTheBestPagesInCacheOrder) {
  for (uint32_t pageRows : {16u, 32u, 64u}) {
    for (uint32_t rows : {100u, 1000u, 4097u}) {
      for (uint32_t topK : {1u, 32u, 64u, 200u}) {
        IndexerOptions o{.topK = topK, .window = 48, .sinks = 4, .pageRows = pageRows};
        const uint32_t pages = (rows + pageRows - 1) / pageRows;
        std::vector<float> scores = randomFloats(pages, rows + topK + pageRows);
        // Ties (every fifth page shares one score) and NaNs.
        for (uint32_t p = 0; p < pages; p += 5) scores[p] = 0.5f;
        if (pages > 7) scores[7] = NAN;
        std::vector<RowRun> runs;
        const bool sparse = selectRows(o, rows, scores.data(), runs);
        const std::vector<char> want = expectedMask(o, rows, scores);
        const bool all = std::all_of(want.begin(), want.end(), [](char c) { return c; });
        ASSERT_EQ(sparse, !all) << rows << " rows, top " << topK << ", pages of " << pageRows;
        if (!sparse) {
          EXPECT_TRUE(runs.empty());
          continue;
        }
        EXPECT_EQ(maskOf(runs, rows), want) << rows << " rows, top " << topK;
        for (size_t i = 0; i < runs.size(); ++i) {
          EXPECT_LT(runs[i].begin, runs[i].end);
          if (i) {
            EXPECT_GT(runs[i].begin, runs[i - 1].end) << "runs are sorted and apart";
          }
        }
        EXPECT_EQ(runs.front().begin, 0u) << "the sinks";
        EXPECT_EQ(runs.back().end, rows) << "the window";
      }
    }
  }
}

TEST(IndexerSelection, ABudgetCoveringEveryRowIsDense) {
  IndexerOptions o{.topK = 64, .window = 16, .sinks = 4};
  const std::vector<float> scores(8, 1.0f);
  std::vector<RowRun> runs;
  EXPECT_FALSE(selectRows(o, 80, scores.data(), runs)) << "64 + 16 rows cover 80";
  EXPECT_TRUE(runs.empty());
  EXPECT_TRUE(selectRows(o, 120, scores.data(), runs));
  o.topK = 0;
  EXPECT_FALSE(selectRows(o, 120, scores.data(), runs)) << "off";
}

TEST(IndexerOptions, ParsesTopKWindowAndSinks) {
  IndexerOptions o;
  ASSERT_TRUE(IndexerOptions::parseInto("512", o).ok());
  EXPECT_EQ(o.topK, 512u);
  EXPECT_EQ(o.window, 64u);
  EXPECT_EQ(o.sinks, 4u);
  ASSERT_TRUE(IndexerOptions::parseInto("128:32", o).ok());
  EXPECT_EQ(o.window, 32u);
  ASSERT_TRUE(IndexerOptions::parseInto("64:16:0", o).ok());
  EXPECT_EQ(o.selectionText(), "64:16:0");
  ASSERT_TRUE(IndexerOptions::parseInto("off", o).ok());
  EXPECT_FALSE(o.enabled());
  for (const char* bad : {"", "x", "1:2:3:4", "-5", "12:", "1.5"})
    EXPECT_FALSE(IndexerOptions::parseInto(bad, o).ok()) << bad;
  EXPECT_TRUE(IndexerOptions::parseScorer("bounds32", o).ok());
  EXPECT_EQ(o.pageRows, 32u);
  EXPECT_EQ(o.scorerText(), "bounds32");
  EXPECT_EQ(o.pageScore, PageScore::kBounds);
  EXPECT_TRUE(IndexerOptions::parseScorer("meanstd64", o).ok());
  EXPECT_EQ(o.pageRows, 64u);
  EXPECT_EQ(o.pageScore, PageScore::kMeanStd);
  EXPECT_EQ(o.scorerText(), "meanstd64");
  for (const char* bad : {"bounds8", "meanstd", "meanstd128", "mean16"})
    EXPECT_FALSE(IndexerOptions::parseScorer(bad, o).ok()) << bad;
}

TEST(IndexerOptions, PolicyItemsRoundTripAndLeaveTheCacheAlone) {
  auto p = KvPolicy::parse("k=q8_0,v=turbo4,indexer=256:32:4,sparse_v=0.001");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->attention.topK, 256u);
  EXPECT_FLOAT_EQ(p->attention.sparseV, 0.001f);
  auto again = KvPolicy::parse(p->toString());
  ASSERT_TRUE(again.ok()) << p->toString();
  EXPECT_EQ(again->attention, p->attention);
  // The scorer's kind is written even at the default page size.
  auto scored = KvPolicy::parse("k=q8_0,v=turbo4,indexer=256,indexer_scorer=meanstd16");
  ASSERT_TRUE(scored.ok());
  EXPECT_EQ(scored->attention.pageScore, PageScore::kMeanStd);
  EXPECT_EQ(p->attention.pageScore, PageScore::kBounds) << "the default";
  EXPECT_EQ(KvPolicy::parse(scored->toString())->attention, scored->attention)
      << scored->toString();
  // The first layers kept dense: 2 unless given, written only when not 2.
  EXPECT_EQ(p->attention.denseLayers, 2u);
  EXPECT_EQ(p->toString().find("indexer_dense"), std::string::npos) << p->toString();
  auto dense = KvPolicy::parse("k=q8_0,v=turbo4,indexer=256,indexer_dense=0");
  ASSERT_TRUE(dense.ok());
  EXPECT_EQ(dense->attention.denseLayers, 0u);
  EXPECT_NE(dense->toString().find("indexer_dense=0"), std::string::npos) << dense->toString();
  EXPECT_EQ(KvPolicy::parse(dense->toString())->attention, dense->attention);
  EXPECT_FALSE(dense->attention.selects(0) == p->attention.selects(0));
  EXPECT_TRUE(p->attention.selects(2) && !p->attention.selects(1));
  // Single heads kept dense: written in (layer, head) order, read back alike.
  auto heads = KvPolicy::parse("indexer=64,indexer_dense=0,indexer_dense_heads=3.1+2.0");
  ASSERT_TRUE(heads.ok()) << heads.error().message;
  const std::vector<KvHeadRef> want = {{2, 0}, {3, 1}};
  EXPECT_EQ(heads->attention.denseHeads, want);
  EXPECT_NE(heads->toString().find("indexer_dense_heads=2.0+3.1"), std::string::npos)
      << heads->toString();
  EXPECT_EQ(KvPolicy::parse(heads->toString())->attention, heads->attention);
  EXPECT_TRUE(heads->attention.selectsHead(2, 1) && heads->attention.selectsHead(3, 0));
  EXPECT_FALSE(heads->attention.selectsHead(2, 0) || heads->attention.selectsHead(3, 1));
  EXPECT_TRUE(p->attention.denseHeads.empty() &&
              p->toString().find("indexer_dense_heads") == std::string::npos);
  EXPECT_FALSE(p->attention.selectsHead(1, 0)) << "a dense layer's heads select nothing";
  EXPECT_TRUE(KvPolicy::parse("indexer=64,indexer_dense_heads=none")->attention.denseHeads.empty());
  // Heads to measure (a chat session does): until then no layer selects.
  auto measuring = KvPolicy::parse("indexer=64,indexer_dense=0,indexer_dense_heads=auto");
  ASSERT_TRUE(measuring.ok()) << measuring.error().message;
  EXPECT_TRUE(measuring->attention.autoDenseHeads && measuring->attention.denseHeads.empty());
  EXPECT_NE(measuring->toString().find("indexer_dense_heads=auto"), std::string::npos)
      << measuring->toString();
  EXPECT_EQ(KvPolicy::parse(measuring->toString())->attention, measuring->attention);
  EXPECT_FALSE(measuring->attention.selects(0) || measuring->attention.selects(3));
  EXPECT_FALSE(heads->attention.autoDenseHeads);
  // Checked against a model's cache: 4 layers of 2 KV heads.
  const uint32_t headsKv[] = {2, 2, 2, 2};
  EXPECT_TRUE(heads->attention.checkHeads(headsKv).ok());
  const auto refused = [&](const char* items) {
    auto q = KvPolicy::parse(items);
    return q.ok() ? q->attention.checkHeads(headsKv).error().message : std::string();
  };
  EXPECT_NE(refused("indexer=64,indexer_dense_heads=4.0").find("layers 0-3"), std::string::npos);
  EXPECT_NE(refused("indexer=64,indexer_dense_heads=1.2").find("layer 1 has KV heads 0-1"),
            std::string::npos);
  auto plain = KvPolicy::parse("k=q8_0,v=turbo4");
  EXPECT_TRUE(plain->sameCache(*p));
  EXPECT_FALSE(KvPolicy::parse("k=q8_0,v=turbo3")->sameCache(*p));
  for (const char* bad :
       {"indexer=abc", "sparse_v=1.5", "sparse_v=-1", "indexer@2=5", "indexer_scorer=nope",
        "indexer=5,indexer=6", "indexer_dense=two", "indexer_dense=-1", "indexer_dense@1=2",
        "indexer_dense=1,indexer_dense=2", "indexer_dense_heads=2", "indexer_dense_heads=2.",
        "indexer_dense_heads=.1", "indexer_dense_heads=2.0+", "indexer_dense_heads=2.0+2.0",
        "indexer_dense_heads=2.0,indexer_dense_heads=3.0", "indexer_dense_heads@2=0",
        "indexer_dense_heads=2.x"})
    EXPECT_FALSE(KvPolicy::parse(bad).ok()) << bad;
}

constexpr uint32_t kDim = 64, kHeads = 2;

std::unique_ptr<KvCache> filledCache(const std::string& key, uint32_t rows, uint32_t rowsPerPage,
                                     const IndexerOptions& index, bool indexFirst,
                                     uint32_t seed = 3) {
  const LayerSchemes layers[2] = {{key, "f16"}, {key, "q8_0"}};
  auto cache = KvCache::create(KvGeometry::uniform(2, kHeads, kDim, rowsPerPage), layers, 9);
  EXPECT_TRUE(cache.ok());
  if (indexFirst) (*cache)->enableIndex(index);
  EXPECT_TRUE((*cache)->append(rows).ok());
  // Keys with a few loud channels and varying scale, like real ones.
  const auto x = randomFloats(size_t{rows} * 2 * kHeads * kDim, seed, -2.0f, 2.0f);
  for (uint32_t r = 0; r < rows; ++r) {
    for (uint32_t l = 0; l < 2; ++l) {
      for (uint32_t h = 0; h < kHeads; ++h) {
        const float* at = &x[((size_t{r} * 2 + l) * kHeads + h) * kDim];
        std::vector<float> row(at, at + kDim);
        row[5] *= 20.0f;
        for (float& v : row) v *= 1.0f + static_cast<float>(r % 37) / 8.0f;
        (*cache)->write(l, KvPart::kKey, h, r, row);
        (*cache)->write(l, KvPart::kValue, h, r, row);
      }
    }
  }
  return std::move(*cache);
}

// Every entry byte of every layer, head and page.
std::vector<int8_t> entries(const KvCache& c) {
  const KvIndex& index = *c.index();
  std::vector<int8_t> out;
  const uint32_t pages = (c.rows() + index.pageRows() - 1) / index.pageRows();
  for (uint32_t l = 0; l < 2; ++l)
    for (uint32_t p = 0; p < pages; ++p)
      for (uint32_t h = 0; h < kHeads; ++h)
        out.insert(out.end(), index.entry(l, p, h), index.entry(l, p, h) + index.entryBytes(l));
  return out;
}

// Every stored key of (layer, head), in the K scheme's space: [rows][kDim].
std::vector<float> storedKeys(const KvCache& c, uint32_t layer, uint32_t head) {
  std::vector<float> k(size_t{c.rows()} * kDim);
  for (uint32_t r = 0; r < c.rows(); ++r)
    c.readRotated(layer, KvPart::kKey, head, r, {&k[size_t{r} * kDim], kDim});
  return k;
}

TEST(KvIndex, PageBoundsHoldForEveryStoredKeyOfThePage) {
  constexpr uint32_t kRows = 200, kPages = (kRows + 15) / 16;
  for (const char* key : {"f16", "q8_0", "turbo3"}) {
    auto c = filledCache(key, kRows, 64, {.topK = 1, .pageScore = PageScore::kBounds}, true);
    const KvIndex& index = *c->index();
    for (uint32_t l = 0; l < 2; ++l) {
      for (uint32_t h = 0; h < kHeads; ++h) {
        // The stored keys, and per page the exact per-channel min and max.
        const std::vector<float> k = storedKeys(*c, l, h);
        std::vector<float> lo(size_t{kPages} * kDim, INFINITY), hi(lo.size(), -INFINITY);
        std::vector<double> top(kPages, 0.0);
        for (uint32_t r = 0; r < kRows; ++r) {
          for (uint32_t i = 0; i < kDim; ++i) {
            const float v = k[size_t{r} * kDim + i];
            lo[(r / 16) * kDim + i] = std::min(lo[(r / 16) * kDim + i], v);
            hi[(r / 16) * kDim + i] = std::max(hi[(r / 16) * kDim + i], v);
            top[r / 16] = std::max(top[r / 16], double{std::fabs(v)});
          }
        }
        for (uint32_t trial = 0; trial < 20; ++trial) {
          const auto q = randomFloats(kDim, 100 + trial, -3.0f, 3.0f);
          std::vector<float> score(kPages);
          index.scorePages(l, h, q.data(), kPages, score.data(), false);
          double qAbs = 0;
          for (float x : q) qAbs += std::fabs(x);
          for (uint32_t p = 0; p < kPages; ++p) {
            double tight = 0;  // Quest's bound from the exact min and max
            for (uint32_t i = 0; i < kDim; ++i)
              tight += std::max(double{q[i]} * lo[p * kDim + i], double{q[i]} * hi[p * kDim + i]);
            ASSERT_GE(score[p], tight * (1 + 1e-6) - 1e-6) << key << " page " << p;
            // Codes step by at most 2 top / 127 (the exponent rounds up to a
            // power of two); floor and ceil move each bound less than a step.
            ASSERT_LE(score[p], tight + qAbs * 2 * top[p] / 127 + 1e-5) << key << " page " << p;
            for (uint32_t r = p * 16; r < std::min(kRows, p * 16 + 16); ++r) {
              double dotQk = 0;
              for (uint32_t i = 0; i < kDim; ++i) dotQk += double{q[i]} * k[size_t{r} * kDim + i];
              ASSERT_GE(score[p], dotQk * (1 + 1e-6) - 1e-6) << key << " row " << r;
            }
          }
        }
      }
    }
  }
}

// A row that needs a coarser scale than its page has rounds the page's
// earlier bounds outward: 1.1 at 2^-6 steps is code 71; at 2^0 steps, 2.
TEST(KvIndex, ACoarserRowWidensTheEarlierBounds) {
  const std::vector<KvLayerShape> one = {{1, 4}};
  KvIndex index(one, 16, PageScore::kBounds);
  const float first[4] = {1.1f, -1.1f, 0.0f, 0.5f}, second[4] = {-0.5f, 0.0f, 100.0f, 0.25f};
  index.add(0, 0, 0, first);
  index.add(0, 0, 1, second);
  const float axes[4][4] = {{1, 0, 0, 0}, {-1, 0, 0, 0}, {0, 1, 0, 0}, {0, -1, 0, 0}};
  float score[4];
  for (int i = 0; i < 4; ++i) index.scorePages(0, 0, axes[i], 1, &score[i], false);
  EXPECT_GE(score[0], 1.1f) << "channel 0 reaches 1.1";
  EXPECT_GE(score[1], 0.5f) << "and -0.5";
  EXPECT_GE(score[2], 0.0f);
  EXPECT_GE(score[3], 1.1f) << "channel 1 reaches -1.1";
  EXPECT_LE(score[0], 2.0f) << "one step of 2^0 above";
}

// The mean+std entry worked by hand. Every row reaches 127 in channel 0, so
// e = 0 and the codes are the values. Page 0, rows {127, 10, -4, 0},
// {127, 20, 4, 0}, {127, 30, -4, 1}: means 127, 20, -4/3 -> -1, 1/3 -> 0;
// standard deviations 0, sqrt(200/3) = 8.2 -> 8, sqrt(128/9) = 3.8 -> 4,
// sqrt(2/9) = 0.47 -> 0. Page 1, rows {127, 1, -1, 0.4}, {127, 2, -2, 0.6}:
// halves round away from zero (means 1.5 -> 2, -1.5 -> -2; standard
// deviation 0.5 -> 1), and so do the rows' codes to nearest, ties to even
// (0.4 -> 0, 0.6 -> 1: mean 0.5 -> 1).
TEST(KvIndex, MeanStdEntriesWorkedByHand) {
  const std::vector<KvLayerShape> one = {{1, 4}};
  KvIndex index(one, 3, PageScore::kMeanStd);  // pages of 3 rows
  const float rows[5][4] = {
      {127, 10, -4, 0}, {127, 20, 4, 0}, {127, 30, -4, 1}, {127, 1, -1, 0.4f}, {127, 2, -2, 0.6f}};
  for (uint32_t r = 0; r < 3; ++r) index.add(0, 0, r, rows[r]);
  index.add(0, 0, 3, rows[0]);  // page 1's first row, rewritten below
  const KvIndex& view = index;
  const int8_t* page0 = view.entry(0, 0, 0);
  EXPECT_EQ(std::vector<int>(page0, page0 + 9), (std::vector<int>{127, 20, -1, 0, 0, 8, 4, 0, 0}));
  // Trim into page 1 and add its rows anew: the entry is theirs alone.
  index.truncate(3);
  index.add(0, 0, 3, rows[3]);
  index.add(0, 0, 4, rows[4]);
  const int8_t* page1 = view.entry(0, 1, 0);
  EXPECT_EQ(std::vector<int>(page1, page1 + 9), (std::vector<int>{127, 2, -2, 1, 0, 1, 1, 1, 0}));
  // Page 0 against q = (0, 1, 0, 0): mean 20 + 2 x std 8.
  const float q[4] = {0, 1, 0, 0};
  float score[2];
  index.scorePages(0, 0, q, 2, score, false);
  EXPECT_FLOAT_EQ(score[0], 36.0f);
  EXPECT_FLOAT_EQ(score[1], 2.0f + 2.0f * 1.0f);
}

// On stored keys of every kind, the entry's mean and standard deviation per
// channel are the exact ones (in double) within a code: half a code from
// rounding the rows to the grid, half from rounding the moments.
TEST(KvIndex, MeanStdEntriesFollowTheStoredKeys) {
  constexpr uint32_t kRows = 200;
  for (const char* key : {"f16", "q8_0", "turbo3"}) {
    auto c = filledCache(key, kRows, 64, {.topK = 1, .pageScore = PageScore::kMeanStd}, true);
    const KvIndex& index = *c->index();
    for (uint32_t l = 0; l < 2; ++l) {
      for (uint32_t h = 0; h < kHeads; ++h) {
        const std::vector<float> k = storedKeys(*c, l, h);
        for (uint32_t p = 0; p * 16 < kRows; ++p) {
          const int8_t* mean = index.entry(l, p, h);
          const double step = std::ldexp(1.0, mean[2 * kDim]);
          const uint32_t r0 = p * 16, n = std::min(16u, kRows - r0);
          for (uint32_t i = 0; i < kDim; ++i) {
            double sum = 0, squares = 0;
            for (uint32_t r = r0; r < r0 + n; ++r) sum += k[size_t{r} * kDim + i];
            const double mu = sum / n;
            for (uint32_t r = r0; r < r0 + n; ++r)
              squares += (k[size_t{r} * kDim + i] - mu) * (k[size_t{r} * kDim + i] - mu);
            const double sigma = std::sqrt(squares / n);
            ASSERT_NEAR(mean[i] * step, mu, 1.0 * step) << key << " page " << p << " ch " << i;
            ASSERT_NEAR(mean[kDim + i] * step, sigma, 1.0 * step)
                << key << " page " << p << " ch " << i;
          }
        }
      }
    }
  }
}

TEST(KvIndex, TrimAppendAndRebuildGiveTheSameBytes) {
  for (const IndexerOptions& o :
       {IndexerOptions{.topK = 1, .pageScore = PageScore::kBounds},
        IndexerOptions{.topK = 1, .pageRows = 32, .pageScore = PageScore::kBounds},
        IndexerOptions{.topK = 1, .pageScore = PageScore::kMeanStd},
        IndexerOptions{.topK = 1, .pageRows = 32, .pageScore = PageScore::kMeanStd}}) {
    for (const char* key : {"f16", "turbo4"}) {
      auto whole = filledCache(key, 300, 128, o, true);
      // Rebuilt from the rows when turned on afterwards.
      auto late = filledCache(key, 300, 128, o, false);
      late->enableIndex(o);
      EXPECT_EQ(entries(*late), entries(*whole)) << key << " " << o.scorerText();
      // Trimmed mid-page and written again with other rows, then with the same.
      auto trimmed = filledCache(key, 300, 128, o, true);
      ASSERT_TRUE(trimmed->trim(171).ok());
      EXPECT_EQ(entries(*trimmed), entries(*filledCache(key, 171, 128, o, true)))
          << "trimmed mid-page: as if the rows after never were";
      auto other = filledCache(key, 300, 128, o, true, 77);
      ASSERT_TRUE(trimmed->append(129).ok());
      std::vector<float> row(kDim);
      for (uint32_t r = 171; r < 300; ++r)
        for (uint32_t l = 0; l < 2; ++l)
          for (uint32_t h = 0; h < kHeads; ++h) {
            other->read(l, KvPart::kKey, h, r, row);
            trimmed->write(l, KvPart::kKey, h, r, row);
          }
      EXPECT_NE(entries(*trimmed), entries(*whole)) << "other rows, other bounds";
      ASSERT_TRUE(trimmed->trim(171).ok());
      ASSERT_TRUE(trimmed->append(129).ok());
      for (uint32_t r = 171; r < 300; ++r)
        for (uint32_t l = 0; l < 2; ++l)
          for (uint32_t h = 0; h < kHeads; ++h) {
            whole->read(l, KvPart::kKey, h, r, row);
            trimmed->write(l, KvPart::kKey, h, r, row);
          }
      EXPECT_EQ(entries(*trimmed), entries(*whole)) << key << " " << o.scorerText();
    }
  }
}

TEST(KvIndex, SidecarBytesAreTheirOwnCategory) {
  const IndexerOptions o{.topK = 1};
  auto c = filledCache("q8_0", 100, 64, o, false);
  const KvBytes before = c->layerBytes(0, KvPart::kKey);
  EXPECT_EQ(before.sidecar, 0u);
  c->enableIndex(o);
  const KvBytes k = c->layerBytes(0, KvPart::kKey), v = c->layerBytes(0, KvPart::kValue);
  // ceil(100 / 16) pages x 2 heads x (64 lo + 64 hi + 1 exponent, padded to 132).
  EXPECT_EQ(k.sidecar, 7u * kHeads * 132u);
  EXPECT_EQ(v.sidecar, 0u) << "the sidecar indexes keys";
  EXPECT_EQ(k.codes, before.codes);
  EXPECT_EQ(c->bytes().sidecar, 2u * 7u * kHeads * 132u);
  EXPECT_EQ(c->bytes().total(), c->allocatedBytes());
  c->enableIndex({});
  EXPECT_EQ(c->bytes().sidecar, 0u);
  EXPECT_EQ(c->bytes().total(), c->allocatedBytes());
}

}  // namespace
}  // namespace kvscope::kv
