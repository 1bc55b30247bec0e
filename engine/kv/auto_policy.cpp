#include "kv/auto_policy.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "kv/kv_scheme.h"

namespace kvscope::kv {
namespace {

constexpr std::array<std::string_view, 6> kCandidates = {"turbo3b", "turbo4b", "turbo5b",
                                                         "turbo6b", "q8_0r",   "f16"};
constexpr uint32_t kProbes = 16;  // probe positions per head

// Every row of one part round-tripped through `scheme`.
std::vector<float> roundTrip(std::span<const float> rows, const KvScheme& scheme) {
  const uint32_t d = scheme.dim();
  std::vector<float> out(rows.size());
  std::vector<uint8_t> code(scheme.rowBytes());
  for (size_t at = 0; at < rows.size(); at += d) {
    scheme.encode(rows.subspan(at, d), code);
    scheme.decode(code, std::span(out).subspan(at, d));
  }
  return out;
}

double dot(const float* a, const float* b, uint32_t d) {
  double s = 0.0;
  for (uint32_t i = 0; i < d; ++i) s += double{a[i]} * b[i];
  return s;
}

// One layer's calibration rows: `rows` rows of heads x d values.
struct LayerGeometry {
  uint32_t heads = 0, d = 0, rows = 0;
};

// softmax(scale * q . k_j) over every row j but `skip`, into p.
void probeWeights(const float* q, std::span<const float> keys, const LayerGeometry& g,
                  uint32_t head, uint32_t skip, std::vector<double>& p) {
  const uint32_t d = g.d, stride = g.heads * d;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  p.assign(g.rows, 0.0);
  double top = -INFINITY;
  for (uint32_t j = 0; j < g.rows; ++j) {
    if (j == skip) continue;
    p[j] = scale * dot(q, &keys[size_t{j} * stride + size_t{head} * d], d);
    top = std::max(top, p[j]);
  }
  double sum = 0.0;
  for (uint32_t j = 0; j < g.rows; ++j) {
    p[j] = j == skip ? 0.0 : std::exp(p[j] - top);
    sum += p[j];
  }
  for (double& w : p) w /= sum;
}

struct Measures {
  double keyKl = 0.0;       // mean KL(exact || decoded keys) over probes
  double valueError = 0.0;  // relative squared error of the probe outputs
};

// The K and V measures of one layer with `decodedKey` / `decodedValue`
// (either may be the exact rows, to measure the other part alone).
Measures measure(const LayerRows& exact, std::span<const float> decodedKey,
                 std::span<const float> decodedValue, const LayerGeometry& g) {
  const uint32_t d = g.d, stride = g.heads * d;
  const uint32_t probes = std::min(kProbes, g.rows);
  std::vector<double> p, pHat;
  std::vector<double> o(d), oHat(d);
  double kl = 0.0, err = 0.0, norm = 0.0;
  for (uint32_t h = 0; h < g.heads; ++h) {
    for (uint32_t k = 0; k < probes; ++k) {
      const uint32_t i = static_cast<uint32_t>(uint64_t{k} * g.rows / probes);
      const float* q = &exact.key[size_t{i} * stride + size_t{h} * d];
      probeWeights(q, exact.key, g, h, i, p);
      probeWeights(q, decodedKey, g, h, i, pHat);
      std::fill(o.begin(), o.end(), 0.0);
      std::fill(oHat.begin(), oHat.end(), 0.0);
      for (uint32_t j = 0; j < g.rows; ++j) {
        if (p[j] > 0.0) kl += p[j] * (std::log(p[j]) - std::log(std::max(pHat[j], 1e-300)));
        const size_t at = size_t{j} * stride + size_t{h} * d;
        for (uint32_t c = 0; c < d; ++c) {
          o[c] += p[j] * exact.value[at + c];
          oHat[c] += p[j] * decodedValue[at + c];
        }
      }
      for (uint32_t c = 0; c < d; ++c) {
        err += (oHat[c] - o[c]) * (oHat[c] - o[c]);
        norm += o[c] * o[c];
      }
    }
  }
  const double count = static_cast<double>(probes) * g.heads;
  return {kl / count, norm > 0.0 ? err / norm : 0.0};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

std::span<const std::string_view> autoCandidates() {
  return kCandidates;
}

std::vector<LayerSchemes> AutoPlan::schemes() const {
  std::vector<LayerSchemes> out;
  for (const auto& l : layers) out.push_back({l.key.scheme, l.value.scheme});
  return out;
}

Expected<double> autoBudget(double bits, uint32_t headDim) {
  KVS_ASSIGN_OR_RETURN(auto cheapest, makeScheme(kCandidates.front(), {headDim, 0}));
  const double floor = cheapest->bitsPerValue();
  if (bits <= 0.0) return std::max(kDefaultAutoBits, floor);
  if (bits < floor) {
    return makeError(ErrorCode::kInvalidArgument,
                     "auto:{} is below the cheapest candidate ({}, {:.2f} bits per value at "
                     "head_dim {}); give a budget of at least {:.2f}, or auto alone",
                     bits, kCandidates.front(), floor, headDim, floor);
  }
  return bits;
}

Expected<double> autoBudget(double bits, std::span<const uint32_t> headDims) {
  double budget = 0.0;
  for (const uint32_t headDim : headDims) {
    KVS_ASSIGN_OR_RETURN(const double b, autoBudget(bits, headDim));
    budget = std::max(budget, b);
  }
  return budget;
}

namespace {

// What planning needs of a measured cache: per part (2 l + K/V) the error at
// each candidate and the values it holds, per layer each candidate's bits.
struct Measured {
  std::vector<std::vector<double>> errors;  // [2 l + part][candidate]
  std::vector<std::vector<double>> bits;    // [layer][candidate]
  std::vector<double> share, weight;        // [2 l + part]
  double weights = 0.0;                     // sum of weight
  double budget = 0.0;

  double bitsAt(size_t part, size_t level) const { return bits[part / 2][level]; }
  // sum over parts of weight x bits: the plan's bits times `weights`.
  double total(const std::vector<size_t>& level) const {
    double sum = 0.0;
    for (size_t i = 0; i < level.size(); ++i) sum += weight[i] * bitsAt(i, level[i]);
    return sum;
  }
  // Whether a plan of this total keeps the budget (rounding forgiven).
  bool fits(double planTotal) const { return planTotal <= budget * weights * (1.0 + 1e-12) + 1e-9; }
};

Expected<Measured> measureLayers(std::span<const LayerRows> layers, const AutoShape& shape,
                                 double bits) {
  if (layers.empty() || shape.rows < 2) {
    return makeError(ErrorCode::kInvalidArgument,
                     "the auto KV policy needs at least 2 cached tokens to measure");
  }
  if (shape.layers.size() != layers.size()) {
    return makeError(ErrorCode::kInvalidArgument, "{} layer shapes for {} layers",
                     shape.layers.size(), layers.size());
  }
  if (!shape.layerShare.empty() && shape.layerShare.size() != layers.size()) {
    return makeError(ErrorCode::kInvalidArgument, "{} layer shares for {} layers",
                     shape.layerShare.size(), layers.size());
  }
  Measured m;
  std::vector<uint32_t> headDims;
  for (const KvLayerShape& l : shape.layers) headDims.push_back(l.headDim);
  KVS_ASSIGN_OR_RETURN(m.budget, autoBudget(bits, headDims));
  // A scheme's bits per value depend on the width.
  m.bits.resize(layers.size());
  for (size_t l = 0; l < layers.size(); ++l) {
    for (auto name : kCandidates) {
      KVS_ASSIGN_OR_RETURN(auto scheme, makeScheme(name, {shape.layers[l].headDim, shape.seed}));
      m.bits[l].push_back(scheme->bitsPerValue());
    }
  }
  const auto nParts = 2 * layers.size();
  m.errors.resize(nParts);
  for (size_t l = 0; l < layers.size(); ++l) {
    const LayerRows& rows = layers[l];
    const LayerGeometry g{shape.layers[l].nHeadKv, shape.layers[l].headDim, shape.rows};
    const size_t rowValues = size_t{g.rows} * g.heads * g.d;
    if (rowValues == 0 || rows.key.size() != rowValues || rows.value.size() != rowValues) {
      return makeError(ErrorCode::kInvalidArgument, "layer {}: {} cached values, expected {}", l,
                       rows.key.size(), rowValues);
    }
    for (uint32_t part = 0; part < 2; ++part) {
      for (auto name : kCandidates) {
        const auto seed = streamSeed(shape.seed, static_cast<uint32_t>(l), part);
        KVS_ASSIGN_OR_RETURN(auto scheme, makeScheme(name, {g.d, seed}));
        const auto decoded = roundTrip(part == 0 ? rows.key : rows.value, *scheme);
        const Measures e =
            part == 0 ? measure(rows, decoded, rows.value, g) : measure(rows, rows.key, decoded, g);
        m.errors[2 * l + part].push_back(part == 0 ? e.keyKl : e.valueError);
      }
    }
  }
  // A part's bits count by the values its layer holds at the context: its
  // row width times the share of the context's rows it keeps.
  m.share.assign(nParts, 1.0);
  m.weight.resize(nParts);
  for (size_t i = 0; i < nParts; ++i) {
    const KvLayerShape& l = shape.layers[i / 2];
    if (!shape.layerShare.empty()) m.share[i] = std::clamp(shape.layerShare[i / 2], 1e-6, 1.0);
    m.weight[i] = m.share[i] * l.nHeadKv * l.headDim;
  }
  m.weights = std::accumulate(m.weight.begin(), m.weight.end(), 0.0);
  return m;
}

// Greedy: from the cheapest candidate everywhere, the upgrade with the largest
// drop in weighted error per added bit that keeps the average within budget,
// until none helps. Returns each part's candidate.
std::vector<size_t> planGreedy(const Measured& m, double valueWeight) {
  const size_t nParts = m.errors.size();
  std::vector<size_t> level(nParts, 0);
  double total = m.total(level);
  for (;;) {
    double bestGain = 0.0;
    size_t bestPart = nParts, bestLevel = 0;
    for (size_t i = 0; i < nParts; ++i) {
      const double errorWeight = i % 2 == 0 ? 1.0 : valueWeight;
      for (size_t c = level[i] + 1; c < kCandidates.size(); ++c) {
        const double added = m.weight[i] * (m.bitsAt(i, c) - m.bitsAt(i, level[i]));
        if (!m.fits(total + added)) continue;
        const double gain =
            errorWeight * (m.errors[i][level[i]] - m.errors[i][c]) / std::max(added, 1e-9);
        if (gain > bestGain) {
          bestGain = gain;
          bestPart = i;
          bestLevel = c;
        }
      }
    }
    if (bestPart == nParts) break;
    total +=
        m.weight[bestPart] * (m.bitsAt(bestPart, bestLevel) - m.bitsAt(bestPart, level[bestPart]));
    level[bestPart] = bestLevel;
  }
  return level;
}

// Every part at the dearest candidate whose average fits the budget (the
// cheapest always does: autoBudget).
std::vector<size_t> planUniform(const Measured& m) {
  std::vector<size_t> level(m.errors.size(), 0);
  for (size_t c = 1; c < kCandidates.size(); ++c) {
    const std::vector<size_t> next(m.errors.size(), c);
    if (!m.fits(m.total(next))) break;
    level = next;
  }
  return level;
}

AutoPlan makePlan(const Measured& m, const std::vector<size_t>& level, std::string method) {
  const size_t nLayers = m.bits.size();
  AutoPlan plan{
      .budget = m.budget, .bitsPerValue = m.total(level) / m.weights, .method = std::move(method)};
  plan.layers.resize(nLayers);
  for (uint32_t part = 0; part < 2; ++part) {
    // The scheme holding most of this part's values at the context (ties:
    // the cheaper): a window layer's ring counts by its share.
    std::array<double, kCandidates.size()> held{};
    for (size_t l = 0; l < nLayers; ++l) held[level[2 * l + part]] += m.weight[2 * l + part];
    const size_t common = std::max_element(held.begin(), held.end()) - held.begin();
    // The reference: the median error, at the common scheme, of the layers
    // that kept it.
    std::vector<double> kept;
    for (size_t l = 0; l < nLayers; ++l)
      if (level[2 * l + part] == common) kept.push_back(m.errors[2 * l + part][common]);
    const double mid = median(kept);
    for (size_t l = 0; l < nLayers; ++l) {
      const size_t i = 2 * l + part;
      PartDecision& d = part == 0 ? plan.layers[l].key : plan.layers[l].value;
      d.scheme = std::string(kCandidates[level[i]]);
      d.bits = m.bitsAt(i, level[i]);
      d.errors = m.errors[i];
      d.promoted = level[i] > common;
      if (d.promoted && m.share[i] < 1.0) {
        d.reason = fmt::format(
            "a sliding-window layer: its ring holds {:.1f}% of the context's rows, so its bits "
            "cost that much",
            100.0 * m.share[i]);
      } else if (d.promoted) {
        d.reason = fmt::format("{} error at {} is {:.1f}x that of the layers kept there",
                               part == 0 ? "K score" : "V output", kCandidates[common],
                               mid > 0.0 ? m.errors[i][common] / mid : INFINITY);
      }
    }
  }
  return plan;
}

}  // namespace

Expected<std::vector<AutoPlan>> autoPlanCandidates(std::span<const LayerRows> layers,
                                                   const AutoShape& shape, double bits) {
  KVS_ASSIGN_OR_RETURN(const Measured m, measureLayers(layers, shape, bits));
  std::vector<std::vector<size_t>> levels;
  std::vector<AutoPlan> plans;
  // A greedy plan may come out uniform: it is named for what it is.
  const auto add = [&](std::vector<size_t> level, std::string_view weight) {
    if (std::find(levels.begin(), levels.end(), level) != levels.end()) return;
    const bool uniform = std::count(level.begin(), level.end(), level.front()) ==
                         static_cast<std::ptrdiff_t>(level.size());
    plans.push_back(makePlan(m, level,
                             uniform ? fmt::format("uniform {}", kCandidates[level.front()])
                                     : fmt::format("mix, V weighted {}", weight)));
    levels.push_back(std::move(level));
  };
  for (const AutoValueWeight& w : kAutoValueWeights) add(planGreedy(m, w.weight), w.text);
  add(planUniform(m), "");
  return plans;
}

}  // namespace kvscope::kv
