#include "model/architecture.h"

#include <algorithm>

#include "model/arch/architectures.h"

namespace kvscope::model {
namespace {

constexpr std::string_view kMla =
    "its attention caches a compressed MLA latent per token, not per-head K/V rows, so the KV "
    "cache schemes do not apply; run a model with per-head attention (qwen3, qwen3moe, llama, "
    "mistral …) instead";
constexpr std::string_view kSsm =
    "it is a state-space (recurrent) model: its cache is a fixed-size recurrent state, not K/V "
    "rows; run a model with per-head attention (qwen3, qwen3moe, llama, mistral …) instead";
constexpr std::string_view kHybrid =
    "it mixes attention with state-space layers whose recurrent state is not K/V rows; run a "
    "model with per-head attention (qwen3, qwen3moe, llama, mistral …) instead";
constexpr std::string_view kDeltaNet =
    "most of its layers are Gated DeltaNet (linear attention), whose cache is a fixed-size "
    "recurrent state, not K/V rows, and kvscope does not run them yet; Qwen3 (qwen3) and "
    "Qwen3-30B-A3B (qwen3moe) run instead";

constexpr ArchitectureInfo kRegistry[] = {
    {"llama", &kLlama, RopeStyle::kNormal, {}},
    {"mistral", &kLlama, RopeStyle::kNormal, {}},
    {"qwen2", &kQwen2, RopeStyle::kNeox, {}},
    {"qwen3", &kQwen3, RopeStyle::kNeox, {}},
    {"phi3", &kPhi3, RopeStyle::kNeox, {}},
    {"qwen3moe", &kQwen3Moe, RopeStyle::kNeox, {}},
    {"gemma3", &kGemma3, RopeStyle::kNeox, {}},
    {"gemma4", &kGemma4, RopeStyle::kNeox, {}},
    {"gpt-oss", &kGptOss, RopeStyle::kNeox, {}},
    {"deepseek2", nullptr, RopeStyle::kNormal, kMla},
    {"deepseek32", nullptr, RopeStyle::kNormal, kMla},   // DeepSeek V3.2
    {"deepseek4", nullptr, RopeStyle::kNormal, kMla},    // DeepSeek V4
    {"glm-dsa", nullptr, RopeStyle::kNormal, kMla},      // GLM-5
    {"kimi-linear", nullptr, RopeStyle::kNormal, kMla},  // Kimi Linear: MLA and DeltaNet
    {"minicpm3", nullptr, RopeStyle::kNormal, kMla},
    {"mamba", nullptr, RopeStyle::kNormal, kSsm},
    {"mamba2", nullptr, RopeStyle::kNormal, kSsm},
    {"rwkv6", nullptr, RopeStyle::kNormal, kSsm},
    {"rwkv7", nullptr, RopeStyle::kNormal, kSsm},
    {"jamba", nullptr, RopeStyle::kNormal, kHybrid},
    {"falcon-h1", nullptr, RopeStyle::kNormal, kHybrid},
    {"qwen3next", nullptr, RopeStyle::kNeox, kDeltaNet},
    {"qwen35", nullptr, RopeStyle::kNeox, kDeltaNet},     // Qwen3.5 / 3.6 dense
    {"qwen35moe", nullptr, RopeStyle::kNeox, kDeltaNet},  // Qwen3.5 / 3.6 A3B
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
