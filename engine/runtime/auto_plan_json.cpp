#include "runtime/auto_plan_json.h"

#include <string>

namespace kvscope::runtime {

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
  nlohmann::json trials = nlohmann::json::array();
  for (const kv::AutoTrial& t : plan.trials)
    trials.push_back({{"method", t.method}, {"bits_per_value", t.bitsPerValue}, {"kld", t.kld}});
  return {{"budget", plan.budget}, {"bits_per_value", plan.bitsPerValue}, {"method", plan.method},
          {"trials", trials},      {"trial_tokens", plan.trialTokens},    {"untried", plan.untried},
          {"layers", layers}};
}

Expected<kv::AutoPlan> parseAutoPlanJson(const nlohmann::json& json) {
  const auto candidates = kv::autoCandidates();
  try {
    kv::AutoPlan plan;
    plan.budget = json.at("budget").get<double>();
    plan.bitsPerValue = json.at("bits_per_value").get<double>();
    auto part = [&](const nlohmann::json& j) {
      kv::PartDecision d;
      d.scheme = j.at("scheme").get<std::string>();
      d.bits = j.at("bits_per_value").get<double>();
      d.promoted = j.at("promoted").get<bool>();
      d.reason = j.at("reason").get<std::string>();
      const nlohmann::json& errors = j.at("errors");
      for (size_t i = 0; i < candidates.size(); ++i) {
        const auto it = errors.find(std::string(candidates[i]));
        if (it == errors.end()) break;
        d.errors.push_back(it->get<double>());
      }
      return d;
    };
    // Files saved before auto tried its candidates have none of these.
    plan.method = json.value("method", std::string());
    plan.trialTokens = json.value("trial_tokens", 0u);
    plan.untried = json.value("untried", std::string());
    for (const nlohmann::json& t : json.value("trials", nlohmann::json::array())) {
      plan.trials.push_back({.method = t.at("method").get<std::string>(),
                             .bitsPerValue = t.at("bits_per_value").get<double>(),
                             .kld = t.at("kld").get<double>()});
    }
    for (const nlohmann::json& l : json.at("layers"))
      plan.layers.push_back({part(l.at("k")), part(l.at("v"))});
    return plan;
  } catch (const nlohmann::json::exception& e) {
    return makeError(ErrorCode::kBadFile, "the auto policy's plan is malformed: {}", e.what());
  }
}

}  // namespace kvscope::runtime
