#include "gpu_fixture.h"

#include <cstdlib>

namespace kvscope::test {

std::unique_ptr<gpu::Context> GpuTest::s_ctx;
std::unique_ptr<gpu::Kernels> GpuTest::s_kernels;
std::unique_ptr<gpu::Recorder> GpuTest::s_rec;

void GpuTest::SetUpTestSuite() {
  if (s_ctx) return;
  gpu::ContextOptions options;
  options.validation = true;
  options.persistPipelineCache = false;  // tests never touch the user's cache
  auto ctx = gpu::Context::create(options);
  ASSERT_TRUE(ctx.ok()) << ctx.error().describe();
  s_ctx = std::move(ctx).value();
  // The subgroup-width runs (tests/CMakeLists.txt) ask lavapipe for a width;
  // make sure the device really has it.
  if (const char* lanes = std::getenv("KVSCOPE_EXPECT_SUBGROUP_SIZE")) {
    ASSERT_EQ(s_ctx->info().subgroupSize, static_cast<uint32_t>(std::atoi(lanes)))
        << "the device ignored LP_NATIVE_VECTOR_WIDTH";
  }
  s_kernels = std::make_unique<gpu::Kernels>(*s_ctx);
  auto rec = gpu::Recorder::create(*s_ctx, {.maxDispatches = 256, .timing = true});
  ASSERT_TRUE(rec.ok()) << rec.error().describe();
  s_rec = std::move(rec).value();
}

void GpuTest::TearDownTestSuite() {
  s_rec.reset();
  s_kernels.reset();
  s_ctx.reset();
}

void GpuTest::SetUp() {
  ASSERT_TRUE(s_ctx) << "no Vulkan context";
  m_messagesBefore = s_ctx->validationMessages();
}

void GpuTest::TearDown() {
  if (s_ctx) {
    EXPECT_EQ(s_ctx->validationMessages(), m_messagesBefore)
        << "Vulkan validation reported problems";
  }
}

gpu::Buffer GpuTest::deviceBuffer(size_t bytes) {
  auto b = gpu::Buffer::create(ctx(), bytes);
  EXPECT_TRUE(b.ok()) << b.error().describe();
  return std::move(b).value();
}

}  // namespace kvscope::test
