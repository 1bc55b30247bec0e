#include "kv/kv_cache.h"

#include <algorithm>
#include <cassert>
#include <new>

namespace kvscope::kv {

Expected<std::unique_ptr<KvCache>> KvCache::create(KvGeometry geometry,
                                                   std::span<const LayerSchemes> layers,
                                                   uint64_t cacheSeed) {
  KVS_ASSIGN_OR_RETURN(KvLayout layout, KvLayout::create(geometry, layers, cacheSeed));
  return std::make_unique<KvCache>(std::move(layout));
}

Status KvCache::append(uint32_t n) {
  const uint64_t needed = uint64_t{m_rows} + n;
  const size_t before = m_pages.size();
  while (capacity() < needed) {
    auto* page = new (std::nothrow) uint8_t[m_layout.pageBytes()];
    if (!page) {
      m_pages.resize(before);
      return makeError(ErrorCode::kOutOfMemory,
                       "cannot grow the KV cache to {} tokens ({:.1f} MiB more needed)", needed,
                       static_cast<double>(m_layout.pageBytes()) / (1 << 20));
    }
    m_pages.emplace_back(page);
  }
  m_rows = static_cast<uint32_t>(needed);
  return okStatus();
}

Status KvCache::trim(uint32_t n) {
  if (n > m_rows)
    return makeError(ErrorCode::kInternal, "cannot trim a cache of {} rows to {}", m_rows, n);
  m_rows = n;
  if (m_index) {
    // The page left partial is rebuilt from its rows, as appending made it.
    m_index->truncate(n);
    for (uint32_t l = 0; l < geometry().nLayer; ++l)
      for (uint32_t h = 0; h < geometry().nHeadKv; ++h)
        for (uint32_t r = m_index->rows(l, h); r < n; ++r) indexRow(l, h, r);
  }
  m_pages.resize(m_layout.pagesFor(n));
  return okStatus();
}

Status KvCache::appendRecoded(const KvCache& source) {
  const KvGeometry& g = source.geometry();
  if (g.nLayer != geometry().nLayer || g.nHeadKv != geometry().nHeadKv ||
      g.headDim != geometry().headDim) {
    return makeError(ErrorCode::kInternal, "cannot recode a KV cache of another geometry");
  }
  const uint32_t first = m_rows;
  KVS_TRY(append(source.rows()));
  std::vector<float> values(g.headDim);
  for (uint32_t l = 0; l < g.nLayer; ++l) {
    for (KvPart p : {KvPart::kKey, KvPart::kValue}) {
      for (uint32_t h = 0; h < g.nHeadKv; ++h) {
        for (uint32_t r = 0; r < source.rows(); ++r) {
          source.read(l, p, h, r, values);
          write(l, p, h, first + r, values);
        }
      }
    }
  }
  return okStatus();
}

std::span<uint8_t> KvCache::row(uint32_t layer, KvPart part, uint32_t head, uint32_t index) {
  assert(layer < geometry().nLayer && head < geometry().nHeadKv && index < m_rows);
  uint8_t* page = m_pages[index / geometry().rowsPerPage].get();
  return {page + m_layout.rowOffset(layer, part, head, index), rowBytes(layer, part)};
}

std::span<const uint8_t> KvCache::row(uint32_t layer, KvPart part, uint32_t head,
                                      uint32_t index) const {
  return const_cast<KvCache*>(this)->row(layer, part, head, index);
}

void KvCache::write(uint32_t layer, KvPart part, uint32_t head, uint32_t index,
                    std::span<const float> values) {
  assert(values.size() == geometry().headDim);
  scheme(layer, part).encode(values, row(layer, part, head, index));
  if (m_index && part == KvPart::kKey) indexRow(layer, head, index);
}

void KvCache::indexRow(uint32_t layer, uint32_t head, uint32_t index) {
  m_indexRow.resize(geometry().headDim);
  readRotated(layer, KvPart::kKey, head, index, m_indexRow);
  m_index->add(layer, head, index, m_indexRow.data());
}

void KvCache::enableIndex(const IndexerOptions& options) {
  if (!options.enabled()) {
    m_index.reset();
    return;
  }
  if (m_index && m_index->pageRows() == options.pageRows) return;
  m_index = std::make_unique<KvIndex>(geometry().nLayer, geometry().nHeadKv, geometry().headDim,
                                      options.pageRows);
  rebuildIndex();
}

void KvCache::rebuildIndex() {
  if (!m_index) return;
  m_index = std::make_unique<KvIndex>(geometry().nLayer, geometry().nHeadKv, geometry().headDim,
                                      m_index->pageRows());
  for (uint32_t l = 0; l < geometry().nLayer; ++l)
    for (uint32_t h = 0; h < geometry().nHeadKv; ++h)
      for (uint32_t r = 0; r < m_rows; ++r) indexRow(l, h, r);
}

// One span per (layer, part, head, page): a head's rows are contiguous
// within a page, so this is the canonical order in as few pieces as the
// pages allow.
template <typename Span, typename Pages, typename F>
static Status forEachRun(const KvLayout& layout, Pages& pages, uint32_t rows, F&& f) {
  const KvGeometry& g = layout.geometry();
  for (uint32_t l = 0; l < g.nLayer; ++l) {
    for (KvPart p : {KvPart::kKey, KvPart::kValue}) {
      for (uint32_t h = 0; h < g.nHeadKv; ++h) {
        for (uint32_t first = 0; first < rows; first += g.rowsPerPage) {
          const uint32_t count = std::min(g.rowsPerPage, rows - first);
          auto* page = pages[first / g.rowsPerPage].get();
          KVS_TRY(f(Span(page + layout.rowOffset(l, p, h, first),
                         size_t{count} * layout.rowBytes(l, p))));
        }
      }
    }
  }
  return okStatus();
}

Status KvCache::importRows(uint32_t rows, const std::function<Status(std::span<uint8_t>)>& read) {
  if (m_rows != 0)
    return makeError(ErrorCode::kInternal, "rows can only be imported into an empty KV cache");
  KVS_TRY(append(rows));
  const Status status = forEachRun<std::span<uint8_t>>(m_layout, m_pages, rows, read);
  if (!status.ok()) {
    m_rows = 0;
    m_pages.clear();
    return status;
  }
  rebuildIndex();
  return okStatus();
}

Status KvCache::exportRows(const std::function<Status(std::span<const uint8_t>)>& write) const {
  return forEachRun<std::span<const uint8_t>>(m_layout, m_pages, m_rows, write);
}

void KvCache::read(uint32_t layer, KvPart part, uint32_t head, uint32_t index,
                   std::span<float> values) const {
  assert(values.size() == geometry().headDim);
  scheme(layer, part).decode(row(layer, part, head, index), values);
}

void KvCache::readRotated(uint32_t layer, KvPart part, uint32_t head, uint32_t index,
                          std::span<float> values) const {
  assert(values.size() == geometry().headDim);
  scheme(layer, part).decodeRotated(row(layer, part, head, index), values);
}

KvBytes KvCache::layerBytes(uint32_t layer, KvPart part) const {
  KvBytes b = m_layout.bytes(layer, part, m_rows, capacity());
  if (m_index && part == KvPart::kKey) b.sidecar = m_index->layerBytes(layer);
  return b;
}

uint64_t KvCache::allocatedBytes() const {
  uint64_t sidecar = 0;
  for (uint32_t l = 0; m_index && l < geometry().nLayer; ++l) sidecar += m_index->layerBytes(l);
  return uint64_t{m_pages.size()} * m_layout.pageBytes() + sidecar;
}

KvBytes KvCache::bytes() const {
  KvBytes total;
  for (uint32_t l = 0; l < geometry().nLayer; ++l)
    for (KvPart p : {KvPart::kKey, KvPart::kValue}) total += layerBytes(l, p);
  return total;
}

uint64_t KvCache::f16EquivalentBytes() const {
  return m_layout.f16Bytes(m_rows);
}

}  // namespace kvscope::kv
