// VulkanBackend against CpuBackend, teacher-forced: both get the same tokens
// (a prefill, then one token at a time) and every step's logits are compared.
//
// Tolerances: weights are dequantized to the same floats on both sides, so
// the backends differ only in float32 summation order (~1e-6 relative) — but
// the query and softmax weights are rounded to f16 in f16-cache attention, and
// a value within 1e-7 of an f16 rounding midpoint can round differently,
// moving later logits by up to ~1e-3 of their spread. So each step is checked
// against max |diff| <= 2e-3 * spread of the reference logits, the mean over
// all logits against 1e-4 * spread, and the argmax must agree on every step.
#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include <gtest/gtest.h>

#include "backend/cpu_backend.h"
#include "backend/logit_comparison.h"
#include "backend/vulkan_backend.h"
#include "model/default_model.h"
#include "model/synthetic_model.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

using backend::LogitComparison;

LogitComparison compareBackends(std::shared_ptr<const model::ModelFile> m, uint32_t prefill,
                                uint32_t decode, std::optional<uint32_t> submitEvery = {},
                                uint32_t* parts = nullptr) {
  LogitComparison out;
  // Random weights give near ties now and then (a Q4_0 model's top two 3e-6
  // of the spread apart): a flip within 1e-4, the backends' float-order
  // differences, is a tie.
  out.tieRel = 1e-4;
  auto cpu = backend::CpuBackend::create(m);
  EXPECT_TRUE(cpu.ok()) << cpu.error().describe();
  backend::VulkanBackendOptions vo;
  vo.validation = true;
  vo.submitEvery = submitEvery;
  vo.timing = !submitEvery;  // a timed step is one submission
  auto gpu = backend::VulkanBackend::create(m, vo);
  EXPECT_TRUE(gpu.ok()) << gpu.error().describe();
  if (!cpu.ok() || !gpu.ok()) return out;
  std::vector<int32_t> tokens;
  for (uint32_t i = 0; i < prefill + decode; ++i)
    tokens.push_back(static_cast<int32_t>((i * 131 + 7) % m->config().nVocab));
  tokens[0] = 1;
  backend::Logits a, b;
  for (uint32_t s = 0; s <= decode; ++s) {
    std::span<const int32_t> batch =
        s == 0 ? std::span(tokens).first(prefill) : std::span(&tokens[prefill + s - 1], 1);
    EXPECT_TRUE((*cpu)->forward({batch}, a).ok());
    auto st = (*gpu)->forward({batch}, b);
    EXPECT_TRUE(st.ok()) << st.error().describe();
    if (!st.ok()) return out;
    out.add(a.last(), b.last());
    if (parts) *parts = std::min(*parts, (*gpu)->lastStepParts());
  }
  EXPECT_EQ((*gpu)->context().validationMessages(), 0u);
  return out;
}

// The model at `path`, or null when it does not open.
std::shared_ptr<const model::ModelFile> openShared(const std::filesystem::path& path) {
  auto m = model::ModelFile::open(path);
  if (!m.ok()) return nullptr;
  return std::shared_ptr<const model::ModelFile>(std::move(m).value());
}

void expectClose(const LogitComparison& c, const std::string& what) {
  std::printf("%-28s steps %u  max %.2e  mean %.2e (of the logit spread)  argmax %u/%u\n",
              what.c_str(), c.steps, c.worstRel, c.meanRel, c.argmaxAgree, c.steps);
  EXPECT_LE(c.worstRel, 2e-3) << what;
  EXPECT_LE(c.meanRel, 1e-4) << what;
  EXPECT_EQ(c.argmaxAgree, c.steps) << what;
}

TEST(VulkanParity, Stories260k) {
  const auto path = sharedFile("models/stories260K.gguf");
  KVS_REQUIRE_FIXTURE(path);
  const auto m = openShared(path);
  ASSERT_TRUE(m);
  expectClose(compareBackends(m, 16, 64), "stories260K");
}

// A step submitted in parts of 3 dispatches (as a GPU gets it, with parts of
// kGpuSubmitEvery) computes the same logits: no part is lost or reordered. (The
// barrier that opens each part orders it after the earlier submissions; the
// validation layer of Debian 12 does not check hazards across submissions, and
// lavapipe runs them one after another, so that barrier is not tested here.)
TEST(VulkanParity, Stories260kSubmittedInParts) {
  const auto path = sharedFile("models/stories260K.gguf");
  KVS_REQUIRE_FIXTURE(path);
  const auto m = openShared(path);
  ASSERT_TRUE(m);
  uint32_t parts = UINT32_MAX;  // the fewest of any step
  expectClose(compareBackends(m, 16, 16, 3, &parts), "stories260K in parts");
  EXPECT_GE(parts, 10u);
}

TEST(VulkanBackend, ReportsDeviceTimePerKernelClass) {
  const auto path = sharedFile("models/stories260K.gguf");
  KVS_REQUIRE_FIXTURE(path);
  const auto m = openShared(path);
  ASSERT_TRUE(m);
  auto b = backend::VulkanBackend::create(m);
  ASSERT_TRUE(b.ok()) << b.error().describe();
  if (!(*b)->context().timestampPeriodNs()) GTEST_SKIP() << "device has no compute timestamps";
  backend::Logits logits;
  const std::vector<int32_t> prompt = {1, 403, 407};
  ASSERT_TRUE((*b)->forward({prompt}, logits).ok());
  const auto timings = (*b)->kernelTimings();
  std::set<std::string> classes;
  for (const auto& t : timings) {
    classes.insert(t.kernelClass);
    EXPECT_GE(t.ms, 0.0);
    EXPECT_GT(t.dispatches, 0u);
  }
  // Every block of the forward pass shows up: norms, RoPE, the products (which
  // hold the residual adds and the SwiGLU gate since they were folded in).
  for (const char* c : {"norm", "rope", "matmul"}) EXPECT_TRUE(classes.count(c)) << c;
  for (const char* c : {"add", "ffn_act"}) EXPECT_FALSE(classes.count(c)) << c << " is folded";
  EXPECT_GE(timings.size(), 6u) << "weights and attention kernels are timed too";
}

// With timingEvery 3 steps 1 and 4 are timed, the rest keep the last timed
// step's figures; an untimed step goes out in parts, a timed one in one.
TEST(VulkanBackend, TimesEveryNthStepInOneSubmission) {
  const auto path = sharedFile("models/stories260K.gguf");
  KVS_REQUIRE_FIXTURE(path);
  const auto m = openShared(path);
  ASSERT_TRUE(m);
  auto b = backend::VulkanBackend::create(m, {.timing = true, .timingEvery = 3, .submitEvery = 3});
  ASSERT_TRUE(b.ok()) << b.error().describe();
  if (!(*b)->context().timestampPeriodNs()) GTEST_SKIP() << "device has no compute timestamps";
  backend::Logits logits;
  const std::vector<int32_t> prompt = {1, 403, 407};
  ASSERT_TRUE((*b)->forward({prompt}, logits).ok());  // step 1: timed
  EXPECT_EQ((*b)->lastStepParts(), 1u);
  const auto timed = (*b)->kernelTimings();
  ASSERT_FALSE(timed.empty());
  for (int32_t token : {50, 60}) {  // steps 2 and 3: untimed
    ASSERT_TRUE((*b)->forward({std::span(&token, 1)}, logits).ok());
    EXPECT_GT((*b)->lastStepParts(), 1u);
    EXPECT_EQ((*b)->kernelTimings().size(), timed.size());
    EXPECT_EQ((*b)->kernelTimings()[0].ms, timed[0].ms) << "the last timed step's figures";
  }
  const int32_t token = 70;  // step 4: timed again
  ASSERT_TRUE((*b)->forward({std::span(&token, 1)}, logits).ok());
  EXPECT_EQ((*b)->lastStepParts(), 1u);
  EXPECT_NE((*b)->kernelTimings()[0].ms, timed[0].ms);
}

TEST(VulkanParity, TinyStoriesHuggingFace) {
  const auto path = sharedFile("models/tinystories-656k");
  KVS_REQUIRE_FIXTURE(path);
  const auto m = openShared(path);
  ASSERT_TRUE(m);
  expectClose(compareBackends(m, 9, 64), "tinystories-656k (HF)");
}

// The demo model kvscope ships (head_dim 64, GQA 2:1, F16 weights), when present.
TEST(VulkanParity, DemoModel) {
  const auto path = model::findDefaultModel();
  if (!path.ok()) GTEST_SKIP() << path.error().message;
  auto m = model::ModelFile::open(*path);
  ASSERT_TRUE(m.ok()) << m.error().describe();
  expectClose(
      compareBackends(std::shared_ptr<const model::ModelFile>(std::move(m).value()), 16, 64),
      "kvscope-demo");
}

class SyntheticParity : public ::testing::TestWithParam<std::tuple<std::string, gguf::TensorType>> {
};

TEST_P(SyntheticParity, EveryWeightType) {
  const auto& [arch, type] = GetParam();
  model::SyntheticModelSpec spec;
  spec.architecture = arch;
  spec.nLayer = 2;
  spec.nEmbd = 256;
  spec.nFf = 512;
  spec.nHead = 4;
  spec.nHeadKv = 1;  // GQA 4:1
  spec.headDim = 64;
  spec.nVocab = 512;
  spec.weightType = type;
  const auto path =
      std::filesystem::temp_directory_path() /
      ("kvscope-parity-" + arch + "-" + std::string(gguf::traits(type).name) + ".gguf");
  ASSERT_TRUE(model::writeSyntheticModel(spec, path).ok());
  auto m = model::ModelFile::open(path);
  ASSERT_TRUE(m.ok()) << m.error().describe();
  auto c = compareBackends(std::shared_ptr<const model::ModelFile>(std::move(m).value()), 7, 64);
  std::filesystem::remove(path);
  expectClose(c, arch + " " + std::string(gguf::traits(type).name));
}

INSTANTIATE_TEST_SUITE_P(
    Types, SyntheticParity,
    ::testing::Combine(::testing::Values("llama"),
                       ::testing::Values(gguf::TensorType::kF32, gguf::TensorType::kF16,
                                         gguf::TensorType::kBF16, gguf::TensorType::kQ8_0,
                                         gguf::TensorType::kQ4_0, gguf::TensorType::kQ4_1,
                                         gguf::TensorType::kQ5_0, gguf::TensorType::kQ5_1,
                                         gguf::TensorType::kQ4_K, gguf::TensorType::kQ5_K,
                                         gguf::TensorType::kQ6_K, gguf::TensorType::kIQ4_NL,
                                         gguf::TensorType::kIQ4_XS, gguf::TensorType::kMXFP4)),
    [](const auto& p) { return std::string(gguf::traits(std::get<1>(p.param)).name); });

// A Q4_K_M-style mix as llama.cpp's quantizer writes it: Q4_K matrices,
// Q6_K for some ffn_down, Q8_0 or Q5_1 for attn_v, and the 32-value fall-back
// types for tensors whose rows are not a multiple of 256 (Qwen's and
// Gemma's odd widths): Q5_0, Q5_1, Q4_1 here on tensors of a width-288 model.
TEST(SyntheticParityMix, AQ4KMStyleMixWithFallBackTypes) {
  model::SyntheticModelSpec spec;
  spec.nLayer = 2;
  spec.nEmbd = 288;  // not a multiple of 256: the k-quants cannot take these rows
  spec.nFf = 512;
  spec.nHead = 4;
  spec.nHeadKv = 1;
  spec.headDim = 72;
  spec.nVocab = 512;
  spec.weightType = gguf::TensorType::kQ5_0;
  using gguf::TensorType;
  spec.tensorTypes = {
      {"blk.0.ffn_down.weight", TensorType::kQ4_K}, {"blk.1.ffn_down.weight", TensorType::kQ6_K},
      {"blk.0.attn_v.weight", TensorType::kQ5_1},   {"blk.1.attn_v.weight", TensorType::kQ8_0},
      {"blk.1.attn_q.weight", TensorType::kQ4_1},   {"output.weight", TensorType::kQ8_0}};
  const auto path = std::filesystem::temp_directory_path() / "kvscope-parity-q4_k_m-mix.gguf";
  ASSERT_TRUE(model::writeSyntheticModel(spec, path).ok());
  auto m = model::ModelFile::open(path);
  ASSERT_TRUE(m.ok()) << m.error().describe();
  auto c = compareBackends(std::shared_ptr<const model::ModelFile>(std::move(m).value()), 7, 64);
  std::filesystem::remove(path);
  expectClose(c, "Q4_K_M-style mix");
}

INSTANTIATE_TEST_SUITE_P(Architectures, SyntheticParity,
                         ::testing::Combine(::testing::Values("qwen2", "qwen3"),
                                            ::testing::Values(gguf::TensorType::kQ8_0)),
                         [](const auto& p) { return std::get<0>(p.param); });

}  // namespace
}  // namespace kvscope::test
