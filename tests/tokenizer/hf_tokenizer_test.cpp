// The TinyStories-656K tokenizer.json: SentencePiece-style BPE (Prepend "▁",
// spaces as "▁", merges by rank, no pre-tokenizer) whose byte fallback has no
// <0xXX> tokens, so unknown characters become one fused <unk>. The expected ids
// below were worked out by hand from its vocab and merge list.

#include <gtest/gtest.h>

#include <fstream>

#include "support/test_support.h"
#include "tokenizer/hf_vocab.h"
#include "tokenizer/tokenizer.h"

namespace kvscope::tokenizer {
namespace {

constexpr EncodeOptions kPlain{.addSpecial = false, .parseSpecial = false};

class TinyStoriesTokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto path = test::sharedFile("models/tinystories-656k/tokenizer.json");
    KVS_REQUIRE_FIXTURE(path);
    auto vocab = vocabFromHfTokenizerJson(path);
    ASSERT_TRUE(vocab.ok()) << vocab.error().describe();
    auto tokenizer = Tokenizer::create(std::move(vocab).value());
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().describe();
    m_tokenizer = std::make_unique<Tokenizer>(std::move(tokenizer).value());
  }

  std::unique_ptr<Tokenizer> m_tokenizer;
};

TEST_F(TinyStoriesTokenizer, ReadsTheSpecialTokensAndLayout) {
  const Vocab& vocab = m_tokenizer->vocab();
  EXPECT_EQ(vocab.kind, VocabKind::kBpe);
  EXPECT_FALSE(vocab.byteLevel);
  EXPECT_TRUE(vocab.addSpacePrefix);
  EXPECT_EQ(m_tokenizer->size(), 2048u);
  EXPECT_EQ(vocab.bos, 1);  // <|start_story|>
  EXPECT_EQ(vocab.eos, 2);  // <|end_story|>
  EXPECT_EQ(vocab.unk, 0);
  EXPECT_TRUE(vocab.addBos);
  EXPECT_FALSE(vocab.addEos);
}

TEST_F(TinyStoriesTokenizer, MergesByRank) {
  // "▁a": merge "▁ a" (rank 4) gives token 85.
  EXPECT_EQ(m_tokenizer->encode("a", kPlain), std::vector<TokenId>{85});
  // "▁and▁": "d ▁" (1), "▁ a" (4), "n d▁" (9), "▁a nd▁" (19) -> 100.
  EXPECT_EQ(m_tokenizer->encode("and "), (std::vector<TokenId>{1, 100}));
  // "▁the▁": "e ▁" (0), "t h" (2), "th e▁" (12), then "▁ the▁" -> 108.
  EXPECT_EQ(m_tokenizer->encode("the ", kPlain), std::vector<TokenId>{108});
  // ".\n" is a token of its own (122).
  EXPECT_EQ(m_tokenizer->encode("a.\n", kPlain), (std::vector<TokenId>{85, 122}));
}

TEST_F(TinyStoriesTokenizer, UnknownCharactersFuseIntoOneUnk) {
  EXPECT_EQ(m_tokenizer->encode("\xC3\xA9", kPlain), (std::vector<TokenId>{80, 0}));
  EXPECT_EQ(m_tokenizer->encode("\xC3\xA9\xC3\xA9", kPlain), (std::vector<TokenId>{80, 0}));
}

TEST_F(TinyStoriesTokenizer, SpecialTokensRestartTheSpacePrefix) {
  EXPECT_EQ(m_tokenizer->encode("<|start_story|>a", {.addSpecial = false, .parseSpecial = true}),
            (std::vector<TokenId>{1, 85}));
}

TEST_F(TinyStoriesTokenizer, DecodeInvertsEncode) {
  for (const std::string text :
       {"Once upon a time, there was a little girl named Lily.",
        "She liked to play outside.\nOne day, she saw a big dog!", "  two leading spaces",
        "trailing space ", "\"Can we play?\" asked Tim."}) {
    EXPECT_EQ(m_tokenizer->decode(m_tokenizer->encode(text)), text);
  }
}

std::filesystem::path writeTemp(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / "kvscope_hf_vocab" / name;
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << text;
  return dir / "tokenizer.json";
}

TEST(HfTokenizerJson, ByteLevelBpe) {
  const auto path = writeTemp("byte_level", R"({
    "model": {"type": "BPE", "vocab": {"H": 0, "i": 1, "\u0120": 2, "Hi": 3, "\u0120Hi": 4},
              "merges": ["H i", ["\u0120", "Hi"]]},
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false}
  })");
  auto vocab = vocabFromHfTokenizerJson(path);
  ASSERT_TRUE(vocab.ok()) << vocab.error().describe();
  EXPECT_TRUE(vocab->byteLevel);
  auto tok = Tokenizer::create(std::move(vocab).value());
  ASSERT_TRUE(tok.ok()) << tok.error().describe();
  // Pieces "Hi" and " Hi" ("ĠHi" once byte-level encoded).
  EXPECT_EQ(tok->encode("Hi Hi"), (std::vector<TokenId>{3, 4}));
  EXPECT_EQ(tok->decode(std::vector<TokenId>{3, 4}), "Hi Hi");
}

TEST(HfTokenizerJson, ReportsWhatItCannotUse) {
  EXPECT_EQ(vocabFromHfTokenizerJson("/no/such/tokenizer.json").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(vocabFromHfTokenizerJson(writeTemp("broken", "{ not json")).error().code,
            ErrorCode::kBadFile);
  EXPECT_EQ(vocabFromHfTokenizerJson(
                writeTemp("unigram", R"({"model": {"type": "Unigram", "vocab": []}})"))
                .error()
                .code,
            ErrorCode::kUnsupported);
}

}  // namespace
}  // namespace kvscope::tokenizer
