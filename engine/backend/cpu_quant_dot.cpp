#include "backend/cpu_quant_dot.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu_matmul.h"
#include "backend/cpu_quant_avx2.h"
#include "core/float_convert.h"

namespace kvscope::cpu {
namespace {

static_assert(kActBlock == 2 * kGroup, "an activation block holds two weight groups");

// Portable kernels. Fixed-size inner loops over small local accumulator
// arrays are what GCC vectorizes without reassociation flags; integer sums
// may be reordered freely.

void quantizeBlock(const float* x, ActBlock& out) {
  float amax = 0.0f;
  for (size_t i = 0; i < kActBlock; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  int sums[2] = {};
  for (size_t i = 0; i < kActBlock; ++i) {
    const auto q = static_cast<int>(std::nearbyint(x[i] * id));
    out.q[i] = static_cast<int8_t>(q);
    sums[i / kGroup] += q;
  }
  out.d = d;
  out.sum[0] = static_cast<float>(sums[0]);
  out.sum[1] = static_cast<float>(sums[1]);
}

float dotInt8Portable(const DecodedRow& w, const ActBlock* x, size_t in) {
  float acc = 0.0f;
  for (size_t b = 0; b < in / kActBlock; ++b) {
    const int8_t* q = w.q + b * kActBlock;
    int32_t sums[2] = {};
    for (size_t h = 0; h < 2; ++h) {
      for (size_t j = 0; j < kGroup; ++j) sums[h] += q[h * kGroup + j] * x[b].q[h * kGroup + j];
    }
    acc += x[b].d * (w.scale[2 * b] * static_cast<float>(sums[0]) +
                     w.scale[2 * b + 1] * static_cast<float>(sums[1]));
  }
  return acc;
}

}  // namespace

void quantizeActivations(const float* x, size_t in, ActBlock* out, bool portable) {
#if defined(KVSCOPE_CPU_AVX2)
  if (!portable) {
    avx2::quantizeActivations(x, in, out);
    return;
  }
#endif
  (void)portable;
  for (size_t b = 0; b < in / kActBlock; ++b) quantizeBlock(x + b * kActBlock, out[b]);
}

void groupSums(const float* x, size_t in, float* out) {
  for (size_t g = 0; g < in / kGroup; ++g) {
    float s[4] = {};
    for (size_t j = 0; j < kGroup; j += 4)
      for (size_t k = 0; k < 4; ++k) s[k] += x[g * kGroup + j + k];
    out[g] = (s[0] + s[2]) + (s[1] + s[3]);
  }
}

void expandRow(const DecodedRow& w, size_t in, float* out, bool portable) {
#if defined(KVSCOPE_CPU_AVX2)
  if (!portable) {
    avx2::expandRow(w, in, out);
    return;
  }
#endif
  (void)portable;
  for (size_t g = 0; g < in / kGroup; ++g) {
    // Scale and offset in locals and a local result: through the pointers
    // the compiler would have to assume `out` overwrites them.
    const float scale = w.scale[g], offset = w.offset[g];
    float v[kGroup];
    for (size_t j = 0; j < kGroup; ++j) v[j] = scale * w.q[g * kGroup + j] + offset;
    std::memcpy(out + g * kGroup, v, sizeof v);
  }
}

void dotTile(const float* const* w, size_t rows, const float* x, size_t n, size_t in, float* y,
             size_t yStride, bool portable) {
#if defined(KVSCOPE_CPU_AVX2)
  if (!portable) {
    avx2::dotTile(w, rows, x, n, in, y, yStride);
    return;
  }
#endif
  (void)portable;
  for (size_t t = 0; t < n; ++t)
    for (size_t r = 0; r < rows; ++r) y[t * yStride + r] = dot(w[r], x + t * in, in);
}

float dotInt8(const DecodedRow& w, const ActBlock* x, size_t in, bool offsets, bool portable) {
  float sum;
#if defined(KVSCOPE_CPU_AVX2)
  sum = portable ? dotInt8Portable(w, x, in) : avx2::dotInt8(w, x, in);
#else
  (void)portable;
  sum = dotInt8Portable(w, x, in);
#endif
  if (offsets) {
    float off = 0.0f;
    for (size_t b = 0; b < in / kActBlock; ++b) {
      off += x[b].d * (w.offset[2 * b] * x[b].sum[0] + w.offset[2 * b + 1] * x[b].sum[1]);
    }
    sum += off;
  }
  return sum;
}

void f16RowToFloat(const uint8_t* row, size_t n, float* out, bool portable) {
#if defined(KVSCOPE_CPU_AVX2)
  if (!portable) {
    avx2::f16RowToFloat(row, n, out);
    return;
  }
#endif
  (void)portable;
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, row + 2 * i, sizeof h);
    out[i] = fp16ToFloat(h);
  }
}

void bf16RowToFloat(const uint8_t* row, size_t n, float* out) {
  // bf16 is the top half of a float: widening is a 16-bit shift.
  for (size_t i = 0; i < n; ++i) {
    uint16_t b;
    std::memcpy(&b, row + 2 * i, sizeof b);
    const uint32_t bits = uint32_t{b} << 16;
    std::memcpy(out + i, &bits, sizeof bits);
  }
}

}  // namespace kvscope::cpu
