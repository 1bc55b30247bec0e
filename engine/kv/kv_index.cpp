#include "kv/kv_index.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

namespace kvscope::kv {
namespace {

constexpr int kMinExponent = -100, kMaxExponent = 100;

// The smallest e (within the limits) with |x| <= top * 2^e for every x of the row.
int exponentFor(const float* x, uint32_t n, float top) {
  float m = 0.0f;
  for (uint32_t i = 0; i < n; ++i)
    if (std::isfinite(x[i])) m = std::max(m, std::fabs(x[i]));
  if (m == 0.0f) return kMinExponent;
  int e = std::clamp(static_cast<int>(std::ceil(std::log2(m / top))), kMinExponent, kMaxExponent);
  while (e < kMaxExponent && top * std::ldexp(1.0f, e) < m) ++e;
  while (e > kMinExponent && top * std::ldexp(1.0f, e - 1) >= m) --e;
  return e;
}

// x / 2^e rounded down (or up), as a code; a NaN counts as 0.
int8_t code(float x, int e, bool up) {
  if (std::isnan(x)) return 0;
  const float v = std::ldexp(x, -e);
  return static_cast<int8_t>(std::clamp(up ? std::ceil(v) : std::floor(v), -127.0f, 127.0f));
}

}  // namespace

uint32_t KvIndex::entryBytesFor(uint32_t headDim) {
  return (2 * headDim + 1 + 3) / 4 * 4;  // lo, hi and the exponent, padded to 4
}

double KvIndex::bytesPerRow(uint32_t headDim, const IndexerOptions& options) {
  if (!options.enabled()) return 0.0;
  return static_cast<double>(entryBytesFor(headDim)) / options.pageRows;
}

double KvIndex::sidecarBytesPerToken(const KvGeometry& g, const IndexerOptions& options) {
  double bytes = 0.0;
  for (uint32_t l = 0; l < g.nLayer(); ++l) {
    if (!g.isWindow(l)) bytes += bytesPerRow(g.headDim(l), options) * g.nHeadKv(l);
  }
  return bytes;
}

KvIndex::KvIndex(std::span<const KvLayerShape> layers, uint32_t pageRows)
    : m_layers(layers.begin(), layers.end()), m_pageRows(pageRows), m_entries(layers.size()) {
  for (const KvLayerShape& l : m_layers) m_rows.emplace_back(l.nHeadKv, 0);
}

int8_t* KvIndex::entry(uint32_t layer, uint32_t page, uint32_t head) {
  return m_entries[layer].data() + page * pageBytes(layer) + size_t{head} * entryBytes(layer);
}

const int8_t* KvIndex::entry(uint32_t layer, uint32_t page, uint32_t head) const {
  return const_cast<KvIndex*>(this)->entry(layer, page, head);
}

void KvIndex::add(uint32_t layer, uint32_t head, uint32_t index, const float* key) {
  uint32_t& rows = m_rows[layer][head];
  assert(index == rows);
  (void)index;
  const uint32_t page = rows / m_pageRows, d = dim(layer);
  const size_t needed = (size_t{page} + 1) * pageBytes(layer);
  if (m_entries[layer].size() < needed) m_entries[layer].resize(needed, 0);
  int8_t* lo = entry(layer, page, head);
  int8_t* hi = lo + d;
  int8_t& e = hi[d];
  const int rowE = exponentFor(key, d, 127.0f);
  if (rows % m_pageRows == 0) {
    e = static_cast<int8_t>(rowE);
    for (uint32_t i = 0; i < d; ++i) {
      lo[i] = code(key[i], e, false);
      hi[i] = code(key[i], e, true);
    }
  } else {
    if (rowE > e) {
      // Coarsen: floor(lo / 2^s) and ceil(hi / 2^s) keep every earlier row inside.
      const int s = rowE - e;
      for (uint32_t i = 0; i < d; ++i) {
        lo[i] = static_cast<int8_t>(s >= 8 ? (lo[i] < 0 ? -1 : 0) : lo[i] >> s);
        hi[i] = static_cast<int8_t>(s >= 8 ? (hi[i] > 0 ? 1 : 0) : -((-hi[i]) >> s));
      }
      e = static_cast<int8_t>(rowE);
    }
    for (uint32_t i = 0; i < d; ++i) {
      lo[i] = std::min(lo[i], code(key[i], e, false));
      hi[i] = std::max(hi[i], code(key[i], e, true));
    }
  }
  ++rows;
}

void KvIndex::truncate(uint32_t n) {
  const uint32_t pages = n / m_pageRows;  // whole pages kept as they are
  for (uint32_t l = 0; l < m_layers.size(); ++l) {
    for (uint32_t& rows : m_rows[l])
      if (rows > n) rows = std::min(rows, pages * m_pageRows);
    const size_t keep = size_t{pages + (n % m_pageRows ? 1 : 0)} * pageBytes(l);
    if (m_entries[l].size() > keep) m_entries[l].resize(keep);
  }
}

void KvIndex::scorePages(uint32_t layer, uint32_t head, const float* q, uint32_t pages,
                         float* scores, bool keepMax) const {
  const uint32_t d = dim(layer);
  for (uint32_t p = 0; p < pages; ++p) {
    const int8_t* lo = entry(layer, p, head);
    const int8_t* hi = lo + d;
    float s = 0.0f;
    for (uint32_t i = 0; i < d; ++i)
      s += std::max(q[i] * static_cast<float>(lo[i]), q[i] * static_cast<float>(hi[i]));
    s = std::ldexp(s, hi[d]);
    scores[p] = keepMax ? std::max(scores[p], s) : s;
  }
}

uint64_t KvIndex::layerBytes(uint32_t layer) const {
  const uint32_t rows = m_rows[layer].empty() ? 0 : std::ranges::max(m_rows[layer]);
  return uint64_t{(rows + m_pageRows - 1) / m_pageRows} * pageBytes(layer);
}

}  // namespace kvscope::kv
