#include "runtime/memory_estimate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "backend/backend.h"
#include "kv/auto_policy.h"
#include "kv/kv_index.h"
#include "kv/kv_layout.h"
#include "kv/kv_policy.h"

namespace kvscope::runtime {

Expected<MemoryEstimate> estimateMemory(const model::ModelFile& model, uint32_t contextLength,
                                        const kv::KvPolicy& policy, uint64_t memoryBytes) {
  const model::ModelConfig& c = model.config();
  KVS_ASSIGN_OR_RETURN(const std::vector<kv::LayerSchemes> layers,
                       policy.resolve(backend::kvTarget(c)));

  MemoryEstimate e;
  e.weightBytes = model.weightBytes();
  e.contextLength = contextLength == 0 ? c.contextLength : contextLength;
  const kv::KvGeometry geometry = backend::kvGeometry(
      c, kv::KvGeometry{}.rowsPerPage, e.contextLength, backend::kMaxStepRows, policy.tail);
  // Bytes of one token's K and V rows of layer l, all KV heads.
  std::vector<double> layerBytes(c.kvLayers());
  double tail = 0.0;  // the precision tail's ring (kv::KvLayout::tailBytes)
  if (policy.autoBits) {
    // What auto settles at: its budget's bits for every cached value (it
    // caches f16 only until it has measured the first prompt), the budget
    // it plans within: the largest over the layers' head widths.
    KVS_ASSIGN_OR_RETURN(const double bits,
                         kv::autoBudget(*policy.autoBits, backend::kvTarget(c).headDims));
    for (uint32_t l = 0; l < c.kvLayers(); ++l)
      layerBytes[l] = bits / 8.0 * geometry.nHeadKv(l) * 2 * geometry.headDim(l);
  } else {
    KVS_ASSIGN_OR_RETURN(const kv::KvLayout layout,
                         kv::KvLayout::create(geometry, layers, policy.seed));
    for (uint32_t l = 0; l < c.kvLayers(); ++l) {
      layerBytes[l] =
          static_cast<double>(geometry.nHeadKv(l)) *
          (layout.rowBytes(l, kv::KvPart::kKey) + layout.rowBytes(l, kv::KvPart::kValue));
    }
    tail = static_cast<double>(layout.tailBytes());
  }
  // A cache's bytes per token (its global layers) and its rings (the window
  // layers'), layer l's K and V rows of every KV head taking rowPair[l].
  const auto split = [&](const std::vector<double>& rowPair, double& perToken, double& ring) {
    for (uint32_t l = 0; l < c.kvLayers(); ++l) {
      if (geometry.ringRows > 0 && geometry.isWindow(l)) {
        ring += rowPair[l] * geometry.ringRows;
      } else {
        perToken += rowPair[l];
      }
    }
  };
  double perToken = kv::KvIndex::sidecarBytesPerToken(geometry, policy.attention), ring = tail;
  split(layerBytes, perToken, ring);
  e.kvBytesPerToken = static_cast<uint64_t>(std::ceil(perToken));
  e.kvRingBytes = static_cast<uint64_t>(std::ceil(ring));
  e.kvBytes = e.kvBytesPerToken * e.contextLength + e.kvRingBytes;
  // Transient bytes per token of context and whatever the context.
  uint64_t transientPerToken = 0, transientFixed = 0;
  if (policy.autoBits) {
    e.transient = MemoryEstimate::Transient::kAutoMeasuring;
    transientFixed =
        c.kvBytesPerTokenF16() * std::min<uint64_t>(e.contextLength, kv::kAutoCalibrationTokens);
  } else if (policy.twoPhase) {
    // The f16 cache the prefill fills, beside the compressed one while the
    // first decode step encodes its rows again.
    e.transient = MemoryEstimate::Transient::kTwoPhase;
    KVS_ASSIGN_OR_RETURN(
        const kv::KvLayout f16,
        kv::KvLayout::create(geometry, std::vector<kv::LayerSchemes>(c.kvLayers()), policy.seed));
    std::vector<double> f16Bytes(c.kvLayers());
    for (uint32_t l = 0; l < c.kvLayers(); ++l) {
      f16Bytes[l] = static_cast<double>(geometry.nHeadKv(l)) *
                    (f16.rowBytes(l, kv::KvPart::kKey) + f16.rowBytes(l, kv::KvPart::kValue));
    }
    double f16PerToken = 0.0, f16Ring = 0.0;
    split(f16Bytes, f16PerToken, f16Ring);
    transientPerToken = static_cast<uint64_t>(std::ceil(f16PerToken));
    transientFixed = static_cast<uint64_t>(std::ceil(f16Ring));
  }
  e.transientBytes = transientPerToken * e.contextLength + transientFixed;
  e.transientBytesPerToken = transientPerToken;
  if (memoryBytes == 0) {
    e.maxContextThatFits = c.contextLength;
  } else if (const std::optional<uint64_t> tokens = e.tokensThatFit(memoryBytes)) {
    e.maxContextThatFits = static_cast<uint32_t>(std::min<uint64_t>(*tokens, c.contextLength));
  }
  return e;
}

std::optional<uint64_t> MemoryEstimate::tokensThatFit(uint64_t memoryBytes) const {
  const uint64_t fixed =
      weightBytes + kvRingBytes + transientBytes - transientBytesPerToken * contextLength;
  if (fixed >= memoryBytes) return std::nullopt;
  const uint64_t each = kvBytesPerToken + transientBytesPerToken;
  return each ? (memoryBytes - fixed) / each : std::numeric_limits<uint64_t>::max();
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
      e.transientBytes == 0 ? std::string()
      : e.transient == MemoryEstimate::Transient::kTwoPhase
          ? fmt::format(", {:.2f} GiB of f16 rows until the first decode step",
                        e.transientBytes / kGiB)
          : fmt::format(", {:.2f} GiB while auto settles", e.transientBytes / kGiB),
      memoryName, memoryBytes / kGiB);
  // Less than contextLength, since that one did not fit; not capped at the
  // trained context: the answer to "how long can it be".
  const std::optional<uint64_t> fits = e.tokensThatFit(memoryBytes);
  if (!fits || e.kvBytesPerToken + e.transientBytesPerToken == 0)
    return makeError(ErrorCode::kOutOfMemory, "{}: the weights alone do not fit", needs);
  return makeError(ErrorCode::kOutOfMemory,
                   "{}; the longest context that fits is {} tokens (or use a more compressed KV "
                   "cache policy)",
                   needs, *fits);
}

}  // namespace kvscope::runtime
