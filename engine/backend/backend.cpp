#include "backend/backend.h"

#include <algorithm>

namespace kvscope::backend {

bool TensorDump::wants(const model::OpName& op) {
  if (name.empty()) return false;
  if (name == kListTensorNames) {
    names.push_back(op.str());
    return false;
  }
  return op.str() == name;
}

void TensorDump::append(std::span<const float> captured, uint32_t rowWidth) {
  width = rowWidth;
  rows += static_cast<uint32_t>(captured.size() / rowWidth);
  values.insert(values.end(), captured.begin(), captured.end());
}

std::vector<kv::KvLayerShape> kvLayerShapes(const model::ModelConfig& c) {
  std::vector<kv::KvLayerShape> shapes;
  for (uint32_t l = 0; l < c.kvLayers(); ++l) shapes.push_back({c.headsKvOf(l), c.headDimOf(l)});
  return shapes;
}

kv::KvGeometry kvGeometry(const model::ModelConfig& c, uint32_t rowsPerPage, uint32_t contextLimit,
                          uint32_t stepRows, uint32_t tailRows) {
  kv::KvGeometry g{.layers = kvLayerShapes(c), .rowsPerPage = rowsPerPage};
  if (tailRows > 0) {
    // A tail as long as the context holds every row: its ring never wraps.
    g.tailRows = std::min(tailRows, contextLimit);
    g.tailRingRows = static_cast<uint32_t>(
        std::min<uint64_t>(uint64_t{g.tailRows} + stepRows - 1, contextLimit));
  }
  if (c.slidingWindow == 0) return g;
  g.window = c.slidingWindow;
  for (uint32_t l = 0; l < c.kvLayers(); ++l) g.windowLayers.push_back(c.isWindowLayer(l));
  const uint64_t ring = uint64_t{c.slidingWindow} - 1 + stepRows;
  if (ring < contextLimit) g.ringRows = static_cast<uint32_t>(ring);
  return g;
}

kv::KvTarget kvTarget(const model::ModelConfig& c) {
  kv::KvTarget t{.architecture = c.architecture, .nLayer = c.kvLayers()};
  for (uint32_t l = 0; l < c.kvLayers(); ++l) {
    if (std::find(t.headDims.begin(), t.headDims.end(), c.headDimOf(l)) == t.headDims.end())
      t.headDims.push_back(c.headDimOf(l));
  }
  return t;
}

Status checkIndexerFor(const model::ModelConfig& c, const kv::IndexerOptions& options) {
  std::vector<uint32_t> headsKv(c.kvLayers());
  for (uint32_t l = 0; l < c.kvLayers(); ++l) headsKv[l] = c.headsKvOf(l);
  return options.checkHeads(headsKv);
}

Status Backend::exportKv(const std::function<Status(std::span<const uint8_t>)>&) const {
  return makeError(ErrorCode::kUnsupported, "the {} backend cannot save its KV cache", name());
}

Status Backend::importKv(const kv::KvLayout&, uint32_t,
                         const std::function<Status(std::span<uint8_t>)>&) {
  return makeError(ErrorCode::kUnsupported, "the {} backend cannot restore a KV cache", name());
}

}  // namespace kvscope::backend
