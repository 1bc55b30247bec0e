#pragma once
// KvPolicy: which scheme caches K and V in each layer, plus cache options.
// Parsed from a comma-separated list of items (whitespace around items is
// ignored; every key at most once, except per-layer overrides):
//
//   k=NAME            K scheme of every layer (default f16)
//   v=NAME            V scheme of every layer (default f16)
//   kv=NAME           both
//   boundary=N        the first and last N layers use f16 ...
//   boundary=N:NAME   ... or NAME, for K and V
//   k@L=NAME          K scheme of layer L (0-based); also v@L, kv@L, and a
//   k@A-B=NAME        range of layers A..B inclusive
//   two_phase         f16 during prefill; compress everything at the first
//                     decode step, then encode each new row
//   tail=N            a precision tail: the last N rows of every layer are
//                     also kept at f16 and attended from there (kv/kv_cache.h)
//   seed=N            the cache seed (decimal or 0x hex) of rotated schemes
//   indexer=K[:W[:S]] indexed decode: the top K rows by the sidecar's score,
//                     plus the last W and the first S rows (kv/indexer.h)
//   indexer_scorer=S  the sidecar: bounds16 (default), bounds32, bounds64,
//                     meanstd16, meanstd32, meanstd64 (kv/indexer.h)
//   indexer_dense=N   the first N layers attend every row (default 2)
//   indexer_dense_heads=L.H+L.H  ... and these KV heads of the others;
//                     "auto": the chat session measures them (kv/indexer.h)
//   sparse_v=TAU      skip V rows weighted below TAU (0 <= TAU < 1)
//   auto[:BITS]       choose each layer's K and V schemes by measuring the
//                     first prompt's rows, within BITS bits per value on
//                     average (kv/auto_policy.h; without BITS the default
//                     budget, kv::autoBudget); excludes k, v, kv, per-layer
//                     overrides, boundary, two_phase and tail
//
// indexer and sparse_v choose how attention reads the cache, not what it
// holds: a backend changes them without re-encoding (Backend::setIndexer).
// Precedence: k/v/kv, then boundary, then per-layer overrides in the order
// written (later wins). Example: "k=q8_0,v=turbo3,boundary=2,k@5=f16".
// The empty string is f16 everywhere.
//
// resolve() turns a policy into per-layer scheme names for a model's cache
// layers (all its layers but Gemma 4's KV-shared ones, which store no rows;
// boundary=N counts from the last storing layer), refusing a layer index past
// them, and a scheme the architecture's cache cannot hold (cacheLayoutOf:
// MLA latents and recurrent state are not K/V rows).

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "kv/indexer.h"
#include "kv/kv_cache.h"
#include "kv/kv_scheme.h"

namespace kvscope::kv {

// What an architecture's cache holds per token and layer.
enum class CacheLayout {
  kKvRows,          // one K row and one V row per KV head (llama, qwen, mistral ...)
  kLatent,          // one compressed latent shared by K and V (MLA: deepseek2/3)
  kRecurrentState,  // a fixed-size state updated in place (mamba, rwkv, hybrids)
};

// The per-architecture table; names it does not list hold K/V rows.
CacheLayout cacheLayoutOf(std::string_view architecture);
// Ok when `scheme` can store the cache of `architecture`; else an error naming both.
Status checkSchemeForArchitecture(std::string_view architecture, std::string_view scheme);

// The model facts a policy resolves against.
struct KvTarget {
  std::string_view architecture;
  uint32_t nLayer = 0;
  std::vector<uint32_t>
      headDims;  // the layers' head widths; an auto budget is checked against each
};

struct KvPolicy {
  // Declared so that KvPolicy is no aggregate: text never converts to a policy
  // by brace elision (BackendChoice{.kvPolicy = "auto"} would set `key`).
  KvPolicy() = default;

  struct Override {
    uint32_t first = 0, last = 0;  // layers, inclusive
    bool key = false, value = false;
    std::string scheme;
  };

  std::string key = "f16";
  std::string value = "f16";
  uint32_t boundary = 0;
  std::string boundaryScheme = "f16";
  std::vector<Override> overrides;
  bool twoPhase = false;
  uint32_t tail = 0;               // rows of the precision tail; 0: none
  std::optional<double> autoBits;  // auto[:BITS]: schemes chosen by measurement; 0: no BITS
  uint64_t seed = kDefaultCacheSeed;
  IndexerOptions attention;  // indexer and sparse_v (diagnostic is not part of the text)

  // Errors (kInvalidArgument) name the offending item.
  static Expected<KvPolicy> parse(std::string_view text);
  // A canonical text that parses back to an equal policy.
  std::string toString() const;
  // (K, V) scheme names per layer. An auto policy resolves to f16 in every
  // layer: the cache it measures before it chooses (its budget is checked
  // against target.headDim, kv::autoBudget).
  Expected<std::vector<LayerSchemes>> resolve(const KvTarget& target) const;
  // The explicit policy that stores `layers` (one entry per layer): the most
  // common K and V schemes plus per-layer overrides, with this policy's seed
  // and attention options; auto cleared.
  KvPolicy withLayers(std::span<const LayerSchemes> layers) const;
  // Whether `other` stores the same rows (schemes, seed, two_phase): then only
  // the attention options differ and no re-encode is needed.
  bool sameCache(const KvPolicy& other) const;
};

// The recommended compressed policy (the app's default): auto at its default
// budget, which on the demo model beats the former default k=q8_0,v=turbo4
// with 1 bit per value less (docs/RESULTS.md, "auto").
KvPolicy defaultKvPolicy();

}  // namespace kvscope::kv
