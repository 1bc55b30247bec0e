#pragma once
// The architecture registry: one row per `general.architecture` value kvscope
// knows, saying whether it runs and, if not, why. Adding an architecture is
// one forward-pass file plus one row here.

#include <span>
#include <string>
#include <string_view>

#include "core/error.h"

namespace kvscope::model {

enum class Family {
  kLlama,  // llama, mistral, tinyllama, smollm …: RMSNorm, RoPE, GQA, SwiGLU
  kQwen2,  // llama + q/k/v biases, NeoX RoPE
  kQwen3,  // llama + per-head q/k RMSNorm, NeoX RoPE
};

enum class RopeStyle {
  kNormal,  // rotate adjacent pairs (x0,x1), (x2,x3) … — GGUF llama order
  kNeox,    // rotate (x_i, x_{i+d/2}) — Hugging Face "rotate_half" order
};

struct ArchitectureInfo {
  std::string_view name;  // general.architecture
  bool supported;
  Family family;  // meaningful when supported
  RopeStyle rope;
  bool qkvBias;
  bool qkNorm;
  std::string_view whyNot;  // for unsupported rows: what the cache would hold instead
};

std::span<const ArchitectureInfo> architectures();

// The row for `name`, or an error that names the supported architectures and,
// for known-but-refused ones, why their cache is not K/V rows.
Expected<const ArchitectureInfo*> findArchitecture(std::string_view name);

// "llama, qwen2, qwen3"
std::string supportedArchitectureList();

}  // namespace kvscope::model
