#pragma once
// The architecture registry: one row per `general.architecture` value kvscope
// knows, saying whether it runs and, if not, why. Adding an architecture is
// one description file under model/arch/ (model/description.h) plus one row
// here.

#include <span>
#include <string>
#include <string_view>

#include "core/error.h"

namespace kvscope::model {

enum class RopeStyle {
  kNormal,  // rotate adjacent pairs (x0,x1), (x2,x3) … — GGUF llama order
  kNeox,    // rotate (x_i, x_{i+d/2}) — Hugging Face "rotate_half" order
};

struct ArchDescription;

struct ArchitectureInfo {
  std::string_view name;  // general.architecture
  // Its tensor table and forward pass; null for a refused architecture.
  const ArchDescription* description;
  RopeStyle rope;           // the pairing its GGUF files' q/k rows are stored for
  std::string_view whyNot;  // for refused rows: what the cache would hold instead
  bool supported() const { return description != nullptr; }
};

std::span<const ArchitectureInfo> architectures();

// The row for `name`, or an error that names the supported architectures and,
// for known-but-refused ones, why their cache is not K/V rows.
Expected<const ArchitectureInfo*> findArchitecture(std::string_view name);

// "llama, qwen2, qwen3"
std::string supportedArchitectureList();

}  // namespace kvscope::model
