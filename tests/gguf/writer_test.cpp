// GgufWriter: byte layout against a hand-assembled image, writer -> reader
// round trips of every value type (nested arrays included) and tensor type,
// alignment, versions, atomic files, and refusal of input GGUF cannot hold.
#include <unistd.h>

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "gguf/gguf_bytes.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gguf/quantize.h"
#include "support/test_support.h"

namespace kvscope::gguf {
namespace {

std::unique_ptr<GgufFile> reread(const GgufWriter& w) {
  auto bytes = w.toBytes();
  EXPECT_TRUE(bytes.ok()) << bytes.error().describe();
  if (!bytes.ok()) return nullptr;
  auto file = GgufFile::fromBytes(*bytes);
  EXPECT_TRUE(file.ok()) << file.error().describe();
  return file.ok() ? std::move(*file) : nullptr;
}

TEST(Writer, BytesMatchTheSpec) {
  GgufWriter w;
  w.set("general.architecture", stringValue("llama"));
  w.set("n", uint32Value(7));
  ASSERT_TRUE(w.addTensor("t", {2}, TensorType::kF32, std::vector<uint8_t>(8, 0xab)).ok());
  test::Bytes expected = test::header(1, 2);
  expected.str("general.architecture").u32(test::kStr).str("llama");
  expected.str("n").u32(test::kU32).u32(7);
  test::tensorEntry(expected, "t", {2}, 0, 0).padTo(32);
  expected.raw(std::vector<uint8_t>(8, 0xab)).padTo(32);
  EXPECT_EQ(*w.toBytes(), expected.data());
}

TEST(Writer, EveryScalarTypeRoundTrips) {
  GgufWriter w;
  w.set("u8", uint8Value(255));
  w.set("i8", int8Value(-128));
  w.set("u16", uint16Value(65535));
  w.set("i16", int16Value(-32768));
  w.set("u32", uint32Value(4294967295u));
  w.set("i32", int32Value(std::numeric_limits<int32_t>::min()));
  w.set("u64", uint64Value(std::numeric_limits<uint64_t>::max()));
  w.set("i64", int64Value(std::numeric_limits<int64_t>::min()));
  w.set("f32", float32Value(-0x1.fffffep+127f));
  w.set("f32nan", float32Value(std::numeric_limits<float>::quiet_NaN()));
  w.set("f64", float64Value(0.1));
  w.set("t", boolValue(true));
  w.set("f", boolValue(false));
  w.set("empty", stringValue(""));
  w.set("utf8", stringValue("h\xc3\xa9llo \xe2\x96\x81 \xf0\x9f\x98\x80"));
  w.set("nul", stringValue(std::string("a\0b", 3)));
  const auto f = reread(w);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->metadata().size(), 16u);
  EXPECT_EQ(f->find("u8")->type, ValueType::kUint8);
  EXPECT_EQ(f->getUint("u8"), 255u);
  EXPECT_EQ(f->find("i8")->type, ValueType::kInt8);
  EXPECT_EQ(f->getInt("i8"), -128);
  EXPECT_EQ(f->getUint("u16"), 65535u);
  EXPECT_EQ(f->getInt("i16"), -32768);
  EXPECT_EQ(f->getUint("u32"), 4294967295u);
  EXPECT_EQ(f->getInt("i32"), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(f->getUint("u64"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f->getInt("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f->find("f32")->type, ValueType::kFloat32);
  EXPECT_EQ(f->getFloat("f32"), static_cast<double>(-0x1.fffffep+127f));
  EXPECT_TRUE(std::isnan(*f->getFloat("f32nan")));
  EXPECT_EQ(f->find("f64")->type, ValueType::kFloat64);
  EXPECT_EQ(f->getFloat("f64"), 0.1);
  EXPECT_EQ(f->getBool("t"), true);
  EXPECT_EQ(f->getBool("f"), false);
  EXPECT_EQ(f->getString("empty"), "");
  EXPECT_EQ(f->getString("utf8"), "h\xc3\xa9llo \xe2\x96\x81 \xf0\x9f\x98\x80");
  EXPECT_EQ(f->getString("nul"), std::string_view("a\0b", 3));
}

TEST(Writer, ArraysOfEveryTypeRoundTrip) {
  GgufWriter w;
  const std::vector<std::string> words = {"a", "", "\xe2\x96\x81the"};
  const std::vector<int32_t> ints = {-1, 0, 2147483647};
  const std::vector<float> floats = {0.5f, -0.0f, 1e-30f};
  w.set("words", stringArrayValue(words));
  w.set("ints", int32ArrayValue(ints));
  w.set("floats", float32ArrayValue(floats));
  w.set("empty", arrayValue(ValueType::kUint64, {}));
  w.set("bools", arrayValue(ValueType::kBool, {boolValue(true), boolValue(false)}));
  w.set("u64", arrayValue(ValueType::kUint64, {uint64Value(1), uint64Value(~uint64_t{0})}));
  w.set("i8", arrayValue(ValueType::kInt8, {int8Value(-1), int8Value(127)}));
  w.set("f64", arrayValue(ValueType::kFloat64, {float64Value(1e300)}));
  const auto f = reread(w);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->getStringArray("words"), words);
  EXPECT_EQ(f->getIntArray("ints"), (std::vector<int64_t>{-1, 0, 2147483647}));
  EXPECT_EQ(f->getFloatArray("floats"), floats);
  EXPECT_EQ(f->find("empty")->elementType, ValueType::kUint64);
  EXPECT_TRUE(f->find("empty")->array.empty());
  EXPECT_EQ(f->find("bools")->array.at(0).u, 1u);
  EXPECT_EQ(f->find("bools")->array.at(1).u, 0u);
  EXPECT_EQ(f->find("u64")->array.at(1).u, ~uint64_t{0});
  EXPECT_FALSE(f->getIntArray("u64").has_value());  // 2^64-1 does not fit int64
  EXPECT_EQ(f->getIntArray("i8"), (std::vector<int64_t>{-1, 127}));
  EXPECT_EQ(f->find("f64")->array.at(0).f, 1e300);
}

TEST(Writer, NestedArraysRoundTrip) {
  // [[1, 2], [], [3]] as int32, [["x"], ["y", "z"]] as strings, and three levels deep.
  const Value ints =
      arrayValue(ValueType::kArray, {arrayValue(ValueType::kInt32, {int32Value(1), int32Value(2)}),
                                     arrayValue(ValueType::kInt32, {}),
                                     arrayValue(ValueType::kInt32, {int32Value(3)})});
  const std::vector<std::string> x = {"x"}, yz = {"y", "z"};
  const Value strings = arrayValue(ValueType::kArray, {stringArrayValue(x), stringArrayValue(yz)});
  const Value deep = arrayValue(
      ValueType::kArray,
      {arrayValue(ValueType::kArray, {arrayValue(ValueType::kUint16, {uint16Value(9)})})});
  GgufWriter w;
  w.set("ints", ints);
  w.set("strings", strings);
  w.set("deep", deep);
  const auto f = reread(w);
  ASSERT_TRUE(f);
  const Value& i = *f->find("ints");
  EXPECT_EQ(i.elementType, ValueType::kArray);
  ASSERT_EQ(i.array.size(), 3u);
  EXPECT_EQ(i.array[0].elementType, ValueType::kInt32);
  EXPECT_EQ(i.array[0].array.at(1).i, 2);
  EXPECT_TRUE(i.array[1].array.empty());
  EXPECT_EQ(i.array[2].array.at(0).i, 3);
  EXPECT_EQ(f->find("strings")->array.at(1).array.at(1).s, "z");
  EXPECT_EQ(f->find("deep")->array.at(0).array.at(0).array.at(0).u, 9u);
  EXPECT_FALSE(f->getIntArray("ints").has_value());  // elements are arrays
}

TEST(Writer, TensorsOfEveryTypeRoundTrip) {
  const std::vector<float> values = kvscope::test::randomFloats(512, 5);
  GgufWriter w;
  const TensorType types[] = {
      TensorType::kF32,  TensorType::kF16,  TensorType::kBF16, TensorType::kQ4_0, TensorType::kQ4_1,
      TensorType::kQ5_0, TensorType::kQ5_1, TensorType::kQ8_0, TensorType::kQ2_K, TensorType::kQ3_K,
      TensorType::kQ4_K, TensorType::kQ5_K, TensorType::kQ6_K};
  for (TensorType t : types)
    ASSERT_TRUE(w.addQuantizedTensor(std::string(traits(t).name), {256, 2}, t, values).ok());
  // A type without a quantizer, as raw bytes: 3 x 5 x 2 I32 values.
  ASSERT_TRUE(w.addTensor("ints", {3, 5, 2}, TensorType::kI32, std::vector<uint8_t>(120, 7)).ok());
  const auto f = reread(w);
  ASSERT_TRUE(f);
  ASSERT_EQ(f->tensors().size(), std::size(types) + 1);
  for (TensorType t : types) {
    const TensorInfo* info = f->findTensor(traits(t).name);
    ASSERT_NE(info, nullptr) << traits(t).name;
    EXPECT_EQ(info->type, t);
    EXPECT_EQ(info->shape, (std::vector<uint64_t>{256, 2}));
    EXPECT_EQ(info->offset % 32, 0u);
    const auto expected = quantize(t, values);
    const auto data = f->tensorData(*info);
    ASSERT_EQ(data.size(), expected->size());
    EXPECT_TRUE(std::equal(data.begin(), data.end(), expected->begin())) << traits(t).name;
  }
  EXPECT_EQ(f->findTensor("ints")->shape, (std::vector<uint64_t>{3, 5, 2}));
  EXPECT_EQ(f->tensorData(*f->findTensor("ints"))[119], 7);
}

TEST(Writer, AlignmentAndVersion2) {
  for (uint32_t alignment : {1u, 8u, 64u, 4096u}) {
    GgufWriter w(2);
    w.set("general.alignment", uint32Value(alignment));
    ASSERT_TRUE(w.addTensor("a", {3}, TensorType::kF32, std::vector<uint8_t>(12, 1)).ok());
    ASSERT_TRUE(w.addTensor("b", {5}, TensorType::kI8, std::vector<uint8_t>(5, 2)).ok());
    const auto f = reread(w);
    ASSERT_TRUE(f) << alignment;
    EXPECT_EQ(f->version(), 2u);
    EXPECT_EQ(f->alignment(), alignment);
    EXPECT_EQ(f->dataOffset() % alignment, 0u);
    EXPECT_EQ(f->findTensor("b")->offset % alignment, 0u);
    EXPECT_EQ(f->tensorData(*f->findTensor("b"))[4], 2);
  }
}

TEST(Writer, SetReplacesInPlace) {
  GgufWriter w;
  w.set("a", uint8Value(1));
  w.set("b", uint8Value(2));
  w.set("a", stringValue("again"));
  const auto f = reread(w);
  ASSERT_TRUE(f);
  ASSERT_EQ(f->metadata().size(), 2u);
  EXPECT_EQ(f->metadata()[0].key, "a");
  EXPECT_EQ(f->getString("a"), "again");
}

TEST(Writer, WritesFilesAtomically) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("kvscope-writer-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  GgufWriter w;
  w.set("general.architecture", stringValue("llama"));
  ASSERT_TRUE(
      w.addQuantizedTensor("w", {32, 4}, TensorType::kQ8_0, kvscope::test::randomFloats(128, 3))
          .ok());
  const auto path = dir / "model.gguf";
  ASSERT_TRUE(w.writeFile(path).ok());
  ASSERT_TRUE(w.writeFile(path).ok());  // replacing an existing file
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error().describe();
  EXPECT_EQ((*f)->getString("general.architecture"), "llama");
  EXPECT_EQ((*f)->tensorData(*(*f)->findTensor("w")).size(), 4u * 34u);
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 1u);  // no temporary left behind
  // Under a regular file no folder can be made.
  EXPECT_EQ(w.writeFile(path / "model.gguf").error().code, ErrorCode::kIo);
  std::filesystem::remove_all(dir);
}

// A tensor made while the file is written gives the file the eager one
// gives, made once per write; bytes of the wrong size fail the write, and a
// failing maker's error is the write's, with no file left behind.
TEST(Writer, LazyTensorsAreMadeWhileWriting) {
  const auto values = kvscope::test::randomFloats(256 * 3, 9);
  GgufWriter eager, lazy;
  int made = 0;
  for (GgufWriter* w : {&eager, &lazy}) w->set("general.architecture", stringValue("llama"));
  ASSERT_TRUE(eager.addQuantizedTensor("a", {256, 3}, TensorType::kQ4_K, values).ok());
  ASSERT_TRUE(eager.addTensor("b", {5}, TensorType::kI8, std::vector<uint8_t>(5, 2)).ok());
  ASSERT_TRUE(lazy.addLazyTensor("a", {256, 3}, TensorType::kQ4_K,
                                 [&] {
                                   ++made;
                                   return quantize(TensorType::kQ4_K, values);
                                 })
                  .ok());
  ASSERT_TRUE(lazy.addTensor("b", {5}, TensorType::kI8, std::vector<uint8_t>(5, 2)).ok());
  EXPECT_EQ(made, 0);
  const auto want = eager.toBytes(), got = lazy.toBytes();
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_EQ(*got, *want);
  EXPECT_EQ(made, 1);

  GgufWriter shortOne;
  ASSERT_TRUE(
      shortOne
          .addLazyTensor("a", {32}, TensorType::kQ8_0,
                         [] { return Expected<std::vector<uint8_t>>(std::vector<uint8_t>(33)); })
          .ok());
  const auto refused = shortOne.toBytes();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);

  const auto dir =
      std::filesystem::temp_directory_path() / ("kvscope-lazy-" + std::to_string(::getpid()));
  GgufWriter failing;
  ASSERT_TRUE(failing
                  .addLazyTensor("a", {32}, TensorType::kQ8_0,
                                 [] {
                                   return Expected<std::vector<uint8_t>>(
                                       makeError(ErrorCode::kOutOfMemory, "no room"));
                                 })
                  .ok());
  const Status st = failing.writeFile(dir / "model.gguf");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::kOutOfMemory);
  EXPECT_TRUE(!std::filesystem::exists(dir) || std::filesystem::is_empty(dir));
  std::filesystem::remove_all(dir);
}

TEST(Writer, RefusesWhatGgufCannotHold) {
  auto refused = [](const GgufWriter& w) {
    auto r = w.toBytes();
    EXPECT_FALSE(r.ok());
    return r.ok() ? ErrorCode::kInternal : r.error().code;
  };
  {
    GgufWriter w;
    Value v = uint8Value(0);
    v.u = 300;
    w.set("k", v);
    EXPECT_EQ(refused(w), ErrorCode::kInvalidArgument);
  }
  {
    GgufWriter w;
    w.set("mixed", arrayValue(ValueType::kInt32, {int32Value(1), stringValue("2")}));
    EXPECT_EQ(refused(w), ErrorCode::kInvalidArgument);
  }
  {
    GgufWriter w;
    Value deep = int32Value(1);
    for (int i = 0; i < 10; ++i) deep = arrayValue(deep.type, {deep});
    w.set("deep", deep);
    EXPECT_EQ(refused(w), ErrorCode::kInvalidArgument);
  }
  for (const Value& alignment : {uint32Value(48), uint32Value(0), uint64Value(64)}) {
    GgufWriter w;
    w.set("general.alignment", alignment);
    EXPECT_EQ(refused(w), ErrorCode::kInvalidArgument);
  }
  EXPECT_EQ(refused(GgufWriter(1)), ErrorCode::kInvalidArgument);

  GgufWriter w;
  EXPECT_TRUE(w.addTensor("t", {32}, TensorType::kQ8_0, std::vector<uint8_t>(34)).ok());
  EXPECT_FALSE(
      w.addTensor("t", {32}, TensorType::kQ8_0, std::vector<uint8_t>(34)).ok());  // duplicate
  EXPECT_FALSE(w.addTensor("u", {32}, TensorType::kQ8_0, std::vector<uint8_t>(33)).ok());  // size
  EXPECT_FALSE(
      w.addTensor("v", {16}, TensorType::kQ8_0, std::vector<uint8_t>(17)).ok());  // partial block
  EXPECT_FALSE(w.addTensor("w", {}, TensorType::kF32, {}).ok());
  EXPECT_FALSE(w.addTensor("x", {1, 1, 1, 1, 1}, TensorType::kF32, std::vector<uint8_t>(4)).ok());
  EXPECT_FALSE(w.addTensor("y", {4}, static_cast<TensorType>(4), std::vector<uint8_t>(4)).ok());
  EXPECT_FALSE(w.addQuantizedTensor("z", {32}, TensorType::kQ4_0, std::vector<float>(31)).ok());
}

}  // namespace
}  // namespace kvscope::gguf
