#include "backend/cpu_ops.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

#include "core/float_convert.h"

namespace kvscope::cpu {

void matvec(std::span<const float> w, std::span<const float> x, std::span<float> y, size_t rows, size_t cols) {
  assert(w.size() >= rows * cols && x.size() >= cols && y.size() >= rows);
  for (size_t r = 0; r < rows; ++r) {
    const float* row = w.data() + r * cols;
    float acc = 0.0f;
    for (size_t k = 0; k < cols; ++k) acc += row[k] * x[k];
    y[r] = acc;
  }
}

void matvecF16(std::span<const uint16_t> w, std::span<const float> x, std::span<float> y, size_t rows,
               size_t cols) {
  assert(w.size() >= rows * cols && x.size() >= cols && y.size() >= rows);
  for (size_t r = 0; r < rows; ++r) {
    const uint16_t* row = w.data() + r * cols;
    float acc = 0.0f;
    for (size_t k = 0; k < cols; ++k) acc += fp16ToFloat(row[k]) * x[k];
    y[r] = acc;
  }
}

void rmsnorm(std::span<const float> x, std::span<const float> weight, std::span<float> y, size_t n,
             size_t rows, float eps) {
  assert(x.size() >= n * rows && weight.size() >= n && y.size() >= n * rows);
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * n;
    float ss = 0.0f;
    for (size_t i = 0; i < n; ++i) ss += xr[i] * xr[i];
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
    for (size_t i = 0; i < n; ++i) y[r * n + i] = xr[i] * inv * weight[i];
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

void siluMul(std::span<const float> gate, std::span<const float> up, std::span<float> out) {
  assert(gate.size() == up.size() && out.size() >= gate.size());
  for (size_t i = 0; i < gate.size(); ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

}  // namespace kvscope::cpu
