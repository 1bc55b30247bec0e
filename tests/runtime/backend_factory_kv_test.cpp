// makeBackend turns a KV policy text into per-layer schemes on the backend,
// or a clear error before anything is loaded.
#include <gtest/gtest.h>

#include "backend/cpu_backend.h"
#include "gpu/device_info.h"
#include "runtime/backend_factory.h"
#include "support/policy.h"
#include "support/synthetic_model_file.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

std::shared_ptr<const model::ModelFile> stories() {
  auto model = model::ModelFile::open(sharedFile("models/stories260K.gguf"));
  EXPECT_TRUE(model.ok()) << model.error().describe();
  return model.ok() ? std::shared_ptr<const model::ModelFile>(std::move(model).value()) : nullptr;
}

TEST(BackendFactory, ParsesKvPolicies) {
  KVS_REQUIRE_FIXTURE(sharedFile("models/stories260K.gguf"));
  auto m = stories();
  auto b = runtime::makeBackend(
      m, {.kind = "cpu", .threads = 2, .kvPolicy = policyOf("k=q8_0,v=turbo4,boundary=1,seed=3")});
  ASSERT_TRUE(b.ok()) << b.error().describe();
  const auto& cache = dynamic_cast<backend::CpuBackend&>(**b).cache();
  EXPECT_EQ(cache.cacheSeed(), 3u);
  EXPECT_EQ(cache.scheme(0, kv::KvPart::kKey).name(), "f16");
  EXPECT_EQ(cache.scheme(1, kv::KvPart::kKey).name(), "q8_0");
  EXPECT_EQ(cache.scheme(1, kv::KvPart::kValue).name(), "turbo4");
  // A policy the model cannot hold: a layer past its last.
  auto r = runtime::makeBackend(m, {.kind = "cpu", .kvPolicy = policyOf("k@99=f16")});
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(runtime::makeBackend(m, {.kind = "cpu", .kvPolicy = {}}).ok());
  // A precision tail and two-phase caching reach either backend's cache: a
  // two-phase cache holds f16 rows until its first decode step.
  auto tail = runtime::makeBackend(
      m, {.kind = "cpu", .threads = 2, .kvPolicy = policyOf("kv=q4_0,tail=100")});
  ASSERT_TRUE(tail.ok()) << tail.error().describe();
  EXPECT_EQ(dynamic_cast<backend::CpuBackend&>(**tail).cache().tailRows(), 100u);
  auto devices = gpu::listDevices();
  if (!devices.ok() || devices->empty()) return;
  auto vulkan = runtime::makeBackend(
      m, {.kind = "vulkan", .kvPolicy = policyOf("kv=q4_0,tail=100"), .vetDevice = false});
  ASSERT_TRUE(vulkan.ok()) << vulkan.error().describe();
  EXPECT_EQ((*vulkan)->kvLayout()->geometry().tailRows, 100u);
  auto twoPhase = runtime::makeBackend(
      m, {.kind = "vulkan", .kvPolicy = policyOf("kv=q4_0,two_phase"), .vetDevice = false});
  ASSERT_TRUE(twoPhase.ok()) << twoPhase.error().describe();
  EXPECT_EQ((*twoPhase)->kvLayout()->scheme(1, kv::KvPart::kKey).name(), "f16");
  backend::Logits logits;
  const int32_t prompt[] = {1, 403, 407};
  ASSERT_TRUE((*twoPhase)->forward({prompt}, logits).ok());
  ASSERT_TRUE((*twoPhase)->forward({std::span(prompt).last(1)}, logits).ok());
  EXPECT_EQ((*twoPhase)->kvLayout()->scheme(1, kv::KvPart::kKey).name(), "q4_0");
  EXPECT_EQ((*twoPhase)->cachedTokens(), 4u);
}

// A Vulkan context longer than the device's memory can hold is refused before
// anything is allocated, with the longest context that fits.
TEST(BackendFactory, VulkanContextBeyondTheDeviceIsRefusedWithTheLongestThatFits) {
  KVS_REQUIRE_FIXTURE(sharedFile("models/stories260K.gguf"));
  auto devices = gpu::listDevices();
  if (!devices.ok() || devices->empty()) GTEST_SKIP() << "no Vulkan device";
  auto m = stories();
  // 640 bytes per token: a billion tokens is 640 GB, past any device here.
  auto b = runtime::makeBackend(
      m, {.kind = "vulkan", .contextLimit = 1'000'000'000, .vetDevice = false});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().code, ErrorCode::kOutOfMemory);
  EXPECT_NE(b.error().message.find("the longest context that fits is"), std::string::npos)
      << b.error().message;
  EXPECT_TRUE(runtime::checkDeviceFits(*m, {.kind = "vulkan", .contextLimit = 512}).ok());
  EXPECT_TRUE(runtime::checkDeviceFits(*m, {.kind = "cpu", .contextLimit = 1'000'000'000}).ok())
      << "the CPU backend's memory is not checked here";
}

// Without a context length, a Vulkan backend runs at the longest context its
// device holds when the trained one does not fit, and says so; the figure is
// the device heap less the weights, over the f16 bytes per token.
TEST(BackendFactory, AVulkanDefaultContextIsTheLongestThatFitsTheDevice) {
  auto devices = gpu::listDevices();
  if (!devices.ok() || devices->empty()) GTEST_SKIP() << "no Vulkan device";
  // 16M tokens of 512 f16 bytes each (2 layers, 1 KV head of 64): 8 GiB.
  const auto m = openSyntheticModel({.contextLength = 1u << 24}, "long-context");
  ASSERT_TRUE(m);
  const runtime::BackendChoice choice{.kind = "vulkan", .timing = false, .vetDevice = false};
  const auto memory = runtime::deviceMemory(choice);
  ASSERT_TRUE(memory);
  const uint64_t perToken = 2 * 1 * (64 + 64) * 2;
  const uint64_t expected = (memory->bytes - m->weightBytes()) / perToken;
  if (expected >= (1u << 24)) GTEST_SKIP() << "the device holds 16M tokens";

  std::string notice;
  auto b = runtime::makeBackend(m, choice, &notice);
  ASSERT_TRUE(b.ok()) << b.error().describe();
  EXPECT_EQ((*b)->contextLimit(), expected);
  EXPECT_NE(notice.find("the longest that fits"), std::string::npos) << notice;
  EXPECT_NE(notice.find("trained for 16777216"), std::string::npos) << notice;
  EXPECT_TRUE(runtime::checkDeviceFits(*m, choice).ok());
  // Asked for explicitly, the trained context is still refused.
  runtime::BackendChoice trained = choice;
  trained.contextLimit = 1u << 24;
  EXPECT_EQ(runtime::checkDeviceFits(*m, trained).error().code, ErrorCode::kOutOfMemory);
}

}  // namespace
}  // namespace kvscope::test
