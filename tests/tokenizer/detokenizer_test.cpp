#include "tokenizer/detokenizer.h"

#include <gtest/gtest.h>

#include "gguf/gguf_file.h"
#include "handmade_vocab.h"
#include "support/test_support.h"
#include "tokenizer/gguf_vocab.h"

namespace kvscope::tokenizer {
namespace {

using handmade::kByteBase;

const std::string kLlama = "\xF0\x9F\xA6\x99";  // U+1F999, four bytes

Tokenizer handmade() {
  auto tokenizer = Tokenizer::create(handmade::spmVocab());
  EXPECT_TRUE(tokenizer.ok());
  return std::move(tokenizer).value();
}

TEST(IncrementalDecoder, HoldsBytesUntilTheCharacterIsComplete) {
  const Tokenizer tok = handmade();
  IncrementalDecoder decoder(tok, {.stripLeadingSpace = false});
  EXPECT_EQ(decoder.push(handmade::kSpace), " ");
  EXPECT_EQ(decoder.push(kByteBase + 0xF0), "");
  EXPECT_EQ(decoder.push(kByteBase + 0x9F), "");
  EXPECT_EQ(decoder.push(kByteBase + 0xA6), "");
  EXPECT_EQ(decoder.push(kByteBase + 0x99), kLlama);
  EXPECT_EQ(decoder.push(handmade::kHi), "hi");
  EXPECT_EQ(decoder.flush(), "");
}

TEST(IncrementalDecoder, StripsTheSpacePrefixOnlyAtTheStart) {
  const Tokenizer tok = handmade();
  IncrementalDecoder decoder(tok);  // decoding from the start of a text
  EXPECT_EQ(decoder.push(1), "");   // BOS renders as nothing
  EXPECT_EQ(decoder.push(handmade::kSpace), "");
  EXPECT_EQ(decoder.push(handmade::kHi), "hi");
  EXPECT_EQ(decoder.push(handmade::kSpace), " ");
  decoder.reset();
  EXPECT_EQ(decoder.push(handmade::kSpaceH), "h");
}

TEST(IncrementalDecoder, ReplacesBytesThatCanNeverFormACharacter) {
  const Tokenizer tok = handmade();
  IncrementalDecoder decoder(tok, {.stripLeadingSpace = false});
  EXPECT_EQ(decoder.push(kByteBase + 0xFF), "\xEF\xBF\xBD");
  EXPECT_EQ(decoder.push(kByteBase + 0xE2), "");
  EXPECT_EQ(decoder.push(handmade::kHi), "\xEF\xBF\xBDhi");  // the E2 was cut short
  EXPECT_EQ(decoder.push(kByteBase + 0xC3), "");
  EXPECT_EQ(decoder.flush(), "\xEF\xBF\xBD");
}

TEST(IncrementalDecoder, StreamsLlamaSpmByteFallback) {
  const auto path = test::sharedFile("tokenizer/ggml-vocab-llama-spm.gguf");
  KVS_REQUIRE_FIXTURE(path);
  auto file = gguf::GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().describe();
  auto vocab = vocabFromGguf(**file);
  ASSERT_TRUE(vocab.ok());
  auto tok = Tokenizer::create(std::move(vocab).value());
  ASSERT_TRUE(tok.ok());

  const std::string text = " this is " + kLlama + ".cpp";
  const auto ids = tok->encode(text);  // the emoji is 4 byte tokens (243 162 169 156)
  IncrementalDecoder decoder(*tok);
  std::string streamed;
  std::vector<std::string> chunks;
  for (const TokenId id : ids) chunks.push_back(decoder.push(id));
  for (const auto& chunk : chunks) streamed += chunk;
  streamed += decoder.flush();
  EXPECT_EQ(streamed, text);
  EXPECT_NE(std::find(chunks.begin(), chunks.end(), kLlama), chunks.end())
      << "the emoji should arrive whole, with its last byte token";
}

}  // namespace
}  // namespace kvscope::tokenizer
