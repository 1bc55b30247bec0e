// A Hugging Face model folder whose tokenizer.json pre-tokenizes with a Split
// regex (Llama 3, Qwen 3) loads through ModelFile + loadTokenizer, the path
// the CLI and the app take, and tokenizes llama.cpp's test vectors for that
// vocabulary exactly (support/vocab_cases.h) — and so does the GGUF that
// ggufFromModel (`kvscope-cli convert`) makes of it, which also names the
// pre-tokenizer for llama.cpp.

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/gguf_export.h"
#include "model/model_file.h"
#include "model/model_tokenizer.h"
#include "support/hf_model_folder.h"
#include "support/test_support.h"
#include "support/vocab_cases.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/hf_vocab.h"
#include "tokenizer/tokenizer.h"

namespace kvscope::test {
namespace {

struct Family {
  const char* name;     // tokenizer/hf-<name>
  const char* vectors;  // tokenizer/ggml-vocab-<vectors>.gguf.inp/.out
  uint32_t vocabSize;
};

// Every case tokenizes to its ids with the tokenizer of the model at `path`.
void expectEveryCase(const std::filesystem::path& path, const std::vector<VocabCase>& cases) {
  auto model = model::ModelFile::open(path);
  ASSERT_TRUE(model.ok()) << model.error().describe();
  auto tokenizer = model::loadTokenizer(**model);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().describe();
  for (const VocabCase& c : cases) {
    EXPECT_EQ(tokenizer->encode(c.text, {.addSpecial = false, .parseSpecial = false}), c.expected)
        << path << ", input: '" << c.text << "'";
  }
}

// Writes the GGUF that `kvscope-cli convert` makes of the folder `dir`.
void convertFolder(const std::filesystem::path& dir, const std::filesystem::path& gguf) {
  auto model = model::ModelFile::open(dir);
  ASSERT_TRUE(model.ok()) << model.error().describe();
  auto tokenizer = model::loadTokenizer(**model);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().describe();
  auto writer = model::ggufFromModel(**model, tokenizer->vocab(), {});
  ASSERT_TRUE(writer.ok()) << writer.error().describe();
  ASSERT_TRUE(writer->writeFile(gguf).ok());
}

class HfFolderTokenizer : public ::testing::TestWithParam<Family> {};

TEST_P(HfFolderTokenizer, TokenizesEveryTestStringExactly) {
  const Family& family = GetParam();
  const auto tokenizerDir = sharedFile(std::string("tokenizer/hf-") + family.name);
  KVS_REQUIRE_FIXTURE(tokenizerDir);
  const auto dir = std::filesystem::path(::testing::TempDir()) / "kvscope_hf_folder" / family.name;
  writeHfLlamaFolder(dir, family.vocabSize, tokenizerDir);

  const auto cases =
      readVocabCases(sharedFile(std::string("tokenizer/ggml-vocab-") + family.vectors + ".gguf"));
  ASSERT_EQ(cases.size(), 46u);
  expectEveryCase(dir, cases);

  const auto gguf = dir / "converted.gguf";
  convertFolder(dir, gguf);
  auto file = gguf::GgufFile::open(gguf);
  ASSERT_TRUE(file.ok()) << file.error().describe();
  EXPECT_EQ((*file)->getString("tokenizer.ggml.pre").value_or(""), family.vectors);
  expectEveryCase(gguf, cases);
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Families, HfFolderTokenizer,
                         ::testing::Values(Family{"llama3", "llama-bpe", 128256},
                                           Family{"qwen3", "qwen2", 151936}),
                         [](const auto& param) { return std::string(param.param.name); });

// Gemma 3's tokenizer.json (byte-fallback BPE over "\u2581" after a Replace
// normalizer; also Gemma 4's vocabulary) and gpt-oss's (o200k-style
// byte-level BPE behind a Split regex) tokenize as Tokenizers.js does, the
// tokenizer code of transformers.js (tools/record-hf-tokenizations.mjs
// recorded tests/data/tokenizer/hf-*.out): llama.cpp's test strings, then
// tests/data/tokenizer/extra-strings.inp (code, CJK, Arabic, emoji, a rare
// ideograph that needs byte fallback, runs of spaces, tabs and newlines) —
// from the folder and from the GGUF that convert makes of it.
// The strings of llama.cpp's SPM test file and extra-strings.inp, in order,
// with the ids Tokenizers.js gave them for tokenizer/hf-<family>.
std::vector<VocabCase> tokenizersJsCases(const std::string& family) {
  const std::filesystem::path data = KVSCOPE_TEST_DATA;
  std::vector<std::string> texts =
      readVocabTexts(sharedFile("tokenizer/ggml-vocab-llama-spm.gguf.inp"));
  const auto extra = readVocabTexts(data / "tokenizer" / "extra-strings.inp");
  texts.insert(texts.end(), extra.begin(), extra.end());
  return pairWithIds(texts, data / "tokenizer" / ("hf-" + family + ".out"));
}

class HfFolderTokenizerJs : public ::testing::TestWithParam<Family> {};

TEST_P(HfFolderTokenizerJs, TokenizesAsTokenizersJs) {
  const Family& family = GetParam();
  const auto tokenizerDir = sharedFile(std::string("tokenizer/hf-") + family.name);
  KVS_REQUIRE_FIXTURE(tokenizerDir);
  const std::vector<VocabCase> cases = tokenizersJsCases(family.name);
  ASSERT_EQ(cases.size(), 54u);
  const auto dir =
      std::filesystem::path(::testing::TempDir()) / "kvscope_hf_folder_js" / family.name;
  writeHfLlamaFolder(dir, family.vocabSize, tokenizerDir);
  expectEveryCase(dir, cases);
  convertFolder(dir, dir / "converted.gguf");
  expectEveryCase(dir / "converted.gguf", cases);
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Families, HfFolderTokenizerJs,
                         ::testing::Values(Family{"gemma3", "", 262145},
                                           Family{"gptoss", "", 200019}),
                         [](const auto& param) { return std::string(param.param.name); });

// A Gemma 4 GGUF as llama.cpp's converter writes its tokenizer (model
// "gemma4": tokens, scores, types and merges, no pre-tokenizer name, no
// space prefix) tokenizes the same strings as Tokenizers.js did Gemma 3's
// tokenizer.json, whose vocabulary Gemma 4 shares.
TEST(Gemma4GgufTokenizer, TokenizesAsTokenizersJs) {
  const auto tokenizerDir = sharedFile("tokenizer/hf-gemma3");
  KVS_REQUIRE_FIXTURE(tokenizerDir);
  const std::vector<VocabCase> cases = tokenizersJsCases("gemma3");
  auto hf = tokenizer::vocabFromHfTokenizerJson(tokenizerDir / "tokenizer.json");
  ASSERT_TRUE(hf.ok()) << hf.error().describe();
  std::vector<std::string> texts2;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (const tokenizer::TokenData& t : hf->tokens) {
    texts2.push_back(t.text);
    scores.push_back(t.score);
    types.push_back(static_cast<int32_t>(t.type));
  }
  gguf::GgufWriter w;
  w.set("tokenizer.ggml.model", gguf::stringValue("gemma4"));
  w.set("tokenizer.ggml.tokens", gguf::stringArrayValue(texts2));
  w.set("tokenizer.ggml.scores", gguf::float32ArrayValue(scores));
  w.set("tokenizer.ggml.token_type", gguf::int32ArrayValue(types));
  w.set("tokenizer.ggml.merges", gguf::stringArrayValue(hf->merges));
  w.set("tokenizer.ggml.bos_token_id", gguf::uint32Value(2));
  w.set("tokenizer.ggml.eos_token_id", gguf::uint32Value(1));
  w.set("tokenizer.ggml.add_space_prefix", gguf::boolValue(false));
  w.set("tokenizer.ggml.add_bos_token", gguf::boolValue(true));
  auto bytes = w.toBytes();
  ASSERT_TRUE(bytes.ok());
  auto file = gguf::GgufFile::fromBytes(*bytes);
  ASSERT_TRUE(file.ok()) << file.error().describe();
  auto vocab = tokenizer::vocabFromGguf(**file);
  ASSERT_TRUE(vocab.ok()) << vocab.error().describe();
  auto tok = tokenizer::Tokenizer::create(std::move(vocab).value());
  ASSERT_TRUE(tok.ok()) << tok.error().describe();
  ASSERT_EQ(cases.size(), 54u);
  for (const VocabCase& c : cases) {
    EXPECT_EQ(tok->encode(c.text, {.addSpecial = false, .parseSpecial = false}), c.expected)
        << "input: '" << c.text << "'";
  }
}

// The folder's chat template (tokenizer_config.json) renders, through
// ChatTemplate, what Python's jinja2 renders (tools/render-chat-templates.py),
// before and after convert; a chat_template.jinja beside it wins over the
// config's, as in transformers.
TEST(HfFolderChatTemplate, RendersAsJinja2DirectlyAndAfterConvert) {
  const auto tokenizerDir = sharedFile("tokenizer/hf-qwen3");
  KVS_REQUIRE_FIXTURE(tokenizerDir);
  const auto dir = std::filesystem::path(::testing::TempDir()) / "kvscope_hf_template";
  writeHfLlamaFolder(dir, 151936, tokenizerDir);
  const std::filesystem::path data = KVSCOPE_TEST_DATA;
  std::ifstream in(data / "chat_templates" / "expected" / "hf-qwen3.json");
  const auto expected = nlohmann::json::parse(in);
  const std::vector<tokenizer::ChatMessage> messages = {
      {"system", "You are a helpful assistant."},
      {"user", "  Hi there  "},
      {"assistant", "Hello! How can I help?"},
      {"user",
       "Write \"quotes\", 'apostrophes', {braces} and \u00fcn\u00efc\u00f6d\u00e9 \u2713."}};
  tokenizer::ChatOptions options;  // bos/eos "<s>"/"</s>" as in conversations.json
  const auto render = [&](const std::filesystem::path& path) {
    auto model = model::ModelFile::open(path);
    EXPECT_TRUE(model.ok());
    auto tok = model::loadTokenizer(**model);
    EXPECT_TRUE(tok.ok());
    return tokenizer::ChatTemplate(tok->vocab().chatTemplate)
        .render(messages, options)
        .value()
        .text;
  };
  EXPECT_EQ(render(dir), expected["multi_turn.gen"]["text"]);
  {
    auto model = model::ModelFile::open(dir);
    auto tok = model::loadTokenizer(**model);
    auto writer = model::ggufFromModel(**model, tok->vocab(), {});
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(writer->writeFile(dir / "converted.gguf").ok());
  }
  EXPECT_EQ(render(dir / "converted.gguf"), expected["multi_turn.gen"]["text"]);

  std::ofstream(dir / "chat_template.jinja") << "{% for m in messages %}[{{ m.role }}]{% endfor %}";
  EXPECT_EQ(render(dir), "[system][user][assistant][user]");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kvscope::test

namespace kvscope::test {
namespace {

// A pipeline llama.cpp has no name for reaches the GGUF only through
// kvscope's key; tokenization must not change on the way.
TEST(HfPipelineInGguf, ACustomPipelineSurvivesTheRoundTrip) {
  const auto json = sharedFile("tokenizer/hf-qwen3/tokenizer.json");
  KVS_REQUIRE_FIXTURE(json);
  auto vocab = tokenizer::vocabFromHfTokenizerJson(json);
  ASSERT_TRUE(vocab.ok()) << vocab.error().describe();
  auto& steps = vocab->pipeline->preTokenizer;
  steps.insert(
      steps.begin(),
      {.pattern = "-", .literal = true, .behavior = tokenizer::SplitBehavior::kMergedWithNext});
  vocab->pipeline->normalizer.push_back({.pattern = "x", .content = "y"});
  vocab->preTokenizer = std::string(tokenizer::kCustomPreTokenizer);
  auto before = tokenizer::Tokenizer::create(*vocab);
  ASSERT_TRUE(before.ok()) << before.error().describe();

  gguf::GgufWriter writer;
  ASSERT_TRUE(model::setVocabMetadata(writer, *vocab).ok());
  auto bytes = writer.toBytes();
  ASSERT_TRUE(bytes.ok());
  auto file = gguf::GgufFile::fromBytes(*bytes);
  ASSERT_TRUE(file.ok()) << file.error().describe();
  EXPECT_EQ((*file)->getString("tokenizer.ggml.pre").value_or(""), tokenizer::kCustomPreTokenizer);
  auto back = tokenizer::vocabFromGguf(**file);
  ASSERT_TRUE(back.ok()) << back.error().describe();
  EXPECT_EQ(back->pipeline, vocab->pipeline);
  auto after = tokenizer::Tokenizer::create(std::move(back).value());
  ASSERT_TRUE(after.ok()) << after.error().describe();
  for (const char* text : {"one-two--three", "x-ray 12345", "ex\xC3\xA9-x"}) {
    EXPECT_EQ(after->encode(text), before->encode(text)) << text;
  }
}

}  // namespace
}  // namespace kvscope::test
