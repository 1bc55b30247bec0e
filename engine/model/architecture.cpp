#include "model/architecture.h"

#include <algorithm>

#include "model/arch/architectures.h"

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
    {"llama", &kLlama, RopeStyle::kNormal, {}},
    {"mistral", &kLlama, RopeStyle::kNormal, {}},
    {"qwen2", &kQwen2, RopeStyle::kNeox, {}},
    {"qwen3", &kQwen3, RopeStyle::kNeox, {}},
    {"phi3", &kPhi3, RopeStyle::kNeox, {}},
    {"qwen3moe", &kQwen3Moe, RopeStyle::kNeox, {}},
    {"deepseek2", nullptr, RopeStyle::kNormal, kMla},
    {"deepseek3", nullptr, RopeStyle::kNormal, kMla},
    {"minicpm3", nullptr, RopeStyle::kNormal, kMla},
    {"mamba", nullptr, RopeStyle::kNormal, kSsm},
    {"mamba2", nullptr, RopeStyle::kNormal, kSsm},
    {"rwkv6", nullptr, RopeStyle::kNormal, kSsm},
    {"rwkv7", nullptr, RopeStyle::kNormal, kSsm},
    {"jamba", nullptr, RopeStyle::kNormal, kHybrid},
    {"falcon-h1", nullptr, RopeStyle::kNormal, kHybrid},
};

}  // namespace

std::span<const ArchitectureInfo> architectures() {
  return kRegistry;
}

std::string supportedArchitectureList() {
  std::string out;
  for (const auto& a : kRegistry) {
    if (!a.supported()) continue;
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
  if (!it->supported()) {
    return makeError(ErrorCode::kUnsupported,
                     "architecture '{}' is not supported: {} (supported: {})", name, it->whyNot,
                     supportedArchitectureList());
  }
  return &*it;
}

}  // namespace kvscope::model
