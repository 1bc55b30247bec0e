#include "runtime/kv_snapshot.h"

namespace kvscope::runtime {
uint64_t KvSnapshot::usedBytes() const {
  uint64_t total = 0;
  for (const auto& l : layers) total += l.key.used() + l.value.used();
  return total;
}

uint64_t KvSnapshot::allocatedBytes() const {
  uint64_t total = 0;
  for (const auto& l : layers) total += l.key.total() + l.value.total();
  return total;
}

uint64_t KvSnapshot::f16Bytes() const {
  uint64_t total = 0;
  for (const auto& l : layers) total += l.f16Bytes;
  return total;
}

KvSnapshot snapshotKv(const backend::Backend& backend) {
  KvSnapshot s;
  s.rows = backend.cachedTokens();
  s.contextLimit = backend.contextLimit();
  const std::vector<backend::KvLayerError> errors = backend.kvErrors();
  const std::vector<backend::KvLayerBytes> layers = backend.kvBytes();
  for (uint32_t index = 0; index < layers.size(); ++index) {
    const backend::KvLayerBytes& l = layers[index];
    const uint64_t streams = uint64_t{l.rows} * backend.config().headsKvOf(index);
    KvLayerSnapshot layer;
    layer.rows = l.rows;
    layer.window = l.window;
    layer.ring = l.ring;
    layer.keyScheme = std::string(l.key->name());
    layer.valueScheme = std::string(l.value->name());
    // From the bytes held, so the indexer's sidecar counts with K; the
    // schemes' own figure before any row is cached.
    const auto bits = [&](const kv::KvBytes& b, const kv::KvScheme& scheme) {
      return streams
                 ? 8.0 * static_cast<double>(b.used()) / static_cast<double>(streams * scheme.dim())
                 : scheme.bitsPerValue();
    };
    layer.keyBitsPerValue = bits(l.keyBytes, *l.key);
    layer.valueBitsPerValue = bits(l.valueBytes, *l.value);
    layer.key = l.keyBytes;
    layer.value = l.valueBytes;
    layer.f16Bytes = streams * (l.key->dim() + l.value->dim()) * 2;
    if (s.layers.size() < errors.size()) {
      layer.keyError = errors[s.layers.size()].key;
      layer.valueError = errors[s.layers.size()].value;
    }
    s.layers.push_back(std::move(layer));
  }
  const model::ModelConfig& c = backend.config();
  for (uint32_t l = c.kvLayers(); l < c.nLayer; ++l)
    s.sharedLayers.emplace_back(l, c.kvSourceOf(l));
  return s;
}

}  // namespace kvscope::runtime
