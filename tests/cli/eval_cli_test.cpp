// `kvscope-cli eval` end to end on stories260K: the JSON has the documented
// keys, an f16 policy scores exactly zero divergence, a lossy one does not,
// and user mistakes are one-line errors with a non-zero exit code.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

const std::string kModel = sharedFile("models/stories260K.gguf").string();
const std::string kStory = sharedFile("fixtures/story-a.txt").string();

class CliEval : public ::testing::Test {
 protected:
  void SetUp() override {
    KVS_REQUIRE_FIXTURE(kModel);
    KVS_REQUIRE_FIXTURE(kStory);
  }
  // A temporary text file holding `text`, removed with the test.
  std::string textFile(const std::string& text) {
    m_temp = std::filesystem::temp_directory_path() /
             ("kvscope-eval-" + std::to_string(::getpid()) + ".txt");
    std::ofstream(m_temp) << text;
    return m_temp.string();
  }
  void TearDown() override {
    if (!m_temp.empty()) std::filesystem::remove(m_temp);
  }
  std::filesystem::path m_temp;
};

TEST_F(CliEval, JsonHasEveryKeyAndF16IsExact) {
  auto r = runCli("eval -m " + kModel + " -f " + kStory + " --json");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"model", "backend", "kv_policy", "tokens", "prefill", "steps", "kld_mean",
                          "kld_median", "kld_p99", "kld_p999", "top1", "ppl", "ppl_f16",
                          "bits_per_value_k", "bits_per_value_v", "per_layer"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["backend"], "cpu");
  EXPECT_EQ(j["kv_policy"], "k=f16,v=f16");
  EXPECT_EQ(j["prefill"], 16);
  EXPECT_EQ(j["steps"].get<int>(), j["tokens"].get<int>() - 16);
  EXPECT_EQ(j["kld_mean"].get<double>(), 0.0);
  EXPECT_EQ(j["kld_p99"].get<double>(), 0.0);
  EXPECT_EQ(j["top1"].get<double>(), 1.0);
  EXPECT_EQ(j["ppl"].get<double>(), j["ppl_f16"].get<double>());
  EXPECT_EQ(j["bits_per_value_k"].get<double>(), 16.0);
  ASSERT_EQ(j["per_layer"].size(), 5u);
  for (const auto& l : j["per_layer"]) {
    for (const char* key :
         {"layer", "k_scheme", "v_scheme", "k_bits_per_value", "v_bits_per_value",
          "k_rel_rms_error", "v_rel_rms_error", "k_run_rel_rms_error", "v_run_rel_rms_error"}) {
      EXPECT_TRUE(l.contains(key)) << key;
    }
    EXPECT_EQ(l["k_rel_rms_error"].get<double>(), 0.0);
  }
}

TEST_F(CliEval, LossySchemeDivergesAndTableIsPrinted) {
  auto j = runCli("eval -m " + kModel + " -f " + kStory + " --ctk q4_0 --ctv q8_0 --json");
  ASSERT_EQ(j.exitCode, 0) << j.err;
  const auto out = nlohmann::json::parse(j.out);
  EXPECT_EQ(out["kv_policy"], "k=q4_0,v=q8_0");
  EXPECT_GT(out["kld_mean"].get<double>(), 0.0);
  EXPECT_EQ(out["per_layer"][0]["k_scheme"], "q4_0");
  EXPECT_EQ(out["per_layer"][0]["v_scheme"], "q8_0");
  EXPECT_GT(out["per_layer"][0]["k_rel_rms_error"].get<double>(),
            out["per_layer"][0]["v_rel_rms_error"].get<double>())
      << "4-bit K is coarser than 8-bit V";

  auto table = runCli("eval -m " + kModel + " -f " + kStory + " --kv-policy k=q4_0,v=q8_0");
  ASSERT_EQ(table.exitCode, 0) << table.err;
  EXPECT_NE(table.out.find("top-1"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("| layer |"), std::string::npos) << table.out;
}

// indexer_dense_heads=auto measures on eval's prefill, as a chat session on
// a prompt: on the recall model's running text it keeps the induction head
// (2.0) dense; a prefill too short to measure on leaves every layer reading
// every row, exactly dense attention.
TEST_F(CliEval, AutoDenseHeadsMeasureOnALongEnoughPrefill) {
  const std::string models = KVSCOPE_MODELS_DIR;
  const std::string text = models + "/../texts/stories-4k.txt";
  const std::string base = "eval -m " + models +
                           "/kvscope-recall-4k.gguf -c 4096 --threads 2 --indexer 64 --json "
                           "--kv-policy indexer_dense=0,indexer_dense_heads=auto";
  auto r = runCli(base + " -f " + text + " --prefill 3840");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto measured = nlohmann::json::parse(r.out);
  const std::string heads = measured.value("auto_heads", "");
  EXPECT_NE(heads.find("measured 64 decode steps at 3776 cached tokens: 1 of 8 KV heads"),
            std::string::npos)
      << heads;
  EXPECT_NE(heads.find("(2.0)"), std::string::npos) << heads;
  EXPECT_LT(measured["rows_read"].get<double>(), 0.5);

  std::ifstream in(text);
  std::string start(1500, '\0');
  in.read(start.data(), static_cast<std::streamsize>(start.size()));
  auto shortPrefill = runCli(base + " -f " + textFile(start) + " --prefill 300");
  ASSERT_EQ(shortPrefill.exitCode, 0) << shortPrefill.err;
  const auto dense = nlohmann::json::parse(shortPrefill.out);
  EXPECT_FALSE(dense.contains("auto_heads"));
  EXPECT_EQ(dense["rows_read"].get<double>(), 1.0);
  EXPECT_EQ(dense["kld_mean"].get<double>(), 0.0);
}

TEST_F(CliEval, UserErrorsAreOneLineAndNonZero) {
  auto missing = runCli("eval -m " + kModel + " -f /nonexistent/story.txt");
  EXPECT_EQ(missing.exitCode, 1);
  EXPECT_NE(missing.err.find("error: '/nonexistent/story.txt' does not exist"), std::string::npos)
      << missing.err;

  auto empty = runCli("eval -m " + kModel + " -f " + textFile(""));
  EXPECT_EQ(empty.exitCode, 1);
  EXPECT_NE(empty.err.find("is empty"), std::string::npos) << empty.err;

  auto shortText = runCli("eval -m " + kModel + " -f " + textFile("Once upon a time"));
  EXPECT_EQ(shortText.exitCode, 1);
  EXPECT_NE(shortText.err.find("eval needs at least 18"), std::string::npos) << shortText.err;

  auto scheme = runCli("eval -m " + kModel + " -f " + kStory + " --ctk nosuch");
  EXPECT_EQ(scheme.exitCode, 1);
  EXPECT_NE(scheme.err.find("nosuch"), std::string::npos) << scheme.err;

  auto both = runCli("eval -m " + kModel + " -f " + kStory + " --ctk q8_0 --kv-policy k=f16");
  EXPECT_NE(both.exitCode, 0);
  EXPECT_EQ(both.out, "");

  auto model = runCli("eval -m /nonexistent/model.gguf -f " + kStory);
  EXPECT_EQ(model.exitCode, 1);
  EXPECT_NE(model.err.find("error:"), std::string::npos) << model.err;
}

}  // namespace
}  // namespace kvscope::test
