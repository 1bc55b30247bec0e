#include "kv/kv_cache.h"

#include <cassert>
#include <new>

namespace kvscope::kv {

KvCache::KvCache(KvGeometry geometry, std::shared_ptr<const KvScheme> key,
                 std::shared_ptr<const KvScheme> value)
    : KvCache(geometry, std::vector(geometry.nLayer, key), std::vector(geometry.nLayer, value)) {}

KvCache::KvCache(KvGeometry geometry, std::vector<std::shared_ptr<const KvScheme>> keySchemes,
                 std::vector<std::shared_ptr<const KvScheme>> valueSchemes)
    : m_geometry(geometry) {
  assert(keySchemes.size() == geometry.nLayer && valueSchemes.size() == geometry.nLayer);
  assert(geometry.rowsPerPage > 0);
  m_schemes[0] = std::move(keySchemes);
  m_schemes[1] = std::move(valueSchemes);
  for (uint32_t l = 0; l < geometry.nLayer; ++l) {
    for (int p = 0; p < 2; ++p) {
      m_partOffset.push_back(m_pageBytes);
      m_pageBytes += size_t{geometry.nHeadKv} * geometry.rowsPerPage *
                     m_schemes[p][l]->rowBytes(geometry.headDim);
    }
  }
}

const KvScheme& KvCache::scheme(uint32_t layer, KvPart part) const {
  return *m_schemes[static_cast<int>(part)][layer];
}

uint32_t KvCache::rowBytes(uint32_t layer, KvPart part) const {
  return scheme(layer, part).rowBytes(m_geometry.headDim);
}

Status KvCache::append(uint32_t n) {
  const uint64_t needed = uint64_t{m_rows} + n;
  const size_t before = m_pages.size();
  while (capacity() < needed) {
    auto* page = new (std::nothrow) uint8_t[m_pageBytes];
    if (!page) {
      m_pages.resize(before);
      return makeError(ErrorCode::kOutOfMemory,
                       "cannot grow the KV cache to {} tokens ({:.1f} MiB more needed)", needed,
                       static_cast<double>(m_pageBytes) / (1 << 20));
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
  const size_t pagesNeeded = (size_t{n} + m_geometry.rowsPerPage - 1) / m_geometry.rowsPerPage;
  m_pages.resize(pagesNeeded);
  return okStatus();
}

size_t KvCache::streamOffset(uint32_t layer, KvPart part, uint32_t head) const {
  return m_partOffset[layer * 2 + static_cast<int>(part)] +
         size_t{head} * m_geometry.rowsPerPage * rowBytes(layer, part);
}

std::span<uint8_t> KvCache::row(uint32_t layer, KvPart part, uint32_t head, uint32_t index) {
  assert(layer < m_geometry.nLayer && head < m_geometry.nHeadKv && index < m_rows);
  const uint32_t bytes = rowBytes(layer, part);
  uint8_t* page = m_pages[index / m_geometry.rowsPerPage].get();
  return {page + streamOffset(layer, part, head) + size_t{index % m_geometry.rowsPerPage} * bytes,
          bytes};
}

std::span<const uint8_t> KvCache::row(uint32_t layer, KvPart part, uint32_t head,
                                      uint32_t index) const {
  return const_cast<KvCache*>(this)->row(layer, part, head, index);
}

void KvCache::write(uint32_t layer, KvPart part, uint32_t head, uint32_t index,
                    std::span<const float> values) {
  assert(values.size() == m_geometry.headDim);
  scheme(layer, part).encode(values, row(layer, part, head, index));
}

void KvCache::read(uint32_t layer, KvPart part, uint32_t head, uint32_t index,
                   std::span<float> values) const {
  assert(values.size() == m_geometry.headDim);
  scheme(layer, part).decode(row(layer, part, head, index), values);
}

KvBytes KvCache::layerBytes(uint32_t layer, KvPart part) const {
  const RowLayout r = scheme(layer, part).rowLayout(m_geometry.headDim);
  const uint64_t streams = m_geometry.nHeadKv;
  return {streams * m_rows * r.codeBytes, streams * m_rows * r.scaleBytes,
          streams * m_rows * r.paddingBytes, streams * (capacity() - m_rows) * r.total()};
}

KvBytes KvCache::bytes() const {
  KvBytes total;
  for (uint32_t l = 0; l < m_geometry.nLayer; ++l) {
    for (KvPart p : {KvPart::kKey, KvPart::kValue}) {
      const KvBytes b = layerBytes(l, p);
      total.codes += b.codes;
      total.scales += b.scales;
      total.padding += b.padding;
      total.unused += b.unused;
    }
  }
  return total;
}

uint64_t KvCache::f16EquivalentBytes() const {
  return uint64_t{m_geometry.nLayer} * 2 * m_geometry.nHeadKv * m_rows * m_geometry.headDim * 2;
}

}  // namespace kvscope::kv
