#include "backend/cpu_ops.h"

#include "backend/cpu_simd_math.h"

#include <vector>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace kvscope::cpu {

void matvec(std::span<const float> w, std::span<const float> x, std::span<float> y, size_t rows,
            size_t cols) {
  assert(w.size() >= rows * cols && x.size() >= cols && y.size() >= rows);
  for (size_t r = 0; r < rows; ++r) {
    const float* row = w.data() + r * cols;
    float acc = 0.0f;
    for (size_t k = 0; k < cols; ++k) acc += row[k] * x[k];
    y[r] = acc;
  }
}

void rmsnorm(std::span<const float> x, std::span<const float> weight, std::span<float> y, size_t n,
             size_t rows, float eps, bool accumulate) {
  assert(x.size() >= n * rows && (weight.empty() || weight.size() >= n) && y.size() >= n * rows);
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * n;
    double ss = 0.0;  // llama.cpp sums squares in double
    for (size_t i = 0; i < n; ++i) ss += static_cast<double>(xr[i] * xr[i]);
    const float mean = static_cast<float>(ss / static_cast<double>(n));
    const float inv = 1.0f / std::sqrt(mean + eps);
    float* yr = y.data() + r * n;
    if (weight.empty()) {
      assert(!accumulate);
      for (size_t i = 0; i < n; ++i) yr[i] = xr[i] * inv;
    } else if (accumulate) {
      for (size_t i = 0; i < n; ++i) yr[i] += xr[i] * inv * weight[i];
    } else {
      for (size_t i = 0; i < n; ++i) yr[i] = xr[i] * inv * weight[i];
    }
  }
}

void softmax(std::span<const float> x, std::span<float> y, size_t n, size_t rows, float scale) {
  assert(x.size() >= n * rows && y.size() >= n * rows);
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * n;
    float* yr = y.data() + r * n;
    float m = -std::numeric_limits<float>::infinity();
    for (size_t i = 0; i < n; ++i) m = std::max(m, scale * xr[i]);
    float sum = 0.0f;
    for (size_t i = 0; i < n; ++i) {
      yr[i] = std::exp(scale * xr[i] - m);
      sum += yr[i];
    }
    const float inv = 1.0f / sum;
    for (size_t i = 0; i < n; ++i) yr[i] *= inv;
  }
}

void addBias(std::span<float> rows, std::span<const float> bias) {
  assert(!bias.empty() && rows.size() % bias.size() == 0);
  for (size_t r = 0; r < rows.size(); r += bias.size())
    for (size_t i = 0; i < bias.size(); ++i) rows[r + i] += bias[i];
}

void siluMul(std::span<const float> gate, std::span<const float> up, std::span<float> out) {
  assert(gate.size() == up.size() && out.size() >= gate.size());
  for (size_t i = 0; i < gate.size(); ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void geluMul(std::span<const float> gate, std::span<const float> up, std::span<float> out) {
  assert(gate.size() == up.size() && out.size() >= gate.size());
  constexpr float kSqrt2OverPi = 0.7978845608f;
  size_t i = 0;
#if defined(KVSCOPE_CPU_AVX2)
  // The same expression with tanh256 for std::tanh (a Gemma prefill spent
  // 13% of its time in the library's tanh), eight values at a time.
  for (; i + 8 <= gate.size(); i += 8) {
    const __m256 g = _mm256_loadu_ps(&gate[i]);
    const __m256 inner = _mm256_add_ps(
        _mm256_set1_ps(1.0f), _mm256_mul_ps(_mm256_set1_ps(0.044715f), _mm256_mul_ps(g, g)));
    const __m256 u = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(kSqrt2OverPi), g), inner);
    const __m256 half = _mm256_mul_ps(_mm256_set1_ps(0.5f), g);
    const __m256 gelu = _mm256_mul_ps(half, _mm256_add_ps(_mm256_set1_ps(1.0f), tanh256(u)));
    _mm256_storeu_ps(&out[i], _mm256_mul_ps(gelu, _mm256_loadu_ps(&up[i])));
  }
#endif
  for (; i < gate.size(); ++i) {
    const float g = gate[i];
    out[i] = 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * g * (1.0f + 0.044715f * g * g))) * up[i];
  }
}

void swigluOaiMul(std::span<const float> gate, std::span<const float> up, std::span<float> out) {
  assert(gate.size() == up.size() && out.size() >= gate.size());
  for (size_t i = 0; i < gate.size(); ++i) {
    const float g = std::min(gate[i], model::kSwigluOaiLimit);
    const float u = std::clamp(up[i], -model::kSwigluOaiLimit, model::kSwigluOaiLimit);
    out[i] = g / (1.0f + std::exp(-model::kSwigluOaiAlpha * g)) * (u + 1.0f);
  }
}

void gatedMul(model::Gate act, std::span<const float> gate, std::span<const float> up,
              std::span<float> out) {
  switch (act) {
    case model::Gate::kSilu:
      return siluMul(gate, up, out);
    case model::Gate::kGelu:
      return geluMul(gate, up, out);
    case model::Gate::kSwigluOai:
      return swigluOaiMul(gate, up, out);
    case model::Gate::kNone:
      break;
  }
  assert(false && "gatedMul without an activation");
}

void ropeAngles(const model::RopeSpec& spec, float pos, std::span<float> cosOut,
                std::span<float> sinOut) {
  const float step = std::pow(spec.theta, -2.0f / static_cast<float>(spec.dims));
  // YaRN mixes the original angle in, so it keeps both; otherwise the
  // position is divided first, as before YaRN (the recorded references'
  // rounding).
  float theta = spec.yarn ? pos : pos / spec.positionScale;
  const float ramp = std::max(0.001f, spec.yarnHigh - spec.yarnLow);
  for (uint32_t i = 0; i < spec.dims / 2; ++i) {
    float t = spec.freqFactors.empty() ? theta : theta / spec.freqFactors[i];
    if (spec.yarn) {
      const float original =
          1.0f - std::clamp((static_cast<float>(i) - spec.yarnLow) / ramp, 0.0f, 1.0f);
      const float interpolated = t / spec.positionScale;
      t = interpolated * (1.0f - original) + t * original;
    }
    cosOut[i] = std::cos(t);
    sinOut[i] = std::sin(t);
    theta *= step;
  }
}

// GCC 12 at -O3 vectorizes the interleaved pairs (neox=false) as complex
// products and fuses them (vfmaddsub) in spite of -ffp-contract=off: a Release
// build then rounded RoPE differently from the -O2 build, the device and
// llama.cpp's reference. Loop vectorization is off for this function alone;
// a head's rotation is a few dozen products.
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-loop-vectorize")))
#endif
void ropeApply(std::span<float> head, uint32_t dims, bool neox, std::span<const float> cosSin,
               float tailScale) {
  const uint32_t half = dims / 2;
  for (uint32_t i = 0; i < half; ++i) {
    const uint32_t a = neox ? i : 2 * i;
    const uint32_t b = neox ? i + half : 2 * i + 1;
    const float x0 = head[a], x1 = head[b];
    const float c = cosSin[2 * i], s = cosSin[2 * i + 1];
    head[a] = x0 * c - x1 * s;
    head[b] = x0 * s + x1 * c;
  }
  if (tailScale != 1.0f)
    for (size_t i = dims; i < head.size(); ++i) head[i] *= tailScale;
}

void ropeTable(const model::RopeSpec& spec, uint32_t pos0, uint32_t n, std::span<float> table) {
  const uint32_t half = spec.dims / 2;
  const float magnitude = spec.attnFactor * spec.scale;
  std::vector<float> cosv(half), sinv(half);
  for (uint32_t t = 0; t < n; ++t) {
    ropeAngles(spec, static_cast<float>(pos0 + t), cosv, sinv);
    for (uint32_t i = 0; i < half; ++i) {
      table[(size_t{t} * half + i) * 2] = cosv[i] * magnitude;
      table[(size_t{t} * half + i) * 2 + 1] = sinv[i] * magnitude;
    }
  }
}

}  // namespace kvscope::cpu
