// A Hugging Face folder whose tokenizer.json pre-tokenizes with a Split regex
// (Llama 3 here) works in the CLI: inspect and generate load it, and convert
// writes a GGUF naming llama.cpp's pre-tokenizer for it. The tokenization
// itself is checked string by string in tests/model/hf_folder_tokenizer_test.cpp.
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "support/hf_model_folder.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

TEST(CliHfTokenizer, Llama3FolderLoadsAndConverts) {
  const auto tokenizerDir = sharedFile("tokenizer/hf-llama3");
  KVS_REQUIRE_FIXTURE(tokenizerDir);
  const auto dir = std::filesystem::temp_directory_path() / "kvscope-cli-hf-llama3";
  writeHfLlamaFolder(dir, 128256, tokenizerDir);

  auto info = runCli("inspect -m " + dir.string() + " --json");
  ASSERT_EQ(info.exitCode, 0) << info.err;
  EXPECT_EQ(nlohmann::json::parse(info.out)["pre_tokenizer"], "llama-bpe");

  auto gen = runCli("generate -m " + dir.string() +
                    " --backend cpu -p 'Hello world' -n 2 --temp 0 --json");
  ASSERT_EQ(gen.exitCode, 0) << gen.err;
  EXPECT_EQ(nlohmann::json::parse(gen.out)["tokens"].size(), 2u);

  const auto out = dir / "converted.gguf";
  auto conv = runCli("convert " + dir.string() + " -o " + out.string());
  ASSERT_EQ(conv.exitCode, 0) << conv.err;
  auto converted = runCli("inspect -m " + out.string() + " --json");
  ASSERT_EQ(converted.exitCode, 0) << converted.err;
  EXPECT_EQ(nlohmann::json::parse(converted.out)["pre_tokenizer"], "llama-bpe");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kvscope::test
