#pragma once
// What a Session reports while it works. All callbacks run on the engine
// worker thread, synchronously; keep them cheap (the UI's EngineWorker turns
// them into queued Qt signals). StepStats and KvSnapshot are plain value types.

#include <chrono>
#include <cstdint>
#include <string_view>

#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "runtime/indexer_snapshot.h"
#include "runtime/kv_snapshot.h"

namespace kvscope::runtime {

inline constexpr std::chrono::milliseconds kKvSnapshotInterval{100};

struct StepStats {
  uint32_t promptTokens = 0;  // tokens in the prompt
  uint32_t reusedTokens = 0;  // of which were already cached
  uint32_t generatedTokens = 0;
  uint32_t cachedTokens = 0;  // after this step
  uint32_t contextLimit = 0;
  double prefillMs = 0.0;
  uint32_t decodeSteps = 0;  // forward passes after the prompt
  double decodeMs = 0.0;     // all decode steps so far
  double lastStepMs = 0.0;
  // Context shifts in this reply (GenerateOptions::shift): how many, the
  // tokens they dropped, and the time spent re-running the kept ones.
  uint32_t contextShifts = 0;
  uint32_t shiftedTokens = 0;
  double shiftMs = 0.0;
  std::vector<backend::KernelTiming> kernels;  // device time of the last step by kernel class
  double prefillTokensPerSecond() const {
    return prefillMs > 0 ? (promptTokens - reusedTokens) * 1e3 / prefillMs : 0;
  }
  double decodeTokensPerSecond() const { return decodeMs > 0 ? decodeSteps * 1e3 / decodeMs : 0; }
};

class Observer {
 public:
  virtual ~Observer() = default;
  // A piece of generated text (complete UTF-8 characters) and its token.
  virtual void onToken(std::string_view text, int32_t token) { (void)text, (void)token; }
  // Prefill progress: `done` of `total` new prompt tokens processed.
  virtual void onProgress(uint32_t done, uint32_t total) { (void)done, (void)total; }
  virtual void onStep(const StepStats& stats) { (void)stats; }
  // The KV cache after a step: at most every kKvSnapshotInterval while decoding,
  // and always once when a generation ends.
  virtual void onKv(const KvSnapshot& snapshot) { (void)snapshot; }
  // The indexer's last decode step, with the same cadence as onKv, while the
  // indexer is on.
  virtual void onIndexer(const IndexerSnapshot& snapshot) { (void)snapshot; }
  // Which experts the routers picked (the last row's, and counts over the
  // cached rows), with the same cadence as onKv, for a model with experts.
  virtual void onExperts(const backend::ExpertUsage& usage) { (void)usage; }
};

}  // namespace kvscope::runtime
