// Mutation fuzzing of the reader. Seeded variants of two images, stories260K.gguf
// and a small writer-made image holding every value type (nested arrays too)
// and every tensor type, are parsed with GgufFile::fromBytes. A variant that
// parses has every metadata value visited, every getter called and every
// tensor's bytes read and dequantized; one that does not must be refused with
// kBadFile. Nothing may crash: run it under ASan/UBSan (-DKVSCOPE_SANITIZE=ON).
//
// KVSCOPE_FUZZ_ITERATIONS sets the number of variants (default 20000) and
// KVSCOPE_FUZZ_SEED the run's seed (default 1); variant i depends only on
// (seed, i), so any finding replays.
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "gguf/dequant.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "support/test_support.h"

namespace kvscope::gguf {
namespace {

uint64_t envOr(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

// Where a count, length, type number, dimension, offset or scalar value lives.
struct Field {
  size_t at;
  size_t width;
};

// Walks a valid image (the seeds only) and lists its structural fields.
class FieldWalker {
 public:
  explicit FieldWalker(const std::vector<uint8_t>& b) : m_b(b) {}

  std::vector<Field> walk() {
    add(4, 4);  // version
    const uint64_t tensors = u64(8);
    add(8, 8);
    const uint64_t kvs = u64(16);
    add(16, 8);
    m_pos = 24;
    for (uint64_t i = 0; i < kvs; ++i) {
      string();
      const uint32_t type = u32(m_pos);
      add(m_pos, 4);
      m_pos += 4;
      value(type);
    }
    for (uint64_t i = 0; i < tensors; ++i) {
      string();
      const uint32_t dims = u32(m_pos);
      add(m_pos, 4);
      m_pos += 4;
      for (uint32_t d = 0; d < dims + 2; ++d) {  // dims, then type (4 bytes) and offset
        const size_t width = d == dims ? 4 : 8;
        add(m_pos, width);
        m_pos += width;
      }
    }
    return m_fields;
  }

  size_t end() const { return m_pos; }

 private:
  uint64_t u64(size_t at) const {
    uint64_t v;
    std::memcpy(&v, m_b.data() + at, 8);
    return v;
  }
  uint32_t u32(size_t at) const {
    uint32_t v;
    std::memcpy(&v, m_b.data() + at, 4);
    return v;
  }
  void add(size_t at, size_t width) { m_fields.push_back({at, width}); }
  void string() {
    add(m_pos, 8);
    m_pos += 8 + u64(m_pos);
  }
  void value(uint32_t type) {
    static constexpr size_t kScalarBytes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type == 8) return string();
    if (type == 9) {
      const uint32_t element = u32(m_pos);
      add(m_pos, 4);
      const uint64_t count = u64(m_pos + 4);
      add(m_pos + 4, 8);
      m_pos += 12;
      for (uint64_t i = 0; i < count; ++i) value(element);
      return;
    }
    add(m_pos, kScalarBytes[type]);
    m_pos += kScalarBytes[type];
  }

  const std::vector<uint8_t>& m_b;
  std::vector<Field> m_fields;
  size_t m_pos = 0;
};

struct Seed {
  std::vector<uint8_t> bytes;
  std::vector<Field> fields;
  size_t headEnd;  // end of the tensor table: the bytes the parser interprets
};

Seed makeSeed(std::vector<uint8_t> bytes) {
  FieldWalker walker(bytes);
  std::vector<Field> fields = walker.walk();
  const size_t end = walker.end();
  return {std::move(bytes), std::move(fields), end};
}

std::vector<uint8_t> kitchenSinkImage() {
  GgufWriter w;
  w.set("general.architecture", stringValue("llama"));
  w.set("general.alignment", uint32Value(64));
  w.set("u8", uint8Value(1));
  w.set("i16", int16Value(-2));
  w.set("u64", uint64Value(3));
  w.set("i64", int64Value(-4));
  w.set("f64", float64Value(0.5));
  w.set("b", boolValue(true));
  const std::vector<std::string> words = {"<s>", "</s>", "\xe2\x96\x81hi"};
  w.set("words", stringArrayValue(words));
  w.set("scores", float32ArrayValue(std::vector<float>{0.f, -1.f, -2.f}));
  w.set("nested", arrayValue(ValueType::kArray,
                             {stringArrayValue(words), arrayValue(ValueType::kString, {})}));
  w.set(
      "deep",
      arrayValue(ValueType::kArray,
                 {arrayValue(ValueType::kArray, {arrayValue(ValueType::kInt8, {int8Value(5)})})}));
  const auto values = kvscope::test::randomFloats(512, 11);
  for (TensorType t :
       {TensorType::kF32, TensorType::kF16, TensorType::kBF16, TensorType::kQ4_0, TensorType::kQ4_1,
        TensorType::kQ5_0, TensorType::kQ5_1, TensorType::kQ8_0, TensorType::kQ2_K,
        TensorType::kQ3_K, TensorType::kQ4_K, TensorType::kQ5_K, TensorType::kQ6_K}) {
    EXPECT_TRUE(w.addQuantizedTensor(std::string(traits(t).name), {256, 2}, t, values).ok());
  }
  EXPECT_TRUE(w.addTensor("q8k", {256}, TensorType::kQ8_K, std::vector<uint8_t>(292, 3)).ok());
  EXPECT_TRUE(w.addTensor("i32", {2, 3, 4, 5}, TensorType::kI32, std::vector<uint8_t>(480)).ok());
  return *w.toBytes();
}

uint64_t extremeValue(std::mt19937_64& rng, uint64_t old, uint64_t fileSize) {
  const uint64_t choices[] = {0,
                              1,
                              2,
                              3,
                              4,
                              5,
                              9,
                              12,
                              13,
                              31,
                              32,
                              255,
                              256,
                              0x7fffffff,
                              0x80000000,
                              0xffffffff,
                              1ull << 32,
                              1ull << 62,
                              1ull << 63,
                              (1ull << 63) - 1,
                              ~0ull,
                              fileSize,
                              fileSize - 1,
                              fileSize + 1,
                              old + 1,
                              old - 1,
                              old * 2,
                              rng()};
  return choices[rng() % std::size(choices)];
}

void mutate(std::vector<uint8_t>& b, const Seed& seed, std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % std::max<size_t>(n, 1)); };
  const size_t head = std::min(seed.headEnd + 64, b.size());
  switch (rng() % 8) {
    case 0:
    case 1: {  // a structural field set to an extreme value
      const Field f = seed.fields[pick(seed.fields.size())];
      if (f.at + f.width > b.size()) return;
      uint64_t old = 0;
      std::memcpy(&old, b.data() + f.at, f.width);
      const uint64_t v = extremeValue(rng, old, b.size());
      std::memcpy(b.data() + f.at, &v, f.width);
      return;
    }
    case 2:  // a bit flip where the parser looks
      b[pick(head)] ^= static_cast<uint8_t>(1u << (rng() % 8));
      return;
    case 3: {  // a few random bytes where the parser looks
      const size_t at = pick(head);
      for (size_t i = at; i < std::min(at + 1 + pick(8), b.size()); ++i)
        b[i] = static_cast<uint8_t>(rng());
      return;
    }
    case 4:  // a random byte anywhere, tensor data included
      b[pick(b.size())] = static_cast<uint8_t>(rng());
      return;
    case 5:  // truncation, mostly inside the header
      b.resize(rng() % 2 ? pick(head) : pick(b.size()));
      return;
    case 6: {  // bytes inserted or removed, shifting everything after them
      const size_t at = pick(head);
      const size_t n = 1 + pick(16);
      if (rng() % 2) {
        b.insert(b.begin() + static_cast<long>(at), n, static_cast<uint8_t>(rng()));
      } else {
        b.erase(b.begin() + static_cast<long>(at),
                b.begin() + static_cast<long>(std::min(at + n, b.size())));
      }
      return;
    }
    default: {  // a chunk of the header copied over another place
      const size_t from = pick(head), to = pick(head), n = 1 + pick(32);
      for (size_t i = 0; i < n && from + i < b.size() && to + i < b.size(); ++i)
        b[to + i] = b[from + i];
      return;
    }
  }
}

// Reads everything a parsed file offers; returns a checksum so nothing is optimized away.
double touch(const Value& v, int depth = 0) {
  EXPECT_LE(depth, 8);
  double sum =
      static_cast<double>(v.u) + static_cast<double>(v.i) + static_cast<double>(v.s.size());
  if (std::isfinite(v.f)) sum += v.f;
  for (const Value& e : v.array) {
    EXPECT_EQ(e.type, v.elementType);
    sum += touch(e, depth + 1);
  }
  return sum;
}

double touch(const GgufFile& f) {
  double sum = 0;
  for (const KeyValue& kv : f.metadata()) {
    EXPECT_EQ(f.find(kv.key), &kv.value);
    sum += touch(kv.value);
    sum += f.getString(kv.key).value_or("").size() + f.getUint(kv.key).value_or(0) +
           static_cast<double>(f.getInt(kv.key).value_or(0)) + f.getBool(kv.key).value_or(false);
    if (const auto x = f.getFloat(kv.key); x && std::isfinite(*x)) sum += *x;
    sum += f.getStringArray(kv.key).value_or(std::vector<std::string>{}).size();
    sum += f.getIntArray(kv.key).value_or(std::vector<int64_t>{}).size();
    sum += f.getFloatArray(kv.key).value_or(std::vector<float>{}).size();
  }
  for (const TensorInfo& t : f.tensors()) {
    EXPECT_EQ(f.findTensor(t.name), &t);
    const auto data = f.tensorData(t);
    EXPECT_EQ(data.size(), t.bytes);
    for (size_t i = 0; i < data.size(); i += 61) sum += data[i];
    if (!canDequantize(t.type)) continue;
    const auto values = dequantizeTensor(f, t);
    EXPECT_TRUE(values.ok()) << t.name;
    if (values.ok() && !values->empty()) sum += std::isfinite((*values)[0]) ? (*values)[0] : 0.0;
  }
  return sum;
}

TEST(Fuzz, MutatedImagesNeverCrash) {
  std::vector<Seed> seeds;
  seeds.push_back(makeSeed(kitchenSinkImage()));
  const auto stories = kvscope::test::sharedFile("models/stories260K.gguf");
  if (std::filesystem::exists(stories)) {
    std::ifstream in(stories, std::ios::binary);
    seeds.push_back(
        makeSeed({std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()}));
  }
  for (const Seed& s : seeds) ASSERT_TRUE(GgufFile::fromBytes(s.bytes).ok());

  const uint64_t iterations = envOr("KVSCOPE_FUZZ_ITERATIONS", 20000);
  const uint64_t runSeed = envOr("KVSCOPE_FUZZ_SEED", 1);
  uint64_t parsed = 0;
  double sink = 0;
  for (uint64_t i = 0; i < iterations; ++i) {
    std::seed_seq seq{static_cast<uint32_t>(runSeed), static_cast<uint32_t>(runSeed >> 32),
                      static_cast<uint32_t>(i), static_cast<uint32_t>(i >> 32)};
    std::mt19937_64 rng(seq);
    const Seed& seed = seeds[i % seeds.size()];
    std::vector<uint8_t> variant = seed.bytes;
    const int mutations = 1 + static_cast<int>(rng() % 3);
    for (int m = 0; m < mutations; ++m) mutate(variant, seed, rng);

    auto file = GgufFile::fromBytes(variant);
    if (file.ok()) {
      ++parsed;
      sink += touch(**file);
    } else {
      ASSERT_EQ(file.error().code, ErrorCode::kBadFile)
          << "variant " << i << ": " << file.error().describe();
      ASSERT_FALSE(file.error().message.empty());
    }
    if (HasFailure()) FAIL() << "variant " << i << " (seed " << runSeed << ")";
  }
  std::cout << "[ fuzz     ] " << iterations << " variants, " << parsed << " parsed, "
            << iterations - parsed << " refused (checksum " << (sink != 0) << ")\n";
  if (iterations >= 1000) {  // the mutations reach both outcomes
    EXPECT_GT(parsed, iterations / 20);
    EXPECT_GT(iterations - parsed, iterations / 5);
  }
}

}  // namespace
}  // namespace kvscope::gguf
