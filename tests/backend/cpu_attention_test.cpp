// The CPU backend's fast attention (cpu::attention: per-format row decoders,
// grouped queries, two-pass softmax over chunks of positions) against the
// reference (cpu::attentionReference), for every scheme, head_dim 8 / 64 /
// 80 / 128 and GQA 1 / 2 / 4 / 8, in decode (one query, chunked positions)
// and prefill (a block of causal queries), on the AVX2 and portable kernels.
//
// The row decoders must be exact: they are checked bit for bit against each
// scheme's decodeRotated. The attention is checked against a bound derived
// per output value (cpu_attention.h); the derivation, for one output
// o = sum_j w_j v_j of a query q over rows k_j, v_j (rotated space):
//  - a score s_j = q.k_j / sqrt(d) computed in another order, with q rotated
//    in float instead of double, is off by at most
//    ds_j = 2 (d + 2) u sum_i (|q_i| + |R| |q|_i) |k_ji| / sqrt(d);
//  - with int8 queries, q8_0 keys are scored against the query rounded to
//    int8 blocks of 32 (cpu_attention_tile.h), which adds sum_b (a_b / 254) sum_{i in b} |k_ji|
//    to ds_j, a_b the largest |q_i| / sqrt(d) of block b;
//  - a softmax weight then moves by a relative e^(2 max_j ds_j) - 1 (its own
//    score and the shared max and sum), plus 1e-6 for the polynomial exp and the
//    rescaling of chunks, plus rows * u for the sum of exps in another order,
//    plus 2^-11 where the reference rounds weights to f16 (and 2^-25
//    absolute below f16's normal range);
//  - the weighted sums add rows * u of sum_j w_j |v_j|;
//  - rotating back in float adds d u sum_k |R_ki| |acc_k|.
// Both sides carry such errors, so the bound is twice this sum.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu_attention.h"
#include "backend/cpu_kv_rows.h"
#include "core/float_convert.h"
#include "kv/kv_cache.h"
#include "kv/rotation.h"
#include "kv/kv_scheme.h"
#include "support/test_support.h"

namespace kvscope {
namespace {

using kv::KvPart;
using test::randomFloats;

constexpr uint32_t kDims[] = {8, 64, 80, 128};
constexpr uint32_t kGqa[] = {1, 2, 4, 8};
constexpr double kU = 1.0 / (1 << 24);

std::vector<std::string> allSchemes() {
  std::vector<std::string> names;
  for (auto n : kv::schemeNames()) names.emplace_back(n);
  return names;
}

TEST(KvRowDecoder, EveryFormatDecodesExactlyAsItsScheme) {
  for (const std::string& name : allSchemes()) {
    for (uint32_t d : {8u, 16u, 64u, 80u, 128u, 100u}) {
      auto made = kv::makeScheme(name, {d, 7});
      ASSERT_TRUE(made.ok()) << name << " " << d;
      const kv::KvScheme& s = **made;
      constexpr uint32_t kCount = 5;
      std::vector<uint8_t> rows(size_t{kCount} * s.rowBytes());
      for (uint32_t r = 0; r < kCount; ++r) {
        // Row 3 has an outlier channel; row 4 is zero.
        auto x = randomFloats(d, 40 + r + d, -3.0f, 3.0f);
        if (r == 3) x[d / 3] = 80.0f;
        if (r == 4) std::fill(x.begin(), x.end(), 0.0f);
        s.encode(x, {&rows[r * s.rowBytes()], s.rowBytes()});
      }
      const size_t stride = d + 3;
      for (bool portable : {false, true}) {
        std::vector<float> got(kCount * stride, -1.0f), want(d);
        cpu::KvRowDecoder(s, portable).decode(rows.data(), kCount, got.data(), stride);
        for (uint32_t r = 0; r < kCount; ++r) {
          s.decodeRotated({&rows[r * s.rowBytes()], s.rowBytes()}, want);
          EXPECT_EQ(std::memcmp(&got[r * stride], want.data(), d * sizeof(float)), 0)
              << name << " d=" << d << " row " << r << (portable ? " portable" : " simd");
          EXPECT_EQ(got[r * stride + d], -1.0f) << "wrote past the row";
        }
      }
    }
  }
}

// fp8 rows written by hand: every code byte (both NaNs and the subnormals
// included) under block scales from the subnormal 2^-127 up to 2^127.
TEST(KvRowDecoder, Fp8DecodesEveryByteExactly) {
  constexpr uint32_t d = 64, kCount = 4;
  auto made = kv::makeScheme("fp8", {d, 7});
  ASSERT_TRUE(made.ok());
  const kv::KvScheme& s = **made;
  const uint32_t at = s.rowLayout().scaleBytes;
  ASSERT_GE(at, 2u);
  const uint8_t scales[kCount][2] = {{127, 0}, {1, 254}, {120, 134}, {200, 60}};
  std::vector<uint8_t> rows(size_t{kCount} * s.rowBytes(), 0);
  for (uint32_t r = 0; r < kCount; ++r) {
    uint8_t* row = &rows[r * s.rowBytes()];
    row[0] = scales[r][0];
    row[1] = scales[r][1];
    for (uint32_t i = 0; i < d; ++i) row[at + i] = static_cast<uint8_t>(r * d + i);
  }
  std::vector<float> got(kCount * d), want(d);
  cpu::KvRowDecoder(s).decode(rows.data(), kCount, got.data(), d);
  for (uint32_t r = 0; r < kCount; ++r) {
    s.decodeRotated({&rows[r * s.rowBytes()], s.rowBytes()}, want);
    for (uint32_t i = 0; i < d; ++i) {
      uint32_t g, w;
      std::memcpy(&g, &got[r * d + i], 4);
      std::memcpy(&w, &want[i], 4);
      EXPECT_EQ(g, w) << "code 0x" << std::hex << r * d + i;
    }
  }
}

struct Case {
  std::string key, value;
  uint32_t d, gqa, n, pos0, rowsPerPage;
  uint32_t tail = 0;  // the precision tail's rows (0: none)
};

// The bound of the header comment for every output value of `c`.
std::vector<double> errorBound(const kv::KvCache& cache, const Case& c, const std::vector<float>& q,
                               uint32_t nHead, bool int8Queries) {
  const kv::KvScheme& ks = cache.scheme(0, KvPart::kKey);
  const kv::KvScheme& vs = cache.scheme(0, KvPart::kValue);
  const bool f16 = ks.name() == "f16" && vs.name() == "f16";
  const uint32_t d = c.d, rowsAll = c.pos0 + c.n;
  std::vector<double> bound(size_t{c.n} * nHead * d);
  const uint32_t heads = nHead / c.gqa;
  std::vector<float> keys(size_t{heads} * rowsAll * d), values(keys.size());
  for (uint32_t t = 0; t < c.n; ++t) {
    // Every row of every KV head in rotated space as query t reads it (the
    // precision tail's f16 copy for its last rows): [head][row][d].
    for (uint32_t h = 0; h < heads; ++h) {
      for (uint32_t j = 0; j <= c.pos0 + t; ++j) {
        const size_t at = (size_t{h} * rowsAll + j) * d;
        cache.readAttended(0, KvPart::kKey, h, j, c.pos0 + t, {&keys[at], d});
        cache.readAttended(0, KvPart::kValue, h, j, c.pos0 + t, {&values[at], d});
      }
    }
    for (uint32_t h = 0; h < nHead; ++h) {
      const uint32_t kvHead = h / c.gqa, rows = c.pos0 + t + 1;
      std::vector<double> qr(d), qAbs(d);
      for (uint32_t i = 0; i < d; ++i) {
        float x = q[(size_t{t} * nHead + h) * d + i];
        if (f16) x = roundToFp16(x);
        qr[i] = x;
      }
      if (ks.rotated()) {
        const auto r = ks.rotation();
        std::vector<double> y(d, 0.0);
        for (uint32_t i = 0; i < d; ++i)
          for (uint32_t m = 0; m < d; ++m) {
            y[i] += double{r[i * d + m]} * qr[m];
            qAbs[i] += std::fabs(double{r[i * d + m]} * qr[m]);
          }
        qr = y;
      }
      // q8_0 keys (also rotated, q8_0r: the query rotated first) are scored
      // against the scaled query rounded to int8 blocks of 32: a_b = the
      // block's largest |q_i| / sqrt(d).
      const bool int8Keys = int8Queries && ks.rowCode() == kv::RowCode::kQ8_0 && d % 32 == 0;
      std::vector<double> blockMax(d / 32, 0.0);
      for (uint32_t i = 0; int8Keys && i < d; ++i)
        blockMax[i / 32] =
            std::max(blockMax[i / 32], std::fabs(qr[i]) / std::sqrt(static_cast<double>(d)));
      std::vector<double> s(rows);
      double maxS = -INFINITY, maxDs = 0, sum = 0;
      for (uint32_t j = 0; j < rows; ++j) {
        const float* k = &keys[(size_t{kvHead} * rowsAll + j) * d];
        double a = 0, rounding = 0;
        for (uint32_t i = 0; i < d; ++i) {
          s[j] += qr[i] * k[i];
          a += (std::fabs(qr[i]) + qAbs[i]) * std::fabs(k[i]);
          if (int8Keys) rounding += blockMax[i / 32] / 254 * std::fabs(k[i]);
        }
        s[j] /= std::sqrt(static_cast<double>(d));
        maxDs =
            std::max(maxDs, 2.0 * (d + 2) * kU * a / std::sqrt(static_cast<double>(d)) + rounding);
        maxS = std::max(maxS, s[j]);
      }
      for (double& x : s) sum += (x = std::exp(x - maxS));
      const double rel = std::expm1(2 * maxDs) + 1e-6 + rowsAll * kU + (f16 ? 1.0 / 2048 : 0.0);
      std::vector<double> dAcc(d, 0.0), acc(d, 0.0);
      for (uint32_t j = 0; j < rows; ++j) {
        const float* v = &values[(size_t{kvHead} * rowsAll + j) * d];
        const double w = s[j] / sum;
        for (uint32_t i = 0; i < d; ++i) {
          dAcc[i] += (rel + rowsAll * kU) * w * std::fabs(v[i]) +
                     (f16 ? std::ldexp(1.0, -25) * std::fabs(v[i]) : 0.0);
          acc[i] += w * v[i];
        }
      }
      double* b = &bound[(size_t{t} * nHead + h) * d];
      if (vs.rotated()) {
        const auto r = vs.rotation();
        for (uint32_t i = 0; i < d; ++i)
          for (uint32_t kk = 0; kk < d; ++kk)
            b[i] += std::fabs(double{r[kk * d + i]}) * (dAcc[kk] + d * kU * std::fabs(acc[kk]));
      } else {
        std::copy(dAcc.begin(), dAcc.end(), b);
      }
      for (uint32_t i = 0; i < d; ++i) b[i] *= 2;
    }
  }
  return bound;
}

// Runs one case on both kernels, with and without int8 queries for q8_0
// keys; returns the largest error / bound ratio.
double checkCase(const Case& c, ThreadPool& pool) {
  constexpr uint32_t kHeadsKv = 2;
  const uint32_t nHead = kHeadsKv * c.gqa;
  const kv::LayerSchemes schemes{c.key, c.value};
  kv::KvGeometry geometry = kv::KvGeometry::uniform(1, kHeadsKv, c.d, c.rowsPerPage);
  geometry.tailRows = c.tail;
  geometry.tailRingRows = c.tail + c.n - 1;  // the step's first query still finds its tail
  auto made = kv::KvCache::create(geometry, std::span(&schemes, 1), 5);
  EXPECT_TRUE(made.ok());
  if (!made.ok()) return INFINITY;
  kv::KvCache& cache = **made;
  const uint32_t rows = c.pos0 + c.n;
  // Keys spread wide enough for peaked softmaxes.
  const auto keys = randomFloats(size_t{rows} * kHeadsKv * c.d, 1000 + c.d, -3.0f, 3.0f);
  const auto values = randomFloats(keys.size(), 7000 + c.d);
  // Written in steps of at most n rows, as a backend writes them (the
  // precision tail's ring holds no longer step), the last the queries' own.
  for (uint32_t done = 0, step; done < rows; done += step) {
    step = done < c.pos0 ? std::min(c.n, c.pos0 - done) : c.n;
    EXPECT_TRUE(cache.append(step).ok());
    for (uint32_t j = done; j < done + step; ++j) {
      for (uint32_t h = 0; h < kHeadsKv; ++h) {
        const size_t at = (size_t{j} * kHeadsKv + h) * c.d;
        cache.write(0, KvPart::kKey, h, j, std::span(keys).subspan(at, c.d));
        cache.write(0, KvPart::kValue, h, j, std::span(values).subspan(at, c.d));
      }
    }
  }
  const auto q = randomFloats(size_t{c.n} * nHead * c.d, 11 + c.d, -2.0f, 2.0f);
  std::vector<float> want(q.size());
  // The reference itself: a query reads its last c.tail rows at f16.
  cpu::attentionReference(cache, 0, q.data(), c.n, c.pos0, nHead, pool, want.data());
  double worst = 0;
  for (bool int8 : {false, true}) {
    const auto bound = errorBound(cache, c, q, nHead, int8);
    for (bool portable : {false, true}) {
      std::vector<float> got(q.size(), NAN);
      cpu::attention(cache, 0, q.data(), c.n, c.pos0, nHead, pool, got.data(),
                     {.int8Queries = int8, .portable = portable});
      for (size_t i = 0; i < got.size(); ++i) {
        const double err = std::fabs(double{got[i]} - want[i]);
        EXPECT_LE(err, bound[i]) << c.key << "/" << c.value << " d=" << c.d << " gqa=" << c.gqa
                                 << " n=" << c.n << " pos0=" << c.pos0 << " tail=" << c.tail
                                 << " value " << i << (portable ? " portable" : " simd")
                                 << (int8 ? " int8" : "") << ": " << got[i] << " vs " << want[i];
        if (err > bound[i]) return INFINITY;  // one report per case
        worst = std::max(worst, err / bound[i]);
      }
    }
  }
  return worst;
}

// Decode: one query at depth 300 (two chunks of positions per group,
// pages of 48 rows so tiles end at page ends); prefill: 19 causal queries at
// depth 45 (groups spanning tokens, a partly masked last tile), and 70 at
// depth 20 with GQA 4 and 8 (enough groups that jobs take several, sharing
// each decoded tile).
TEST(CpuAttention, EverySchemeDimAndGroupMatchesTheReference) {
  ThreadPool pool(2);
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const std::string& s : allSchemes()) pairs.emplace_back(s, s);
  pairs.emplace_back("q8_0", "turbo4");
  pairs.emplace_back("turbo3", "f16");
  for (const auto& [key, value] : pairs) {
    double worst = 0;
    for (uint32_t d : kDims) {
      for (uint32_t gqa : kGqa) {
        worst = std::max(worst, checkCase({key, value, d, gqa, 1, 299, 48}, pool));
        worst = std::max(worst, checkCase({key, value, d, gqa, 19, 45, 256}, pool));
        if (gqa >= 4) worst = std::max(worst, checkCase({key, value, d, gqa, 70, 20, 64}, pool));
      }
    }
    std::printf("%-8s / %-8s largest error / bound %.3g\n", key.c_str(), value.c_str(), worst);
  }
}

// A precision tail: the query at position p reads rows [p + 1 - tail, p]
// from the tail's f16 copies. In a prefill a tile of rows is then read from
// the codes by some queries and from the tail by others (a band): 19 queries
// with a tail of 8, 70 (GQA 4, jobs of several groups) with a tail of 16,
// and a chunked decode deep in the cache whose tail ends inside a page (pages
// of 48). Keys and values alone in the tail (f16 on the other side), rotated
// keys, int8-scored q8_0 keys, and a head dim that is not a power of two.
TEST(CpuAttention, APrecisionTailMatchesTheReference) {
  ThreadPool pool(2);
  const std::vector<std::pair<std::string, std::string>> pairs = {{"q4_0", "q4_0"},
                                                                  {"turbo4", "q8_0"},
                                                                  {"q8_0", "turbo3"},
                                                                  {"f16", "q4_0r"},
                                                                  {"turbo4b", "f16"}};
  for (const auto& [key, value] : pairs) {
    for (uint32_t d : {64u, 80u}) {
      for (uint32_t gqa : {1u, 4u}) {
        EXPECT_LT(checkCase({key, value, d, gqa, 19, 45, 256, 8}, pool), 1.0);
        EXPECT_LT(checkCase({key, value, d, gqa, 1, 299, 48, 40}, pool), 1.0);
        if (gqa == 4) {
          EXPECT_LT(checkCase({key, value, d, gqa, 70, 20, 64, 16}, pool), 1.0);
        }
      }
    }
  }
}

// The first query of a prefill at position 0 sees one row; a decode on a
// cache of one row likewise: the softmax of a single score is 1.
TEST(CpuAttention, SingleVisibleRowReturnsItsValue) {
  ThreadPool pool(2);
  for (const char* scheme : {"f16", "q8_0", "turbo4"}) {
    EXPECT_LT(checkCase({scheme, scheme, 64, 2, 1, 0, 256}, pool), 1.0) << scheme;
    EXPECT_LT(checkCase({scheme, scheme, 64, 4, 3, 0, 256}, pool), 1.0) << scheme;
  }
}

}  // namespace
}  // namespace kvscope

namespace kvscope {
namespace {

// Indexed decode: one query over the runs each KV head selected (pages of 48
// rows, so runs cross page ends) equals dense attention over a cache that
// holds only those rows (copied byte for byte), within the bound above. One
// head attends everything (an empty list), the other a few runs.
TEST(CpuAttention, SelectedRowsMatchAttentionOverThoseRowsAlone) {
  ThreadPool pool(2);
  constexpr uint32_t kHeadsKv = 2, kRows = 700;
  const std::vector<std::vector<kv::RowRun>> selection = {
      {{0, 4}, {100, 164}, {300, 301}, {470, 530}, {640, 700}}, {}};
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"f16", "f16"}, {"q8_0", "turbo4"}, {"turbo3", "q4_0"}, {"fp8", "affine4"}}) {
    for (uint32_t d : {64u, 80u, 128u}) {
      for (uint32_t gqa : {1u, 4u}) {
        const kv::LayerSchemes schemes{key, value};
        auto made = kv::KvCache::create(kv::KvGeometry::uniform(1, kHeadsKv, d, 48),
                                        std::span(&schemes, 1), 5);
        ASSERT_TRUE(made.ok());
        kv::KvCache& cache = **made;
        ASSERT_TRUE(cache.append(kRows).ok());
        const auto x = randomFloats(size_t{kRows} * kHeadsKv * d * 2, 31 + d, -3.0f, 3.0f);
        for (uint32_t j = 0; j < kRows; ++j)
          for (uint32_t h = 0; h < kHeadsKv; ++h)
            for (KvPart part : {KvPart::kKey, KvPart::kValue})
              cache.write(0, part, h, j,
                          std::span(x).subspan(((size_t{j} * kHeadsKv + h) * 2 +
                                                static_cast<size_t>(part)) * d, d));
        const uint32_t nHead = kHeadsKv * gqa;
        const auto q = randomFloats(size_t{nHead} * d, 17 + d, -2.0f, 2.0f);
        for (bool portable : {false, true}) {
          std::vector<float> got(q.size(), NAN);
          cpu::attention(cache, 0, q.data(), 1, kRows - 1, nHead, pool, got.data(),
                         {.portable = portable, .selection = &selection});
          for (uint32_t h = 0; h < kHeadsKv; ++h) {
            // The head's rows alone, in a one-head cache of the same schemes.
            std::vector<kv::RowRun> runs = selection[h];
            if (runs.empty()) runs = {{0, kRows}};
            auto alone = kv::KvCache::create(kv::KvGeometry::uniform(1, 1, d, 48),
                                             std::span(&schemes, 1), 5);
            ASSERT_TRUE(alone.ok());
            ASSERT_TRUE((*alone)->append(kv::rowCount(runs)).ok());
            uint32_t at = 0;
            for (const kv::RowRun& r : runs)
              for (uint32_t j = r.begin; j < r.end; ++j, ++at)
                for (KvPart part : {KvPart::kKey, KvPart::kValue}) {
                  const auto from = cache.row(0, part, h, j);
                  std::copy(from.begin(), from.end(), (*alone)->row(0, part, 0, at).begin());
                }
            const std::vector<float> qh(q.begin() + size_t{h} * gqa * d,
                                        q.begin() + size_t{h + 1} * gqa * d);
            std::vector<float> want(qh.size());
            cpu::attentionReference(**alone, 0, qh.data(), 1, at - 1, gqa, pool, want.data());
            const auto bound = errorBound(**alone, {key, value, d, gqa, 1, at - 1, 48}, qh, gqa,
                                          false);
            for (size_t i = 0; i < want.size(); ++i) {
              ASSERT_LE(std::fabs(double{got[size_t{h} * gqa * d + i]} - want[i]), bound[i])
                  << key << "/" << value << " d=" << d << " gqa=" << gqa << " head " << h
                  << (portable ? " portable" : "") << " value " << i;
            }
          }
        }
      }
    }
  }
}

// A one-layer cache (pages of 48 rows) of `rows` random K and V rows in
// [-3, 3], seeded.
std::unique_ptr<kv::KvCache> randomCache(const kv::LayerSchemes& schemes, uint32_t headsKv,
                                         uint32_t d, uint32_t rows, uint32_t seed) {
  auto made =
      kv::KvCache::create(kv::KvGeometry::uniform(1, headsKv, d, 48), std::span(&schemes, 1), 5);
  if (!made.ok() || !(*made)->append(rows).ok()) return nullptr;
  const auto x = randomFloats(size_t{rows} * headsKv * d * 2, seed, -3.0f, 3.0f);
  for (uint32_t j = 0; j < rows; ++j)
    for (uint32_t h = 0; h < headsKv; ++h)
      for (KvPart part : {KvPart::kKey, KvPart::kValue})
        (*made)->write(0, part, h, j,
                       std::span(x).subspan(
                           ((size_t{j} * headsKv + h) * 2 + static_cast<size_t>(part)) * d, d));
  return std::move(*made);
}

// A sliding window of W rows: each query at position p equals dense
// attention over a cache holding only rows (p - W, p] (copied byte for byte),
// within the bound above, for the reference and both fast kernels. Cases: a
// prefill whose window starts inside it, a chunked decode deep in the cache,
// and a prefill of many groups with a window of a few rows.
TEST(CpuAttention, WindowMatchesAttentionOverTheWindowAlone) {
  ThreadPool pool(2);
  constexpr uint32_t kHeadsKv = 2, d = 64;
  struct W {
    uint32_t n, pos0, window, gqa;
  };
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"f16", "f16"}, {"q8_0", "turbo4"}}) {
    for (W w : {W{19, 45, 20, 2}, W{1, 299, 100, 4}, W{70, 20, 7, 4}}) {
      const kv::LayerSchemes schemes{key, value};
      const uint32_t nHead = kHeadsKv * w.gqa;
      auto made = randomCache(schemes, kHeadsKv, d, w.pos0 + w.n, 41 + w.n);
      ASSERT_TRUE(made);
      kv::KvCache& cache = *made;
      const auto q = randomFloats(size_t{w.n} * nHead * d, 19 + w.n, -2.0f, 2.0f);
      std::vector<float> reference(q.size(), NAN), simd(q.size(), NAN), portable(q.size(), NAN);
      cpu::attentionReference(cache, 0, q.data(), w.n, w.pos0, nHead, pool, reference.data(), 0.0f,
                              w.window);
      cpu::attention(cache, 0, q.data(), w.n, w.pos0, nHead, pool, simd.data(),
                     {.window = w.window});
      cpu::attention(cache, 0, q.data(), w.n, w.pos0, nHead, pool, portable.data(),
                     {.portable = true, .window = w.window});
      for (uint32_t t = 0; t < w.n; ++t) {
        const uint32_t p = w.pos0 + t, lo = p + 1 > w.window ? p + 1 - w.window : 0;
        auto alone = kv::KvCache::create(kv::KvGeometry::uniform(1, kHeadsKv, d, 48),
                                         std::span(&schemes, 1), 5);
        ASSERT_TRUE(alone.ok());
        ASSERT_TRUE((*alone)->append(p + 1 - lo).ok());
        for (uint32_t j = lo; j <= p; ++j)
          for (uint32_t h = 0; h < kHeadsKv; ++h)
            for (KvPart part : {KvPart::kKey, KvPart::kValue}) {
              const auto from = cache.row(0, part, h, j);
              std::copy(from.begin(), from.end(), (*alone)->row(0, part, h, j - lo).begin());
            }
        const std::vector<float> qt(q.begin() + size_t{t} * nHead * d,
                                    q.begin() + size_t{t + 1} * nHead * d);
        std::vector<float> want(qt.size());
        cpu::attentionReference(**alone, 0, qt.data(), 1, p - lo, nHead, pool, want.data());
        const auto bound =
            errorBound(**alone, {key, value, d, w.gqa, 1, p - lo, 48}, qt, nHead, false);
        for (size_t i = 0; i < want.size(); ++i) {
          const size_t at = size_t{t} * nHead * d + i;
          for (const auto* got : {&reference, &simd, &portable}) {
            ASSERT_LE(std::fabs(double{(*got)[at]} - want[i]), bound[i])
                << key << "/" << value << " n=" << w.n << " pos0=" << w.pos0
                << " window=" << w.window << " token " << t << " value " << i << " of "
                << (got == &reference ? "the reference"
                    : got == &simd    ? "simd"
                                      : "portable");
          }
        }
      }
    }
  }
}

// Attention sinks: a sink is one more score without a value row, so each
// output is the sink-free output times Z / (Z + e^sink), Z the sum of the
// exponentiated scores it sees (computed here in double from the rows as
// stored, the query as the kernels round it). Checked for the reference and
// both fast kernels, for a prefill, a chunked decode deep in the cache and a
// windowed decode, with sinks far below, near and far above the scores (a
// sink of +30 leaves almost nothing; the merge of chunks must not overflow).
// The tolerance is the f16 rounding of the softmax weights the kernels do on
// both sides (2^-11 each, 2^-25 absolute below f16's normal range) and float
// sums: 2e-3 of sum_j w_j |v_j|.
TEST(CpuAttention, SinksScaleEachHeadByItsShareOfTheDenominator) {
  ThreadPool pool(2);
  constexpr uint32_t kHeadsKv = 2, d = 64, gqa = 4, nHead = kHeadsKv * gqa;
  struct S {
    uint32_t n, pos0, window;
  };
  const float sinks[nHead] = {-30.0f, -1.5f, 0.0f, 0.7f, 2.0f, 4.0f, 30.0f, -0.3f};
  for (const std::string scheme : {"f16", "q8_0"}) {
    for (S c : {S{19, 45, 0}, S{1, 299, 0}, S{1, 299, 100}}) {
      const kv::LayerSchemes schemes{scheme, scheme};
      auto made = randomCache(schemes, kHeadsKv, d, c.pos0 + c.n, 77 + c.n);
      ASSERT_TRUE(made);
      kv::KvCache& cache = *made;
      const auto q = randomFloats(size_t{c.n} * nHead * d, 23 + c.n, -1.0f, 1.0f);
      std::vector<float> plain(q.size()), reference(q.size(), NAN), simd(q.size(), NAN),
          portable(q.size(), NAN);
      cpu::attentionReference(cache, 0, q.data(), c.n, c.pos0, nHead, pool, plain.data(), 0.0f,
                              c.window);
      cpu::attentionReference(cache, 0, q.data(), c.n, c.pos0, nHead, pool, reference.data(), 0.0f,
                              c.window, sinks);
      cpu::attention(cache, 0, q.data(), c.n, c.pos0, nHead, pool, simd.data(),
                     {.window = c.window, .sinks = sinks});
      cpu::attention(cache, 0, q.data(), c.n, c.pos0, nHead, pool, portable.data(),
                     {.portable = true, .window = c.window, .sinks = sinks});
      std::vector<float> key(d), value(d);
      for (uint32_t t = 0; t < c.n; ++t) {
        const uint32_t p = c.pos0 + t, lo = c.window && p + 1 > c.window ? p + 1 - c.window : 0;
        for (uint32_t h = 0; h < nHead; ++h) {
          const float* qh = &q[(size_t{t} * nHead + h) * d];
          std::vector<double> s;
          double maxS = -INFINITY;
          for (uint32_t j = lo; j <= p; ++j) {
            cache.readRotated(0, KvPart::kKey, h / gqa, j, key);
            double dot = 0;
            for (uint32_t i = 0; i < d; ++i)
              dot += double{scheme == "f16" ? roundToFp16(qh[i]) : qh[i]} * key[i];
            s.push_back(dot / std::sqrt(double{d}));
            maxS = std::max(maxS, s.back());
          }
          double z = 0, weightedAbs = 0;
          for (double& e : s) z += (e = std::exp(e - maxS));
          for (uint32_t j = lo; j <= p; ++j) {
            cache.readRotated(0, KvPart::kValue, h / gqa, j, value);
            float largest = 0.0f;
            for (float v : value) largest = std::max(largest, std::fabs(v));
            weightedAbs += s[j - lo] / z * largest;
          }
          const double share = z / (z + std::exp(double{sinks[h]} - maxS));
          for (uint32_t i = 0; i < d; ++i) {
            const size_t at = (size_t{t} * nHead + h) * d + i;
            const double want = plain[at] * share;
            // f16 weights below its normal range round to multiples of 2^-25.
            const double tolerance = 2e-3 * weightedAbs * share +
                                     (scheme == "f16" ? std::ldexp(3.0, -24) * (p + 1 - lo) : 0);
            for (const auto* got : {&reference, &simd, &portable}) {
              ASSERT_LE(std::fabs((*got)[at] - want), tolerance)
                  << scheme << " n=" << c.n << " pos0=" << c.pos0 << " window=" << c.window
                  << " token " << t << " head " << h << " value " << i << " of "
                  << (got == &reference ? "the reference"
                      : got == &simd    ? "simd"
                                        : "portable");
            }
          }
        }
      }
    }
  }
}

// Sparse V drops each weight below the threshold and keeps the rest as they
// are: the oracle sums w_j v_j in double over the rows whose weight (for that
// query) reaches it. The threshold sits halfway in a gap of the weights, so
// float rounding cannot move a row across it.
TEST(CpuAttention, SparseVDropsTheWeightsBelowTheThreshold) {
  ThreadPool pool(2);
  constexpr uint32_t kRows = 300, d = 64, gqa = 2;
  for (const char* scheme : {"q8_0", "turbo4"}) {
    const kv::LayerSchemes schemes{scheme, scheme};
    auto made =
        kv::KvCache::create(kv::KvGeometry::uniform(1, 1, d, 64), std::span(&schemes, 1), 5);
    ASSERT_TRUE(made.ok());
    kv::KvCache& cache = **made;
    ASSERT_TRUE(cache.append(kRows).ok());
    const auto x = randomFloats(size_t{kRows} * d * 2, 8, -3.0f, 3.0f);
    for (uint32_t j = 0; j < kRows; ++j) {
      cache.write(0, KvPart::kKey, 0, j, std::span(x).subspan(size_t{j} * 2 * d, d));
      cache.write(0, KvPart::kValue, 0, j, std::span(x).subspan((size_t{j} * 2 + 1) * d, d));
    }
    const auto q = randomFloats(size_t{gqa} * d, 9, -2.0f, 2.0f);
    const kv::KvScheme& ks = cache.scheme(0, KvPart::kKey);
    const kv::KvScheme& vs = cache.scheme(0, KvPart::kValue);
    // Weights per query head, in double, over rotated rows.
    std::vector<std::vector<double>> w(gqa, std::vector<double>(kRows));
    std::vector<float> row(d), qr(d);
    for (uint32_t h = 0; h < gqa; ++h) {
      std::vector<float> qh(q.begin() + h * d, q.begin() + (h + 1) * d);
      if (ks.rotated()) {
        kv::rotateVector(ks.rotation(), qh, qr);
      } else {
        qr = qh;
      }
      double top = -INFINITY, sum = 0;
      for (uint32_t j = 0; j < kRows; ++j) {
        cache.readRotated(0, KvPart::kKey, 0, j, row);
        double s = 0;
        for (uint32_t i = 0; i < d; ++i) s += double{qr[i]} * row[i];
        top = std::max(top, w[h][j] = s / std::sqrt(double{d}));
      }
      for (double& v : w[h]) sum += (v = std::exp(v - top));
      for (double& v : w[h]) v /= sum;
    }
    std::vector<double> sorted = w[0];
    sorted.insert(sorted.end(), w[1].begin(), w[1].end());
    std::sort(sorted.begin(), sorted.end());
    // The widest relative gap among the weights between 1e-4 and 1e-2.
    double tau = 0, gap = 0;
    for (size_t i = 1; i < sorted.size(); ++i)
      if (sorted[i - 1] > 1e-4 && sorted[i] < 1e-2 && sorted[i] / sorted[i - 1] > gap) {
        gap = sorted[i] / sorted[i - 1];
        tau = std::sqrt(sorted[i] * sorted[i - 1]);
      }
    ASSERT_GT(gap, 1.001);
    std::vector<float> got(q.size());
    cpu::attention(cache, 0, q.data(), 1, kRows - 1, gqa, pool, got.data(),
                   {.sparseV = static_cast<float>(tau)});
    uint32_t dropped = 0;
    for (uint32_t h = 0; h < gqa; ++h) {
      std::vector<double> acc(d, 0.0), scale(d, 0.0);
      for (uint32_t j = 0; j < kRows; ++j) {
        cache.readRotated(0, KvPart::kValue, 0, j, row);
        for (uint32_t i = 0; i < d; ++i) scale[i] += w[h][j] * std::fabs(row[i]);
        if (w[h][j] < tau) {
          ++dropped;
          continue;
        }
        for (uint32_t i = 0; i < d; ++i) acc[i] += w[h][j] * row[i];
      }
      std::vector<float> accF(acc.begin(), acc.end()), want(d);
      if (vs.rotated()) {
        kv::rotateVectorBack(vs.rotation(), accF, want);
      } else {
        want = accF;
      }
      double scaleMax = *std::max_element(scale.begin(), scale.end());
      for (uint32_t i = 0; i < d; ++i)
        EXPECT_NEAR(got[h * d + i], want[i], 1e-5 * scaleMax + 1e-6) << scheme << " head " << h;
    }
    EXPECT_GT(dropped, kRows / 4) << "the threshold drops rows";
  }
}

}  // namespace
}  // namespace kvscope
