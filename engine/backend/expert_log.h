#pragma once
// ExpertLog: which experts a mixture-of-experts model's routers picked, per
// cached row and layer, kept beside the KV cache so the inspector can show
// which experts the last step used and how often each was used over the rows
// the cache holds. A trim takes its rows' picks back out; rows the log did
// not see run (a cache restored from a file) count as unknown; a cache
// re-encoded under another KV policy keeps its rows' picks.

#include <cstdint>
#include <span>
#include <vector>

#include "model/model_config.h"
#include "model/model_weights.h"

namespace kvscope::backend {

struct ExpertUsage {
  uint32_t nExpert = 0;  // 0: the model has no experts (everything below empty)
  uint32_t nUsed = 0;    // experts per token
  uint32_t rows = 0;        // cached rows whose picks are known
  uint32_t cachedRows = 0;  // rows logged, known or not (a restored cache's are not)
  // [nLayer][nUsed]: the experts the last row used, in pick order; empty
  // before any row ran here.
  std::vector<std::vector<uint32_t>> lastStep;
  // [nLayer][nExpert]: known rows routed to each expert.
  std::vector<std::vector<uint32_t>> counts;
  uint64_t expertBytes = 0;    // every expert's weights, all layers
  uint64_t lastStepBytes = 0;  // of those, the bytes the last row's experts read
};

class ExpertLog {
 public:
  ExpertLog() = default;  // a model without experts: records nothing
  // `bytesPerExpert` [nLayer]: one expert's gate, up and down weights.
  ExpertLog(uint32_t nExpert, uint32_t nUsed, std::vector<uint64_t> bytesPerExpert);

  // The log of a model's bound weights: enabled where it has experts, each
  // expert's bytes one expert's share of its layer's stacked tensors.
  static ExpertLog forModel(const model::ModelConfig& config, const model::ModelWeights& weights);

  bool enabled() const { return m_nExpert > 0; }
  // Row `row`'s picks in `layer` (nUsed experts, pick order). Rows past the
  // ones logged so far extend the log; those between are unknown.
  void record(uint32_t layer, uint32_t row, std::span<const uint32_t> experts);
  // Keeps rows [0, rows).
  void trim(uint32_t rows);
  ExpertUsage usage() const;

 private:
  // Expert ids fit 16 bits (model::validateConfig allows at most 4096).
  static constexpr uint16_t kUnknown = 0xffff;
  uint16_t* picks(uint32_t row, uint32_t layer) {
    return &m_picks[(size_t{row} * m_nLayer + layer) * m_nUsed];
  }
  const uint16_t* picks(uint32_t row, uint32_t layer) const {
    return &m_picks[(size_t{row} * m_nLayer + layer) * m_nUsed];
  }

  uint32_t m_nExpert = 0, m_nUsed = 0, m_nLayer = 0;
  std::vector<uint64_t> m_bytesPerExpert;       // [nLayer]
  std::vector<uint16_t> m_picks;                // [row][layer][slot]; kUnknown: not seen
  std::vector<std::vector<uint32_t>> m_counts;  // [layer][expert]
  uint32_t m_rows = 0;
  uint32_t m_known = 0;  // rows whose layer 0 picks are known
};

}  // namespace kvscope::backend
