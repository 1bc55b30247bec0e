#include "cli/auto_plan_json.h"

#include <string>

namespace kvscope::cli {

nlohmann::json autoPlanJson(const kv::AutoPlan& plan) {
  const auto candidates = kv::autoCandidates();
  auto part = [&](const kv::PartDecision& d) {
    nlohmann::json errors = nlohmann::json::object();
    for (size_t i = 0; i < candidates.size() && i < d.errors.size(); ++i)
      errors[std::string(candidates[i])] = d.errors[i];
    return nlohmann::json{{"scheme", d.scheme},
                          {"bits_per_value", d.bits},
                          {"promoted", d.promoted},
                          {"reason", d.reason},
                          {"errors", errors}};
  };
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : plan.layers) layers.push_back({{"k", part(l.key)}, {"v", part(l.value)}});
  return {{"budget", plan.budget}, {"bits_per_value", plan.bitsPerValue}, {"layers", layers}};
}

}  // namespace kvscope::cli
