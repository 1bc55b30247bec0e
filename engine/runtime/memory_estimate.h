#pragma once
// Memory a model needs before it is loaded, so the model picker can say
// whether it fits and how long a context it can hold: the weights as stored
// plus a KV cache full at the requested context, its bytes per token counted
// from the KV schemes' row layouts (the same accounting the cache reports
// once loaded) for the global layers, and the sliding-window layers' ring,
// which does not grow with the context (backend::kvGeometry), nor does the precision tail's, plus
// what settling `auto` holds for a moment (its f16 measuring cache of the first
// kAutoCalibrationTokens tokens beside the cache it settles on), or a two_phase
// cache (the f16 cache of its prefill beside the compressed one while the first
// decode step encodes the rows again). Activations and the logits buffer
// are not counted: they are a few MB for the models kvscope runs, small next to either term. A KV
// policy switch later in a chat also holds two caches at once; that is not promised here: a switch
// that does not fit fails with kOutOfMemory and keeps the old cache (Session::setKvPolicy).

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/error.h"
#include "kv/kv_policy.h"
#include "model/model_file.h"

namespace kvscope::runtime {

struct MemoryEstimate {
  uint64_t weightBytes = 0;
  uint64_t kvBytesPerToken = 0;  // the layers that keep every row, K and V
  uint64_t kvRingBytes = 0;  // the window layers' ring and the precision tail, whatever the context
  uint32_t contextLength = 0;    // what the estimate is for
  uint64_t kvBytes = 0;          // kvBytesPerToken * contextLength + kvRingBytes
  // What transientBytes holds: auto's f16 measuring cache while it settles,
  // or two_phase's f16 cache (full at contextLength) while it is encoded again.
  enum class Transient { kNone, kAutoMeasuring, kTwoPhase };
  Transient transient = Transient::kNone;
  uint64_t transientBytes = 0;
  uint64_t transientBytesPerToken = 0;  // the part of it that grows with the context
  // Longest context (<= the model's trained context) whose weights and KV fit
  // the given memory; 0 when the weights alone do not fit. The trained context
  // when no memory size was given.
  uint32_t maxContextThatFits = 0;
  uint64_t totalBytes() const { return weightBytes + kvBytes + transientBytes; }
  // Tokens of context whose peak fits `memoryBytes` (not capped at the
  // trained context); nullopt when what does not grow with the context
  // (the weights, rings, auto's measuring cache) alone does not fit.
  std::optional<uint64_t> tokensThatFit(uint64_t memoryBytes) const;
};

// `contextLength` 0 means the model's trained context. `kvPolicy` is resolved
// per layer for this model; one it cannot hold is the policy's error.
// `memoryBytes` 0: no limit.
Expected<MemoryEstimate> estimateMemory(const model::ModelFile& model, uint32_t contextLength,
                                        const kv::KvPolicy& kvPolicy, uint64_t memoryBytes = 0);

// Whether the weights and a KV cache full at `contextLength` (0: trained)
// fit `memoryBytes` of `memoryName` ("llvmpipe's device memory"); when they do
// not, a kOutOfMemory error saying what is needed and the longest context that
// fits (or that the weights alone do not). A policy that does not resolve is
// its error, as for estimateMemory.
Status checkFits(const model::ModelFile& model, uint32_t contextLength,
                 const kv::KvPolicy& kvPolicy, uint64_t memoryBytes, std::string_view memoryName);

}  // namespace kvscope::runtime
