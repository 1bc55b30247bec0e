#include "runtime/kv_auto.h"

#include <algorithm>
#include <new>
#include <vector>

#include <fmt/format.h>

#include "runtime/eval.h"
#include "runtime/kv_reencode.h"

namespace kvscope::runtime {
namespace {

// Where the trials start: an f16 cache of the window's first `keep` tokens.
// measured's rows copied and the rest forgotten where the copy can forget
// rows; else (a sliding-window layer's ring restored from a copy keeps only
// its last rows) those tokens run again.
Expected<std::unique_ptr<backend::Backend>> trialStart(const backend::Backend& measured,
                                                       const kv::KvPolicy& f16,
                                                       const AutoTrials& trials, uint32_t keep) {
  KVS_ASSIGN_OR_RETURN(std::unique_ptr<backend::Backend> b, (*trials.factory)(f16));
  if (measured.kvLayout() && b->kvLayout() && canReencode(*measured.kvLayout(), *b->kvLayout())) {
    KVS_TRY(reencodeKv(measured, *b));
    if (b->trim(keep).ok()) return b;
    KVS_ASSIGN_OR_RETURN(b, (*trials.factory)(f16));
  }
  backend::Logits logits;
  KVS_TRY(b->forward({trials.tokens.first(keep)}, logits));
  return b;
}

// The logits of `tokens` run as one batch by a backend under `policy` that
// first takes `start`'s rows.
Expected<backend::Logits> trialLogits(const backend::Backend& start, const kv::KvPolicy& policy,
                                      const BackendFactory& factory,
                                      std::span<const int32_t> tokens) {
  KVS_ASSIGN_OR_RETURN(std::unique_ptr<backend::Backend> b, factory(policy));
  KVS_TRY(reencodeKv(start, *b));
  backend::Logits logits;
  KVS_TRY(b->forward({tokens, /*allLogits=*/true}, logits));
  return logits;
}

// Tries the candidates (kv_auto.h), recording the trials in every plan, and
// returns the index of the best. A candidate whose trial fails is left out;
// where no trial can run, the plans record why and the first is returned.
// Only a stop is an error.
Expected<size_t> tryCandidates(const backend::Backend& measured, const kv::KvPolicy& policy,
                               const AutoTrials& trials, std::vector<kv::AutoPlan>& plans) {
  const auto untried = [&](std::string why) -> Expected<size_t> {
    for (kv::AutoPlan& plan : plans) plan.untried = why;
    return size_t{0};
  };
  if (!trials.factory || !*trials.factory) return untried("no backend to try them on");
  const uint32_t window = static_cast<uint32_t>(std::min<size_t>(
      {measured.cachedTokens(), kv::kAutoCalibrationTokens, trials.tokens.size()}));
  const uint32_t n = std::min(kAutoTrialTokens, window / 2);
  if (n == 0) return untried("too few tokens");
  const auto stopped = [&] { return trials.cancel && trials.cancel->load(); };
  const auto cancelled = [] {
    return makeError(ErrorCode::kCancelled, "stopped while auto tried its plans");
  };
  const std::vector<kv::LayerSchemes> allF16(measured.config().kvLayers(), {"f16", "f16"});
  const kv::KvPolicy f16 = policy.withLayers(allF16);
  const uint32_t keep = window - n;
  const std::span<const int32_t> tail = trials.tokens.subspan(keep, n);
  std::vector<kv::AutoTrial> tried;
  std::vector<size_t> triedPlan;
  try {
    auto start = trialStart(measured, f16, trials, keep);
    if (!start.ok()) return untried(start.error().message);
    auto reference = trialLogits(**start, f16, *trials.factory, tail);
    if (!reference.ok()) return untried(reference.error().message);
    for (size_t i = 0; i < plans.size(); ++i) {
      if (stopped()) return cancelled();
      auto logits =
          trialLogits(**start, policy.withLayers(plans[i].schemes()), *trials.factory, tail);
      if (!logits.ok()) continue;
      double sum = 0.0;
      for (uint32_t r = 0; r < n; ++r) sum += klDivergence(reference->row(r), logits->row(r));
      tried.push_back({plans[i].method, plans[i].bitsPerValue, sum / n});
      triedPlan.push_back(i);
    }
  } catch (const std::bad_alloc&) {
    return untried("out of memory");
  }
  if (stopped()) return cancelled();
  if (tried.empty()) return untried("no candidate's cache could be built");
  size_t best = 0;
  for (size_t t = 1; t < tried.size(); ++t)
    if (tried[t].kld < tried[best].kld) best = t;
  for (kv::AutoPlan& plan : plans) {
    plan.trials = tried;
    plan.trialTokens = n;
  }
  return triedPlan[best];
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
  layers.clear();  // the trials' backends may need the memory
  rows.clear();
  size_t pick = 0;
  if (plans.size() > 1) {
    KVS_ASSIGN_OR_RETURN(pick, tryCandidates(backend, policy, trials, plans));
  }
  kv::AutoPlan plan = std::move(plans[pick]);
  const auto schemes = plan.schemes();
  kv::KvPolicy chosen = policy.withLayers(schemes);
  KVS_TRY(chosen.resolve(backend::kvTarget(c)));
  return AutoChoice{std::move(plan), std::move(chosen)};
}

std::string describeAutoPlan(const kv::AutoPlan& plan) {
  std::string s =
      fmt::format("auto, budget {} bits per value: chose {:.2f} on average{}\n", plan.budget,
                  plan.bitsPerValue, plan.method.empty() ? "" : fmt::format(" ({})", plan.method));
  if (!plan.untried.empty())
    s += fmt::format("  the candidates were not tried: {}\n", plan.untried);
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
