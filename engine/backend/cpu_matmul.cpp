#include "backend/cpu_matmul.h"

#include <cassert>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gguf/dequant.h"

namespace kvscope::cpu {

float dot(const float* a, const float* b, size_t n) {
  float acc[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

void dequantizeRow(const model::TensorView& w, size_t r, std::span<float> out) {
  const size_t in = w.shape[0];
  const auto t = gguf::traits(w.type);
  const size_t rowBytes = in / t.blockElements * t.blockBytes;
  const auto status =
      gguf::dequantize(w.type, w.data.subspan(r * rowBytes, rowBytes), out.first(in));
  assert(status.ok());  // types and sizes were validated when the model was bound
  (void)status;
}

void matmul(const model::TensorView& w, std::span<const float> x, std::span<float> y, size_t n,
            ThreadPool& pool) {
  const size_t in = w.shape[0], out = w.shape[1];
  assert(x.size() >= n * in && y.size() >= n * out);
  // F32 rows are read in place when aligned; unaligned data (alignment=1 GGUF
  // files, arbitrary safetensors offsets) goes through the copying path.
  const bool f32 = w.type == gguf::TensorType::kF32 &&
                   reinterpret_cast<uintptr_t>(w.data.data()) % alignof(float) == 0;
  pool.parallelFor(
      out,
      [&](size_t begin, size_t end) {
        std::vector<float> row(f32 ? 0 : in);
        for (size_t r = begin; r < end; ++r) {
          const float* wr;
          if (f32) {
            wr = reinterpret_cast<const float*>(w.data.data()) + r * in;
          } else {
            dequantizeRow(w, r, row);
            wr = row.data();
          }
          for (size_t t = 0; t < n; ++t) y[t * out + r] = dot(wr, x.data() + t * in, in);
        }
      },
      16);
}

}  // namespace kvscope::cpu
