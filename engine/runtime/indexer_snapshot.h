#pragma once
// IndexerSnapshot: what the sparse-attention indexer did in one decode step,
// for the inspector: the options it ran with, the cached rows the step saw,
// and per layer and KV head the rows it attended (runs in cache order), with
// the share of the dense softmax mass they captured in diagnostic mode.
// A plain value type: the Session hands it to Observer::onIndexer, throttled
// like KvSnapshot.

#include <string>

#include "backend/backend.h"
#include "kv/indexer.h"

namespace kvscope::runtime {

struct IndexerSnapshot {
  kv::IndexerOptions options;
  backend::IndexerStep step;  // step.layers empty: no indexed step yet
  std::string denseHeadsNote;  // indexer_dense_heads=auto: measuring, or what it measured
};

inline IndexerSnapshot snapshotIndexer(const backend::Backend& backend) {
  return {backend.indexer(), backend.indexerStep()};
}

// Means over the (step, layer) pairs of indexed decode steps (eval, probe):
// the share of the visible rows attended, and the captured mass where the
// diagnostic mode measured it. Negative when nothing was added.
class IndexerTally {
 public:
  void add(const backend::IndexerStep& step);
  double rowsRead() const { return m_readCount ? m_read / m_readCount : -1.0; }
  double capturedMass() const { return m_massCount ? m_mass / m_massCount : -1.0; }

 private:
  double m_read = 0.0, m_mass = 0.0;
  uint32_t m_readCount = 0, m_massCount = 0;
};

}  // namespace kvscope::runtime
