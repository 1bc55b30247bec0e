// The KV codecs on the device (gpu/kv_codec.h, shaders/kv_encode.comp,
// shaders/kv_codec.glsl) against the CPU schemes (engine/kv), under validation.
//
// Encode: writeKv must store the bytes kv::KvScheme::encode stores. For
// q8_0, q4_0, fp8 and affine4 that is every byte: the shader repeats the
// CPU's float32 steps (divisions included, correctly rounded on lavapipe).
// The turbo codecs take norms in float32 on the device, in double on the
// CPU, and rotate non-power-of-two rows in float32 there, in double here
// (power-of-two rows go through the same float32 fast transform on both),
// so a coordinate within ~1e-7 (relative) of a decision boundary may get
// the neighbouring code: such flips must be rare (at most
// 1 in 500 codes; we see ~1 in 10^4), each exactly one step, and a gamma
// whose group has no flip may differ by one fp16 step (its float32 value
// can straddle an fp16 rounding midpoint); a flip moves its group's gamma by
// up to ~1/d relative (one centroid of the norm changed), allowed 3%.
// turbo*b choose each block's scale by comparing float32 errors; where two
// candidates tie to within rounding the device may keep the other one: such
// blocks must be rare (1 in 100) and of the same error to 1e-4 of the
// block's energy against the exact rotated input.
// The rotated block formats (q8_0r, ...) store every byte of the CPU's where
// both rotate with the same float32 fast transform (power-of-two rows); for
// other rows the device's float32 rotation differs from the CPU's double one
// in the last bits, so a value may take the neighbouring code and a scale the
// neighbouring fp16: at most 1 byte in 1000 may differ, and each row must
// decode, against the exact rotated input, to at most 1.5x the CPU row's
// error.
//
// Attention: the reference reads the very bytes the device holds (copied into
// a host kv::KvCache), decodes them with the scheme's decodeRotated, rotates
// q with R_k and the result back with R_v^T (kv::rotateVector, double accumulation)
// and sums in double. The device differs only in float32 rounding (rotations,
// scores, exp, sums), so each output vector must lie within
// 64 * eps * (1 + max_j |score terms|_1 + sqrt(rows)) * sum_j w_j ||v_j||
// of the reference, and the normalized mean squared error over all outputs
// must stay below 1e-9: one misplaced row of weight 1/400 gives ~1e-6.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/float_convert.h"
#include "gpu/attention_kernels.h"
#include "gpu/kv_codec.h"
#include "gpu_fixture.h"
#include "kv/code_packing.h"
#include "kv/kv_cache.h"
#include "kv/kv_index.h"
#include "kv/rotation.h"
#include "kv/scheme_turbo.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

using kv::KvPart;

constexpr double kEps = 1.1920929e-7;
constexpr uint32_t kLayers = 2;  // the kernels use layer 1, so partOffset matters
constexpr uint32_t kLayer = 1;

const char* const kCodecs[] = {"q8_0",    "q4_0",     "fp8",     "affine4", "turbo4",
                               "turbo3",  "turbo2",   "turbo4g", "turbo3g", "turbo2g",
                               "turbo4b", "turbo3b",  "turbo2b", "q8_0r",   "q4_0r",
                               "fp8r",    "affine4r", "turbo6b", "turbo5b", "f16"};

class KvCodecTest : public GpuTest, public ::testing::WithParamInterface<gpu::AttentionShape> {
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

  // The same cache on the host (kv::KvCache, CPU schemes) and on the device.
  struct Twin {
    std::unique_ptr<kv::KvCache> host;
    gpu::KvPageLayout layout;
    std::vector<gpu::Buffer> rotations;  // layout.streams point into it
    std::vector<gpu::Buffer> pages;
    std::vector<const gpu::Buffer*> pagePointers;
  };

  static std::unique_ptr<Twin> makeTwin(const std::string& key, const std::string& value,
                                        uint32_t nHeadKv, uint32_t headDim, uint32_t rowsPerPage) {
    auto c = std::make_unique<Twin>();
    const std::vector<kv::LayerSchemes> layers(kLayers, kv::LayerSchemes{key, value});
    auto host = kv::KvCache::create(kv::KvGeometry::uniform(kLayers, nHeadKv, headDim, rowsPerPage),
                                    layers);
    EXPECT_TRUE(host.ok()) << host.error().describe();
    if (!host.ok()) return nullptr;
    c->host = std::move(host).value();
    c->layout = gpu::KvPageLayout::f16(kLayers, nHeadKv, headDim, rowsPerPage);
    c->rotations.reserve(2 * kLayers);
    for (uint32_t l = 0; l < kLayers; ++l) {
      for (uint32_t p = 0; p < 2; ++p) {
        const kv::KvScheme& s = c->host->scheme(l, static_cast<KvPart>(p));
        gpu::KvStream& stream = c->layout.streams[l * 2 + p];
        auto codec = gpu::kvCodecFor(s.name());
        EXPECT_TRUE(codec.ok()) << codec.error().describe();
        stream.codec = *codec;
        EXPECT_EQ(c->layout.rowBytes(l, p), s.rowBytes()) << s.name() << " d " << headDim;
        if (s.rotated()) {
          stream.codebook.assign(s.codebook().begin(), s.codebook().end());
          auto r = gpu::uploadRotation(ctx(), s.rotation());
          EXPECT_TRUE(r.ok()) << r.error().describe();
          c->rotations.push_back(std::move(r).value());
          stream.rotation = &c->rotations.back();
        }
      }
    }
    return c;
  }

  static gpu::AttentionKernels& attention() {
    auto& a = s_attention[static_cast<int>(GetParam())];
    if (!a) a = std::make_unique<gpu::AttentionKernels>(ctx(), GetParam());
    return *a;
  }

  // Appends n rows of K and V ([n][nHeadKv][headDim]): writeKv on the device;
  // on the host the CPU encoding goes to `cpuRows` (when given) and the
  // device's bytes into the host cache, so both caches hold the same codes.
  // With `index`, writeKv also keeps that sidecar.
  static void append(Twin& c, const std::vector<float>& k, const std::vector<float>& v, uint32_t n,
                     kv::KvCache* cpuRows = nullptr, const gpu::IndexerBuffers* index = nullptr) {
    const uint32_t pos0 = c.host->rows(), d = c.layout.headDim(0), heads = c.layout.nHeadKv(0);
    ASSERT_TRUE(c.host->append(n).ok());
    if (cpuRows) {
      ASSERT_TRUE(cpuRows->append(n).ok());
      for (uint32_t t = 0; t < n; ++t) {
        for (uint32_t h = 0; h < heads; ++h) {
          const size_t off = (size_t{t} * heads + h) * d;
          cpuRows->write(kLayer, KvPart::kKey, h, pos0 + t, {&k[off], d});
          cpuRows->write(kLayer, KvPart::kValue, h, pos0 + t, {&v[off], d});
        }
      }
    }
    while (c.pages.size() * c.layout.rowsPerPage < c.host->capacity())
      c.pages.push_back(deviceBuffer(c.layout.pageBytes()));
    c.pagePointers.clear();
    for (const gpu::Buffer& p : c.pages) c.pagePointers.push_back(&p);
    gpu::Buffer kb = upload(k), vb = upload(v);
    auto scratch = attention().makeScratch(c.layout, heads, n, pos0 + n);
    ASSERT_TRUE(scratch.ok()) << scratch.error().describe();
    ASSERT_TRUE(rec().begin().ok());
    auto s = attention().writeKv(rec(), c.layout, c.pagePointers, kLayer, kb, vb, n, pos0, *scratch,
                                 index);
    ASSERT_TRUE(s.ok()) << s.error().describe();
    ASSERT_TRUE(rec().submitAndWait().ok());
    std::vector<uint8_t> page(c.layout.pageBytes());
    for (uint32_t row = pos0; row < pos0 + n; ++row) {
      if (row == pos0 || row % c.layout.rowsPerPage == 0) {
        ASSERT_TRUE(c.pages[row / c.layout.rowsPerPage].download(page.data(), page.size()).ok());
      }
      for (uint32_t p = 0; p < 2; ++p) {
        for (uint32_t h = 0; h < heads; ++h) {
          auto dst = c.host->row(kLayer, static_cast<KvPart>(p), h, row);
          std::memcpy(dst.data(), page.data() + c.layout.rowOffset(kLayer, p, h, row), dst.size());
        }
      }
    }
  }

  // Rows of mixed scale: most uniform in [-1, 1), some scaled by 1e-3 or 40,
  // an all-zero row and rows with one large outlier channel.
  static std::vector<float> mixedRows(uint32_t count, uint32_t width, uint32_t d, uint32_t seed) {
    auto x = randomFloats(size_t{count} * width, seed);
    for (size_t r = 0; r < x.size() / d; ++r) {
      float* row = &x[r * d];
      switch ((r + seed) % 7) {
        case 1:
          for (uint32_t i = 0; i < d; ++i) row[i] *= 1e-3f;
          break;
        case 2:
          for (uint32_t i = 0; i < d; ++i) row[i] *= 40.0f;
          break;
        case 3:
          row[(r * 5) % d] = 25.0f;
          break;
        case 4:
          if (r == 4) std::fill(row, row + d, 0.0f);
          break;
        default:
          break;
      }
    }
    return x;
  }

  static void fill(Twin& c, uint32_t count, uint32_t chunk, uint32_t seed,
                   kv::KvCache* cpuRows = nullptr, const gpu::IndexerBuffers* index = nullptr) {
    const uint32_t width = c.layout.nHeadKv(0) * c.layout.headDim(0);
    for (uint32_t done = 0; done < count;) {
      const uint32_t n = std::min(chunk, count - done);
      append(c, mixedRows(n, width, c.layout.headDim(0), seed + done),
             mixedRows(n, width, c.layout.headDim(0), seed + done + 7777), n, cpuRows, index);
      if (::testing::Test::HasFatalFailure()) return;
      done += n;
    }
  }

  // The reference of the header comment for the last n rows' queries: out in
  // double, and per output vector the allowed distance.
  // With `selected` ([nHeadKv] row lists, n == 1) only those rows are
  // attended; weights below sparseV are dropped.
  static void reference(const Twin& c, const std::vector<float>& q, uint32_t n, uint32_t nHead,
                        std::vector<double>& out, std::vector<double>& tol,
                        const std::vector<std::vector<uint32_t>>& selected = {},
                        double sparseV = 0.0) {
    const uint32_t d = c.layout.headDim(0), gqa = nHead / c.layout.nHeadKv(0),
                   rows = c.host->rows();
    const uint32_t pos0 = rows - n;
    const kv::KvScheme& ks = c.host->scheme(kLayer, KvPart::kKey);
    const kv::KvScheme& vs = c.host->scheme(kLayer, KvPart::kValue);
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    std::vector<float> keys(size_t{rows} * d), values(keys.size()), qh(d), qr(d), acc(d), o(d);
    std::vector<double> scores(rows), vnorm(rows), accd(d);
    out.assign(size_t{n} * nHead * d, 0.0);
    tol.assign(size_t{n} * nHead, 0.0);
    for (uint32_t h = 0; h < nHead; ++h) {
      const uint32_t kvHead = h / gqa;
      if (h % gqa == 0) {
        for (uint32_t j = 0; j < rows; ++j) {
          c.host->readRotated(kLayer, KvPart::kKey, kvHead, j, {&keys[size_t{j} * d], d});
          c.host->readRotated(kLayer, KvPart::kValue, kvHead, j, {&values[size_t{j} * d], d});
          double s2 = 0.0;
          for (uint32_t i = 0; i < d; ++i)
            s2 += double{values[size_t{j} * d + i]} * values[size_t{j} * d + i];
          vnorm[j] = std::sqrt(s2);
        }
      }
      for (uint32_t t = 0; t < n; ++t) {
        std::vector<uint32_t> attended;
        if (selected.empty()) {
          for (uint32_t j = 0; j < pos0 + t + 1; ++j) attended.push_back(j);
        } else {
          attended = selected[kvHead];
        }
        const auto visible = static_cast<uint32_t>(attended.size());
        const size_t at = (size_t{t} * nHead + h) * d;
        std::copy_n(&q[at], d, qh.begin());
        if (ks.rotated()) {
          kv::rotateVector(ks.rotation(), qh, qr);
        } else {
          qr = qh;
        }
        double maxScore = -INFINITY, maxTerms = 0.0;
        for (uint32_t j : attended) {
          double s = 0.0, terms = 0.0;
          for (uint32_t i = 0; i < d; ++i) {
            s += double{qr[i]} * keys[size_t{j} * d + i];
            terms += std::fabs(double{qr[i]} * keys[size_t{j} * d + i]);
          }
          scores[j] = s * scale;
          maxScore = std::max(maxScore, scores[j]);
          maxTerms = std::max(maxTerms, terms * scale);
        }
        double sum = 0.0;
        for (uint32_t j : attended) sum += (scores[j] = std::exp(scores[j] - maxScore));
        std::fill(accd.begin(), accd.end(), 0.0);
        double weightedNorm = 0.0;
        for (uint32_t j : attended) {
          const double w = scores[j] / sum;
          if (w < sparseV) continue;
          for (uint32_t i = 0; i < d; ++i) accd[i] += w * values[size_t{j} * d + i];
          weightedNorm += w * vnorm[j];
        }
        if (vs.rotated()) {
          // R_v^T acc in double: x_j = sum_i R_ij acc_i.
          const auto r = vs.rotation();
          for (uint32_t j = 0; j < d; ++j) {
            double x = 0.0;
            for (uint32_t i = 0; i < d; ++i) x += double{r[size_t{i} * d + j]} * accd[i];
            out[at + j] = x;
          }
        } else {
          std::copy(accd.begin(), accd.end(), out.begin() + static_cast<ptrdiff_t>(at));
        }
        tol[size_t{t} * nHead + h] =
            64 * kEps * (1.0 + maxTerms + std::sqrt(static_cast<double>(visible))) * weightedNorm;
      }
    }
  }

  // Appends n rows, attends with n random queries and compares with the
  // reference. With an indexer in `sparse` (n == 1), over the rows the device
  // selected, which must be fewer than all and hold sinks and window.
  static void attendAndCompare(Twin& c, uint32_t n, uint32_t nHead, uint32_t seed,
                               const gpu::SparseAttention& sparse = {}) {
    const uint32_t width = c.layout.nHeadKv(0) * c.layout.headDim(0), d = c.layout.headDim(0);
    append(c, mixedRows(n, width, d, seed), mixedRows(n, width, d, seed + 1), n, nullptr,
           sparse.indexer);
    if (::testing::Test::HasFatalFailure()) return;
    const uint32_t total = c.host->rows(), pos0 = total - n;
    auto q = randomFloats(size_t{n} * nHead * d, seed + 2, -3.0f, 3.0f);
    gpu::Buffer qb = upload(q), out = deviceBuffer(q.size() * sizeof(float));
    auto scratch = attention().makeScratch(c.layout, nHead, n, total);
    ASSERT_TRUE(scratch.ok()) << scratch.error().describe();
    ASSERT_TRUE(rec().begin().ok());
    auto s = attention().attend(rec(), c.layout, c.pagePointers, kLayer, qb, out, n, pos0, nHead,
                                *scratch, sparse);
    ASSERT_TRUE(s.ok()) << s.error().describe();
    ASSERT_TRUE(rec().submitAndWait().ok());
    const auto got = download<float>(out, q.size());

    std::vector<std::vector<uint32_t>> selected;
    if (const gpu::IndexerBuffers* ix = sparse.indexer) {
      const auto* lists = static_cast<const uint32_t*>(ix->lists.mapped());
      for (uint32_t h = 0; h < c.layout.nHeadKv(0); ++h) {
        const uint32_t* list = lists + ix->listAt(kLayer, h);
        selected.emplace_back(list + 1, list + 1 + list[0]);
        const auto& rows = selected.back();
        ASSERT_LT(rows.size(), total);
        ASSERT_GE(rows.size(), ix->shape.sinks + ix->shape.window);
        EXPECT_EQ(rows.front(), 0u);
        EXPECT_EQ(rows.back(), total - 1);
      }
    }
    std::vector<double> want, tol;
    reference(c, q, n, nHead, want, tol, selected, sparse.sparseV);
    const auto plan = attention().plan(c.layout, nHead, n, pos0, kLayer);
    const std::string what = std::string(gpu::attentionShapeName(GetParam())) + " k " +
                             std::string(c.host->scheme(kLayer, KvPart::kKey).name()) + " v " +
                             std::string(c.host->scheme(kLayer, KvPart::kValue).name()) +
                             " head_dim " + std::to_string(d) + " gqa " +
                             std::to_string(nHead / c.layout.nHeadKv(0)) + " n " +
                             std::to_string(n) + " pos0 " + std::to_string(pos0) + " splits " +
                             std::to_string(plan.splits);
    double err2 = 0.0, ref2 = 0.0;
    for (size_t vec = 0; vec < tol.size(); ++vec) {
      double e2 = 0.0;
      for (uint32_t i = 0; i < d; ++i) {
        const double diff = got[vec * d + i] - want[vec * d + i];
        e2 += diff * diff;
        ref2 += want[vec * d + i] * want[vec * d + i];
      }
      err2 += e2;
      ASSERT_LE(std::sqrt(e2), tol[vec]) << what << " output vector " << vec;
    }
    EXPECT_LT(err2 / std::max(ref2, 1e-30), 1e-9) << what;
  }

 private:
  static std::unique_ptr<gpu::AttentionKernels> s_attention[3];  // by AttentionShape
};
std::unique_ptr<gpu::AttentionKernels> KvCodecTest::s_attention[3];

INSTANTIATE_TEST_SUITE_P(Shapes, KvCodecTest,
                         ::testing::Values(gpu::AttentionShape::kCpu, gpu::AttentionShape::kGpu),
                         [](const auto& param) {
                           return std::string(gpu::attentionShapeName(param.param));
                         });

// Codes and scales of one turbo row, from its bytes.
struct TurboRow {
  std::vector<uint16_t> gammas;
  std::vector<uint8_t> codes;
};

TurboRow parseTurbo(std::span<const uint8_t> bytes, const kv::KvScheme& s) {
  const auto bits = gpu::kvCodecBits(*gpu::kvCodecFor(s.name()));
  const uint32_t d = s.dim(), scales = s.rowLayout().scaleBytes / 2;
  TurboRow r;
  r.gammas.resize(scales);
  std::memcpy(r.gammas.data(), bytes.data(), 2 * size_t{scales});
  for (uint32_t i = 0; i < d; ++i)
    r.codes.push_back(kv::unpackCode(bytes.subspan(2 * scales), bits, d, i));
  return r;
}

TEST_P(KvCodecTest, EncodeMatchesTheCpuSchemes) {
  size_t codes = 0, flips = 0, blocks = 0, rescaled = 0;
  size_t rotatedBytes = 0, rotatedBytesDiffer = 0;  // rotated block rows of other dims
  for (size_t ci = 0; ci < std::size(kCodecs); ++ci) {
    // V takes the next codec, so every layer mixes two codecs.
    const std::string key = kCodecs[ci], value = kCodecs[(ci + 1) % std::size(kCodecs)];
    for (uint32_t headDim : {8u, 48u, 64u, 80u, 128u, 256u}) {
      constexpr uint32_t kHeads = 3;
      auto c = makeTwin(key, value, kHeads, headDim, 7);
      ASSERT_TRUE(c);
      auto cpu = kv::KvCache::create(kv::KvGeometry::uniform(kLayers, kHeads, headDim, 7),
                                     std::vector(kLayers, kv::LayerSchemes{key, value}));
      ASSERT_TRUE(cpu.ok());
      // Batches that start mid-page and span several pages; `inputs` keeps
      // the rows fill() wrote, [row][head][headDim] per part.
      std::vector<float> inputs[2];
      uint32_t seed = headDim * 100 + static_cast<uint32_t>(ci);
      for (uint32_t n : {5u, 9u, 1u, 25u}) {
        fill(*c, n, n, seed += 50, cpu->get());
        if (HasFatalFailure()) return;
        for (uint32_t p = 0; p < 2; ++p) {
          const auto rows = mixedRows(n, kHeads * headDim, headDim, seed + (p == 0 ? 0 : 7777));
          inputs[p].insert(inputs[p].end(), rows.begin(), rows.end());
        }
      }
      for (uint32_t row = 0; row < c->host->rows(); ++row) {
        for (uint32_t p = 0; p < 2; ++p) {
          const auto part = static_cast<KvPart>(p);
          const kv::KvScheme& s = c->host->scheme(kLayer, part);
          for (uint32_t h = 0; h < kHeads; ++h) {
            const auto got = c->host->row(kLayer, part, h, row);
            const auto want = (*cpu)->row(kLayer, part, h, row);
            const std::string where = std::string(s.name()) + " head_dim " +
                                      std::to_string(headDim) + " row " + std::to_string(row) +
                                      " head " + std::to_string(h);
            const bool plainBytes = s.codebook().empty();  // not a turbo codec
            if (!s.rotated() || (plainBytes && std::has_single_bit(headDim))) {
              ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0) << where;
              continue;
            }
            if (plainBytes) {
              std::vector<float> y(headDim), gotY(headDim), wantY(headDim);
              kv::rotateVector(s.rotation(),
                               {&inputs[p][(size_t{row} * kHeads + h) * headDim], headDim}, y);
              s.decodeRotated(got, gotY);
              s.decodeRotated(want, wantY);
              double gotError = 0, wantError = 0;
              for (uint32_t i = 0; i < headDim; ++i) {
                gotError += (double{gotY[i]} - y[i]) * (gotY[i] - y[i]);
                wantError += (double{wantY[i]} - y[i]) * (wantY[i] - y[i]);
              }
              ASSERT_LE(gotError, 1.5 * wantError + 1e-12) << where;
              for (size_t b = 0; b < got.size(); ++b)
                rotatedBytesDiffer += got[b] != want[b] ? 1 : 0;
              rotatedBytes += got.size();
              continue;
            }
            const auto& turbo = dynamic_cast<const kv::TurboScheme&>(s);
            const TurboRow g = parseTurbo(got, s), w = parseTurbo(want, s);
            const uint32_t width = turbo.scaleWidth();
            // turbo*b: the rotated input and both decodings, to compare the
            // error of a block whose scale differs (a near-tie, kv_encode.comp).
            std::vector<float> y(headDim), gotY(headDim), wantY(headDim);
            if (turbo.scale() == kv::TurboScale::kBlock) {
              kv::rotateVector(s.rotation(),
                               {&inputs[p][(size_t{row} * kHeads + h) * headDim], headDim}, y);
              s.decodeRotated(got, gotY);
              s.decodeRotated(want, wantY);
            }
            for (size_t grp = 0; grp < g.gammas.size(); ++grp) {
              const uint32_t begin = grp * width, end = std::min<uint32_t>(headDim, begin + width);
              if (turbo.scale() == kv::TurboScale::kBlock) {
                ++blocks;
                if (g.gammas[grp] != w.gammas[grp]) {
                  ++rescaled;
                  double gotError = 0, wantError = 0, energy = 0;
                  for (uint32_t i = begin; i < end; ++i) {
                    gotError += (double{gotY[i]} - y[i]) * (gotY[i] - y[i]);
                    wantError += (double{wantY[i]} - y[i]) * (wantY[i] - y[i]);
                    energy += double{y[i]} * y[i];
                  }
                  ASSERT_NEAR(gotError, wantError, 1e-4 * energy) << where << " block " << grp;
                  codes += end - begin;
                  continue;
                }
              }
              bool flipped = false;
              for (uint32_t i = begin; i < end; ++i) {
                ++codes;
                if (g.codes[i] == w.codes[i]) continue;
                ++flips;
                flipped = true;
                ASSERT_EQ(std::abs(int{g.codes[i]} - int{w.codes[i]}), 1)
                    << where << " value " << i;
              }
              const float gg = fp16ToFloat(g.gammas[grp]), wg = fp16ToFloat(w.gammas[grp]);
              if (flipped) {
                ASSERT_NEAR(gg, wg, 0.03 * std::fabs(wg)) << where << " group " << grp;
              } else {
                ASSERT_LE(std::abs(int{g.gammas[grp]} - int{w.gammas[grp]}), 1)
                    << where << " group " << grp;
              }
            }
            const size_t codeEnd = s.rowLayout().scaleBytes + s.rowLayout().codeBytes;
            for (size_t b = codeEnd; b < got.size(); ++b)
              ASSERT_EQ(got[b], 0) << where << " padding";
          }
        }
      }
    }
  }
  std::printf(
      "turbo codes: %zu of %zu differ from the CPU's (by one step); turbo*b blocks: %zu "
      "of %zu chose another scale of equal error\n",
      flips, codes, rescaled, blocks);
  std::printf("rotated block formats, rows of other dims: %zu of %zu bytes differ\n",
              rotatedBytesDiffer, rotatedBytes);
  EXPECT_LE(flips * 500, codes);
  EXPECT_LE(rescaled * 100, blocks);
  EXPECT_LE(rotatedBytesDiffer * 1000, rotatedBytes);
  EXPECT_GT(rotatedBytes, 0u);
  EXPECT_GT(blocks, 0u);
}

TEST_P(KvCodecTest, AttentionMatchesReferenceForEveryHeadDimAndGqa) {
  // One growing cache per case: prefill and decode steps at pos0 0, 3, 300,
  // 364, 365 over pages of 32 rows (partial pages); the last two split.
  struct Step {
    uint32_t pos0, n;
  };
  constexpr Step kSteps[] = {{0, 1}, {3, 5}, {300, 64}, {364, 1}, {365, 5}};
  // The full matrix for q8_0 keys and turbo3 values; turbo4 on both sides
  // (K and V rotated) at two of the GQA ratios.
  struct Case {
    const char *key, *value;
    std::vector<uint32_t> gqas;
  };
  const Case kCases[] = {{"q8_0", "turbo3", {1, 2, 4, 8}}, {"turbo4", "turbo4", {2, 8}}};
  for (const auto& [key, value, gqas] : kCases) {
    for (uint32_t headDim : {8u, 48u, 64u, 80u, 128u, 256u}) {
      for (uint32_t gqa : gqas) {
        auto c = makeTwin(key, value, 2, headDim, 32);
        ASSERT_TRUE(c);
        for (const Step& step : kSteps) {
          fill(*c, step.pos0 - c->host->rows(), 100, headDim * 10 + gqa + step.pos0);
          attendAndCompare(*c, step.n, 2 * gqa, headDim + gqa + step.n);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST_P(KvCodecTest, AttentionMatchesReferenceForEveryCodec) {
  // Every codec as K and as V, mixed with others, at two head dims.
  const std::pair<const char*, const char*> kPairs[] = {
      {"q4_0", "affine4"},  {"fp8", "turbo2"},      {"turbo3g", "q8_0"},    {"turbo2g", "turbo4g"},
      {"f16", "turbo4"},    {"turbo2", "f16"},      {"affine4", "fp8"},     {"turbo4g", "turbo3g"},
      {"turbo3", "q4_0"},   {"turbo4b", "turbo2b"}, {"q8_0", "turbo3b"},    {"q8_0r", "q4_0r"},
      {"affine4r", "fp8r"}, {"q4_0r", "turbo4b"},   {"turbo6b", "turbo5b"}, {"turbo5b", "q8_0"}};
  for (const auto& [key, value] : kPairs) {
    for (uint32_t headDim : {64u, 80u}) {
      auto c = makeTwin(key, value, 2, headDim, 16);
      ASSERT_TRUE(c);
      fill(*c, 37, 20, headDim);
      attendAndCompare(*c, 1, 4, 11);
      attendAndCompare(*c, 6, 4, 12);
      if (HasFatalFailure()) return;
    }
  }
}

// An indexed decode step (scores, selection, gather, attention over the
// gathered rows, sparse V) in both launch shapes, against the double
// reference over the rows the device selected.
TEST_P(KvCodecTest, IndexedAttentionMatchesReferenceOverTheSelectedRows) {
  const std::pair<const char*, const char*> kPairs[] = {
      {"q8_0", "turbo4"}, {"turbo3", "q4_0"}, {"f16", "fp8"}};
  for (const auto& [key, value] : kPairs) {
    for (float sparseV : {0.0f, 0.02f}) {
      auto c = makeTwin(key, value, 2, 64, 64);
      ASSERT_TRUE(c);
      kv::IndexerOptions options{.topK = 32, .window = 16};
      const gpu::IndexerShape shape{.pageRows = 16,
                                    .sinks = options.sinks,
                                    .window = options.window,
                                    .pickedPages = kv::pickedPages(options),
                                    .entryBytes = kv::KvIndex::entryBytesFor(64)};
      auto index = attention().makeIndexer(c->layout, 4, 512, shape);
      ASSERT_TRUE(index.ok()) << index.error().describe();
      fill(*c, 250, 50, 3, nullptr, &*index);
      attendAndCompare(*c, 1, 4, 21, {sparseV, &*index});
      attendAndCompare(*c, 1, 4, 22, {sparseV, &*index});
      if (HasFatalFailure()) return;
    }
  }
}

// The sidecar the device keeps (kv_index.comp rebuilds each page an append
// touches from the stored keys) must hold the bytes kv::KvIndex builds row by
// row from the same codes: the host cache holds the device's bytes, and
// turning its index on folds them in one at a time. Appends of 5 rows cross
// sidecar pages; a trim leaves a partial page the next append rebuilds. Both
// kinds of entry: Quest's bounds and the mean and standard deviation.
TEST_P(KvCodecTest, SidecarMatchesTheHostIndex) {
  if (GetParam() == gpu::AttentionShape::kGpu) GTEST_SKIP() << "the sidecar has one launch shape";
  const uint32_t heads = 2;
  for (const char* codec : {"f16", "q8_0", "turbo3", "affine4", "turbo4b"}) {
    for (uint32_t headDim : {64u, 80u}) {
      for (uint32_t pageRows : {16u, 64u}) {
        for (kv::PageScore score : {kv::PageScore::kBounds, kv::PageScore::kMeanStd}) {
          SCOPED_TRACE(fmt::format("{} d {} page {} mean+std {}", codec, headDim, pageRows,
                                   score == kv::PageScore::kMeanStd));
          auto c = makeTwin(codec, "q8_0", heads, headDim, 64);
          ASSERT_TRUE(c);
          kv::IndexerOptions options;
          options.topK = 32;
          options.pageRows = pageRows;
          options.pageScore = score;
          const gpu::IndexerShape shape{.pageRows = pageRows,
                                        .meanStd = score == kv::PageScore::kMeanStd,
                                        .entryBytes = kv::KvIndex::entryBytesFor(headDim)};
          auto index = attention().makeIndexer(c->layout, heads, 256, shape);
          ASSERT_TRUE(index.ok()) << index.error().describe();
          const auto expectSame = [&] {
            c->host->enableIndex({});
            c->host->enableIndex(options);
            const kv::KvIndex& host = *c->host->index();
            const uint32_t bytes = shape.entryBytes;
            const auto device = download<uint8_t>(
                index->sidecar, size_t{kLayers} * index->sidecarPages * heads * bytes);
            const uint32_t pages = (c->host->rows() + pageRows - 1) / pageRows;
            for (uint32_t p = 0; p < pages; ++p) {
              for (uint32_t h = 0; h < heads; ++h) {
                const size_t at = ((size_t{kLayer} * index->sidecarPages + p) * heads + h) * bytes;
                const auto* want = reinterpret_cast<const uint8_t*>(host.entry(kLayer, p, h));
                ASSERT_TRUE(std::equal(want, want + bytes, device.begin() + at))
                    << "page " << p << " head " << h << " of " << c->host->rows() << " rows";
              }
            }
          };
          fill(*c, 150, 5, 11, nullptr, &*index);
          ASSERT_NO_FATAL_FAILURE(expectSame());
          ASSERT_TRUE(c->host->trim(93).ok());
          fill(*c, 40, 7, 23, nullptr, &*index);
          ASSERT_NO_FATAL_FAILURE(expectSame());
        }
      }
    }
  }
}

TEST_P(KvCodecTest, TrimThenAppendOverwritesRowsOnTheDevice) {
  // Rows past a trim are rewritten in place (mid-page, then across a page
  // boundary); attention must see only the new ones.
  auto c = makeTwin("turbo3", "q8_0", 2, 64, 16);
  ASSERT_TRUE(c);
  fill(*c, 40, 40, 1);
  ASSERT_TRUE(c->host->trim(25).ok());
  attendAndCompare(*c, 1, 4, 2);
  attendAndCompare(*c, 9, 4, 3);
  ASSERT_TRUE(c->host->trim(3).ok());
  attendAndCompare(*c, 30, 8, 4);
}

TEST_P(KvCodecTest, RejectsAMissingRotation) {
  auto c = makeTwin("turbo4", "q8_0", 2, 64, 16);
  ASSERT_TRUE(c);
  fill(*c, 4, 4, 1);
  if (HasFatalFailure()) return;
  gpu::KvPageLayout broken = c->layout;
  broken.streams[kLayer * 2].rotation = nullptr;
  gpu::Buffer q = deviceBuffer(4 * 64 * sizeof(float)), out = deviceBuffer(4 * 64 * sizeof(float));
  ASSERT_TRUE(rec().begin().ok());
  auto s = attention().attend(rec(), broken, c->pagePointers, kLayer, q, out, 1, 3, 4);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  auto noScratch = attention().attend(rec(), c->layout, c->pagePointers, kLayer, q, out, 1, 3, 4);
  ASSERT_FALSE(noScratch.ok());
  EXPECT_EQ(noScratch.error().code, ErrorCode::kInvalidArgument);
  ASSERT_TRUE(rec().submitAndWait().ok());
  EXPECT_FALSE(gpu::kvCodecFor("q5_1").ok());
}

}  // namespace
}  // namespace kvscope::test
