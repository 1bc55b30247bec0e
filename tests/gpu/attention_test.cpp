// The attention kernels (gpu/attention_kernels.h) against the host KV cache and
// the reference CPU attention (cpu::attentionReference), under validation.
//
// writeKv must store the bytes kv::KvCache::write stores with F16Scheme; the
// shader rounds in integer arithmetic, so no 1-ulp allowance is needed.
//
// attend() tolerance, per output value d of (token, head). Queries and cached
// rows are the same f16 values on both sides, so the differences are:
//  - score summation order, exp() (GLSL allows 3 + 2|x| ulp) and division
//    (2.5 ulp) move an unrounded weight by ~1e-6 relative, which can round it
//    to the neighbouring f16 value: each weight w_j may be one f16 ulp off,
//    bounded by sum_j ulp16(w_j) * |v_jd|;
//  - float32 accumulation of sum_j w_j v_jd in another order (splits, lanes):
//    4 * sqrt(rows) * eps * sum_j |w_j v_jd|, as kernels_test.cpp allows.
// That bound holds even if every weight flipped the same way, so at long
// contexts a wrong row (page, mask or offset bug) could hide below it. A second
// check catches those: the squared error summed over all outputs must stay
// below 16 x sum_d sum_j (ulp16(w_j) v_jd)^2 (plus the accumulation term
// squared). That is what every weight flipping with an independent sign gives,
// with a 4-sigma margin; flips that share a sign (a common error in the
// softmax sum) are covered while at most 16 weights flip together. It holds for
// any reduction width: how many weights flip depends on the lane count (8
// lanes flip a few, 16 lanes measurably more at head_dim 256), but no weight
// flips by more than one f16 ulp. One wrong row of weight w moves every value
// of its head by w |v|, ~2^11 x a flip of that weight: at 2000 rows the bound
// is ~4e-6 of the output energy and one wrong row gives ~4e-4.
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu_attention.h"
#include "core/float_convert.h"
#include "gpu/attention_kernels.h"
#include "gpu/kv_codec.h"
#include "gpu_fixture.h"
#include "kv/kv_cache.h"
#include "kv/scheme_f16.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

using kv::KvPart;

constexpr float kEps = 1.1920929e-7f;
constexpr uint32_t kLayers = 2;  // the kernels use layer 1, so partOffset matters
constexpr uint32_t kLayer = 1;

// One f16 ulp at w >= 0 (2^-24 in the subnormal range).
double ulp16(float w) {
  if (w < 6.103515625e-05f) return std::ldexp(1.0, -24);
  int exp = 0;
  std::frexp(w, &exp);  // w = m * 2^exp, m in [0.5, 1)
  return std::ldexp(1.0, exp - 11);
}

// Every test runs for both launch shapes (lavapipe runs either).
class AttentionTest : public GpuTest, public ::testing::WithParamInterface<gpu::AttentionShape> {
 public:
  static void TearDownTestSuite() {
    for (auto& a : s_attention) a.reset();
    GpuTest::TearDownTestSuite();
  }

 protected:
  void SetUp() override {
    GpuTest::SetUp();
    const gpu::DeviceInfo& info = ctx().info();
    if (GetParam() == gpu::AttentionShape::kCpu &&
        !(info.shaderInt64 && info.subgroupArithmetic && info.subgroupSize > 0)) {
      GTEST_SKIP() << "the cpu launch shape needs 64-bit integers and subgroup arithmetic";
    }
  }

  // The same f16 KV cache on the host (kv::KvCache) and on the device (pages).
  struct Twin {
    gpu::KvPageLayout layout;
    kv::KvCache host;
    std::vector<gpu::Buffer> pages;
    std::vector<const gpu::Buffer*> pagePointers;

    Twin(uint32_t nHeadKv, uint32_t headDim, uint32_t rowsPerPage)
        : layout(gpu::KvPageLayout::f16(kLayers, nHeadKv, headDim, rowsPerPage)),
          host(kv::KvLayout::create(kv::KvGeometry::uniform(kLayers, nHeadKv, headDim, rowsPerPage),
                                    std::vector<kv::LayerSchemes>(kLayers))
                   .value()) {}
  };

  static gpu::AttentionKernels& attention() {
    auto& a = s_attention[static_cast<int>(GetParam())];
    if (!a) a = std::make_unique<gpu::AttentionKernels>(ctx(), GetParam());
    return *a;
  }

  // Appends n rows of K and V ([n][nHeadKv][headDim]) to layer kLayer of both
  // caches: KvCache::write on the host, writeKv on the device.
  static void append(Twin& c, const std::vector<float>& k, const std::vector<float>& v,
                     uint32_t n) {
    const uint32_t pos0 = c.host.rows(), d = c.layout.headDim(0);
    ASSERT_TRUE(c.host.append(n).ok());
    for (uint32_t t = 0; t < n; ++t) {
      for (uint32_t h = 0; h < c.layout.nHeadKv(0); ++h) {
        const size_t off = (size_t{t} * c.layout.nHeadKv(0) + h) * d;
        c.host.write(kLayer, KvPart::kKey, h, pos0 + t, {&k[off], d});
        c.host.write(kLayer, KvPart::kValue, h, pos0 + t, {&v[off], d});
      }
    }
    while (c.pages.size() * c.layout.rowsPerPage < c.host.capacity())
      c.pages.push_back(deviceBuffer(c.layout.pageBytes()));
    c.pagePointers.clear();
    for (const gpu::Buffer& p : c.pages) c.pagePointers.push_back(&p);
    gpu::Buffer kb = upload(k), vb = upload(v);
    ASSERT_TRUE(rec().begin().ok());
    auto s = attention().writeKv(rec(), c.layout, c.pagePointers, kLayer, kb, vb, n, pos0);
    ASSERT_TRUE(s.ok()) << s.error().describe();
    ASSERT_TRUE(rec().submitAndWait().ok());
  }

  // Appends `rows` random rows, written in chunks of `chunk`.
  static void fill(Twin& c, uint32_t rows, uint32_t chunk, uint32_t seed) {
    const uint32_t width = c.layout.nHeadKv(0) * c.layout.headDim(0);
    for (uint32_t done = 0; done < rows;) {
      const uint32_t n = std::min(chunk, rows - done);
      append(c, randomFloats(size_t{n} * width, seed + done),
             randomFloats(size_t{n} * width, seed + done + 77777), n);
      done += n;
    }
  }

  // The reference CPU attention (cpu::attentionReference) for the last n rows'
  // queries, and the per-value tolerance of the header comment. The tolerance
  // needs the softmax weights, which are recomputed here in double precision
  // (a bound, not an expected value: it only has to be close to the real one).
  static void reference(const Twin& c, const std::vector<float>& q, uint32_t n, uint32_t nHead,
                        std::vector<float>& out, std::vector<double>& tol, double& err2Bound,
                        const float* sinks = nullptr) {
    const uint32_t d = c.layout.headDim(0), gqa = nHead / c.layout.nHeadKv(0), rows = c.host.rows();
    const uint32_t pos0 = rows - n;
    out.assign(size_t{n} * nHead * d, 0.0f);
    static ThreadPool pool(2);
    cpu::attentionReference(c.host, kLayer, q.data(), n, pos0, nHead, pool, out.data(), 0.0f, 0,
                            sinks);

    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    std::vector<float> keys(size_t{rows} * d), values(keys.size());
    tol.assign(out.size(), 0.0);
    err2Bound = 0.0;
    std::vector<double> scores(rows), flips(d), flipEnergy(d), magnitude(d);
    for (uint32_t h = 0; h < nHead; ++h) {
      const uint32_t kvHead = h / gqa;
      if (h % gqa == 0) {
        for (uint32_t j = 0; j < rows; ++j) {
          c.host.read(kLayer, KvPart::kKey, kvHead, j, {&keys[size_t{j} * d], d});
          c.host.read(kLayer, KvPart::kValue, kvHead, j, {&values[size_t{j} * d], d});
        }
      }
      for (uint32_t t = 0; t < n; ++t) {
        const uint32_t visible = pos0 + t + 1;
        const size_t at = (size_t{t} * nHead + h) * d;
        double maxScore = sinks ? sinks[h] : -INFINITY, sum = 0.0;
        for (uint32_t j = 0; j < visible; ++j) {
          double s = 0.0;
          for (uint32_t i = 0; i < d; ++i)
            s += double{roundToFp16(q[at + i])} * keys[size_t{j} * d + i];
          scores[j] = s * scale;
          maxScore = std::max(maxScore, scores[j]);
        }
        for (uint32_t j = 0; j < visible; ++j) sum += (scores[j] = std::exp(scores[j] - maxScore));
        if (sinks) sum += std::exp(sinks[h] - maxScore);
        std::fill(flips.begin(), flips.end(), 0.0);
        std::fill(flipEnergy.begin(), flipEnergy.end(), 0.0);
        std::fill(magnitude.begin(), magnitude.end(), 0.0);
        for (uint32_t j = 0; j < visible; ++j) {
          const float w = roundToFp16(static_cast<float>(scores[j] / sum));
          const float* v = &values[size_t{j} * d];
          for (uint32_t i = 0; i < d; ++i) {
            flips[i] += ulp16(w) * std::fabs(v[i]);
            flipEnergy[i] += ulp16(w) * ulp16(w) * v[i] * v[i];
            magnitude[i] += std::fabs(static_cast<double>(w) * v[i]);
          }
        }
        for (uint32_t i = 0; i < d; ++i) {
          const double accumulation =
              4.0 * std::sqrt(static_cast<double>(visible)) * kEps * magnitude[i];
          tol[at + i] = flips[i] + accumulation;
          err2Bound += 16.0 * flipEnergy[i] + accumulation * accumulation;
        }
      }
    }
  }

  // Appends n rows to a cache holding pos0 rows, attends with n random
  // queries and compares with the reference.
  static void attendAndCompare(Twin& c, uint32_t n, uint32_t nHead, bool withScores, uint32_t seed,
                               const std::vector<float>& sinks = {}) {
    const uint32_t width = c.layout.nHeadKv(0) * c.layout.headDim(0);
    append(c, randomFloats(size_t{n} * width, seed), randomFloats(size_t{n} * width, seed + 1), n);
    const uint32_t rows = c.host.rows(), pos0 = rows - n;
    // |q| up to 3 makes the softmax uneven, so weights span many binades.
    auto q = randomFloats(size_t{n} * nHead * c.layout.headDim(0), seed + 2, -3.0f, 3.0f);
    gpu::Buffer qb = upload(q), out = deviceBuffer(q.size() * sizeof(float));
    auto scratch = attention().makeScratch(c.layout, nHead, n, rows);
    ASSERT_TRUE(scratch.ok()) << scratch.error().describe();
    scratch->scores =
        withScores ? deviceBuffer(size_t{n} * nHead * rows * sizeof(float)) : gpu::Buffer();
    gpu::Buffer sinkBuffer = sinks.empty() ? gpu::Buffer() : upload(sinks);
    const gpu::BufferRange sinkRange(sinkBuffer);
    ASSERT_TRUE(rec().begin().ok());
    auto s = attention().attend(rec(), c.layout, c.pagePointers, kLayer, qb, out, n, pos0, nHead,
                                *scratch, {.sinks = sinks.empty() ? nullptr : &sinkRange});
    ASSERT_TRUE(s.ok()) << s.error().describe();
    ASSERT_TRUE(rec().submitAndWait().ok());
    const auto got = download<float>(out, q.size());

    std::vector<float> want;
    std::vector<double> tol;
    double err2Bound = 0.0;
    reference(c, q, n, nHead, want, tol, err2Bound, sinks.empty() ? nullptr : sinks.data());
    const auto p = attention().plan(c.layout, nHead, n, pos0);
    double err2 = 0.0, ref2 = 0.0;
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], tol[i])
          << gpu::attentionShapeName(GetParam()) << " head_dim " << c.layout.headDim(0) << " gqa "
          << nHead / c.layout.nHeadKv(0) << " n " << n << " pos0 " << pos0 << " splits " << p.splits
          << " value " << i;
      err2 += (double{got[i]} - want[i]) * (double{got[i]} - want[i]);
      ref2 += double{want[i]} * want[i];
    }
    EXPECT_LE(err2, err2Bound) << "relative " << err2 / ref2 << " vs " << err2Bound / ref2
                               << ", head_dim " << c.layout.headDim(0) << " n " << n << " pos0 "
                               << pos0;
  }

 private:
  static std::unique_ptr<gpu::AttentionKernels> s_attention[3];  // by AttentionShape
};
std::unique_ptr<gpu::AttentionKernels> AttentionTest::s_attention[3];

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionTest,
                         ::testing::Values(gpu::AttentionShape::kCpu, gpu::AttentionShape::kGpu),
                         [](const auto& param) {
                           return std::string(gpu::attentionShapeName(param.param));
                         });

TEST_P(AttentionTest, PageLayoutMatchesHostCache) {
  Twin c(3, 80, 7);
  fill(c, 20, 20, 1);
  for (uint32_t row : {0u, 6u, 7u, 19u}) {
    const uint8_t* pageStart = c.host.row(0, KvPart::kKey, 0, row / 7 * 7).data();
    for (uint32_t l = 0; l < kLayers; ++l) {
      for (uint32_t part = 0; part < 2; ++part) {
        for (uint32_t h = 0; h < 3; ++h) {
          const auto bytes = c.host.row(l, static_cast<KvPart>(part), h, row);
          EXPECT_EQ(static_cast<size_t>(bytes.data() - pageStart),
                    c.layout.rowOffset(l, part, h, row));
          EXPECT_EQ(bytes.size(), c.layout.rowBytes(l, part));
        }
      }
    }
  }
  EXPECT_EQ(c.layout.pageBytes(),
            c.layout.partOffset(kLayers - 1, 1) + c.layout.partBytes(kLayers - 1, 1));
}

TEST_P(AttentionTest, WriteKvStoresTheHostCacheBytes) {
  for (uint32_t headDim : {5u, 8u, 48u, 64u, 80u, 128u, 256u}) {
    Twin c(3, headDim, 7);
    const uint32_t width = 3 * headDim;
    uint32_t seed = headDim;
    // Batches that start mid-page and span several pages.
    for (uint32_t n : {5u, 9u, 1u, 20u}) {
      // Magnitudes from f16-subnormal to overflow, plus exact ties and specials.
      auto k = randomFloats(size_t{n} * width, seed++), v = randomFloats(size_t{n} * width, seed++);
      for (size_t i = 0; i < k.size(); ++i) {
        k[i] = std::ldexp(k[i], static_cast<int>(i % 48) - 30);
        v[i] *= 4.0f;
      }
      const float specials[] = {65504.0f,
                                65519.0f,
                                65520.0f,
                                -1e9f,
                                std::ldexp(1.0f, -25),
                                std::ldexp(3.0f, -26),
                                std::ldexp(1.0f, -14) * 1.00048828125f,
                                1.0f + std::ldexp(1.0f, -11),
                                1.0f + std::ldexp(3.0f, -11),
                                INFINITY,
                                -0.0f,
                                1e-40f};
      for (size_t i = 0; i < std::size(specials) && i < v.size(); ++i) v[i] = specials[i];
      append(c, k, v, n);
    }
    std::vector<uint8_t> page(c.layout.pageBytes());
    for (uint32_t row = 0; row < c.host.rows(); ++row) {
      if (row % 7 == 0) {
        ASSERT_TRUE(c.pages[row / 7].download(page.data(), page.size()).ok());
      }
      for (uint32_t part = 0; part < 2; ++part) {
        for (uint32_t h = 0; h < 3; ++h) {
          const auto want = c.host.row(kLayer, static_cast<KvPart>(part), h, row);
          const uint8_t* got = page.data() + c.layout.rowOffset(kLayer, part, h, row);
          ASSERT_EQ(std::memcmp(got, want.data(), headDim * 2), 0)
              << "head_dim " << headDim << " row " << row << " part " << part << " head " << h;
          for (uint32_t b = headDim * 2; b < c.layout.rowBytes(kLayer, part); ++b)
            ASSERT_EQ(got[b], 0) << "row padding must be zero";
        }
      }
    }
  }
}

TEST_P(AttentionTest, MatchesReferenceForEveryHeadDimAndGqa) {
  // One growing cache per shape: prefill and decode steps at pos0 0, 3, 300,
  // 364, 365; the last two split the rows (two KV heads leave too few tasks).
  struct Step {
    uint32_t pos0, n;
  };
  constexpr Step kSteps[] = {{0, 1}, {3, 5}, {300, 64}, {364, 1}, {365, 5}};
  for (uint32_t headDim : {8u, 48u, 64u, 80u, 128u, 256u}) {
    for (uint32_t gqa : {1u, 2u, 4u, 8u}) {
      Twin c(2, headDim, 32);
      for (const Step& step : kSteps) {
        fill(c, step.pos0 - c.host.rows(), 100, headDim * 10 + gqa + step.pos0);
        attendAndCompare(c, step.n, 2 * gqa, gqa % 2 == 0, headDim + gqa + step.n);
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST_P(AttentionTest, MatchesReferenceAcrossSmallPages) {
  // 7 rows per page: tiles end at every page boundary.
  for (uint32_t pos0 : {0u, 3u, 40u}) {
    for (uint32_t n : {1u, 5u, 64u}) {
      if (pos0 + n > 7 * gpu::AttentionKernels::kMaxPages) continue;
      Twin c(2, 64, 7);
      fill(c, pos0, 9, pos0 + n);
      attendAndCompare(c, n, 8, n == 5, 1000 + pos0 + n);
      if (HasFatalFailure()) return;
    }
  }
}

TEST_P(AttentionTest, MatchesReferenceAtLongContext) {
  // The benchmark's layer shape: 32 query heads over 8 KV heads, head_dim 128.
  for (bool withScores : {false, true}) {
    for (uint32_t n : {1u, 5u}) {
      Twin c(8, 128, 128);
      fill(c, 2000 - n, 512, 5);
      attendAndCompare(c, n, 32, withScores, 9 + n);
      if (HasFatalFailure()) return;
    }
  }
}

// A 512-token prefill chunk over 2048 cached rows, with the plain4k
// synthetic model's layer shape (2 KV heads, head_dim 32). Each of a CPU
// device's few workgroups loops over many (KV head, token tile) tasks of
// ~2,500 rows; lavapipe stops an invocation after 65535 loop iterations in
// all, which left the last tasks (KV head 1's last token tiles) unwritten
// until the plan sized its workgroups and splits under the limit
// (DeviceInfo::loopIterationLimit).
TEST_P(AttentionTest, MatchesReferenceAtALongPrefill) {
  Twin c(2, 32, 256);
  fill(c, 2048, 512, 5);
  attendAndCompare(c, 512, 4, false, 9);
}

TEST_P(AttentionTest, SplitsDecodeOverPositions) {
  // One KV head leaves one task per token tile: decode must split the rows.
  Twin c(1, 64, 256);
  fill(c, 1500, 500, 3);
  EXPECT_GT(attention().plan(c.layout, 4, 1, 1500).splits, 1u);
  attendAndCompare(c, 1, 4, false, 21);
  attendAndCompare(c, 1, 4, true, 22);
}

// Attention sinks (gpt-oss): one logit per query head joins the softmax.
// Sinks far below, among and far above the scores, for a prefill and a
// decode in one split and a decode split over the rows (the sink joins once,
// after the splits' stats are merged).
TEST_P(AttentionTest, SinksJoinEachHeadsSoftmax) {
  const std::vector<float> sinks = {-30.0f, -1.0f, 0.5f, 2.0f, 6.0f, 30.0f, 0.0f, 1.5f};
  Twin c(2, 64, 256);
  fill(c, 40, 40, 7);
  attendAndCompare(c, 5, 8, false, 31, sinks);
  attendAndCompare(c, 1, 8, true, 32, sinks);
  Twin split(1, 64, 256);
  fill(split, 1500, 500, 3);
  ASSERT_GT(attention().plan(split.layout, 4, 1, 1500).splits, 1u);
  attendAndCompare(split, 1, 4, false, 33,
                   std::vector<float>(sinks.begin() + 2, sinks.begin() + 6));
}

// The precision tail (kv/kv_cache.h): layer 1, q4_0 keys and values, keeps
// its last 24 rows again at f16 in a ring of 39 (steps of up to 16 rows);
// each query reads those from the ring, older rows as codes. Against
// cpu::attentionReference over a host KvCache of the same geometry, which
// reads rows the same way (KvCache::readAttended). Float32 numerics on both
// sides and the same bytes (unrotated schemes), so the outputs agree to
// summation order; a tail row read as its 4-bit code would move them by
// ~1e-2. Prefill chunks (both sides of a tail within one step), decode steps
// (which split their rows on a CPU device), and a rewind past what the ring
// still holds: the rows it lost are read as codes (KvTailRing::floor).
TEST_P(AttentionTest, APrecisionTailIsReadAtF16AndOlderRowsAsCodes) {
  constexpr uint32_t kHeads = 2, kDim = 64, kTail = 24, kStep = 16, kHead = 4, kMaxRows = 128;
  kv::KvGeometry g = kv::KvGeometry::uniform(kLayers, kHeads, kDim, 32);
  g.tailRows = kTail;
  g.tailRingRows = kTail + kStep - 1;
  auto created =
      kv::KvCache::create(g, std::vector<kv::LayerSchemes>{{"f16", "f16"}, {"q4_0", "q4_0"}}, 5);
  ASSERT_TRUE(created.ok()) << created.error().describe();
  kv::KvCache& host = **created;
  gpu::KvPageLayout layout = gpu::KvPageLayout::f16(kLayers, kHeads, kDim, 32);
  for (uint32_t part = 0; part < 2; ++part)
    layout.streams[kLayer * 2 + part].codec = gpu::kvCodecFor("q4_0").value();
  layout.tailRows = kTail;
  layout.tailSlots = g.tailRingRows;
  layout.tail = {host.hasTail(0), host.hasTail(1)};
  ASSERT_EQ(layout.tail, (std::vector<bool>{false, true}));
  ASSERT_EQ(layout.tailLayout().ringPageBytes(), host.layout().tailBytes());
  std::vector<gpu::Buffer> pages;
  std::vector<const gpu::Buffer*> pagePointers;
  gpu::Buffer ring = deviceBuffer(host.layout().tailBytes());
  auto scratch = attention().makeScratch(layout, kHead, kStep, kMaxRows);
  ASSERT_TRUE(scratch.ok()) << scratch.error().describe();
  static ThreadPool pool(2);
  uint32_t seed = 100;
  const auto step = [&](uint32_t n) {
    const uint32_t pos0 = host.rows(), width = kHeads * kDim;
    const auto k = randomFloats(size_t{n} * width, seed++),
               v = randomFloats(size_t{n} * width, seed++);
    ASSERT_TRUE(host.append(n).ok());
    for (uint32_t t = 0; t < n; ++t) {
      for (uint32_t h = 0; h < kHeads; ++h) {
        const size_t off = (size_t{t} * kHeads + h) * kDim;
        host.write(kLayer, KvPart::kKey, h, pos0 + t, {&k[off], kDim});
        host.write(kLayer, KvPart::kValue, h, pos0 + t, {&v[off], kDim});
      }
    }
    while (pages.size() * layout.rowsPerPage < host.capacity())
      pages.push_back(deviceBuffer(layout.pageBytes()));
    pagePointers.clear();
    for (const gpu::Buffer& p : pages) pagePointers.push_back(&p);
    const auto q = randomFloats(size_t{n} * kHead * kDim, seed++, -3.0f, 3.0f);
    gpu::Buffer kb = upload(k), vb = upload(v), qb = upload(q);
    gpu::Buffer out = deviceBuffer(q.size() * sizeof(float));
    // kv::CachedRows::tailFirst(): the first row the query at 0 would read.
    const gpu::KvTailRing tail{&ring, host.tailStart(kLayer, 0)};
    ASSERT_TRUE(rec().begin().ok());
    auto s = attention().writeKv(rec(), layout, pagePointers, kLayer, kb, vb, n, pos0, *scratch,
                                 nullptr, tail);
    ASSERT_TRUE(s.ok()) << s.error().describe();
    rec().barrier();
    s = attention().attend(rec(), layout, pagePointers, kLayer, qb, out, n, pos0, kHead, *scratch,
                           {}, tail);
    ASSERT_TRUE(s.ok()) << s.error().describe();
    ASSERT_TRUE(rec().submitAndWait().ok());
    const auto got = download<float>(out, q.size());
    std::vector<float> want(q.size());
    cpu::attentionReference(host, kLayer, q.data(), n, pos0, kHead, pool, want.data(), 0.0f, 0,
                            nullptr);
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 2e-5 + 1e-5 * std::fabs(want[i]))
          << gpu::attentionShapeName(GetParam()) << " n " << n << " pos0 " << pos0 << " tail from "
          << host.tailStart(kLayer, pos0) << " value " << i;
    }
  };
  for (uint32_t n : {16u, 16u, 16u, 16u}) step(n);                  // prefill chunks: rows 0..63
  for (uint32_t i = 0; i < 16 && !HasFatalFailure(); ++i) step(1);  // rows 64..79
  // The ring (39 slots) holds rows 41..79; back to 50 rows, the query at 50
  // reads rows 27..50 but finds only 41.. in the ring.
  ASSERT_TRUE(host.trim(50).ok());
  ASSERT_EQ(host.tailStart(kLayer, 50), 41u);
  step(8);
  for (uint32_t i = 0; i < 4 && !HasFatalFailure(); ++i) step(1);
}

// scratchBytes() covers every step up to its rows. The splits of a plan are
// not monotone in the rows (whole 64-row splits: on a CPU device with two
// KV heads, 256 rows take 4 splits and 260 take 3), and scratch sized from
// the plan at its most rows once failed decode steps from 193 rows of a
// cache of 260 ("split 4 ways"); a precision tail's pass adds its own
// splits. Every decode step of caches of 260 and 520 rows, with and without
// a tail, is recorded against the scratch made for those rows.
TEST_P(AttentionTest, EveryDecodeStepFitsTheScratchOfItsRows) {
  constexpr uint32_t kHeads = 2, kDim = 64, kHead = 4, kRowsPerPage = 64;
  for (uint32_t tail : {0u, 24u}) {
    gpu::KvPageLayout layout = gpu::KvPageLayout::f16(kLayers, kHeads, kDim, kRowsPerPage);
    for (uint32_t part = 0; part < 2; ++part)
      layout.streams[kLayer * 2 + part].codec = gpu::kvCodecFor("q4_0").value();
    layout.tailRows = tail;
    layout.tailSlots = tail;
    layout.tail = {false, tail > 0};
    gpu::Buffer ring = deviceBuffer(std::max<size_t>(4, layout.tailLayout().ringPageBytes()));
    for (uint32_t maxRows : {260u, 520u}) {
      auto scratch = attention().makeScratch(layout, kHead, 1, maxRows);
      ASSERT_TRUE(scratch.ok()) << scratch.error().describe();
      std::vector<gpu::Buffer> pages;
      std::vector<const gpu::Buffer*> pagePointers;
      while (pages.size() * kRowsPerPage < maxRows)
        pages.push_back(deviceBuffer(layout.pageBytes()));
      for (const gpu::Buffer& p : pages) pagePointers.push_back(&p);
      gpu::Buffer q = upload(randomFloats(size_t{kHead} * kDim, maxRows + tail));
      gpu::Buffer out = deviceBuffer(size_t{kHead} * kDim * sizeof(float));
      for (uint32_t pos0 = 0; pos0 < maxRows; ++pos0) {
        ASSERT_TRUE(rec().begin().ok());
        const auto s = attention().attend(rec(), layout, pagePointers, kLayer, q, out, 1, pos0,
                                          kHead, *scratch, {}, {&ring, 0});
        ASSERT_TRUE(rec().submitAndWait().ok());
        ASSERT_TRUE(s.ok()) << "tail " << tail << ", scratch for " << maxRows << " rows, step at "
                            << pos0 << ": " << s.error().describe();
      }
    }
  }
}

// A decode step that splits its rows builds no pipeline after prepareDecode
// (kernels of their own, so no other test built them first).
TEST_P(AttentionTest, PreparedDecodeBuildsWhatASplitStepUses) {
  Twin c(1, 64, 256);
  fill(c, 1500, 500, 3);
  gpu::AttentionKernels fresh(ctx(), GetParam());
  ASSERT_TRUE(fresh.prepareDecode(c.layout, 4).ok());
  const size_t built = fresh.pipelineCount();
  const uint32_t rows = c.host.rows();
  ASSERT_GT(fresh.plan(c.layout, 4, 1, rows - 1).splits, 1u);
  const auto q = randomFloats(size_t{4} * 64, 31, -3.0f, 3.0f);
  gpu::Buffer qb = upload(q), out = deviceBuffer(q.size() * sizeof(float));
  auto scratch = fresh.makeScratch(c.layout, 4, 1, rows);
  ASSERT_TRUE(scratch.ok()) << scratch.error().describe();
  ASSERT_TRUE(rec().begin().ok());
  ASSERT_TRUE(
      fresh.attend(rec(), c.layout, c.pagePointers, kLayer, qb, out, 1, rows - 1, 4, *scratch)
          .ok());
  ASSERT_TRUE(rec().submitAndWait().ok());
  EXPECT_EQ(fresh.pipelineCount(), built);
}

// The same with a precision tail: its pass's float32 f16 pipelines too.
TEST_P(AttentionTest, PreparedDecodeBuildsTheTailPassToo) {
  constexpr uint32_t kHeads = 1, kDim = 64, kHead = 4, kRowsPerPage = 256, kRows = 1500;
  gpu::KvPageLayout layout = gpu::KvPageLayout::f16(kLayers, kHeads, kDim, kRowsPerPage);
  for (uint32_t part = 0; part < 2; ++part)
    layout.streams[kLayer * 2 + part].codec = gpu::kvCodecFor("q4_0").value();
  layout.tailRows = 32;
  layout.tailSlots = 32;
  layout.tail = {false, true};
  gpu::AttentionKernels fresh(ctx(), GetParam());
  ASSERT_TRUE(fresh.prepareDecode(layout, kHead).ok());
  const size_t built = fresh.pipelineCount();
  std::vector<gpu::Buffer> pages;
  std::vector<const gpu::Buffer*> pagePointers;
  while (pages.size() * kRowsPerPage < kRows) pages.push_back(deviceBuffer(layout.pageBytes()));
  for (const gpu::Buffer& p : pages) pagePointers.push_back(&p);
  gpu::Buffer ring = deviceBuffer(layout.tailLayout().ringPageBytes());
  gpu::Buffer q = upload(randomFloats(size_t{kHead} * kDim, 5));
  gpu::Buffer out = deviceBuffer(size_t{kHead} * kDim * sizeof(float));
  auto scratch = fresh.makeScratch(layout, kHead, 1, kRows);
  ASSERT_TRUE(scratch.ok()) << scratch.error().describe();
  ASSERT_TRUE(rec().begin().ok());
  ASSERT_TRUE(fresh
                  .attend(rec(), layout, pagePointers, kLayer, q, out, 1, kRows - 1, kHead,
                          *scratch, {}, {&ring, 0})
                  .ok());
  ASSERT_TRUE(rec().submitAndWait().ok());
  EXPECT_EQ(fresh.pipelineCount(), built);
}

TEST_P(AttentionTest, RejectsBadArguments) {
  Twin c(2, 64, 16);
  fill(c, 20, 20, 4);
  gpu::Buffer q = deviceBuffer(4 * 64 * sizeof(float)), out = deviceBuffer(4 * 64 * sizeof(float));
  ASSERT_TRUE(rec().begin().ok());
  auto threeHeads = attention().attend(rec(), c.layout, c.pagePointers, kLayer, q, out, 1, 19, 3);
  ASSERT_FALSE(threeHeads.ok());
  EXPECT_EQ(threeHeads.error().code, ErrorCode::kInvalidArgument);
  auto pastPages = attention().attend(rec(), c.layout, c.pagePointers, kLayer, q, out, 1, 40, 4);
  ASSERT_FALSE(pastPages.ok());
  EXPECT_EQ(pastPages.error().code, ErrorCode::kInvalidArgument);
  auto badLayer = attention().writeKv(rec(), c.layout, c.pagePointers, 2, q, q, 1, 0);
  ASSERT_FALSE(badLayer.ok());
  EXPECT_EQ(badLayer.error().code, ErrorCode::kInvalidArgument);
  ASSERT_TRUE(rec().submitAndWait().ok());
}

}  // namespace
}  // namespace kvscope::test
