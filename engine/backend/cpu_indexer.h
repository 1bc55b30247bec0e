#pragma once
// The indexer on the CPU backend (kv/indexer.h, kv/kv_index.h): for a decode
// step, per KV head of a layer, the sidecar pages are scored against the
// query heads of its GQA group (a page's score is the highest of their
// bounds, so a page one head needs is kept for all), and kv::selectRows picks
// the rows; cpu::attention then reads only those (AttentionOptions::selection).

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "kv/indexer.h"
#include "kv/kv_cache.h"

namespace kvscope::cpu {

// One layer's selection: per KV head, the runs of rows it attends, in cache
// order; an empty list attends every row.
using LayerSelection = std::vector<std::vector<kv::RowRun>>;

// q: the decode query, [nHead][headDim], at the cache's last row (it sees
// every row). The cache's sidecar must be on. Fills out ([nHeadKv]; a head
// of options.denseHeads gets an empty list) and returns whether some head
// attends fewer than all rows.
bool selectLayerRows(const kv::KvCache& cache, uint32_t layer, const float* q, uint32_t nHead,
                     const kv::IndexerOptions& options, ThreadPool& pool, LayerSelection& out,
                     bool portable = false);

// scores[p] = the highest score of page p of (layer, head) over the `nq`
// queries q ([nq][headDim], in the K scheme's stored space), pages [0, pages).
// The AVX2 kernels (headDim a multiple of 8) read each entry once for up to
// 8 queries and sum with FMAs: for bounds q+ . hi + q- . lo (q+ = max(q, 0),
// q- = min(q, 0)), for mean+std q . mean and (q std) . (q std); the portable
// form is KvIndex::scorePages per query. They differ by float rounding only
// (tests/backend/cpu_indexer_test.cpp).
void scoreGroupPages(const kv::KvIndex& index, uint32_t layer, uint32_t head, const float* q,
                     uint32_t nq, uint32_t pages, float* scores, bool portable = false);

// Per KV head ([nHeadKv]), the share of dense attention's softmax mass that
// falls on its selected rows, averaged over its query heads (diagnostic
// mode): every key row is decoded and scored in float32 (times `scale`, 0:
// 1/sqrt(headDim)), the softmax summed in double. A head attending every row
// captures all of it.
std::vector<double> capturedMass(const kv::KvCache& cache, uint32_t layer, const float* q,
                                 uint32_t nHead, const LayerSelection& selection, ThreadPool& pool,
                                 float scale = 0.0f);

}  // namespace kvscope::cpu
