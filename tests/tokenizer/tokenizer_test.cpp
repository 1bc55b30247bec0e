#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include "handmade_vocab.h"
#include "tokenizer/pretokenize.h"

namespace kvscope::tokenizer {
namespace {

using handmade::kByteBase;

Tokenizer makeTokenizer(Vocab vocab) {
  auto tokenizer = Tokenizer::create(std::move(vocab));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.error().describe();
  return std::move(tokenizer).value();
}

constexpr EncodeOptions kPlain{.addSpecial = false, .parseSpecial = false};

TEST(SpmTokenizer, MergesHighestScoreFirstAndPrefixesASpace) {
  const Tokenizer tok = makeTokenizer(handmade::spmVocab());
  // "▁hi": "hi" outscores "▁h", so the result is ▁ + hi rather than ▁h + i.
  EXPECT_EQ(tok.encode("hi", kPlain), (std::vector<TokenId>{handmade::kSpace, handmade::kHi}));
  EXPECT_EQ(tok.encode("", kPlain), std::vector<TokenId>{});
}

TEST(SpmTokenizer, FallsBackToByteTokens) {
  const Tokenizer tok = makeTokenizer(handmade::spmVocab());
  EXPECT_EQ(tok.encode("\xC3\xA9", kPlain),  // "é"
            (std::vector<TokenId>{handmade::kSpace, kByteBase + 0xC3, kByteBase + 0xA9}));
  EXPECT_EQ(tok.decode(tok.encode("h\xC3\xA9 hi")), "h\xC3\xA9 hi");
}

TEST(SpmTokenizer, AddsBosAndEosAsTheVocabularyAsks) {
  Vocab vocab = handmade::spmVocab();
  vocab.addEos = true;
  const Tokenizer tok = makeTokenizer(std::move(vocab));
  EXPECT_EQ(tok.encode("hi"), (std::vector<TokenId>{1, handmade::kSpace, handmade::kHi, 2}));
  EXPECT_EQ(tok.decode(tok.encode("hi")), "hi");
  EXPECT_EQ(tok.decode(tok.encode("hi"), {.renderSpecial = true}), "<s> hi</s>");
}

TEST(SpecialTokens, ControlTokensAreMatchedOnlyWhenParsingSpecials) {
  const Tokenizer tok = makeTokenizer(handmade::spmVocab());
  EXPECT_EQ(tok.encode("<|im_start|>hi", {.addSpecial = false, .parseSpecial = true}),
            (std::vector<TokenId>{handmade::kImStart, handmade::kSpace, handmade::kHi}));
  const auto plain = tok.encode("<|im_start|>hi", kPlain);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), handmade::kImStart), 0);
  EXPECT_EQ(tok.decode(plain), "<|im_start|>hi");
}

TEST(SpecialTokens, UserDefinedTokensAreAlwaysMatched) {
  const Tokenizer tok = makeTokenizer(handmade::spmVocab());
  const std::vector<TokenId> expected{handmade::kSpace, handmade::kHi, handmade::kTool,
                                      handmade::kSpace, handmade::kHi};
  EXPECT_EQ(tok.encode("hi<tool>hi", kPlain), expected);
  EXPECT_EQ(tok.decode(expected), "hi<tool> hi");
}

TEST(SpecialTokens, StripFlagsSwallowNeighbouringWhitespace) {
  Vocab vocab = handmade::spmVocab();
  vocab.tokens[handmade::kTool].lstrip = true;
  vocab.tokens[handmade::kTool].rstrip = true;
  const Tokenizer tok = makeTokenizer(std::move(vocab));
  EXPECT_EQ(tok.encode("hi \n<tool>\t hi", kPlain), tok.encode("hi<tool>hi", kPlain));
}

TEST(Tokenizer, RejectsBrokenVocabularies) {
  Vocab duplicate = handmade::spmVocab();
  duplicate.tokens[handmade::kI].text = "h";
  EXPECT_FALSE(Tokenizer::create(std::move(duplicate)).ok());

  Vocab badId = handmade::spmVocab();
  badId.bos = 100000;
  EXPECT_FALSE(Tokenizer::create(std::move(badId)).ok());

  Vocab badPre = handmade::spmVocab();
  badPre.kind = VocabKind::kBpe;
  badPre.preTokenizer = "no-such-pre-tokenizer";
  const auto result = Tokenizer::create(std::move(badPre));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code, ErrorCode::kUnsupported);
}

TEST(Tokenizer, RecognisesEndOfGenerationTokensByName) {
  Vocab vocab = handmade::spmVocab();
  vocab.tokens.push_back({"<|im_end|>", 0.0f, TokenType::kUserDefined});
  const auto imEnd = static_cast<TokenId>(vocab.tokens.size() - 1);
  const Tokenizer tok = makeTokenizer(std::move(vocab));
  EXPECT_TRUE(tok.isEndOfGeneration(2));
  EXPECT_TRUE(tok.isEndOfGeneration(imEnd));
  EXPECT_FALSE(tok.isEndOfGeneration(handmade::kHi));
  // llama.cpp treats such tokens as control tokens whatever the file says.
  EXPECT_EQ(tok.type(imEnd), TokenType::kControl);
}

std::vector<std::string> split(std::string_view pre, std::string_view text) {
  auto tokenizer = PreTokenizer::named(pre);
  EXPECT_TRUE(tokenizer.ok());
  return tokenizer->split(text);
}

TEST(PreTokenizer, Gpt2KeepsTheLastSpaceWithTheNextWord) {
  EXPECT_EQ(split("gpt-2", "Hello world  ! it's"),
            (std::vector<std::string>{"Hello", " world", " ", " !", " it", "'s"}));
}

TEST(PreTokenizer, Llama3GroupsDigitsByThreeAndNewlines) {
  EXPECT_EQ(split("llama3", "I'm 12345 ok\n\n"),
            (std::vector<std::string>{"I", "'m", " ", "123", "45", " ok", "\n\n"}));
}

TEST(PreTokenizer, NonAsciiWhitespaceActsAsPlainWhitespace) {
  // U+3000 lies inside deepseek-llm's punctuation and CJK ranges, but llama.cpp
  // only ever treats whitespace as whitespace.
  const std::string ideographicSpace = "\xE3\x80\x80";
  EXPECT_EQ(split("deepseek-llm", "!" + ideographicSpace + "!"),
            (std::vector<std::string>{"!", ideographicSpace + "!"}));
  EXPECT_EQ(split("deepseek-llm", ideographicSpace + "!" + ideographicSpace + "!"),
            (std::vector<std::string>{ideographicSpace + "!", ideographicSpace + "!"}));
}

}  // namespace
}  // namespace kvscope::tokenizer
