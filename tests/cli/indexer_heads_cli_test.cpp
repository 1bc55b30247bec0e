// `indexer-heads` on the recall model and its card's text: the heads it
// lists are those whose captured mass is below --below, and its policy item
// names them in the policy syntax (parsed back here through KvPolicy); a
// request it cannot measure is one clear line and exit code 1.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "kv/kv_policy.h"

namespace kvscope::test {
namespace {

const std::string kRecall = std::string(KVSCOPE_MODELS_DIR) + "/kvscope-recall-4k.gguf";
const std::string kText = std::string(KVSCOPE_MODELS_DIR) + "/../texts/stories-4k.txt";

TEST(CliIndexerHeads, ListsTheHeadsBelowTheCutAsAPolicyItem) {
  const std::string base = "indexer-heads -m " + kRecall + " -f " + kText +
                           " -c 4096 --threads 2 --indexer 64 --steps 32 --json";
  for (const char* below : {"0.5", "0.9", "0", "1"}) {
    auto r = runCli(base + " --below " + below);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["indexer"], "64:64:4");
    EXPECT_EQ(j["steps"], 32);
    const double cut = std::stod(below);
    std::vector<kv::KvHeadRef> want;
    ASSERT_EQ(j["per_layer"].size(), 4u);
    for (const auto& layer : j["per_layer"]) {
      const auto& mass = layer["captured_mass"];
      ASSERT_EQ(mass.size(), 2u);
      for (uint32_t h = 0; h < 2; ++h) {
        EXPECT_GE(mass[h].get<double>(), 0.0);
        EXPECT_LE(mass[h].get<double>(), 1.0 + 1e-9);
        if (mass[h].get<double>() < cut) want.push_back({layer["layer"].get<uint32_t>(), h});
      }
    }
    auto policy = kv::KvPolicy::parse("indexer=64," + j["policy_item"].get<std::string>());
    ASSERT_TRUE(policy.ok()) << j["policy_item"];
    EXPECT_EQ(policy->attention.denseHeads, want) << "below " << below;
    EXPECT_EQ(j["dense_heads"].size(), want.size());
    if (cut == 0.0) {
      EXPECT_EQ(j["policy_item"], "indexer_dense_heads=none");
    }
  }
}

TEST(CliIndexerHeads, RefusesWhatItCannotMeasure) {
  const std::string base = "indexer-heads -m " + kRecall + " -f " + kText + " --threads 2";
  const struct {
    std::string args, message;
  } cases[] = {
      {" -c 4096", "needs --indexer TOP_K"},
      {" -c 4096 --indexer 8192", "reads every row: nothing to measure"},
      {" -c 512 --indexer 64", "more than the context of 512"},
      {" -c 4096 --indexer 64 --kv-policy auto", "not auto"},
      // What it measures is what a chat session's auto measures for itself.
      {" -c 4096 --indexer 64 --kv-policy indexer_dense_heads=auto",
       "measured on a conversation's prompt"},
  };
  for (const auto& c : cases) {
    auto r = runCli(base + c.args);
    EXPECT_EQ(r.exitCode, 1) << c.args;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << ": " << r.err;
  }
}

}  // namespace
}  // namespace kvscope::test
