#pragma once
// A Vulkan context shared by the tests of one binary, created with the Khronos
// validation layer on. Every test fails if any validation message appeared
// while it ran. Without any Vulkan device the tests fail (CI has lavapipe).

#include <memory>

#include <gtest/gtest.h>

#include "gpu/buffer.h"
#include "gpu/context.h"
#include "gpu/kernels.h"
#include "gpu/recorder.h"

namespace kvscope::test {

class GpuTest : public ::testing::Test {
 public:
  static void SetUpTestSuite();
  static void TearDownTestSuite();

 protected:
  void SetUp() override;
  void TearDown() override;

  static gpu::Context& ctx() { return *s_ctx; }
  static gpu::Kernels& kernels() { return *s_kernels; }
  static gpu::Recorder& rec() { return *s_rec; }

  // A device buffer holding `values`.
  template <typename T>
  static gpu::Buffer upload(const std::vector<T>& values) {
    auto b = gpu::Buffer::create(ctx(), values.size() * sizeof(T));
    EXPECT_TRUE(b.ok()) << b.error().describe();
    auto s = b->upload(std::span<const T>(values));
    EXPECT_TRUE(s.ok()) << s.error().describe();
    return std::move(b).value();
  }
  static gpu::Buffer deviceBuffer(size_t bytes);
  // For tests that provoke validation messages on purpose.
  void resetValidationBaseline() { m_messagesBefore = s_ctx->validationMessages(); }
  template <typename T>
  static std::vector<T> download(const gpu::Buffer& b, size_t count) {
    std::vector<T> out(count);
    auto s = b.download(std::span<T>(out));
    EXPECT_TRUE(s.ok()) << s.error().describe();
    return out;
  }

 private:
  static std::unique_ptr<gpu::Context> s_ctx;
  static std::unique_ptr<gpu::Kernels> s_kernels;
  static std::unique_ptr<gpu::Recorder> s_rec;
  uint64_t m_messagesBefore = 0;
};

}  // namespace kvscope::test
