#include "backend/cpu_matmul.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu_quant_avx2.h"
#include "backend/cpu_quant_decode.h"
#include "backend/cpu_quant_dot.h"
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

std::vector<float> dequantizeVector(const model::TensorView& t) {
  const size_t n = t.shape[0];
  std::vector<float> v(t.elements());
  for (size_t r = 0; r < v.size() / n; ++r) dequantizeRow(t, r, std::span(v).subspan(r * n, n));
  return v;
}

namespace {

// Per-thread buffers for a tile of weight rows; pool threads live as long as
// the backend, so these are allocated once, not per product.
struct RowScratch {
  std::vector<float> values;  // [kTileRows, in]
  std::vector<int8_t> q;      // [in]
  std::vector<float> scale, offset;

  DecodedRow decoded(size_t in) {
    q.resize(in);
    scale.resize(in / kGroup);
    offset.resize(in / kGroup);
    return {q.data(), scale.data(), offset.data()};
  }
};

RowScratch& rowScratch() {
  thread_local RowScratch s;
  return s;
}

size_t rowGrain(size_t in, size_t n) {
  return std::max<size_t>(1, kMinTaskMacs / std::max<size_t>(1, in * n));
}

size_t rowBytes(const model::TensorView& w) {
  const auto t = gguf::traits(w.type);
  return w.shape[0] / t.blockElements * t.blockBytes;
}

// The row at `src` as the floats gguf::dequantize gives: aligned F32 in place,
// anything else widened into `buf` (unaligned F32 comes from alignment=1
// GGUF files and arbitrary safetensors offsets).
const float* floatRow(const model::TensorView& w, const uint8_t* src, float* buf, RowScratch& s,
                      bool portable) {
  const size_t in = w.shape[0];
  switch (w.type) {
    case gguf::TensorType::kF32:
      if (reinterpret_cast<uintptr_t>(src) % alignof(float) == 0)
        return reinterpret_cast<const float*>(src);
      std::memcpy(buf, src, in * sizeof(float));
      return buf;
    case gguf::TensorType::kF16:
      f16RowToFloat(src, in, buf, portable);
      return buf;
    case gguf::TensorType::kBF16:
      bf16RowToFloat(src, in, buf);
      return buf;
    default: {
      const DecodedRow d = s.decoded(in);
      decodeRow(w.type, src, in, d, portable);
      expandRow(d, in, buf, portable);
      return buf;
    }
  }
}

// Every product as dot(dequantized row, x), a tile of rows at a time.
void matmulFloat(const model::TensorView& w, const float* x, float* y, size_t n, ThreadPool& pool,
                 bool portable) {
  const size_t in = w.shape[0], out = w.shape[1], bytes = rowBytes(w);
  pool.parallelFor(
      out,
      [&](size_t begin, size_t end) {
        RowScratch& s = rowScratch();
        s.values.resize(kTileRows * in);
        for (size_t r0 = begin; r0 < end; r0 += kTileRows) {
          const size_t rows = std::min(kTileRows, end - r0);
          const float* tile[kTileRows];
          for (size_t k = 0; k < rows; ++k) {
            tile[k] = floatRow(w, w.data.data() + (r0 + k) * bytes, s.values.data() + k * in, s,
                               portable);
          }
          dotTile(tile, rows, x, n, in, y + r0, out, portable);
        }
      },
      rowGrain(in, n));
}

// Quantized weights with int8 activations: the activations are rounded once
// per product, each weight row decoded once for all n of them.
void matmulInt8(const model::TensorView& w, const float* x, float* y, size_t n, ThreadPool& pool,
                bool portable) {
  const size_t in = w.shape[0], out = w.shape[1], bytes = rowBytes(w);
  const bool offsets = hasOffsets(w.type);
  std::vector<ActBlock> xq(n * in / kActBlock);
  for (size_t t = 0; t < n; ++t)
    quantizeActivations(x + t * in, in, xq.data() + t * in / kActBlock, portable);
#if defined(KVSCOPE_CPU_AVX2)
  if (const auto tiled = avx2::rowKernels(w.type).tileInt8; tiled && !portable) {
    pool.parallelFor(
        out,
        [&](size_t begin, size_t end) {
          tiled(w.data.data() + begin * bytes, bytes, end - begin, xq.data(), n, in, y + begin,
                out);
        },
        rowGrain(in, n));
    return;
  }
#endif
  pool.parallelFor(
      out,
      [&](size_t begin, size_t end) {
        const DecodedRow d = rowScratch().decoded(in);
        for (size_t r = begin; r < end; ++r) {
          decodeRow(w.type, w.data.data() + r * bytes, in, d, portable);
          for (size_t t = 0; t < n; ++t)
            y[t * out + r] = dotInt8(d, xq.data() + t * in / kActBlock, in, offsets, portable);
        }
      },
      rowGrain(in, n));
}

#if defined(KVSCOPE_CPU_AVX2)
// Single input rows (n == 1 each): the fused kernels decode each block in
// registers, since a decoded row would be used only once. kExact then factors
// each group's scale and offset out of its sum (the bound of cpu_matmul.h);
// kInt8Activations dots the K-quants and IQ4_XS against activations rounded
// in super-blocks of 256. All products' rows form one index space
// [0, sum of out) split across the pool. False, with nothing written, where a
// product has no fused kernel.
bool matvecsFused(std::span<const Product> products, ThreadPool& pool, MatmulPrecision precision) {
  const bool int8 = precision == MatmulPrecision::kInt8Activations;
  // How a product's input row is prepared: one form per kernel family.
  enum class Input { kFloat, kBlocks, kSuperBlocks };
  struct Row {
    const uint8_t* data;
    size_t bytes, in;
    float* y;
    avx2::RowKernels k;
    Input form;
    const void* input;  // the float row, its ActBlocks or its ActSuperBlocks
    const float* xSums;
  };
  std::vector<Row> rows;
  std::vector<size_t> first{0};  // first[p]: product p's first row in the index space
  size_t macs = 0;
  for (const Product& p : products) {
    const avx2::RowKernels k = avx2::rowKernels(p.w->type);
    const bool fused = int8 ? k.dotInt8 || k.superDotInt8 : k.dotExact != nullptr;
    if (p.n != 1 || !canDecodeRow(p.w->type) || !fused) return false;
    const Input form = !int8            ? Input::kFloat
                       : k.superDotInt8 ? Input::kSuperBlocks
                                        : Input::kBlocks;
    rows.push_back(
        {p.w->data.data(), rowBytes(*p.w), p.w->shape[0], p.y.data(), k, form, nullptr, nullptr});
    first.push_back(first.back() + p.w->shape[1]);
    macs += p.w->shape[0] * p.w->shape[1];
  }
  // The inputs, prepared once per distinct input span and form.
  std::vector<std::vector<ActBlock>> blocks;
  std::vector<std::vector<avx2::ActSuperBlock>> superBlocks;
  std::vector<std::vector<float>> sums;
  for (size_t i = 0; i < products.size(); ++i) {
    const float* x = products[i].x.data();
    Row& row = rows[i];
    size_t same = 0;
    while (same < i && !(products[same].x.data() == x && rows[same].in == row.in &&
                         rows[same].form == row.form))
      ++same;
    if (same < i) {
      row.input = rows[same].input;
      row.xSums = rows[same].xSums;
      continue;
    }
    switch (row.form) {
      case Input::kFloat:
        row.input = x;
        sums.emplace_back(row.in / kGroup);  // read only by types with offsets
        groupSums(x, row.in, sums.back().data());
        row.xSums = sums.back().data();
        break;
      case Input::kBlocks:
        blocks.emplace_back(row.in / kActBlock);
        avx2::quantizeActivations(x, row.in, blocks.back().data());
        row.input = blocks.back().data();
        break;
      case Input::kSuperBlocks:
        superBlocks.emplace_back(row.in / avx2::kActSuperBlock);
        avx2::quantizeSuperBlocks(x, row.in, superBlocks.back().data());
        row.input = superBlocks.back().data();
        break;
    }
  }
  const size_t total = first.back();
  pool.parallelFor(
      total,
      [&](size_t begin, size_t end) {
        size_t p = static_cast<size_t>(std::upper_bound(first.begin(), first.end(), begin) -
                                       first.begin()) -
                   1;
        for (size_t i = begin; i < end; ++i) {
          while (i >= first[p + 1]) ++p;
          const Row& q = rows[p];
          const size_t r = i - first[p];
          const uint8_t* w = q.data + r * q.bytes;
          switch (q.form) {
            case Input::kFloat:
              q.y[r] = q.k.dotExact(w, static_cast<const float*>(q.input), q.xSums, q.in);
              break;
            case Input::kBlocks:
              q.y[r] = q.k.dotInt8(w, static_cast<const ActBlock*>(q.input), q.in);
              break;
            case Input::kSuperBlocks:
              q.y[r] = q.k.superDotInt8(w, static_cast<const avx2::ActSuperBlock*>(q.input), q.in);
              break;
          }
        }
      },
      std::max<size_t>(1, kMinTaskMacs / std::max<size_t>(1, macs / std::max<size_t>(1, total))));
  return true;
}
#endif

void matmulWith(const model::TensorView& w, std::span<const float> x, std::span<float> y, size_t n,
                ThreadPool& pool, MatmulPrecision precision, bool portable) {
  assert(x.size() >= n * w.shape[0] && y.size() >= n * w.shape[1]);
  // Binding admits only types gguf::dequantize decodes: F32, F16, BF16 and
  // the quantized types decodeRow handles.
  const bool quantized = canDecodeRow(w.type);
#if defined(KVSCOPE_CPU_AVX2)
  if (!portable && quantized && n == 1) {
    const Product one{&w, x, y, 1};
    if (matvecsFused({&one, 1}, pool, precision)) return;
  }
#endif
  if (quantized && precision == MatmulPrecision::kInt8Activations) {
    matmulInt8(w, x.data(), y.data(), n, pool, portable);
  } else {
    matmulFloat(w, x.data(), y.data(), n, pool, portable);
  }
}

}  // namespace

void matmul(const model::TensorView& w, std::span<const float> x, std::span<float> y, size_t n,
            ThreadPool& pool, MatmulPrecision precision) {
  matmulWith(w, x, y, n, pool, precision, false);
}

void matmuls(std::span<const Product> products, ThreadPool& pool, MatmulPrecision precision) {
#if defined(KVSCOPE_CPU_AVX2)
  if (matvecsFused(products, pool, precision)) return;
#endif
  for (const Product& p : products) matmulWith(*p.w, p.x, p.y, p.n, pool, precision, false);
}

void matmulPortable(const model::TensorView& w, std::span<const float> x, std::span<float> y,
                    size_t n, ThreadPool& pool, MatmulPrecision precision) {
  matmulWith(w, x, y, n, pool, precision, true);
}

}  // namespace kvscope::cpu
