#pragma once
// Causal attention over one layer of a host KvCache, in two forms:
//  - attentionReference: the oracle of the CpuBackend's fast attention and of
//    the Vulkan attention kernels (tests/gpu/attention_test.cpp); one query
//    head at a time, every row decoded through its scheme.
//  - attention: the CpuBackend's kernel. It streams each KV head's rows once
//    per group of up to 8 query vectors (the query heads of a GQA group, and
//    for prefill consecutive tokens too), a tile of rows at a time, decoded by
//    one kernel per format (cpu_kv_rows.h); keeps an online softmax per query
//    (a running max and sum, rescaled as the max grows); and splits long
//    contexts into chunks of positions whose partial results are merged at
//    the end (flash-decoding), so two threads share even one KV head.
//
// The contract both keep. q and out are [n][nHead][headDim]; query row t sits at position pos0 + t
// and sees cache rows [0, pos0 + t], or with a sliding window W rows
// (pos0 + t - W, pos0 + t]. Query head h reads KV head h / (nHead / nHeadKv). Scores are
// scaled by 1/sqrt(headDim) (or the scale asked for), the softmax is taken in float32 after
// subtracting the row maximum (an attention sink joins it as one more score), and the
// weighted V sum is accumulated in float32 in row order.
//
// A rotated scheme (turbo*, q8_0r, ...) is attended in its rotated space: the query is
// rotated once per head with R_k (q'.y = q.R_k^T y), V rows are summed as
// stored (rotated by R_v) and the sum is rotated back once with R_v^T.
//
// With an f16 cache on both sides the query is rounded to f16, as llama.cpp
// does (the second operand of its matrix products takes the first's type);
// the reference also rounds the softmax weights, which the fast kernel cannot
// (they are final only after the last chunk), see llamacpp_parity_test.
//
// How far apart they may be (tests/backend/cpu_attention_test.cpp argues it):
// the fast kernel sums scores, weights and V rows in another order, with a
// polynomial exp (relative error < 2e-7) and the rotation in float, so per
// output ||fast - reference|| <= (2 max_j |ds_j| + eps_w + 1e-6 + (rows + d) u)
// * ||sum_j w_j |v_j| ||, u = 2^-24, |ds_j| <= 2 d u sum_i |q_i k_ji| / sqrt(d)
// the score rounding, eps_w = 2^-11 where the reference rounds weights to f16.

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "kv/indexer.h"
#include "kv/kv_cache.h"

namespace kvscope::cpu {

// scale: of the scores; 0 means 1/sqrt(headDim). window: 0, or the sliding
// window's positions. sinks: null, or [nHead] attention sinks (below).
void attentionReference(const kv::KvCache& cache, uint32_t layer, const float* q, uint32_t n,
                        uint32_t pos0, uint32_t nHead, ThreadPool& pool, float* out,
                        float scale = 0.0f, uint32_t window = 0, const float* sinks = nullptr);

struct AttentionOptions {
  // Score q8_0 keys on their codes against the query rounded to int8 blocks,
  // as llama.cpp does (cpu_attention_tile.h states the rounding's bound);
  // the CpuBackend does so with int8 products, not as the kExact reference.
  bool int8Queries = false;
  bool portable = false;  // the C++ kernels even where the AVX2 ones are built (tests)
  // Indexed decode (n == 1, cpu_indexer.h): per KV head, the runs of rows to
  // attend, in cache order; a head with no runs (or no selection) attends
  // every visible row. Only the listed rows are decoded.
  const std::vector<std::vector<kv::RowRun>>* selection = nullptr;
  // Sparse V: a normalized weight below this is dropped (the others are not
  // renormalized), so out_i = sum over rows j with w_ij >= sparseV of
  // w_ij v_j; a V row no query keeps is not decoded. 0: every row.
  float sparseV = 0.0f;
  // The scores' scale; 0 means 1/sqrt(headDim). A model that scales its
  // queries before attention (phi3) passes 1, so the query is rounded to f16
  // after its scaling, as its reference implementation rounds it.
  float scale = 0.0f;
  // A sliding window of this many positions; 0: causal over every row.
  uint32_t window = 0;
  // Attention sinks (gpt-oss), [nHead]: query head h's softmax takes
  // sinks[h] as one more score, unscaled and without a value row, so
  // w_j = exp(s_j - m) / (sum_i exp(s_i - m) + exp(sinks[h] - m)) with m the
  // largest of the scores and the sink. Null: none.
  const float* sinks = nullptr;
};

// y = R x and x = R^T y for the rotation R of a rotated scheme (d = its dim),
// in float: a Hadamard R through the fast transform, any other R as a dense
// product.
void rotateRow(const kv::KvScheme& scheme, const float* x, float* y);
void rotateRowBack(const kv::KvScheme& scheme, const float* y, float* x);

void attention(const kv::KvCache& cache, uint32_t layer, const float* q, uint32_t n, uint32_t pos0,
               uint32_t nHead, ThreadPool& pool, float* out, const AttentionOptions& options = {});

}  // namespace kvscope::cpu
