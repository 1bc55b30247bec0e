// KvCache: per-stream seeds, accounting == allocated bytes, append/trim/
// offsets across pages, recoding, and the canonical row order of a saved cache.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kv/kv_cache.h"

namespace kvscope::kv {
namespace {

std::vector<LayerSchemes> mixedLayers() {
  return {{"f16", "turbo3"}, {"q8_0", "affine4"}, {"turbo4g", "q4_0"}};
}

std::unique_ptr<KvCache> makeCache(KvGeometry g, uint64_t seed = 99) {
  const auto layers = mixedLayers();
  auto c = KvCache::create(g, layers, seed);
  EXPECT_TRUE(c.ok()) << c.error().describe();
  return c.ok() ? std::move(*c) : nullptr;
}

std::vector<float> rowValues(uint32_t dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(dim);
  for (float& x : v) x = normal(rng);
  return v;
}

// Fills rows [from, rows()) with values keyed by (layer, part, head, row).
void fill(KvCache& c, uint32_t from) {
  const KvGeometry& g = c.geometry();
  for (uint32_t l = 0; l < g.nLayer(); ++l)
    for (KvPart p : {KvPart::kKey, KvPart::kValue})
      for (uint32_t h = 0; h < g.nHeadKv(l); ++h)
        for (uint32_t r = from; r < c.rows(); ++r)
          c.write(l, p, h, r,
                  rowValues(g.headDim(l), ((l * 2 + static_cast<uint32_t>(p)) * 8 + h) * 1000 + r));
}

TEST(KvCache, SchemesAndSeeds) {
  auto c = makeCache(KvGeometry::uniform(3, 2, 80, 4));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->cacheSeed(), 99u);
  EXPECT_EQ(c->layerSchemes(), mixedLayers());
  for (uint32_t l = 0; l < 3; ++l) {
    for (uint32_t p = 0; p < 2; ++p) {
      const KvScheme& s = c->scheme(l, static_cast<KvPart>(p));
      EXPECT_EQ(s.seed(), streamSeed(99, l, p));
      EXPECT_EQ(s.dim(), 80u);
    }
  }
  const std::vector<LayerSchemes> two(2);
  EXPECT_FALSE(KvCache::create(KvGeometry::uniform(3, 2, 80, 4), two).ok());
  const std::vector<LayerSchemes> bad = {{"f16", "nope"}};
  EXPECT_FALSE(KvCache::create(KvGeometry::uniform(1, 2, 80, 4), bad).ok());
  EXPECT_FALSE(
      KvCache::create(KvGeometry::uniform(1, 0, 80, 4), std::vector<LayerSchemes>(1)).ok());
}

TEST(KvCache, AccountingEqualsAllocatedBytes) {
  for (uint32_t dim : {8u, 48u, 80u, 100u}) {
    auto c = makeCache(KvGeometry::uniform(3, 2, dim, 4));
    ASSERT_TRUE(c);
    for (uint32_t n : {0u, 1u, 3u, 5u, 9u}) {
      ASSERT_TRUE(c->append(n).ok());
      const KvBytes b = c->bytes();
      EXPECT_EQ(b.total(), c->allocatedBytes()) << dim << " rows " << c->rows();
      uint64_t perRow = 0;
      for (uint32_t l = 0; l < 3; ++l)
        for (KvPart p : {KvPart::kKey, KvPart::kValue}) perRow += 2u * c->rowBytes(l, p);
      EXPECT_EQ(b.codes + b.scales + b.padding, perRow * c->rows());
      EXPECT_EQ(b.unused, perRow * (c->capacity() - c->rows()));
    }
    ASSERT_TRUE(c->trim(2).ok());
    EXPECT_EQ(c->bytes().total(), c->allocatedBytes());
    EXPECT_EQ(c->capacity(), 4u);
  }
}

TEST(KvCache, AppendTrimKeepRows) {
  auto c = makeCache(KvGeometry::uniform(3, 2, 48, 4));
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->append(7).ok());
  fill(*c, 0);
  std::vector<std::vector<uint8_t>> before;
  for (uint32_t r = 0; r < 7; ++r) {
    const auto b = c->row(2, KvPart::kValue, 1, r);
    before.emplace_back(b.begin(), b.end());
  }
  ASSERT_TRUE(c->trim(5).ok());
  EXPECT_EQ(c->rows(), 5u);
  EXPECT_EQ(c->capacity(), 8u);
  ASSERT_TRUE(c->trim(3).ok());
  EXPECT_EQ(c->capacity(), 4u);
  ASSERT_TRUE(c->append(6).ok());
  fill(*c, 3);
  // Rows kept by the trims are untouched; rows 3..6, rewritten with the
  // same values, encode to the same bytes as before.
  for (uint32_t r = 0; r < 7; ++r) {
    const auto b = c->row(2, KvPart::kValue, 1, r);
    EXPECT_EQ(std::vector<uint8_t>(b.begin(), b.end()), before[r]) << r;
  }
  EXPECT_FALSE(c->trim(10).ok());
  // Rows of different streams never overlap.
  const auto a = c->row(0, KvPart::kKey, 0, 5), b = c->row(0, KvPart::kKey, 1, 5);
  EXPECT_TRUE(a.data() + a.size() <= b.data() || b.data() + b.size() <= a.data());
}

TEST(KvCache, ReadRotatedMatchesScheme) {
  auto c = makeCache(KvGeometry::uniform(3, 1, 64, 4));
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->append(1).ok());
  fill(*c, 0);
  std::vector<float> a(64), b(64);
  c->readRotated(0, KvPart::kValue, 0, 0, a);  // turbo3: rotated space
  c->scheme(0, KvPart::kValue).decodeRotated(c->row(0, KvPart::kValue, 0, 0), b);
  EXPECT_EQ(a, b);
  c->readRotated(0, KvPart::kKey, 0, 0, a);  // f16: plain
  c->read(0, KvPart::kKey, 0, 0, b);
  EXPECT_EQ(a, b);
}

TEST(KvCache, AppendRecodedEncodesThroughTarget) {
  const std::vector<LayerSchemes> f16(3);
  auto source = KvCache::create(KvGeometry::uniform(3, 2, 48, 4), f16, 99);
  ASSERT_TRUE(source.ok());
  ASSERT_TRUE((*source)->append(6).ok());
  fill(**source, 0);
  auto target = makeCache(KvGeometry::uniform(3, 2, 48, 4));
  ASSERT_TRUE(target);
  ASSERT_TRUE(target->appendRecoded(**source).ok());
  ASSERT_EQ(target->rows(), 6u);
  std::vector<float> v(48);
  std::vector<uint8_t> expected(target->rowBytes(1, KvPart::kValue));
  for (uint32_t r = 0; r < 6; ++r) {
    (*source)->read(1, KvPart::kValue, 1, r, v);
    target->scheme(1, KvPart::kValue).encode(v, expected);
    const auto got = target->row(1, KvPart::kValue, 1, r);
    EXPECT_EQ(std::vector<uint8_t>(got.begin(), got.end()), expected);
  }
}

// The canonical order: per layer, K then V, per head, rows 0..n), as row()
// addresses them (the independent oracle here).
std::vector<uint8_t> canonicalBytes(const KvCache& c) {
  std::vector<uint8_t> out;
  const KvGeometry& g = c.geometry();
  for (uint32_t l = 0; l < g.nLayer(); ++l)
    for (KvPart p : {KvPart::kKey, KvPart::kValue})
      for (uint32_t h = 0; h < g.nHeadKv(l); ++h)
        for (uint32_t r = 0; r < c.rows(); ++r) {
          const auto row = c.row(l, p, h, r);
          out.insert(out.end(), row.begin(), row.end());
        }
  return out;
}

// Gemma 4's shape: global layers with fewer, wider heads than the window
// layers between them (here 1 x 96 and 2 x 48 values). Every stream is built for
// its own layer's head dim and holds its own head count; sizes are checked
// against f16's 2 bytes per value, written out by hand.
KvGeometry mixedShapes(uint32_t rowsPerPage) {
  KvGeometry g;
  g.layers = {{1, 96}, {2, 48}, {1, 96}};
  g.rowsPerPage = rowsPerPage;
  return g;
}

TEST(KvCache, LayersOfDifferentShapesKeepTheirOwnHeadsAndDims) {
  const std::vector<LayerSchemes> f16(3);
  auto made = KvCache::create(mixedShapes(4), f16, 5);
  ASSERT_TRUE(made.ok()) << made.error().describe();
  KvCache& c = **made;
  EXPECT_EQ(c.scheme(0, KvPart::kKey).dim(), 96u);
  EXPECT_EQ(c.scheme(1, KvPart::kValue).dim(), 48u);
  EXPECT_EQ(c.rowBytes(1, KvPart::kKey), 48u * 2);
  // Per token: layers 0 and 2 hold one head of 96 values in K and in V, layer
  // 1 two heads of 48, at 2 bytes each.
  EXPECT_EQ(c.layout().tokenBytes(), (2 * 96 + 2 * 2 * 48 + 2 * 96) * 2u);
  EXPECT_EQ(c.layout().pageBytes(), 4 * c.layout().tokenBytes());
  ASSERT_TRUE(c.append(6).ok());
  fill(c, 0);
  // f16 holds these values exactly enough to tell every stream apart: each
  // row reads back as its own values, so no two streams share bytes.
  std::vector<float> got;
  for (uint32_t l = 0; l < 3; ++l)
    for (KvPart p : {KvPart::kKey, KvPart::kValue})
      for (uint32_t h = 0; h < c.geometry().nHeadKv(l); ++h)
        for (uint32_t r = 0; r < 6; ++r) {
          got.assign(c.geometry().headDim(l), 0.0f);
          c.read(l, p, h, r, got);
          const auto want = rowValues(c.geometry().headDim(l),
                                      ((l * 2 + static_cast<uint32_t>(p)) * 8 + h) * 1000 + r);
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_NEAR(got[i], want[i], 2e-3f * (1.0f + std::fabs(want[i])))
                << l << " " << h << " " << r << " " << i;
        }
  EXPECT_EQ(c.bytes().total(), c.allocatedBytes());
  EXPECT_EQ(c.f16EquivalentBytes(), 6 * c.layout().tokenBytes());
  // The canonical order moves to a cache of other pages and back unchanged.
  std::vector<uint8_t> exported;
  ASSERT_TRUE(c.exportRows([&](std::span<const uint8_t> run) {
                 exported.insert(exported.end(), run.begin(), run.end());
                 return okStatus();
               }).ok());
  EXPECT_EQ(exported, canonicalBytes(c));
  EXPECT_EQ(exported.size(), c.layout().canonicalBytes(6));
  auto other = KvCache::create(mixedShapes(5), f16, 5);
  ASSERT_TRUE(other.ok());
  size_t at = 0;
  ASSERT_TRUE((*other)
                  ->importRows(6,
                               [&](std::span<uint8_t> run) {
                                 std::copy_n(exported.begin() + at, run.size(), run.begin());
                                 at += run.size();
                                 return okStatus();
                               })
                  .ok());
  EXPECT_EQ(canonicalBytes(**other), exported);
  // The indexer's sidecar: entries of each layer's own dim, 2 * dim + 1 bytes
  // padded to 4, per head and page of 16 rows.
  // Over three pages, each page's bound is at least every q . k of its rows
  // (Quest's bounds' contract, kv/kv_index.h) in every layer and head.
  IndexerOptions indexer;
  indexer.topK = 4;
  indexer.pageRows = 16;
  indexer.pageScore = PageScore::kBounds;
  c.enableIndex(indexer);
  ASSERT_TRUE(c.append(34).ok());
  fill(c, 6);
  EXPECT_EQ(c.index()->layerBytes(0), 3 * 1u * ((2 * 96 + 1 + 3) / 4 * 4));
  EXPECT_EQ(c.index()->layerBytes(1), 3 * 2u * ((2 * 48 + 1 + 3) / 4 * 4));
  for (uint32_t l = 0; l < 3; ++l) {
    const uint32_t d = c.geometry().headDim(l);
    const std::vector<float> q = rowValues(d, 77 + l);
    std::vector<float> key(d), bounds(3);
    for (uint32_t h = 0; h < c.geometry().nHeadKv(l); ++h) {
      c.index()->scorePages(l, h, q.data(), 3, bounds.data(), false);
      for (uint32_t r = 0; r < 40; ++r) {
        c.readRotated(l, KvPart::kKey, h, r, key);
        float qk = 0.0f;
        for (uint32_t i = 0; i < d; ++i) qk += q[i] * key[i];
        EXPECT_GE(bounds[r / 16], qk * (1.0f + 1e-5f) - 1e-4f) << l << " " << h << " " << r;
      }
    }
  }
  // A shape the layout does not have is refused.
  KvGeometry empty = mixedShapes(4);
  empty.layers[1].nHeadKv = 0;
  EXPECT_FALSE(KvCache::create(empty, f16, 5).ok());
}

TEST(KvCache, ExportsRowsInCanonicalOrderWhateverThePageSize) {
  for (uint32_t rows : {0u, 1u, 3u, 4u, 5u, 17u}) {
    auto c = makeCache(KvGeometry::uniform(3, 2, 80, 4), 12345);
    ASSERT_TRUE(c);
    ASSERT_TRUE(c->append(rows).ok());
    fill(*c, 0);
    std::vector<uint8_t> exported;
    ASSERT_TRUE(c->exportRows([&](std::span<const uint8_t> run) {
                   exported.insert(exported.end(), run.begin(), run.end());
                   return okStatus();
                 }).ok());
    EXPECT_EQ(exported, canonicalBytes(*c)) << rows;
    EXPECT_EQ(exported.size(), uint64_t{rows} * c->layout().tokenBytes());

    // Into a cache of other pages: the same rows, decoded the same.
    auto other = makeCache(KvGeometry::uniform(3, 2, 80, 7), 12345);
    ASSERT_TRUE(other);
    size_t at = 0;
    ASSERT_TRUE(other
                    ->importRows(rows,
                                 [&](std::span<uint8_t> run) {
                                   std::copy_n(exported.begin() + at, run.size(), run.begin());
                                   at += run.size();
                                   return okStatus();
                                 })
                    .ok());
    EXPECT_EQ(at, exported.size());
    EXPECT_EQ(canonicalBytes(*other), exported);
  }
}

TEST(KvCache, ImportRebuildsTheSidecarAndAFailedImportLeavesTheCacheEmpty) {
  IndexerOptions indexer;
  indexer.topK = 4;
  indexer.pageRows = 16;
  auto c = makeCache(KvGeometry::uniform(3, 2, 80, 4));
  ASSERT_TRUE(c);
  c->enableIndex(indexer);
  ASSERT_TRUE(c->append(40).ok());
  fill(*c, 0);
  const std::vector<uint8_t> full = canonicalBytes(*c);
  std::vector<uint8_t> bytes(full.begin(), full.begin() + full.size() / 2);

  auto target = makeCache(KvGeometry::uniform(3, 2, 80, 4));
  ASSERT_TRUE(target);
  target->enableIndex(indexer);
  size_t at = 0;
  const auto reader = [&](std::span<uint8_t> run) -> Status {
    if (at + run.size() > bytes.size()) return makeError(ErrorCode::kBadFile, "the rows end early");
    std::copy_n(bytes.begin() + at, run.size(), run.begin());
    at += run.size();
    return okStatus();
  };
  // Short of data: an error, and the cache stays empty.
  EXPECT_FALSE(target->importRows(40, reader).ok());
  EXPECT_EQ(target->rows(), 0u);
  EXPECT_EQ(target->allocatedBytes(), target->index()->layerBytes(0) * 3);

  bytes = full;
  at = 0;
  ASSERT_TRUE(target->importRows(40, reader).ok());
  ASSERT_NE(target->index(), nullptr);
  for (uint32_t l = 0; l < 3; ++l) {
    EXPECT_EQ(target->index()->layerBytes(l), c->index()->layerBytes(l));
    for (uint32_t h = 0; h < 2; ++h) {
      ASSERT_EQ(target->index()->rows(l, h), 40u);
      for (uint32_t page = 0; page < 3; ++page) {
        const int8_t* a = target->index()->entry(l, page, h);
        const int8_t* b = c->index()->entry(l, page, h);
        EXPECT_TRUE(std::equal(a, a + c->index()->entryBytes(l), b)) << l << " " << page;
      }
    }
  }
  EXPECT_FALSE(target->importRows(1, reader).ok()) << "not into a cache that holds rows";
}

}  // namespace
}  // namespace kvscope::kv
