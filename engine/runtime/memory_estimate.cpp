#include "runtime/memory_estimate.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "kv/auto_policy.h"
#include "kv/kv_index.h"
#include "kv/kv_layout.h"
#include "kv/kv_policy.h"

namespace kvscope::runtime {

Expected<MemoryEstimate> estimateMemory(const model::ModelFile& model, uint32_t contextLength,
                                        const kv::KvPolicy& policy, uint64_t memoryBytes) {
  const model::ModelConfig& c = model.config();
  KVS_ASSIGN_OR_RETURN(const std::vector<kv::LayerSchemes> layers,
                       policy.resolve({c.architecture, c.nLayer, c.headDim}));

  MemoryEstimate e;
  e.weightBytes = model.weightBytes();
  if (policy.autoBits) {
    // What auto settles at: its budget's bits for every cached value (it
    // caches f16 only until it has measured the first prompt).
    KVS_ASSIGN_OR_RETURN(const double bits, kv::autoBudget(*policy.autoBits, c.headDim));
    e.kvBytesPerToken += static_cast<uint64_t>(
        std::ceil(bits / 8.0 * c.nHeadKv * (c.headDim + c.headDimV) * c.nLayer));
  } else {
    KVS_ASSIGN_OR_RETURN(
        const kv::KvLayout layout,
        kv::KvLayout::create({c.nLayer, c.nHeadKv, c.headDim}, layers, policy.seed));
    e.kvBytesPerToken += layout.tokenBytes();
  }
  // The indexer's sidecar, rounded up to whole bytes per token.
  e.kvBytesPerToken += static_cast<uint64_t>(
      std::ceil(kv::KvIndex::bytesPerRow(c.headDim, policy.attention) * c.nHeadKv * c.nLayer));
  e.contextLength = contextLength == 0 ? c.contextLength : contextLength;
  e.kvBytes = e.kvBytesPerToken * e.contextLength;
  if (policy.autoBits) {
    e.transientBytes = c.kvBytesPerTokenF16() *
                       std::min<uint64_t>(e.contextLength, kv::kAutoCalibrationTokens);
  }
  if (memoryBytes == 0) {
    e.maxContextThatFits = c.contextLength;
  } else if (memoryBytes > e.weightBytes + e.transientBytes) {
    const uint64_t tokens = (memoryBytes - e.weightBytes - e.transientBytes) / e.kvBytesPerToken;
    e.maxContextThatFits = static_cast<uint32_t>(std::min<uint64_t>(tokens, c.contextLength));
  }
  return e;
}

Status checkFits(const model::ModelFile& model, uint32_t contextLength,
                 const kv::KvPolicy& kvPolicy, uint64_t memoryBytes, std::string_view memoryName) {
  KVS_ASSIGN_OR_RETURN(const MemoryEstimate e, estimateMemory(model, contextLength, kvPolicy));
  if (e.totalBytes() <= memoryBytes) return okStatus();
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  const std::string needs = fmt::format(
      "a {}-token context needs {:.2f} GiB ({:.2f} GiB of weights and {:.2f} GiB of "
      "KV cache{}) but {} is {:.2f} GiB",
      e.contextLength, e.totalBytes() / kGiB, e.weightBytes / kGiB, e.kvBytes / kGiB,
      e.transientBytes ? fmt::format(", {:.2f} GiB while auto settles", e.transientBytes / kGiB)
                       : std::string(),
      memoryName, memoryBytes / kGiB);
  if (e.weightBytes + e.transientBytes >= memoryBytes)
    return makeError(ErrorCode::kOutOfMemory, "{}: the weights alone do not fit", needs);
  // Less than contextLength, since that one did not fit; not capped at the
  // trained context: the answer to "how long can it be".
  const uint64_t fits = (memoryBytes - e.weightBytes - e.transientBytes) / e.kvBytesPerToken;
  return makeError(ErrorCode::kOutOfMemory,
                   "{}; the longest context that fits is {} tokens (or use a more compressed KV "
                   "cache policy)",
                   needs, fits);
}

}  // namespace kvscope::runtime
