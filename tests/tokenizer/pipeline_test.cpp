// tokenizer.json normalizers and pre-tokenizers (hf_pipeline.h, normalize.h,
// pretokenize.h). The expected pieces are worked out by hand from Hugging
// Face's documented semantics, e.g. its SplitDelimiterBehavior example
// "the-final--countdown" split at "-".

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tokenizer/hf_pipeline.h"
#include "tokenizer/normalize.h"
#include "tokenizer/pretokenize.h"

namespace kvscope::tokenizer {
namespace {

using Json = nlohmann::json;
using Pieces = std::vector<std::string>;

Pieces preTokenize(const Json& preTokenizer, std::string_view text, bool atTextStart = true) {
  auto pipeline = pipelineFromHfJson({{"pre_tokenizer", preTokenizer}});
  EXPECT_TRUE(pipeline.ok()) << pipeline.error().describe();
  if (!pipeline.ok()) return {};
  auto pre = PreTokenizer::create(pipeline->preTokenizer);
  EXPECT_TRUE(pre.ok()) << pre.error().describe();
  return pre.ok() ? pre->split(text, atTextStart) : Pieces{};
}

std::string normalize(const Json& normalizer, std::string_view text) {
  auto pipeline = pipelineFromHfJson({{"normalizer", normalizer}});
  EXPECT_TRUE(pipeline.ok()) << pipeline.error().describe();
  if (!pipeline.ok()) return {};
  auto norm = Normalizer::create(pipeline->normalizer);
  EXPECT_TRUE(norm.ok()) << norm.error().describe();
  return norm.ok() ? norm->apply(text) : std::string();
}

Json split(const Json& pattern, const char* behavior, bool invert = false) {
  return {{"type", "Split"}, {"pattern", pattern}, {"behavior", behavior}, {"invert", invert}};
}

const Json kDash = {{"String", "-"}};
constexpr std::string_view kCountdown = "the-final--countdown";

TEST(SplitPreTokenizer, EachBehaviourGroupsTheDelimitersItsWay) {
  EXPECT_EQ(preTokenize(split(kDash, "Removed"), kCountdown),
            (Pieces{"the", "final", "countdown"}));
  EXPECT_EQ(preTokenize(split(kDash, "Isolated"), kCountdown),
            (Pieces{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(preTokenize(split(kDash, "Contiguous"), kCountdown),
            (Pieces{"the", "-", "final", "--", "countdown"}));
  // A delimiter joins its neighbour only when that neighbour is not one itself.
  EXPECT_EQ(preTokenize(split(kDash, "MergedWithPrevious"), kCountdown),
            (Pieces{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(preTokenize(split(kDash, "MergedWithNext"), kCountdown),
            (Pieces{"the", "-final", "-", "-countdown"}));
  // Delimiters at either end have no neighbour on that side.
  EXPECT_EQ(preTokenize(split(kDash, "MergedWithPrevious"), "-a-"), (Pieces{"-", "a-"}));
  EXPECT_EQ(preTokenize(split(kDash, "MergedWithNext"), "-a-"), (Pieces{"-a", "-"}));
}

TEST(SplitPreTokenizer, InvertMakesTheTextBetweenMatchesTheDelimiters) {
  const Json words = {{"Regex", R"(\w+)"}};
  // The gaps "-" and "--" are the delimiters now, each one piece.
  EXPECT_EQ(preTokenize(split(words, "Removed", true), kCountdown),
            (Pieces{"the", "final", "countdown"}));
  EXPECT_EQ(preTokenize(split(words, "MergedWithPrevious", true), kCountdown),
            (Pieces{"the-", "final--", "countdown"}));
  EXPECT_EQ(preTokenize(split(words, "MergedWithNext", true), kCountdown),
            (Pieces{"the", "-final", "--countdown"}));
  EXPECT_EQ(preTokenize(split(words, "Removed", false), kCountdown), (Pieces{"-", "--"}));
}

TEST(SplitPreTokenizer, StringPatternsAreLiteral) {
  EXPECT_EQ(preTokenize(split({{"String", ".*"}}, "Isolated"), "x.*y.z"),
            (Pieces{"x", ".*", "y.z"}));
  // The same text as a regex matches everything.
  EXPECT_EQ(preTokenize(split({{"Regex", ".*"}}, "Removed"), "x.*y.z"), Pieces{});
}

TEST(SplitPreTokenizer, ARegexSeesOnlyItsPiece) {
  // The second split's `$` matches at the end of each piece the first one left.
  const Json sequence = {
      {"type", "Sequence"},
      {"pretokenizers",
       {split({{"String", " "}}, "Removed"), split({{"Regex", "a$"}}, "Isolated")}}};
  EXPECT_EQ(preTokenize(sequence, "banana bandana"), (Pieces{"banan", "a", "bandan", "a"}));
}

TEST(PreTokenizers, DigitsPunctuationAndWhitespace) {
  EXPECT_EQ(preTokenize({{"type", "Digits"}, {"individual_digits", true}}, "a123b"),
            (Pieces{"a", "1", "2", "3", "b"}));
  EXPECT_EQ(preTokenize({{"type", "Digits"}, {"individual_digits", false}}, "a123b"),
            (Pieces{"a", "123", "b"}));
  EXPECT_EQ(preTokenize({{"type", "Punctuation"}}, "Hi, you!!"),
            (Pieces{"Hi", ",", " you", "!", "!"}));
  EXPECT_EQ(preTokenize({{"type", "Whitespace"}}, "Hello, world!  ok"),
            (Pieces{"Hello", ",", "world", "!", "ok"}));
  EXPECT_EQ(preTokenize({{"type", "WhitespaceSplit"}}, "a  b\tc "), (Pieces{"a", "b", "c"}));
}

TEST(PreTokenizers, ByteLevelAddsThePrefixSpaceThenSplitsLikeGpt2) {
  const Json byteLevel = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  EXPECT_EQ(preTokenize(byteLevel, "Hello world's  end"),
            (Pieces{" Hello", " world", "'s", " ", " end"}));
  EXPECT_EQ(preTokenize(byteLevel, " x"), (Pieces{" x"}));
  const Json noRegex = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  EXPECT_EQ(preTokenize(noRegex, "Hello world"), (Pieces{"Hello world"}));
}

TEST(PreTokenizers, MetaspaceReplacesSpacesAndPrependsPerScheme) {
  const std::string m = "\xE2\x96\x81";
  const Json first = {
      {"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", "first"}, {"split", true}};
  EXPECT_EQ(preTokenize(first, "Hi there", true), (Pieces{m + "Hi", m + "there"}));
  EXPECT_EQ(preTokenize(first, "Hi there", false), (Pieces{"Hi", m + "there"}));
  // No second "▁" before a leading space.
  EXPECT_EQ(preTokenize(first, " Hi", true), (Pieces{m + "Hi"}));
  Json whole = first;
  whole["split"] = false;
  whole["prepend_scheme"] = "always";
  EXPECT_EQ(preTokenize(whole, "Hi there", false), (Pieces{m + "Hi" + m + "there"}));
}

TEST(Normalizers, ReplacePrependAndUnicodeForms) {
  const std::string eAcute = "\xC3\xA9";       // U+00E9
  const std::string eCombining = "e\xCC\x81";  // e + U+0301
  EXPECT_EQ(normalize({{"type", "NFC"}}, "caf" + eCombining), "caf" + eAcute);
  EXPECT_EQ(normalize({{"type", "NFD"}}, "caf" + eAcute), "caf" + eCombining);
  EXPECT_EQ(normalize({{"type", "NFKC"}}, "\xEF\xAC\x81"), "fi");  // U+FB01 ligature
  const Json sequence = {
      {"type", "Sequence"},
      {"normalizers",
       {{{"type", "Replace"}, {"pattern", {{"Regex", R"(\s+)"}}}, {"content", " "}},
        {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "_"}},
        {{"type", "Prepend"}, {"prepend", ">"}}}}};
  EXPECT_EQ(normalize(sequence, "a \t b\n"), ">a_b_");
  EXPECT_EQ(normalize(sequence, ""), "") << "Prepend leaves empty text empty";
}

TEST(HfPipeline, WrittenFormReadsBackTheSame) {
  const Json file = {
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "NFKC"}},
          {{"type", "Replace"}, {"pattern", {{"Regex", "x+"}}}, {"content", "y"}},
          {{"type", "Prepend"}, {"prepend", "p"}}}}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {split({{"String", "-"}}, "MergedWithNext", true),
          {{"type", "Digits"}, {"individual_digits", true}},
          {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", false}}}}}}};
  auto pipeline = pipelineFromHfJson(file);
  ASSERT_TRUE(pipeline.ok()) << pipeline.error().describe();
  ASSERT_EQ(pipeline->normalizer.size(), 3u);
  ASSERT_EQ(pipeline->preTokenizer.size(), 3u);
  auto back = pipelineFromHfJson(pipelineToHfJson(*pipeline));
  ASSERT_TRUE(back.ok()) << back.error().describe();
  EXPECT_EQ(*back, *pipeline);
  const Json metaspace = {{"pre_tokenizer",
                           {{"type", "Metaspace"},
                            {"replacement", "\xE2\x96\x81"},
                            {"prepend_scheme", "never"},
                            {"split", false}}}};
  auto meta = pipelineFromHfJson(metaspace);
  ASSERT_TRUE(meta.ok()) << meta.error().describe();
  EXPECT_EQ(*pipelineFromHfJson(pipelineToHfJson(*meta)), *meta);
}

TEST(HfPipeline, NamesWhatItDoesNotSupport) {
  const auto fails = [](const Json& file, const std::string& name) {
    auto pipeline = pipelineFromHfJson(file);
    ASSERT_FALSE(pipeline.ok()) << file.dump();
    EXPECT_EQ(pipeline.error().code, ErrorCode::kUnsupported) << file.dump();
    EXPECT_NE(pipeline.error().message.find(name), std::string::npos) << pipeline.error().message;
  };
  fails({{"pre_tokenizer", {{"type", "BertPreTokenizer"}}}}, "BertPreTokenizer");
  fails({{"normalizer", {{"type", "Lowercase"}}}}, "Lowercase");
  fails({{"pre_tokenizer", split(kDash, "Sideways")}}, "Sideways");
  fails({{"pre_tokenizer",
          {{"type", "Metaspace"}, {"replacement", "_"}, {"prepend_scheme", "always"}}}},
        "Metaspace");
  fails({{"pre_tokenizer",
          {{"type", "Sequence"},
           {"pretokenizers", {{{"type", "ByteLevel"}}, split(kDash, "Isolated")}}}}},
        "after ByteLevel");
  auto pipeline =
      pipelineFromHfJson({{"pre_tokenizer", split({{"Regex", "(unclosed"}}, "Isolated")}});
  ASSERT_TRUE(pipeline.ok());
  auto pre = PreTokenizer::create(pipeline->preTokenizer);
  ASSERT_FALSE(pre.ok());
  EXPECT_EQ(pre.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(pre.error().message.find("(unclosed"), std::string::npos) << pre.error().message;
}

}  // namespace
}  // namespace kvscope::tokenizer
