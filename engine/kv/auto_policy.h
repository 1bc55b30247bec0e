#pragma once
// The adaptive KV policy `auto[:BITS]`: measure how much each layer's K and
// V suffer under each candidate scheme, on rows this model really cached,
// then give the layers that suffer most a safer scheme and the others a
// cheaper one, within an average of BITS bits per cached value.
//
// Measures, per layer and candidate scheme (rows round-tripped through the
// scheme built with the cache's stream seed):
//   K: the attention-score error the codec causes. Probe queries are cached
//      keys of the same head (an even sample of positions); for each probe q
//      the softmax over every cached key of q . k / sqrt(d), exact and with
//      the decoded keys; the measure is the mean KL(exact || decoded) in
//      nats. Keys stand in for queries, which the cache does not keep: they
//      share the heads' RoPE structure, and an outlier key channel makes
//      large scores whose errors the softmax amplifies, which is the failure
//      this guards against.
//   V: the relative squared error of the attention output sum_j p_j v_j under
//      the exact probe weights p, with the decoded values.
// Plan: every part starts at the cheapest candidate; then, greedily, the
// upgrade (layer, part, next scheme) with the largest drop in measured error
// per added bit is taken while the average stays within BITS. The average is
// over the values the cache will hold: a sliding-window layer keeps only its
// ring's rows, so at a long context its bits cost a small share of what a
// global layer's do (AutoShape::layerShare), and it is upgraded first. A V error
// counts a third of a K error of the same size: summed over layers, the K
// measure is about 5x and the V measure about 15x the eval KLD that a K-only
// or V-only codec causes on the demo model (turbo4b; 1x and 3x on
// stories260K), so the weight puts the two parts in the same currency.
// A part is "promoted" when its scheme has more bits than the scheme that
// holds most of that part's values (the common scheme: a window layer's ring
// counts by its share); its reason names its error at the common scheme
// against the median of the layers that kept it.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "kv/kv_cache.h"

namespace kvscope::kv {

// The budget `auto` means without BITS (docs/RESULTS.md, "auto"), raised to
// the cheapest candidate where a small head_dim makes that dearer.
inline constexpr double kDefaultAutoBits = 5.5;
// Auto measures the first kAutoCalibrationTokens tokens of a conversation
// (fewer when the first prompt is shorter, but at least kAutoMinTokens: until
// then the cache stays f16, which at such a length costs little).
inline constexpr uint32_t kAutoCalibrationTokens = 512;
inline constexpr uint32_t kAutoMinTokens = 64;

// The candidate schemes, cheapest first.
std::span<const std::string_view> autoCandidates();

// One layer's cached rows as floats, [rows][nHeadKv][headDim] per part.
struct LayerRows {
  std::span<const float> key, value;
};

struct PartDecision {
  std::string scheme;
  double bits = 0.0;           // bits per value of the scheme at this head_dim
  std::vector<double> errors;  // measured error per candidate, autoCandidates() order
  bool promoted = false;
  std::string reason;  // why promoted; empty otherwise
};

struct LayerDecision {
  PartDecision key, value;
};

struct AutoPlan {
  double budget = 0.0;  // the BITS asked for
  // The plan's average over K and V of every layer, each weighted by the
  // values it holds at the context (its row width times its
  // AutoShape::layerShare): bits per value the cache holds there.
  double bitsPerValue = 0.0;
  std::vector<LayerDecision> layers;

  std::vector<LayerSchemes> schemes() const;
};

struct AutoShape {
  std::vector<KvLayerShape> layers;   // [nLayer]: each layer's KV heads and head width
  uint32_t rows = 0;                  // calibration rows per layer
  uint64_t seed = kDefaultCacheSeed;  // the cache seed (streamSeed per layer and part)
  // [nLayer] or empty (all 1): the rows each layer keeps at the session's
  // context, as a share of that context (a window layer's ring / context).
  std::vector<double> layerShare;
};

// The budget an auto policy plans within at `headDim`: `bits`, or for 0 (auto
// without BITS) kDefaultAutoBits raised to the cheapest candidate; an error
// when `bits` is below the cheapest candidate at this head_dim.
Expected<double> autoBudget(double bits, uint32_t headDim);
// The budget over layers of these head widths: the largest autoBudget of
// them (an error when `bits` is below the cheapest candidate at any).
Expected<double> autoBudget(double bits, std::span<const uint32_t> headDims);

// Measures every layer and plans within autoBudget(bits, headDim) bits per
// value (the largest over the layers' head widths). Errors: no rows, rows of
// the wrong size, or a budget below the cheapest candidate at some layer.
Expected<AutoPlan> planAutoPolicy(std::span<const LayerRows> layers, const AutoShape& shape,
                                  double bits);

}  // namespace kvscope::kv
