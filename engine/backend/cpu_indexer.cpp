#include "backend/cpu_indexer.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu_attention.h"
#include "backend/cpu_kv_rows.h"
#include "backend/cpu_matmul.h"

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

}  // namespace

bool selectLayerRows(const kv::KvCache& cache, uint32_t layer, const float* q, uint32_t nHead,
                     const kv::IndexerOptions& options, ThreadPool& pool, LayerSelection& out) {
  const kv::KvGeometry& g = cache.geometry();
  const kv::KvIndex& index = *cache.index();
  const uint32_t rows = cache.rows(), d = g.headDim, gqa = nHead / g.nHeadKv;
  const uint32_t pages = (rows + index.pageRows() - 1) / index.pageRows();
  const kv::KvScheme& keys = cache.scheme(layer, KvPart::kKey);
  out.resize(g.nHeadKv);
  pool.parallelFor(g.nHeadKv, [&](size_t begin, size_t end) {
    std::vector<float> query(d), scores(pages);
    for (size_t h = begin; h < end; ++h) {
      for (uint32_t i = 0; i < gqa; ++i) {
        storedSpaceQuery(keys, q, static_cast<uint32_t>(h) * gqa + i, d, query.data());
        index.scorePages(layer, static_cast<uint32_t>(h), query.data(), pages, scores.data(), i > 0);
      }
      kv::selectRows(options, rows, scores.data(), out[h]);
    }
  });
  return std::any_of(out.begin(), out.end(), [](const auto& runs) { return !runs.empty(); });
}

double capturedMass(const kv::KvCache& cache, uint32_t layer, const float* q, uint32_t nHead,
                    const LayerSelection& selection, ThreadPool& pool) {
  const kv::KvGeometry& g = cache.geometry();
  const uint32_t rows = cache.rows(), d = g.headDim, gqa = nHead / g.nHeadKv;
  const kv::KvScheme& keys = cache.scheme(layer, KvPart::kKey);
  const KvRowDecoder decoder(keys);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<double> mass(nHead, 1.0);
  pool.parallelFor(g.nHeadKv, [&](size_t begin, size_t end) {
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
  double sum = 0.0;
  for (double m : mass) sum += m;
  return sum / nHead;
}

}  // namespace kvscope::cpu
