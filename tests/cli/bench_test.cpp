// `kvscope-cli bench` and `make-model`: a generated model benchmarks on both
// backends, the JSON has one row per backend and depth with positive speeds,
// --kernels reports device time per kernel class, and --kv benches several KV
// policies side by side.
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"

namespace kvscope::test {
namespace {

TEST(CliBench, GeneratedModelOnBothBackends) {
  const auto path = std::filesystem::temp_directory_path() / "kvscope-bench-test.gguf";
  auto made = runCli("make-model -o " + path.string() +
                     " --layers 2 --dim 64 --ffn 128 --heads 4 --kv-heads 2 "
                     "--head-dim 16 --vocab 300 --type Q8_0");
  ASSERT_EQ(made.exitCode, 0) << made.err;
  EXPECT_NE(made.out.find("llama Q8_0"), std::string::npos) << made.out;
  auto r = runCli("bench -m " + path.string() + " -p 8 -n 4 --ctx 0,16 --json");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto rows = nlohmann::json::parse(r.out);
  ASSERT_EQ(rows.size(), 4u) << "2 backends x 2 depths";
  for (const auto& row : rows) {
    EXPECT_GT(row["prefill_tps"].get<double>(), 0.0);
    EXPECT_GT(row["decode_tps"].get<double>(), 0.0);
    EXPECT_GT(row["cold_start_s"].get<double>(), 0.0);
    EXPECT_GT(row["peak_rss_mib"].get<long>(), 0);
  }
  EXPECT_EQ(rows[0]["backend"], "cpu");
  EXPECT_EQ(rows[3]["backend"], "vulkan");
  EXPECT_EQ(rows[3]["depth"], 16);

  auto k = runCli("bench -m " + path.string() + " -p 4 -n 2 --backend vulkan --kernels --json");
  std::filesystem::remove(path);
  ASSERT_EQ(k.exitCode, 0) << k.err;
  const auto kr = nlohmann::json::parse(k.out);
  ASSERT_EQ(kr.size(), 1u);
  if (!kr[0].contains("kernels")) GTEST_SKIP() << "device has no compute timestamps";
  bool sawMatvec = false;
  for (const auto& c : kr[0]["kernels"]) sawMatvec |= c["class"] == "matvec";
  EXPECT_TRUE(sawMatvec) << kr[0]["kernels"].dump();
}

TEST(CliBench, KvPoliciesSideBySide) {
  const auto path = std::filesystem::temp_directory_path() / "kvscope-bench-kv-test.gguf";
  ASSERT_EQ(
      runCli("make-model -o " + path.string() +
             " --layers 2 --dim 64 --ffn 128 --heads 4 --kv-heads 2 --head-dim 16 --vocab 300")
          .exitCode,
      0);
  auto r = runCli("bench -m " + path.string() +
                  " -p 4 -n 2 --backend cpu --kv f16 --kv turbo3 --kv k=q8_0,v=turbo4 --json");
  auto bad = runCli("bench -m " + path.string() + " -p 4 -n 2 --backend cpu --kv turbo9");
  std::filesystem::remove(path);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto rows = nlohmann::json::parse(r.out);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]["kv"], "f16");
  EXPECT_EQ(rows[1]["kv"], "turbo3");
  EXPECT_EQ(rows[2]["kv"], "k=q8_0,v=turbo4");
  for (const auto& row : rows) EXPECT_GT(row["decode_tps"].get<double>(), 0.0);
  EXPECT_EQ(bad.exitCode, 1);
  EXPECT_NE(bad.err.find("turbo9"), std::string::npos) << bad.err;
}

TEST(CliBench, BadArgumentsFail) {
  EXPECT_NE(runCli("bench -m /nonexistent.gguf").exitCode, 0);
  EXPECT_NE(runCli("bench -m x --backend metal").exitCode, 0);
  auto bad = runCli("make-model -o /tmp/x.gguf --type Q9_9");
  EXPECT_EQ(bad.exitCode, 1);
  EXPECT_NE(bad.err.find("unknown weight type"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace kvscope::test
