// The measured KV codec error (CodecErrorMeter, Backend::kvErrors) on
// analytic rows and on CpuBackend with stories260K. Layer 0's K/V rows do not
// depend on the cache, so an f16 backend's layer 0 gives the rows every other
// backend wrote there, and their round trip through the scheme objects the
// backend reports is an independent reference for its measured error. The
// Vulkan backend measures sampled rows on the host and agrees with the CPU.
#include <cmath>

#include <gtest/gtest.h>

#include "backend/codec_error.h"
#include "backend/cpu_backend.h"
#include "backend/vulkan_backend.h"
#include "kv/kv_policy.h"
#include "support/synthetic_model_file.h"
#include "support/test_support.h"
#include "support/window_model_specs.h"

namespace kvscope::test {
namespace {

using kv::KvPart;

constexpr int32_t kPrompt[] = {1, 403, 407, 261, 378, 429, 267, 400, 263, 9, 370, 290};

TEST(CodecErrorMeter, RelativeRmsOverAllRows) {
  backend::CodecErrorMeter meter(2);
  EXPECT_LT(meter.error(1, KvPart::kValue), 0.0) << "nothing measured yet";
  const std::vector<float> x1{3, 4}, y1{3, 3};  // |x|^2 = 25, |x - y|^2 = 1
  const std::vector<float> x2{0, 5}, y2{2, 5};  // |x|^2 = 25, |x - y|^2 = 4
  meter.add(1, KvPart::kValue, x1, y1);
  meter.add(1, KvPart::kValue, x2, y2);
  EXPECT_DOUBLE_EQ(meter.error(1, KvPart::kValue), std::sqrt(5.0 / 50.0));
  EXPECT_LT(meter.error(1, KvPart::kKey), 0.0) << "parts are separate";
  EXPECT_LT(meter.error(0, KvPart::kValue), 0.0) << "layers are separate";
  meter.add(0, KvPart::kKey, std::vector<float>{0, 0}, std::vector<float>{0, 0});
  EXPECT_EQ(meter.error(0, KvPart::kKey), 0.0) << "all-zero rows: no error";
  meter.reset();
  EXPECT_LT(meter.error(1, KvPart::kValue), 0.0);
}

std::shared_ptr<const model::ModelFile> stories() {
  auto model = model::ModelFile::open(sharedFile("models/stories260K.gguf"));
  EXPECT_TRUE(model.ok()) << model.error().describe();
  return model.ok() ? std::shared_ptr<const model::ModelFile>(std::move(model).value()) : nullptr;
}

// Every position measured unless `stride` says otherwise, so the meter sees
// the rows the independent round trips below see.
std::unique_ptr<backend::CpuBackend> cpu(std::shared_ptr<const model::ModelFile> m,
                                         std::string_view policyText, uint32_t stride = 1) {
  auto policy = kv::KvPolicy::parse(policyText);
  EXPECT_TRUE(policy.ok());
  auto schemes = policy->resolve({m->config().architecture, m->config().kvLayers()});
  EXPECT_TRUE(schemes.ok());
  auto b = backend::CpuBackend::create(m, {.threads = 2,
                                           .kvSchemes = std::move(schemes).value(),
                                           .kvSeed = policy->seed,
                                           .twoPhase = policy->twoPhase,
                                           .errorStride = stride});
  EXPECT_TRUE(b.ok()) << b.error().describe();
  return b.ok() ? std::move(b).value() : nullptr;
}

void prefill(backend::Backend& b, size_t n = std::size(kPrompt)) {
  backend::Logits logits;
  ASSERT_TRUE(b.forward({std::span(kPrompt, n)}, logits).ok());
}

// Relative RMS error of `rows` ([n][headDim]) round-tripped through `scheme`.
double roundTripError(const kv::KvScheme& scheme, const std::vector<float>& rows) {
  backend::CodecErrorMeter meter(1);
  for (size_t i = 0; i < rows.size(); i += scheme.dim())
    meter.measure(0, KvPart::kKey, scheme, std::span(rows).subspan(i, scheme.dim()));
  return meter.error(0, KvPart::kKey);
}

class CodecErrorTest : public ::testing::Test {
 protected:
  void SetUp() override { KVS_REQUIRE_FIXTURE(sharedFile("models/stories260K.gguf")); }
};

TEST_F(CodecErrorTest, LayerZeroErrorMatchesAnIndependentRoundTrip) {
  auto m = stories();
  auto f16 = cpu(m, "");
  prefill(*f16);
  const std::vector<float> keys = f16->readKv(0, KvPart::kKey).value();
  const std::vector<float> values = f16->readKv(0, KvPart::kValue).value();
  for (const char* policy : {"k=q8_0,v=turbo3", "k=fp8,v=q4_0", "k=turbo4,v=turbo2"}) {
    auto b = cpu(m, policy);
    prefill(*b);
    const auto errors = b->kvErrors();
    const auto layers = b->kvBytes();
    ASSERT_EQ(errors.size(), m->config().nLayer);
    // The f16 rows differ from the written float rows by f16 rounding
    // (~3e-4 relative), far below these codecs' error.
    EXPECT_NEAR(errors[0].key, roundTripError(*layers[0].key, keys), 0.02 * errors[0].key)
        << policy;
    EXPECT_NEAR(errors[0].value, roundTripError(*layers[0].value, values), 0.02 * errors[0].value)
        << policy;
  }
}

TEST_F(CodecErrorTest, FewerBitsMeasureMoreErrorInEveryLayer) {
  auto m = stories();
  std::vector<std::vector<backend::KvLayerError>> measured;
  for (const char* policy : {"", "kv=q8_0", "kv=turbo4", "kv=turbo3", "kv=turbo2"}) {
    auto b = cpu(m, policy);
    prefill(*b);
    measured.push_back(b->kvErrors());
  }
  for (uint32_t l = 0; l < m->config().nLayer; ++l) {
    EXPECT_GT(measured[0][l].key, 0.0) << "f16 rounds";
    EXPECT_LT(measured[0][l].key, 1e-3);
    for (size_t i = 1; i < measured.size(); ++i) {
      EXPECT_GT(measured[i][l].key, measured[i - 1][l].key) << "layer " << l << " policy " << i;
      EXPECT_GT(measured[i][l].value, measured[i - 1][l].value) << "layer " << l;
    }
  }
}

TEST_F(CodecErrorTest, TwoPhaseMeasuresTheCompressedRowsAfterTheFirstDecodeStep) {
  auto m = stories();
  auto b = cpu(m, "kv=turbo3,two_phase");
  prefill(*b, 8);
  EXPECT_LT(b->kvErrors()[2].value, 1e-3) << "f16 during prefill";
  backend::Logits logits;
  ASSERT_TRUE(b->forward({std::span(&kPrompt[8], 1)}, logits).ok());
  auto direct = cpu(m, "kv=turbo3");
  prefill(*direct, 9);
  // Recoded from f16 rows rather than the float rows: close, not equal.
  for (uint32_t l = 0; l < m->config().nLayer; ++l) {
    EXPECT_GT(b->kvErrors()[l].value, 0.02);
    EXPECT_NEAR(b->kvErrors()[l].value, direct->kvErrors()[l].value,
                0.5 * direct->kvErrors()[l].value);
  }
}

std::unique_ptr<backend::VulkanBackend> vulkan(std::shared_ptr<const model::ModelFile> m,
                                               std::string_view policyText, uint32_t stride) {
  auto policy = kv::KvPolicy::parse(policyText);
  EXPECT_TRUE(policy.ok());
  auto schemes = policy->resolve({m->config().architecture, m->config().kvLayers()});
  EXPECT_TRUE(schemes.ok());
  auto b = backend::VulkanBackend::create(m, {.validation = true,
                                              .kvSchemes = std::move(schemes).value(),
                                              .kvSeed = policy->seed,
                                              .errorStride = stride});
  EXPECT_TRUE(b.ok()) << b.error().describe();
  return b.ok() ? std::move(b).value() : nullptr;
}

void stepByStep(backend::Backend& b, size_t from, size_t to) {
  backend::Logits logits;
  for (size_t i = from; i < to; ++i)
    ASSERT_TRUE(b.forward({std::span(&kPrompt[i], 1)}, logits).ok());
}

// With every position probed, the Vulkan backend measures the rows the CPU
// backend measures, up to the two backends' float differences in the rows.
TEST_F(CodecErrorTest, VulkanMeasuresWhatTheCpuBackendMeasures) {
  auto m = stories();
  const char* policy = "k=q8_0,v=turbo3";
  auto gpu = vulkan(m, policy, 1);
  ASSERT_TRUE(gpu);
  auto ref = cpu(m, policy);
  stepByStep(*gpu, 0, std::size(kPrompt));
  stepByStep(*ref, 0, std::size(kPrompt));
  const auto measured = gpu->kvErrors(), expected = ref->kvErrors();
  ASSERT_EQ(measured.size(), expected.size());
  for (size_t l = 0; l < expected.size(); ++l) {
    EXPECT_NEAR(measured[l].key, expected[l].key, 0.02 * expected[l].key) << "layer " << l;
    EXPECT_NEAR(measured[l].value, expected[l].value, 0.02 * expected[l].value) << "layer " << l;
  }
  EXPECT_EQ(gpu->context().validationMessages(), 0u);
}

// Gemma 4's shapes: window layers of 2 KV heads of 32 values, global ones of
// one of 128, the last two layers KV-shared: one measurement per cache layer,
// each of its own rows (the probe keeps each layer's rows at their own width).
TEST(CodecErrorGemma4, VulkanMeasuresWhatTheCpuBackendMeasures) {
  model::SyntheticModelSpec spec = smallGemma4Spec(8, 5);
  spec.headDim = 128;
  auto m = openSyntheticModel(spec, "codec-error-gemma4");
  ASSERT_TRUE(m);
  const char* policy = "k=q8_0,v=turbo3";
  auto gpu = vulkan(m, policy, 1);
  auto ref = cpu(m, policy);
  ASSERT_TRUE(gpu && ref);
  stepByStep(*gpu, 0, std::size(kPrompt));
  stepByStep(*ref, 0, std::size(kPrompt));
  const auto measured = gpu->kvErrors(), expected = ref->kvErrors();
  ASSERT_EQ(expected.size(), 2u);
  ASSERT_EQ(measured.size(), expected.size());
  for (size_t l = 0; l < expected.size(); ++l) {
    EXPECT_NEAR(measured[l].key, expected[l].key, 0.02 * expected[l].key) << "layer " << l;
    EXPECT_NEAR(measured[l].value, expected[l].value, 0.02 * expected[l].value) << "layer " << l;
  }
  EXPECT_EQ(gpu->context().validationMessages(), 0u);
}

TEST_F(CodecErrorTest, VulkanSamplesOnePositionInStride) {
  auto m = stories();
  auto off = vulkan(m, "kv=turbo3", 0);
  ASSERT_TRUE(off);
  prefill(*off);
  EXPECT_TRUE(off->kvErrors().empty()) << "not measured";

  auto b = vulkan(m, "kv=turbo3", 8);
  ASSERT_TRUE(b);
  EXPECT_LT(b->kvErrors()[0].key, 0.0) << "no rows yet";
  stepByStep(*b, 0, 1);  // position 0: measured
  const auto first = b->kvErrors();
  EXPECT_GT(first[0].key, 0.0);
  stepByStep(*b, 1, 8);  // positions 1..7: skipped
  for (size_t l = 0; l < first.size(); ++l) EXPECT_EQ(b->kvErrors()[l].value, first[l].value);
  stepByStep(*b, 8, 9);  // position 8: measured
  EXPECT_NE(b->kvErrors()[0].value, first[0].value);
  EXPECT_EQ(b->context().validationMessages(), 0u);
}

// The CPU backend meters positions 0, stride, 2 x stride, …: between them the
// measured error stays put, and a sampled position adds to it. On layer 0 the
// sampled error matches an independent round trip of the sampled rows.
TEST_F(CodecErrorTest, CpuSamplesOnePositionInStride) {
  auto m = stories();
  EXPECT_TRUE(cpu(m, "kv=turbo3", 0)->kvErrors().empty()) << "not measured";

  auto b = cpu(m, "kv=turbo3", 4);
  EXPECT_LT(b->kvErrors()[0].key, 0.0) << "no rows yet";
  stepByStep(*b, 0, 1);  // position 0: measured
  const auto first = b->kvErrors();
  EXPECT_GT(first[0].key, 0.0);
  stepByStep(*b, 1, 4);  // positions 1..3: skipped
  for (size_t l = 0; l < first.size(); ++l) EXPECT_EQ(b->kvErrors()[l].value, first[l].value);
  stepByStep(*b, 4, 9);  // positions 4 and 8: measured
  EXPECT_NE(b->kvErrors()[0].value, first[0].value);

  auto f16 = cpu(m, "");
  prefill(*f16, 9);
  const uint32_t d = m->config().headDim, width = m->config().nHeadKv * d;
  const std::vector<float> keys = f16->readKv(0, KvPart::kKey).value();
  std::vector<float> sampled;
  for (uint32_t p : {0u, 4u, 8u})
    sampled.insert(sampled.end(), keys.begin() + p * width, keys.begin() + (p + 1) * width);
  EXPECT_NEAR(b->kvErrors()[0].key, roundTripError(*b->kvBytes()[0].key, sampled),
              0.02 * b->kvErrors()[0].key);
}

}  // namespace
}  // namespace kvscope::test
