// `kvscope-cli inspect` on the shared fixtures prints the configs FIXTURES.md
// states, and refuses bad paths with a one-line error.
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

TEST(CliInspect, Stories260k) {
  const auto path = sharedFile("models/stories260K.gguf");
  KVS_REQUIRE_FIXTURE(path);
  auto r = runCli("inspect --json -m " + path.string());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["architecture"], "llama");
  EXPECT_EQ(j["embedding"], 64);
  EXPECT_EQ(j["feed_forward"], 172);
  EXPECT_EQ(j["layers"], 5);
  EXPECT_EQ(j["heads"], 8);
  EXPECT_EQ(j["kv_heads"], 4);
  EXPECT_EQ(j["head_dim"], 8);
  EXPECT_EQ(j["vocab_size"], 512);
  EXPECT_EQ(j["vocab_type"], "spm");
  EXPECT_EQ(j["chat_template"], "none");
  EXPECT_EQ(j["tensor_types"]["F32"]["tensors"], 48);
  EXPECT_EQ(j["kv_bytes_per_token_f16"], 5 * 4 * (8 + 8) * 2);
}

TEST(CliInspect, TinyStoriesHuggingFaceFolder) {
  const auto path = sharedFile("models/tinystories-656k");
  KVS_REQUIRE_FIXTURE(path);
  auto r = runCli("inspect --json -m " + path.string());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["format"], "huggingface");
  EXPECT_EQ(j["embedding"], 128);
  EXPECT_EQ(j["layers"], 2);
  EXPECT_EQ(j["heads"], 8);
  EXPECT_EQ(j["kv_heads"], 4);
  EXPECT_EQ(j["head_dim"], 16);
  EXPECT_EQ(j["vocab_size"], 2048);
  EXPECT_EQ(j["tied_embeddings"], true);
  EXPECT_EQ(j["rope"]["style"], "neox");
  // The safetensors header lists 20 tensors (lm_head, norm, 9 per layer); the
  // tied embedding is an alias of lm_head and is not counted twice.
  EXPECT_EQ(j["tensor_types"]["F32"]["tensors"], 20);
  EXPECT_EQ(j["weight_bytes"], j["tensor_types"]["F32"]["bytes"]);
}

// A model whose layers differ in KV heads (Gemma 4's form: head_count_kv an
// array) lists each layer's shape, in the JSON and as runs of alike layers in
// the table, and its f16 KV bytes per token add the layers' own widths.
TEST(CliInspect, PerLayerHeadCounts) {
  const auto dir = std::filesystem::temp_directory_path() / "kvscope-inspect-layers";
  std::filesystem::create_directories(dir);
  const auto path = dir / "model.gguf";
  auto made = runCli("make-model -o " + path.string() +
                     " --layers 3 --dim 64 --ffn 128 --heads 4 --kv-heads 2 --head-dim 16"
                     " --layer-kv-heads 1,2,2 --vocab 300");
  ASSERT_EQ(made.exitCode, 0) << made.err;
  auto r = runCli("inspect --json -m " + path.string());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j["layer_attention"].is_array()) << r.out;
  ASSERT_EQ(j["layer_attention"].size(), 3u);
  EXPECT_EQ(j["layer_attention"][0]["kv_heads"], 1);
  EXPECT_EQ(j["layer_attention"][2]["kv_heads"], 2);
  EXPECT_EQ(j["layer_attention"][2]["heads"], 4);
  EXPECT_EQ(j["kv_bytes_per_token_f16"], (1 + 2 + 2) * 16 * 2 * 2);
  auto table = runCli("inspect -m " + path.string());
  ASSERT_EQ(table.exitCode, 0) << table.err;
  EXPECT_NE(table.out.find("heads         0 4 query, 1 KV, head_dim 16"), std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("heads       1-2 4 query, 2 KV, head_dim 16"), std::string::npos)
      << table.out;
  std::filesystem::remove_all(dir);
}

// A Gemma 4 E2B-shaped file from make-model: which layers store K/V rows and
// which read another's, per-layer inputs, the logit soft-cap, and an f16 KV
// cache of the storing layers only.
TEST(CliInspect, Gemma4SharedKvLayers) {
  const auto dir = std::filesystem::temp_directory_path() / "kvscope-inspect-gemma4";
  std::filesystem::create_directories(dir);
  const auto path = dir / "model.gguf";
  auto made = runCli("make-model --arch gemma4 -o " + path.string() +
                     " --layers 6 --dim 64 --ffn 128 --heads 2 --kv-heads 1 --head-dim 32"
                     " --head-dim-window 16 --rope-dims-window 16 --window 8 --window-period 3"
                     " --kv-shared-layers 2 --per-layer-dim 8 --logit-softcap 30 --vocab 300");
  ASSERT_EQ(made.exitCode, 0) << made.err;
  auto r = runCli("inspect --json -m " + path.string());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  // Layers W W G W | W G: 4 store rows, 4 reads 3 (window) and 5 reads 2 (global).
  EXPECT_EQ(j["kv_sharing"]["storing_layers"], 4);
  EXPECT_EQ(j["kv_sharing"]["reads"]["4"], 3);
  EXPECT_EQ(j["kv_sharing"]["reads"]["5"], 2);
  EXPECT_EQ(j["per_layer_input"], 8);
  EXPECT_EQ(j["final_logit_softcap"], 30.0);
  // The global storing layer per token; the 3 window storing layers in
  // rings of 8 - 1 + 512 rows (the context is 2048).
  EXPECT_EQ(j["kv_bytes_per_token_f16"], 32 * 2 * 2);
  EXPECT_EQ(j["kv_ring_bytes_f16"], 3 * 519 * 16 * 2 * 2);
  auto table = runCli("inspect -m " + path.string());
  ASSERT_EQ(table.exitCode, 0) << table.err;
  EXPECT_NE(table.out.find("layers 0-3 store K/V rows; the others read a layer's: 4 <- 3, 5 <- 2"),
            std::string::npos)
      << table.out;
  std::filesystem::remove_all(dir);
}

TEST(CliInspect, TableOutputIsReadable) {
  const auto path = sharedFile("models/stories260K.gguf");
  KVS_REQUIRE_FIXTURE(path);
  auto r = runCli("inspect -m " + path.string());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("8 query, 4 KV, head_dim 8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("640 bytes per token"), std::string::npos) << r.out;
}

// Which layers attend a window and which the whole context, the f16 cache's
// bytes per token (global layers) and rings (window layers), and the experts
// of a mixture-of-experts model, as the files make-model wrote say them.
TEST(CliInspect, SlidingWindowLayersAndExperts) {
  const auto dir = std::filesystem::temp_directory_path();
  const auto gemma = dir / "kvscope-inspect-gemma3.gguf", moe = dir / "kvscope-inspect-moe.gguf";
  ASSERT_EQ(
      runCli("make-model -o " + gemma.string() +
             " --arch gemma3 --layers 6 --window 32 --window-period 3 --rope-theta-window 5000")
          .exitCode,
      0);
  ASSERT_EQ(runCli("make-model -o " + moe.string() +
                   " --arch qwen3moe --layers 2 --experts 8 --experts-used 2 --expert-ffn 64")
                .exitCode,
            0);
  auto r = runCli("inspect --json -m " + gemma.string());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto a = nlohmann::json::parse(r.out)["attention"];
  EXPECT_EQ(a["sliding_window"], 32);
  EXPECT_EQ(a["window_layers"], 4);
  EXPECT_EQ(a["global_layers"], nlohmann::json({2, 5}));
  EXPECT_EQ(a["window_rope_theta"], 5000.0);
  EXPECT_TRUE(nlohmann::json::parse(r.out)["experts"].is_null());
  // f16, 1 KV head of 64: a token adds K and V rows of 128 bytes to the 2
  // global layers; each of the 4 window layers keeps a ring of 32 - 1 + 512 rows.
  EXPECT_EQ(nlohmann::json::parse(r.out)["kv_bytes_per_token_f16"], 2 * 2 * 128);
  EXPECT_EQ(nlohmann::json::parse(r.out)["kv_ring_bytes_f16"], 4 * (32 - 1 + 512) * 2 * 128);
  r = runCli("inspect -m " + gemma.string());
  EXPECT_NE(r.out.find("a sliding window of 32 on 4 of 6 layers (RoPE theta 5000); global: 2, 5"),
            std::string::npos)
      << r.out;
  r = runCli("inspect --json -m " + moe.string());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["attention"]["sliding_window"].is_null());
  EXPECT_EQ(j["experts"], nlohmann::json({{"count", 8}, {"used", 2}, {"feed_forward", 64}}));
  EXPECT_EQ(j["kv_bytes_per_token_f16"], 2 * 2 * 128);
  EXPECT_EQ(j["kv_ring_bytes_f16"], 0);
  std::filesystem::remove(gemma);
  std::filesystem::remove(moe);
}

TEST(CliInspect, BadPathsAreOneLineErrors) {
  auto missing = runCli("inspect -m /nonexistent/model.gguf");
  EXPECT_EQ(missing.exitCode, 1);
  EXPECT_EQ(missing.err.rfind("error: ", 0), 0u) << missing.err;
  EXPECT_NE(missing.err.find("does not exist"), std::string::npos) << missing.err;
  auto notModel = runCli("inspect -m " KVSCOPE_CLI);  // an ELF file, not GGUF
  EXPECT_EQ(notModel.exitCode, 1);
  EXPECT_NE(notModel.err.find("error: "), std::string::npos);
}

}  // namespace
}  // namespace kvscope::test
