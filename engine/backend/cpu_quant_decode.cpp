#include "backend/cpu_quant_decode.h"

#include <cassert>
#include <cmath>
#include <cstring>

#include "backend/cpu_quant_avx2.h"
#include "gguf/block_layout.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace kvscope::cpu {
namespace {

using namespace gguf::blocks;

// Block scales are read once per 32 values, too often for an out-of-line
// conversion; F16C converts in one instruction (exactly, like fp16ToFloat).
float half(const uint8_t* p) {
#if defined(__F16C__)
  return _cvtsh_ss(loadU16(p));
#else
  return loadHalf(p);
#endif
}

// The portable decoders fill local arrays first: the compiler then knows the
// int8 output cannot alias the uint8 input and vectorizes the loops, which it
// will not do through two char pointers.

void blockQ4_0(const uint8_t* b, int8_t* q, float* scale, float* offset) {
  const uint8_t* qs = b + q4_0::kQs;
  int8_t v[kQK];
  for (int j = 0; j < kQK / 2; ++j) {
    v[j] = static_cast<int8_t>((qs[j] & 0x0f) - 8);
    v[j + kQK / 2] = static_cast<int8_t>((qs[j] >> 4) - 8);
  }
  std::memcpy(q, v, kQK);
  scale[0] = scale[1] = half(b + q4_0::kD);
  offset[0] = offset[1] = 0.0f;
}

void blockQ4_1(const uint8_t* b, int8_t* q, float* scale, float* offset) {
  const uint8_t* qs = b + q4_1::kQs;
  int8_t v[kQK];
  for (int j = 0; j < kQK / 2; ++j) {
    v[j] = static_cast<int8_t>(qs[j] & 0x0f);
    v[j + kQK / 2] = static_cast<int8_t>(qs[j] >> 4);
  }
  std::memcpy(q, v, kQK);
  scale[0] = scale[1] = half(b + q4_1::kD);
  offset[0] = offset[1] = half(b + q4_1::kM);
}

// Q5_0/Q5_1 keep value v's fifth bit in bit v of the 32-bit qh field.
void fiveBitQuants(const uint8_t* qs, uint32_t qh, int bias, int8_t* q) {
  int8_t v[kQK];
  for (int j = 0; j < kQK / 2; ++j) {
    v[j] = static_cast<int8_t>(((qs[j] & 0x0f) | (((qh >> j) & 1) << 4)) - bias);
    v[j + kQK / 2] =
        static_cast<int8_t>(((qs[j] >> 4) | (((qh >> (j + kQK / 2)) & 1) << 4)) - bias);
  }
  std::memcpy(q, v, kQK);
}

void blockQ5_0(const uint8_t* b, int8_t* q, float* scale, float* offset) {
  fiveBitQuants(b + q5_0::kQs, loadU32(b + q5_0::kQh), 16, q);
  scale[0] = scale[1] = half(b + q5_0::kD);
  offset[0] = offset[1] = 0.0f;
}

void blockQ5_1(const uint8_t* b, int8_t* q, float* scale, float* offset) {
  fiveBitQuants(b + q5_1::kQs, loadU32(b + q5_1::kQh), 0, q);
  scale[0] = scale[1] = half(b + q5_1::kD);
  offset[0] = offset[1] = half(b + q5_1::kM);
}

// 32 values coded as Q4_0's nibbles (value j low, 16 + j high), each an
// index into a 16-entry int8 codebook.
void codebookNibbles(const int8_t (&codebook)[16], const uint8_t* qs, int8_t* q) {
  for (int j = 0; j < kQK / 2; ++j) {
    q[j] = codebook[qs[j] & 0x0f];
    q[j + kQK / 2] = codebook[qs[j] >> 4];
  }
}

void blockMXFP4(const uint8_t* b, int8_t* q, float* scale, float* offset) {
  codebookNibbles(mxfp4::kDoubled, b + mxfp4::kQs, q);
  scale[0] = scale[1] = mxfp4::scale(b[mxfp4::kE]);
  offset[0] = offset[1] = 0.0f;
}

void blockIQ4_NL(const uint8_t* b, int8_t* q, float* scale, float* offset) {
  codebookNibbles(iq4::kValues, b + iq4_nl::kQs, q);
  scale[0] = scale[1] = half(b + iq4_nl::kD);
  offset[0] = offset[1] = 0.0f;
}

// IQ4_XS: eight IQ4_NL-coded sub-blocks of 32, each scaled by d (6-bit - 32).
void blockIQ4_XS(const uint8_t* b, int8_t* q, float* scale, float* offset) {
  const float d = half(b + iq4_xs::kD);
  int8_t v[kQK_K];
  for (int ib = 0; ib < kQK_K / 32; ++ib) {
    codebookNibbles(iq4::kValues, b + iq4_xs::kQs + 16 * ib, v + 32 * ib);
    scale[2 * ib] = scale[2 * ib + 1] = d * static_cast<float>(iq4_xs::subScale(b, ib));
    offset[2 * ib] = offset[2 * ib + 1] = 0.0f;
  }
  std::memcpy(q, v, kQK_K);
}

void blockQ8_0(const uint8_t* b, int8_t* q, float* scale, float* offset) {
  std::memcpy(q, b + q8_0::kQs, kQK);
  scale[0] = scale[1] = half(b + q8_0::kD);
  offset[0] = offset[1] = 0.0f;
}

// Q2_K: value 32*k + l of each half of 128 sits in bits 2k..2k+1 of byte l of
// the half's 32 bytes; each group of 16 has a 4-bit scale and 4-bit min.
void blockQ2_K(const uint8_t* b, int8_t* q, float* scale, float* offset) {
  const float d = half(b + q2_k::kD);
  const float dmin = half(b + q2_k::kDmin);
  int8_t v[kQK_K];
  for (int i = 0; i < kQK_K; ++i) {
    const uint8_t byte = b[q2_k::kQs + 32 * (i / 128) + i % 32];
    v[i] = static_cast<int8_t>((byte >> (2 * ((i % 128) / 32))) & 3);
  }
  std::memcpy(q, v, kQK_K);
  for (int g = 0; g < kQK_K / 16; ++g) {
    const uint8_t sc = b[q2_k::kScales + g];
    scale[g] = d * (sc & 0x0f);
    offset[g] = -(dmin * (sc >> 4));
  }
}

// Q3_K: the Q2_K layout plus a high bit for value i in bit i / 32 of
// hmask[i % 32]; a clear high bit subtracts 4. Scales are signed 6-bit.
void blockQ3_K(const uint8_t* b, int8_t* q, float* scale, float* offset) {
  const float d = half(b + q3_k::kD);
  int8_t v[kQK_K];
  for (int i = 0; i < kQK_K; ++i) {
    const uint8_t byte = b[q3_k::kQs + 32 * (i / 128) + i % 32];
    const int low = (byte >> (2 * ((i % 128) / 32))) & 3;
    const int high = (b[q3_k::kHmask + i % 32] >> (i / 32)) & 1;
    v[i] = static_cast<int8_t>(low - (high ? 0 : 4));
  }
  std::memcpy(q, v, kQK_K);
  for (int g = 0; g < kQK_K / 16; ++g) {
    scale[g] = d * q3kScale(b + q3_k::kScales, g);
    offset[g] = 0.0f;
  }
}

// Q4_K: each group of 64 values shares 32 bytes of qs, low nibbles first.
void blockQ4_K(const uint8_t* b, int8_t* q, float* scale, float* offset) {
  int8_t v[kQK_K];
  for (int g = 0; g < 4; ++g) {
    const uint8_t* qs = b + q4_k::kQs + 32 * g;
    for (int l = 0; l < 32; ++l) {
      v[64 * g + l] = static_cast<int8_t>(qs[l] & 0x0f);
      v[64 * g + 32 + l] = static_cast<int8_t>(qs[l] >> 4);
    }
  }
  std::memcpy(q, v, kQK_K);
  kQuantScales(b, scale, offset);
}

// Q5_K: Q4_K plus a fifth bit per value in qh[l], bit 2g (low nibble) or
// 2g + 1 (high nibble) for group g of 64.
void blockQ5_K(const uint8_t* b, int8_t* q, float* scale, float* offset) {
  const uint8_t* qh = b + q5_k::kQh;
  int8_t v[kQK_K];
  for (int g = 0; g < 4; ++g) {
    const uint8_t* qs = b + q5_k::kQs + 32 * g;
    for (int l = 0; l < 32; ++l) {
      v[64 * g + l] = static_cast<int8_t>((qs[l] & 0x0f) | (((qh[l] >> (2 * g)) & 1) << 4));
      v[64 * g + 32 + l] = static_cast<int8_t>((qs[l] >> 4) | (((qh[l] >> (2 * g + 1)) & 1) << 4));
    }
  }
  std::memcpy(q, v, kQK_K);
  kQuantScales(b, scale, offset);
}

// Q6_K: value 32*k + l of each half of 128 takes a nibble of ql[l + 32*(k%2)]
// (high nibble for k >= 2) and bits 2k..2k+1 of qh[l]; int8 scale per 16.
void blockQ6_K(const uint8_t* b, int8_t* q, float* scale, float* offset) {
  const float d = half(b + q6_k::kD);
  int8_t v[kQK_K];
  for (int half = 0; half < 2; ++half) {
    const uint8_t* ql = b + q6_k::kQl + 64 * half;
    const uint8_t* qh = b + q6_k::kQh + 32 * half;
    int8_t* out = v + 128 * half;
    for (int l = 0; l < 32; ++l) {
      out[l] = static_cast<int8_t>(((ql[l] & 0x0f) | ((qh[l] & 3) << 4)) - 32);
      out[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32);
      out[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      out[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
  std::memcpy(q, v, kQK_K);
  const auto* sc = reinterpret_cast<const int8_t*>(b + q6_k::kScales);
  for (int g = 0; g < kQK_K / 16; ++g) {
    scale[g] = d * sc[g];
    offset[g] = 0.0f;
  }
}

using DecodeRowFn = void (*)(const uint8_t* row, size_t blocks, const DecodedRow& out);

// One instantiation per block decoder, so the per-block call is inlined and
// only the row pays for the dispatch.
template <void (*kBlock)(const uint8_t*, int8_t*, float*, float*), size_t kBytes, size_t kValues>
void decodeBlocks(const uint8_t* row, size_t blocks, const DecodedRow& out) {
  constexpr size_t kGroups = kValues / kGroup;
  // Local copies: the int8 stores could otherwise alias `out` and force reloads.
  int8_t* q = out.q;
  float* scale = out.scale;
  float* offset = out.offset;
  for (size_t b = 0; b < blocks; ++b)
    kBlock(row + b * kBytes, q + b * kValues, scale + b * kGroups, offset + b * kGroups);
}

struct Decoder {
  DecodeRowFn row = nullptr;
  size_t values = 0;
};

Decoder decoderFor(gguf::TensorType type) {
  using gguf::TensorType;
  switch (type) {
    case TensorType::kQ4_0:
      return {decodeBlocks<blockQ4_0, q4_0::kBytes, kQK>, kQK};
    case TensorType::kQ4_1:
      return {decodeBlocks<blockQ4_1, q4_1::kBytes, kQK>, kQK};
    case TensorType::kQ5_0:
      return {decodeBlocks<blockQ5_0, q5_0::kBytes, kQK>, kQK};
    case TensorType::kQ5_1:
      return {decodeBlocks<blockQ5_1, q5_1::kBytes, kQK>, kQK};
    case TensorType::kQ8_0:
      return {decodeBlocks<blockQ8_0, q8_0::kBytes, kQK>, kQK};
    case TensorType::kMXFP4:
      return {decodeBlocks<blockMXFP4, mxfp4::kBytes, kQK>, kQK};
    case TensorType::kIQ4_NL:
      return {decodeBlocks<blockIQ4_NL, iq4_nl::kBytes, kQK>, kQK};
    case TensorType::kIQ4_XS:
      return {decodeBlocks<blockIQ4_XS, iq4_xs::kBytes, kQK_K>, kQK_K};
    case TensorType::kQ2_K:
      return {decodeBlocks<blockQ2_K, q2_k::kBytes, kQK_K>, kQK_K};
    case TensorType::kQ3_K:
      return {decodeBlocks<blockQ3_K, q3_k::kBytes, kQK_K>, kQK_K};
    case TensorType::kQ4_K:
      return {decodeBlocks<blockQ4_K, q4_k::kBytes, kQK_K>, kQK_K};
    case TensorType::kQ5_K:
      return {decodeBlocks<blockQ5_K, q5_k::kBytes, kQK_K>, kQK_K};
    case TensorType::kQ6_K:
      return {decodeBlocks<blockQ6_K, q6_k::kBytes, kQK_K>, kQK_K};
    default:
      return {};
  }
}

}  // namespace

bool canDecodeRow(gguf::TensorType type) {
  return decoderFor(type).row != nullptr;
}

void kQuantScales(const uint8_t* block, float* scale, float* offset) {
  const float d = half(block + q4_k::kD);
  const float dmin = half(block + q4_k::kDmin);
  // kScaleMin for all eight pairs, four fields per 32-bit word: bytes 0-3
  // and 4-7 hold scales and mins 0-3; scales and mins 4-7 take a nibble of
  // bytes 8-11 plus the top two bits of bytes 0-3 (scales) or 4-7 (mins).
  const uint8_t* s = block + q4_k::kScales;
  const uint32_t w0 = loadU32(s), w1 = loadU32(s + 4), w2 = loadU32(s + 8);
  const uint32_t words[4] = {w0 & 0x3f3f3f3fu, w1 & 0x3f3f3f3fu,
                             (w2 & 0x0f0f0f0fu) | ((w0 >> 2) & 0x30303030u),
                             ((w2 >> 4) & 0x0f0f0f0fu) | ((w1 >> 2) & 0x30303030u)};
  uint8_t bytes[16];
  std::memcpy(bytes, words, sizeof bytes);
  for (int j = 0; j < 8; ++j) {
    const uint8_t sc = bytes[j < 4 ? j : j + 4];
    const uint8_t m = bytes[j < 4 ? j + 4 : j + 8];
    scale[2 * j] = scale[2 * j + 1] = d * sc;
    offset[2 * j] = offset[2 * j + 1] = -(dmin * m);
  }
}

bool hasOffsets(gguf::TensorType type) {
  using gguf::TensorType;
  return type == TensorType::kQ4_1 || type == TensorType::kQ5_1 || type == TensorType::kQ2_K ||
         type == TensorType::kQ4_K || type == TensorType::kQ5_K;
}

void decodeRow(gguf::TensorType type, const uint8_t* row, size_t in, const DecodedRow& out,
               bool portable) {
#if defined(KVSCOPE_CPU_AVX2)
  if (!portable) {
    if (const auto simd = avx2::rowKernels(type).decode) {
      simd(row, in, out);
      return;
    }
  }
#endif
  (void)portable;
  const Decoder dec = decoderFor(type);
  assert(dec.row && in % dec.values == 0);
  dec.row(row, in / dec.values, out);
}

}  // namespace kvscope::cpu
