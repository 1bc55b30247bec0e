// `kvscope-cli devices`: lists devices as JSON, the self-check passes on the
// chosen device, and a bad device index is a clear one-line error (exit 1).
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"

namespace kvscope::test {
namespace {

bool lavapipeInstalled() {
  for (const char* dir : {"/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d"}) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
      if (e.path().filename().string().rfind("lvp_icd", 0) == 0) return true;
  }
  return false;
}

TEST(CliDevices, JsonListsEveryDeviceWithCapabilities) {
  auto r = runCli("devices --json");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto devices = nlohmann::json::parse(r.out);
  ASSERT_TRUE(devices.is_array());
  ASSERT_FALSE(devices.empty());
  int selected = 0;
  bool sawLlvmpipe = false;
  for (const auto& d : devices) {
    EXPECT_FALSE(d.at("name").get<std::string>().empty());
    EXPECT_GT(d.at("subgroup_size").get<int>(), 0);
    EXPECT_FALSE(d.at("heaps").empty());
    for (const char* key : {"fp16", "int8", "storage16"})
      EXPECT_TRUE(d.at(key).is_boolean()) << key;
    selected += d.at("selected").get<bool>() ? 1 : 0;
    sawLlvmpipe |= d.at("name").get<std::string>().find("llvmpipe") != std::string::npos;
  }
  EXPECT_EQ(selected, 1);
  if (lavapipeInstalled()) {
    EXPECT_TRUE(sawLlvmpipe) << r.out;
  }
}

TEST(CliDevices, TableMarksTheSelectedDevice) {
  auto r = runCli("devices");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("* ["), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("subgroup"), std::string::npos);
}

// Without -m: a model of the demo model's spec under the app's default
// policy (auto: every scheme it may choose); --kv-policy vets another.
TEST(CliDevices, VetComparesAModelOfTheSpecWithTheCpuBackend) {
  auto r = runCli("devices --vet --json");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("passed").get<bool>()) << r.out;
  EXPECT_EQ(j.at("steps").get<int>(), 7);  // a prefill and 6 decode steps
  EXPECT_EQ(j.at("argmax_agree").get<int>(), 7);
  EXPECT_LT(j.at("worst_rel").get<double>(), 2e-2);
  const std::string model = j.at("model").get<std::string>();
  for (const char* part : {"F16 weights", "head_dim 64", "turbo3b", "turbo4b", "q8_0"})
    EXPECT_NE(model.find(part), std::string::npos) << part << " in " << model;

  auto q4 = runCli("devices --vet --json --kv-policy kv=q4_0");
  ASSERT_EQ(q4.exitCode, 0) << q4.err;
  const std::string q4Model = nlohmann::json::parse(q4.out).at("model").get<std::string>();
  EXPECT_NE(q4Model.find("KV cache in q4_0"), std::string::npos) << q4Model;

  auto bad = runCli("devices --vet --kv-policy k=nope");
  EXPECT_EQ(bad.exitCode, 1);
  EXPECT_NE(bad.err.find("nope"), std::string::npos) << bad.err;
}

TEST(CliDevices, CheckRunsATestStepAgainstTheCpu) {
  const auto cache = std::filesystem::temp_directory_path() / "kvscope-cli-check-cache";
  std::filesystem::remove_all(cache);
  auto r = runCli("devices --check --json", "XDG_CACHE_HOME=" + cache.string());
  std::filesystem::remove_all(cache);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("passed").get<bool>());
  EXPECT_LT(j.at("max_abs_error").get<double>(), 1e-5);
  EXPECT_GE(j.at("pipelines").get<int>(), 5);  // convert x2, rmsnorm, softmax, rope
  EXPECT_EQ(j.at("pipeline_cache_bytes_loaded").get<int>(), 0)
      << "a fresh cache dir is a cold start";
}

TEST(CliDevices, OutOfRangeDeviceIsAClearError) {
  auto r = runCli("--device 99 devices --check");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("--device 99 is out of range"), std::string::npos) << r.err;
  auto env = runCli("devices --check", "KVSCOPE_DEVICE=abc");
  EXPECT_EQ(env.exitCode, 1);
  EXPECT_NE(env.err.find("KVSCOPE_DEVICE must be a device index"), std::string::npos) << env.err;
}

TEST(CliDevices, MissingSubcommandPrintsUsage) {
  auto r = runCli("");
  EXPECT_NE(r.exitCode, 0);
  EXPECT_NE((r.out + r.err).find("devices"), std::string::npos);
}

}  // namespace
}  // namespace kvscope::test
