// llama.cpp's tokenizer conformance suite (tests/test-tokenizer-0): every
// string of ggml-vocab-<name>.gguf.inp must tokenize to the ids on the same
// line of the .out file (support/vocab_cases.h), from the vocabulary GGUF, and
// for Llama 3 and Qwen 2/3 from the models' own tokenizer.json, whose Split
// pre-tokenizer kvscope runs as written.

#include <filesystem>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "support/test_support.h"
#include "support/vocab_cases.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/hf_vocab.h"
#include "tokenizer/tokenizer.h"

namespace kvscope::tokenizer {
namespace {

void expectEveryCase(const Tokenizer& tokenizer, const std::filesystem::path& stem) {
  const std::vector<test::VocabCase> cases = test::readVocabCases(stem);
  ASSERT_GE(cases.size(), 40u);
  for (const test::VocabCase& c : cases) {
    const auto ids = tokenizer.encode(c.text, {.addSpecial = false, .parseSpecial = false});
    EXPECT_EQ(ids, c.expected) << "input: '" << c.text << "'";
    EXPECT_EQ(tokenizer.decode(ids), c.text) << "round trip of '" << c.text << "'";
  }
}

std::string testName(const ::testing::TestParamInfo<std::string>& param) {
  std::string name = param.param;
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
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
  expectEveryCase(*tokenizer, path);
}

INSTANTIATE_TEST_SUITE_P(GgmlVocab, VocabConformance,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "starcoder",
                                           "deepseek-coder", "deepseek-llm", "falcon", "mpt",
                                           "refact"),
                         testName);

// tokenizer/hf-<family>/tokenizer.json against ggml-vocab-<vectors>.gguf.inp/.out.
class HfTokenizerConformance
    : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(HfTokenizerConformance, EveryStringMatchesLlamaCpp) {
  const auto& [family, vectors] = GetParam();
  const auto json = test::sharedFile("tokenizer/hf-" + family + "/tokenizer.json");
  KVS_REQUIRE_FIXTURE(json);
  auto vocab = vocabFromHfTokenizerJson(json);
  ASSERT_TRUE(vocab.ok()) << vocab.error().describe();
  EXPECT_EQ(vocab->preTokenizer, vectors) << "the llama.cpp name of this pipeline";
  auto tokenizer = Tokenizer::create(std::move(vocab).value());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().describe();
  expectEveryCase(*tokenizer, test::sharedFile("tokenizer/ggml-vocab-" + vectors + ".gguf"));
}

INSTANTIATE_TEST_SUITE_P(TokenizerJson, HfTokenizerConformance,
                         ::testing::Values(std::pair{"llama3", "llama-bpe"},
                                           std::pair{"qwen3", "qwen2"}),
                         [](const auto& param) { return param.param.first; });

}  // namespace
}  // namespace kvscope::tokenizer
