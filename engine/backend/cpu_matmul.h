#pragma once
// Y[n, out] = X[n, in] * W^T for a weight tensor in any GGUF type (shape
// {in, out}, GGUF order). Each weight row is dequantized once per call and
// dotted with all n input rows, so a prefill batch reads the weights once.
// Rows are split across the thread pool. Accumulation is float32.

#include <span>

#include "core/thread_pool.h"
#include "model/weight_source.h"

namespace kvscope::cpu {

void matmul(const model::TensorView& w, std::span<const float> x, std::span<float> y, size_t n,
            ThreadPool& pool);

// The dot product both the matmul and attention use: float32, 8 independent
// partial sums so the compiler can vectorize without reassociation flags.
float dot(const float* a, const float* b, size_t n);

// Dequantizes row `r` of w (length shape[0]) into out.
void dequantizeRow(const model::TensorView& w, size_t r, std::span<float> out);

}  // namespace kvscope::cpu
