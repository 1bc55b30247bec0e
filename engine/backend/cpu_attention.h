#pragma once
// The reference causal attention over one layer of a host KvCache: the
// CpuBackend's attention, and the oracle of the Vulkan f16 attention kernels
// (tests/gpu/attention_test.cpp calls it directly).
//
// q and out are [n][nHead][headDim]; query row t sits at position pos0 + t and
// sees cache rows [0, pos0 + t]. Query head h reads KV head h / (nHead /
// nHeadKv). Scores are scaled by 1/sqrt(headDim), the softmax is taken in
// float32 after subtracting the row maximum, and the weighted V sum is
// accumulated in float32 in row order.
//
// A rotated scheme (turbo*) is attended in its rotated space: the query is
// rotated once per head with R_k (q'.y = q.R_k^T y), V rows are summed as
// stored (rotated by R_v) and the sum is rotated back once with R_v^T.
//
// With an f16 cache on both sides the query and the softmax weights are
// rounded to f16, as llama.cpp does (the second operand of its matrix
// products takes the first's type); see tests/backend/llamacpp_parity_test.

#include <cstdint>

#include "core/thread_pool.h"
#include "kv/kv_cache.h"

namespace kvscope::cpu {

void attention(const kv::KvCache& cache, uint32_t layer, const float* q, uint32_t n, uint32_t pos0,
               uint32_t nHead, ThreadPool& pool, float* out);

}  // namespace kvscope::cpu
