// `probe` over a grid of depths and seeds on the recall model (a model that
// copies, so the accuracies differ from run to run): each run of the grid
// equals the same probe run alone in its own process, runs come seed by seed
// in the order given, and the means are the runs' means.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"

namespace kvscope::test {
namespace {

const std::string kRecall = std::string(KVSCOPE_MODELS_DIR) + "/kvscope-recall-4k.gguf";

// indexer_dense_heads=auto measures on each run's own prompt (each run is a
// new conversation), keeps the induction head (2.0) dense, and copies within
// 0.05 of dense attention with every other head of every layer selecting.
TEST(CliProbe, AutoDenseHeadsMeasureOnEachRunsPrompt) {
  const std::string base = "probe -m " + kRecall +
                           " --ctx 4096 --threads 2 --indexer 64 --json --kv-policy "
                           "indexer_dense=0,indexer_dense_heads=auto --depth ";
  auto r = runCli(base + "0.1,0.9");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto grid = nlohmann::json::parse(r.out);
  const auto& runs = grid["runs"];
  ASSERT_EQ(runs.size(), 2u);
  for (const auto& run : runs) {
    const std::string heads = run["auto_heads"].get<std::string>();
    EXPECT_NE(heads.find("measured 64 decode steps at 4000 cached tokens"), std::string::npos)
        << heads;
    EXPECT_NE(heads.find("(2.0"), std::string::npos) << heads;
    EXPECT_GE(run["accuracy"].get<double>(), run["accuracy_dense"].get<double>() - 0.05);
  }
  auto alone = runCli(base + "0.9");
  ASSERT_EQ(alone.exitCode, 0) << alone.err;
  EXPECT_EQ(runs[1], nlohmann::json::parse(alone.out)) << "the second run measured anew";
}

TEST(CliProbe, AGridOfDepthsAndSeedsIsEachRunAloneAndTheirMeans) {
  const std::string base = "probe -m " + kRecall + " --ctx 1024 --threads 2 --indexer 64 --json";
  auto r = runCli(base + " --depth 0.1,0.9 --seed 1,2");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto grid = nlohmann::json::parse(r.out);
  const auto& runs = grid["runs"];
  ASSERT_EQ(runs.size(), 4u);
  double mean = 0.0, meanDense = 0.0;
  size_t i = 0;
  for (int seed : {1, 2}) {
    for (const char* depth : {"0.1", "0.9"}) {
      auto alone = runCli(base + " --depth " + depth + " --seed " + std::to_string(seed));
      ASSERT_EQ(alone.exitCode, 0) << alone.err;
      EXPECT_EQ(runs[i], nlohmann::json::parse(alone.out)) << "seed " << seed << " depth " << depth;
      mean += runs[i]["accuracy"].get<double>() / 4.0;
      meanDense += runs[i]["accuracy_dense"].get<double>() / 4.0;
      ++i;
    }
  }
  EXPECT_GT(meanDense, 0.5) << "the recall model copies";
  EXPECT_DOUBLE_EQ(grid["accuracy"].get<double>(), mean);
  EXPECT_DOUBLE_EQ(grid["accuracy_dense"].get<double>(), meanDense);
  ASSERT_EQ(grid["by_depth"].size(), 2u);
  EXPECT_DOUBLE_EQ(grid["by_depth"][1]["depth"].get<double>(), 0.9);
  EXPECT_DOUBLE_EQ(grid["by_depth"][1]["accuracy"].get<double>(),
                   (runs[1]["accuracy"].get<double>() + runs[3]["accuracy"].get<double>()) / 2.0);
}

}  // namespace
}  // namespace kvscope::test
