#include "gguf/tensor_type.h"

#include <cassert>
#include <limits>

namespace kvscope::gguf {

std::optional<TensorType> typeByName(std::string_view name) {
  for (uint32_t raw = 0; raw < 64; ++raw) {
    auto t = typeTraits(raw);
    if (t && t->name == name) return static_cast<TensorType>(raw);
  }
  return std::nullopt;
}

std::optional<TypeTraits> typeTraits(uint32_t rawType) {
  // Block geometry from ggml-common.h: QK4_0 = QK8_0 = 32 values, QK_K = 256.
  switch (static_cast<TensorType>(rawType)) {
    case TensorType::kF32:
      return TypeTraits{"F32", 1, 4};
    case TensorType::kF16:
      return TypeTraits{"F16", 1, 2};
    case TensorType::kQ4_0:
      return TypeTraits{"Q4_0", 32, 18};  // d, 16 B nibbles
    case TensorType::kQ4_1:
      return TypeTraits{"Q4_1", 32, 20};  // d, m, 16 B nibbles
    case TensorType::kQ5_0:
      return TypeTraits{"Q5_0", 32, 22};  // d, 4 B high bits, 16 B
    case TensorType::kQ5_1:
      return TypeTraits{"Q5_1", 32, 24};  // d, m, 4 B, 16 B
    case TensorType::kQ8_0:
      return TypeTraits{"Q8_0", 32, 34};  // d, 32 int8
    case TensorType::kQ8_1:
      return TypeTraits{"Q8_1", 32, 36};  // d, s, 32 int8
    case TensorType::kQ2_K:
      return TypeTraits{"Q2_K", 256, 84};  // 16+64 B, d, dmin
    case TensorType::kQ3_K:
      return TypeTraits{"Q3_K", 256, 110};  // 32+64+12 B, d
    case TensorType::kQ4_K:
      return TypeTraits{"Q4_K", 256, 144};  // d, dmin, 12+128 B
    case TensorType::kQ5_K:
      return TypeTraits{"Q5_K", 256, 176};  // d, dmin, 12+32+128 B
    case TensorType::kQ6_K:
      return TypeTraits{"Q6_K", 256, 210};  // 128+64+16 B, d
    case TensorType::kQ8_K:
      return TypeTraits{"Q8_K", 256, 292};  // f32 d, 256 int8, 16 int16
    // The i-quants, ternary and MXFP4 types (sizes from ggml-common.h's block
    // structs): IQ4_NL, IQ4_XS and MXFP4 decode on the CPU (dequant.cpp,
    // cpu_quant_decode.cpp); the others are geometry only.
    case TensorType::kIQ2_XXS:
      return TypeTraits{"IQ2_XXS", 256, 66};  // d, 32 u16
    case TensorType::kIQ2_XS:
      return TypeTraits{"IQ2_XS", 256, 74};  // d, 32 u16, 8 B scales
    case TensorType::kIQ3_XXS:
      return TypeTraits{"IQ3_XXS", 256, 98};  // d, 96 B
    case TensorType::kIQ1_S:
      return TypeTraits{"IQ1_S", 256, 50};  // d, 32 B, 8 u16
    case TensorType::kIQ4_NL:
      return TypeTraits{"IQ4_NL", 32, 18};  // d, 16 B nibbles
    case TensorType::kIQ3_S:
      return TypeTraits{"IQ3_S", 256, 110};  // d, 64+8+32 B, 4 B scales
    case TensorType::kIQ2_S:
      return TypeTraits{"IQ2_S", 256, 82};  // d, 64+8+8 B
    case TensorType::kIQ4_XS:
      return TypeTraits{"IQ4_XS", 256, 136};  // d, u16, 4+128 B
    case TensorType::kIQ1_M:
      return TypeTraits{"IQ1_M", 256, 56};  // 32+16+8 B
    case TensorType::kTQ1_0:
      return TypeTraits{"TQ1_0", 256, 54};  // 48+4 B, d
    case TensorType::kTQ2_0:
      return TypeTraits{"TQ2_0", 256, 66};  // 64 B, d
    case TensorType::kMXFP4:
      return TypeTraits{"MXFP4", 32, 17};  // E8M0 scale, 16 B nibbles
    case TensorType::kI8:
      return TypeTraits{"I8", 1, 1};
    case TensorType::kI16:
      return TypeTraits{"I16", 1, 2};
    case TensorType::kI32:
      return TypeTraits{"I32", 1, 4};
    case TensorType::kI64:
      return TypeTraits{"I64", 1, 8};
    case TensorType::kF64:
      return TypeTraits{"F64", 1, 8};
    case TensorType::kBF16:
      return TypeTraits{"BF16", 1, 2};
  }
  return std::nullopt;
}

std::string typeName(uint32_t rawType) {
  if (const std::optional<TypeTraits> t = typeTraits(rawType)) return std::string(t->name);
  return "type " + std::to_string(rawType);
}

TypeTraits traits(TensorType type) {
  const std::optional<TypeTraits> t = typeTraits(static_cast<uint32_t>(type));
  assert(t.has_value());
  return *t;
}

std::optional<uint64_t> byteSize(TensorType type, uint64_t elements) {
  const std::optional<TypeTraits> t = typeTraits(static_cast<uint32_t>(type));
  if (!t || elements % t->blockElements != 0) return std::nullopt;
  const uint64_t blocks = elements / t->blockElements;
  if (blocks > std::numeric_limits<uint64_t>::max() / t->blockBytes) return std::nullopt;
  return blocks * t->blockBytes;
}

}  // namespace kvscope::gguf
