// The Vulkan layer itself: validation really reports misuse, buffers round-trip,
// the pipeline cache persists and rejects stale data, the device rule picks the
// right device.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gpu/device_info.h"
#include "gpu/pipeline.h"
#include "gpu_fixture.h"
#include "shaders/elementwise.h"
#include "shaders/spirv_registry.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

class ContextTest : public GpuTest {};

TEST_F(ContextTest, ValidationLayerCountsMisuse) {
  ASSERT_TRUE(ctx().validationEnabled());
  const uint64_t before = ctx().validationMessages();
  VkBufferCreateInfo ci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  ci.size = 0;  // invalid: VUID-VkBufferCreateInfo-size-00912
  ci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  VkBuffer buffer = VK_NULL_HANDLE;
  if (vkCreateBuffer(ctx().device(), &ci, nullptr, &buffer) == VK_SUCCESS && buffer) {
    vkDestroyBuffer(ctx().device(), buffer, nullptr);
  }
  const uint64_t after = ctx().validationMessages();
  EXPECT_GT(after, before) << "the validation layer did not report an invalid call";
  // This test's own misuse must not fail it in TearDown.
  resetValidationBaseline();
}

// Contexts made one after another share the process's instance (a driver that
// is unloaded and loaded again per context stopped loading on NVIDIA), and
// each counts validation messages from its own start.
// lavapipe (llvmpipe) ends a shader invocation's loops after 65535
// iterations in all; the kernels size their dispatches by this figure.
TEST_F(ContextTest, ReportsTheDriversLoopLimit) {
  const gpu::DeviceInfo& info = ctx().info();
  const bool llvmpipe = info.name.find("llvmpipe") != std::string::npos;
  EXPECT_EQ(info.loopIterationLimit, llvmpipe ? 65535u : 0u) << info.name;
}

TEST_F(ContextTest, ContextsShareTheProcessInstance) {
  VkInstance first = VK_NULL_HANDLE;
  {
    auto a = gpu::Context::create({.validation = true});
    ASSERT_TRUE(a.ok()) << a.error().describe();
    first = (*a)->instance();
    VkBufferCreateInfo ci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    ci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;  // size 0: invalid, one message
    VkBuffer buffer = VK_NULL_HANDLE;
    if (vkCreateBuffer((*a)->device(), &ci, nullptr, &buffer) == VK_SUCCESS && buffer)
      vkDestroyBuffer((*a)->device(), buffer, nullptr);
    EXPECT_GT((*a)->validationMessages(), 0u);
  }
  auto b = gpu::Context::create({.validation = true});
  ASSERT_TRUE(b.ok()) << b.error().describe();
  EXPECT_EQ((*b)->instance(), first);
  EXPECT_EQ((*b)->instance(), ctx().instance());
  EXPECT_EQ((*b)->validationMessages(), 0u);
  resetValidationBaseline();
}

TEST_F(ContextTest, BuffersRoundTripWithOffsets) {
  for (auto use : {gpu::MemoryUse::kDevice, gpu::MemoryUse::kHost}) {
    auto b = gpu::Buffer::create(ctx(), 1000, use);
    ASSERT_TRUE(b.ok()) << b.error().describe();
    std::vector<uint8_t> data(300);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 1);
    ASSERT_TRUE(b->upload(data.data(), data.size(), 600).ok());
    std::vector<uint8_t> back(300);
    ASSERT_TRUE(b->download(back.data(), back.size(), 600).ok());
    EXPECT_EQ(back, data);
    EXPECT_FALSE(b->upload(data.data(), data.size(), 800).ok()) << "overflowing upload must fail";
  }
}

// The context counts the memory its buffers hold, through moves, until each
// is destroyed (the soak test's device-memory figure).
TEST_F(ContextTest, CountsTheMemoryItsBuffersHold) {
  const uint64_t before = ctx().allocatedBytes();
  const uint64_t processBefore = gpu::Buffer::liveBytes();
  {
    auto a = gpu::Buffer::create(ctx(), 1 << 20);
    ASSERT_TRUE(a.ok());
    auto b = gpu::Buffer::create(ctx(), 4096, gpu::MemoryUse::kHost);
    ASSERT_TRUE(b.ok());
    EXPECT_GE(ctx().allocatedBytes(), before + (1 << 20) + 4096);
    EXPECT_EQ(gpu::Buffer::liveBytes() - processBefore, ctx().allocatedBytes() - before);
    const uint64_t both = ctx().allocatedBytes();
    gpu::Buffer moved = std::move(*a);
    EXPECT_EQ(ctx().allocatedBytes(), both) << "a move neither adds nor frees";
    *b = gpu::Buffer();
    EXPECT_GE(ctx().allocatedBytes(), before + (1 << 20));
    EXPECT_LT(ctx().allocatedBytes(), both);
  }
  EXPECT_EQ(ctx().allocatedBytes(), before);
  EXPECT_EQ(gpu::Buffer::liveBytes(), processBefore);
}

TEST_F(ContextTest, RecorderCopiesBetweenBuffers) {
  std::vector<float> src = randomFloats(100, 9);
  gpu::Buffer a = upload(src);
  gpu::Buffer b = deviceBuffer(200 * sizeof(float));
  ASSERT_TRUE(rec().begin().ok());
  rec().copy(a, 0, b, 100 * sizeof(float), 100 * sizeof(float));
  ASSERT_TRUE(rec().submitAndWait().ok());
  auto got = download<float>(b, 200);
  for (size_t i = 0; i < 100; ++i) ASSERT_EQ(got[100 + i], src[i]);
}

TEST_F(ContextTest, EveryEmbeddedShaderIsValidSpirv) {
  ASSERT_FALSE(shaders::all().empty());
  for (const auto& e : shaders::all()) {
    ASSERT_GT(e.code.size(), 5u) << e.name;
    EXPECT_EQ(e.code[0], 0x07230203u) << e.name << ": not SPIR-V";
    EXPECT_EQ(shaders::find(e.name).data(), e.code.data());
  }
  EXPECT_TRUE(shaders::find("no_such_shader").empty());
}

class PipelineCacheTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    m_dir = std::filesystem::temp_directory_path() /
            ("kvscope-pcache-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
             "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(m_dir);
    std::filesystem::create_directories(m_dir);
  }
  void TearDown() override {
    std::filesystem::remove_all(m_dir);
    GpuTest::TearDown();
  }
  std::unique_ptr<gpu::Context> makeContext() {
    gpu::ContextOptions o;
    o.validation = true;
    o.pipelineCacheDir = m_dir;
    auto c = gpu::Context::create(o);
    EXPECT_TRUE(c.ok()) << c.error().describe();
    return c.ok() ? std::move(c).value() : nullptr;
  }
  std::filesystem::path m_dir;
};

TEST_F(PipelineCacheTest, PersistsAcrossContexts) {
  std::filesystem::path file;
  {
    auto c = makeContext();
    ASSERT_TRUE(c);
    EXPECT_EQ(c->pipelineCacheBytesLoaded(), 0u);
    auto p = gpu::Pipeline::create(
        *c, {"convert_f32_to_f16", 2, sizeof(push::ElementwisePush), {256}, "convert"});
    ASSERT_TRUE(p.ok()) << p.error().describe();
    file = c->pipelineCachePath();
    EXPECT_EQ(c->validationMessages(), 0u);
  }  // destruction saves the cache
  ASSERT_TRUE(std::filesystem::exists(file));
  const auto size = std::filesystem::file_size(file);
  EXPECT_GE(size, sizeof(VkPipelineCacheHeaderVersionOne));
  auto c2 = makeContext();
  ASSERT_TRUE(c2);
  EXPECT_EQ(c2->pipelineCacheBytesLoaded(), size);
}

TEST_F(PipelineCacheTest, StaleOrCorruptCacheIsIgnored) {
  std::filesystem::path file;
  {
    auto c = makeContext();
    ASSERT_TRUE(c);
    file = c->pipelineCachePath();
  }
  std::ofstream(file, std::ios::binary)
      << "not a pipeline cache, and long enough to look like one.....";
  auto c = makeContext();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->pipelineCacheBytesLoaded(), 0u);
  auto p = gpu::Pipeline::create(
      *c, {"convert_f32_to_f16", 2, sizeof(push::ElementwisePush), {256}, "convert"});
  EXPECT_TRUE(p.ok());
  EXPECT_EQ(c->validationMessages(), 0u);
}

gpu::DeviceInfo fakeDevice(int index, gpu::DeviceType type, uint64_t local) {
  gpu::DeviceInfo d;
  d.index = index;
  d.name = "device " + std::to_string(index);
  d.type = type;
  d.deviceLocalBytes = local;
  return d;
}

TEST(DeviceChoice, PrefersDiscreteThenIntegratedThenVirtualThenCpu) {
  ::unsetenv("KVSCOPE_DEVICE");
  using T = gpu::DeviceType;
  std::vector<gpu::DeviceInfo> devs = {fakeDevice(0, T::kCpu, 8), fakeDevice(1, T::kIntegrated, 4),
                                       fakeDevice(2, T::kDiscrete, 2),
                                       fakeDevice(3, T::kVirtual, 16)};
  EXPECT_EQ(*gpu::chooseDevice(devs), 2);
  devs.erase(devs.begin() + 2);
  EXPECT_EQ(*gpu::chooseDevice(devs), 1);
  devs.erase(devs.begin() + 1);
  EXPECT_EQ(*gpu::chooseDevice(devs), 3);
}

TEST(DeviceChoice, LargerMemoryBreaksTies) {
  ::unsetenv("KVSCOPE_DEVICE");
  using T = gpu::DeviceType;
  std::vector<gpu::DeviceInfo> devs = {fakeDevice(0, T::kDiscrete, 8),
                                       fakeDevice(1, T::kDiscrete, 24)};
  EXPECT_EQ(*gpu::chooseDevice(devs), 1);
}

TEST(DeviceChoice, ExplicitIndexAndEnvironmentOverride) {
  using T = gpu::DeviceType;
  std::vector<gpu::DeviceInfo> devs = {fakeDevice(0, T::kCpu, 8), fakeDevice(1, T::kDiscrete, 8)};
  ::setenv("KVSCOPE_DEVICE", "0", 1);
  EXPECT_EQ(*gpu::chooseDevice(devs), 0);
  EXPECT_EQ(*gpu::chooseDevice(devs, 1), 1) << "--device beats the environment";
  ::setenv("KVSCOPE_DEVICE", "7", 1);
  auto bad = gpu::chooseDevice(devs);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.error().message.find("device 1"), std::string::npos) << "lists the choices";
  ::setenv("KVSCOPE_DEVICE", "gpu", 1);
  EXPECT_FALSE(gpu::chooseDevice(devs).ok());
  ::unsetenv("KVSCOPE_DEVICE");
}

TEST(DeviceList, ReportsAtLeastOneDeviceWithCapabilities) {
  auto devs = gpu::listDevices();
  ASSERT_TRUE(devs.ok()) << devs.error().describe();
  ASSERT_FALSE(devs->empty());
  for (const auto& d : *devs) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_FALSE(d.heaps.empty());
    EXPECT_GT(d.subgroupSize, 0u);
  }
}

}  // namespace
}  // namespace kvscope::test
