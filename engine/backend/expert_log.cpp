#include "backend/expert_log.h"

#include <algorithm>

namespace kvscope::backend {

ExpertLog::ExpertLog(uint32_t nExpert, uint32_t nUsed, std::vector<uint64_t> bytesPerExpert)
    : m_nExpert(nExpert),
      m_nUsed(nUsed),
      m_nLayer(static_cast<uint32_t>(bytesPerExpert.size())),
      m_bytesPerExpert(std::move(bytesPerExpert)),
      m_counts(m_nLayer, std::vector<uint32_t>(nExpert, 0)) {}

ExpertLog ExpertLog::forModel(const model::ModelConfig& c, const model::ModelWeights& weights) {
  if (c.nExpert == 0) return {};
  std::vector<uint64_t> bytesPerExpert;
  for (const model::LayerWeights& l : weights.layers) {
    const model::TensorView* stacks[] = {l.gateExps, l.upExps, l.gateUpExps, l.downExps};
    uint64_t bytes = 0;
    for (const model::TensorView* t : stacks) bytes += t ? t->data.size() : 0;
    bytesPerExpert.push_back(bytes / c.nExpert);
  }
  return ExpertLog(c.nExpert, c.nExpertUsed, std::move(bytesPerExpert));
}

void ExpertLog::record(uint32_t layer, uint32_t row, std::span<const uint32_t> experts) {
  if (!enabled() || layer >= m_nLayer || experts.size() != m_nUsed) return;
  if (row >= m_rows) {
    m_picks.resize(size_t{row + 1} * m_nLayer * m_nUsed, kUnknown);
    m_rows = row + 1;
  }
  uint16_t* slot = picks(row, layer);
  if (layer == 0 && slot[0] != kUnknown) --m_known;
  for (uint32_t k = 0; k < m_nUsed; ++k) {
    if (slot[k] != kUnknown) --m_counts[layer][slot[k]];  // the row runs again
    slot[k] = experts[k] < m_nExpert ? static_cast<uint16_t>(experts[k]) : kUnknown;
    if (slot[k] != kUnknown) ++m_counts[layer][slot[k]];
  }
  if (layer == 0 && slot[0] != kUnknown) ++m_known;
}

void ExpertLog::trim(uint32_t rows) {
  if (rows >= m_rows) return;
  for (uint32_t row = rows; row < m_rows; ++row) {
    if (picks(row, 0)[0] != kUnknown) --m_known;
    for (uint32_t l = 0; l < m_nLayer; ++l) {
      const uint16_t* slot = picks(row, l);
      for (uint32_t k = 0; k < m_nUsed; ++k)
        if (slot[k] != kUnknown) --m_counts[l][slot[k]];
    }
  }
  m_rows = rows;
  m_picks.resize(size_t{rows} * m_nLayer * m_nUsed);
}

ExpertUsage ExpertLog::usage() const {
  ExpertUsage u;
  if (!enabled()) return u;
  u.nExpert = m_nExpert;
  u.nUsed = m_nUsed;
  u.counts = m_counts;
  for (uint32_t l = 0; l < m_nLayer; ++l) u.expertBytes += m_bytesPerExpert[l] * m_nExpert;
  u.rows = m_known;
  u.cachedRows = m_rows;
  if (m_rows == 0 || picks(m_rows - 1, 0)[0] == kUnknown) return u;
  u.lastStep.resize(m_nLayer);
  for (uint32_t l = 0; l < m_nLayer; ++l) {
    const uint16_t* slot = picks(m_rows - 1, l);
    u.lastStep[l].assign(slot, slot + m_nUsed);
    // Distinct experts: a row reads each chosen expert's weights once.
    std::vector<uint32_t> distinct = u.lastStep[l];
    std::sort(distinct.begin(), distinct.end());
    const auto unique = std::unique(distinct.begin(), distinct.end()) - distinct.begin();
    u.lastStepBytes += m_bytesPerExpert[l] * static_cast<uint64_t>(unique);
  }
  return u;
}

}  // namespace kvscope::backend
