#include "backend/cpu_indexer.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu_attention.h"
#include "backend/cpu_features.h"
#include "backend/cpu_kv_rows.h"
#include "backend/cpu_matmul.h"

#if defined(KVSCOPE_CPU_AVX2)
#include <immintrin.h>
#endif

namespace kvscope::cpu {

using kv::KvPart;

namespace {

// Query head h of `q` in the K scheme's stored space.
void storedSpaceQuery(const kv::KvScheme& keys, const float* q, uint32_t h, uint32_t d, float* out) {
  if (keys.rotated()) {
    rotateRow(keys, q + size_t{h} * d, out);
  } else {
    std::copy_n(q + size_t{h} * d, d, out);
  }
}

#if defined(KVSCOPE_CPU_AVX2)
float horizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

__m256 widen(const int8_t* codes) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes))));
}

// PageScore::kMeanStd: q . mean + kStdWeight sqrt(sum (q std)^2), up to 8
// queries per pass over each page's codes.
void scoreGroupMomentsAvx2(const kv::KvIndex& index, uint32_t layer, uint32_t head, const float* q,
                           uint32_t nq, uint32_t pages, float* scores) {
  const uint32_t d = index.dim(layer);
  constexpr uint32_t kMaxQ = 8;
  for (uint32_t q0 = 0; q0 < nq; q0 += kMaxQ) {
    const uint32_t n = std::min(kMaxQ, nq - q0);
    const float* qs = q + size_t{q0} * d;
    for (uint32_t p = 0; p < pages; ++p) {
      const int8_t* mean = index.entry(layer, p, head);
      const int8_t* stdev = mean + d;
      __m256 dot[kMaxQ], spread[kMaxQ];
      for (uint32_t j = 0; j < n; ++j) dot[j] = spread[j] = _mm256_setzero_ps();
      for (uint32_t i = 0; i < d; i += 8) {
        const __m256 m = widen(mean + i), s = widen(stdev + i);
        for (uint32_t j = 0; j < n; ++j) {
          const __m256 x = _mm256_loadu_ps(qs + size_t{j} * d + i);
          dot[j] = _mm256_fmadd_ps(x, m, dot[j]);
          const __m256 t = _mm256_mul_ps(x, s);
          spread[j] = _mm256_fmadd_ps(t, t, spread[j]);
        }
      }
      const float scale = std::ldexp(1.0f, stdev[d]);
      float best = q0 > 0 ? scores[p] : -INFINITY;
      for (uint32_t j = 0; j < n; ++j) {
        const float s =
            horizontalSum(dot[j]) + kv::KvIndex::kStdWeight * std::sqrt(horizontalSum(spread[j]));
        best = std::max(best, s * scale);
      }
      scores[p] = best;
    }
  }
}

// Up to 8 queries per pass: each page's bounds are widened to float once per
// 8 channels and fed to every query's accumulator.
void scoreGroupPagesAvx2(const kv::KvIndex& index, uint32_t layer, uint32_t head, const float* q,
                         uint32_t nq, uint32_t pages, float* scores) {
  const uint32_t d = index.dim(layer);
  constexpr uint32_t kMaxQ = 8;
  alignas(32) float plus[kMaxQ * kv::kMaxKvDim], minus[kMaxQ * kv::kMaxKvDim];
  for (uint32_t q0 = 0; q0 < nq; q0 += kMaxQ) {
    const uint32_t n = std::min(kMaxQ, nq - q0);
    for (uint32_t j = 0; j < n; ++j) {
      for (uint32_t i = 0; i < d; ++i) {
        const float x = q[size_t{q0 + j} * d + i];
        plus[j * d + i] = std::max(x, 0.0f);
        minus[j * d + i] = std::min(x, 0.0f);
      }
    }
    for (uint32_t p = 0; p < pages; ++p) {
      const int8_t* lo = index.entry(layer, p, head);
      const int8_t* hi = lo + d;
      __m256 acc[kMaxQ];
      for (uint32_t j = 0; j < n; ++j) acc[j] = _mm256_setzero_ps();
      for (uint32_t i = 0; i < d; i += 8) {
        const __m256 l = widen(lo + i), h = widen(hi + i);
        for (uint32_t j = 0; j < n; ++j) {
          acc[j] = _mm256_fmadd_ps(_mm256_load_ps(&plus[j * d + i]), h, acc[j]);
          acc[j] = _mm256_fmadd_ps(_mm256_load_ps(&minus[j * d + i]), l, acc[j]);
        }
      }
      const float scale = std::ldexp(1.0f, hi[d]);
      float best = q0 > 0 ? scores[p] : -INFINITY;
      for (uint32_t j = 0; j < n; ++j) best = std::max(best, horizontalSum(acc[j]) * scale);
      scores[p] = best;
    }
  }
}
#endif

}  // namespace

void scoreGroupPages(const kv::KvIndex& index, uint32_t layer, uint32_t head, const float* q,
                     uint32_t nq, uint32_t pages, float* scores, bool portable) {
  const uint32_t d = index.dim(layer);
#if defined(KVSCOPE_CPU_AVX2)
  if (!portable && d % 8 == 0) {
    if (index.score() == kv::PageScore::kMeanStd)
      return scoreGroupMomentsAvx2(index, layer, head, q, nq, pages, scores);
    return scoreGroupPagesAvx2(index, layer, head, q, nq, pages, scores);
  }
#else
  (void)portable;
#endif
  for (uint32_t j = 0; j < nq; ++j)
    index.scorePages(layer, head, q + size_t{j} * d, pages, scores, j > 0);
}

bool selectLayerRows(const kv::KvCache& cache, uint32_t layer, const float* q, uint32_t nHead,
                     const kv::IndexerOptions& options, ThreadPool& pool, LayerSelection& out,
                     bool portable) {
  const kv::KvGeometry& g = cache.geometry();
  const kv::KvIndex& index = *cache.index();
  const uint32_t rows = cache.rows(), d = g.headDim(layer), gqa = nHead / g.nHeadKv(layer);
  const uint32_t pages = (rows + index.pageRows() - 1) / index.pageRows();
  const kv::KvScheme& keys = cache.scheme(layer, KvPart::kKey);
  out.resize(g.nHeadKv(layer));
  pool.parallelFor(g.nHeadKv(layer), [&](size_t begin, size_t end) {
    // Kept per thread: this runs for every layer of every decode step.
    thread_local std::vector<float> queries, scores;
    queries.resize(size_t{gqa} * d);
    scores.resize(pages);
    for (size_t h = begin; h < end; ++h) {
      if (options.denseHead(layer, static_cast<uint32_t>(h))) {
        out[h].clear();  // a dense head (IndexerOptions::denseHeads)
        continue;
      }
      for (uint32_t i = 0; i < gqa; ++i)
        storedSpaceQuery(keys, q, static_cast<uint32_t>(h) * gqa + i, d, &queries[size_t{i} * d]);
      scoreGroupPages(index, layer, static_cast<uint32_t>(h), queries.data(), gqa, pages,
                      scores.data(), portable);
      kv::selectRows(options, rows, scores.data(), out[h]);
    }
  });
  return std::any_of(out.begin(), out.end(), [](const auto& runs) { return !runs.empty(); });
}

std::vector<double> capturedMass(const kv::KvCache& cache, uint32_t layer, const float* q,
                                 uint32_t nHead, const LayerSelection& selection, ThreadPool& pool,
                                 float scaleOrZero) {
  const kv::KvGeometry& g = cache.geometry();
  const uint32_t rows = cache.rows(), d = g.headDim(layer), gqa = nHead / g.nHeadKv(layer);
  const kv::KvScheme& keys = cache.scheme(layer, KvPart::kKey);
  const KvRowDecoder decoder(keys);
  const float scale =
      scaleOrZero != 0.0f ? scaleOrZero : 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<double> mass(nHead, 1.0);
  pool.parallelFor(g.nHeadKv(layer), [&](size_t begin, size_t end) {
    std::vector<float> k(size_t{rows} * d), query(d), scores(rows);
    std::vector<char> selected(rows);
    for (size_t h = begin; h < end; ++h) {
      const auto& runs = selection[h];
      if (runs.empty()) continue;  // every row: all the mass
      std::fill(selected.begin(), selected.end(), 0);
      for (const kv::RowRun& r : runs) std::fill(&selected[r.begin], &selected[0] + r.end, 1);
      for (uint32_t j = 0, n; j < rows; j += n) {
        n = std::min(rows - j, g.rowsPerPage - j % g.rowsPerPage);  // one page at a time
        decoder.decode(cache.row(layer, KvPart::kKey, static_cast<uint32_t>(h), j).data(), n,
                       &k[size_t{j} * d], d);
      }
      for (uint32_t i = 0; i < gqa; ++i) {
        const uint32_t head = static_cast<uint32_t>(h) * gqa + i;
        storedSpaceQuery(keys, q, head, d, query.data());
        float top = -INFINITY;
        for (uint32_t j = 0; j < rows; ++j)
          top = std::max(top, scores[j] = dot(query.data(), &k[size_t{j} * d], d) * scale);
        double all = 0.0, picked = 0.0;
        for (uint32_t j = 0; j < rows; ++j) {
          const double w = std::exp(double{scores[j]} - top);
          all += w;
          if (selected[j]) picked += w;
        }
        mass[head] = all > 0.0 ? picked / all : 1.0;
      }
    }
  });
  std::vector<double> perKvHead(g.nHeadKv(layer), 0.0);
  for (uint32_t head = 0; head < nHead; ++head) perKvHead[head / gqa] += mass[head] / gqa;
  return perKvHead;
}

}  // namespace kvscope::cpu
