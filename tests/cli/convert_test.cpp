// `kvscope-cli convert` end to end: a Hugging Face folder becomes a GGUF that
// inspect and generate accept, carrying the tokenizer and chat template it was
// given; bad input fails with one error line. Also: commands that run a model
// fall back to the bundled demo model when -m is left out.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

std::filesystem::path tempPath(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("kvscope-convert-" + name);
}

TEST(CliConvert, HuggingFaceFolderToF16Gguf) {
  const auto hf = sharedFile("models/tinystories-656k");
  const auto vocab = sharedFile("models/stories260K.gguf");
  KVS_REQUIRE_FIXTURE(hf);
  KVS_REQUIRE_FIXTURE(vocab);
  const auto templ = tempPath("template.jinja");
  std::ofstream(templ) << "{{ bos_token }}[INST] <<SYS>> {{ m }} [/INST]";
  const auto out = tempPath("tinystories.gguf");
  auto r = runCli("convert " + hf.string() + " -o " + out.string() + " --type F16 --tokenizer " +
                  vocab.string() + " --chat-template " + templ.string() + " --name converted");
  ASSERT_EQ(r.exitCode, 0) << r.err;

  auto info = runCli("inspect -m " + out.string() + " --json");
  ASSERT_EQ(info.exitCode, 0) << info.err;
  const auto j = nlohmann::json::parse(info.out);
  EXPECT_EQ(j["format"], "gguf");
  EXPECT_EQ(j["name"], "converted");
  EXPECT_EQ(j["layers"], 2);
  EXPECT_EQ(j["rope"]["style"], "normal");
  EXPECT_EQ(j["chat_template"], "llama2");
  EXPECT_TRUE(j["tied_embeddings"].get<bool>());
  EXPECT_EQ(j["tensor_types"]["F16"]["tensors"], 2 * 7 + 1) << "7 projections a layer + embedding";

  auto gen = runCli("generate -m " + out.string() + " -p 'Once upon a time' -n 4 --temp 0 --json");
  ASSERT_EQ(gen.exitCode, 0) << gen.err;
  EXPECT_EQ(nlohmann::json::parse(gen.out)["tokens"].size(), 4u);
  std::filesystem::remove(out);
  std::filesystem::remove(templ);
}

TEST(CliConvert, BadInputFailsWithOneErrorLine) {
  const auto hf = sharedFile("models/tinystories-656k");
  KVS_REQUIRE_FIXTURE(hf);
  const std::string out = tempPath("bad.gguf").string();
  const auto missing = runCli("convert /nonexistent/model -o " + out);
  EXPECT_EQ(missing.exitCode, 1);
  EXPECT_NE(missing.err.find("error:"), std::string::npos) << missing.err;
  const auto type = runCli("convert " + hf.string() + " -o " + out + " --type Q9_9");
  EXPECT_EQ(type.exitCode, 1);
  EXPECT_NE(type.err.find("unknown weight type"), std::string::npos) << type.err;
  EXPECT_FALSE(std::filesystem::exists(out));
}

// tinystories' own tokenizer.json is SentencePiece-style BPE (as Gemma 3's):
// the converted file prompts and generates the same tokens as the folder.
TEST(CliConvert, SentencePieceStyleBpeTokenizesAsTheFolder) {
  const auto hf = sharedFile("models/tinystories-656k");
  KVS_REQUIRE_FIXTURE(hf);
  const auto out = tempPath("tinystories-bpe.gguf");
  const auto conv = runCli("convert " + hf.string() + " -o " + out.string());
  ASSERT_EQ(conv.exitCode, 0) << conv.err;
  const std::string prompt =
      " -p \"Once upon a  time, Lily's cat saw 12 birds.\" -n 6 --temp 0 --json";
  const auto folder = runCli("generate --backend cpu -m " + hf.string() + prompt);
  const auto file = runCli("generate --backend cpu -m " + out.string() + prompt);
  ASSERT_EQ(folder.exitCode, 0) << folder.err;
  ASSERT_EQ(file.exitCode, 0) << file.err;
  const auto a = nlohmann::json::parse(folder.out), b = nlohmann::json::parse(file.out);
  EXPECT_EQ(a["prompt_tokens"], b["prompt_tokens"]);
  EXPECT_EQ(a["tokens"], b["tokens"]);
  EXPECT_GT(a["prompt_tokens"].size(), 8u);
  std::filesystem::remove(out);
}

TEST(CliDefaultModel, GenerateWithoutModelUsesTheDemoModel) {
  auto r = runCli("generate -p 'Once upon a time' -n 8 --temp 0 --json");
  if (r.err.find("demo model is not installed") != std::string::npos)
    GTEST_SKIP() << "resources/models/kvscope-demo.gguf is absent";
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tokens"].size(), 8u);
  EXPECT_EQ(j["prompt_tokens"][0], 1) << "the demo model's SentencePiece vocabulary adds BOS";
}

}  // namespace
}  // namespace kvscope::test
