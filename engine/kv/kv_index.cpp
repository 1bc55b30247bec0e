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

// x / 2^e rounded to nearest, ties to even; a non-finite x counts as 0.
int nearestCode(float x, int e) {
  if (!std::isfinite(x)) return 0;
  return static_cast<int>(std::clamp(std::nearbyint(std::ldexp(x, -e)), -127.0f, 127.0f));
}

// sum / n rounded to nearest, halves away from zero.
int roundedMean(int32_t sum, int32_t n) {
  return sum >= 0 ? (2 * sum + n) / (2 * n) : -((-2 * sum + n) / (2 * n));
}

// sqrt(v) / n rounded to nearest, halves up: the largest s with
// n^2 (2s - 1)^2 <= 4v, found from the float estimate in exact integers.
int roundedRootOver(int64_t v, int64_t n) {
  int64_t s = std::llround(std::sqrt(static_cast<double>(v)) / static_cast<double>(n));
  while (s > 0 && n * n * (2 * s - 1) * (2 * s - 1) > 4 * v) --s;
  while (n * n * (2 * s + 1) * (2 * s + 1) <= 4 * v) ++s;
  return static_cast<int>(s);
}

}  // namespace

uint32_t KvIndex::entryBytesFor(uint32_t headDim) {
  return (2 * headDim + 1 + 3) / 4 * 4;  // two codes per channel and e, padded to 4
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

KvIndex::KvIndex(std::span<const KvLayerShape> layers, uint32_t pageRows, PageScore score)
    : m_layers(layers.begin(), layers.end()),
      m_pageRows(pageRows),
      m_score(score),
      m_entries(layers.size()) {
  for (const KvLayerShape& l : m_layers) {
    m_rows.emplace_back(l.nHeadKv, 0);
    if (score == PageScore::kMeanStd) {
      const OpenPage empty{std::vector<float>(size_t{pageRows} * l.headDim),
                           std::vector<int32_t>(l.headDim), std::vector<int32_t>(l.headDim),
                           kMinExponent};
      m_open.emplace_back(l.nHeadKv, empty);
    }
  }
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
  const size_t needed = (size_t{rows / m_pageRows} + 1) * pageBytes(layer);
  if (m_entries[layer].size() < needed) m_entries[layer].resize(needed, 0);
  if (m_score == PageScore::kMeanStd) {
    addMoments(layer, head, rows, key);
  } else {
    addBound(layer, head, rows, key);
  }
  ++rows;
}

void KvIndex::addBound(uint32_t layer, uint32_t head, uint32_t rows, const float* key) {
  const uint32_t d = dim(layer);
  int8_t* lo = entry(layer, rows / m_pageRows, head);
  int8_t* hi = lo + d;
  int8_t& e = hi[d];
  const int rowE = exponentFor(key, d, 127.0f);
  if (rows % m_pageRows == 0) {
    e = static_cast<int8_t>(rowE);
    for (uint32_t i = 0; i < d; ++i) {
      lo[i] = code(key[i], e, false);
      hi[i] = code(key[i], e, true);
    }
    return;
  }
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

void KvIndex::addMoments(uint32_t layer, uint32_t head, uint32_t rows, const float* key) {
  const uint32_t d = dim(layer), n = rows % m_pageRows + 1;
  OpenPage& open = m_open[layer][head];
  std::copy_n(key, d, &open.rows[size_t{n - 1} * d]);
  const int rowE = exponentFor(key, d, 127.0f);
  if (n == 1 || rowE > open.e) {
    // A new page, or a coarser grid: every row's codes again.
    open.e = rowE;
    std::fill(open.sum.begin(), open.sum.end(), 0);
    std::fill(open.squares.begin(), open.squares.end(), 0);
    for (uint32_t r = 0; r + 1 < n; ++r) accumulate(open, &open.rows[size_t{r} * d], d);
  }
  accumulate(open, key, d);  // the grid's own rows: only the new row's codes
  int8_t* mean = entry(layer, rows / m_pageRows, head);
  int8_t* stdev = mean + d;
  for (uint32_t i = 0; i < d; ++i) {
    mean[i] = static_cast<int8_t>(roundedMean(open.sum[i], static_cast<int32_t>(n)));
    const int64_t spread = int64_t{n} * open.squares[i] - int64_t{open.sum[i]} * open.sum[i];
    stdev[i] = static_cast<int8_t>(roundedRootOver(spread, n));  // spread: n^2 variance, >= 0
  }
  stdev[d] = static_cast<int8_t>(open.e);
}

void KvIndex::accumulate(OpenPage& open, const float* row, uint32_t d) {
  for (uint32_t i = 0; i < d; ++i) {
    const int32_t c = nearestCode(row[i], open.e);
    open.sum[i] += c;
    open.squares[i] += c * c;
  }
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
    const int8_t* a = entry(layer, p, head);  // lo, or the mean
    const int8_t* b = a + d;                  // hi, or the standard deviation
    float s = 0.0f;
    if (m_score == PageScore::kMeanStd) {
      float spread = 0.0f;
      for (uint32_t i = 0; i < d; ++i) {
        s += q[i] * static_cast<float>(a[i]);
        const float t = q[i] * static_cast<float>(b[i]);
        spread += t * t;
      }
      s += kStdWeight * std::sqrt(spread);
    } else {
      for (uint32_t i = 0; i < d; ++i)
        s += std::max(q[i] * static_cast<float>(a[i]), q[i] * static_cast<float>(b[i]));
    }
    s = std::ldexp(s, b[d]);
    scores[p] = keepMax ? std::max(scores[p], s) : s;
  }
}

uint64_t KvIndex::layerBytes(uint32_t layer) const {
  const uint32_t rows = m_rows[layer].empty() ? 0 : std::ranges::max(m_rows[layer]);
  return uint64_t{(rows + m_pageRows - 1) / m_pageRows} * pageBytes(layer);
}

}  // namespace kvscope::kv
