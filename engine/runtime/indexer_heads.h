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
#include <string>
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
  // KV heads measured, over every layer.
  uint32_t kvHeads() const;
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

// indexer_dense_heads=auto (runtime::Session, the probe): decode steps
// measured, the cut, and the fewest cached tokens it measures at (four times
// the rows a step selects, plus the steps), so that a head needing rows
// outside its selection shows.
inline constexpr uint32_t kAutoHeadSteps = 64;
inline constexpr double kAutoHeadCut = 0.5;
uint32_t autoHeadsMinTokens(const kv::IndexerOptions& options);

struct AutoHeads {
  std::vector<kv::KvHeadRef> heads;  // kept dense from now on
  uint32_t measuredAt = 0;           // tokens cached before the measured steps
  uint32_t kvHeads = 0;              // KV heads of the model's cache layers
  std::string failure;               // why it could not measure (then heads is empty)
  // For the inspector: what was measured and kept, or why not.
  std::string describe() const;
};

// indexer_dense_heads=auto on a backend whose cache holds `tokens` (a prompt
// just run): measures the last kAutoHeadSteps tokens (measureIndexerHeads
// under `options`, every head selecting), sets the backend's indexer to
// `options` with the heads under kAutoHeadCut by name, then runs the measured
// tokens again in chunks of `chunk` (from the start where the backend cannot
// trim back), so the cache holds what the prompt left; `logits` are its last
// token's. A measurement that fails keeps every head selecting and says why
// in AutoHeads::failure; an error is a run that failed (the cache then holds
// backend.cachedTokens() of `tokens`).
Expected<AutoHeads> settleAutoHeads(backend::Backend& backend, std::span<const int32_t> tokens,
                                    kv::IndexerOptions options, uint32_t chunk,
                                    backend::Logits& logits);

// The heads whose mean captured mass is below `threshold`, in (layer, head)
// order: kv::IndexerOptions::denseHeads.
std::vector<kv::KvHeadRef> headsBelow(const IndexerHeadMass& measured, double threshold);

}  // namespace kvscope::runtime
