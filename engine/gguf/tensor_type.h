#pragma once
// ggml tensor types as numbered in GGUF files, with block geometry.
// Every type ggml defines has its name and geometry here, so a file opens and
// `inspect` lists it even when no backend decodes some of its types (each
// backend refuses those at load, naming them: model/model_weights.h). A type
// number ggml does not define is refused at open() with the tensor's name.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvscope::gguf {

enum class TensorType : uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8,
  kQ8_1 = 9, kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kQ8_K = 15,
  kIQ2_XXS = 16, kIQ2_XS = 17, kIQ3_XXS = 18, kIQ1_S = 19, kIQ4_NL = 20, kIQ3_S = 21,
  kIQ2_S = 22, kIQ4_XS = 23, kI8 = 24, kI16 = 25, kI32 = 26, kI64 = 27, kF64 = 28,
  kIQ1_M = 29, kBF16 = 30, kTQ1_0 = 34, kTQ2_0 = 35, kMXFP4 = 39,
};

struct TypeTraits {
  std::string_view name;  // "Q4_K"
  uint32_t blockElements;  // values per block (1 for plain types)
  uint32_t blockBytes;     // bytes per block
};

// Traits for a raw type number from a file; nullopt when ggml defines no such type.
std::optional<TypeTraits> typeTraits(uint32_t rawType);
TypeTraits traits(TensorType type);
// "IQ4_XS", or "type 31" for a number ggml does not define (for messages).
std::string typeName(uint32_t rawType);
// The type a name such as "Q8_0" denotes (TypeTraits::name); nullopt when none.
std::optional<TensorType> typeByName(std::string_view name);

// Bytes that `elements` values of `type` occupy; nullopt when `elements` is
// not a whole number of blocks or the size does not fit in 64 bits.
std::optional<uint64_t> byteSize(TensorType type, uint64_t elements);

}  // namespace kvscope::gguf
