#include "runtime/indexer_snapshot.h"

namespace kvscope::runtime {

void IndexerTally::add(const backend::IndexerStep& step) {
  for (const backend::IndexerLayerStep& l : step.layers) {
    if (l.capturedMass >= 0.0) {
      m_mass += l.capturedMass;
      ++m_massCount;
    }
    if (l.heads.empty() || step.rows == 0) continue;
    double rows = 0.0;
    for (const auto& runs : l.heads) rows += runs.empty() ? step.rows : kv::rowCount(runs);
    m_read += rows / (static_cast<double>(step.rows) * static_cast<double>(l.heads.size()));
    ++m_readCount;
  }
}

}  // namespace kvscope::runtime
