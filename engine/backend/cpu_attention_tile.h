#pragma once
// The steps of the fast CPU attention (cpu_attention.h) on tiles of decoded
// cached rows, for a group of up to kLanes query vectors. Scores and weights
// are laid out [row][kLanes], so the softmax of the group runs one SIMD
// vector per row. Each step has an AVX2 form and a portable form
// (`portable`, or no AVX2 build) computing the same quantities. Lane arrays
// (last, max, sum, factor) hold kLanes values.

#include <cstddef>
#include <cstdint>

#include "backend/cpu_quant_dot.h"

namespace kvscope::cpu::tile {

inline constexpr uint32_t kLanes = 8;  // query vectors per group
inline constexpr uint32_t kRows = 32;  // cached rows per tile

// scores[r][i] = q_i . k_r for r < rows, i < nq (lanes nq.. get 0);
// q: [kLanes][stride], k: [rows][stride], values past dim zero in both.
void scores(const float* q, uint32_t nq, const float* k, uint32_t rows, size_t stride,
            float* scores, bool portable);

// scores for q8_0 key rows read as stored (dim a multiple of 32): each query
// rounded once to int8 blocks (q: [kLanes][dim / 32] ActBlocks, as the
// int8 products of cpu_matmul.h round activations) and dotted with each
// block's codes in int32, scaled by the block's scale times the query
// block's. Moves each score by at most sum_b (a_b / 254) sum_{i in b} |k_i|,
// a_b the largest |q_i| of block b, as llama.cpp scores a q8_0 cache.
void scoresQ8(const ActBlock* q, uint32_t nq, const uint8_t* rows, uint32_t rowBytes,
              uint32_t count, uint32_t dim, float* scores, bool portable);

// Sets scores[r][i] to -inf where position first + r > last[i] (causality)
// or < from[i] (a sliding window) and raises max[i] to the largest score left.
void maskMax(float* scores, uint32_t rows, uint32_t first, const uint32_t* from,
             const uint32_t* last, float* max, bool portable);

// scores[r][i] = exp(scores[r][i] - max[i]), added into sum[i]; a lane whose
// max is -inf (nothing visible) gets zeros. The exp is a polynomial with
// relative error < 2e-7 (AVX2) or std::exp (portable).
void expSum(float* scores, uint32_t rows, const float* max, float* sum, bool portable);

// weights[r][i] *= factor[i], then rounded to f16 when `toF16`.
void scale(float* weights, uint32_t rows, const float* factor, bool toF16, bool portable);

// acc_i += sum_r weights[r][i] * v_r for i < nq; acc: [kLanes][stride].
void accumulate(const float* weights, uint32_t nq, const float* v, uint32_t rows, size_t stride,
                float* acc, bool portable);

}  // namespace kvscope::cpu::tile
