// A model file whose tensors have a type no kernel of a backend decodes (the
// i-quants, MXFP4, Q8_K …) opens (inspect lists it), and each backend refuses
// it when it is created, naming the tensor, the type and the backend, instead
// of reaching an assert at load or at the first product.
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backend/cpu_backend.h"
#include "backend/vulkan_backend.h"
#include "model/model_file.h"
#include "model/synthetic_model.h"

namespace kvscope::test {
namespace {

using gguf::TensorType;
using ::testing::HasSubstr;

struct Case {
  const char* tensor;
  TensorType type;
  const char* typeName;
};

std::shared_ptr<const model::ModelFile> modelWith(const Case& c) {
  model::SyntheticModelSpec spec;  // nEmbd 256: whole 256-value blocks for the K and IQ types
  spec.nLayer = 2;
  spec.tensorTypes[c.tensor] = c.type;
  const auto path = std::filesystem::temp_directory_path() /
                    ("kvscope-weight-types-" + std::string(c.typeName) + ".gguf");
  EXPECT_TRUE(model::writeSyntheticModel(spec, path).ok());
  auto m = model::ModelFile::open(path);
  std::filesystem::remove(path);  // the mapping stays valid
  EXPECT_TRUE(m.ok()) << m.error().describe();
  if (!m.ok()) return nullptr;
  const model::TensorView* t = (*m)->find(c.tensor);
  EXPECT_TRUE(t && t->type == c.type) << c.tensor;
  return std::shared_ptr<const model::ModelFile>(std::move(m).value());
}

const Case kCases[] = {
    {"blk.0.attn_q.weight", TensorType::kIQ3_S, "IQ3_S"},  // a matrix
    {"blk.1.ffn_up.weight", TensorType::kIQ2_S, "IQ2_S"},  // a matrix in another layer
    {"token_embd.weight", TensorType::kQ8_K, "Q8_K"},      // the embedding
    {"output.weight", TensorType::kIQ2_XXS, "IQ2_XXS"},
};

// The error a backend's create() gives: kUnsupported, naming tensor, type and backend.
template <typename Created>
void expectRefused(const Created& b, const Case& c, const std::string& backendName) {
  ASSERT_FALSE(b.ok()) << c.typeName;
  EXPECT_EQ(b.error().code, ErrorCode::kUnsupported);
  EXPECT_THAT(b.error().message,
              HasSubstr(std::string("tensor '") + c.tensor + "' has type " + c.typeName +
                        ", which the " + backendName + " backend cannot decode"));
}

TEST(WeightTypes, CpuBackendRefusesTypesItCannotDecode) {
  for (const Case& c : kCases) {
    auto m = modelWith(c);
    ASSERT_TRUE(m);
    expectRefused(backend::CpuBackend::create(m), c, "CPU");
  }
}

TEST(WeightTypes, VulkanBackendRefusesTypesItCannotDecode) {
  // The check comes before the device is opened, so this needs no GPU. Q3_K
  // and Q2_K have CPU kernels but no GPU ones: refused by Vulkan alone.
  std::vector<Case> cases(std::begin(kCases), std::end(kCases));
  const Case cpuOnly[] = {{"blk.0.ffn_down.weight", TensorType::kQ3_K, "Q3_K"},
                          {"blk.1.ffn_up.weight", TensorType::kQ2_K, "Q2_K"}};
  cases.insert(cases.end(), std::begin(cpuOnly), std::end(cpuOnly));
  for (const Case& c : cases) {
    auto m = modelWith(c);
    ASSERT_TRUE(m);
    expectRefused(backend::VulkanBackend::create(m), c, "Vulkan");
  }
  for (const Case& c : cpuOnly) {
    auto cpu = backend::CpuBackend::create(modelWith(c));
    EXPECT_TRUE(cpu.ok()) << cpu.error().describe();
  }
}

TEST(WeightTypes, RefusalListsWhatTheBackendRuns) {
  auto b = backend::CpuBackend::create(modelWith(kCases[0]));
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.error().message, HasSubstr("its weight matrices may be F32, F16, Q4_0"));
  EXPECT_THAT(b.error().message, HasSubstr("Q6_K, IQ4_NL, IQ4_XS, BF16"));
}

}  // namespace
}  // namespace kvscope::test
