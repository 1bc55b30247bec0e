#include "runtime/kv_auto.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

namespace kvscope::runtime {

Expected<AutoChoice> chooseAutoPolicy(const backend::Backend& backend, const kv::KvPolicy& policy) {
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
  KVS_ASSIGN_OR_RETURN(kv::AutoPlan plan, kv::planAutoPolicy(layers, shape, *policy.autoBits));
  const auto schemes = plan.schemes();
  kv::KvPolicy chosen = policy.withLayers(schemes);
  KVS_TRY(chosen.resolve(backend::kvTarget(c)));
  return AutoChoice{std::move(plan), std::move(chosen)};
}

std::string describeAutoPlan(const kv::AutoPlan& plan) {
  std::string s = fmt::format("auto, budget {} bits per value: chose {:.2f} on average\n",
                              plan.budget, plan.bitsPerValue);
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
