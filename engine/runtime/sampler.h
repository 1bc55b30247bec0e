#pragma once
// Token sampler: turns one step's logits into the next token, like llama.cpp's
// default common sampler chain. The steps, in this order:
//   1. repetition penalty: every distinct token among the last repeatLastN
//      accepted tokens has its logit divided by repeatPenalty when > 0 and
//      multiplied by it when < 0 (once per token, however often it repeats);
//   2. top-k: keep the topK highest logits;
//   3. top-p: keep the shortest run of most likely tokens whose probability
//      mass (softmax over what top-k kept) reaches topP;
//   4. min-p: keep tokens with probability >= minP * (highest probability);
//   5. temperature: divide the surviving logits by temperature;
//   6. draw from the softmax of the result.
// The filters run on the untempered logits and temperature only reshapes what
// they kept, as in llama.cpp. Temperature 0 is greedy: the highest penalized
// logit wins (the filters never remove it, so they are skipped).
//
// Ties in rank (greedy, the top-k cut, the top-p order) go to the lowest token
// id. Logits of -inf mark tokens that must not be produced; they are never
// candidates. Logits must not be NaN or +inf and at least one must be finite.
//
// Reproducibility: the RNG is std::mt19937_64, whose output sequence the C++
// standard fixes. Each sample() at temperature > 0 consumes exactly one 64-bit
// output, turned into a uniform double u in [0, 1) from its top 53 bits, and
// returns the first kept candidate, in ascending token id order, at which the
// cumulative probability exceeds u (inverse CDF). A seed thus gives the same
// tokens on every build that uses the same standard library and libm (the
// probabilities go through std::exp). Not thread-safe, like the rest of the
// engine: one worker thread owns a Sampler.

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "core/error.h"

namespace kvscope::runtime {

// Defaults are llama.cpp's. validate() names the allowed range of each field.
struct SamplerConfig {
  float temperature = 0.8f;      // >= 0; 0 = greedy
  int32_t topK = 40;             // >= 0; 0 = off
  float topP = 0.95f;            // (0, 1]; 1 = off
  float minP = 0.05f;            // [0, 1]; 0 = off
  float repeatPenalty = 1.0f;    // > 0; 1 = off, < 1 favours repeats
  int32_t repeatLastN = 64;      // >= 0; how many recent tokens the penalty sees
  std::optional<uint64_t> seed;  // unset: drawn from std::random_device
};

// kInvalidArgument naming the first field out of range, else ok.
Status validate(const SamplerConfig& config);

// One kept candidate. `logit` is after the penalty and before temperature;
// `probability` is its share of the filtered, tempered distribution.
struct TokenProbability {
  int32_t id = 0;
  float logit = 0.0f;
  float probability = 0.0f;
};

// The distribution sample() draws from, for display and tests: the kept
// candidates sorted by probability (highest first, ties by lowest id),
// probabilities summing to 1. At temperature 0 it is the greedy token alone.
// `recentTokens` are the accepted tokens, oldest first; only the last
// config.repeatLastN count, and ids outside the logits are ignored. `config`
// must pass validate(). Sorts every candidate when no filter is on (O(n log n)).
std::vector<TokenProbability> samplingDistribution(std::span<const float> logits,
                                                   const SamplerConfig& config,
                                                   std::span<const int32_t> recentTokens);

class Sampler {
 public:
  // Validates the config and seeds the RNG (from std::random_device when the
  // config has no seed; seed() reports the one chosen so a run can be repeated).
  static Expected<Sampler> create(const SamplerConfig& config);

  // The next token for these logits (one per vocabulary entry). O(n) for a
  // 150k vocabulary: top-k selects (heap or nth_element), top-p bins the mass
  // by logit, min-p is a threshold; only the few candidates at a cut are sorted.
  int32_t sample(std::span<const float> logits);

  // Records a token that entered the context (prompt or generated) for the
  // repetition penalty; sample() does not record its own result.
  void accept(int32_t token);

  // Forgets the accepted tokens and restarts the RNG from seed(), so the same
  // logits give the same tokens again.
  void reset();

  uint64_t seed() const { return m_seed; }
  const SamplerConfig& config() const { return m_config; }
  // The window the penalty sees, oldest first: at most config().repeatLastN tokens.
  std::span<const int32_t> recentTokens() const { return m_recent; }

  // samplingDistribution() with this sampler's config and recent tokens.
  std::vector<TokenProbability> distribution(std::span<const float> logits) const;

 private:
  Sampler(const SamplerConfig& config, uint64_t seed);

  SamplerConfig m_config;
  uint64_t m_seed = 0;
  std::mt19937_64 m_rng;
  std::vector<int32_t> m_recent;  // [<= repeatLastN], oldest first
  // Reused by sample() so a step does not allocate a vocabulary-sized buffer.
  std::vector<TokenProbability> m_candidates;
};

}  // namespace kvscope::runtime
