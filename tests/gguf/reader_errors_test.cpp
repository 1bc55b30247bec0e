// Corrupt, truncated and hostile images: each is refused with kBadFile and a
// message naming what is wrong, before any allocation sized by a bad count.
#include <fstream>
#include <iterator>
#include <limits>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gguf/gguf_bytes.h"
#include "gguf/gguf_file.h"
#include "support/test_support.h"

namespace kvscope::gguf {
namespace {

using test::Bytes;
using ::testing::HasSubstr;

constexpr uint64_t kHuge = uint64_t{1} << 60;

// Parses `bytes` and returns the error message, failing the test if it parses.
std::string refusal(const std::vector<uint8_t>& bytes) {
  auto file = GgufFile::fromBytes(bytes);
  if (file.ok()) {
    ADD_FAILURE() << "image of " << bytes.size() << " bytes was accepted";
    return {};
  }
  EXPECT_EQ(file.error().code, ErrorCode::kBadFile) << file.error().describe();
  return file.error().message;
}

// A file with one key whose value bytes follow the type number.
std::vector<uint8_t> oneKey(std::string_view key, uint32_t type, const Bytes& value) {
  Bytes b = test::header(0, 1);
  b.str(key).u32(type).raw(value.data());
  return b.data();
}

TEST(ReaderErrors, EmptyAndTinyImages) {
  EXPECT_EQ(GgufFile::fromBytes({}).error().code, ErrorCode::kBadFile);
  EXPECT_THAT(refusal({'G', 'G'}), HasSubstr("too short"));
}

TEST(ReaderErrors, BadMagic) {
  Bytes b;
  b.u32(0x4c4d4747).u32(3).u64(0).u64(0);  // "GGML"
  EXPECT_THAT(refusal(b.data()), HasSubstr("not a GGUF file"));
}

TEST(ReaderErrors, Versions) {
  EXPECT_THAT(refusal(test::header(0, 0, 1).data()), HasSubstr("version 1 is obsolete"));
  EXPECT_THAT(refusal(test::header(0, 0, 4).data()), HasSubstr("unsupported GGUF version 4"));
  EXPECT_THAT(refusal(test::header(0, 0, 0).data()), HasSubstr("unsupported GGUF version 0"));
  EXPECT_THAT(refusal(test::header(0, 0, 0x03000000).data()), HasSubstr("big-endian"));
  EXPECT_TRUE(GgufFile::fromBytes(test::header(0, 0, 3).data()).ok());
}

TEST(ReaderErrors, EveryTruncationOfAHeaderIsRefused) {
  Bytes b = test::header(1, 1);
  b.str("general.name").u32(test::kStr).str("tiny");
  test::tensorEntry(b, "w", {32}, 8, 0).padTo(32).zeros(34);
  ASSERT_TRUE(GgufFile::fromBytes(b.data()).ok());
  for (size_t n = 1; n < b.size(); ++n) {
    const std::vector<uint8_t> cut(b.data().begin(), b.data().begin() + static_cast<long>(n));
    auto file = GgufFile::fromBytes(cut);
    ASSERT_FALSE(file.ok()) << "truncated to " << n;
    EXPECT_EQ(file.error().code, ErrorCode::kBadFile);
  }
}

TEST(ReaderErrors, EveryTruncationOfStories260KIsRefused) {
  const auto path = kvscope::test::sharedFile("models/stories260K.gguf");
  KVS_REQUIRE_FIXTURE(path);
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> all{std::istreambuf_iterator<char>(in), {}};
  // Every cut inside the header and tensor table, then a stride through the data.
  for (size_t n = 0; n < all.size(); n += n < 14200 ? 1 : 4099) {
    auto file = GgufFile::fromBytes(std::span(all).first(n));
    ASSERT_FALSE(file.ok()) << "truncated to " << n;
    ASSERT_EQ(file.error().code, ErrorCode::kBadFile);
  }
}

TEST(ReaderErrors, HugeCountsAreRefusedBeforeAllocating) {
  EXPECT_THAT(refusal(test::header(0, kHuge).data()), HasSubstr("metadata entries"));
  EXPECT_THAT(refusal(test::header(kHuge, 0).data()),
              HasSubstr("claims 1152921504606846976 tensors"));
  Bytes arr;
  arr.u32(test::kU8).u64(kHuge);
  EXPECT_THAT(refusal(oneKey("big", test::kArr, arr)),
              HasSubstr("metadata key 'big': an array claims 1152921504606846976 uint8 elements"));
  Bytes strs;
  strs.u32(test::kStr).u64(std::numeric_limits<uint64_t>::max());
  EXPECT_THAT(refusal(oneKey("strs", test::kArr, strs)), HasSubstr("array claims"));
  Bytes str;
  str.u64(std::numeric_limits<uint64_t>::max());
  EXPECT_THAT(refusal(oneKey("s", test::kStr, str)),
              HasSubstr("claims 18446744073709551615 bytes"));
  Bytes key = test::header(0, 1);
  key.u64(kHuge).zeros(16);
  EXPECT_THAT(refusal(key.data()), HasSubstr("metadata entry 0"));
}

TEST(ReaderErrors, TotalMetadataValuesAreCapped) {
  // One byte per value fits the file, but 2^21 + 1 values would cost ~180 MB
  // in memory: refused before the array is sized.
  constexpr uint64_t kCount = (uint64_t{1} << 21) + 1;
  Bytes b = test::header(0, 1);
  b.str("a").u32(test::kArr).u32(test::kU8).u64(kCount).zeros(kCount);
  EXPECT_THAT(refusal(b.data()), HasSubstr("more than 2097152 values"));
}

TEST(ReaderErrors, UnknownValueTypes) {
  EXPECT_THAT(refusal(oneKey("k", 13, Bytes{}.u32(0))),
              HasSubstr("metadata key 'k': unknown value type 13"));
  EXPECT_THAT(refusal(oneKey("k", test::kArr, Bytes{}.u32(99).u64(0))),
              HasSubstr("array element type 99"));
}

Bytes nestedArrays(int depth) {
  Bytes v;
  for (int i = 0; i < depth - 1; ++i) v.u32(test::kArr).u64(1);
  v.u32(test::kI32).u64(1).put<int32_t>(7);
  return v;
}

TEST(ReaderErrors, NestingDepthIsLimited) {
  auto ok = GgufFile::fromBytes(oneKey("n", test::kArr, nestedArrays(8)));
  ASSERT_TRUE(ok.ok()) << ok.error().describe();
  const Value* v = (*ok)->find("n");
  for (int i = 0; i < 7; ++i) v = &v->array.at(0);
  EXPECT_EQ(v->array.at(0).i, 7);
  EXPECT_THAT(refusal(oneKey("n", test::kArr, nestedArrays(9))), HasSubstr("nested more than 8"));
  EXPECT_THAT(refusal(oneKey("n", test::kArr, nestedArrays(100000))), HasSubstr("nested"));
}

TEST(ReaderErrors, DuplicateKeysAndTensors) {
  Bytes keys = test::header(0, 2);
  keys.str("a").u32(test::kU8).u8(1).str("a").u32(test::kU8).u8(2);
  EXPECT_THAT(refusal(keys.data()), HasSubstr("metadata key 'a' appears more than once"));
  Bytes tensors = test::header(2, 0);
  test::tensorEntry(tensors, "w", {8}, 0, 0);
  test::tensorEntry(tensors, "w", {8}, 0, 32);
  tensors.padTo(32).zeros(64);
  EXPECT_THAT(refusal(tensors.data()), HasSubstr("tensor name 'w' appears more than once"));
}

TEST(ReaderErrors, BadAlignmentValues) {
  EXPECT_THAT(refusal(oneKey("general.alignment", test::kU32, Bytes{}.u32(0))),
              HasSubstr("power of two"));
  EXPECT_THAT(refusal(oneKey("general.alignment", test::kU32, Bytes{}.u32(48))),
              HasSubstr("power of two"));
  EXPECT_THAT(refusal(oneKey("general.alignment", test::kStr, Bytes{}.str("32"))),
              HasSubstr("expected uint32"));
}

TEST(ReaderErrors, DimensionCounts) {
  EXPECT_THAT(refusal(test::oneTensorFile("t", {}, 0, 0, 0)),
              HasSubstr("tensor 't': 0 dimensions"));
  EXPECT_THAT(refusal(test::oneTensorFile("t", {1, 1, 1, 1, 1}, 0, 0, 32)),
              HasSubstr("5 dimensions"));
}

TEST(ReaderErrors, ShapeOverflow) {
  EXPECT_THAT(refusal(test::oneTensorFile("t", {uint64_t{1} << 32, uint64_t{1} << 32}, 0, 0, 32)),
              HasSubstr("tensor 't': shape [4294967296, 4294967296] has 2^63 or more elements"));
  EXPECT_THAT(refusal(test::oneTensorFile("t", {std::numeric_limits<uint64_t>::max()}, 0, 0, 32)),
              HasSubstr("2^63"));
  // 2^62 I64 values fit int64 elements but need 2^65 bytes.
  EXPECT_THAT(refusal(test::oneTensorFile("t", {uint64_t{1} << 62}, 27, 0, 32)),
              HasSubstr("2^64 bytes"));
}

TEST(ReaderErrors, UnknownTensorTypeNamesTensorAndNumber) {
  for (uint32_t type : {4u, 5u, 31u, 38u, 40u, 0xffffffffu}) {
    EXPECT_THAT(
        refusal(test::oneTensorFile("blk.0.attn_q.weight", {32}, type, 0, 256)),
        HasSubstr(fmt::format("tensor 'blk.0.attn_q.weight': unknown tensor type {}", type)));
  }
}

TEST(ReaderErrors, RowsMustBeWholeBlocks) {
  EXPECT_THAT(refusal(test::oneTensorFile("q", {16, 2}, 2, 0, 64)),  // Q4_0 has 32-value blocks
              HasSubstr("tensor 'q': rows of 16 values are not whole Q4_0 blocks of 32 values"));
}

TEST(ReaderErrors, MisalignedOffset) {
  EXPECT_THAT(refusal(test::oneTensorFile("t", {4}, 0, 4, 64)),
              HasSubstr("tensor 't': data offset 4 is not a multiple of the alignment 32"));
}

TEST(ReaderErrors, DataPastTheEnd) {
  // 64 F32 values need 256 bytes; only 200 follow the table.
  const auto bytes = test::oneTensorFile("blk.0.attn_q.weight", {64}, 0, 0, 200);
  EXPECT_THAT(
      refusal(bytes),
      HasSubstr(fmt::format("tensor 'blk.0.attn_q.weight': data [offset 0, 256 bytes] extends "
                            "past the end of the file (size {}",
                            bytes.size())));
  // Offsets near 2^64 must not wrap around.
  EXPECT_THAT(
      refusal(test::oneTensorFile("t", {8}, 0, std::numeric_limits<uint64_t>::max() - 31, 64)),
      HasSubstr("extends past the end"));
}

TEST(ReaderErrors, NamesInMessagesAreEscapedAndBounded) {
  const std::string name = std::string("bad\n\x01") + std::string(300, 'x');
  const std::string message = refusal(test::oneTensorFile(name, {8}, 77, 0, 32));
  EXPECT_THAT(message, HasSubstr("tensor 'bad\\x0a\\x01xxx"));
  EXPECT_THAT(message, HasSubstr("... (305 bytes)"));
  EXPECT_LT(message.size(), 250u);
}

}  // namespace
}  // namespace kvscope::gguf
