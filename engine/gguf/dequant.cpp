#include "gguf/dequant.h"

#include <cmath>
#include <cstring>

#include "gguf/block_layout.h"

namespace kvscope::gguf {
namespace {

using namespace blocks;

// Each decoder turns one block into its values, written to y in order.

void decodeQ4_0(const uint8_t* b, float* y) {
  const float d = loadHalf(b + q4_0::kD);
  const uint8_t* qs = b + q4_0::kQs;
  for (int j = 0; j < kQK / 2; ++j) {
    const int lo = (qs[j] & 0x0f) - 8;
    const int hi = (qs[j] >> 4) - 8;
    y[j] = lo * d;
    y[j + kQK / 2] = hi * d;
  }
}

void decodeMXFP4(const uint8_t* b, float* y) {
  const float d = mxfp4::scale(b[mxfp4::kE]);
  const uint8_t* qs = b + mxfp4::kQs;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = mxfp4::kDoubled[qs[j] & 0x0f] * d;
    y[j + kQK / 2] = mxfp4::kDoubled[qs[j] >> 4] * d;
  }
}

void decodeIQ4_NL(const uint8_t* b, float* y) {
  const float d = loadHalf(b + iq4_nl::kD);
  const uint8_t* qs = b + iq4_nl::kQs;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = d * iq4::kValues[qs[j] & 0x0f];
    y[j + kQK / 2] = d * iq4::kValues[qs[j] >> 4];
  }
}

void decodeIQ4_XS(const uint8_t* b, float* y) {
  const float d = loadHalf(b + iq4_xs::kD);
  for (int ib = 0; ib < kQK_K / 32; ++ib) {
    const float dl = d * static_cast<float>(iq4_xs::subScale(b, ib));
    const uint8_t* qs = b + iq4_xs::kQs + 16 * ib;
    for (int j = 0; j < 16; ++j) {
      y[32 * ib + j] = dl * iq4::kValues[qs[j] & 0x0f];
      y[32 * ib + j + 16] = dl * iq4::kValues[qs[j] >> 4];
    }
  }
}

void decodeQ4_1(const uint8_t* b, float* y) {
  const float d = loadHalf(b + q4_1::kD);
  const float m = loadHalf(b + q4_1::kM);
  const uint8_t* qs = b + q4_1::kQs;
  for (int j = 0; j < kQK / 2; ++j) {
    const int lo = qs[j] & 0x0f;
    const int hi = qs[j] >> 4;
    y[j] = lo * d + m;
    y[j + kQK / 2] = hi * d + m;
  }
}

// Q5_0/Q5_1 keep value v's fifth bit in bit v of the 32-bit qh field.
void decodeQ5_0(const uint8_t* b, float* y) {
  const float d = loadHalf(b + q5_0::kD);
  const uint32_t qh = loadU32(b + q5_0::kQh);
  const uint8_t* qs = b + q5_0::kQs;
  for (int j = 0; j < kQK / 2; ++j) {
    const int lo = ((qs[j] & 0x0f) | (((qh >> j) & 1) << 4)) - 16;
    const int hi = ((qs[j] >> 4) | (((qh >> (j + kQK / 2)) & 1) << 4)) - 16;
    y[j] = lo * d;
    y[j + kQK / 2] = hi * d;
  }
}

void decodeQ5_1(const uint8_t* b, float* y) {
  const float d = loadHalf(b + q5_1::kD);
  const float m = loadHalf(b + q5_1::kM);
  const uint32_t qh = loadU32(b + q5_1::kQh);
  const uint8_t* qs = b + q5_1::kQs;
  for (int j = 0; j < kQK / 2; ++j) {
    const int lo = (qs[j] & 0x0f) | (((qh >> j) & 1) << 4);
    const int hi = (qs[j] >> 4) | (((qh >> (j + kQK / 2)) & 1) << 4);
    y[j] = lo * d + m;
    y[j + kQK / 2] = hi * d + m;
  }
}

void decodeQ8_0(const uint8_t* b, float* y) {
  const float d = loadHalf(b + q8_0::kD);
  for (int j = 0; j < kQK; ++j) y[j] = static_cast<int8_t>(b[q8_0::kQs + j]) * d;
}

// Q2_K: 16 sub-blocks of 16 values, each with a 4-bit scale (low nibble) and
// 4-bit min (high nibble). Each half of 128 values takes 32 bytes of qs; value
// 32*k + l of a half sits in bits 2k..2k+1 of byte l.
void decodeQ2_K(const uint8_t* b, float* y) {
  const float d = loadHalf(b + q2_k::kD);
  const float dmin = loadHalf(b + q2_k::kDmin);
  const uint8_t* scales = b + q2_k::kScales;
  for (int v = 0; v < kQK_K; v += 16) {
    const uint8_t* q = b + q2_k::kQs + 32 * (v / 128) + v % 32;
    const int shift = 2 * ((v % 128) / 32);
    const uint8_t sc = scales[v / 16];
    const float dl = d * (sc & 0x0f);
    const float ml = dmin * (sc >> 4);
    for (int l = 0; l < 16; ++l) y[v + l] = dl * ((q[l] >> shift) & 3) - ml;
  }
}

// Q3_K: like Q2_K's low bits, plus a high bit for value v in bit v / 32 of
// hmask[v % 32]; a clear high bit subtracts 4. Scales are signed 6-bit.
void decodeQ3_K(const uint8_t* b, float* y) {
  const float d = loadHalf(b + q3_k::kD);
  const uint8_t* hmask = b + q3_k::kHmask;
  for (int v = 0; v < kQK_K; v += 16) {
    const uint8_t* q = b + q3_k::kQs + 32 * (v / 128) + v % 32;
    const uint8_t* hm = hmask + v % 32;
    const int shift = 2 * ((v % 128) / 32);
    const int bit = v / 32;
    const float dl = d * q3kScale(b + q3_k::kScales, v / 16);
    for (int l = 0; l < 16; ++l) {
      const int low = (q[l] >> shift) & 3;
      y[v + l] = dl * (low - (((hm[l] >> bit) & 1) ? 0 : 4));
    }
  }
}

// Q4_K: 8 sub-blocks of 32; each group of 64 values shares 32 bytes, low
// nibbles first.
void decodeQ4_K(const uint8_t* b, float* y) {
  const float d = loadHalf(b + q4_k::kD);
  const float dmin = loadHalf(b + q4_k::kDmin);
  for (int g = 0; g < 4; ++g) {
    const uint8_t* q = b + q4_k::kQs + 32 * g;
    uint8_t sc = 0;
    uint8_t m = 0;
    kScaleMin(b + q4_k::kScales, 2 * g, sc, m);
    const float d1 = d * sc;
    const float m1 = dmin * m;
    kScaleMin(b + q4_k::kScales, 2 * g + 1, sc, m);
    const float d2 = d * sc;
    const float m2 = dmin * m;
    for (int l = 0; l < 32; ++l) y[64 * g + l] = d1 * (q[l] & 0x0f) - m1;
    for (int l = 0; l < 32; ++l) y[64 * g + 32 + l] = d2 * (q[l] >> 4) - m2;
  }
}

// Q5_K: Q4_K plus a fifth bit per value in qh[l], bit 2g (low nibble) or
// 2g + 1 (high nibble) for group g.
void decodeQ5_K(const uint8_t* b, float* y) {
  const float d = loadHalf(b + q5_k::kD);
  const float dmin = loadHalf(b + q5_k::kDmin);
  const uint8_t* qh = b + q5_k::kQh;
  for (int g = 0; g < 4; ++g) {
    const uint8_t* ql = b + q5_k::kQs + 32 * g;
    uint8_t sc = 0;
    uint8_t m = 0;
    kScaleMin(b + q5_k::kScales, 2 * g, sc, m);
    const float d1 = d * sc;
    const float m1 = dmin * m;
    kScaleMin(b + q5_k::kScales, 2 * g + 1, sc, m);
    const float d2 = d * sc;
    const float m2 = dmin * m;
    for (int l = 0; l < 32; ++l) {
      y[64 * g + l] = d1 * ((ql[l] & 0x0f) + (((qh[l] >> (2 * g)) & 1) ? 16 : 0)) - m1;
    }
    for (int l = 0; l < 32; ++l) {
      y[64 * g + 32 + l] = d2 * ((ql[l] >> 4) + (((qh[l] >> (2 * g + 1)) & 1) ? 16 : 0)) - m2;
    }
  }
}

// Q6_K: each half of 128 values uses 64 bytes of ql and 32 of qh; value
// 32*k + l takes a nibble of ql[l + 32*(k%2)] (high nibble for k >= 2) and
// bits 2k..2k+1 of qh[l]. Scales are int8, one per 16 values.
void decodeQ6_K(const uint8_t* b, float* y) {
  const float d = loadHalf(b + q6_k::kD);
  for (int half = 0; half < 2; ++half) {
    const uint8_t* ql = b + q6_k::kQl + 64 * half;
    const uint8_t* qh = b + q6_k::kQh + 32 * half;
    const auto* sc = reinterpret_cast<const int8_t*>(b + q6_k::kScales) + 8 * half;
    float* out = y + 128 * half;
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      out[l] = d * sc[is] * q1;
      out[l + 32] = d * sc[is + 2] * q2;
      out[l + 64] = d * sc[is + 4] * q3;
      out[l + 96] = d * sc[is + 6] * q4;
    }
  }
}

using DecodeBlocks = void (*)(const uint8_t* in, float* out, size_t blocks);

template <void (*kBlock)(const uint8_t*, float*), size_t kBytes, size_t kValues>
void decodeBlocks(const uint8_t* in, float* out, size_t blocks) {
  for (size_t i = 0; i < blocks; ++i) kBlock(in + i * kBytes, out + i * kValues);
}

void decodeF32(const uint8_t* in, float* out, size_t n) {
  std::memcpy(out, in, n * sizeof(float));
}
void decodeF16(const uint8_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = fp16ToFloat(loadU16(in + 2 * i));
}
void decodeBF16(const uint8_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = bf16ToFloat(loadU16(in + 2 * i));
}

DecodeBlocks decoderFor(TensorType type) {
  switch (type) {
    case TensorType::kF32:
      return decodeF32;
    case TensorType::kF16:
      return decodeF16;
    case TensorType::kBF16:
      return decodeBF16;
    case TensorType::kQ4_0:
      return decodeBlocks<decodeQ4_0, q4_0::kBytes, kQK>;
    case TensorType::kQ4_1:
      return decodeBlocks<decodeQ4_1, q4_1::kBytes, kQK>;
    case TensorType::kQ5_0:
      return decodeBlocks<decodeQ5_0, q5_0::kBytes, kQK>;
    case TensorType::kQ5_1:
      return decodeBlocks<decodeQ5_1, q5_1::kBytes, kQK>;
    case TensorType::kQ8_0:
      return decodeBlocks<decodeQ8_0, q8_0::kBytes, kQK>;
    case TensorType::kMXFP4:
      return decodeBlocks<decodeMXFP4, mxfp4::kBytes, kQK>;
    case TensorType::kIQ4_NL:
      return decodeBlocks<decodeIQ4_NL, iq4_nl::kBytes, kQK>;
    case TensorType::kIQ4_XS:
      return decodeBlocks<decodeIQ4_XS, iq4_xs::kBytes, kQK_K>;
    case TensorType::kQ2_K:
      return decodeBlocks<decodeQ2_K, q2_k::kBytes, kQK_K>;
    case TensorType::kQ3_K:
      return decodeBlocks<decodeQ3_K, q3_k::kBytes, kQK_K>;
    case TensorType::kQ4_K:
      return decodeBlocks<decodeQ4_K, q4_k::kBytes, kQK_K>;
    case TensorType::kQ5_K:
      return decodeBlocks<decodeQ5_K, q5_k::kBytes, kQK_K>;
    case TensorType::kQ6_K:
      return decodeBlocks<decodeQ6_K, q6_k::kBytes, kQK_K>;
    default:
      return nullptr;
  }
}

}  // namespace

bool canDequantize(TensorType type) {
  return decoderFor(type) != nullptr;
}

Status dequantize(TensorType type, std::span<const uint8_t> in, std::span<float> out) {
  const DecodeBlocks decode = decoderFor(type);
  const std::optional<TypeTraits> tt = typeTraits(static_cast<uint32_t>(type));
  if (!decode || !tt) {
    return makeError(ErrorCode::kUnsupported, "cannot dequantize tensor type {}",
                     tt ? tt->name : std::string_view("unknown"));
  }
  const std::optional<uint64_t> bytes = byteSize(type, out.size());
  if (!bytes) {
    return makeError(ErrorCode::kInvalidArgument,
                     "dequantize {}: {} values are not a whole number of {}-value blocks", tt->name,
                     out.size(), tt->blockElements);
  }
  if (in.size() != *bytes) {
    return makeError(ErrorCode::kInvalidArgument,
                     "dequantize {}: {} values need {} bytes but {} were given", tt->name,
                     out.size(), *bytes, in.size());
  }
  // An empty span may have a null data(), which memcpy must not be given.
  if (!out.empty()) decode(in.data(), out.data(), out.size() / tt->blockElements);
  return okStatus();
}

Status dequantizeRow(const GgufFile& file, const TensorInfo& tensor, uint64_t row,
                     std::span<float> out) {
  const uint64_t rowLength = tensor.shape.empty() ? 0 : tensor.shape[0];
  const uint64_t rows = rowLength == 0 ? 0 : tensor.elements() / rowLength;
  if (row >= rows || out.size() != rowLength) {
    return makeError(ErrorCode::kInvalidArgument,
                     "tensor '{}' has {} rows of {} values; row {} into {} floats requested",
                     tensor.name, rows, rowLength, row, out.size());
  }
  const std::span<const uint8_t> data = file.tensorData(tensor);
  const uint64_t rowBytes = data.size() / rows;
  return dequantize(tensor.type, data.subspan(row * rowBytes, rowBytes), out);
}

Expected<std::vector<float>> dequantizeTensor(const GgufFile& file, const TensorInfo& tensor) {
  // Checked before allocating, so a TensorInfo that is not from `file` cannot
  // ask for an arbitrary amount of memory.
  const std::optional<uint64_t> bytes = byteSize(tensor.type, tensor.elements());
  if (!bytes || *bytes != file.tensorData(tensor).size()) {
    return makeError(ErrorCode::kInvalidArgument, "tensor '{}' does not belong to this file",
                     tensor.name);
  }
  std::vector<float> out(tensor.elements());
  KVS_TRY(dequantize(tensor.type, file.tensorData(tensor), out));
  return out;
}

}  // namespace kvscope::gguf
