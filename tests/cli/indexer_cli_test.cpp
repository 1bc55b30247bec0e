// The indexer on the command line, end to end on stories260K: `probe --json` has the
// documented keys and a dense run equal to itself; `eval --indexer` reports the rows it
// read and the mass it captured, with a budget covering the text exactly dense; bench
// times each --indexer setting; mistakes are one-line errors with a non-zero exit code.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

const std::string kModel = sharedFile("models/stories260K.gguf").string();
const std::string kStory = sharedFile("fixtures/story-a.txt").string();

class CliIndexer : public ::testing::Test {
 protected:
  void SetUp() override {
    KVS_REQUIRE_FIXTURE(kModel);
    KVS_REQUIRE_FIXTURE(kStory);
  }
};

TEST_F(CliIndexer, ProbeJsonHasEveryKey) {
  auto r = runCli("probe -m " + kModel + " --ctx 600 --depth 0.25 --span 16 --indexer 64 --json");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"accuracy", "accuracy_dense", "ctx", "depth", "kv_policy", "indexer",
                          "captured_mass", "rows_read", "span", "seed"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["ctx"], 600);
  EXPECT_EQ(j["indexer"], "64:64:4");
  EXPECT_GT(j["captured_mass"].get<double>(), 0.0);
  // Two of the five layers attend every row (indexer_dense's default), three
  // about 132 of ~590.
  EXPECT_GT(j["rows_read"].get<double>(), 0.4);
  EXPECT_LT(j["rows_read"].get<double>(), 0.6);
  // Without an indexer the test run is the dense run.
  r = runCli("probe -m " + kModel + " --ctx 300 --json");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto dense = nlohmann::json::parse(r.out);
  EXPECT_EQ(dense["accuracy"], dense["accuracy_dense"]);
  EXPECT_TRUE(dense["captured_mass"].is_null());
  EXPECT_EQ(dense["indexer"], "off");
}

TEST_F(CliIndexer, EvalReportsRowsReadAndMass) {
  auto r = runCli("eval -m " + kModel + " -f " + kStory + " --indexer 64 --json");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kv_policy"], "k=f16,v=f16,indexer=64");
  EXPECT_GT(j["kld_mean"].get<double>(), 0.0);
  EXPECT_LT(j["rows_read"].get<double>(), 1.0);
  EXPECT_GT(j["captured_mass"].get<double>(), 0.5);
  EXPECT_GT(j["bits_per_value_k"].get<double>(), 16.0) << "the sidecar counts";
  r = runCli("eval -m " + kModel + " -f " + kStory + " --indexer 4096 --json");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kld_mean"].get<double>(), 0.0) << "a budget covering the text is dense";
  EXPECT_EQ(j["rows_read"].get<double>(), 1.0);
}

TEST_F(CliIndexer, BenchTimesEachSetting) {
  auto r = runCli("bench -m " + kModel + " --backend cpu -d 300 -p 0 -n 4 --indexer off,32 --json");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["indexer"], "off");
  EXPECT_EQ(j[1]["indexer"], "32");
  EXPECT_GT(j[1]["decode_tps"].get<double>(), 0.0);
}

TEST_F(CliIndexer, BenchRunsTheIndexerOnVulkan) {
  auto r = runCli("bench -m " + kModel +
                  " --backend vulkan -d 300 -p 0 -n 4 --indexer off,32 --json");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[1]["indexer"], "32");
  EXPECT_GT(j[1]["decode_tps"].get<double>(), 0.0);
}

TEST_F(CliIndexer, MistakesAreOneLineErrors) {
  for (const std::string& args :
       {"eval -m " + kModel + " -f " + kStory + " --indexer abc",
        "probe -m " + kModel + " --kv-policy indexer=64 --indexer 32",
        "probe -m " + kModel + " --ctx 40",
        "generate -m " + kModel + " -p hi --kv-policy sparse_v=2",
        "generate -m " + kModel + " -p hi --backend vulkan --indexer 64 --kv-policy "
        "indexer_scorer=bounds128"}) {
    auto r = runCli(args);
    EXPECT_EQ(r.exitCode, 1) << args << "\n" << r.out << r.err;
    EXPECT_NE(r.err.find("error: "), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(r.err.find("error: "), r.err.rfind("error: ")) << "one error line: " << r.err;
  }
}

}  // namespace
}  // namespace kvscope::test
