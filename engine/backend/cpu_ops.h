#pragma once
// Float32 reference implementations of the engine's primitive ops. They are
// the oracle every GPU kernel is tested against and the building blocks of
// CpuBackend, so they favour clarity; accumulation is in float32 like the
// GPU kernels, except where a comment says otherwise.

#include <cstddef>
#include <cstdint>
#include <span>

#include "model/forward_ops.h"

namespace kvscope::cpu {

// y[rows] = W[rows, cols] * x[cols]; W row-major float32.
void matvec(std::span<const float> w, std::span<const float> x, std::span<float> y, size_t rows,
            size_t cols);

// y = x / sqrt(mean(x^2) + eps) * weight, for `rows` rows of n values (an
// empty weight: unweighted); with `accumulate`, y += that instead.
void rmsnorm(std::span<const float> x, std::span<const float> weight, std::span<float> y, size_t n,
             size_t rows, float eps, bool accumulate = false);

// Row-wise softmax of scale * x (max-subtracted), `rows` rows of n values.
void softmax(std::span<const float> x, std::span<float> y, size_t n, size_t rows,
             float scale = 1.0f);

// rows[r][i] += bias[i] for every row of bias.size() values (a bias's epilogue).
void addBias(std::span<float> rows, std::span<const float> bias);

// out = silu(gate) * up, silu(g) = g / (1 + exp(-g)).
void siluMul(std::span<const float> gate, std::span<const float> up, std::span<float> out);
// out = gelu(gate) * up with the tanh form of GELU (model::Gate::kGelu).
void geluMul(std::span<const float> gate, std::span<const float> up, std::span<float> out);

// out = the clamped SwiGLU of gpt-oss (model::Gate::kSwigluOai).
void swigluOaiMul(std::span<const float> gate, std::span<const float> up, std::span<float> out);
// out = act(gate, up) for a gated activation (not kNone).
void gatedMul(model::Gate act, std::span<const float> gate, std::span<const float> up,
              std::span<float> out);

// RoPE angles of one position under `spec`: cos/sin[dims/2], without the
// magnitude. Angles follow llama.cpp's float recurrence theta_i = pos *
// base^(-2i/dims) (multiplying by the ratio step by step), so rounding
// matches its reference outputs; then theta_i /= freqFactors[i] where given,
// and the position scale (or YaRN's mix of scaled and unscaled angles).
void ropeAngles(const model::RopeSpec& spec, float pos, std::span<float> cosOut,
                std::span<float> sinOut);
// Rotates the first `dims` values of one head vector in place by one
// position's row of a ropeTable ([dims/2][cos, sin]) and multiplies the
// others by tailScale (the spec's scale, which the table already carries).
// neox=false: pairs (x[2i], x[2i+1]); neox=true: pairs (x[i], x[i + dims/2]).
void ropeApply(std::span<float> head, uint32_t dims, bool neox, std::span<const float> cosSin,
               float tailScale = 1.0f);

// The angle table of n consecutive positions from pos0 under `spec`, as both
// backends read it: [n][dims/2][cos, sin], each times spec.attnFactor * spec.scale.
void ropeTable(const model::RopeSpec& spec, uint32_t pos0, uint32_t n, std::span<float> table);

}  // namespace kvscope::cpu
