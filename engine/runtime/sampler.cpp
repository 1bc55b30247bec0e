#include "runtime/sampler.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <limits>

namespace kvscope::runtime {
namespace {

using Candidates = std::vector<TokenProbability>;

constexpr float kInf = std::numeric_limits<float>::infinity();
// Top-k up to this size uses heap selection (partial_sort): one pass that
// mostly compares against the k-th best so far, ~10x faster than nth_element on
// a 150k vocabulary at k = 40. Larger k pays log k per insertion and the final
// sort, so nth_element (O(n), unsorted result) takes over. llama.cpp splits at
// the same size.
constexpr int32_t kHeapSelectMaxK = 128;
// Top-p locates its cut with a histogram of probability mass over logit
// buckets of 1/8 nat below the top logit; everything 32 nats or more below
// (weight < 1e-13 of the top) shares the last bucket.
constexpr size_t kTopPBuckets = 256;
constexpr double kTopPDepth = 32.0;

// Higher logit first, equal logits by lower id: every cut is deterministic.
bool ranksAbove(const TokenProbability& a, const TokenProbability& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

bool idBelow(const TokenProbability& a, const TokenProbability& b) {
  return a.id < b.id;
}

double maxLogit(const Candidates& c) {
  return std::ranges::max_element(c, {}, &TokenProbability::logit)->logit;
}

// `byId[i]` is token i. Each distinct token of the window is penalized once, as
// llama.cpp does: dividing a positive logit and multiplying a negative one both
// make the token less likely for a penalty > 1.
void applyRepetitionPenalty(const SamplerConfig& config, std::span<const int32_t> recentTokens,
                            Candidates& byId) {
  if (config.repeatPenalty == 1.0f || config.repeatLastN == 0) return;
  const size_t window = std::min(recentTokens.size(), static_cast<size_t>(config.repeatLastN));
  std::vector<int32_t> tokens(recentTokens.end() - static_cast<ptrdiff_t>(window),
                              recentTokens.end());
  std::ranges::sort(tokens);
  const auto duplicates = std::ranges::unique(tokens);
  tokens.erase(duplicates.begin(), duplicates.end());
  for (int32_t token : tokens) {
    if (token < 0 || static_cast<size_t>(token) >= byId.size()) continue;
    float& logit = byId[static_cast<size_t>(token)].logit;
    logit = logit > 0.0f ? logit / config.repeatPenalty : logit * config.repeatPenalty;
  }
}

// Every token with its penalized logit, minus the masked (-inf) ones.
void collectCandidates(std::span<const float> logits, const SamplerConfig& config,
                       std::span<const int32_t> recentTokens, Candidates& out) {
  assert(!logits.empty() && logits.size() <= static_cast<size_t>(INT32_MAX));
  out.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    assert(!std::isnan(logits[i]) && logits[i] != kInf);
    out[i] = {static_cast<int32_t>(i), logits[i], 0.0f};
  }
  applyRepetitionPenalty(config, recentTokens, out);
  std::erase_if(out, [](const TokenProbability& t) { return t.logit == -kInf; });
  assert(!out.empty() && "at least one logit must be finite");
}

void keepTopK(Candidates& c, int32_t topK) {
  if (topK == 0 || static_cast<size_t>(topK) >= c.size()) return;
  if (topK <= kHeapSelectMaxK)
    std::partial_sort(c.begin(), c.begin() + topK, c.end(), ranksAbove);
  else
    std::nth_element(c.begin(), c.begin() + topK, c.end(), ranksAbove);
  c.resize(static_cast<size_t>(topK));
}

// Keeps the shortest rank-order head whose softmax mass (over c, untempered)
// reaches topP. The mass histogram names the bucket the cut falls in: the
// buckets above it stay whole and unsorted, those below go, and only that one
// bucket is sorted and walked, so the cost is O(n) however large the nucleus.
// When rounding keeps the walk just short of topP, the whole bucket stays.
void keepTopP(Candidates& c, float topP) {
  if (topP == 1.0f) return;
  const double top = maxLogit(c);
  const auto bucketOf = [top](float logit) {
    const double depth = (top - logit) * (static_cast<double>(kTopPBuckets) / kTopPDepth);
    return static_cast<size_t>(std::min(depth, static_cast<double>(kTopPBuckets - 1)));
  };
  std::array<double, kTopPBuckets> massByBucket{};
  double total = 0.0;
  for (auto& t : c) {
    t.probability = static_cast<float>(std::exp(static_cast<double>(t.logit) - top));
    total += t.probability;
    massByBucket[bucketOf(t.logit)] += t.probability;
  }
  const double target = static_cast<double>(topP) * total;
  size_t cutBucket = 0;
  double kept = 0.0;
  while (cutBucket + 1 < kTopPBuckets && kept + massByBucket[cutBucket] < target)
    kept += massByBucket[cutBucket++];

  const auto cutBegin = std::partition(
      c.begin(), c.end(), [&](const TokenProbability& t) { return bucketOf(t.logit) < cutBucket; });
  const auto cutEnd = std::partition(
      cutBegin, c.end(), [&](const TokenProbability& t) { return bucketOf(t.logit) == cutBucket; });
  std::sort(cutBegin, cutEnd, ranksAbove);
  auto end = cutEnd;
  for (auto it = cutBegin; it != cutEnd; ++it) {
    kept += it->probability;
    if (kept >= target) {
      end = it + 1;
      break;
    }
  }
  c.erase(end, c.end());
}

// p >= minP * p_max is logit - maxLogit >= log(minP): a linear filter, no softmax.
void keepMinP(Candidates& c, float minP) {
  if (minP == 0.0f) return;
  const double top = maxLogit(c);
  const double floor = std::log(static_cast<double>(minP));
  std::erase_if(
      c, [&](const TokenProbability& t) { return static_cast<double>(t.logit) - top < floor; });
}

void applyFilters(const SamplerConfig& config, Candidates& c) {
  keepTopK(c, config.topK);
  keepTopP(c, config.topP);
  keepMinP(c, config.minP);
}

// Stores exp((logit - max) / temperature) in each probability field, not yet
// normalized, and returns their sum in the same order a later walk adds them.
double applyTemperature(Candidates& c, float temperature) {
  const double top = maxLogit(c);
  double total = 0.0;
  for (auto& t : c) {
    t.probability =
        static_cast<float>(std::exp((static_cast<double>(t.logit) - top) / temperature));
    total += t.probability;
  }
  return total;
}

// Inverse CDF: the first candidate whose cumulative weight exceeds target, for a
// target in [0, total of the weights].
int32_t pickByCumulativeWeight(const Candidates& c, double target) {
  double cumulative = 0.0;
  for (const auto& t : c) {
    cumulative += t.probability;
    if (target < cumulative) return t.id;
  }
  // u * total rounded up to total: the answer is the last token with weight.
  const auto last = std::find_if(c.rbegin(), c.rend(),
                                 [](const TokenProbability& t) { return t.probability > 0.0f; });
  assert(last != c.rend());  // the top candidate weighs exp(0) = 1
  return last->id;
}

}  // namespace

Status validate(const SamplerConfig& config) {
  if (!(config.temperature >= 0.0f) || !std::isfinite(config.temperature))
    return makeError(ErrorCode::kInvalidArgument,
                     "temperature must be a finite number >= 0 (0 always picks the most likely "
                     "token), got {}",
                     config.temperature);
  if (config.topK < 0)
    return makeError(ErrorCode::kInvalidArgument, "top-k must be >= 0 (0 turns it off), got {}",
                     config.topK);
  if (!(config.topP > 0.0f && config.topP <= 1.0f))
    return makeError(ErrorCode::kInvalidArgument,
                     "top-p must be in (0, 1] (1 turns it off), got {}", config.topP);
  if (!(config.minP >= 0.0f && config.minP <= 1.0f))
    return makeError(ErrorCode::kInvalidArgument,
                     "min-p must be in [0, 1] (0 turns it off), got {}", config.minP);
  if (!(config.repeatPenalty > 0.0f) || !std::isfinite(config.repeatPenalty))
    return makeError(ErrorCode::kInvalidArgument,
                     "repeat penalty must be a finite number > 0 (1 turns it off), got {}",
                     config.repeatPenalty);
  if (config.repeatLastN < 0)
    return makeError(ErrorCode::kInvalidArgument,
                     "repeat-last-n must be >= 0 (0 turns the repeat penalty off; for the whole "
                     "context pass its length), got {}",
                     config.repeatLastN);
  return okStatus();
}

std::vector<TokenProbability> samplingDistribution(std::span<const float> logits,
                                                   const SamplerConfig& config,
                                                   std::span<const int32_t> recentTokens) {
  assert(validate(config).ok());
  Candidates c;
  collectCandidates(logits, config, recentTokens, c);
  if (config.temperature == 0.0f) {
    TokenProbability best = std::ranges::min(c, ranksAbove);
    best.probability = 1.0f;
    return {best};
  }
  applyFilters(config, c);
  const double total = applyTemperature(c, config.temperature);
  for (auto& t : c) t.probability = static_cast<float>(t.probability / total);
  std::ranges::sort(c, ranksAbove);
  return c;
}

Expected<Sampler> Sampler::create(const SamplerConfig& config) {
  KVS_TRY(validate(config));
  uint64_t seed = 0;
  if (config.seed) {
    seed = *config.seed;
  } else {
    std::random_device device;  // yields 32 bits per call
    seed = (static_cast<uint64_t>(device()) << 32) | device();
  }
  return Sampler(config, seed);
}

Sampler::Sampler(const SamplerConfig& config, uint64_t seed)
    : m_config(config), m_seed(seed), m_rng(seed) {}

int32_t Sampler::sample(std::span<const float> logits) {
  collectCandidates(logits, m_config, m_recent, m_candidates);
  if (m_config.temperature == 0.0f) return std::ranges::min(m_candidates, ranksAbove).id;
  // One draw per tempered step, even when a single candidate survives, so the
  // position in the RNG stream depends only on the number of steps.
  const double u = static_cast<double>(m_rng() >> 11) * 0x1.0p-53;
  applyFilters(m_config, m_candidates);
  if (!std::ranges::is_sorted(m_candidates, idBelow)) std::ranges::sort(m_candidates, idBelow);
  const double total = applyTemperature(m_candidates, m_config.temperature);
  return pickByCumulativeWeight(m_candidates, u * total);
}

void Sampler::accept(int32_t token) {
  if (m_config.repeatLastN == 0) return;
  if (m_recent.size() == static_cast<size_t>(m_config.repeatLastN))
    m_recent.erase(m_recent.begin());
  m_recent.push_back(token);
}

void Sampler::reset() {
  m_recent.clear();
  m_rng.seed(m_seed);
}

std::vector<TokenProbability> Sampler::distribution(std::span<const float> logits) const {
  return samplingDistribution(logits, m_config, m_recent);
}

}  // namespace kvscope::runtime
