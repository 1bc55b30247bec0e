#pragma once
// The auto KV policy at run time: plans kv::planAutoPolicy from the rows a
// backend cached while it ran under the auto policy's measuring cache (f16 in
// every layer, kv::KvPolicy::resolve), and turns the plan into the explicit
// policy the backend is then rebuilt with.

#include <cstdint>
#include <string>

#include "backend/backend.h"
#include "core/error.h"
#include "kv/auto_policy.h"
#include "kv/kv_policy.h"

namespace kvscope::runtime {

struct AutoChoice {
  kv::AutoPlan plan;
  kv::KvPolicy policy;  // explicit: the plan's schemes, the auto policy's seed and attention
};

// Measures the first min(backend.cachedTokens(), kv::kAutoCalibrationTokens)
// cached tokens of every layer (Backend::readKv) and plans within
// policy.autoBits. `policy` must be an auto policy.
Expected<AutoChoice> chooseAutoPolicy(const backend::Backend& backend, const kv::KvPolicy& policy);

// The plan as text for a terminal: the budget and average, then one line per
// layer (K and V scheme, measured errors, why promoted).
std::string describeAutoPlan(const kv::AutoPlan& plan);

}  // namespace kvscope::runtime
