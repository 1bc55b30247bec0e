#include "kv/kv_layout.h"

#include <algorithm>

namespace kvscope::kv {

KvBytes& KvBytes::operator+=(const KvBytes& o) {
  codes += o.codes;
  scales += o.scales;
  sidecar += o.sidecar;
  tail += o.tail;
  padding += o.padding;
  unused += o.unused;
  return *this;
}

KvGeometry KvGeometry::uniform(uint32_t nLayer, uint32_t nHeadKv, uint32_t headDim,
                               uint32_t rowsPerPage) {
  KvGeometry g;
  g.layers.assign(nLayer, {nHeadKv, headDim});
  g.rowsPerPage = rowsPerPage;
  return g;
}

Expected<KvLayout> KvLayout::create(KvGeometry geometry, std::span<const LayerSchemes> layers,
                                    uint64_t cacheSeed) {
  const bool emptyLayer = std::ranges::any_of(
      geometry.layers, [](const KvLayerShape& l) { return l.nHeadKv == 0 || l.headDim == 0; });
  if (geometry.nLayer() == 0 || emptyLayer || geometry.rowsPerPage == 0) {
    return makeError(ErrorCode::kInvalidArgument,
                     "a KV cache needs at least one layer, and KV heads, head dims and rows per "
                     "page above 0 ({} layers, {} rows per page)",
                     geometry.nLayer(), geometry.rowsPerPage);
  }
  if (geometry.window > 0 &&
      (geometry.window < 2 || geometry.windowLayers.size() != geometry.nLayer() ||
       (geometry.ringRows > 0 && geometry.ringRows < geometry.window - 1))) {
    return makeError(
        ErrorCode::kInvalidArgument,
        "a sliding window of {} rows over {} of {} layers cannot keep a ring of {} rows",
        geometry.window, geometry.windowLayers.size(), geometry.nLayer(), geometry.ringRows);
  }
  if (geometry.tailRows > 0 && geometry.tailRingRows < geometry.tailRows) {
    return makeError(ErrorCode::kInvalidArgument,
                     "a precision tail of {} rows cannot live in a ring of {} rows",
                     geometry.tailRows, geometry.tailRingRows);
  }
  if (geometry.tailRows == 0) geometry.tailRingRows = 0;
  if (geometry.window == 0) {
    geometry.windowLayers.clear();
    geometry.ringRows = 0;
  }
  if (layers.size() != geometry.nLayer()) {
    return makeError(ErrorCode::kInvalidArgument,
                     "the KV cache policy names schemes for {} layers, the model has {}",
                     layers.size(), geometry.nLayer());
  }
  KvLayout layout;
  layout.m_geometry = geometry;
  layout.m_cacheSeed = cacheSeed;
  for (uint32_t l = 0; l < geometry.nLayer(); ++l) {
    bool compressed = false;
    for (uint32_t p = 0; p < 2; ++p) {
      const std::string& name = p == 0 ? layers[l].key : layers[l].value;
      KVS_ASSIGN_OR_RETURN(auto scheme,
                           makeScheme(name, {geometry.headDim(l), streamSeed(cacheSeed, l, p)}));
      compressed |= scheme->rowCode() != RowCode::kF16;
      const uint32_t rowBytes = scheme->rowBytes();
      size_t& page = layout.inRing(l) ? layout.m_ringPageBytes : layout.m_pageBytes;
      layout.m_streams.push_back({std::move(scheme), rowBytes, page});
      page += size_t{geometry.nHeadKv(l)} * layout.pageRows(l) * rowBytes;
    }
    // The layout accepted this head dim, so f16 takes it too.
    KVS_ASSIGN_OR_RETURN(auto f16, makeScheme("f16", {.dim = geometry.headDim(l)}));
    layout.m_tailScheme.push_back(std::move(f16));
    layout.m_tailStart.push_back(kNoTail);
    if (geometry.tailRows == 0 || !compressed) continue;
    layout.m_tailStart.back() = layout.m_tailBytes;
    layout.m_tailBytes += 2 * layout.tailStreamBytes(l, geometry.tailRingRows);
  }
  return layout;
}

size_t KvLayout::tailOffset(uint32_t layer, KvPart part, uint32_t head, uint32_t slot) const {
  const size_t rowBytes = tailScheme(layer).rowBytes();
  const size_t slots = m_geometry.tailRingRows;
  return m_tailStart[layer] +
         ((static_cast<size_t>(part) * m_geometry.nHeadKv(layer) + head) * slots + slot) * rowBytes;
}

uint64_t KvLayout::savedTailBytes(uint32_t rows, uint32_t held) const {
  uint64_t bytes = 0;
  for (uint32_t l = 0; l < m_geometry.nLayer(); ++l)
    bytes += 2 * tailStreamBytes(l, std::min(held, keptRows(l, rows)));
  return bytes;
}

void KvLayout::addTailBytes(KvBytes& bytes, uint32_t layer, uint32_t held) const {
  bytes.tail = tailStreamBytes(layer, held);
  bytes.unused += tailStreamBytes(layer, m_geometry.tailRingRows - held);
}

uint64_t KvLayout::tailStreamBytes(uint32_t layer, uint64_t rows) const {
  if (!hasTail(layer)) return 0;
  return uint64_t{m_geometry.nHeadKv(layer)} * rows * tailScheme(layer).rowBytes();
}

std::vector<LayerSchemes> KvLayout::layerSchemes() const {
  std::vector<LayerSchemes> out;
  for (uint32_t l = 0; l < m_geometry.nLayer(); ++l) {
    out.push_back({std::string(scheme(l, KvPart::kKey).name()),
                   std::string(scheme(l, KvPart::kValue).name())});
  }
  return out;
}

uint64_t KvLayout::tokenBytes() const {
  uint64_t bytes = 0;
  for (uint32_t l = 0; l < m_geometry.nLayer(); ++l) {
    if (inRing(l)) continue;
    bytes +=
        uint64_t{m_geometry.nHeadKv(l)} * (rowBytes(l, KvPart::kKey) + rowBytes(l, KvPart::kValue));
  }
  return bytes;
}

uint64_t KvLayout::canonicalBytes(uint32_t rows) const {
  uint64_t bytes = 0;
  for (uint32_t l = 0; l < m_geometry.nLayer(); ++l) {
    const uint64_t rowBytes = uint64_t{m_geometry.nHeadKv(l)} * keptRows(l, rows);
    bytes += rowBytes * (this->rowBytes(l, KvPart::kKey) + this->rowBytes(l, KvPart::kValue));
  }
  return bytes;
}

KvBytes KvLayout::bytes(uint32_t layer, KvPart part, uint64_t rows, uint64_t capacity) const {
  const RowLayout& r = scheme(layer, part).rowLayout();
  const uint64_t streams = m_geometry.nHeadKv(layer);
  return {.codes = streams * rows * r.codeBytes,
          .scales = streams * rows * r.scaleBytes,
          .padding = streams * rows * r.paddingBytes,
          .unused = streams * (capacity - rows) * r.total()};
}

bool KvLayout::sameStreams(const KvLayout& other) const {
  if (!m_geometry.sameStreams(other.m_geometry) || m_cacheSeed != other.m_cacheSeed) return false;
  return layerSchemes() == other.layerSchemes();
}

Status CachedRows::checkStep(uint32_t n) const {
  if (m_ringRows > 0 && n > m_ringRows - (m_window - 1)) {
    return makeError(ErrorCode::kInvalidArgument,
                     "a step of {} tokens overflows the sliding-window ring of {} rows (at most {} "
                     "per step)",
                     n, m_ringRows, m_ringRows - (m_window - 1));
  }
  // The tail's ring holds the tail and the step's rows, unless it holds every row.
  if (m_tailRows > 0 && uint64_t{m_rows} + n > m_tailSlots && n > m_tailSlots - m_tailRows + 1) {
    return makeError(ErrorCode::kInvalidArgument,
                     "a step of {} rows does not fit the precision tail's ring of {} rows (a "
                     "tail of {})",
                     n, m_tailSlots, m_tailRows);
  }
  return okStatus();
}

Status CachedRows::checkTailImport(uint32_t held) const {
  if (held > m_tailRows || held > m_rows || tailFirst() != m_rows) {
    return makeError(ErrorCode::kInvalidArgument,
                     "a precision tail of {} rows does not fit this KV cache ({} rows, a tail of "
                     "{})",
                     held, m_rows, m_tailRows);
  }
  return okStatus();
}

void CachedRows::grow(uint32_t rows) {
  m_rows = rows;
  if (m_ringRows > 0 && rows > m_ringRows)
    m_windowStart = std::max(m_windowStart, rows - m_ringRows);
}

Status CachedRows::trim(uint32_t n) {
  if (n > m_rows)
    return makeError(ErrorCode::kInternal, "cannot trim a cache of {} rows to {}", m_rows, n);
  if (n > 0 && n < trimFloor()) {
    return makeError(ErrorCode::kUnsupported,
                     "the sliding-window layers no longer hold the rows before token {}: the cache "
                     "can go back to {} tokens or to none, not to {}",
                     m_windowStart, trimFloor(), n);
  }
  // The tail's ring still holds rows [tailFirst(), n); the rows before were overwritten.
  m_tailFloor = std::min(n, tailFirst());
  m_rows = n;
  if (n == 0) m_windowStart = 0;
  return okStatus();
}

void CachedRows::restored(uint32_t rows) {
  m_rows = rows;
  m_tailFloor = rows;  // until tailRestored() brings the tail back
  m_windowStart = m_window > 0 ? rows - std::min(rows, m_window - 1) : 0;
}

}  // namespace kvscope::kv
