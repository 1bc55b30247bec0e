#pragma once
// Which KV heads should attend every row under the indexer
// (kv::IndexerOptions::denseHeads), by measurement. A text is teacher-forced
// through a backend with the indexer selecting in every layer, in its
// diagnostic mode, and each (cache layer, KV head) is scored by the share of
// dense attention's softmax mass its selections captured, averaged over the
// decode steps. Heads whose attention on running text spreads over rows few
// pages hold (induction heads: every successor of the current token's
// earlier occurrences) capture little, and they are the heads a copy or a
// retrieval needs whole: DuoAttention's retrieval heads, found from the
// runtime's own selection rather than by training. On the recall model at
// 4K tokens one head of 8 stood out (docs/RESULTS.md).

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "kv/indexer.h"

namespace kvscope::runtime {

struct IndexerHeadMass {
  kv::IndexerOptions options;  // as measured: every layer selecting, no dense heads
  uint32_t prefill = 0;        // tokens cached before the first measured step
  uint32_t steps = 0;          // decode steps measured
  // [cache layer][KV head]: the mean captured mass; 1 for a layer that
  // attended every row (a sliding-window layer).
  std::vector<std::vector<double>> mass;
};

// Runs tokens[0, size - steps) as a prefill, then the last `steps` tokens one
// decode step each, on `backend` (its indexer options are restored after,
// its cache left holding the text, the last `steps` rows as the selection
// made them) under `options` with denseLayers 0, no dense heads and the
// diagnostic mode on. When the cache already holds tokens[0, cached), it
// keeps the prefill's part (trimmed back to it) where the backend can trim
// there, else it starts from an empty cache. Errors: the indexer off, fewer
// than steps + 1 tokens or more than the context, a prefill the selection
// would cover whole (nothing to measure), a backend without the indexer.
Expected<IndexerHeadMass> measureIndexerHeads(backend::Backend& backend,
                                              std::span<const int32_t> tokens,
                                              const kv::IndexerOptions& options, uint32_t steps,
                                              uint32_t cached = 0);

// indexer_dense_heads=auto (runtime::Session): decode steps measured, the
// cut, and the fewest cached tokens before the measured steps: four times the
// rows a step selects, so that a head needing rows outside its selection
// shows.
inline constexpr uint32_t kAutoHeadSteps = 64;
inline constexpr double kAutoHeadCut = 0.5;
uint32_t autoHeadsMinTokens(const kv::IndexerOptions& options);

// The heads whose mean captured mass is below `threshold`, in (layer, head)
// order: kv::IndexerOptions::denseHeads.
std::vector<kv::KvHeadRef> headsBelow(const IndexerHeadMass& measured, double threshold);

}  // namespace kvscope::runtime
