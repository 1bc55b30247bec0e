// Every kernel against the CPU reference (backend/cpu_ops) on seeded random
// data with odd sizes. Tolerances follow from float32 error analysis: a sum of
// n products carries a relative error of order sqrt(n)*eps in the worst
// realistic case, and GLSL's exp() is allowed 3 + 2|x| ulp.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu_ops.h"
#include "core/float_convert.h"
#include "gpu/weight_kernels.h"
#include "gpu_fixture.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

class KernelTest : public GpuTest {};

TEST_F(KernelTest, ConvertF16ToF32IsExact) {
  for (uint32_t n : {1u, 2u, 7u, 255u, 4097u}) {
    std::vector<uint16_t> halves(n + (n & 1));
    auto src = randomFloats(n, 11 + n, -300.0f, 300.0f);
    for (uint32_t i = 0; i < n; ++i) halves[i] = floatToFp16(src[i]);
    gpu::Buffer in = upload(halves);
    gpu::Buffer out = deviceBuffer(n * sizeof(float));
    ASSERT_TRUE(rec().begin().ok());
    ASSERT_TRUE(kernels().convertF16ToF32(rec(), in, out, n).ok());
    ASSERT_TRUE(rec().submitAndWait().ok());
    auto got = download<float>(out, n);
    for (uint32_t i = 0; i < n; ++i)
      ASSERT_EQ(got[i], fp16ToFloat(halves[i])) << "n=" << n << " i=" << i;
  }
}

TEST_F(KernelTest, ConvertF32ToF16WithinOneUlp) {
  // Vulkan leaves the rounding of packHalf2x16 to the driver; lavapipe rounds
  // to nearest even like the reference, others may truncate: allow 1 ulp.
  for (uint32_t n : {1u, 3u, 64u, 1001u}) {
    auto src = randomFloats(n, 5 + n, -1000.0f, 1000.0f);
    gpu::Buffer in = upload(src);
    gpu::Buffer out = deviceBuffer(((n + 1) / 2) * 4);
    ASSERT_TRUE(rec().begin().ok());
    ASSERT_TRUE(kernels().convertF32ToF16(rec(), in, out, n).ok());
    ASSERT_TRUE(rec().submitAndWait().ok());
    auto got = download<uint16_t>(out, n);
    for (uint32_t i = 0; i < n; ++i) {
      const int diff = static_cast<int>(got[i]) - static_cast<int>(floatToFp16(src[i]));
      ASSERT_LE(std::abs(diff), 1) << "n=" << n << " i=" << i << " value " << src[i];
    }
  }
}

TEST_F(KernelTest, RmsnormMatchesReference) {
  struct Case {
    uint32_t n, rows;
  };
  for (const Case c :
       {Case{1, 1}, Case{8, 3}, Case{48, 5}, Case{80, 1}, Case{257, 7}, Case{4096, 2}}) {
    auto x = randomFloats(size_t{c.n} * c.rows, c.n + c.rows, -3.0f, 3.0f);
    auto w = randomFloats(c.n, c.n * 3, 0.5f, 1.5f);
    gpu::Buffer xb = upload(x), wb = upload(w), yb = deviceBuffer(x.size() * sizeof(float));
    ASSERT_TRUE(rec().begin().ok());
    ASSERT_TRUE(kernels().rmsnorm(rec(), xb, &wb, yb, c.n, c.rows, 1e-5f).ok());
    ASSERT_TRUE(rec().submitAndWait().ok());
    auto got = download<float>(yb, x.size());
    std::vector<float> ref(x.size());
    cpu::rmsnorm(x, w, ref, c.n, c.rows, 1e-5f);
    for (size_t i = 0; i < ref.size(); ++i) {
      ASSERT_NEAR(got[i], ref[i], 1e-5f * std::fabs(ref[i]) + 1e-6f) << "n=" << c.n << " i=" << i;
    }
  }
}

// Many short rows: the shape of the per-head q/k norms of a prefill. A CPU
// device's few workgroups each loop over thousands of rows; lavapipe stopped
// an invocation after 65535 loop iterations and left the last rows unwritten
// (DeviceInfo::loopIterationLimit) until the workgroups were sized under it.
TEST_F(KernelTest, RmsnormAndSoftmaxReachTheLastOfManyRows) {
  const uint32_t n = 128, rows = 65536;
  auto x = randomFloats(size_t{n} * rows, 21, -3.0f, 3.0f);
  auto w = randomFloats(n, 22, 0.5f, 1.5f);
  gpu::Buffer xb = upload(x), wb = upload(w), normed = deviceBuffer(x.size() * sizeof(float)),
              probs = deviceBuffer(x.size() * sizeof(float));
  ASSERT_TRUE(rec().begin().ok());
  ASSERT_TRUE(kernels().rmsnorm(rec(), xb, &wb, normed, n, rows, 1e-5f).ok());
  ASSERT_TRUE(kernels().softmax(rec(), xb, probs, n, rows, 1.0f).ok());
  ASSERT_TRUE(rec().submitAndWait().ok());
  const auto gotNorm = download<float>(normed, x.size()),
             gotProbs = download<float>(probs, x.size());
  std::vector<float> refNorm(x.size()), refProbs(x.size());
  cpu::rmsnorm(x, w, refNorm, n, rows, 1e-5f);
  cpu::softmax(x, refProbs, n, rows, 1.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_NEAR(gotNorm[i], refNorm[i], 1e-5f * std::fabs(refNorm[i]) + 1e-6f)
        << "rmsnorm row " << i / n;
    ASSERT_NEAR(gotProbs[i], refProbs[i], 2e-5f * refProbs[i] + 1e-7f) << "softmax row " << i / n;
  }
}

TEST_F(KernelTest, SoftmaxMatchesReferenceAndSumsToOne) {
  struct Case {
    uint32_t n, rows;
    float scale;
  };
  for (const Case c : {Case{1, 1, 1.0f}, Case{7, 4, 0.5f}, Case{64, 8, 0.125f}, Case{1000, 3, 1.0f},
                       Case{4097, 2, 0.0884f}}) {
    auto x = randomFloats(size_t{c.n} * c.rows, c.n + 99, -20.0f, 20.0f);
    gpu::Buffer xb = upload(x), yb = deviceBuffer(x.size() * sizeof(float));
    ASSERT_TRUE(rec().begin().ok());
    ASSERT_TRUE(kernels().softmax(rec(), xb, yb, c.n, c.rows, c.scale).ok());
    ASSERT_TRUE(rec().submitAndWait().ok());
    auto got = download<float>(yb, x.size());
    std::vector<float> ref(x.size());
    cpu::softmax(x, ref, c.n, c.rows, c.scale);
    for (uint32_t r = 0; r < c.rows; ++r) {
      double sum = 0.0;
      for (uint32_t i = 0; i < c.n; ++i) {
        const size_t k = size_t{r} * c.n + i;
        ASSERT_NEAR(got[k], ref[k], 2e-5f * ref[k] + 1e-7f) << "n=" << c.n << " i=" << i;
        sum += got[k];
      }
      EXPECT_NEAR(sum, 1.0, 1e-5);
    }
  }
}

TEST_F(KernelTest, SoftmaxInPlace) {
  auto x = randomFloats(3 * 50, 4, -5.0f, 5.0f);
  gpu::Buffer b = upload(x);
  ASSERT_TRUE(rec().begin().ok());
  ASSERT_TRUE(kernels().softmax(rec(), b, b, 50, 3, 1.0f).ok());
  ASSERT_TRUE(rec().submitAndWait().ok());
  auto got = download<float>(b, x.size());
  std::vector<float> ref(x.size());
  cpu::softmax(x, ref, 50, 3);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(got[i], ref[i], 2e-5f * ref[i] + 1e-7f);
}

TEST_F(KernelTest, ChainedDispatchesInOneStepWithBarriers) {
  // rmsnorm -> matvec -> softmax recorded into one command buffer, as a
  // forward step will be; proves barriers order dependent dispatches.
  const uint32_t n = 96, rows = 40;
  auto x = randomFloats(n, 1), nw = randomFloats(n, 2, 0.5f, 1.5f), w = randomFloats(rows * n, 3);
  gpu::Buffer xb = upload(x), nwb = upload(nw), wb = upload(w);
  gpu::Buffer normed = deviceBuffer(n * 4), logits = deviceBuffer(rows * 4),
              probs = deviceBuffer(rows * 4);
  ASSERT_TRUE(rec().begin().ok());
  ASSERT_TRUE(kernels().rmsnorm(rec(), xb, &nwb, normed, n, 1, 1e-5f).ok());
  rec().barrier();
  gpu::WeightKernels weights(ctx());
  ASSERT_TRUE(weights.matvec(rec(), gguf::TensorType::kF32, wb, normed, logits, rows, n).ok());
  rec().barrier();
  ASSERT_TRUE(kernels().softmax(rec(), logits, probs, rows, 1, 1.0f).ok());
  ASSERT_TRUE(rec().submitAndWait().ok());
  std::vector<float> refNorm(n), refLogits(rows), refProbs(rows);
  cpu::rmsnorm(x, nw, refNorm, n, 1, 1e-5f);
  cpu::matvec(w, refNorm, refLogits, rows, n);
  cpu::softmax(refLogits, refProbs, rows, 1);
  auto got = download<float>(probs, rows);
  for (uint32_t i = 0; i < rows; ++i) ASSERT_NEAR(got[i], refProbs[i], 1e-4f * refProbs[i] + 1e-7f);
  EXPECT_EQ(rec().dispatchCount(), 3u);
}

TEST_F(KernelTest, TimestampsReportEveryKernelClass) {
  if (ctx().timestampPeriodNs() <= 0) GTEST_SKIP() << "device has no compute timestamps";
  auto x = randomFloats(4096, 1);
  gpu::Buffer a = upload(x), b = deviceBuffer(4096 * 4), c = deviceBuffer(4096 * 4);
  ASSERT_TRUE(rec().begin().ok());
  ASSERT_TRUE(kernels().convertF32ToF16(rec(), a, b, 4096).ok());
  rec().barrier();
  ASSERT_TRUE(kernels().softmax(rec(), a, c, 4096, 1, 1.0f).ok());
  rec().barrier();
  ASSERT_TRUE(kernels().convertF32ToF16(rec(), c, b, 4096).ok());
  ASSERT_TRUE(rec().submitAndWait().ok());
  const auto& times = rec().kernelTimes();
  ASSERT_EQ(times.size(), 2u);
  EXPECT_EQ(times[0].kernelClass, "convert");
  EXPECT_EQ(times[0].dispatches, 2u);
  EXPECT_EQ(times[1].kernelClass, "softmax");
  EXPECT_EQ(times[1].dispatches, 1u);
  double sum = 0.0;
  for (const auto& t : times) {
    EXPECT_GE(t.gpuMs, 0.0);
    sum += t.gpuMs;
  }
  EXPECT_NEAR(sum, rec().lastGpuMs(), 1e-9);
  EXPECT_GT(rec().lastGpuMs(), 0.0);
}

}  // namespace
}  // namespace kvscope::test

namespace kvscope::test {
namespace {

TEST_F(KernelTest, RopeMatchesTheCpuForBothPairings) {
  struct Case {
    uint32_t n, heads, headDim, dims;
  };
  for (bool neox : {false, true}) {
    for (const Case c :
         {Case{1, 1, 8, 8}, Case{5, 4, 64, 64}, Case{3, 2, 80, 32}, Case{2, 8, 128, 128}}) {
      const uint32_t pos0 = 37;
      auto x = randomFloats(size_t{c.n} * c.heads * c.headDim, c.headDim + c.n, -2.0f, 2.0f);
      std::vector<float> table(size_t{c.n} * c.dims);
      const model::RopeSpec spec{.dims = c.dims, .theta = 10000.0f};
      cpu::ropeTable(spec, pos0, c.n, table);
      auto ref = x;
      for (uint32_t t = 0; t < c.n; ++t) {
        for (uint32_t h = 0; h < c.heads; ++h) {
          cpu::ropeApply({&ref[(size_t{t} * c.heads + h) * c.headDim], c.headDim}, c.dims, neox,
                         std::span<const float>(table).subspan(size_t{t} * c.dims, c.dims));
        }
      }
      gpu::Buffer xb = upload(x), tb = upload(table);
      ASSERT_TRUE(rec().begin().ok());
      ASSERT_TRUE(kernels().rope(rec(), xb, tb, c.n, c.heads, c.headDim, c.dims, neox).ok());
      ASSERT_TRUE(rec().submitAndWait().ok());
      auto got = download<float>(xb, x.size());
      // Same products and sums in the same order: equal up to FMA contraction.
      for (size_t i = 0; i < x.size(); ++i)
        ASSERT_NEAR(got[i], ref[i], 1e-6f * (1.0f + std::fabs(ref[i]))) << i;
    }
  }
}

// The router's picks against a reference written from the definitions: the
// `used` largest scores (NaN lowest, ties to the lower index) by a stable
// sort, weighted by the softmax over every expert renormalised over the
// picks, or by the softmax over the picks alone; then scaled. Scores with
// ties, a NaN score and 70 tokens (three workgroups of 32).
TEST_F(KernelTest, MoeRoutePicksTheTopExpertsAndWeighsThem) {
  struct Case {
    uint32_t experts, used;
    bool softmaxFirst;
    float scale;
  };
  for (const Case c : {Case{8, 4, false, 1.0f}, Case{8, 2, true, 1.0f}, Case{128, 8, true, 2.5f},
                       Case{5, 5, false, 1.0f}}) {
    const uint32_t n = 70;
    auto scores = randomFloats(size_t{n} * c.experts, c.experts + c.used, -4.0f, 4.0f);
    scores[1] = scores[2];  // token 0: a tie
    // Token 1: a NaN, which a softmax over every expert spreads to all (as on
    // the CPU), so only where the softmax is over the picks, which skip it.
    if (!c.softmaxFirst && c.used < c.experts) scores[c.experts + 3] = std::nanf("");
    for (uint32_t e = 0; e < c.experts; ++e) scores[2 * c.experts + e] = 0.5f;  // all tied
    gpu::Buffer sb = upload(scores), ids = deviceBuffer(size_t{n} * c.used * 4),
                weights = deviceBuffer(size_t{n} * c.used * 4);
    ASSERT_TRUE(rec().begin().ok());
    ASSERT_TRUE(
        kernels()
            .moeRoute(rec(), sb, ids, weights, n, c.experts, c.used, c.softmaxFirst, c.scale)
            .ok());
    ASSERT_TRUE(rec().submitAndWait().ok());
    const auto gotIds = download<uint32_t>(ids, size_t{n} * c.used);
    const auto gotWeights = download<float>(weights, size_t{n} * c.used);
    for (uint32_t t = 0; t < n; ++t) {
      const float* s = &scores[size_t{t} * c.experts];
      std::vector<uint32_t> order(c.experts);
      for (uint32_t e = 0; e < c.experts; ++e) order[e] = e;
      const auto key = [&](uint32_t e) { return std::isnan(s[e]) ? -1e30 : double{s[e]}; };
      std::stable_sort(order.begin(), order.end(),
                       [&](uint32_t a, uint32_t b) { return key(a) > key(b); });
      double all = 0.0, picked = 0.0;
      for (uint32_t e = 0; e < c.experts; ++e) all += std::isnan(s[e]) ? 0.0 : std::exp(s[e]);
      for (uint32_t k = 0; k < c.used; ++k) picked += std::exp(s[order[k]]);
      double sumOfProbs = 0.0;
      for (uint32_t k = 0; k < c.used; ++k) sumOfProbs += std::exp(s[order[k]]) / all;
      for (uint32_t k = 0; k < c.used; ++k) {
        const size_t i = size_t{t} * c.used + k;
        ASSERT_EQ(gotIds[i], order[k]) << "token " << t << " slot " << k;
        const double p = std::exp(s[order[k]]);
        const double want = (c.softmaxFirst ? p / all / sumOfProbs : p / picked) * c.scale;
        ASSERT_NEAR(gotWeights[i], want, 1e-5 * want) << "token " << t << " slot " << k;
      }
    }
  }
}

// The pairs grouped by expert: each expert's count and its pairs in
// increasing order, against a host grouping; an expert nobody picked has 0.
TEST_F(KernelTest, MoeGroupListsEachExpertsPairsInOrder) {
  constexpr uint32_t kExperts = 70, kUsed = 3, kTokens = 37;  // experts: 3 workgroups of 32
  std::vector<uint32_t> ids;
  for (uint32_t t = 0; t < kTokens; ++t)
    for (uint32_t k = 0; k < kUsed; ++k) ids.push_back((t * 13 + k * 29) % (kExperts - 5));
  gpu::Buffer idb = upload(ids), groups = deviceBuffer(size_t{kExperts} * (1 + kTokens) * 4);
  ASSERT_TRUE(rec().begin().ok());
  ASSERT_TRUE(kernels().moeGroup(rec(), idb, groups, kTokens, kExperts, kUsed).ok());
  ASSERT_TRUE(rec().submitAndWait().ok());
  const auto got = download<uint32_t>(groups, size_t{kExperts} * (1 + kTokens));
  for (uint32_t e = 0; e < kExperts; ++e) {
    std::vector<uint32_t> want;
    for (uint32_t p = 0; p < ids.size(); ++p)
      if (ids[p] == e) want.push_back(p);
    ASSERT_EQ(got[e], want.size()) << "expert " << e;
    const std::vector<uint32_t> list(got.begin() + kExperts + e * kTokens,
                                     got.begin() + kExperts + e * kTokens + got[e]);
    EXPECT_EQ(list, want) << "expert " << e;
  }
}

// More picks per token than the kernel keeps in registers, or than there are
// experts, are refused before anything is recorded.
TEST_F(KernelTest, MoeRouteRefusesMorePicksThanItHolds) {
  gpu::Buffer scores = deviceBuffer(128 * 4), ids = deviceBuffer(128 * 4),
              weights = deviceBuffer(128 * 4);
  ASSERT_TRUE(rec().begin().ok());
  const Status tooMany = kernels().moeRoute(rec(), scores, ids, weights, 1, 128, 65, true, 1.0f);
  const Status moreThanExperts =
      kernels().moeRoute(rec(), scores, ids, weights, 1, 4, 5, true, 1.0f);
  ASSERT_TRUE(rec().submitAndWait().ok());
  ASSERT_FALSE(tooMany.ok());
  EXPECT_EQ(tooMany.error().code, ErrorCode::kInvalidArgument);
  ASSERT_FALSE(moreThanExperts.ok());
  EXPECT_EQ(moreThanExperts.error().code, ErrorCode::kInvalidArgument);
}

// The weighted sum of each token's expert products, written out and added to
// the residual, against double-precision sums.
TEST_F(KernelTest, MoeSumWeighsEachSlotIntoTheResidual) {
  for (uint32_t used : {1u, 4u}) {
    const uint32_t n = 3, width = 300;
    const auto products = randomFloats(size_t{n} * used * width, used + 7);
    const auto weights = randomFloats(size_t{n} * used, used + 8, 0.0f, 1.0f);
    const auto residual = randomFloats(size_t{n} * width, used + 9);
    gpu::Buffer pb = upload(products), wb = upload(weights), rb = upload(residual),
                out = deviceBuffer(size_t{n} * width * 4);
    const gpu::BufferRange residualRange(rb);
    ASSERT_TRUE(rec().begin().ok());
    ASSERT_TRUE(kernels().moeSum(rec(), pb, wb, out, &residualRange, n, used, width).ok());
    ASSERT_TRUE(rec().submitAndWait().ok());
    const auto gotOut = download<float>(out, size_t{n} * width);
    const auto gotResidual = download<float>(rb, size_t{n} * width);
    for (uint32_t t = 0; t < n; ++t) {
      for (uint32_t i = 0; i < width; ++i) {
        double want = 0.0;
        for (uint32_t k = 0; k < used; ++k)
          want += double{weights[t * used + k]} * products[(size_t{t} * used + k) * width + i];
        const size_t at = size_t{t} * width + i;
        ASSERT_NEAR(gotOut[at], want, 1e-6) << "token " << t << " value " << i;
        ASSERT_NEAR(gotResidual[at], residual[at] + want, 1e-6) << "token " << t << " value " << i;
      }
    }
  }
}

}  // namespace
}  // namespace kvscope::test
