// Block geometry against ggml-common.h: QK4_0 = QK8_0 = 32 values, QK_K = 256,
// and each block's byte count is the sum of its fields.
#include <gtest/gtest.h>

#include "gguf/tensor_type.h"

namespace kvscope::gguf {
namespace {

TEST(TensorType, BlockGeometry) {
  struct Row {
    TensorType type;
    const char* name;
    uint32_t elements, bytes;
  };
  const Row rows[] = {
      {TensorType::kF32, "F32", 1, 4},
      {TensorType::kF16, "F16", 1, 2},
      {TensorType::kBF16, "BF16", 1, 2},
      {TensorType::kQ4_0, "Q4_0", 32, 2 + 16},
      {TensorType::kQ4_1, "Q4_1", 32, 2 + 2 + 16},
      {TensorType::kQ5_0, "Q5_0", 32, 2 + 4 + 16},
      {TensorType::kQ5_1, "Q5_1", 32, 2 + 2 + 4 + 16},
      {TensorType::kQ8_0, "Q8_0", 32, 2 + 32},
      {TensorType::kQ8_1, "Q8_1", 32, 2 + 2 + 32},
      {TensorType::kQ2_K, "Q2_K", 256, 16 + 64 + 2 + 2},
      {TensorType::kQ3_K, "Q3_K", 256, 32 + 64 + 12 + 2},
      {TensorType::kQ4_K, "Q4_K", 256, 2 + 2 + 12 + 128},
      {TensorType::kQ5_K, "Q5_K", 256, 2 + 2 + 12 + 32 + 128},
      {TensorType::kQ6_K, "Q6_K", 256, 128 + 64 + 16 + 2},
      {TensorType::kQ8_K, "Q8_K", 256, 4 + 256 + 32},
      {TensorType::kI8, "I8", 1, 1},
      {TensorType::kI16, "I16", 1, 2},
      {TensorType::kI32, "I32", 1, 4},
      {TensorType::kI64, "I64", 1, 8},
      {TensorType::kF64, "F64", 1, 8},
      {TensorType::kIQ2_XXS, "IQ2_XXS", 256, 2 + 64},
      {TensorType::kIQ2_XS, "IQ2_XS", 256, 2 + 64 + 8},
      {TensorType::kIQ3_XXS, "IQ3_XXS", 256, 2 + 96},
      {TensorType::kIQ1_S, "IQ1_S", 256, 2 + 32 + 16},
      {TensorType::kIQ4_NL, "IQ4_NL", 32, 2 + 16},
      {TensorType::kIQ3_S, "IQ3_S", 256, 2 + 64 + 8 + 32 + 4},
      {TensorType::kIQ2_S, "IQ2_S", 256, 2 + 64 + 8 + 8},
      {TensorType::kIQ4_XS, "IQ4_XS", 256, 2 + 2 + 4 + 128},
      {TensorType::kIQ1_M, "IQ1_M", 256, 32 + 16 + 8},
      {TensorType::kTQ1_0, "TQ1_0", 256, 48 + 4 + 2},
      {TensorType::kTQ2_0, "TQ2_0", 256, 64 + 2},
      {TensorType::kMXFP4, "MXFP4", 32, 1 + 16},
  };
  for (const Row& r : rows) {
    const auto t = typeTraits(static_cast<uint32_t>(r.type));
    ASSERT_TRUE(t.has_value()) << r.name;
    EXPECT_EQ(t->name, r.name);
    EXPECT_EQ(t->blockElements, r.elements) << r.name;
    EXPECT_EQ(t->blockBytes, r.bytes) << r.name;
    EXPECT_EQ(traits(r.type).blockBytes, r.bytes) << r.name;
  }
}

TEST(TensorType, UnknownNumbers) {
  // 4 and 5 (Q4_2, Q4_3) and 31-33, 36-38 (repacked variants) were removed from GGUF.
  for (uint32_t raw : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 40u, 1000u, 0xffffffffu}) {
    EXPECT_FALSE(typeTraits(raw).has_value()) << raw;
    EXPECT_EQ(typeName(raw), "type " + std::to_string(raw));
  }
  EXPECT_EQ(typeName(23), "IQ4_XS");
  EXPECT_EQ(typeName(39), "MXFP4");
}

TEST(TensorType, ByteSize) {
  EXPECT_EQ(byteSize(TensorType::kF32, 10), 40u);
  EXPECT_EQ(byteSize(TensorType::kQ4_K, 512), 288u);
  EXPECT_EQ(byteSize(TensorType::kQ8_0, 0), 0u);
  EXPECT_FALSE(byteSize(TensorType::kQ4_0, 33).has_value());                // not whole blocks
  EXPECT_FALSE(byteSize(TensorType::kI64, uint64_t{1} << 62).has_value());  // 2^65 bytes
}

}  // namespace
}  // namespace kvscope::gguf
