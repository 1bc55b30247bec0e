#include "model/architecture.h"

#include <algorithm>

namespace kvscope::model {
namespace {

constexpr std::string_view kMla =
    "its attention caches a compressed MLA latent per token, not per-head K/V rows, so the KV "
    "cache schemes do not apply";
constexpr std::string_view kSsm =
    "it is a state-space (recurrent) model: its cache is a fixed-size recurrent state, not K/V "
    "rows";
constexpr std::string_view kHybrid =
    "it mixes attention with state-space layers whose recurrent state is not K/V rows";

constexpr ArchitectureInfo kRegistry[] = {
    {"llama", true, Family::kLlama, RopeStyle::kNormal, false, false, {}},
    {"mistral", true, Family::kLlama, RopeStyle::kNormal, false, false, {}},
    {"qwen2", true, Family::kQwen2, RopeStyle::kNeox, true, false, {}},
    {"qwen3", true, Family::kQwen3, RopeStyle::kNeox, false, true, {}},
    {"deepseek2", false, Family::kLlama, RopeStyle::kNormal, false, false, kMla},
    {"deepseek3", false, Family::kLlama, RopeStyle::kNormal, false, false, kMla},
    {"minicpm3", false, Family::kLlama, RopeStyle::kNormal, false, false, kMla},
    {"mamba", false, Family::kLlama, RopeStyle::kNormal, false, false, kSsm},
    {"mamba2", false, Family::kLlama, RopeStyle::kNormal, false, false, kSsm},
    {"rwkv6", false, Family::kLlama, RopeStyle::kNormal, false, false, kSsm},
    {"rwkv7", false, Family::kLlama, RopeStyle::kNormal, false, false, kSsm},
    {"jamba", false, Family::kLlama, RopeStyle::kNormal, false, false, kHybrid},
    {"falcon-h1", false, Family::kLlama, RopeStyle::kNormal, false, false, kHybrid},
};

}  // namespace

std::span<const ArchitectureInfo> architectures() {
  return kRegistry;
}

std::string supportedArchitectureList() {
  std::string out;
  for (const auto& a : kRegistry) {
    if (!a.supported) continue;
    if (!out.empty()) out += ", ";
    out += a.name;
  }
  return out;
}

Expected<const ArchitectureInfo*> findArchitecture(std::string_view name) {
  auto it = std::find_if(std::begin(kRegistry), std::end(kRegistry),
                         [&](const ArchitectureInfo& a) { return a.name == name; });
  if (it == std::end(kRegistry)) {
    return makeError(ErrorCode::kUnsupported, "architecture '{}' is not supported (supported: {})",
                     name, supportedArchitectureList());
  }
  if (!it->supported) {
    return makeError(ErrorCode::kUnsupported,
                     "architecture '{}' is not supported: {} (supported: {})", name, it->whyNot,
                     supportedArchitectureList());
  }
  return &*it;
}

}  // namespace kvscope::model
