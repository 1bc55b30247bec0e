#pragma once
// Compiled SPIR-V of every shader variant, embedded at build time.
// Variants are declared in shaders/shaders.cmake; names are unique.

#include <cstdint>
#include <span>
#include <string_view>

namespace kvscope::shaders {

struct SpirvEntry {
  std::string_view name;
  std::span<const uint32_t> code;
};

// Every embedded variant, sorted by name.
std::span<const SpirvEntry> all();

// The SPIR-V words of `name`, or an empty span when no such variant exists.
std::span<const uint32_t> find(std::string_view name);

}  // namespace kvscope::shaders
