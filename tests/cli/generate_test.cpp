// `kvscope-cli generate` and `chat` end to end on stories260K: the JSON has the
// documented fields, greedy output equals llama.cpp's recorded reply, a chat
// turn without a template is the same completion, and bad input fails cleanly.
#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

const std::string kModel = sharedFile("models/stories260K.gguf").string();

TEST(CliGenerate, GreedyJsonMatchesLlamaCpp) {
  KVS_REQUIRE_FIXTURE(kModel);
  std::ifstream in(sharedFile("reference/stories260K.greedy.json"));
  const auto ref = nlohmann::json::parse(in);
  auto r = runCli("generate -m " + kModel + " -p 'Once upon a time' -n 64 --temp 0 --json");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["prompt_tokens"], ref["prompt_tokens"]);
  EXPECT_EQ(j["text"], ref["text"]);
  EXPECT_EQ(j["tokens"].size(), 64u);
  EXPECT_EQ(j["stop"], "max_tokens");
  EXPECT_GT(j["prefill_tps"].get<double>(), 0.0);
  EXPECT_GT(j["decode_tps"].get<double>(), 0.0);
}

TEST(CliGenerate, SeedReproducesASampledRun) {
  KVS_REQUIRE_FIXTURE(kModel);
  const std::string cmd =
      "generate -m " + kModel + " -p 'Once upon a time' -n 24 --temp 1 --seed 7 --json";
  auto a = runCli(cmd), b = runCli(cmd);
  ASSERT_EQ(a.exitCode, 0) << a.err;
  EXPECT_EQ(nlohmann::json::parse(a.out)["tokens"], nlohmann::json::parse(b.out)["tokens"]);
  EXPECT_EQ(nlohmann::json::parse(a.out)["seed"], 7u);
}

TEST(CliGenerate, UserErrorsAreOneLine) {
  KVS_REQUIRE_FIXTURE(kModel);
  auto ctx = runCli("generate -m " + kModel + " -p 'Once upon a time there was a girl' -c 4");
  EXPECT_EQ(ctx.exitCode, 1);
  EXPECT_NE(ctx.err.find("error: the prompt needs"), std::string::npos) << ctx.err;
  EXPECT_NE(ctx.err.find("context overflow: truncate-middle or rolling"), std::string::npos);
  auto temp = runCli("generate -m " + kModel + " -p hi --temp -1");
  EXPECT_EQ(temp.exitCode, 1);
  EXPECT_NE(temp.err.find("temperature"), std::string::npos) << temp.err;
  auto backend = runCli("generate -m " + kModel + " -p hi --backend metal");
  EXPECT_NE(backend.exitCode, 0);
}

// A prompt longer than the context under --context-overflow: rolling keeps its
// last tokens, truncate-middle its first and last, leaving room for the reply
// (the smaller of -n and a quarter of the context); the full tokenization is
// the same command with a large context.
TEST(CliGenerate, ContextOverflowKeepsTheTailOrTheEnds) {
  KVS_REQUIRE_FIXTURE(kModel);
  const std::string prompt =
      "'Once upon a time there was a little girl named Lily who loved to play outside in the "
      "park with her dog and her friends every day'";
  auto full = runCli("generate -m " + kModel + " -p " + prompt + " -n 1 --temp 0 --json");
  ASSERT_EQ(full.exitCode, 0) << full.err;
  const auto tokens = nlohmann::json::parse(full.out)["prompt_tokens"].get<std::vector<int>>();
  ASSERT_GT(tokens.size(), 32u);
  // -c 32 -n 4: 28 prompt tokens kept; rolling keeps the BOS (stories260K adds one) and
  // the last 27.
  ASSERT_EQ(tokens.front(), 1) << "BOS";
  auto rolling = runCli("generate -m " + kModel + " -p " + prompt +
                        " -c 32 -n 4 --temp 0 --json --context-overflow rolling");
  ASSERT_EQ(rolling.exitCode, 0) << rolling.err;
  const auto r = nlohmann::json::parse(rolling.out);
  std::vector<int> tail{tokens.front()};
  tail.insert(tail.end(), tokens.end() - 27, tokens.end());
  EXPECT_EQ(r["prompt_tokens"].get<std::vector<int>>(), tail);
  EXPECT_EQ(r["prompt_tokens_dropped"], tokens.size() - 28);
  auto middle = runCli("generate -m " + kModel + " -p " + prompt +
                       " -c 32 -n 4 --temp 0 --json --context-overflow truncate-middle");
  ASSERT_EQ(middle.exitCode, 0) << middle.err;
  std::vector<int> ends(tokens.begin(), tokens.begin() + 14);
  ends.insert(ends.end(), tokens.end() - 14, tokens.end());
  EXPECT_EQ(nlohmann::json::parse(middle.out)["prompt_tokens"].get<std::vector<int>>(), ends);
  auto bad = runCli("generate -m " + kModel + " -p hi --context-overflow middle");
  EXPECT_NE(bad.exitCode, 0);
}

// A reply longer than the context goes on under rolling and truncate-middle
// (context shift), and stops at the end of the context under stop.
TEST(CliGenerate, AReplyPastTheContextGoesOnUnlessTheOverflowIsStop) {
  KVS_REQUIRE_FIXTURE(kModel);
  for (const char* overflow : {"rolling", "truncate-middle"}) {
    auto r = runCli("generate -m " + kModel + " -p 'Once upon a time' -c 64 -n 120 --temp 0 " +
                    "--json --context-overflow " + overflow);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["tokens"].size(), 120u) << overflow;
    EXPECT_EQ(j["stop"], "max_tokens") << overflow;
    EXPECT_GE(j["context_shifts"].get<int>(), 2) << overflow;
  }
  auto stop = runCli("generate -m " + kModel + " -p 'Once upon a time' -c 64 -n 120 --temp 0 --json");
  ASSERT_EQ(stop.exitCode, 0) << stop.err;
  const auto j = nlohmann::json::parse(stop.out);
  EXPECT_EQ(j["stop"], "context_full");
  EXPECT_LT(j["tokens"].size(), 64u);
  EXPECT_EQ(j["context_shifts"], 0);
}

// A chat longer than the context goes on under rolling, saying what it left out.
TEST(CliChat, ContextOverflowLeavesOutOldTurns) {
  KVS_REQUIRE_FIXTURE(kModel);
  const auto input = std::filesystem::temp_directory_path() / "kvscope-chat-overflow.txt";
  std::ofstream(input) << "Once upon a time there was a dog\nThe dog ran to the park\n"
                          "Then the dog saw a cat\nThe cat ran up a tree\n/exit\n";
  auto stop = runCli("chat -m " + kModel + " --temp 0 -n 16 -c 64 < " + input.string());
  auto rolling = runCli("chat -m " + kModel +
                        " --temp 0 -n 16 -c 64 --context-overflow rolling < " + input.string());
  std::filesystem::remove(input);
  ASSERT_EQ(stop.exitCode, 0) << stop.err;
  EXPECT_NE(stop.err.find("context overflow: truncate-middle or rolling"), std::string::npos)
      << stop.err;
  ASSERT_EQ(rolling.exitCode, 0) << rolling.err;
  EXPECT_NE(rolling.err.find("[context overflow (rolling): "), std::string::npos) << rolling.err;
  EXPECT_EQ(rolling.err.find("error:"), std::string::npos) << rolling.err;
}

TEST(CliChat, TurnWithoutTemplateIsTheCompletion) {
  KVS_REQUIRE_FIXTURE(kModel);
  const auto input = std::filesystem::temp_directory_path() / "kvscope-chat-input.txt";
  std::ofstream(input) << "Once upon a time\n/exit\n";
  auto chat = runCli("chat -m " + kModel + " --temp 0 -n 24 < " + input.string());
  std::filesystem::remove(input);
  ASSERT_EQ(chat.exitCode, 0) << chat.err;
  auto gen = runCli("generate -m " + kModel + " -p 'Once upon a time' -n 24 --temp 0 --json");
  const std::string reply = nlohmann::json::parse(gen.out)["text"];
  EXPECT_NE(chat.out.find(reply), std::string::npos) << chat.out;
  EXPECT_NE(chat.err.find("[24 tokens"), std::string::npos) << chat.err;
}

}  // namespace
}  // namespace kvscope::test
