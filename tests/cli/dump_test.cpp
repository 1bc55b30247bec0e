// `kvscope-cli dump` against llama.cpp's own intermediates: the tensors
// llama-eval-callback printed for stories260K and "Once upon a time"
// (tests/data/llamacpp/stories260K.eval-callback.txt, its header says how
// they were recorded) equal kvscope's op outputs of the same names on both
// backends, to the four decimals llama.cpp prints. Where llama.cpp kept only
// the logit row (its last layer runs on the output rows only), the dump's
// last row is compared. Bad names fail with the list of names.
#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

const std::string kModel = sharedFile("models/stories260K.gguf").string();

std::filesystem::path dataDir() {
  return std::filesystem::path(KVSCOPE_TEST_DATA) / "llamacpp";
}

struct Printed {
  std::vector<std::vector<double>> rows;  // first three and last three values of each row
  double sum = 0.0;
};

// The blocks of an eval-callback print, by llama.cpp tensor name.
std::map<std::string, Printed> readEvalCallback(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::map<std::string, Printed> out;
  std::string line, current;
  const std::regex header(R"(common_debug_cb_eval:\s+(\S+) = )");
  const std::regex sum(R"(sum = (\S+))");
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, header)) {
      current = m[1];
    } else if (std::regex_search(line, m, sum) && !current.empty()) {
      out[current].sum = std::stod(m[1]);
    } else if (line.find("...") != std::string::npos && !current.empty()) {
      std::string cleaned;
      for (char c : line) cleaned += (c == '[' || c == ']' || c == ',') ? ' ' : c;
      std::istringstream values(cleaned);
      std::vector<double> row;
      for (std::string v; values >> v;)
        if (v != "...") row.push_back(std::stod(v));
      out[current].rows.push_back(row);
    }
  }
  return out;
}

nlohmann::json dump(const std::string& tensor, const std::string& backend) {
  auto r = runCli("dump -m " + kModel + " -p 'Once upon a time' --json --backend " + backend +
                  " --tensor " + tensor);
  EXPECT_EQ(r.exitCode, 0) << r.err;
  return r.exitCode == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
}

TEST(CliDump, IntermediatesMatchLlamaCppEvalCallback) {
  KVS_REQUIRE_FIXTURE(kModel);
  const auto printed = readEvalCallback(dataDir() / "stories260K.eval-callback.txt");
  ASSERT_EQ(printed.size(), 6u);
  const std::map<std::string, std::string> names = {
      {"attn_norm-0", "blk.0.attn_norm"}, {"ffn_inp-0", "blk.0.ffn_inp"},
      {"l_out-0", "blk.0.l_out"},         {"ffn_inp-4", "blk.4.ffn_inp"},
      {"l_out-4", "blk.4.l_out"},         {"result_norm", "result_norm"}};
  for (const std::string backend : {"cpu", "vulkan"}) {
    for (const auto& [llamaName, ours] : names) {
      SCOPED_TRACE(backend + " " + ours);
      const nlohmann::json j = dump(ours, backend);
      if (j.is_null()) continue;
      const Printed& p = printed.at(llamaName);
      const auto width = j["width"].get<size_t>(), rows = j["rows"].get<size_t>();
      const auto values = j["values"].get<std::vector<double>>();
      ASSERT_EQ(width, 64u);
      // llama.cpp keeps every row up to its last layer, then only the logit row.
      if (ours.starts_with("blk.0.")) {
        ASSERT_EQ(rows, p.rows.size());
      } else {
        ASSERT_GE(rows, p.rows.size());
      }
      const size_t first = rows - p.rows.size();  // llama.cpp's rows are our last ones
      double sum = 0.0;
      for (size_t r = 0; r < p.rows.size(); ++r) {
        const double* row = &values[(first + r) * width];
        ASSERT_EQ(p.rows[r].size(), 6u);
        for (size_t i = 0; i < 6; ++i) {
          const size_t col = i < 3 ? i : width - 6 + i;
          EXPECT_NEAR(row[col], p.rows[r][i], 1.5e-4) << "row " << r << " column " << col;
        }
        for (size_t c = 0; c < width; ++c) sum += row[c];
      }
      EXPECT_NEAR(sum, p.sum, 1e-4 * (1.0 + std::fabs(p.sum)));
    }
  }
}

TEST(CliDump, ListsNamesAndRefusesAnUnknownOne) {
  KVS_REQUIRE_FIXTURE(kModel);
  auto list = runCli("dump -m " + kModel + " -p 'Once' --list");
  ASSERT_EQ(list.exitCode, 0) << list.err;
  EXPECT_EQ(list.out.find("inp_embd\nblk.0.attn_norm\n"), 0u) << list.out;
  EXPECT_NE(list.out.find("\nblk.4.l_out\n"), std::string::npos);
  EXPECT_NE(list.out.find("\nresult_output\n"), std::string::npos);
  auto bad = runCli("dump -m " + kModel + " -p 'Once' --tensor blk.9.l_out");
  EXPECT_EQ(bad.exitCode, 1);
  EXPECT_NE(bad.err.find("error: no tensor is named 'blk.9.l_out'; this model's are: inp_embd, "),
            std::string::npos)
      << bad.err;
  auto neither = runCli("dump -m " + kModel + " -p 'Once'");
  EXPECT_EQ(neither.exitCode, 1);
  EXPECT_NE(neither.err.find("give --tensor NAME or --list"), std::string::npos) << neither.err;
}

}  // namespace
}  // namespace kvscope::test
