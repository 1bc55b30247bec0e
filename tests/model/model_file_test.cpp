// ModelConfig and weight binding, against the facts FIXTURES.md states for the
// real models, and against synthetic files built with the GGUF writer.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gguf/gguf_writer.h"
#include "model/description.h"
#include "model/model_file.h"
#include "model/model_weights.h"
#include "model/synthetic_model.h"
#include "support/synthetic_model_file.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

using model::ModelFile;

class TempDir {
 public:
  TempDir() {
    m_path = std::filesystem::temp_directory_path() /
             ("kvscope-model-" +
              std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(m_path);
    std::filesystem::create_directories(m_path);
  }
  ~TempDir() { std::filesystem::remove_all(m_path); }
  const std::filesystem::path& path() const { return m_path; }

 private:
  std::filesystem::path m_path;
};

TEST(ModelFile, Stories260kConfigMatchesFixtureFacts) {
  const auto path = sharedFile("models/stories260K.gguf");
  KVS_REQUIRE_FIXTURE(path);
  auto m = ModelFile::open(path);
  ASSERT_TRUE(m.ok()) << m.error().describe();
  const auto& c = (*m)->config();
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.nEmbd, 64u);
  EXPECT_EQ(c.nFf, 172u);
  EXPECT_EQ(c.nLayer, 5u);
  EXPECT_EQ(c.nHead, 8u);
  EXPECT_EQ(c.nHeadKv, 4u);
  EXPECT_EQ(c.headDim, 8u);
  EXPECT_EQ(c.headsOf(0) / c.headsKvOf(0), 2u);
  EXPECT_EQ(c.nVocab, 512u);
  EXPECT_FLOAT_EQ(c.rmsEps, 1e-5f);
  EXPECT_EQ(c.rope.style, model::RopeStyle::kNormal);
  // 5 layers x 4 KV heads x (8 + 8) values x 2 bytes
  EXPECT_EQ(c.kvBytesPerTokenF16(), 5u * 4 * 16 * 2);
  auto w = model::bindWeights(c, **m);
  ASSERT_TRUE(w.ok()) << w.error().describe();
  EXPECT_EQ(w->layers.size(), 5u);
}

TEST(ModelFile, HuggingFaceFolderLoadsWithNeoxRopeAndTiedEmbeddings) {
  const auto path = sharedFile("models/tinystories-656k");
  KVS_REQUIRE_FIXTURE(path);
  auto m = ModelFile::open(path);
  ASSERT_TRUE(m.ok()) << m.error().describe();
  const auto& c = (*m)->config();
  EXPECT_EQ((*m)->format(), model::ModelFormat::kHuggingFace);
  EXPECT_EQ(c.nEmbd, 128u);
  EXPECT_EQ(c.nLayer, 2u);
  EXPECT_EQ(c.nHead, 8u);
  EXPECT_EQ(c.nHeadKv, 4u);
  EXPECT_EQ(c.headDim, 16u);
  EXPECT_EQ(c.nVocab, 2048u);
  EXPECT_TRUE(c.tiedEmbeddings);
  // HF q/k weights are in rotate_half order: NeoX pairing without permutation.
  EXPECT_EQ(c.rope.style, model::RopeStyle::kNeox);
  EXPECT_FALSE((*m)->tokenizerJson().empty());
  auto w = model::bindWeights(c, **m);
  ASSERT_TRUE(w.ok()) << w.error().describe();
  EXPECT_EQ(w->output->data.data(), w->tokenEmbd->data.data()) << "tied: one set of bytes";
  // safetensors [out, in] becomes GGUF {in, out}
  EXPECT_EQ(w->layers[0].gate->shape, (std::vector<uint64_t>{128, 384}));
  // Tied bytes are counted once: 2048*128 + 2*(4*128*128 ... ) floats, all F32.
  const uint64_t perLayer = 128 + 128 * 128 + 2 * 64 * 128 + 128 * 128 + 128 + 3 * 128 * 384;
  EXPECT_EQ((*m)->weightBytes(), 4 * (2048ull * 128 + 128 + 2 * perLayer));
}

TEST(ModelFile, SyntheticArchitecturesBindTheirExtraTensors) {
  TempDir dir;
  for (const char* arch : {"llama", "qwen2", "qwen3"}) {
    model::SyntheticModelSpec spec;
    spec.architecture = arch;
    spec.nHead = 8;
    spec.nHeadKv = 2;
    spec.headDim = 64;
    spec.nEmbd = 256;
    spec.weightType = gguf::TensorType::kQ8_0;
    const auto path = dir.path() / (std::string(arch) + ".gguf");
    ASSERT_TRUE(model::writeSyntheticModel(spec, path).ok());
    auto m = ModelFile::open(path);
    ASSERT_TRUE(m.ok()) << arch << ": " << m.error().describe();
    const auto& c = (*m)->config();
    EXPECT_EQ(c.headsOf(0) / c.headsKvOf(0), 4u);
    EXPECT_EQ(c.headDim, 64u);
    auto w = model::bindWeights(c, **m);
    ASSERT_TRUE(w.ok()) << w.error().describe();
    const auto& l = w->layers[0];
    EXPECT_EQ(l.bq != nullptr, std::string(arch) == "qwen2");
    EXPECT_EQ(l.qNorm != nullptr, std::string(arch) == "qwen3");
    EXPECT_EQ(c.rope.style,
              std::string(arch) == "llama" ? model::RopeStyle::kNormal : model::RopeStyle::kNeox);
    EXPECT_EQ(l.wq->type, gguf::TensorType::kQ8_0);
  }
}

// llama.cpp's K-quant mixes give rows that are not whole 256-value
// super-blocks its quantizer's fall-back types (Gemma 4's FFN width 2112):
// here ffn_down's rows of 96 values, Q4_K -> Q5_0 and Q6_K -> Q8_0, while
// rows of 256 keep Q4_K; without the fall-back the file cannot be written.
TEST(ModelFile, KQuantRowsNotOfWholeBlocksFallBackAsLlamaCppQuantizes) {
  TempDir dir;
  model::SyntheticModelSpec spec;
  spec.nLayer = 2;
  spec.nFf = 96;
  spec.weightType = gguf::TensorType::kQ4_K;
  spec.tensorTypes["blk.1.ffn_down.weight"] = gguf::TensorType::kQ6_K;
  EXPECT_FALSE(model::writeSyntheticModel(spec, dir.path() / "no-fallback.gguf").ok());
  spec.quantFallback = true;
  const auto path = dir.path() / "fallback.gguf";
  ASSERT_TRUE(model::writeSyntheticModel(spec, path).ok());
  auto m = ModelFile::open(path);
  ASSERT_TRUE(m.ok()) << m.error().describe();
  EXPECT_EQ((*m)->find("blk.0.ffn_down.weight")->type, gguf::TensorType::kQ5_0);
  EXPECT_EQ((*m)->find("blk.1.ffn_down.weight")->type, gguf::TensorType::kQ8_0);
  EXPECT_EQ((*m)->find("blk.0.ffn_gate.weight")->type, gguf::TensorType::kQ4_K);  // rows of 256
}

TEST(ModelFile, HeadDimMayDifferFromWidthOverHeads) {
  TempDir dir;
  model::SyntheticModelSpec spec;
  spec.nEmbd = 128;
  spec.nHead = 4;
  spec.nHeadKv = 4;
  spec.headDim = 64;  // 4 x 64 = 256 != 128, as in gemma/qwen3 style models
  ASSERT_TRUE(model::writeSyntheticModel(spec, dir.path() / "m.gguf").ok());
  auto m = ModelFile::open(dir.path() / "m.gguf");
  ASSERT_TRUE(m.ok()) << m.error().describe();
  EXPECT_EQ((*m)->config().qDimOf(0), 256u);
  EXPECT_TRUE(model::bindWeights((*m)->config(), **m).ok());
}

// A minimal GGUF with the given architecture and metadata overrides.
std::vector<uint8_t> tinyGguf(const std::string& arch, void (*edit)(gguf::GgufWriter&) = nullptr) {
  gguf::GgufWriter w;
  w.set("general.architecture", gguf::stringValue(arch));
  w.set(arch + ".block_count", gguf::uint32Value(1));
  w.set(arch + ".embedding_length", gguf::uint32Value(8));
  w.set(arch + ".feed_forward_length", gguf::uint32Value(16));
  w.set(arch + ".attention.head_count", gguf::uint32Value(2));
  w.set(arch + ".attention.head_count_kv", gguf::uint32Value(1));
  if (edit) edit(w);
  std::vector<uint8_t> embd(8 * 4 * 4);
  EXPECT_TRUE(w.addTensor("token_embd.weight", {8, 4}, gguf::TensorType::kF32, embd).ok());
  auto bytes = w.toBytes();
  EXPECT_TRUE(bytes.ok());
  return *bytes;
}

Expected<model::ModelConfig> configOf(const std::vector<uint8_t>& bytes) {
  KVS_ASSIGN_OR_RETURN(auto f, gguf::GgufFile::fromBytes(bytes));
  return model::configFromGguf(*f);
}

TEST(ModelConfig, RefusesMlaStateSpaceAndDeltaNetArchitecturesSayingWhy) {
  auto mla = configOf(tinyGguf("deepseek2"));
  ASSERT_FALSE(mla.ok());
  EXPECT_EQ(mla.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(mla.error().message.find("MLA latent"), std::string::npos) << mla.error().message;
  EXPECT_NE(mla.error().message.find("llama, mistral, qwen2, qwen3"), std::string::npos);
  auto ssm = configOf(tinyGguf("mamba"));
  ASSERT_FALSE(ssm.ok());
  EXPECT_NE(ssm.error().message.find("recurrent state"), std::string::npos);
  // Today's hybrids and compressed-KV models, by their llama.cpp names, each
  // with what runs instead.
  for (const char* arch : {"qwen35", "qwen35moe", "qwen3next"}) {
    auto hybrid = configOf(tinyGguf(arch));
    ASSERT_FALSE(hybrid.ok()) << arch;
    EXPECT_NE(hybrid.error().message.find("Gated DeltaNet"), std::string::npos) << arch;
    EXPECT_NE(hybrid.error().message.find("(qwen3moe) run instead"), std::string::npos) << arch;
  }
  for (const char* arch : {"deepseek32", "deepseek4", "glm-dsa", "kimi-linear"}) {
    auto latent = configOf(tinyGguf(arch));
    ASSERT_FALSE(latent.ok()) << arch;
    EXPECT_NE(latent.error().message.find("MLA latent"), std::string::npos) << arch;
    EXPECT_NE(latent.error().message.find("instead"), std::string::npos) << arch;
  }
  auto unknown = configOf(tinyGguf("gptneox"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("'gptneox' is not supported (supported: "),
            std::string::npos);
}

TEST(ModelConfig, DefaultsAndLinearRopeScaling) {
  auto c = configOf(tinyGguf("llama", [](gguf::GgufWriter& w) {
    w.set("llama.rope.scaling.type", gguf::stringValue("linear"));
    w.set("llama.rope.scaling.factor", gguf::float32Value(4.0f));
  }));
  ASSERT_TRUE(c.ok()) << c.error().describe();
  EXPECT_EQ(c->headDim, 4u);  // embedding / heads
  EXPECT_EQ(c->rope.dims, 4u);
  EXPECT_EQ(c->rope.scaling, model::RopeScaling::kLinear);
  EXPECT_FLOAT_EQ(c->rope.factor, 4.0f);
  EXPECT_TRUE(c->tiedEmbeddings);
}

TEST(ModelConfig, RefusesUnknownRopeScalingAndInconsistentHeads) {
  auto dynamic = configOf(tinyGguf("llama", [](gguf::GgufWriter& w) {
    w.set("llama.rope.scaling.type", gguf::stringValue("dynamic"));
  }));
  ASSERT_FALSE(dynamic.ok());
  EXPECT_NE(dynamic.error().message.find("RoPE scaling 'dynamic'"), std::string::npos);
  // YaRN as gpt-oss ships it runs; DeepSeek's log multiplier does not.
  auto yarn = configOf(tinyGguf("llama", [](gguf::GgufWriter& w) {
    w.set("llama.rope.scaling.type", gguf::stringValue("yarn"));
    w.set("llama.rope.scaling.factor", gguf::float32Value(32.0f));
    w.set("llama.rope.scaling.original_context_length", gguf::uint32Value(4096));
  }));
  ASSERT_TRUE(yarn.ok()) << yarn.error().describe();
  EXPECT_EQ(yarn->rope.scaling, model::RopeScaling::kYarn);
  EXPECT_EQ(yarn->rope.factor, 32.0f);
  EXPECT_EQ(yarn->rope.originalContext, 4096u);
  auto logMul = configOf(tinyGguf("llama", [](gguf::GgufWriter& w) {
    w.set("llama.rope.scaling.type", gguf::stringValue("yarn"));
    w.set("llama.rope.scaling.yarn_log_multiplier", gguf::float32Value(0.1f));
  }));
  ASSERT_FALSE(logMul.ok());
  EXPECT_NE(logMul.error().message.find("log multiplier"), std::string::npos);
  auto heads = configOf(tinyGguf("llama", [](gguf::GgufWriter& w) {
    w.set("llama.attention.head_count_kv", gguf::uint32Value(3));
  }));
  ASSERT_FALSE(heads.ok());
  EXPECT_NE(heads.error().message.find("not a multiple of 3 KV heads"), std::string::npos);
  auto missing = configOf(tinyGguf(
      "llama", [](gguf::GgufWriter& w) { w.set("llama.block_count", gguf::stringValue("five")); }));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("llama.block_count"), std::string::npos);
}

// Gemma 4's form: head counts as one integer per layer, the window layers'
// own head width. Arrays of another length, zeros, and keys of values whose
// width differs from the keys' are refused by name.
TEST(ModelConfig, PerLayerHeadCountsAndWindowHeadWidth) {
  auto c = configOf(tinyGguf("gemma3", [](gguf::GgufWriter& w) {
    w.set("gemma3.block_count", gguf::uint32Value(2));
    w.set("gemma3.attention.head_count",
          gguf::arrayValue(gguf::ValueType::kUint32, {gguf::uint32Value(2), gguf::uint32Value(4)}));
    w.set("gemma3.attention.head_count_kv",
          gguf::arrayValue(gguf::ValueType::kUint32, {gguf::uint32Value(2), gguf::uint32Value(1)}));
    w.set("gemma3.attention.key_length", gguf::uint32Value(8));
    w.set("gemma3.attention.sliding_window", gguf::uint32Value(16));
    w.set("gemma3.attention.sliding_window_pattern", gguf::uint32Value(2));
    w.set("gemma3.attention.key_length_swa", gguf::uint32Value(4));
    w.set("gemma3.rope.dimension_count", gguf::uint32Value(8));
    w.set("gemma3.rope.dimension_count_swa", gguf::uint32Value(4));
  }));
  ASSERT_TRUE(c.ok()) << c.error().describe();
  EXPECT_FALSE(c->uniformAttention());
  // Layer 0 a window layer: 2 heads of 4 over 2 KV heads; layer 1 global: 4 of 8 over 1.
  EXPECT_EQ(c->headsOf(0), 2u);
  EXPECT_EQ(c->headsKvOf(0), 2u);
  EXPECT_EQ(c->headDimOf(0), 4u);
  EXPECT_EQ(c->ropeDimsOf(0), 4u);
  EXPECT_EQ(c->headsOf(1), 4u);
  EXPECT_EQ(c->headsKvOf(1), 1u);
  EXPECT_EQ(c->headDimOf(1), 8u);
  EXPECT_EQ(c->kvDimOf(1), 8u);
  EXPECT_EQ(c->kvBytesPerTokenF16(), (2 * 4 + 1 * 8) * 2u * 2u);
  // Alike entries are one shape.
  auto alike = configOf(tinyGguf("llama", [](gguf::GgufWriter& w) {
    w.set("llama.attention.head_count_kv",
          gguf::arrayValue(gguf::ValueType::kUint32, {gguf::uint32Value(1)}));
  }));
  ASSERT_TRUE(alike.ok()) << alike.error().describe();
  EXPECT_TRUE(alike->uniformAttention());
  EXPECT_EQ(alike->nHeadKv, 1u);
  const auto refused = [](const Expected<model::ModelConfig>& r, const char* needle) {
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_TRUE(r.error().code == ErrorCode::kBadFile || r.error().code == ErrorCode::kUnsupported);
    EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
  };
  refused(configOf(tinyGguf("llama",
                            [](gguf::GgufWriter& w) {
                              w.set("llama.attention.head_count_kv",
                                    gguf::arrayValue(gguf::ValueType::kUint32,
                                                     {gguf::uint32Value(1), gguf::uint32Value(1)}));
                            })),
          "one integer for each of 1 layers");
  refused(
      configOf(tinyGguf("llama",
                        [](gguf::GgufWriter& w) {
                          w.set("llama.attention.head_count",
                                gguf::arrayValue(gguf::ValueType::kUint32, {gguf::uint32Value(0)}));
                        })),
      "out of range");
  refused(configOf(tinyGguf("gemma3",
                            [](gguf::GgufWriter& w) {
                              w.set("gemma3.attention.sliding_window", gguf::uint32Value(16));
                              w.set("gemma3.attention.key_length_swa", gguf::uint32Value(4));
                              w.set("gemma3.attention.value_length_swa", gguf::uint32Value(8));
                            })),
          "values of 8");
}

// A global tensor takes the global layers' dimensions: rope_freqs spans the
// global RoPE (64 dims: 32 factors) though layer 0 is a window layer
// rotating 32, and the forward pass reads all 32.
gguf::Value boolArray(std::initializer_list<bool> flags) {
  std::vector<gguf::Value> v;
  for (bool f : flags) v.push_back(gguf::boolValue(f));
  return gguf::arrayValue(gguf::ValueType::kBool, std::move(v));
}

gguf::Value uintArray(std::initializer_list<uint32_t> values) {
  std::vector<gguf::Value> v;
  for (uint32_t x : values) v.push_back(gguf::uint32Value(x));
  return gguf::arrayValue(gguf::ValueType::kUint32, std::move(v));
}

// Gemma 4 E2B's form, 5 layers: window flags per layer (global 2 and 4), the
// last 2 KV-shared, FFN widths per layer, per-layer inputs, no soft-cap key
// (30, as llama.cpp takes it), and no attn_v on global layer 2.
void gemma4Keys(gguf::GgufWriter& w) {
  w.set("gemma4.block_count", gguf::uint32Value(5));
  w.set("gemma4.attention.sliding_window", gguf::uint32Value(16));
  w.set("gemma4.attention.sliding_window_pattern", boolArray({true, true, false, true, false}));
  w.set("gemma4.attention.shared_kv_layers", gguf::uint32Value(2));
  w.set("gemma4.feed_forward_length", uintArray({16, 16, 16, 32, 32}));
  w.set("gemma4.embedding_length_per_layer_input", gguf::uint32Value(4));
}

TEST(ModelConfig, Gemma4SharedKvLayersAndPerLayerWidths) {
  auto c = configOf(tinyGguf("gemma4", gemma4Keys));
  ASSERT_TRUE(c.ok()) << c.error().describe();
  EXPECT_EQ(c->kvLayers(), 3u);
  EXPECT_TRUE(c->storesKv(2));
  EXPECT_FALSE(c->storesKv(3));
  // Each shared layer reads the last storing layer of its kind.
  EXPECT_EQ(c->kvSourceOf(3), 1u);  // window
  EXPECT_EQ(c->kvSourceOf(4), 2u);  // global
  EXPECT_EQ(c->kvSourceOf(0), 0u);
  EXPECT_EQ(c->ffOf(0), 16u);
  EXPECT_EQ(c->ffOf(4), 32u);
  EXPECT_EQ(c->nEmbdPerLayer, 4u);
  EXPECT_EQ(c->finalLogitSoftcap, 30.0f);
  EXPECT_TRUE(c->globalValueIsKey);  // tinyGguf writes no attn_v
  // Only the 3 storing layers' rows: 1 KV head of 4 values, K and V, f16.
  EXPECT_EQ(c->kvBytesPerTokenF16(), 3u * 4 * 2 * 2);

  // A shared layer with no earlier storing layer of its kind is refused.
  auto orphan = configOf(tinyGguf("gemma4", [](gguf::GgufWriter& w) {
    gemma4Keys(w);
    w.set("gemma4.attention.sliding_window_pattern", boolArray({true, true, true, true, false}));
  }));
  ASSERT_FALSE(orphan.ok());
  EXPECT_NE(orphan.error().message.find("KV-shared layer 4 has no earlier global layer"),
            std::string::npos)
      << orphan.error().message;
  auto all = configOf(tinyGguf("gemma4", [](gguf::GgufWriter& w) {
    gemma4Keys(w);
    w.set("gemma4.attention.shared_kv_layers", gguf::uint32Value(5));
  }));
  ASSERT_FALSE(all.ok());
  EXPECT_NE(all.error().message.find("5 KV-shared layers of 5"), std::string::npos);
  // Another architecture's forward pass runs none of it: its file's keys are
  // not read.
  auto llama = configOf(tinyGguf("llama", [](gguf::GgufWriter& w) {
    w.set("llama.attention.shared_kv_layers", gguf::uint32Value(1));
    w.set("llama.embedding_length_per_layer_input", gguf::uint32Value(4));
    w.set("llama.final_logit_softcapping", gguf::float32Value(30.0f));
  }));
  ASSERT_TRUE(llama.ok()) << llama.error().describe();
  EXPECT_EQ(llama->kvLayers(), 1u);
  EXPECT_EQ(llama->nEmbdPerLayer, 0u);
  EXPECT_EQ(llama->finalLogitSoftcap, 0.0f);
  EXPECT_FALSE(llama->globalValueIsKey);
}

TEST(ModelWeights, GlobalTensorsTakeTheGlobalLayersShape) {
  model::SyntheticModelSpec spec;
  spec.nLayer = 2;
  spec.nEmbd = 128;
  spec.headDim = 64;
  spec.nHead = 2;
  spec.slidingWindow = 8;
  spec.windowPeriod = 2;  // layer 0 a window layer, layer 1 global
  spec.ropeDimsWindow = 32;
  spec.ropeFreqFactors = true;
  auto m = openSyntheticModel(spec, "global-tensor");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->config().ropeDimsOf(0), 32u);
  EXPECT_EQ(m->config().ropeDimsOf(1), 64u);
  auto w = model::bindWeights(m->config(), *m);
  ASSERT_TRUE(w.ok()) << w.error().describe();
  ASSERT_TRUE(w->ropeFreqs);
  EXPECT_EQ(w->ropeFreqs->elements(), 32u);
  auto plan = model::planForward(m->config(), *w, 64);
  ASSERT_TRUE(plan.ok()) << plan.error().describe();
  EXPECT_EQ(plan->rope.freqFactors.size(), 32u);
  EXPECT_EQ(plan->windowRope.dims, 32u);
}

TEST(ModelWeights, ShapeMismatchNamesTheTensor) {
  model::SyntheticModelSpec spec;
  auto bytes = model::syntheticModelBytes(spec);
  ASSERT_TRUE(bytes.ok());
  auto f = gguf::GgufFile::fromBytes(*bytes);
  ASSERT_TRUE(f.ok());
  auto c = model::configFromGguf(**f);
  ASSERT_TRUE(c.ok());
  c->nFf = 999;  // metadata now disagrees with the tensors
  struct Source : model::WeightSource {
    std::vector<model::TensorView> views;
    const model::TensorView* find(std::string_view n) const override {
      for (const auto& v : views)
        if (v.name == n) return &v;
      return nullptr;
    }
    std::span<const model::TensorView> all() const override { return views; }
  } src;
  for (const auto& t : (*f)->tensors())
    src.views.push_back({t.name, t.type, t.shape, (*f)->tensorData(t)});
  auto w = model::bindWeights(*c, src);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(
      w.error().message.find("'blk.0.ffn_gate.weight' has shape {256, 512}, expected {256, 999}"),
      std::string::npos)
      << w.error().message;
}

// Experts where the architecture has none (Mixtral's files say "llama"), or
// none where it needs them, are refused when the weights bind, before any
// backend reads an expert tensor that is not there.
TEST(ModelWeights, ExpertsMustMatchTheArchitecture) {
  for (const char* arch : {"qwen3", "qwen3moe"}) {
    model::SyntheticModelSpec spec;
    spec.architecture = arch;
    const bool moe = std::string_view(arch) == "qwen3moe";
    if (moe) {
      spec.nExpert = 4;
      spec.nExpertUsed = 2;
      spec.nFfExp = 64;
    }
    auto bytes = model::syntheticModelBytes(spec);
    ASSERT_TRUE(bytes.ok()) << bytes.error().describe();
    const auto path = std::filesystem::temp_directory_path() /
                      (std::string("kvscope-experts-") + arch + ".gguf");
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes->data()),
               static_cast<std::streamsize>(bytes->size()));
    auto m = model::ModelFile::open(path);
    ASSERT_TRUE(m.ok()) << m.error().describe();
    model::ModelConfig c = (*m)->config();
    ASSERT_TRUE(model::bindWeights(c, **m).ok());
    c.nExpert = moe ? 0 : 8;
    c.nExpertUsed = moe ? 0 : 2;
    auto w = model::bindWeights(c, **m);
    ASSERT_FALSE(w.ok()) << arch;
    EXPECT_EQ(w.error().code, moe ? ErrorCode::kBadFile : ErrorCode::kUnsupported);
    EXPECT_NE(w.error().message.find(moe ? "needs expert_count" : "has experts (expert_count 8)"),
              std::string::npos)
        << w.error().message;
    std::filesystem::remove(path);
  }
  model::SyntheticModelSpec dense;
  dense.architecture = "qwen3";
  dense.nExpert = 8;
  EXPECT_FALSE(model::syntheticModelBytes(dense).ok());
}

TEST(HfConfig, Llama3RopeScalingAndTypeErrors) {
  auto j = nlohmann::json::parse(R"({"model_type":"llama","num_hidden_layers":2,"hidden_size":64,
    "intermediate_size":128,"num_attention_heads":4,"num_key_value_heads":2,"vocab_size":300,
    "rope_theta":500000.0,"rope_scaling":{"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,
    "high_freq_factor":4.0,"original_max_position_embeddings":8192}})");
  auto c = model::configFromHf(j);
  ASSERT_TRUE(c.ok()) << c.error().describe();
  EXPECT_EQ(c->rope.scaling, model::RopeScaling::kFreqFactors);
  EXPECT_EQ(c->rope.originalContext, 8192u);
  EXPECT_FLOAT_EQ(c->rope.theta, 500000.0f);
  j["rope_scaling"]["factor"] = "eight";
  auto bad = model::configFromHf(j);
  ASSERT_FALSE(bad.ok()) << "a wrongly typed field is an error, not an exception";
  EXPECT_EQ(bad.error().code, ErrorCode::kBadFile);
  j.erase("rope_scaling");
  j["num_hidden_layers"] = -1;
  EXPECT_FALSE(model::configFromHf(j).ok());
}

TEST(HfNames, MapToGgufNames) {
  EXPECT_EQ(model::hfToGgufName("model.embed_tokens.weight"), "token_embd.weight");
  EXPECT_EQ(model::hfToGgufName("model.layers.12.self_attn.o_proj.weight"),
            "blk.12.attn_output.weight");
  EXPECT_EQ(model::hfToGgufName("model.layers.3.self_attn.k_proj.bias"), "blk.3.attn_k.bias");
  EXPECT_EQ(model::hfToGgufName("model.layers.0.self_attn.q_norm.weight"),
            "blk.0.attn_q_norm.weight");
  EXPECT_EQ(model::hfToGgufName("model.layers.x.mlp.up_proj.weight"), "");
  EXPECT_EQ(model::hfToGgufName("model.layers.0.self_attn.rotary_emb.inv_freq"), "");
}

TEST(Safetensors, CorruptHeadersAreBadFileErrors) {
  TempDir dir;
  auto write = [&](const std::string& header, size_t dataBytes, uint64_t claimedLen = 0) {
    const auto p = dir.path() / "m.safetensors";
    std::ofstream out(p, std::ios::binary);
    uint64_t len = claimedLen ? claimedLen : header.size();
    out.write(reinterpret_cast<const char*>(&len), 8);
    out << header << std::string(dataBytes, '\0');
    return p;
  };
  auto ok = model::SafetensorsFile::open(
      write(R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})", 24));
  ASSERT_TRUE(ok.ok()) << ok.error().describe();
  EXPECT_EQ((*ok)->tensors()[0].shape, (std::vector<uint64_t>{2, 3}));
  const std::pair<std::string, size_t> bad[] = {
      {R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,48]}})", 24},  // past the end
      {R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", 24},  // size != shape
      {R"({"a":{"dtype":"F32","shape":[-2,3],"data_offsets":[0,24]}})", 24},
      {R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[8,0]}})", 24},
      {R"({"a":{"dtype":"F32","shape":[2,3]}})", 24},
      {R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,24]}})", 24},
      {R"(not json)", 24},
  };
  for (const auto& [header, data] : bad) {
    auto r = model::SafetensorsFile::open(write(header, data));
    ASSERT_FALSE(r.ok()) << header;
    EXPECT_EQ(r.error().code, ErrorCode::kBadFile) << header;
  }
  auto huge = model::SafetensorsFile::open(write("{}", 0, 1ull << 62));
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.error().code, ErrorCode::kBadFile);
}

TEST(ModelFile, MissingAndNonModelPathsAreClearErrors) {
  TempDir dir;
  auto missing = ModelFile::open(dir.path() / "nope.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  auto emptyDir = ModelFile::open(dir.path());
  ASSERT_FALSE(emptyDir.ok());
  EXPECT_NE(emptyDir.error().message.find("config.json"), std::string::npos)
      << emptyDir.error().message;
  std::ofstream(dir.path() / "text.gguf") << "hello, this is not a model";
  auto text = ModelFile::open(dir.path() / "text.gguf");
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.error().code, ErrorCode::kBadFile);
}

}  // namespace
}  // namespace kvscope::test
