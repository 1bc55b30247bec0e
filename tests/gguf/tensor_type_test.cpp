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
  for (uint32_t raw : {4u, 5u, 16u, 17u, 23u, 29u, 31u, 39u, 1000u, 0xffffffffu})
    EXPECT_FALSE(typeTraits(raw).has_value()) << raw;
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
