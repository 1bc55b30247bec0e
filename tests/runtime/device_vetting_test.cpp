// Vulkan device vetting (runtime/device_vetting.h): lavapipe passes against the
// CPU backend on the demo model, the verdict is remembered per device, driver
// and kernels, and a device whose verdict is "failed" gets the CPU backend,
// with a notice for the user.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/default_model.h"
#include "runtime/backend_factory.h"
#include "runtime/device_vetting.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

class DeviceVetting : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir =
        std::filesystem::temp_directory_path() /
        ("kvscope-vetting-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(m_dir);
    std::filesystem::create_directories(m_dir);
    m_file = m_dir / "device-checks.json";
  }
  void TearDown() override { std::filesystem::remove_all(m_dir); }

  nlohmann::json readFile() const {
    std::ifstream in(m_file);
    return nlohmann::json::parse(in);
  }

  std::filesystem::path m_dir, m_file;
};

TEST_F(DeviceVetting, LavapipePassesAndTheVerdictIsRemembered) {
  auto first = runtime::vetDevice(-1, m_file);
  ASSERT_TRUE(first.ok()) << first.error().describe();
  EXPECT_TRUE(first->passed) << first->summary();
  EXPECT_FALSE(first->remembered);
  // Two policies (f16, k=q8_0,v=turbo4) of 12-token prefill + 6 decode steps.
  EXPECT_EQ(first->steps, 14u);
  EXPECT_LT(first->worstRel, 2e-2);

  const nlohmann::json saved = readFile();
  ASSERT_TRUE(saved.contains(first->key)) << saved.dump();
  EXPECT_TRUE(saved[first->key]["passed"].get<bool>());

  auto second = runtime::vetDevice(-1, m_file);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->remembered);
  EXPECT_EQ(second->passed, first->passed);
  EXPECT_EQ(second->worstRel, first->worstRel);
  // The key names the driver, so a driver update is vetted anew.
  EXPECT_NE(first->key.find(first->device), std::string::npos);
  EXPECT_NE(first->key.find("kernels"), std::string::npos);
}

TEST_F(DeviceVetting, ACorruptVerdictFileIsMeasuredAnew) {
  std::ofstream(m_file) << "{ not json";
  auto v = runtime::vetDevice(-1, m_file);
  ASSERT_TRUE(v.ok()) << v.error().describe();
  EXPECT_FALSE(v->remembered);
  nlohmann::json saved = readFile();
  ASSERT_TRUE(saved.contains(v->key));

  // Valid JSON with a wrong type in the device's entry, and a verdict of an
  // older kernel build: measured anew, and the stale entry is dropped.
  saved[v->key]["passed"] = "yes";
  saved["1234:5678 old device | driver | Vulkan 1.0 | kernels 0000000000000000"] = saved[v->key];
  std::ofstream(m_file) << saved.dump();
  auto again = runtime::vetDevice(-1, m_file);
  ASSERT_TRUE(again.ok()) << again.error().describe();
  EXPECT_FALSE(again->remembered);
  EXPECT_TRUE(again->passed);
  const nlohmann::json rewritten = readFile();
  EXPECT_EQ(rewritten.size(), 1u) << rewritten.dump();
  EXPECT_TRUE(rewritten[v->key]["passed"].is_boolean());
}

TEST_F(DeviceVetting, AFailedDeviceGetsTheCpuBackendAndANotice) {
  auto model = model::findDefaultModel();
  ASSERT_TRUE(model.ok()) << model.error().describe();
  auto opened = model::ModelFile::open(*model);
  ASSERT_TRUE(opened.ok());
  std::shared_ptr<const model::ModelFile> m(std::move(opened).value());

  auto measured = runtime::vetDevice(-1, m_file);
  ASSERT_TRUE(measured.ok()) << measured.error().describe();
  runtime::BackendChoice choice{.kind = "vulkan", .threads = 2, .verdictFile = m_file.string()};
  std::string notice = "stale";
  auto good = runtime::makeBackend(m, choice, &notice);
  ASSERT_TRUE(good.ok()) << good.error().describe();
  EXPECT_EQ((*good)->name(), "vulkan");
  EXPECT_TRUE(notice.empty()) << notice;

  // The same device, remembered as having failed.
  nlohmann::json saved = readFile();
  saved[measured->key]["passed"] = false;
  saved[measured->key]["worst_rel"] = 0.8;
  std::ofstream(m_file) << saved.dump();
  auto fallback = runtime::makeBackend(m, choice, &notice);
  ASSERT_TRUE(fallback.ok()) << fallback.error().describe();
  EXPECT_EQ((*fallback)->name(), "cpu");
  EXPECT_NE(notice.find("differ from the CPU backend"), std::string::npos) << notice;
  EXPECT_NE(notice.find(measured->device), std::string::npos) << notice;

  // Without vetting the device is used as asked.
  choice.vetDevice = false;
  auto unvetted = runtime::makeBackend(m, choice, &notice);
  ASSERT_TRUE(unvetted.ok());
  EXPECT_EQ((*unvetted)->name(), "vulkan");
}

}  // namespace
}  // namespace kvscope::test
