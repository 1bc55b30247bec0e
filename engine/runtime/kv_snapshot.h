#pragma once
// KvSnapshot: the KV cache of a backend at one moment, for the inspector: per
// layer the scheme of K and V, the bytes their cached rows take by part
// (codes, scales, padding; from the schemes' row layouts, never a formula),
// what the same rows would take at f16, the page bytes reserved but not yet
// filled, and the codec error the backend measured on the rows written. A
// plain value type: the Session hands it to Observer::onKv.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "kv/kv_cache.h"

namespace kvscope::runtime {

struct KvLayerSnapshot {
  uint32_t rows = 0;      // rows the layer holds (a window layer: its last ones)
  uint32_t window = 0;    // a sliding-window layer's window; 0: a global layer
  bool ring = false;      // kept in a ring of fixed size (Backend::KvLayerBytes)
  std::string keyScheme;  // "f16", "q8_0", "turbo3", …
  std::string valueScheme;
  double keyBitsPerValue = 0.0;
  double valueBitsPerValue = 0.0;
  kv::KvBytes key;  // `unused` counts reserved rows not yet filled
  kv::KvBytes value;
  uint64_t f16Bytes = 0;  // the layer's cached rows at f16, K and V
  // Measured codec error (relative RMS, Backend::kvErrors); negative: not measured.
  double keyError = -1.0;
  double valueError = -1.0;
  // Under an auto policy: why this layer's K or V got a safer scheme than
  // most layers (kv::PartDecision::reason); empty when it did not.
  std::string keyPromotion, valuePromotion;
};

struct KvSnapshot {
  uint32_t rows = 0;  // cached tokens
  uint32_t contextLimit = 0;
  std::vector<KvLayerSnapshot> layers;  // [cache layers]
  // KV-shared layers (Gemma 4): model layer -> the cache layer whose rows it
  // attends; they store none, so `layers` does not list them.
  std::vector<std::pair<uint32_t, uint32_t>> sharedLayers;
  // Under an auto policy, what it did: "measuring …" until the first prompt
  // has run, then the budget and the policy it chose; empty otherwise.
  std::string autoStatus;
  // An auto policy still measuring: the cache is f16 on purpose until the
  // conversation reaches autoMeasureTokens tokens.
  bool autoMeasuring = false;
  uint32_t autoMeasureTokens = 0;

  // Bytes the cached rows take (codes, scales, padding and the indexer's sidecar), all layers.
  uint64_t usedBytes() const;
  // usedBytes() plus reserved rows not yet filled.
  uint64_t allocatedBytes() const;
  uint64_t f16Bytes() const;
};

KvSnapshot snapshotKv(const backend::Backend& backend);

}  // namespace kvscope::runtime
