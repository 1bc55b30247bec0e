#include "runtime/kv_snapshot.h"

namespace kvscope::runtime {
namespace {

uint64_t used(const kv::KvBytes& b) {
  return b.codes + b.scales + b.padding;
}

}  // namespace

uint64_t KvSnapshot::usedBytes() const {
  uint64_t total = 0;
  for (const auto& l : layers) total += used(l.key) + used(l.value);
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
  const uint64_t streams = uint64_t{s.rows} * backend.config().nHeadKv;
  const std::vector<backend::KvLayerError> errors = backend.kvErrors();
  for (const backend::KvLayerBytes& l : backend.kvBytes()) {
    KvLayerSnapshot layer;
    layer.keyScheme = std::string(l.key->name());
    layer.valueScheme = std::string(l.value->name());
    layer.keyBitsPerValue = l.key->bitsPerValue();
    layer.valueBitsPerValue = l.value->bitsPerValue();
    layer.key = l.keyBytes;
    layer.value = l.valueBytes;
    layer.f16Bytes = streams * (l.key->dim() + l.value->dim()) * 2;
    if (s.layers.size() < errors.size()) {
      layer.keyError = errors[s.layers.size()].key;
      layer.valueError = errors[s.layers.size()].value;
    }
    s.layers.push_back(std::move(layer));
  }
  return s;
}

}  // namespace kvscope::runtime
