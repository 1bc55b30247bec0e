#include "runtime/kv_auto.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "runtime/eval.h"
#include "runtime/kv_reencode.h"

namespace kvscope::runtime {
namespace {

// The logits of the last `n` of the first `window` tokens, run again as one
// batch by a backend under `policy` holding `measured`'s rows before them.
// Empty (no error) where this cache cannot take the rows or forget the tokens.
Expected<std::optional<backend::Logits>> trialLogits(const backend::Backend& measured,
                                                     const kv::KvPolicy& policy,
                                                     const AutoTrials& trials, uint32_t window,
                                                     uint32_t n) {
  KVS_ASSIGN_OR_RETURN(std::unique_ptr<backend::Backend> b, (*trials.factory)(policy));
  if (!measured.kvLayout() || !b->kvLayout() ||
      !canReencode(*measured.kvLayout(), *b->kvLayout())) {
    return std::optional<backend::Logits>();
  }
  KVS_TRY(reencodeKv(measured, *b));
  const uint32_t keep = window - n;
  if (keep < b->trimFloor() || !b->trim(keep).ok()) return std::optional<backend::Logits>();
  backend::Logits logits;
  KVS_TRY(b->forward({trials.tokens.subspan(keep, n), /*allLogits=*/true}, logits));
  return std::optional<backend::Logits>(std::move(logits));
}

// Tries every candidate (see kv_auto.h) and returns the index of the best,
// with each plan's trial recorded in every plan; nullopt where trials cannot
// run here.
Expected<std::optional<size_t>> tryCandidates(const backend::Backend& measured,
                                              const kv::KvPolicy& policy, const AutoTrials& trials,
                                              std::vector<kv::AutoPlan>& plans) {
  const uint32_t window =
      std::min<uint32_t>({measured.cachedTokens(), kv::kAutoCalibrationTokens,
                          static_cast<uint32_t>(std::min<size_t>(
                              trials.tokens.size(), std::numeric_limits<uint32_t>::max()))});
  const uint32_t n = std::min(kAutoTrialTokens, window / 2);
  if (!trials.factory || !*trials.factory || n == 0) return std::optional<size_t>();
  const auto stopped = [&] { return trials.cancel && trials.cancel->load(); };
  const auto& c = measured.config();
  const std::vector<kv::LayerSchemes> f16(c.kvLayers(), {"f16", "f16"});
  KVS_ASSIGN_OR_RETURN(auto reference,
                       trialLogits(measured, policy.withLayers(f16), trials, window, n));
  if (!reference) return std::optional<size_t>();
  std::vector<kv::AutoTrial> tried;
  size_t best = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    if (stopped()) return makeError(ErrorCode::kCancelled, "stopped while auto tried its plans");
    KVS_ASSIGN_OR_RETURN(auto logits, trialLogits(measured, policy.withLayers(plans[i].schemes()),
                                                  trials, window, n));
    if (!logits) return std::optional<size_t>();
    double sum = 0.0;
    for (uint32_t r = 0; r < n; ++r) sum += klDivergence(reference->row(r), logits->row(r));
    tried.push_back({plans[i].method, plans[i].bitsPerValue, sum / n});
    if (tried.back().kld < tried[best].kld) best = i;
  }
  for (kv::AutoPlan& plan : plans) {
    plan.trials = tried;
    plan.trialTokens = n;
  }
  return std::optional<size_t>(best);
}

}  // namespace

Expected<AutoChoice> chooseAutoPolicy(const backend::Backend& backend, const kv::KvPolicy& policy,
                                      const AutoTrials& trials) {
  if (!policy.autoBits)
    return makeError(ErrorCode::kInternal, "chooseAutoPolicy needs an auto policy");
  const auto& c = backend.config();
  std::vector<std::vector<float>> rows;  // [layer][K, V]
  rows.reserve(2 * size_t{c.kvLayers()});
  // The calibration rows: the first ones, as many as every layer holds (a
  // sliding-window layer may hold only its last few).
  uint32_t count = std::min(backend.cachedTokens(), kv::kAutoCalibrationTokens);
  for (uint32_t l = 0; l < c.kvLayers(); ++l) {
    for (kv::KvPart part : {kv::KvPart::kKey, kv::KvPart::kValue}) {
      KVS_ASSIGN_OR_RETURN(auto all, backend.readKv(l, part));
      count = std::min(count, static_cast<uint32_t>(all.size() / c.kvDimOf(l)));
      rows.push_back(std::move(all));
    }
  }
  kv::AutoShape shape{.rows = count, .seed = policy.seed};
  for (uint32_t l = 0; l < c.kvLayers(); ++l) {
    shape.layers.push_back({c.headsKvOf(l), c.headDimOf(l)});
    rows[2 * l].resize(size_t{count} * c.kvDimOf(l));
    rows[2 * l + 1].resize(size_t{count} * c.kvDimOf(l));
  }
  // A window layer's ring holds a fixed number of rows: at the context the
  // session runs to, its share of the cache's values.
  if (const kv::KvLayout* layout = backend.kvLayout()) {
    const double ring = layout->geometry().ringRows;
    for (uint32_t l = 0; l < c.kvLayers(); ++l) {
      shape.layerShare.push_back(
          layout->inRing(l) ? std::min(1.0, ring / std::max(1u, backend.contextLimit())) : 1.0);
    }
  }
  std::vector<kv::LayerRows> layers;
  for (uint32_t l = 0; l < c.kvLayers(); ++l) layers.push_back({rows[2 * l], rows[2 * l + 1]});
  KVS_ASSIGN_OR_RETURN(std::vector<kv::AutoPlan> plans,
                       kv::autoPlanCandidates(layers, shape, *policy.autoBits));
  rows.clear();  // the trials' backends may need the memory
  layers.clear();
  size_t pick = 0;
  if (plans.size() > 1) {
    KVS_ASSIGN_OR_RETURN(const std::optional<size_t> best,
                         tryCandidates(backend, policy, trials, plans));
    pick = best.value_or(0);
  }
  kv::AutoPlan plan = std::move(plans[pick]);
  const auto schemes = plan.schemes();
  kv::KvPolicy chosen = policy.withLayers(schemes);
  KVS_TRY(chosen.resolve(backend::kvTarget(c)));
  return AutoChoice{std::move(plan), std::move(chosen)};
}

std::string describeAutoPlan(const kv::AutoPlan& plan) {
  std::string s = fmt::format("auto, budget {} bits per value: chose {:.2f} on average ({})\n",
                              plan.budget, plan.bitsPerValue, plan.method);
  if (!plan.trials.empty()) {
    s += fmt::format("  tried on the calibration window's last {} tokens (KLD against f16):\n",
                     plan.trialTokens);
    for (const kv::AutoTrial& t : plan.trials) {
      s += fmt::format("    {:<22} {:.2f} bits  KLD {:.3e}{}\n", t.method, t.bitsPerValue, t.kld,
                       t.method == plan.method ? "  <- chosen" : "");
    }
  }
  const auto candidates = kv::autoCandidates();
  auto errors = [&](const kv::PartDecision& d) {
    std::string e;
    for (size_t i = 0; i < candidates.size() && i < d.errors.size(); ++i)
      e += fmt::format("{}{} {:.2e}", i ? ", " : "", candidates[i], d.errors[i]);
    return e;
  };
  for (size_t l = 0; l < plan.layers.size(); ++l) {
    const kv::LayerDecision& d = plan.layers[l];
    s += fmt::format("  layer {:>2}: K {:<7} V {:<7}  K score KL [{}]  V output error [{}]\n", l,
                     d.key.scheme, d.value.scheme, errors(d.key), errors(d.value));
    for (const kv::PartDecision* p : {&d.key, &d.value}) {
      if (p->promoted) s += fmt::format("            promoted to {}: {}\n", p->scheme, p->reason);
    }
  }
  return s;
}

}  // namespace kvscope::runtime
