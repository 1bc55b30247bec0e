// `kvscope-cli bench` and `make-model`: a generated model benchmarks on both
// backends, the JSON has one row per backend and depth with positive speeds,
// --kernels reports device time per kernel class, and --kv benches several KV
// policies side by side.
#include <cstdio>
#include <filesystem>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "gguf/gguf_file.h"

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
    EXPECT_GT(row["first_decode_ms"].get<double>(), 0.0);
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

// make-model's Q4_K_M mix, as llama.cpp's quantizer assigns it: of 16
// layers, attn_v and ffn_down get Q6_K in layers 0, 1, 14, 15 (the first and
// last eighth) and 4, 7, 10, 13 (every third between), the output too; every
// other matrix Q4_K, norms F32. --expert-type sets the stacked experts' type
// apart from the rest.
TEST(CliBench, MakeModelWritesQuantizationMixes) {
  const auto path = std::filesystem::temp_directory_path() / "kvscope-mix-test.gguf";
  auto made = runCli("make-model -o " + path.string() +
                     " --layers 16 --dim 256 --ffn 512 --heads 4 --kv-heads 2 --head-dim 64 "
                     "--vocab 300 --mix Q4_K_M");
  ASSERT_EQ(made.exitCode, 0) << made.err;
  auto file = gguf::GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().describe();
  const std::set<int> moreBits = {0, 1, 4, 7, 10, 13, 14, 15};
  uint32_t q6k = 0;
  for (const gguf::TensorInfo& t : (*file)->tensors()) {
    int layer = -1;
    char part[64] = {};
    std::sscanf(t.name.c_str(), "blk.%d.%63[a-z_]", &layer, part);
    const std::string p = part;
    const bool q6 =
        t.name == "output.weight" || (moreBits.count(layer) && (p == "attn_v" || p == "ffn_down"));
    const auto want = t.shape.size() == 1 ? gguf::TensorType::kF32
                      : q6                ? gguf::TensorType::kQ6_K
                                          : gguf::TensorType::kQ4_K;
    EXPECT_EQ(t.type, want) << t.name;
    q6k += t.type == gguf::TensorType::kQ6_K;
  }
  EXPECT_EQ(q6k, 17u);

  made = runCli("make-model -o " + path.string() +
                " --arch gpt-oss --layers 2 --dim 256 --ffn 256 --heads 4 --kv-heads 2 "
                "--head-dim 64 --vocab 300 --experts 4 --experts-used 2 --expert-ffn 128 "
                "--type Q8_0 --expert-type MXFP4");
  ASSERT_EQ(made.exitCode, 0) << made.err;
  EXPECT_NE(made.out.find("Q8_0 + MXFP4 experts"), std::string::npos) << made.out;
  file = gguf::GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().describe();
  uint32_t experts = 0;
  for (const gguf::TensorInfo& t : (*file)->tensors()) {
    const bool stack = t.name.find("_exps.weight") != std::string::npos;
    experts += stack;
    if (t.shape.size() >= 2 && t.name.ends_with(".weight")) {  // not the stacked biases
      EXPECT_EQ(t.type, stack ? gguf::TensorType::kMXFP4 : gguf::TensorType::kQ8_0) << t.name;
    }
  }
  EXPECT_EQ(experts, 6u);
  std::filesystem::remove(path);
  EXPECT_NE(runCli("make-model -o " + path.string() + " --mix Q9_K_M").exitCode, 0);
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
