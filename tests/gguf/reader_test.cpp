// GgufFile on real files: the known facts of stories260K.gguf (FIXTURES.md and
// raw bytes read at known offsets), the llama.cpp vocabulary fixtures, and
// hand-assembled v2/v3 images.
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

#include "gguf/gguf_bytes.h"
#include "gguf/gguf_file.h"
#include "support/test_support.h"

namespace kvscope::gguf {
namespace {

using test::Bytes;

std::filesystem::path storiesPath() {
  return kvscope::test::sharedFile("models/stories260K.gguf");
}

std::vector<uint8_t> readAll(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(Reader, Stories260KMetadata) {
  KVS_REQUIRE_FIXTURE(storiesPath());
  auto file = GgufFile::open(storiesPath());
  ASSERT_TRUE(file.ok()) << file.error().describe();
  const GgufFile& f = **file;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.metadata().size(), 19u);
  EXPECT_EQ(f.getString("general.architecture"), "llama");
  EXPECT_EQ(f.getString("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f.getUint("llama.embedding_length"), 64u);
  EXPECT_EQ(f.getUint("llama.feed_forward_length"), 172u);
  EXPECT_EQ(f.getUint("llama.block_count"), 5u);
  EXPECT_EQ(f.getUint("llama.attention.head_count"), 8u);
  EXPECT_EQ(f.getUint("llama.attention.head_count_kv"), 4u);
  EXPECT_EQ(f.getUint("llama.rope.dimension_count"), 8u);
  EXPECT_EQ(f.getUint("llama.context_length"), 2048u);
  EXPECT_EQ(f.getUint("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(f.getUint("tokenizer.ggml.eos_token_id"), 2u);
  EXPECT_EQ(f.getUint("tokenizer.ggml.padding_token_id"), 0xffffffffu);
  EXPECT_EQ(f.getFloat("llama.attention.layer_norm_rms_epsilon"), static_cast<double>(1e-5f));
  EXPECT_FALSE(f.getString("llama.block_count").has_value());  // wrong type
  EXPECT_EQ(f.find("no.such.key"), nullptr);

  const auto tokens = f.getStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.has_value());
  ASSERT_EQ(tokens->size(), 512u);
  EXPECT_EQ((*tokens)[0], "<unk>");
  EXPECT_EQ((*tokens)[1], "<s>");
  EXPECT_EQ((*tokens)[2], "</s>");
  EXPECT_EQ((*tokens)[3], "<0x00>");
  EXPECT_EQ(f.getFloatArray("tokenizer.ggml.scores")->size(), 512u);
  const auto types = f.getIntArray("tokenizer.ggml.token_type");
  ASSERT_TRUE(types.has_value());
  EXPECT_EQ((*types)[0], 2);  // unknown
  EXPECT_EQ((*types)[1], 3);  // control
  EXPECT_EQ((*types)[3], 6);  // byte
}

TEST(Reader, Stories260KTensors) {
  KVS_REQUIRE_FIXTURE(storiesPath());
  auto file = GgufFile::open(storiesPath());
  ASSERT_TRUE(file.ok()) << file.error().describe();
  const GgufFile& f = **file;
  ASSERT_EQ(f.tensors().size(), 3u + 5u * 9u);  // embd, norm, output + 9 per layer
  EXPECT_EQ(f.dataOffset(), 14176u);            // tensor table ends at 14152, aligned up to 32
  uint64_t totalBytes = 0;
  for (const TensorInfo& t : f.tensors()) {
    EXPECT_EQ(t.type, TensorType::kF32) << t.name;
    EXPECT_EQ(t.bytes, t.elements() * 4) << t.name;
    EXPECT_EQ(f.tensorData(t).size(), t.bytes) << t.name;
    totalBytes += t.bytes;
  }
  EXPECT_EQ(f.dataOffset() + totalBytes, f.fileSize());  // packed, no gaps: 1185376 bytes

  const TensorInfo* embd = f.findTensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->shape, (std::vector<uint64_t>{64, 512}));
  EXPECT_EQ(embd->offset, 0u);
  const TensorInfo* down = f.findTensor("blk.0.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->shape, (std::vector<uint64_t>{172, 64}));
  EXPECT_EQ(f.findTensor("blk.4.attn_k.weight")->shape, (std::vector<uint64_t>{64, 32}));
  EXPECT_EQ(f.findTensor("blk.5.attn_k.weight"), nullptr);

  // Raw floats at known positions of the data section (read with Python from the fixture).
  float v[4];
  std::memcpy(v, f.tensorData(*embd).data(), sizeof v);
  EXPECT_EQ(v[0], -0x1.2dd2ap-2f);
  EXPECT_EQ(v[1], 0x1.1fb0c8p-1f);
  EXPECT_EQ(v[3], 0x1.5cbf54p-2f);
  std::memcpy(v, f.tensorData(*f.findTensor("output_norm.weight")).data(), sizeof v);
  EXPECT_EQ(v[0], 0x1.3aa9dep+1f);
  const TensorInfo* last = f.findTensor("blk.4.ffn_norm.weight");
  std::memcpy(v, f.tensorData(*last).data() + 63 * 4, 4);
  EXPECT_EQ(v[0], 0x1.3bf88ap+0f);
}

TEST(Reader, FromBytesMatchesOpen) {
  KVS_REQUIRE_FIXTURE(storiesPath());
  const std::vector<uint8_t> bytes = readAll(storiesPath());
  auto mapped = GgufFile::open(storiesPath());
  auto copied = GgufFile::fromBytes(bytes);
  ASSERT_TRUE(mapped.ok() && copied.ok());
  ASSERT_EQ((*mapped)->tensors().size(), (*copied)->tensors().size());
  for (size_t i = 0; i < (*mapped)->tensors().size(); ++i) {
    const TensorInfo& a = (*mapped)->tensors()[i];
    const TensorInfo& b = (*copied)->tensors()[i];
    EXPECT_EQ(a.name, b.name);
    const auto da = (*mapped)->tensorData(a);
    const auto db = (*copied)->tensorData(b);
    ASSERT_EQ(da.size(), db.size());
    EXPECT_EQ(std::memcmp(da.data(), db.data(), da.size()), 0) << a.name;
  }
}

TEST(Reader, OpensEveryVocabularyFixture) {
  const auto dir = kvscope::test::sharedFile("tokenizer");
  KVS_REQUIRE_FIXTURE(dir);
  int opened = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".gguf") continue;
    auto file = GgufFile::open(entry.path());
    ASSERT_TRUE(file.ok()) << file.error().describe();
    const auto tokens = (*file)->getStringArray("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens.has_value()) << entry.path();
    EXPECT_GT(tokens->size(), 100u) << entry.path();
    EXPECT_TRUE((*file)->getString("tokenizer.ggml.model").has_value()) << entry.path();
    ++opened;
  }
  EXPECT_GE(opened, 9);
}

TEST(Reader, MissingFileIsNotFound) {
  auto file = GgufFile::open("/nonexistent/dir/model.gguf");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.error().code, ErrorCode::kNotFound);
  EXPECT_NE(file.error().message.find("/nonexistent/dir/model.gguf"), std::string::npos);
}

TEST(Reader, DirectoryIsRefused) {
  auto file = GgufFile::open(std::filesystem::temp_directory_path());
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.error().code, ErrorCode::kIo);
}

TEST(Reader, EmptyFileIsBadFile) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("kvscope-empty-" + std::to_string(::getpid()) + ".gguf");
  std::ofstream(path).close();
  auto file = GgufFile::open(path);
  std::filesystem::remove(path);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.error().code, ErrorCode::kBadFile);
}

// A v2 file with one key of each scalar kind the getters convert between.
std::vector<uint8_t> getterImage(uint32_t version) {
  Bytes b = test::header(0, 8, version);
  b.str("u8").u32(test::kU8).u8(200);
  b.str("i8").u32(test::kI8).put<int8_t>(-5);
  b.str("u64big").u32(test::kU64).u64(0x8000000000000000ull);
  b.str("i32").u32(test::kI32).put<int32_t>(-70000);
  b.str("f64").u32(test::kF64).put<double>(0.1);
  b.str("yes").u32(test::kBool).u8(1);
  b.str("s").u32(test::kStr).str("text");
  b.str("mixed")
      .u32(test::kArr)
      .u32(test::kU16)
      .u64(3)
      .put<uint16_t>(1)
      .put<uint16_t>(2)
      .put<uint16_t>(65535);
  return b.data();
}

TEST(Reader, Version2AndTypedGetters) {
  auto file = GgufFile::fromBytes(getterImage(2));
  ASSERT_TRUE(file.ok()) << file.error().describe();
  const GgufFile& f = **file;
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.getUint("u8"), 200u);
  EXPECT_EQ(f.getInt("u8"), 200);
  EXPECT_EQ(f.getFloat("u8"), 200.0);
  EXPECT_EQ(f.getInt("i8"), -5);
  EXPECT_FALSE(f.getUint("i8").has_value());  // negative does not fit
  EXPECT_EQ(f.getUint("u64big"), 0x8000000000000000ull);
  EXPECT_FALSE(f.getInt("u64big").has_value());  // above INT64_MAX
  EXPECT_EQ(f.getInt("i32"), -70000);
  EXPECT_EQ(f.getFloat("f64"), 0.1);
  EXPECT_FALSE(f.getUint("f64").has_value());
  EXPECT_EQ(f.getBool("yes"), true);
  EXPECT_FALSE(f.getUint("yes").has_value());  // bool is not an integer
  EXPECT_EQ(f.getString("s"), "text");
  EXPECT_FALSE(f.getBool("s").has_value());
  EXPECT_EQ(f.getIntArray("mixed"), (std::vector<int64_t>{1, 2, 65535}));
  EXPECT_EQ(f.getFloatArray("mixed"), (std::vector<float>{1, 2, 65535}));
  EXPECT_FALSE(f.getStringArray("mixed").has_value());
  EXPECT_FALSE(f.getIntArray("s").has_value());
  EXPECT_TRUE(f.tensors().empty());
}

TEST(Reader, HonorsGeneralAlignment) {
  Bytes b = test::header(2, 1);
  b.str("general.alignment").u32(test::kU32).u32(64);
  test::tensorEntry(b, "a", {3}, 0, 0);    // 12 bytes, padded to 64
  test::tensorEntry(b, "b", {16}, 1, 64);  // 32 bytes of F16
  b.padTo(64).zeros(64 + 32);
  auto file = GgufFile::fromBytes(b.data());
  ASSERT_TRUE(file.ok()) << file.error().describe();
  EXPECT_EQ((*file)->alignment(), 64u);
  EXPECT_EQ((*file)->dataOffset() % 64, 0u);
  EXPECT_EQ((*file)->findTensor("b")->bytes, 32u);
  EXPECT_EQ((*file)->tensorData(*(*file)->findTensor("b")).size(), 32u);
}

TEST(Reader, TensorDataOfForeignInfoIsEmpty) {
  auto file = GgufFile::fromBytes(test::oneTensorFile("t", {8}, 0, 0, 32));
  ASSERT_TRUE(file.ok()) << file.error().describe();
  TensorInfo foreign = (*file)->tensors()[0];
  foreign.offset = 1u << 30;
  EXPECT_TRUE((*file)->tensorData(foreign).empty());
}

}  // namespace
}  // namespace kvscope::gguf
