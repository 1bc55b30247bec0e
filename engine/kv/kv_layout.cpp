#include "kv/kv_layout.h"

namespace kvscope::kv {

KvBytes& KvBytes::operator+=(const KvBytes& o) {
  codes += o.codes;
  scales += o.scales;
  sidecar += o.sidecar;
  padding += o.padding;
  unused += o.unused;
  return *this;
}

Expected<KvLayout> KvLayout::create(KvGeometry geometry, std::span<const LayerSchemes> layers,
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
  KvLayout layout;
  layout.m_geometry = geometry;
  layout.m_cacheSeed = cacheSeed;
  for (uint32_t l = 0; l < geometry.nLayer; ++l) {
    for (uint32_t p = 0; p < 2; ++p) {
      const std::string& name = p == 0 ? layers[l].key : layers[l].value;
      KVS_ASSIGN_OR_RETURN(auto scheme,
                           makeScheme(name, {geometry.headDim, streamSeed(cacheSeed, l, p)}));
      const uint32_t rowBytes = scheme->rowBytes();
      layout.m_streams.push_back({std::move(scheme), rowBytes, layout.m_pageBytes});
      layout.m_pageBytes += size_t{geometry.nHeadKv} * geometry.rowsPerPage * rowBytes;
    }
  }
  return layout;
}

std::vector<LayerSchemes> KvLayout::layerSchemes() const {
  std::vector<LayerSchemes> out;
  for (uint32_t l = 0; l < m_geometry.nLayer; ++l) {
    out.push_back({std::string(scheme(l, KvPart::kKey).name()),
                   std::string(scheme(l, KvPart::kValue).name())});
  }
  return out;
}

uint64_t KvLayout::tokenBytes() const {
  uint64_t bytes = 0;
  for (const Stream& s : m_streams) bytes += uint64_t{m_geometry.nHeadKv} * s.rowBytes;
  return bytes;
}

KvBytes KvLayout::bytes(uint32_t layer, KvPart part, uint64_t rows, uint64_t capacity) const {
  const RowLayout& r = scheme(layer, part).rowLayout();
  const uint64_t streams = m_geometry.nHeadKv;
  return {.codes = streams * rows * r.codeBytes,
          .scales = streams * rows * r.scaleBytes,
          .padding = streams * rows * r.paddingBytes,
          .unused = streams * (capacity - rows) * r.total()};
}

uint64_t KvLayout::f16Bytes(uint64_t rows) const {
  return uint64_t{m_geometry.nLayer} * 2 * m_geometry.nHeadKv * rows * m_geometry.headDim * 2;
}

bool KvLayout::sameStreams(const KvLayout& other) const {
  const KvGeometry& a = m_geometry;
  const KvGeometry& b = other.m_geometry;
  if (a.nLayer != b.nLayer || a.nHeadKv != b.nHeadKv || a.headDim != b.headDim ||
      m_cacheSeed != other.m_cacheSeed) {
    return false;
  }
  return layerSchemes() == other.layerSchemes();
}

}  // namespace kvscope::kv
