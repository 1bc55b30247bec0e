// `--kv-policy auto[:BITS]` end to end on stories260K: eval, generate, chat,
// bench and probe take it, report what it chose, and run under that choice;
// an impossible budget is a one-line error.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "kv/kv_policy.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

const std::string kModel = sharedFile("models/stories260K.gguf").string();
const std::string kStory = sharedFile("fixtures/story-a.txt").string();

// The plan JSON (cli/auto_plan_json.h): every layer's K and V, within budget.
void expectPlan(const nlohmann::json& plan, double budget, size_t layers) {
  EXPECT_EQ(plan["budget"].get<double>(), budget);
  EXPECT_LE(plan["bits_per_value"].get<double>(), budget);
  // How it was made, and the candidates' trials, the chosen one among them.
  EXPECT_FALSE(plan["method"].get<std::string>().empty());
  ASSERT_TRUE(plan["trials"].is_array());
  bool chosenTried = plan["trials"].empty();
  for (const auto& t : plan["trials"]) {
    EXPECT_GT(t["kld"].get<double>(), 0.0);
    EXPECT_LE(t["bits_per_value"].get<double>(), budget);
    chosenTried |= t["method"] == plan["method"];
  }
  EXPECT_TRUE(chosenTried) << plan.dump();
  EXPECT_EQ(plan["trial_tokens"].get<uint32_t>() > 0, !plan["trials"].empty());
  EXPECT_EQ(plan["untried"], "") << "every command gives auto a backend to try its plans on";
  ASSERT_EQ(plan["layers"].size(), layers);
  for (const auto& l : plan["layers"]) {
    for (const char* part : {"k", "v"}) {
      EXPECT_EQ(l[part]["errors"].size(), 6u);  // one per candidate
      EXPECT_TRUE(l[part]["reason"].is_string());
      EXPECT_EQ(l[part]["promoted"].get<bool>(), !l[part]["reason"].get<std::string>().empty());
    }
  }
}

TEST(CliAuto, EvalRunsUnderWhatItChose) {
  KVS_REQUIRE_FIXTURE(kModel);
  auto r = runCli("eval -m " + kModel + " -f " + kStory + " --kv-policy auto:10 --json");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kv_policy"], "auto:10");
  expectPlan(j["auto"], 10.0, 5);
  // The run used the explicit policy of the plan: its per-layer schemes.
  auto used = kv::KvPolicy::parse(j["kv_policy_used"].get<std::string>());
  ASSERT_TRUE(used.ok());
  EXPECT_FALSE(used->autoBits);
  auto layers = used->resolve({"llama", 5});
  ASSERT_TRUE(layers.ok());
  for (size_t l = 0; l < 5; ++l) {
    EXPECT_EQ((*layers)[l].key, j["auto"]["layers"][l]["k"]["scheme"]);
    EXPECT_EQ(j["per_layer"][l]["k_scheme"], j["auto"]["layers"][l]["k"]["scheme"]);
    EXPECT_EQ(j["per_layer"][l]["v_scheme"], j["auto"]["layers"][l]["v"]["scheme"]);
  }
  EXPECT_GT(j["kld_mean"].get<double>(), 0.0);
  auto table = runCli("eval -m " + kModel + " -f " + kStory + " --kv-policy auto:10");
  ASSERT_EQ(table.exitCode, 0) << table.err;
  EXPECT_NE(table.out.find("auto, budget 10 bits per value"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("chose k="), std::string::npos) << table.out;
}

TEST(CliAuto, GenerateAndChatChooseOnceTheConversationIsLongEnough) {
  KVS_REQUIRE_FIXTURE(kModel);
  auto r = runCli("generate -m " + kModel +
                  " -p 'Once upon a time' -n 80 --temp 0 --kv-policy auto:10 --json");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kv_policy"], "auto:10");
  expectPlan(j["auto"], 10.0, 5);

  const auto input = std::filesystem::temp_directory_path() / "kvscope-chat-auto.txt";
  std::ofstream(input) << "Once upon a time\n/exit\n";
  auto chat = runCli("chat -m " + kModel + " --temp 0 -n 80 --kv-policy auto < " + input.string());
  std::filesystem::remove(input);
  ASSERT_EQ(chat.exitCode, 0) << chat.err;
  // auto alone at head_dim 8: the default budget raised to turbo3b's 8 bits.
  EXPECT_NE(chat.err.find("auto, budget 8 bits per value"), std::string::npos) << chat.err;
}

TEST(CliAuto, BenchAndProbeTakeIt) {
  KVS_REQUIRE_FIXTURE(kModel);
  auto bench = runCli("bench -m " + kModel + " --backend cpu --kv auto:10 -d 0 -p 16 -n 4 --json");
  ASSERT_EQ(bench.exitCode, 0) << bench.err;
  const auto rows = nlohmann::json::parse(bench.out);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["kv"], "auto:10");
  EXPECT_NE(rows[0]["kv_label"].get<std::string>().find("auto:10 (k="), std::string::npos);

  auto probe = runCli("probe -m " + kModel + " --ctx 300 --kv-policy auto:10 --json");
  ASSERT_EQ(probe.exitCode, 0) << probe.err;
  const auto j = nlohmann::json::parse(probe.out);
  auto used = kv::KvPolicy::parse(j["kv_policy"].get<std::string>());
  ASSERT_TRUE(used.ok()) << j["kv_policy"];
  EXPECT_FALSE(used->autoBits) << "the probe reports the policy auto chose";
}

TEST(CliAuto, ImpossibleBudgetIsAOneLineError) {
  KVS_REQUIRE_FIXTURE(kModel);
  auto r = runCli("eval -m " + kModel + " -f " + kStory + " --kv-policy auto:2");
  EXPECT_NE(r.exitCode, 0);
  EXPECT_NE(r.err.find("turbo3b"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  auto bad = runCli("generate -m " + kModel + " -p hi --kv-policy auto,k=q8_0");
  EXPECT_NE(bad.exitCode, 0);
  EXPECT_NE(bad.err.find("auto chooses"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace kvscope::test
