#pragma once
// What GET /metrics reports, in the Prometheus text exposition format
// (version 0.0.4): request counts by route and status, tokens and time spent
// in prefill and decode, the last request's speeds, and the KV cache of the
// latest KvSnapshot (bytes by part and kind, bits per value, context used and
// size) plus, while the indexer is on, the share of rows it read and the
// attention mass it captured (diagnostic mode). A plain value; the server
// guards it with its own lock.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "runtime/indexer_snapshot.h"
#include "runtime/kv_snapshot.h"
#include "runtime/observer.h"

namespace kvscope::server {

struct ServerMetrics {
  std::map<std::pair<std::string, int>, uint64_t> requests;  // (route, HTTP status) -> count
  uint64_t cancelled = 0;  // generations stopped because their client left
  uint64_t promptTokens = 0;
  uint64_t cachedPromptTokens = 0;  // of promptTokens, reused from the KV cache
  uint64_t completionTokens = 0;
  double prefillSeconds = 0.0;
  double decodeSeconds = 0.0;
  double lastPrefillTokensPerSecond = 0.0;
  double lastDecodeTokensPerSecond = 0.0;
  std::optional<runtime::KvSnapshot> kv;
  std::optional<runtime::IndexerSnapshot> indexer;

  // Adds one finished generation.
  void addGeneration(const runtime::StepStats& stats, uint32_t completionTokens);
};

// `activeRequests`: waiting and running generations now.
std::string prometheusText(const ServerMetrics& metrics, std::string_view modelId,
                           size_t activeRequests);

}  // namespace kvscope::server
