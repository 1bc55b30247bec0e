// The mixture-of-experts log (backend/expert_log.h): counts and the last row's
// experts worked out by hand, a trim taking its rows back out, rows not seen
// counted as unknown; then on a qwen3moe-shaped model the CPU backend's logged
// picks against the router computed here from the file's weights and the
// normed FFN input the backend dumps (softmax, the two largest); and a model
// with Q8_0 experts against the same model with every tensor dequantized to
// F32 (gguf::dequantize), so an expert's slice of quantized blocks is checked.
#include "backend/expert_log.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>

#include <gtest/gtest.h>

#include "backend/cpu_backend.h"
#include "backend/logit_comparison.h"
#include "gguf/dequant.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/synthetic_model.h"
#include "support/synthetic_model_file.h"

namespace kvscope::backend {
namespace {

uint32_t sum(const std::vector<uint32_t>& v) {
  return std::accumulate(v.begin(), v.end(), 0u);
}

TEST(ExpertLog, CountsLastStepBytesAndTrim) {
  // 2 layers, 4 experts, 2 per row; an expert of layer 0 is 100 bytes, of layer 1 10.
  ExpertLog log(4, 2, {100, 10});
  EXPECT_TRUE(log.usage().lastStep.empty());
  const uint32_t rows[3][2][2] = {{{0, 1}, {2, 3}}, {{1, 2}, {3, 3}}, {{1, 0}, {0, 2}}};
  for (uint32_t r = 0; r < 3; ++r)
    for (uint32_t l = 0; l < 2; ++l) log.record(l, r, rows[r][l]);
  ExpertUsage u = log.usage();
  EXPECT_EQ(u.nExpert, 4u);
  EXPECT_EQ(u.rows, 3u);
  EXPECT_EQ(u.counts[0], (std::vector<uint32_t>{2, 3, 1, 0}));
  EXPECT_EQ(u.counts[1], (std::vector<uint32_t>{1, 0, 2, 3}));
  EXPECT_EQ(u.lastStep[0], (std::vector<uint32_t>{1, 0}));
  EXPECT_EQ(u.lastStep[1], (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(u.expertBytes, 4u * 100 + 4u * 10);
  EXPECT_EQ(u.lastStepBytes, 2u * 100 + 2u * 10);

  // Row 1 read one expert twice in layer 1: its weights once.
  log.trim(2);
  u = log.usage();
  EXPECT_EQ(u.rows, 2u);
  EXPECT_EQ(u.counts[0], (std::vector<uint32_t>{1, 2, 1, 0}));
  EXPECT_EQ(u.counts[1], (std::vector<uint32_t>{0, 0, 1, 3}));
  EXPECT_EQ(u.lastStep[1], (std::vector<uint32_t>{3, 3}));
  EXPECT_EQ(u.lastStepBytes, 2u * 100 + 1u * 10);

  // A row run again replaces its picks.
  log.record(0, 1, std::vector<uint32_t>{3, 0});
  EXPECT_EQ(log.usage().counts[0], (std::vector<uint32_t>{2, 1, 0, 1}));

  // Rows the log did not see (a restored cache) are unknown, not counted.
  log.trim(0);
  for (uint32_t l = 0; l < 2; ++l) log.record(l, 5, std::vector<uint32_t>{2, 1});
  u = log.usage();
  EXPECT_EQ(u.rows, 1u);
  EXPECT_EQ(sum(u.counts[0]), 2u);
  EXPECT_EQ(u.lastStep[0], (std::vector<uint32_t>{2, 1}));
}

// A 2-layer qwen3moe-shaped model with 8 experts, 2 per token.
TEST(ExpertLog, CpuBackendLogsTheRoutersPicks) {
  const std::shared_ptr<const model::ModelFile> m =
      test::openSyntheticModel(test::smallMoeSpec(), "experts");
  ASSERT_TRUE(m);
  auto b = CpuBackend::create(m);
  ASSERT_TRUE(b.ok()) << b.error().describe();
  CpuBackend& backend = **b;
  EXPECT_EQ(backend.expertUsage().rows, 0u);

  const std::vector<int32_t> prompt = {1, 40, 77, 120, 5, 260, 33, 90, 151};
  Logits logits;
  backend.setDumpTarget("blk.1.ffn_norm");
  ASSERT_TRUE(backend.forward({prompt}, logits).ok());
  const TensorDump& normed = backend.dumped();
  ASSERT_EQ(normed.rows, prompt.size());
  const ExpertUsage u = backend.expertUsage();
  EXPECT_EQ(u.rows, prompt.size());
  for (const auto& layer : u.counts) EXPECT_EQ(sum(layer), prompt.size() * 2);

  // Layer 1's router for the last token, from the file: softmax of W h, the
  // two largest (ties: the lower expert).
  const model::TensorView* router = m->find("blk.1.ffn_gate_inp.weight");
  ASSERT_NE(router, nullptr);
  ASSERT_EQ(router->type, gguf::TensorType::kF32);
  const float* w = reinterpret_cast<const float*>(router->data.data());
  const float* h = &normed.values[size_t{normed.rows - 1} * normed.width];
  std::vector<double> p(8);
  for (uint32_t e = 0; e < 8; ++e)
    for (uint32_t i = 0; i < 64; ++i) p[e] += double(w[e * 64 + i]) * h[i];
  const double top = *std::max_element(p.begin(), p.end());
  for (double& v : p) v = std::exp(v - top);
  std::vector<uint32_t> order(8);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t c) { return p[a] > p[c]; });
  ASSERT_EQ(u.lastStep.size(), 2u);
  EXPECT_EQ(u.lastStep[1], (std::vector<uint32_t>{order[0], order[1]}));

  // One expert's gate, up and down weights, F32: (64 * 32 * 3) * 4 bytes.
  EXPECT_EQ(u.expertBytes, 2u * 8 * 64 * 32 * 3 * 4);
  EXPECT_LE(u.lastStepBytes, 2u * 2 * 64 * 32 * 3 * 4);
  EXPECT_GE(u.lastStepBytes, 2u * 1 * 64 * 32 * 3 * 4);

  ASSERT_TRUE(backend.trim(4).ok());
  for (const auto& layer : backend.expertUsage().counts) EXPECT_EQ(sum(layer), 4u * 2);
}

// Logits for every position of `tokens` on the CPU backend (exact products).
std::vector<float> logitsOf(const std::filesystem::path& path, const std::vector<int32_t>& tokens) {
  auto file = model::ModelFile::open(path);
  EXPECT_TRUE(file.ok()) << file.error().describe();
  if (!file.ok()) return {};
  auto b = CpuBackend::create(std::shared_ptr<const model::ModelFile>(std::move(file).value()));
  EXPECT_TRUE(b.ok()) << b.error().describe();
  if (!b.ok()) return {};
  Logits logits;
  EXPECT_TRUE((*b)->forward({tokens, true}, logits).ok());
  return logits.values;
}

TEST(ExpertLog, QuantizedExpertsEqualTheirDequantizedCopy) {
  model::SyntheticModelSpec spec = test::smallMoeSpec();
  spec.nFfExp = 64;
  spec.weightType = gguf::TensorType::kQ8_0;
  const auto dir = std::filesystem::temp_directory_path();
  const auto q8 = dir / ("kvscope-experts-q8-" + std::to_string(::getpid()) + ".gguf");
  const auto f32 = dir / ("kvscope-experts-f32-" + std::to_string(::getpid()) + ".gguf");
  ASSERT_TRUE(model::writeSyntheticModel(spec, q8).ok());
  {
    auto file = gguf::GgufFile::open(q8);
    ASSERT_TRUE(file.ok()) << file.error().describe();
    gguf::GgufWriter w;
    for (const gguf::KeyValue& kv : (*file)->metadata()) w.set(kv.key, kv.value);
    for (const gguf::TensorInfo& t : (*file)->tensors()) {
      std::vector<float> values(t.elements());
      ASSERT_TRUE(gguf::dequantize(t.type, (*file)->tensorData(t), values).ok()) << t.name;
      std::vector<uint8_t> bytes(values.size() * 4);
      std::memcpy(bytes.data(), values.data(), bytes.size());
      ASSERT_TRUE(w.addTensor(t.name, t.shape, gguf::TensorType::kF32, std::move(bytes)).ok());
    }
    auto image = w.toBytes();
    ASSERT_TRUE(image.ok());
    std::ofstream(f32, std::ios::binary)
        .write(reinterpret_cast<const char*>(image->data()),
               static_cast<std::streamsize>(image->size()));
  }
  const std::vector<int32_t> tokens = {1, 40, 77, 120, 5, 260, 33, 90, 151, 12};
  const std::vector<float> a = logitsOf(q8, tokens), b = logitsOf(f32, tokens);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  LogitComparison c;
  for (size_t r = 0; r < tokens.size(); ++r) {
    c.add(std::span(b).subspan(r * spec.nVocab, spec.nVocab),
          std::span(a).subspan(r * spec.nVocab, spec.nVocab));
  }
  // The same weights: only the float32 summation order of the quantized
  // kernels differs (cpu_matmul.h bounds it near float rounding).
  EXPECT_EQ(c.argmaxAgree, c.steps);
  EXPECT_LE(c.worstRel, 1e-4);
  std::filesystem::remove(q8);
  std::filesystem::remove(f32);
}

}  // namespace
}  // namespace kvscope::backend
