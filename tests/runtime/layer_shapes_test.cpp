// Per-layer attention shapes (model_config.h: Gemma 4's layers differ in KV
// heads and head width), from the GGUF arrays through the forward pass (on
// both backends), the cache, auto and the saved cache, against the uniform
// model they stand for:
// a llama model whose layer 0 has 1 KV head computes what the same model
// with 2 KV heads computes when both of that layer's heads have the same K
// and V weights (each pair of query heads then attends the same keys and
// values). The second file is the first rewritten so: head_count_kv one
// number, layer 0's attn_k and attn_v rows written twice.
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "backend/cpu_backend.h"
#include "backend/vulkan_backend.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gpu/device_info.h"
#include "model/model_file.h"
#include "model/synthetic_model.h"
#include "runtime/kv_file.h"
#include "runtime/session_load.h"
#include "support/policy.h"

namespace kvscope::test {
namespace {

namespace fs = std::filesystem;

model::SyntheticModelSpec perLayerSpec() {
  model::SyntheticModelSpec spec;
  spec.architecture = "llama";
  spec.nLayer = 2;
  spec.nEmbd = 64;
  spec.nFf = 128;
  spec.nHead = 4;
  spec.nHeadKv = 2;
  spec.layerHeadsKv = {1, 2};
  spec.headDim = 32;
  spec.nVocab = 300;
  spec.contextLength = 256;
  spec.seed = 5;
  return spec;
}

// `bytes` with head_count_kv 2 for every layer and layer 0's K and V heads
// duplicated (F32 rows: output row r is `in` floats at r * in).
Expected<std::vector<uint8_t>> uniformTwin(std::span<const uint8_t> bytes) {
  KVS_ASSIGN_OR_RETURN(auto file, gguf::GgufFile::fromBytes(bytes));
  gguf::GgufWriter w;
  for (const gguf::KeyValue& kv : file->metadata()) {
    w.set(kv.key, kv.key == "llama.attention.head_count_kv" ? gguf::uint32Value(2) : kv.value);
  }
  for (const gguf::TensorInfo& t : file->tensors()) {
    const auto data = file->tensorData(t);
    std::vector<uint8_t> copy(data.begin(), data.end());
    std::vector<uint64_t> shape = t.shape;
    if (t.name == "blk.0.attn_k.weight" || t.name == "blk.0.attn_v.weight") {
      copy.insert(copy.end(), data.begin(), data.end());
      shape[1] *= 2;
    }
    KVS_TRY(w.addTensor(t.name, shape, t.type, std::move(copy)));
  }
  return w.toBytes();
}

class LayerShapes : public testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("kvscope-layer-shapes-" + std::to_string(::getpid()));
    fs::create_directories(m_dir);
    auto bytes = model::syntheticModelBytes(perLayerSpec());
    ASSERT_TRUE(bytes.ok()) << bytes.error().describe();
    auto twin = uniformTwin(*bytes);
    ASSERT_TRUE(twin.ok()) << twin.error().describe();
    std::ofstream(m_dir / "per-layer.gguf", std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes->data()),
               static_cast<std::streamsize>(bytes->size()));
    std::ofstream(m_dir / "uniform.gguf", std::ios::binary)
        .write(reinterpret_cast<const char*>(twin->data()),
               static_cast<std::streamsize>(twin->size()));
  }
  void TearDown() override { fs::remove_all(m_dir); }

  std::shared_ptr<const model::ModelFile> open(const char* name) {
    auto m = model::ModelFile::open(m_dir / name);
    EXPECT_TRUE(m.ok()) << m.error().describe();
    if (!m.ok()) return nullptr;
    return std::shared_ptr<const model::ModelFile>(std::move(m).value());
  }

  std::unique_ptr<runtime::Session> session(const char* name, const std::string& policy) {
    auto checked = runtime::checkLoad(m_dir / name, {.kind = "cpu",
                                                     .threads = 2,
                                                     .matmul = cpu::MatmulPrecision::kExact,
                                                     .timing = false,
                                                     .kvPolicy = policyOf(policy)});
    EXPECT_TRUE(checked.ok()) << checked.error().describe();
    if (!checked.ok()) return nullptr;
    auto s = runtime::startSession(std::move(checked).value(), nullptr);
    EXPECT_TRUE(s.ok()) << s.error().describe();
    return s.ok() ? std::move(s).value() : nullptr;
  }

  fs::path m_dir;
};

std::vector<int32_t> tokens(size_t n) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>(260 + (i * 37) % 40);
  return t;
}

// A 32-token prefill then 8 decode steps on both: the last logits of each
// within 1e-5 of the spread.
void expectSameLogits(backend::Backend& a, backend::Backend& b) {
  const std::vector<int32_t> t = tokens(40);
  backend::Logits la, lb;
  for (uint32_t step = 0; step <= 8; ++step) {
    const std::span<const int32_t> batch =
        step == 0 ? std::span(t).first(32) : std::span(&t[31 + step], 1);
    ASSERT_TRUE(a.forward({batch}, la).ok());
    ASSERT_TRUE(b.forward({batch}, lb).ok());
    const auto x = la.last(), y = lb.last();
    ASSERT_EQ(x.size(), y.size());
    const auto [lo, hi] = std::minmax_element(y.begin(), y.end());
    const double tolerance = 1e-5 * (*hi - *lo);
    size_t apart = 0;  // counted so that a NaN on either side counts too
    for (size_t i = 0; i < x.size(); ++i) apart += std::fabs(x[i] - y[i]) <= tolerance ? 0 : 1;
    EXPECT_GT(tolerance, 0.0) << a.name() << " step " << step;
    EXPECT_EQ(apart, 0u) << a.name() << " step " << step;
  }
}

TEST_F(LayerShapes, AKvHeadCountPerLayerComputesWhatItsUniformTwinComputes) {
  auto perLayer = open("per-layer.gguf"), uniform = open("uniform.gguf");
  ASSERT_TRUE(perLayer && uniform);
  const model::ModelConfig& c = perLayer->config();
  EXPECT_EQ(c.headsKvOf(0), 1u);
  EXPECT_EQ(c.headsKvOf(1), 2u);
  EXPECT_FALSE(c.uniformAttention());
  EXPECT_TRUE(uniform->config().uniformAttention());

  auto a = backend::CpuBackend::create(perLayer), b = backend::CpuBackend::create(uniform);
  ASSERT_TRUE(a.ok() && b.ok());
  expectSameLogits(**a, **b);
  // Layer 0 holds one KV head's rows in the first, two in the second.
  const auto bytesA = (*a)->kvBytes(), bytesB = (*b)->kvBytes();
  EXPECT_EQ(2 * bytesA[0].keyBytes.used(), bytesB[0].keyBytes.used());
  EXPECT_EQ(bytesA[1].keyBytes.used(), bytesB[1].keyBytes.used());

  // The Vulkan backend's pages hold each layer's own heads too.
  auto devices = gpu::listDevices();
  if (!devices.ok() || devices->empty()) GTEST_SKIP() << "no Vulkan device";
  auto va = backend::VulkanBackend::create(perLayer, {.validation = true});
  auto vb = backend::VulkanBackend::create(uniform, {.validation = true});
  ASSERT_TRUE(va.ok()) << va.error().describe();
  ASSERT_TRUE(vb.ok()) << vb.error().describe();
  expectSameLogits(**va, **vb);
  EXPECT_EQ(2 * (*va)->kvBytes()[0].keyBytes.used(), (*vb)->kvBytes()[0].keyBytes.used());
  EXPECT_EQ((*va)->context().validationMessages(), 0u);
}

// Per-layer feed-forward widths (a GGUF feed_forward_length array, which
// llama.cpp reads for any architecture): a llama model whose layer 0 is 64
// wide and layer 1 128 computes what its uniform twin of 128 computes when
// layer 0's extra gate and up rows are zero (silu(0) * 0 adds nothing, the
// extra down columns multiply zeros). Where a forward pass sized its FFN
// buffer by one width, layer 1 wrote past it (now a shape error, which
// fails this).
TEST(LayerFeedForwardWidths, APerLayerWidthComputesWhatItsZeroPaddedTwinComputes) {
  const fs::path dir =
      fs::temp_directory_path() / ("kvscope-layer-ffn-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  model::SyntheticModelSpec spec = perLayerSpec();
  spec.layerHeadsKv = {};
  spec.nFf = 64;
  spec.layerFf = {64, 128};
  auto bytes = model::syntheticModelBytes(spec);
  ASSERT_TRUE(bytes.ok()) << bytes.error().describe();
  auto file = gguf::GgufFile::fromBytes(*bytes);
  ASSERT_TRUE(file.ok());
  gguf::GgufWriter w;
  for (const gguf::KeyValue& kv : (*file)->metadata())
    w.set(kv.key, kv.key == "llama.feed_forward_length" ? gguf::uint32Value(128) : kv.value);
  for (const gguf::TensorInfo& t : (*file)->tensors()) {
    const auto data = (*file)->tensorData(t);
    std::vector<float> v(data.size() / 4);
    std::memcpy(v.data(), data.data(), data.size());
    std::vector<uint64_t> shape = t.shape;
    if (t.name == "blk.0.ffn_gate.weight" || t.name == "blk.0.ffn_up.weight") {
      v.resize(v.size() * 2, 0.0f);  // 64 more output rows of zeros
      shape[1] = 128;
    } else if (t.name == "blk.0.ffn_down.weight") {  // {64, width}: each row 64 more zeros
      std::vector<float> wide(v.size() * 2, 0.0f);
      for (size_t r = 0; r < shape[1]; ++r) std::copy_n(&v[r * 64], 64, &wide[r * 128]);
      v = std::move(wide);
      shape[0] = 128;
    }
    std::vector<uint8_t> out(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
    ASSERT_TRUE(w.addTensor(t.name, shape, t.type, std::move(out)).ok());
  }
  auto twin = w.toBytes();
  ASSERT_TRUE(twin.ok());
  for (const auto& [name, image] : {std::pair{"per-layer.gguf", &*bytes}, {"twin.gguf", &*twin}}) {
    std::ofstream(dir / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(image->data()),
               static_cast<std::streamsize>(image->size()));
  }
  auto perLayer = model::ModelFile::open(dir / "per-layer.gguf");
  auto uniform = model::ModelFile::open(dir / "twin.gguf");
  ASSERT_TRUE(perLayer.ok() && uniform.ok());
  EXPECT_EQ((*perLayer)->config().ffOf(1), 128u);
  EXPECT_TRUE((*uniform)->config().layerFf.empty());
  auto a = backend::CpuBackend::create(std::move(perLayer).value());
  auto b = backend::CpuBackend::create(std::move(uniform).value());
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<int32_t> t = tokens(12);
  backend::Logits la, lb;
  ASSERT_TRUE((*a)->forward({t, true}, la).ok());
  ASSERT_TRUE((*b)->forward({t, true}, lb).ok());
  ASSERT_EQ(la.values.size(), lb.values.size());
  const auto [lo, hi] = std::minmax_element(lb.values.begin(), lb.values.end());
  size_t apart = 0;
  for (size_t i = 0; i < la.values.size(); ++i)
    apart += std::fabs(la.values[i] - lb.values[i]) <= 1e-5 * (*hi - *lo) ? 0 : 1;
  EXPECT_EQ(apart, 0u);
  fs::remove_all(dir);
}

// A session under auto (which measures each layer at its own shape) saves
// its cache with each layer's shape and restores it to the same continuation;
// the uniform twin's session refuses that file as another model's (its
// tensors differ; kv_file_test's shape case refuses a file by its shapes).
TEST_F(LayerShapes, ASavedCacheKeepsEachLayersShape) {
  auto original = session("per-layer.gguf", "auto");
  ASSERT_TRUE(original);
  runtime::GenerateOptions greedy;
  greedy.maxTokens = 6;
  greedy.sampler.temperature = 0.0f;
  ASSERT_TRUE(original->generate(tokens(72), greedy).ok());  // auto measures from 64 tokens
  ASSERT_TRUE(original->saveCache(m_dir / "chat.kvcache").ok());
  auto reader = runtime::KvFileReader::open(m_dir / "chat.kvcache");
  ASSERT_TRUE(reader.ok()) << reader.error().describe();
  const std::vector<kv::KvLayerShape> shapes = {{1, 32}, {2, 32}};
  EXPECT_EQ(reader->info().layerShapes, shapes);
  EXPECT_EQ(reader->info().autoState, runtime::AutoState::kSettled) << "auto measured the layers";

  auto reopened = session("per-layer.gguf", "auto");
  ASSERT_TRUE(reopened);
  const Status restored = reopened->restoreCache(m_dir / "chat.kvcache");
  ASSERT_TRUE(restored.ok()) << restored.error().describe();
  EXPECT_EQ(reopened->history(), original->history());
  std::vector<int32_t> turn = original->history();
  for (int32_t t : tokens(3)) turn.push_back(t);
  auto x = original->generate(turn, greedy);
  auto y = reopened->generate(turn, greedy);
  ASSERT_TRUE(x.ok() && y.ok());
  EXPECT_EQ(original->history(), reopened->history());

  auto twin = session("uniform.gguf", "auto");
  ASSERT_TRUE(twin);
  const Status refused = twin->restoreCache(m_dir / "chat.kvcache");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("another model"), std::string::npos)
      << refused.error().message;
}

}  // namespace
}  // namespace kvscope::test
