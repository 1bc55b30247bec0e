#include "kv/kv_cache.h"

#include <cassert>
#include <new>

namespace kvscope::kv {

Expected<std::unique_ptr<KvCache>> KvCache::create(KvGeometry geometry,
                                                   std::span<const LayerSchemes> layers,
                                                   uint64_t cacheSeed) {
  if (geometry.nLayer == 0 || geometry.nHeadKv == 0 || geometry.rowsPerPage == 0) {
    return makeError(ErrorCode::kInvalidArgument,
                     "a KV cache needs at least one layer, KV head and row per page "
                     "({} layers, {} KV heads, {} rows per page)",
                     geometry.nLayer, geometry.nHeadKv, geometry.rowsPerPage);
  }
  if (layers.size() != geometry.nLayer) {
    return makeError(ErrorCode::kInvalidArgument,
                     "the KV cache policy names schemes for {} layers, the model has {}",
                     layers.size(), geometry.nLayer);
  }
  std::vector<std::shared_ptr<const KvScheme>> schemes[2];
  for (uint32_t l = 0; l < geometry.nLayer; ++l) {
    for (uint32_t p = 0; p < 2; ++p) {
      const std::string& name = p == 0 ? layers[l].key : layers[l].value;
      KVS_ASSIGN_OR_RETURN(auto s,
                           makeScheme(name, {geometry.headDim, streamSeed(cacheSeed, l, p)}));
      schemes[p].push_back(std::move(s));
    }
  }
  return std::make_unique<KvCache>(geometry, std::move(schemes[0]), std::move(schemes[1]),
                                   cacheSeed);
}

KvCache::KvCache(KvGeometry geometry, std::shared_ptr<const KvScheme> key,
                 std::shared_ptr<const KvScheme> value)
    : KvCache(geometry, std::vector(geometry.nLayer, key), std::vector(geometry.nLayer, value)) {}

KvCache::KvCache(KvGeometry geometry, std::vector<std::shared_ptr<const KvScheme>> keySchemes,
                 std::vector<std::shared_ptr<const KvScheme>> valueSchemes, uint64_t cacheSeed)
    : m_geometry(geometry), m_cacheSeed(cacheSeed) {
  assert(keySchemes.size() == geometry.nLayer && valueSchemes.size() == geometry.nLayer);
  assert(geometry.rowsPerPage > 0);
  m_schemes[0] = std::move(keySchemes);
  m_schemes[1] = std::move(valueSchemes);
  for (uint32_t l = 0; l < geometry.nLayer; ++l) {
    for (int p = 0; p < 2; ++p) {
      assert(m_schemes[p][l]->dim() == geometry.headDim);
      m_partOffset.push_back(m_pageBytes);
      m_pageBytes += size_t{geometry.nHeadKv} * geometry.rowsPerPage * m_schemes[p][l]->rowBytes();
    }
  }
}

const KvScheme& KvCache::scheme(uint32_t layer, KvPart part) const {
  return *m_schemes[static_cast<int>(part)][layer];
}

std::vector<LayerSchemes> KvCache::layerSchemes() const {
  std::vector<LayerSchemes> out;
  for (uint32_t l = 0; l < m_geometry.nLayer; ++l) {
    out.push_back({std::string(m_schemes[0][l]->name()), std::string(m_schemes[1][l]->name())});
  }
  return out;
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
  if (m_index) {
    // The page left partial is rebuilt from its rows, as appending made it.
    m_index->truncate(n);
    for (uint32_t l = 0; l < m_geometry.nLayer; ++l)
      for (uint32_t h = 0; h < m_geometry.nHeadKv; ++h)
        for (uint32_t r = m_index->rows(l, h); r < n; ++r) indexRow(l, h, r);
  }
  const size_t pagesNeeded = (size_t{n} + m_geometry.rowsPerPage - 1) / m_geometry.rowsPerPage;
  m_pages.resize(pagesNeeded);
  return okStatus();
}

Status KvCache::appendRecoded(const KvCache& source) {
  const KvGeometry& g = source.geometry();
  if (g.nLayer != m_geometry.nLayer || g.nHeadKv != m_geometry.nHeadKv ||
      g.headDim != m_geometry.headDim) {
    return makeError(ErrorCode::kInternal, "cannot recode a KV cache of another geometry");
  }
  const uint32_t first = m_rows;
  KVS_TRY(append(source.rows()));
  std::vector<float> values(m_geometry.headDim);
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
  if (m_index && part == KvPart::kKey) indexRow(layer, head, index);
}

void KvCache::indexRow(uint32_t layer, uint32_t head, uint32_t index) {
  m_indexRow.resize(m_geometry.headDim);
  readRotated(layer, KvPart::kKey, head, index, m_indexRow);
  m_index->add(layer, head, index, m_indexRow.data());
}

void KvCache::enableIndex(const IndexerOptions& options) {
  if (!options.enabled()) {
    m_index.reset();
    return;
  }
  if (m_index && m_index->pageRows() == options.pageRows) return;
  m_index = std::make_unique<KvIndex>(m_geometry.nLayer, m_geometry.nHeadKv, m_geometry.headDim,
                                      options.pageRows);
  for (uint32_t l = 0; l < m_geometry.nLayer; ++l)
    for (uint32_t h = 0; h < m_geometry.nHeadKv; ++h)
      for (uint32_t r = 0; r < m_rows; ++r) indexRow(l, h, r);
}

void KvCache::read(uint32_t layer, KvPart part, uint32_t head, uint32_t index,
                   std::span<float> values) const {
  assert(values.size() == m_geometry.headDim);
  scheme(layer, part).decode(row(layer, part, head, index), values);
}

void KvCache::readRotated(uint32_t layer, KvPart part, uint32_t head, uint32_t index,
                          std::span<float> values) const {
  assert(values.size() == m_geometry.headDim);
  scheme(layer, part).decodeRotated(row(layer, part, head, index), values);
}

KvBytes KvCache::layerBytes(uint32_t layer, KvPart part) const {
  const RowLayout& r = scheme(layer, part).rowLayout();
  const uint64_t streams = m_geometry.nHeadKv;
  const uint64_t sidecar = m_index && part == KvPart::kKey ? m_index->layerBytes(layer) : 0;
  return {.codes = streams * m_rows * r.codeBytes,
          .scales = streams * m_rows * r.scaleBytes,
          .sidecar = sidecar,
          .padding = streams * m_rows * r.paddingBytes,
          .unused = streams * (capacity() - m_rows) * r.total()};
}

uint64_t KvCache::allocatedBytes() const {
  uint64_t sidecar = 0;
  for (uint32_t l = 0; m_index && l < m_geometry.nLayer; ++l) sidecar += m_index->layerBytes(l);
  return uint64_t{m_pages.size()} * m_pageBytes + sidecar;
}

KvBytes KvCache::bytes() const {
  KvBytes total;
  for (uint32_t l = 0; l < m_geometry.nLayer; ++l) {
    for (KvPart p : {KvPart::kKey, KvPart::kValue}) {
      const KvBytes b = layerBytes(l, p);
      total.codes += b.codes;
      total.scales += b.scales;
      total.sidecar += b.sidecar;
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
