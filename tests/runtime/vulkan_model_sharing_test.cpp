// One device and one weight upload per loaded model (backend/vulkan_model.h):
// a Vulkan session switches to `auto`, which settles, then switches its KV
// policy five times and gets a sibling (a server slot), all over the
// VulkanModel its load created; the device's buffers never hold more than one
// copy of the weights plus the backends (cache, activations) a step holds at
// once: three for a switch to auto, two for any other switch.
#include <gtest/gtest.h>

#include "backend/vulkan_backend.h"
#include "gpu/buffer.h"
#include "model/model_tokenizer.h"
#include "runtime/backend_factory.h"
#include "runtime/session.h"
#include "support/policy.h"
#include "support/synthetic_model_file.h"

namespace kvscope::test {
namespace {

TEST(VulkanModelSharing, PolicySwitchesAutoAndASiblingShareOneCopyOfTheWeights) {
  // Weights (~29 MB of F16) well above one backend's cache and activations, so
  // a second copy could not hide in the bound's slack.
  const auto m = openSyntheticModel({.nLayer = 4,
                                     .nEmbd = 512,
                                     .nFf = 2048,
                                     .nHead = 4,
                                     .nHeadKv = 2,
                                     .headDim = 128,
                                     .contextLength = 256,
                                     .weightType = gguf::TensorType::kF16},
                                    "sharing");
  ASSERT_TRUE(m);
  auto tokenizer = model::loadTokenizer(*m);
  ASSERT_TRUE(tokenizer.ok());

  const uint64_t before = gpu::Buffer::liveBytes();
  const uint64_t created = backend::VulkanModel::created();
  runtime::BackendChoice choice{
      .kind = "vulkan", .contextLimit = 256, .timing = false, .vetDevice = false};
  auto first = runtime::makeBackend(m, choice);
  ASSERT_TRUE(first.ok()) << first.error().describe();
  const uint64_t weights = dynamic_cast<backend::VulkanBackend&>(**first).weightBytes();
  runtime::Session session(m, std::move(first).value(), std::move(tokenizer).value(),
                           runtime::makeBackendFactory(m, choice), choice.kvPolicy);
  runtime::GenerateOptions options;
  options.maxTokens = 4;
  options.sampler.temperature = 0.0f;
  std::vector<int32_t> prompt(100);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(3 + i * 7 % 500);
  ASSERT_TRUE(session.generate(prompt, options).ok());
  // One backend with its f16 cache (the largest) and activations, beside the weights.
  const uint64_t oneBackend = gpu::Buffer::liveBytes() - before - weights;
  gpu::Buffer::resetPeakLiveBytes();

  // A switch to auto mid-chat holds three caches at its peak: the one it may
  // go back to, the f16 rows it measures and the cache it settles on.
  ASSERT_TRUE(session.setKvPolicy(policyOf("auto")).ok());
  ASSERT_NE(session.autoPlan(), nullptr) << "auto settled";
  EXPECT_LE(gpu::Buffer::peakLiveBytes() - before, weights + 3 * oneBackend + oneBackend / 4)
      << "weights " << weights << ", one backend " << oneBackend;

  // A switch holds two: the old cache and the new one; so do a chat and its sibling.
  gpu::Buffer::resetPeakLiveBytes();
  for (const char* policy : {"kv=q8_0", "k=q8_0,v=turbo4", "", "kv=q4_0", "k=f16,v=turbo3"}) {
    ASSERT_TRUE(session.setKvPolicy(policyOf(policy)).ok()) << policy;
    ASSERT_EQ(session.backend().name(), "vulkan");
  }
  auto sibling = session.sibling();
  ASSERT_TRUE(sibling.ok()) << sibling.error().describe();
  ASSERT_TRUE((*sibling)->generate(prompt, options).ok());

  EXPECT_LE(gpu::Buffer::peakLiveBytes() - before, weights + 2 * oneBackend + oneBackend / 4)
      << "weights " << weights << ", one backend " << oneBackend;
  EXPECT_EQ(backend::VulkanModel::created() - created, 1u) << "one device, one upload";
  EXPECT_GT(weights, 4 * oneBackend) << "the bounds must tell a second copy of the weights apart";
}

}  // namespace
}  // namespace kvscope::test
