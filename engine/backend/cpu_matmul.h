#pragma once
// Y[n, out] = X[n, in] * W^T for a weight tensor in any type gguf::dequantize
// decodes (shape {in, out}, GGUF order). Each weight row is decoded once per
// call and dotted with all n input rows, so a prefill batch reads the weights
// once. Rows are split across the thread pool in ranges of at least
// kMinTaskMacs multiply-adds.
//
// Precision. Let w be the row gguf::dequantize decodes, x an input row and
// eps = 2^-24.
//  - MatmulPrecision::kExact (the reference): y = dot(w, x), bit for bit the
//    float32 sum dot() below computes, for every weight type. One exception,
//    for speed where the decode step reads every weight once: in SIMD builds
//    (KVSCOPE_NATIVE on an AVX2 machine) a quantized row with n == 1 goes
//    through a fused kernel that sums each group of 16 quants before scaling
//    it (cpu_quant_avx2.h). Its error against the exact w . x is at most
//    (in + 32) * eps * sum_i (|w_i| + 2 |o_i|) * |x_i|, o_i being the offset
//    of w_i's group (cpu_quant_decode.h; zero for Q8_0, Q4_0, Q5_0, Q6_K...),
//    the same order as dot()'s own rounding.
//  - MatmulPrecision::kInt8Activations (llama.cpp's CPU scheme), quantized
//    weights only; F32/F16/BF16 weights ignore it. x is rounded to int8
//    blocks of 32 with scale a_b / 127, a_b = max |x_i| in block b, so each
//    x_i moves by at most a_b / 254, and products are summed in int32. In
//    SIMD builds a single input row (a decode step) against Q4_K, Q5_K, Q6_K
//    or IQ4_XS weights is rounded in blocks of 256 instead, as llama.cpp's q8_K:
//    their fused kernels then stay in int32 across a whole super-block,
//    which halved the cost of a Q4_K_M decode. The
//    error against w . x is at most sum_b (a_b / 254) * sum_{i in b} |w_i|
//    plus the float term above, typically ~0.5% of |w . x|. On the synthetic
//    models of tests/backend/vulkan_parity_test.cpp it moves logits by up to
//    2e-2 of their spread (mean 3e-3), ten times what that test allows
//    between kExact and Vulkan, so it is an option, not the reference.

#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "model/weight_source.h"

namespace kvscope::cpu {

enum class MatmulPrecision {
  kExact,            // float activations: the reference
  kInt8Activations,  // int8 activations for quantized weights: faster
};

// The least work, in multiply-adds, given to a thread: handing a range to a
// worker costs ~3-6 us (thread_pool.h), which these kernels spend on
// 60-150k multiply-adds, so smaller products (all of stories260K's, the
// 512x256 K/V projections of a 40M model) stay on the calling thread.
inline constexpr size_t kMinTaskMacs = size_t{1} << 17;

void matmul(const model::TensorView& w, std::span<const float> x, std::span<float> y, size_t n,
            ThreadPool& pool, MatmulPrecision precision = MatmulPrecision::kExact);

// One product of a batch: y[n, out] = x[n, in] * w^T.
struct Product {
  const model::TensorView* w;  // {in, out}
  std::span<const float> x;    // [n, in]
  std::span<float> y;          // [n, out]
  size_t n = 1;
};

// Each product exactly as matmul() computes it, bit for bit. Where every
// product is one input row that a fused kernel takes (a decode step), all
// their weight rows run in one parallel loop: a decode step's chosen experts
// are a dozen products of a few thousand rows each, and handing each to the
// pool on its own cost more than the arithmetic (a gpt-oss-shaped decode
// step spent 12% of its time in the pool's hand-offs). Products sharing an
// input span round it to int8 once.
void matmuls(std::span<const Product> products, ThreadPool& pool,
             MatmulPrecision precision = MatmulPrecision::kExact);

// The same product on the portable C++ kernels even where SIMD ones are
// built, so tests can check both.
void matmulPortable(const model::TensorView& w, std::span<const float> x, std::span<float> y,
                    size_t n, ThreadPool& pool, MatmulPrecision precision);

// The dot product both the matmul and attention use: float32, 8 independent
// partial sums so the compiler can vectorize without reassociation flags.
float dot(const float* a, const float* b, size_t n);

// Dequantizes row `r` of w (length shape[0]) into out.
void dequantizeRow(const model::TensorView& w, size_t r, std::span<float> out);
// Every value of a vector tensor (a norm, a bias, attention sinks, or the
// experts' biases stacked {n, nExpert}) as floats, row after row: what both
// backends read a WeightRole::kVector tensor as.
std::vector<float> dequantizeVector(const model::TensorView& t);

}  // namespace kvscope::cpu
