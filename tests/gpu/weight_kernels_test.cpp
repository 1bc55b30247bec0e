// The weight kernels (gpu/weight_kernels.h) against a double-precision CPU
// product of the CPU-dequantized weights (gguf/dequant.h), for every type in
// every launch shape the device supports, on seeded random data with odd sizes.
//
// Tolerance: the GPU dequantizes with ggml's arithmetic (a fused d * q - m may
// differ from the reference by an ulp), then accumulates `cols` float32
// products in its own order. That sum carries at most about
// cols * eps * sum|w x| of error and in practice sqrt(cols) * eps * sum|w x|
// (random rounding); we allow 4 * sqrt(cols) * eps * sum|w x|, plus 1e-6 for
// outputs that cancel to near 0.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gguf/dequant.h"
#include "gguf/quantize.h"
#include "gpu/weight_kernels.h"
#include "gpu_fixture.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

using gguf::TensorType;
using gpu::WeightShape;

constexpr double kEps = 1.1920929e-7;

struct TypeCase {
  TensorType type;
  const char* name;
  std::vector<uint32_t> cols;
};

const TypeCase kTypes[] = {
    {TensorType::kF32, "F32", {13, 40, 48, 80, 256}},
    {TensorType::kF16, "F16", {13, 40, 48, 80, 256}},
    {TensorType::kBF16, "BF16", {13, 40, 48, 80, 256}},
    {TensorType::kQ8_0, "Q8_0", {32, 256, 800}},
    {TensorType::kQ4_0, "Q4_0", {32, 256, 800}},
    {TensorType::kQ4_1, "Q4_1", {32, 256, 800}},
    {TensorType::kQ5_0, "Q5_0", {32, 256, 800}},
    {TensorType::kQ5_1, "Q5_1", {32, 256, 800}},
    {TensorType::kIQ4_NL, "IQ4_NL", {32, 256, 800}},
    {TensorType::kMXFP4, "MXFP4", {32, 256, 800}},
    {TensorType::kIQ4_XS, "IQ4_XS", {256, 512, 768}},
    {TensorType::kQ4_K, "Q4_K", {256, 512, 768}},
    {TensorType::kQ5_K, "Q5_K", {256, 512, 768}},
    {TensorType::kQ6_K, "Q6_K", {256, 512, 768}},
};
const uint32_t kRows[] = {1, 7, 33, 100, 257};

struct Case {
  TypeCase type;
  WeightShape shape;
};

std::vector<Case> allCases() {
  std::vector<Case> cases;
  for (const TypeCase& t : kTypes) {
    for (WeightShape s : {WeightShape::kCpu, WeightShape::kGpuSubgroup, WeightShape::kGpuShared}) {
      cases.push_back({t, s});
    }
  }
  return cases;
}

std::string caseName(const ::testing::TestParamInfo<Case>& info) {
  std::string name =
      std::string(info.param.type.name) + "_" + gpu::weightShapeName(info.param.shape);
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

void PrintTo(const Case& c, std::ostream* os) {
  *os << caseName({c, 0});
}

// A random weight matrix in `type`: the device copy and the exact floats it holds.
struct Weights {
  std::vector<uint8_t> device;
  std::vector<float> values;  // [rows, cols]
};

Weights makeWeights(TensorType type, uint32_t rows, uint32_t cols, uint32_t seed) {
  const auto source = randomFloats(size_t{rows} * cols, seed);
  auto raw = gguf::quantize(type, source);
  EXPECT_TRUE(raw.ok()) << raw.error().describe();
  Weights w;
  w.values.resize(source.size());
  auto s = gguf::dequantize(type, *raw, w.values);
  EXPECT_TRUE(s.ok()) << s.error().describe();
  auto repacked = gpu::WeightKernels::repack(type, cols, *raw);
  EXPECT_TRUE(repacked.ok()) << repacked.error().describe();
  w.device = std::move(repacked).value();
  return w;
}

// Checks Y[n, rows] against X[n, cols] * W^T computed in double precision.
void expectProductClose(const std::vector<float>& got, const std::vector<float>& w,
                        const std::vector<float>& x, uint32_t n, uint32_t rows, uint32_t cols,
                        const std::string& what) {
  for (uint32_t t = 0; t < n; ++t) {
    for (uint32_t r = 0; r < rows; ++r) {
      double ref = 0.0, mag = 0.0;
      for (uint32_t k = 0; k < cols; ++k) {
        const double p = static_cast<double>(w[size_t{r} * cols + k]) * x[size_t{t} * cols + k];
        ref += p;
        mag += std::fabs(p);
      }
      const double tol = 4.0 * std::sqrt(static_cast<double>(cols)) * kEps * mag + 1e-6;
      ASSERT_NEAR(got[size_t{t} * rows + r], ref, tol) << what << " token " << t << " row " << r;
    }
  }
}

class WeightKernelTest : public GpuTest, public ::testing::WithParamInterface<Case> {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    const WeightShape shape = GetParam().shape;
    if (shape == WeightShape::kCpu && !ctx().info().shaderInt64)
      GTEST_SKIP() << "device has no shaderInt64";
    if (shape == WeightShape::kGpuSubgroup && !ctx().info().subgroupArithmetic) {
      GTEST_SKIP() << "device has no subgroup arithmetic";
    }
  }

  // Records one product through matvec() (`viaMatvec`) or matmul(), runs it,
  // returns Y; `y0` is what Y holds before (for the epilogues that read it).
  std::vector<float> run(gpu::WeightKernels& wk, TensorType type, const Weights& w,
                         const std::vector<float>& x, uint32_t n, uint32_t rows, uint32_t cols,
                         bool viaMatvec, const gpu::Epilogue& epilogue = {},
                         const std::vector<float>& y0 = {}) {
    gpu::Buffer wb = upload(w.device), xb = upload(x),
                yb = y0.empty() ? deviceBuffer(size_t{n} * rows * sizeof(float)) : upload(y0);
    EXPECT_TRUE(rec().begin().ok());
    const Status s = viaMatvec ? wk.matvec(rec(), type, wb, xb, yb, rows, cols, epilogue)
                               : wk.matmul(rec(), type, wb, xb, yb, n, rows, cols, epilogue);
    EXPECT_TRUE(s.ok()) << s.error().describe();
    EXPECT_TRUE(rec().submitAndWait().ok());
    return download<float>(yb, size_t{n} * rows);
  }
};

TEST_P(WeightKernelTest, MatvecMatchesReference) {
  const auto& [tc, shape] = GetParam();
  gpu::WeightKernels wk(ctx(), shape);
  for (uint32_t cols : tc.cols) {
    for (uint32_t rows : kRows) {
      const Weights w = makeWeights(tc.type, rows, cols, rows * 131 + cols);
      const auto x = randomFloats(cols, cols + 17);
      const auto got = run(wk, tc.type, w, x, 1, rows, cols, true);
      expectProductClose(got, w.values, x, 1, rows, cols,
                         fmt::format("{} matvec {}x{}", tc.name, rows, cols));
      if (HasFatalFailure()) return;
    }
  }
}

// Every launch bench-kernels can sweep computes the same product: workgroups
// narrower than, equal to and wider than a subgroup, rows per group that do
// and do not divide the row count.
TEST_P(WeightKernelTest, MatvecMatchesReferenceAtEveryLaunch) {
  const auto& [tc, shape] = GetParam();
  if (shape == WeightShape::kCpu) GTEST_SKIP() << "the CPU shape has no matvec launch";
  if (tc.type != TensorType::kQ8_0 && tc.type != TensorType::kQ4_K)
    GTEST_SKIP() << "the launch is type-independent; checked on Q8_0 and Q4_K";
  const uint32_t cols = tc.cols.back();
  // A workgroup of one subgroup too (its sum needs no shared memory).
  for (uint32_t wg : {ctx().info().subgroupSize, 32u, 128u, 256u}) {
    for (uint32_t perGroup : {1u, 3u, 8u}) {
      gpu::WeightKernels wk(ctx(), shape, gpu::MatvecLaunch{.workgroup = wg, .rows = perGroup});
      for (uint32_t rows : {7u, 100u}) {
        const Weights w = makeWeights(tc.type, rows, cols, rows + wg + perGroup);
        const auto x = randomFloats(cols, cols + wg);
        const auto got = run(wk, tc.type, w, x, 1, rows, cols, true);
        expectProductClose(got, w.values, x, 1, rows, cols,
                           fmt::format("{} matvec {}x{} wg {} rows {}", tc.name, rows, cols, wg,
                                       perGroup));
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST_P(WeightKernelTest, MatmulMatchesReference) {
  const auto& [tc, shape] = GetParam();
  gpu::WeightKernels wk(ctx(), shape);
  for (uint32_t cols : {tc.cols.front(), tc.cols.back()}) {
    for (uint32_t rows : kRows) {
      const Weights w = makeWeights(tc.type, rows, cols, rows * 7 + cols);
      for (uint32_t n : {1u, 3u, 17u, 64u}) {
        const auto x = randomFloats(size_t{n} * cols, n * 1000 + cols);
        const auto got = run(wk, tc.type, w, x, n, rows, cols, false);
        expectProductClose(got, w.values, x, n, rows, cols,
                           fmt::format("{} matmul n={} {}x{}", tc.name, n, rows, cols));
        if (HasFatalFailure()) return;
      }
    }
  }
}

// The epilogues against the product without one, finished on the host with
// the separate kernels' arithmetic: float adds exactly, the SiLU gate within
// the device's exp error.
TEST_P(WeightKernelTest, EpiloguesFinishTheProductAsTheSeparateKernels) {
  const auto& [tc, shape] = GetParam();
  // The epilogue sits in the stores, which do not depend on the weight type;
  // a block type and a k-quant cover every store of every shape (each
  // epilogue is a pipeline of its own, slow to build on lavapipe).
  if (tc.type != TensorType::kQ8_0 && tc.type != TensorType::kQ4_K)
    GTEST_SKIP() << "type-independent; checked on Q8_0 and Q4_K";
  gpu::WeightKernels wk(ctx(), shape);
  const uint32_t cols = tc.cols.back(), rows = 33;
  const Weights w = makeWeights(tc.type, rows, cols, 77);
  for (uint32_t n : {1u, 5u}) {
    const std::string what = fmt::format("{} n={}", tc.name, n);
    const auto x = randomFloats(size_t{n} * cols, n + 3);
    const auto before = randomFloats(size_t{n} * rows, n + 4);
    const auto biasValues = randomFloats(rows, n + 5);
    const auto plain = run(wk, tc.type, w, x, n, rows, cols, n == 1);
    gpu::Buffer biasBuffer = upload(biasValues);
    const gpu::BufferRange bias(biasBuffer);
    const auto withBias = run(wk, tc.type, w, x, n, rows, cols, n == 1, {.bias = &bias});
    const auto summed = run(wk, tc.type, w, x, n, rows, cols, n == 1, {.accumulate = true}, before);
    const auto gated = run(wk, tc.type, w, x, n, rows, cols, n == 1, {.siluGate = true}, before);
    for (uint32_t t = 0; t < n; ++t) {
      for (uint32_t r = 0; r < rows; ++r) {
        const size_t i = size_t{t} * rows + r;
        ASSERT_EQ(withBias[i], plain[i] + biasValues[r]) << what << " bias, row " << r;
        ASSERT_EQ(summed[i], before[i] + plain[i]) << what << " accumulate, row " << r;
        const double g = before[i], want = g / (1.0 + std::exp(-g)) * plain[i];
        ASSERT_NEAR(gated[i], want, 1e-5 * std::fabs(want) + 1e-7) << what << " silu gate, row " << r;
      }
    }
  }
}

// Expert products: a stack of 5 experts of 33 rows each, 40 tokens routed to
// 2 distinct experts each, pseudo-randomly (experts get 10-22 pairs, so the
// grouped product runs several token tiles per expert, and a pair reading
// the wrong expert, input or output row is caught): y[p] = W[ids[p]] x[p /
// share], for a shared input per token (gate, up: share 2) and one per pair
// (down: share 1), per pair (expertMatvec, from the ids) and grouped by
// expert (expertMatmul, from groups built here from the ids), against the
// double-precision product of the expert's rows.
TEST_P(WeightKernelTest, ExpertProductsMultiplyEachPairByItsExpert) {
  const auto& [tc, shape] = GetParam();
  gpu::WeightKernels wk(ctx(), shape);
  constexpr uint32_t kExperts = 5, kRowsPer = 33, kSlots = 2, kTokens = 40;
  std::vector<uint32_t> ids;  // [token][slot]
  for (uint32_t t = 0; t < kTokens; ++t) {
    const uint32_t first = (t * 7 + 3) % kExperts;
    ids.push_back(first);
    ids.push_back((first + 1 + t % 3) % kExperts);
  }
  // [experts] counts, then [experts][tokens] pair lists.
  std::vector<uint32_t> groups(kExperts * (1 + kTokens), 0);
  for (uint32_t p = 0; p < ids.size(); ++p)
    groups[kExperts + ids[p] * kTokens + groups[ids[p]]++] = p;
  const auto pairs = static_cast<uint32_t>(ids.size());
  const uint32_t cols = tc.cols.back();
  const Weights w = makeWeights(tc.type, kExperts * kRowsPer, cols, cols + 5);
  gpu::Buffer wb = upload(w.device), idb = upload(ids), groupb = upload(groups);
  const gpu::BufferRange idRange(idb), groupRange(groupb);
  for (bool grouped : {false, true}) {
    for (bool sharedInput : {true, false}) {
      const uint32_t share = sharedInput ? kSlots : 1;
      const auto x = randomFloats(size_t{pairs / share} * cols, share + 40);
      gpu::Buffer xb = upload(x), yb = deviceBuffer(size_t{pairs} * kRowsPer * sizeof(float));
      const gpu::ExpertRouting routing{&idRange, &groupRange, kTokens,
                                       kSlots,   kExperts,    sharedInput};
      ASSERT_TRUE(rec().begin().ok());
      const Status st = grouped
                            ? wk.expertMatmul(rec(), tc.type, wb, xb, yb, kRowsPer, cols, routing)
                            : wk.expertMatvec(rec(), tc.type, wb, xb, yb, kRowsPer, cols, routing);
      ASSERT_TRUE(st.ok()) << st.error().describe();
      ASSERT_TRUE(rec().submitAndWait().ok());
      const auto y = download<float>(yb, size_t{pairs} * kRowsPer);
      for (uint32_t p = 0; p < pairs; ++p) {
        const std::vector<float> expert(w.values.begin() + size_t{ids[p]} * kRowsPer * cols,
                                        w.values.begin() + size_t{ids[p] + 1} * kRowsPer * cols);
        const std::vector<float> xp(x.begin() + size_t{p / share} * cols,
                                    x.begin() + size_t{p / share + 1} * cols);
        const std::vector<float> yp(y.begin() + size_t{p} * kRowsPer,
                                    y.begin() + size_t{p + 1} * kRowsPer);
        expectProductClose(yp, expert, xp, 1, kRowsPer, cols,
                           fmt::format("{} experts {}, share {}, pair {}", tc.name,
                                       grouped ? "grouped" : "per pair", share, p));
        if (HasFatalFailure()) return;
      }
    }
  }
}

// An expert product's bias is its expert's slice of the stacked {rows,
// experts} bias, and gpt-oss's clamped SwiGLU gate (also for dense
// products) finishes it as cpu::gatedMul does: g = min(y, 7), u = clamp(Wx +
// bias, -7, 7), g * sigmoid(1.702 g) * (u + 1). The gates and products are
// scaled past the clamps.
TEST_P(WeightKernelTest, ExpertBiasAndClampedSwigluGate) {
  const auto& [tc, shape] = GetParam();
  if (tc.type != TensorType::kQ8_0 && tc.type != TensorType::kQ4_K)
    GTEST_SKIP() << "type-independent; checked on Q8_0 and Q4_K";
  gpu::WeightKernels wk(ctx(), shape);
  constexpr uint32_t kExperts = 3, kRowsPer = 17;
  const std::vector<uint32_t> ids = {2, 0, 1, 2};
  const auto pairs = static_cast<uint32_t>(ids.size());
  const uint32_t cols = tc.cols.back();
  const Weights w = makeWeights(tc.type, kExperts * kRowsPer, cols, 91);
  auto x = randomFloats(size_t{pairs} * cols, 92);
  for (float& v : x) v *= 4.0f;  // products of several units: past the clamp of 7
  auto gate = randomFloats(size_t{pairs} * kRowsPer, 93);
  for (float& v : gate) v *= 12.0f;
  const auto biasValues = randomFloats(size_t{kExperts} * kRowsPer, 94);
  gpu::Buffer wb = upload(w.device), idb = upload(ids), xb = upload(x), biasb = upload(biasValues);
  const gpu::BufferRange idRange(idb), bias(biasb);
  const auto runWith = [&](const gpu::Epilogue& e, const std::vector<float>& y0) {
    gpu::Buffer yb = upload(y0);
    EXPECT_TRUE(rec().begin().ok());
    const Status st = wk.expertMatvec(rec(), tc.type, wb, xb, yb, kRowsPer, cols,
                                      {&idRange, nullptr, pairs, 1, kExperts, false}, e);
    EXPECT_TRUE(st.ok()) << st.error().describe();
    EXPECT_TRUE(rec().submitAndWait().ok());
    return download<float>(yb, size_t{pairs} * kRowsPer);
  };
  const auto plain = runWith({}, gate);
  const auto biased = runWith({.bias = &bias}, gate);
  const auto gated = runWith({.bias = &bias, .swigluOaiGate = true}, gate);
  uint32_t clampedUp = 0, clampedGate = 0;
  for (uint32_t p = 0; p < pairs; ++p) {
    for (uint32_t r = 0; r < kRowsPer; ++r) {
      const size_t i = size_t{p} * kRowsPer + r;
      const float b = biasValues[size_t{ids[p]} * kRowsPer + r];
      ASSERT_EQ(biased[i], plain[i] + b) << "pair " << p << " row " << r;
      const double g = std::min(gate[i], 7.0f);
      const double u = std::clamp(plain[i] + b, -7.0f, 7.0f);
      const double want = g / (1.0 + std::exp(-1.702 * g)) * (u + 1.0);
      ASSERT_NEAR(gated[i], want, 1e-5 * std::fabs(want) + 1e-6) << "pair " << p << " row " << r;
      clampedUp += std::fabs(plain[i] + b) > 7.0f;
      clampedGate += gate[i] > 7.0f;
    }
  }
  EXPECT_GT(clampedUp, 0u);
  EXPECT_GT(clampedGate, 0u);
  // The dense product takes the same gate.
  const auto dense =
      run(wk, tc.type, w, std::vector<float>(x.begin(), x.begin() + cols), 1, kRowsPer, cols, true,
          {.swigluOaiGate = true}, std::vector<float>(gate.begin(), gate.begin() + kRowsPer));
  const auto densePlain =
      run(wk, tc.type, w, std::vector<float>(x.begin(), x.begin() + cols), 1, kRowsPer, cols, true);
  for (uint32_t r = 0; r < kRowsPer; ++r) {
    const double g = std::min(gate[r], 7.0f);
    const double u = std::clamp(densePlain[r], -7.0f, 7.0f);
    const double want = g / (1.0 + std::exp(-1.702 * g)) * (u + 1.0);
    ASSERT_NEAR(dense[r], want, 1e-5 * std::fabs(want) + 1e-6) << "dense row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, WeightKernelTest, ::testing::ValuesIn(allCases()), caseName);

class WeightKernelApiTest : public GpuTest {};

// The per-shape launch rule: one invocation per 64 columns, 32 to 256, 4 rows.
TEST(MatvecLaunchRule, OneInvocationPer64ColumnsWithinBounds) {
  const std::pair<uint32_t, uint32_t> cases[] = {
      {32, 32}, {512, 32}, {1536, 32}, {2048, 32}, {3072, 32},
      {4096, 64}, {8192, 128}, {14336, 128}, {16384, 256}, {65536, 256}};
  for (const auto& [cols, workgroup] : cases) {
    const gpu::MatvecLaunch l = gpu::matvecLaunchFor(cols);
    EXPECT_EQ(l.workgroup, workgroup) << cols << " columns";
    EXPECT_EQ(l.rows, 4u) << cols << " columns";
  }
}

// A prefill-sized product, 512 tokens through a 4096 x 8192 Q8_0 matrix (an
// 8B model's FFN is 4096 x 14336): on a CPU device each invocation of a few
// workgroups takes hundreds of tiles of 256 units. lavapipe stopped an
// invocation after 65535 loop iterations and left the last tiles unwritten
// (DeviceInfo::loopIterationLimit). The rows and tokens handed out last are
// checked against a double-precision product, with a spread of the others.
TEST_F(WeightKernelApiTest, APrefillSizedMatmulReachesItsLastTiles) {
  const uint32_t rows = 4096, cols = 8192, n = 512;
  const Weights w = makeWeights(TensorType::kQ8_0, rows, cols, 5);
  const auto x = randomFloats(size_t{n} * cols, 6);
  gpu::WeightKernels wk(ctx());
  gpu::Buffer wb = upload(w.device), xb = upload(x),
              yb = deviceBuffer(size_t{n} * rows * sizeof(float));
  ASSERT_TRUE(rec().begin().ok());
  ASSERT_TRUE(wk.matmul(rec(), TensorType::kQ8_0, wb, xb, yb, n, rows, cols).ok());
  ASSERT_TRUE(rec().submitAndWait().ok());
  const auto got = download<float>(yb, size_t{n} * rows);
  auto expectProduct = [&](uint32_t t, uint32_t r) {
    double ref = 0.0, mag = 0.0;
    for (uint32_t k = 0; k < cols; ++k) {
      const double p =
          static_cast<double>(w.values[size_t{r} * cols + k]) * x[size_t{t} * cols + k];
      ref += p;
      mag += std::fabs(p);
    }
    ASSERT_NEAR(got[size_t{t} * rows + r], ref, 4.0 * std::sqrt(double{cols}) * kEps * mag + 1e-6)
        << "token " << t << " row " << r;
  };
  for (uint32_t t = 0; t < n; ++t) {
    for (uint32_t r = rows - 16; r < rows; ++r) {
      expectProduct(t, r);
      if (HasFatalFailure()) return;
    }
  }
  for (uint32_t t = n - 8; t < n; ++t) {
    for (uint32_t r = 0; r < rows; r += 7) {
      expectProduct(t, r);
      if (HasFatalFailure()) return;
    }
  }
}

TEST_F(WeightKernelApiTest, TensorsShareOneBufferAtAlignedOffsets) {
  // Two Q4_K tensors and their inputs/outputs packed into single buffers, as a
  // backend packs a model; each dispatch binds its own sub-range.
  gpu::WeightKernels wk(ctx());
  const uint64_t align = std::max<uint64_t>(ctx().limits().minStorageBufferOffsetAlignment, 4);
  const uint32_t cols = 512, rowsA = 33, rowsB = 64;
  const Weights a = makeWeights(TensorType::kQ4_K, rowsA, cols, 1);
  const Weights b = makeWeights(TensorType::kQ4_K, rowsB, cols, 2);
  const uint64_t offB = (a.device.size() + align - 1) / align * align + align;
  std::vector<uint8_t> packed(offB + b.device.size(), 0xee);
  std::copy(a.device.begin(), a.device.end(), packed.begin());
  std::copy(b.device.begin(), b.device.end(), packed.begin() + static_cast<ptrdiff_t>(offB));
  const auto x = randomFloats(cols, 3);
  const uint64_t xOff = align;  // the input sits after some other activation
  std::vector<float> xs(xOff / 4 + cols, 0.0f);
  std::copy(x.begin(), x.end(), xs.begin() + static_cast<ptrdiff_t>(xOff / 4));
  const uint64_t yOffB = (rowsA * 4 + align - 1) / align * align;
  gpu::Buffer wb = upload(packed), xb = upload(xs), yb = deviceBuffer(yOffB + rowsB * 4);
  ASSERT_TRUE(rec().begin().ok());
  ASSERT_TRUE(wk.matvec(rec(), TensorType::kQ4_K, {wb, 0, a.device.size()}, {xb, xOff, cols * 4},
                        yb, rowsA, cols)
                  .ok());
  ASSERT_TRUE(wk.matvec(rec(), TensorType::kQ4_K, {wb, offB, VK_WHOLE_SIZE},
                        {xb, xOff, VK_WHOLE_SIZE}, {yb, yOffB, VK_WHOLE_SIZE}, rowsB, cols)
                  .ok());
  ASSERT_TRUE(rec().submitAndWait().ok());
  const auto y = download<float>(yb, (yOffB + rowsB * 4) / 4);
  expectProductClose(std::vector<float>(y.begin(), y.begin() + rowsA), a.values, x, 1, rowsA, cols,
                     "tensor A");
  expectProductClose(std::vector<float>(y.begin() + static_cast<ptrdiff_t>(yOffB / 4), y.end()),
                     b.values, x, 1, rowsB, cols, "tensor B");
}

TEST_F(WeightKernelApiTest, RowRangeOfARepackedTensorIsContiguous) {
  const uint32_t cols = 768, rows = 12;
  const Weights w = makeWeights(TensorType::kQ6_K, rows, cols, 5);
  const auto stride = gpu::WeightKernels::rowBytes(TensorType::kQ6_K, cols);
  ASSERT_TRUE(stride);
  EXPECT_EQ(*stride % 32, 0u);
  ASSERT_EQ(w.device.size(), rows * *stride);
  // Rows 4..11 alone, bound from the middle of the full tensor.
  gpu::WeightKernels wk(ctx());
  const auto x = randomFloats(cols, 6);
  gpu::Buffer wb = upload(w.device), xb = upload(x), yb = deviceBuffer(8 * 4);
  ASSERT_TRUE(rec().begin().ok());
  ASSERT_TRUE(
      wk.matvec(rec(), TensorType::kQ6_K, {wb, 4 * *stride, 8 * *stride}, xb, yb, 8, cols).ok());
  ASSERT_TRUE(rec().submitAndWait().ok());
  expectProductClose(download<float>(yb, 8),
                     std::vector<float>(w.values.begin() + 4 * cols, w.values.end()), x, 1, 8, cols,
                     "rows 4..11");
}

// The roofline terms a product declares (Recorder::traffic, bench --kernels):
// the weights' repacked rows (the GGUF bytes, 34 per Q8_0 block of 32, with
// the planes aligned: a few bytes more), the inputs and outputs once, a
// residual epilogue's outputs twice; 2 operations per multiply-add.
TEST_F(WeightKernelApiTest, ProductsDeclareTheirTrafficAndArithmetic) {
  if (!ctx().timestampPeriodNs()) GTEST_SKIP() << "device has no compute timestamps";
  const uint32_t rows = 64, cols = 256, n = 3;
  const Weights w = makeWeights(TensorType::kQ8_0, rows, cols, 9);
  gpu::WeightKernels wk(ctx());
  gpu::Buffer wb = upload(w.device), xb = upload(randomFloats(n * cols, 10)),
              yb = deviceBuffer(n * rows * 4);
  ASSERT_TRUE(rec().begin().ok());
  ASSERT_TRUE(wk.matvec(rec(), TensorType::kQ8_0, wb, xb, yb, rows, cols).ok());
  rec().barrier();
  ASSERT_TRUE(
      wk.matmul(rec(), TensorType::kQ8_0, wb, xb, yb, n, rows, cols, {.accumulate = true}).ok());
  ASSERT_TRUE(rec().submitAndWait().ok());
  const auto stride = gpu::WeightKernels::rowBytes(TensorType::kQ8_0, cols);
  ASSERT_TRUE(stride);
  const uint64_t weights = uint64_t{rows} * *stride;
  EXPECT_GE(weights, uint64_t{rows} * (cols / 32) * 34);
  EXPECT_LE(weights, uint64_t{rows} * (cols / 32) * 36);
  const uint64_t matvec = weights + cols * 4 + rows * 4;
  const uint64_t matmul = weights + n * cols * 4 + 2 * n * rows * 4;
  uint64_t seen = 0;
  for (const auto& t : rec().kernelTimes()) {
    EXPECT_EQ(t.bytes, t.kernelClass == "matvec" ? matvec : matmul) << t.kernelClass;
    EXPECT_EQ(t.flops, 2ull * rows * cols * (t.kernelClass == "matvec" ? 1 : n)) << t.kernelClass;
    seen += t.dispatches;
  }
  EXPECT_EQ(seen, 2u);
}

TEST_F(WeightKernelApiTest, RefusesWhatItCannotRun) {
  gpu::WeightKernels wk(ctx());
  EXPECT_FALSE(gpu::WeightKernels::supportsType(TensorType::kQ3_K));
  EXPECT_TRUE(gpu::WeightKernels::supportsType(TensorType::kQ6_K));
  EXPECT_FALSE(gpu::WeightKernels::rowBytes(TensorType::kQ4_K, 300));
  gpu::Buffer w = deviceBuffer(1 << 16), x = deviceBuffer(4096), y = deviceBuffer(4096);
  ASSERT_TRUE(rec().begin().ok());
  auto s = wk.matvec(rec(), TensorType::kQ3_K, w, x, y, 4, 256);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kUnsupported);
  s = wk.matvec(rec(), TensorType::kQ8_0, w, x, y, 4, 48);  // not whole blocks
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  s = wk.matvec(rec(), TensorType::kQ8_0, w, x, y, 4096, 256);  // weights larger than the buffer
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  if (ctx().limits().minStorageBufferOffsetAlignment > 1) {
    s = wk.matvec(rec(), TensorType::kF32, w, {x, 2, 64}, y, 4, 16);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  }
  EXPECT_EQ(rec().dispatchCount(), 0u);
  ASSERT_TRUE(rec().submitAndWait().ok());
  auto r = gpu::WeightKernels::repack(TensorType::kQ8_0, 64, std::vector<uint8_t>(68 * 3 + 1));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
}

TEST_F(WeightKernelApiTest, RepackKeepsFloatRowsAndRegroupsBlocks) {
  const std::vector<uint8_t> f16(2 * 7 * 13, 0x3c);  // 7 rows of 13 halves: 182 bytes
  auto same = gpu::WeightKernels::repack(TensorType::kF16, 13, f16);
  ASSERT_TRUE(same.ok());
  ASSERT_EQ(same->size(), 184u);  // padded to a word
  EXPECT_TRUE(std::equal(f16.begin(), f16.end(), same->begin()));
  // One Q8_0 row of 3 blocks: d0 q0[32] d1 q1[32] d2 q2[32] -> q0 q1 q2 | d0 d1 d2 (padded).
  std::vector<uint8_t> raw(3 * 34);
  for (size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<uint8_t>(i);
  auto planes = gpu::WeightKernels::repack(TensorType::kQ8_0, 96, raw);
  ASSERT_TRUE(planes.ok());
  ASSERT_EQ(planes->size(), 96u + 32u);
  for (size_t b = 0; b < 3; ++b) {
    for (size_t j = 0; j < 32; ++j) ASSERT_EQ((*planes)[b * 32 + j], raw[b * 34 + 2 + j]);
    EXPECT_EQ((*planes)[96 + 2 * b], raw[b * 34]);
    EXPECT_EQ((*planes)[96 + 2 * b + 1], raw[b * 34 + 1]);
  }
}

}  // namespace
}  // namespace kvscope::test
