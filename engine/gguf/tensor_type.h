#pragma once
// ggml tensor types as numbered in GGUF files, with block geometry.
// A type whose layout this build does not know is refused at open() with the
// tensor's name and type number.

#include <cstdint>
#include <optional>
#include <string_view>

namespace kvscope::gguf {

enum class TensorType : uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8,
  kQ8_1 = 9, kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kQ8_K = 15,
  kI8 = 24, kI16 = 25, kI32 = 26, kI64 = 27, kF64 = 28, kBF16 = 30,
};

struct TypeTraits {
  std::string_view name;  // "Q4_K"
  uint32_t blockElements;  // values per block (1 for plain types)
  uint32_t blockBytes;     // bytes per block
};

// Traits for a raw type number from a file; nullopt when unknown.
std::optional<TypeTraits> typeTraits(uint32_t rawType);
TypeTraits traits(TensorType type);
// The type a name such as "Q8_0" denotes (TypeTraits::name); nullopt when none.
std::optional<TensorType> typeByName(std::string_view name);

// Bytes that `elements` values of `type` occupy; nullopt when `elements` is
// not a whole number of blocks or the size does not fit in 64 bits.
std::optional<uint64_t> byteSize(TensorType type, uint64_t elements);

}  // namespace kvscope::gguf
