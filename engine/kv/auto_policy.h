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
// Plans: every part starts at the cheapest candidate; then, greedily, the
// upgrade (layer, part, next scheme) with the largest drop in weighted error
// per added bit is taken while the average stays within BITS. The average is
// over the values the cache will hold: a sliding-window layer keeps only its
// ring's rows, so at a long context its bits cost a small share of what a
// global layer's do (AutoShape::layerShare), and it is upgraded first. The
// K and V measures are in different currencies, and their exchange rate is
// the model's: a K-only or V-only turbo4b cache's KLD per unit of summed
// measure gave V 0.23x K's weight on the demo model and 0.81x on the 4K
// recall model; at 5.5 bits the greedy plan fit to the demo model had 1.84x
// the KLD of uniform turbo5b on the recall model, while uniform turbo5b had
// 1.55x the greedy plan's on the demo model. So the planner offers one
// greedy plan per weight of kAutoValueWeights, and the uniform plan (every
// part at the dearest candidate the budget buys: distortion is convex in the
// rate, so a mix must earn its place), and the runtime keeps the one whose
// KLD it measures lowest on the model itself (runtime/kv_auto.h).
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

// The weights of a V output error against a K score KL under which the
// planner makes a greedy plan; the first (fit on the demo model) makes the
// plan auto takes when it cannot try the candidates.
struct AutoValueWeight {
  double weight;
  std::string_view text;
};
inline constexpr AutoValueWeight kAutoValueWeights[] = {{1.0 / 3.0, "1/3"}, {1.0, "1"}, {3.0, "3"}};

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

// One candidate plan as the runtime tried it.
struct AutoTrial {
  std::string method;  // AutoPlan::method
  double bitsPerValue = 0.0;
  double kld = 0.0;  // mean KL(f16 || plan) over the trial's tokens, nats
};

struct AutoPlan {
  double budget = 0.0;  // the BITS asked for
  // The plan's average over K and V of every layer, each weighted by the
  // values it holds at the context (its row width times its
  // AutoShape::layerShare): bits per value the cache holds there.
  double bitsPerValue = 0.0;
  std::vector<LayerDecision> layers;
  // How it was made: "mix, V weighted 1/3" (greedy) or "uniform turbo5b".
  std::string method;
  // Every candidate the runtime tried, this plan among them, and over how
  // many tokens; empty where there was one candidate or they were not tried.
  std::vector<AutoTrial> trials;
  uint32_t trialTokens = 0;
  std::string untried;  // why the candidates were not tried (then this is the first); or empty

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

// Measures every layer and makes the candidate plans within
// autoBudget(bits, headDim) bits per value (the largest over the layers' head
// widths): the greedy plan at each of kAutoValueWeights, then the uniform
// plan, each once (a plan equal to an earlier one is left out). Errors: no
// rows, rows of the wrong size, or a budget below the cheapest candidate at
// some layer.
Expected<std::vector<AutoPlan>> autoPlanCandidates(std::span<const LayerRows> layers,
                                                   const AutoShape& shape, double bits);

}  // namespace kvscope::kv
