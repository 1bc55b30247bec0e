// llama.cpp's tokenizer conformance suite (tests/test-tokenizer-0): every
// string of ggml-vocab-<name>.gguf.inp must tokenize to the ids on the same
// line of the .out file. As in test-tokenizer-0, strings are tokenized with
// add_special = false and parse_special = false, and the .inp file is cut at
// each "\n__ggml_vocab_test__\n", so a string keeps its own inner newlines.

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "support/test_support.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"

namespace kvscope::tokenizer {
namespace {

struct Case {
  std::string text;
  std::vector<TokenId> expected;
};

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::vector<Case> readCases(const std::filesystem::path& vocab) {
  const std::string inp = readFile(vocab.string() + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t next = inp.find(sep, pos);
    if (next == std::string::npos) {
      texts.push_back(inp.substr(pos));
      break;
    }
    texts.push_back(inp.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::istringstream out(readFile(vocab.string() + ".out"));
  std::vector<Case> cases;
  std::string line;
  for (size_t i = 0; i < texts.size() && std::getline(out, line); ++i) {
    Case c{texts[i], {}};
    std::istringstream ids(line);
    for (TokenId id = 0; ids >> id;) c.expected.push_back(id);
    cases.push_back(std::move(c));
  }
  EXPECT_EQ(cases.size(), texts.size()) << ".inp and .out disagree on the number of strings";
  return cases;
}

class VocabConformance : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabConformance, EveryStringMatchesLlamaCpp) {
  const auto path = test::sharedFile("tokenizer/ggml-vocab-" + GetParam() + ".gguf");
  KVS_REQUIRE_FIXTURE(path);
  auto file = gguf::GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().describe();
  auto vocab = vocabFromGguf(**file);
  ASSERT_TRUE(vocab.ok()) << vocab.error().describe();
  auto tokenizer = Tokenizer::create(std::move(vocab).value());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().describe();

  const std::vector<Case> cases = readCases(path);
  ASSERT_GE(cases.size(), 40u);
  for (const Case& c : cases) {
    const auto ids = tokenizer->encode(c.text, {.addSpecial = false, .parseSpecial = false});
    EXPECT_EQ(ids, c.expected) << "input: '" << c.text << "'";
    EXPECT_EQ(tokenizer->decode(ids), c.text) << "round trip of '" << c.text << "'";
  }
}

INSTANTIATE_TEST_SUITE_P(GgmlVocab, VocabConformance,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "starcoder",
                                           "deepseek-coder", "deepseek-llm", "falcon", "mpt",
                                           "refact"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string name = param.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace kvscope::tokenizer
