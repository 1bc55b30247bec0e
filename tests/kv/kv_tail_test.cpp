// The precision tail of kv::KvCache (tail=N): which rows a query reads from
// the f16 copies, what they hold (checked against the written values, rounded
// to f16 here, and for a rotated scheme rotated here by its matrix in double),
// what a rewind, a recode and a restore leave of it, and its bytes.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "core/float_convert.h"
#include "kv/kv_cache.h"

namespace kvscope::kv {
namespace {

constexpr uint32_t kHeads = 2, kDim = 64, kTail = 8, kStep = 4;
constexpr uint32_t kSlots = kTail + kStep - 1;  // the first query of a step of 4 finds its tail

// Keys q4_0 (unrotated: the tail holds the values themselves), values
// turbo4 (rotated: the tail holds R x).
std::unique_ptr<KvCache> tailCache(std::vector<LayerSchemes> layers = {{"q4_0", "turbo4"}}) {
  KvGeometry g = KvGeometry::uniform(1, kHeads, kDim, 16);
  g.tailRows = kTail;
  g.tailRingRows = kSlots;
  auto c = KvCache::create(g, layers, 3);
  EXPECT_TRUE(c.ok()) << c.error().describe();
  return c.ok() ? std::move(*c) : nullptr;
}

std::vector<float> values(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(kDim);
  for (float& x : v) x = normal(rng);
  return v;
}

uint32_t seedOf(KvPart p, uint32_t head, uint32_t row, uint32_t round) {
  return ((static_cast<uint32_t>(p) * kHeads + head) * 1000 + row) * 7 + round;
}

// Appends rows up to `rows` in steps of kStep, writing values seeded by
// (part, head, row, round).
void grow(KvCache& c, uint32_t rows, uint32_t round = 0) {
  while (c.rows() < rows) {
    const uint32_t from = c.rows(), n = std::min(kStep, rows - from);
    ASSERT_TRUE(c.append(n).ok());
    for (uint32_t r = from; r < from + n; ++r)
      for (KvPart p : {KvPart::kKey, KvPart::kValue})
        for (uint32_t h = 0; h < kHeads; ++h) c.write(0, p, h, r, values(seedOf(p, h, r, round)));
  }
}

// What row `row` of (part, head) must read as from the tail: the written
// values rounded to f16, after the scheme's rotation (in double) if it has one.
std::vector<float> expectedTailRow(const KvCache& c, KvPart p, uint32_t head, uint32_t row,
                                   uint32_t round) {
  const std::vector<float> x = values(seedOf(p, head, row, round));
  std::vector<float> y(kDim);
  const KvScheme& s = c.scheme(0, p);
  for (uint32_t i = 0; i < kDim; ++i) {
    double v = x[i];
    if (s.rotated()) {
      v = 0.0;
      for (uint32_t k = 0; k < kDim; ++k) v += double{s.rotation()[i * kDim + k]} * x[k];
    }
    y[i] = static_cast<float>(v);
  }
  return y;
}

// Rows [0, p] as the query at p reads them: rows >= tailFrom from the tail
// (the written values, to f16 rounding), the rest exactly as their codes.
void expectQueryReads(const KvCache& c, uint32_t p, uint32_t tailFrom, uint32_t round = 0,
                      uint32_t roundFrom = 0) {
  std::vector<float> got(kDim), codes(kDim);
  for (KvPart part : {KvPart::kKey, KvPart::kValue}) {
    for (uint32_t h = 0; h < kHeads; ++h) {
      for (uint32_t j = 0; j <= p; ++j) {
        c.readAttended(0, part, h, j, p, got);
        if (j < tailFrom) {
          c.readRotated(0, part, h, j, codes);
          EXPECT_EQ(got, codes) << "query " << p << " row " << j << " part "
                                << static_cast<int>(part);
          continue;
        }
        const auto want = expectedTailRow(c, part, h, j, j >= roundFrom ? round : 0);
        for (uint32_t i = 0; i < kDim; ++i) {
          // f16 rounding (relative 2^-11), and the rotation's float error.
          EXPECT_NEAR(got[i], want[i], std::fabs(want[i]) / 2048 + 1e-5)
              << "query " << p << " row " << j << " part " << static_cast<int>(part) << " value "
              << i;
        }
      }
    }
  }
}

TEST(KvTail, EachQueryReadsItsLastRowsFromTheTailAndOlderOnesFromTheirCodes) {
  auto c = tailCache();
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->hasTail(0));
  grow(*c, 40);
  // The last step's queries (rows 36..39): each its own last 8 rows.
  for (uint32_t p = 36; p < 40; ++p) {
    EXPECT_EQ(c->tailStart(0, p), p + 1 - kTail);
    expectQueryReads(*c, p, p + 1 - kTail);
  }
  // The codes are those of the full-precision rows, not of their f16 copies:
  // q4_0 keys decode as the scheme decodes the written values' encoding.
  std::vector<uint8_t> encoded(c->rowBytes(0, KvPart::kKey));
  c->scheme(0, KvPart::kKey).encode(values(seedOf(KvPart::kKey, 1, 39, 0)), encoded);
  const auto stored = c->row(0, KvPart::kKey, 1, 39);
  EXPECT_TRUE(std::equal(encoded.begin(), encoded.end(), stored.begin()));
}

TEST(KvTail, ALayerWithOneCompressedPartKeepsBothAndALayerAtF16None) {
  KvGeometry g = KvGeometry::uniform(2, kHeads, kDim, 16);
  g.tailRows = kTail;
  g.tailRingRows = kSlots;
  auto c = KvCache::create(g, std::vector<LayerSchemes>{{"f16", "f16"}, {"f16", "q8_0"}}, 3);
  ASSERT_TRUE(c.ok()) << c.error().describe();
  KvCache& cache = **c;
  EXPECT_FALSE(cache.hasTail(0));
  EXPECT_TRUE(cache.hasTail(1));
  // Layer 1's f16 keys are in the tail too (the Vulkan kernels read a
  // layer's tail rows as one page): both parts of every head, one ring each.
  const uint64_t ring = uint64_t{kHeads} * kSlots * kDim * 2;
  EXPECT_EQ(cache.layout().tailBytes(), 2 * ring);
  ASSERT_TRUE(cache.append(kStep).ok());
  for (uint32_t r = 0; r < kStep; ++r)
    for (KvPart p : {KvPart::kKey, KvPart::kValue})
      for (uint32_t h = 0; h < kHeads; ++h) cache.write(1, p, h, r, values(seedOf(p, h, r, 0)));
  std::vector<float> fromTail(kDim), stored(kDim);
  cache.readAttended(1, KvPart::kKey, 1, 2, 3, fromTail);
  cache.read(1, KvPart::kKey, 1, 2, stored);
  EXPECT_EQ(fromTail, stored);  // f16 both ways
  EXPECT_EQ(cache.layerBytes(1, KvPart::kKey).tail, uint64_t{kHeads} * kStep * kDim * 2);
  EXPECT_EQ(cache.layerBytes(0, KvPart::kKey).tail, 0u);
  EXPECT_EQ(cache.bytes().total(), cache.allocatedBytes());
}

TEST(KvTail, ARewindReadsTheRowsTheRingLostFromTheirCodesUntilItRefills) {
  auto c = tailCache();
  ASSERT_TRUE(c);
  grow(*c, 40);
  // The ring of 11 slots holds rows 29..39; back to 30 rows, row 29 is the
  // oldest it still holds.
  ASSERT_TRUE(c->trim(30).ok());
  EXPECT_EQ(c->tailStart(0, 29), 29u);
  expectQueryReads(*c, 29, 29);
  // New rows 30..35 (other values) overwrite slots of rows 19..24 only.
  grow(*c, 36, 1);
  EXPECT_EQ(c->tailStart(0, 35), 29u);
  expectQueryReads(*c, 35, 29, 1, 30);
  // Once the queries' own tails are past the floor, it no longer shows.
  grow(*c, 44, 1);
  EXPECT_EQ(c->tailStart(0, 43), 36u);
  expectQueryReads(*c, 43, 36, 1, 30);
  // Emptied, it starts over.
  ASSERT_TRUE(c->trim(0).ok());
  grow(*c, 12, 2);
  expectQueryReads(*c, 11, 4, 2, 0);
}

TEST(KvTail, ARecodedCacheStartsWithAnEmptyTail) {
  auto c = tailCache();
  auto recoded = tailCache({{"q8_0", "q4_0r"}});
  ASSERT_TRUE(c && recoded);
  grow(*c, 20);
  ASSERT_TRUE(recoded->appendRecoded(*c).ok());
  EXPECT_EQ(recoded->tailStart(0, 19), 20u);
  EXPECT_EQ(recoded->tailHeld(), 0u);
  expectQueryReads(*recoded, 19, 20);
}

// A two-phase cache's first compression recodes f16 rows: the tail is then
// as the full-precision rows would have made it.
TEST(KvTail, ARecodeFromF16RowsFillsTheTail) {
  auto f16 = KvCache::create(KvGeometry::uniform(1, kHeads, kDim, 16),
                             std::vector<LayerSchemes>{{"f16", "f16"}}, 3);
  ASSERT_TRUE(f16.ok());
  grow(**f16, 20);
  auto recoded = tailCache({{"q8_0", "q4_0"}});
  ASSERT_TRUE(recoded);
  ASSERT_TRUE(recoded->appendRecoded(**f16).ok());
  EXPECT_EQ(recoded->tailStart(0, 19), 12u);
  EXPECT_EQ(recoded->tailHeld(), kTail);
  expectQueryReads(*recoded, 19, 12);
}

TEST(KvTail, ASavedTailRestoresTheSameReads) {
  auto c = tailCache();
  ASSERT_TRUE(c);
  grow(*c, 38);
  std::vector<uint8_t> rows, tail;
  const auto into = [](std::vector<uint8_t>& out) {
    return [&out](std::span<const uint8_t> b) {
      out.insert(out.end(), b.begin(), b.end());
      return okStatus();
    };
  };
  ASSERT_TRUE(c->exportRows(into(rows)).ok());
  ASSERT_TRUE(c->exportTail(into(tail)).ok());
  EXPECT_EQ(c->tailHeld(), kTail);
  EXPECT_EQ(tail.size(), c->tailBytes(38, kTail));
  EXPECT_EQ(tail.size(), size_t{2} * kHeads * kTail * kDim * 2);

  const auto from = [](const std::vector<uint8_t>& in) {
    return [&in, at = size_t{0}](std::span<uint8_t> b) mutable {
      std::copy_n(in.begin() + static_cast<std::ptrdiff_t>(at), b.size(), b.begin());
      at += b.size();
      return okStatus();
    };
  };
  auto restored = tailCache();
  ASSERT_TRUE(restored);
  ASSERT_TRUE(restored->importRows(38, from(rows)).ok());
  // Before its tail comes back, every row reads as its codes.
  expectQueryReads(*restored, 37, 38);
  ASSERT_TRUE(restored->importTail(kTail, from(tail)).ok());
  expectQueryReads(*restored, 37, 30);
  grow(*restored, 40, 0);
  grow(*c, 40, 0);
  std::vector<float> a(kDim), b(kDim);
  for (uint32_t j = 0; j < 40; ++j) {
    c->readAttended(0, KvPart::kValue, 1, j, 39, a);
    restored->readAttended(0, KvPart::kValue, 1, j, 39, b);
    EXPECT_EQ(a, b) << j;
  }

  // A tail longer than the cache keeps, or one given twice, is refused.
  auto other = tailCache();
  ASSERT_TRUE(other->importRows(38, from(rows)).ok());
  EXPECT_FALSE(other->importTail(kTail + 1, from(tail)).ok());
  ASSERT_TRUE(other->importTail(kTail, from(tail)).ok());
  EXPECT_FALSE(other->importTail(kTail, from(tail)).ok());
}

TEST(KvTail, ItsBytesAreTheRowsTheNextQueryReadsAndTheRestOfTheRingIsUnused) {
  auto c = tailCache();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->bytes().tail, 0u);
  const uint64_t row = uint64_t{kHeads} * kDim * 2;  // one f16 row of every head
  for (uint32_t rows : {3u, 8u, 20u}) {
    grow(*c, rows);
    const uint32_t held = std::min(rows, kTail);
    EXPECT_EQ(c->tailHeld(), held);
    for (KvPart p : {KvPart::kKey, KvPart::kValue}) {
      const KvBytes b = c->layerBytes(0, p);
      EXPECT_EQ(b.tail, held * row);
      EXPECT_EQ(b.unused, (c->capacity() - rows) * uint64_t{kHeads} * c->rowBytes(0, p) +
                              (kSlots - held) * row);
    }
    EXPECT_EQ(c->bytes().total(), c->allocatedBytes());
  }
}

TEST(KvTail, AStepLongerThanTheRingAllowsIsRefused) {
  auto c = tailCache();
  ASSERT_TRUE(c);
  // Up to the ring's size the rows all fit; past it a step of 5 would
  // overwrite rows its first query reads from the tail.
  EXPECT_TRUE(c->append(kSlots).ok());
  const Status st = c->append(kStep + 1);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("precision tail"), std::string::npos);
  EXPECT_TRUE(c->append(kStep).ok());
  KvGeometry g = KvGeometry::uniform(1, kHeads, kDim, 16);
  g.tailRows = kTail;
  g.tailRingRows = kTail - 1;
  EXPECT_FALSE(KvCache::create(g, std::vector<LayerSchemes>{{"q4_0", "q4_0"}}).ok());
}

}  // namespace
}  // namespace kvscope::kv
