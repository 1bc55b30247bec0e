// KvCache: per-stream seeds, accounting == allocated bytes, append/trim/
// offsets across pages, recoding, and save/load with validation.
#include <random>
#include <sstream>
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
  for (uint32_t l = 0; l < g.nLayer; ++l)
    for (KvPart p : {KvPart::kKey, KvPart::kValue})
      for (uint32_t h = 0; h < g.nHeadKv; ++h)
        for (uint32_t r = from; r < c.rows(); ++r)
          c.write(l, p, h, r,
                  rowValues(g.headDim, ((l * 2 + static_cast<uint32_t>(p)) * 8 + h) * 1000 + r));
}

TEST(KvCache, SchemesAndSeeds) {
  auto c = makeCache({3, 2, 80, 4});
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
  EXPECT_FALSE(KvCache::create({3, 2, 80, 4}, two).ok());
  const std::vector<LayerSchemes> bad = {{"f16", "nope"}};
  EXPECT_FALSE(KvCache::create({1, 2, 80, 4}, bad).ok());
  EXPECT_FALSE(KvCache::create({1, 0, 80, 4}, std::vector<LayerSchemes>(1)).ok());
}

TEST(KvCache, AccountingEqualsAllocatedBytes) {
  for (uint32_t dim : {8u, 48u, 80u, 100u}) {
    auto c = makeCache({3, 2, dim, 4});
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
  auto c = makeCache({3, 2, 48, 4});
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
  auto c = makeCache({3, 1, 64, 4});
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
  auto source = KvCache::create({3, 2, 48, 4}, f16, 99);
  ASSERT_TRUE(source.ok());
  ASSERT_TRUE((*source)->append(6).ok());
  fill(**source, 0);
  auto target = makeCache({3, 2, 48, 4});
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

TEST(KvCache, SaveLoadRoundTrip) {
  auto c = makeCache({3, 2, 80, 4}, 12345);
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->append(6).ok());
  fill(*c, 0);
  std::stringstream s;
  ASSERT_TRUE(c->save(s).ok());
  auto loaded = KvCache::load(s);
  ASSERT_TRUE(loaded.ok()) << loaded.error().describe();
  const KvCache& l = **loaded;
  EXPECT_EQ(l.rows(), 6u);
  EXPECT_EQ(l.cacheSeed(), 12345u);
  EXPECT_EQ(l.layerSchemes(), mixedLayers());
  EXPECT_EQ(l.geometry().rowsPerPage, 4u);
  std::vector<float> a(80), b(80);
  for (uint32_t layer = 0; layer < 3; ++layer)
    for (KvPart p : {KvPart::kKey, KvPart::kValue})
      for (uint32_t h = 0; h < 2; ++h)
        for (uint32_t r = 0; r < 6; ++r) {
          const auto x = c->row(layer, p, h, r);
          const auto y = l.row(layer, p, h, r);
          ASSERT_TRUE(std::equal(x.begin(), x.end(), y.begin(), y.end()));
          c->read(layer, p, h, r, a);
          l.read(layer, p, h, r, b);
          ASSERT_EQ(a, b);  // same seeds, same rotations
        }
}

TEST(KvCache, LoadRejectsBadStreams) {
  auto c = makeCache({3, 2, 48, 4});
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->append(3).ok());
  fill(*c, 0);
  std::stringstream s;
  ASSERT_TRUE(c->save(s).ok());
  const std::string bytes = s.str();
  auto loadFrom = [](const std::string& data) {
    std::stringstream in(data);
    return KvCache::load(in);
  };
  for (size_t cut :
       {size_t{0}, size_t{3}, size_t{10}, size_t{40}, bytes.size() / 2, bytes.size() - 1}) {
    auto r = loadFrom(bytes.substr(0, cut));
    ASSERT_FALSE(r.ok()) << cut;
    EXPECT_EQ(r.error().code, ErrorCode::kBadFile) << cut;
  }
  EXPECT_FALSE(loadFrom(bytes + "x").ok());
  std::string badMagic = bytes;
  badMagic[0] = 'X';
  EXPECT_FALSE(loadFrom(badMagic).ok());
  std::string badVersion = bytes;
  badVersion[4] = 7;
  EXPECT_FALSE(loadFrom(badVersion).ok());
  std::string badDim = bytes;
  badDim[16] = 0;  // headDim = 0 (low byte of 48)
  EXPECT_FALSE(loadFrom(badDim).ok());
  std::string badScheme = bytes;
  badScheme[33] = 'x';  // first name "f16" -> "x16"
  EXPECT_FALSE(loadFrom(badScheme).ok());
  std::string badSeed = bytes;
  badSeed[36] ^= 1;  // first stream seed
  EXPECT_FALSE(loadFrom(badSeed).ok());
  // The row count sits after the 32-byte header and the 6 name/seed records
  // (sum of name lengths 31, plus 6 x (1 + 8)): a huge count must be refused
  // before allocating.
  std::string hugeRows = bytes;
  const size_t rowsAt = 32 + 31 + 6 * 9;
  ASSERT_EQ(static_cast<uint8_t>(hugeRows[rowsAt]), 3);
  hugeRows[rowsAt + 2] = static_cast<char>(0xff);
  auto huge = loadFrom(hugeRows);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.error().code, ErrorCode::kBadFile);
  EXPECT_TRUE(loadFrom(bytes).ok());
}

}  // namespace
}  // namespace kvscope::kv
