// KvCache with sliding-window layers in a ring (kv/kv_layout.h): checked
// against a twin cache of the same schemes that keeps the window layers'
// rows in the growing pages (ringRows 0), written with the same rows, and
// against the schemes' row sizes for the bytes.
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kv/kv_cache.h"

namespace kvscope::kv {
namespace {

constexpr uint32_t kWindow = 5, kRing = 7;  // a step appends at most 7 - 4 = 3 rows

std::vector<LayerSchemes> layers() {
  return {{"turbo3", "q8_0"}, {"f16", "turbo4"}, {"q4_0", "fp8"}};
}

KvGeometry geometry(uint32_t ringRows) {
  KvGeometry g = KvGeometry::uniform(3, 2, 64, 4);
  g.window = kWindow;
  g.windowLayers = {true, false, true};
  g.ringRows = ringRows;
  return g;
}

std::unique_ptr<KvCache> makeCache(uint32_t ringRows) {
  auto c = KvCache::create(geometry(ringRows), layers(), 7);
  EXPECT_TRUE(c.ok()) << c.error().describe();
  return c.ok() ? std::move(*c) : nullptr;
}

// Appends n rows to both caches and writes the same values into each.
void appendBoth(KvCache& ring, KvCache& pages, uint32_t n) {
  const uint32_t first = ring.rows();
  ASSERT_TRUE(ring.append(n).ok());
  ASSERT_TRUE(pages.append(n).ok());
  std::mt19937 rng(first);
  std::normal_distribution<float> normal;
  std::vector<float> v(64);
  for (uint32_t l = 0; l < 3; ++l) {
    for (KvPart p : {KvPart::kKey, KvPart::kValue}) {
      for (uint32_t h = 0; h < 2; ++h) {
        for (uint32_t r = first; r < first + n; ++r) {
          for (float& x : v) x = normal(rng);
          ring.write(l, p, h, r, v);
          pages.write(l, p, h, r, v);
        }
      }
    }
  }
}

// Every row the ring cache holds has the twin's bytes.
void expectSameRows(const KvCache& ring, const KvCache& pages) {
  ASSERT_EQ(ring.rows(), pages.rows());
  for (uint32_t l = 0; l < 3; ++l) {
    for (KvPart p : {KvPart::kKey, KvPart::kValue}) {
      for (uint32_t h = 0; h < 2; ++h) {
        for (uint32_t r = ring.firstRow(l); r < ring.rows(); ++r) {
          const auto a = ring.row(l, p, h, r), b = pages.row(l, p, h, r);
          ASSERT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end()))
              << "layer " << l << " row " << r;
        }
      }
    }
  }
}

// The canonical order by hand: per layer, part, head, the rows the next token
// needs (a window layer's last window - 1), through row().
std::vector<uint8_t> canonical(const KvCache& c) {
  std::vector<uint8_t> out;
  for (uint32_t l = 0; l < 3; ++l) {
    const uint32_t from = l == 1 ? 0 : c.rows() - std::min(c.rows(), kWindow - 1);
    for (KvPart p : {KvPart::kKey, KvPart::kValue}) {
      for (uint32_t h = 0; h < 2; ++h) {
        for (uint32_t r = from; r < c.rows(); ++r) {
          const auto row = c.row(l, p, h, r);
          out.insert(out.end(), row.begin(), row.end());
        }
      }
    }
  }
  return out;
}

std::vector<uint8_t> exported(const KvCache& c) {
  std::vector<uint8_t> out;
  EXPECT_TRUE(c.exportRows([&](std::span<const uint8_t> run) {
                 out.insert(out.end(), run.begin(), run.end());
                 return okStatus();
               }).ok());
  return out;
}

TEST(KvRing, WindowLayersKeepTheirLastRowsInARingOfFixedSize) {
  auto ring = makeCache(kRing);
  auto pages = makeCache(0);
  ASSERT_TRUE(ring && pages);
  const KvLayout& layout = ring->layout();
  EXPECT_TRUE(layout.inRing(0) && !layout.inRing(1) && layout.inRing(2));
  EXPECT_FALSE(pages->layout().inRing(0));
  // The ring holds the window layers' streams, the pages the global layer's.
  uint64_t ringBytes = 0;
  for (uint32_t l : {0u, 2u})
    ringBytes +=
        2u * kRing * (layout.rowBytes(l, KvPart::kKey) + layout.rowBytes(l, KvPart::kValue));
  EXPECT_EQ(layout.ringPageBytes(), ringBytes);
  EXPECT_EQ(layout.pageBytes(),
            2u * 4 * (layout.rowBytes(1, KvPart::kKey) + layout.rowBytes(1, KvPart::kValue)));

  for (uint32_t step : {3u, 1u, 2u, 3u, 3u, 1u, 3u, 3u, 2u, 2u}) {
    appendBoth(*ring, *pages, step);
    expectSameRows(*ring, *pages);
  }
  ASSERT_EQ(ring->rows(), 23u);
  // The ring has wrapped: the window layers hold the last 7 rows.
  EXPECT_EQ(ring->firstRow(0), 16u);
  EXPECT_EQ(ring->firstRow(1), 0u);
  EXPECT_EQ(ring->allocatedBytes(), layout.pagesFor(23) * layout.pageBytes() + ringBytes);
  EXPECT_EQ(ring->bytes().total(), ring->allocatedBytes());
  // Bytes held: the global layer's 23 rows, the window layers' 7.
  const KvBytes windowKey = ring->layerBytes(0, KvPart::kKey);
  EXPECT_EQ(windowKey.used(), 2u * 7 * layout.rowBytes(0, KvPart::kKey));
  EXPECT_EQ(windowKey.unused, 0u);
  EXPECT_EQ(ring->f16EquivalentBytes(), (23u + 7 + 7) * 2 * 2 * 64 * 2);

  // A step longer than the ring leaves room for is refused, nothing changed.
  const Status tooLong = ring->append(4);
  EXPECT_EQ(tooLong.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(ring->rows(), 23u);
  expectSameRows(*ring, *pages);
}

TEST(KvRing, TrimStopsWhereTheWindowLayersNoLongerHoldWhatTheNextTokenSees) {
  auto ring = makeCache(kRing);
  auto pages = makeCache(0);
  ASSERT_TRUE(ring && pages);
  for (int i = 0; i < 8; ++i) appendBoth(*ring, *pages, 3);  // 24 rows, rows 17.. held
  ASSERT_EQ(ring->firstRow(0), 17u);
  // Token n sees rows n - 4 .. n - 1 of a window layer: n >= 21.
  EXPECT_EQ(ring->trimFloor(), 21u);
  EXPECT_EQ(pages->trimFloor(), 0u);
  const Status tooFar = ring->trim(20);
  ASSERT_FALSE(tooFar.ok());
  EXPECT_EQ(tooFar.error().code, ErrorCode::kUnsupported);
  EXPECT_EQ(ring->rows(), 24u);
  ASSERT_TRUE(ring->trim(21).ok());
  ASSERT_TRUE(pages->trim(21).ok());
  expectSameRows(*ring, *pages);
  // Writing on from there overwrites the ring past the trimmed rows.
  appendBoth(*ring, *pages, 3);
  expectSameRows(*ring, *pages);
  EXPECT_EQ(exported(*ring), canonical(*pages));
  ASSERT_TRUE(ring->trim(0).ok());
  EXPECT_EQ(ring->allocatedBytes(), 0u);
  EXPECT_EQ(ring->trimFloor(), 0u);
}

TEST(KvRing, SavedRowsAreTheWindowLayersLastRowsWhateverTheRing) {
  auto ring = makeCache(kRing);
  auto pages = makeCache(0);
  ASSERT_TRUE(ring && pages);
  for (int i = 0; i < 6; ++i) appendBoth(*ring, *pages, 3);  // 18 rows
  const std::vector<uint8_t> saved = exported(*ring);
  EXPECT_EQ(saved, canonical(*pages));
  EXPECT_EQ(saved, exported(*pages));
  EXPECT_EQ(saved.size(), ring->layout().canonicalBytes(18));

  // Restored into either: the same rows, and the window layers hold exactly
  // what the next token sees.
  for (uint32_t ringRows : {kRing, 0u}) {
    auto restored = makeCache(ringRows);
    ASSERT_TRUE(restored);
    size_t at = 0;
    ASSERT_TRUE(restored
                    ->importRows(18,
                                 [&](std::span<uint8_t> out) {
                                   std::copy_n(saved.begin() + static_cast<ptrdiff_t>(at),
                                               out.size(), out.begin());
                                   at += out.size();
                                   return okStatus();
                                 })
                    .ok());
    EXPECT_EQ(at, saved.size());
    EXPECT_EQ(restored->firstRow(0), 14u);
    EXPECT_EQ(restored->trimFloor(), 18u);
    EXPECT_EQ(exported(*restored), saved);
    // It goes on as the original does.
    appendBoth(*restored, *pages, 2);
    ASSERT_TRUE(ring->append(2).ok());
    EXPECT_EQ(exported(*restored), canonical(*pages));
    ASSERT_TRUE(ring->trim(18).ok());
    ASSERT_TRUE(pages->trim(18).ok());
  }

  // Recoded into other schemes, a ring cache holds its source's rows.
  const std::vector<LayerSchemes> f16(3);
  auto recoded = KvCache::create(geometry(kRing), f16, 7);
  ASSERT_TRUE(recoded.ok());
  ASSERT_TRUE((*recoded)->appendRecoded(*ring).ok());
  EXPECT_EQ((*recoded)->firstRow(0), ring->firstRow(0));
  std::vector<float> a(64), b(64);
  for (uint32_t r = ring->firstRow(0); r < 18; ++r) {
    ring->read(2, KvPart::kValue, 1, r, a);
    (*recoded)->read(2, KvPart::kValue, 1, r, b);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-3f * (1 + std::abs(a[i])));
  }
}

TEST(KvRing, ARingThatCannotHoldTheWindowIsRefused) {
  EXPECT_FALSE(KvCache::create(geometry(kWindow - 2), layers()).ok());
  KvGeometry g = geometry(kRing);
  g.windowLayers.pop_back();
  EXPECT_FALSE(KvCache::create(g, layers()).ok());
  g = geometry(kRing);
  g.window = 1;
  EXPECT_FALSE(KvCache::create(g, layers()).ok());
}

}  // namespace
}  // namespace kvscope::kv
