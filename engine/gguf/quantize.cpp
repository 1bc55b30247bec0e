#include "gguf/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "gguf/block_layout.h"

namespace kvscope::gguf {
namespace {

using namespace blocks;

// Rounds half to even, like ggml's nearest_int, and clamps before converting
// so that no float-to-int conversion can overflow.
int roundClamped(float v, int lo, int hi) {
  const float r = std::nearbyint(v);
  if (!(r >= static_cast<float>(lo))) return lo;
  if (r > static_cast<float>(hi)) return hi;
  return static_cast<int>(r);
}

int ceilClamped(float v, int lo, int hi) {
  const float r = std::ceil(v);
  if (!(r >= static_cast<float>(lo))) return lo;
  if (r > static_cast<float>(hi)) return hi;
  return static_cast<int>(r);
}

// Writes an fp16 field and returns the value a decoder will read back, so the
// quants are chosen against the scale actually stored.
float storeHalf(uint8_t* p, float value) {
  const uint16_t h = floatToFp16(value);
  storeU16(p, h);
  return fp16ToFloat(h);
}

// The value of largest magnitude, sign kept.
float signedAbsMax(const float* x, int n) {
  float best = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > std::fabs(best)) best = x[i];
  }
  return best;
}

// Symmetric blocks: the scale maps the value of largest magnitude onto the
// most negative quant, which has one more level than the positive side.
bool encodeSymmetric(const float* x, uint8_t* dField, int qmin, uint8_t* qs, uint32_t* qh) {
  const float d = storeHalf(dField, signedAbsMax(x, kQK) / static_cast<float>(qmin));
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQK; ++j) {
    const int q = roundClamped(x[j] * id, qmin, -qmin - 1) - qmin;
    qs[j % (kQK / 2)] |= static_cast<uint8_t>((q & 0x0f) << (4 * (j / (kQK / 2))));
    if (qh) *qh |= static_cast<uint32_t>((q >> 4) & 1) << j;
  }
  return std::isfinite(d);
}

// Affine blocks: value = q * d + m with m the block minimum.
bool encodeAffine(const float* x, uint8_t* dField, uint8_t* mField, int nmax, uint8_t* qs,
                  uint32_t* qh) {
  const auto [lo, hi] = std::minmax_element(x, x + kQK);
  const float d = storeHalf(dField, (*hi - *lo) / static_cast<float>(nmax));
  const float m = storeHalf(mField, *lo);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQK; ++j) {
    const int q = roundClamped((x[j] - m) * id, 0, nmax);
    qs[j % (kQK / 2)] |= static_cast<uint8_t>((q & 0x0f) << (4 * (j / (kQK / 2))));
    if (qh) *qh |= static_cast<uint32_t>((q >> 4) & 1) << j;
  }
  return std::isfinite(d) && std::isfinite(m);
}

bool encodeQ4_0(const float* x, uint8_t* b) {
  return encodeSymmetric(x, b + q4_0::kD, -8, b + q4_0::kQs, nullptr);
}

bool encodeQ4_1(const float* x, uint8_t* b) {
  return encodeAffine(x, b + q4_1::kD, b + q4_1::kM, 15, b + q4_1::kQs, nullptr);
}

bool encodeQ5_0(const float* x, uint8_t* b) {
  uint32_t qh = 0;
  const bool ok = encodeSymmetric(x, b + q5_0::kD, -16, b + q5_0::kQs, &qh);
  storeU32(b + q5_0::kQh, qh);
  return ok;
}

bool encodeQ5_1(const float* x, uint8_t* b) {
  uint32_t qh = 0;
  const bool ok = encodeAffine(x, b + q5_1::kD, b + q5_1::kM, 31, b + q5_1::kQs, &qh);
  storeU32(b + q5_1::kQh, qh);
  return ok;
}

// The IQ4 codebook index nearest x / d (x at scale d).
uint8_t nearestIq4(float x) {
  uint8_t best = 0;
  for (uint8_t i = 1; i < 16; ++i) {
    if (std::fabs(x - iq4::kValues[i]) < std::fabs(x - iq4::kValues[best])) best = i;
  }
  return best;
}

// IQ4 codes of 32 values at scale d: value j low nibble, j + 16 high.
void encodeIq4Codes(const float* x, float d, uint8_t* qs) {
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQK / 2; ++j)
    qs[j] = static_cast<uint8_t>(nearestIq4(x[j] * id) | nearestIq4(x[j + kQK / 2] * id) << 4);
}

// The scale that puts the value of largest magnitude on the codebook's end
// of its sign (-127 or 113); a valid encoding, not llama.cpp's searched one.
float iq4Scale(const float* x, int n) {
  const float m = signedAbsMax(x, n);
  return m < 0.0f ? m / iq4::kValues[0] : m / iq4::kValues[15];
}

bool encodeIQ4_NL(const float* x, uint8_t* b) {
  const float d = storeHalf(b + iq4_nl::kD, iq4Scale(x, kQK));
  encodeIq4Codes(x, d, b + iq4_nl::kQs);
  return std::isfinite(d);
}

// IQ4_XS: d from the largest sub-block scale over 31 steps, each sub-block's
// 6-bit scale rounded against it.
bool encodeIQ4_XS(const float* x, uint8_t* b) {
  float scales[kQK_K / 32], largest = 0.0f;
  for (int ib = 0; ib < kQK_K / 32; ++ib) {
    scales[ib] = iq4Scale(x + 32 * ib, 32);
    largest = std::max(largest, std::fabs(scales[ib]));
  }
  const float d = storeHalf(b + iq4_xs::kD, largest / 31.0f);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  uint16_t scalesH = 0;
  for (int ib = 0; ib < kQK_K / 32; ++ib) {
    const int ls = roundClamped(scales[ib] * id, -32, 31) + 32;
    b[iq4_xs::kScalesL + ib / 2] |= static_cast<uint8_t>((ls & 0x0f) << (4 * (ib % 2)));
    scalesH |= static_cast<uint16_t>((ls >> 4) << (2 * ib));
    encodeIq4Codes(x + 32 * ib, d * static_cast<float>(ls - 32), b + iq4_xs::kQs + 16 * ib);
  }
  storeU16(b + iq4_xs::kScalesH, scalesH);
  return std::isfinite(d);
}

// MXFP4: the smallest power-of-two scale 2^(e - 127) that puts the value of
// largest magnitude within E2M1's 6, each value on its nearest E2M1 code.
bool encodeMXFP4(const float* x, uint8_t* b) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
  if (!std::isfinite(amax)) return false;
  const int e = amax > 0.0f
                    ? std::clamp(static_cast<int>(std::ceil(std::log2(amax / 6.0f))) + 127, 1, 254)
                    : 1;
  b[mxfp4::kE] = static_cast<uint8_t>(e);
  const float half = std::ldexp(1.0f, e - 128);  // the doubled codes' step
  for (int j = 0; j < kQK; ++j) {
    uint8_t best = 0;
    for (uint8_t i = 1; i < 16; ++i) {
      if (std::fabs(x[j] - mxfp4::kDoubled[i] * half) <
          std::fabs(x[j] - mxfp4::kDoubled[best] * half))
        best = i;
    }
    b[mxfp4::kQs + j % (kQK / 2)] |= static_cast<uint8_t>(best << (4 * (j / (kQK / 2))));
  }
  return true;
}

bool encodeQ8_0(const float* x, uint8_t* b) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = storeHalf(b + q8_0::kD, amax / 127.0f);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQK; ++j) {
    b[q8_0::kQs + j] =
        static_cast<uint8_t>(static_cast<int8_t>(roundClamped(x[j] * id, -127, 127)));
  }
  return std::isfinite(d);
}

// K-quant sub-block scales for value = d*sc[j]*q - dmin*mn[j], q in [0, nmax],
// sc and mn in [0, levels]. Each min is rounded up and each step sized to
// cover the rest of its sub-block, so no value is clamped and every value is
// within half a step.
struct AffineScales {
  float d = 0.0f;
  float dmin = 0.0f;
  uint8_t sc[16] = {};
  uint8_t mn[16] = {};

  int quant(float v, int j, int nmax) const {
    const float step = d * sc[j];
    return step > 0.0f ? roundClamped((v + dmin * mn[j]) / step, 0, nmax) : 0;
  }
};

bool chooseAffine(const float* x, int subBlocks, int nmax, int levels, uint8_t* dField,
                  uint8_t* dminField, AffineScales& s) {
  const int subSize = kQK_K / subBlocks;
  float lo[16];
  float hi[16];
  float maxMin = 0.0f;
  for (int j = 0; j < subBlocks; ++j) {
    const auto [mn, mx] = std::minmax_element(x + j * subSize, x + (j + 1) * subSize);
    lo[j] = std::min(0.0f, *mn);
    hi[j] = *mx;
    maxMin = std::max(maxMin, -lo[j]);
  }
  s.dmin = storeHalf(dminField, maxMin / static_cast<float>(levels));
  float need[16];
  float maxNeed = 0.0f;
  for (int j = 0; j < subBlocks; ++j) {
    s.mn[j] = static_cast<uint8_t>(s.dmin > 0.0f ? ceilClamped(-lo[j] / s.dmin, 0, levels) : 0);
    need[j] = (hi[j] + s.dmin * s.mn[j]) / static_cast<float>(nmax);
    maxNeed = std::max(maxNeed, need[j]);
  }
  s.d = storeHalf(dField, maxNeed / static_cast<float>(levels));
  for (int j = 0; j < subBlocks; ++j)
    s.sc[j] = static_cast<uint8_t>(s.d > 0.0f ? ceilClamped(need[j] / s.d, 0, levels) : 0);
  return std::isfinite(s.d) && std::isfinite(s.dmin);
}

// K-quant sub-block scales for value = d*sc[j]*q, q in [qmin, -qmin-1], sc a
// signed integer in [-scMax-1, scMax]; 16 sub-blocks of 16 values.
struct SymmetricScales {
  float d = 0.0f;
  int sc[16] = {};

  int quant(float v, int j, int qmin) const {
    const float step = d * static_cast<float>(sc[j]);
    return step != 0.0f ? roundClamped(v / step, qmin, -qmin - 1) : 0;
  }
};

bool chooseSymmetric(const float* x, int qmin, int scMax, uint8_t* dField, SymmetricScales& s) {
  float sub[16];
  float maxAbs = 0.0f;
  for (int j = 0; j < 16; ++j) {
    sub[j] = signedAbsMax(x + 16 * j, 16) / static_cast<float>(qmin);
    maxAbs = std::max(maxAbs, std::fabs(sub[j]));
  }
  s.d = storeHalf(dField, maxAbs / static_cast<float>(scMax));
  for (int j = 0; j < 16; ++j)
    s.sc[j] = s.d > 0.0f ? roundClamped(sub[j] / s.d, -scMax - 1, scMax) : 0;
  return std::isfinite(s.d);
}

// Q2_K and Q3_K share the low-bit layout: value 32*k + l of each 128-value
// half in bits 2k..2k+1 of byte l of that half's 32 bytes.
void packTwoBits(uint8_t* qs, int v, int q) {
  qs[32 * (v / 128) + v % 32] |= static_cast<uint8_t>((q & 3) << (2 * ((v % 128) / 32)));
}

bool encodeQ2_K(const float* x, uint8_t* b) {
  AffineScales s;
  const bool ok = chooseAffine(x, 16, 3, 15, b + q2_k::kD, b + q2_k::kDmin, s);
  for (int j = 0; j < 16; ++j)
    b[q2_k::kScales + j] = static_cast<uint8_t>(s.sc[j] | (s.mn[j] << 4));
  for (int v = 0; v < kQK_K; ++v) packTwoBits(b + q2_k::kQs, v, s.quant(x[v], v / 16, 3));
  return ok;
}

bool encodeQ3_K(const float* x, uint8_t* b) {
  SymmetricScales s;
  const bool ok = chooseSymmetric(x, -4, 31, b + q3_k::kD, s);
  for (int j = 0; j < 16; ++j) packQ3kScale(b + q3_k::kScales, j, s.sc[j]);
  for (int v = 0; v < kQK_K; ++v) {
    const int q = s.quant(x[v], v / 16, -4) + 4;  // 0..7; bit 2 goes to hmask
    packTwoBits(b + q3_k::kQs, v, q);
    b[q3_k::kHmask + v % 32] |= static_cast<uint8_t>((q >> 2) << (v / 32));
  }
  return ok;
}

static_assert(q4_k::kD == q5_k::kD && q4_k::kDmin == q5_k::kDmin && q4_k::kScales == q5_k::kScales);

// Q4_K and Q5_K: group g of 64 values keeps value 64g + l in the low nibble
// and 64g + 32 + l in the high nibble of byte 32g + l; Q5_K's fifth bits go to
// qh[l], bit 2g and 2g + 1.
bool encodeQ45_K(const float* x, uint8_t* b, int nmax, size_t qsAt, uint8_t* qh) {
  AffineScales s;
  const bool ok = chooseAffine(x, 8, nmax, 63, b + q4_k::kD, b + q4_k::kDmin, s);
  for (int j = 0; j < 8; ++j) packKScaleMin(b + q4_k::kScales, j, s.sc[j], s.mn[j]);
  for (int g = 0; g < 4; ++g) {
    for (int l = 0; l < 32; ++l) {
      const int lo = s.quant(x[64 * g + l], 2 * g, nmax);
      const int hi = s.quant(x[64 * g + 32 + l], 2 * g + 1, nmax);
      b[qsAt + 32 * g + l] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
      if (qh) qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * g)) | ((hi >> 4) << (2 * g + 1)));
    }
  }
  return ok;
}

bool encodeQ4_K(const float* x, uint8_t* b) {
  return encodeQ45_K(x, b, 15, q4_k::kQs, nullptr);
}

bool encodeQ5_K(const float* x, uint8_t* b) {
  return encodeQ45_K(x, b, 31, q5_k::kQs, b + q5_k::kQh);
}

// Q6_K: value 128h + 32k + l takes a nibble (high for k >= 2) of
// ql[64h + l + 32*(k%2)] and bits 2k..2k+1 of qh[32h + l].
bool encodeQ6_K(const float* x, uint8_t* b) {
  SymmetricScales s;
  const bool ok = chooseSymmetric(x, -32, 127, b + q6_k::kD, s);
  for (int j = 0; j < 16; ++j)
    b[q6_k::kScales + j] = static_cast<uint8_t>(static_cast<int8_t>(s.sc[j]));
  for (int v = 0; v < kQK_K; ++v) {
    const int q = s.quant(x[v], v / 16, -32) + 32;  // 0..63
    const int h = v / 128;
    const int k = (v % 128) / 32;
    const int l = v % 32;
    b[q6_k::kQl + 64 * h + l + 32 * (k % 2)] |= static_cast<uint8_t>((q & 0x0f) << (4 * (k / 2)));
    b[q6_k::kQh + 32 * h + l] |= static_cast<uint8_t>((q >> 4) << (2 * k));
  }
  return ok;
}

bool encodeF32(const float* x, uint8_t* b) {
  std::memcpy(b, x, sizeof(float));
  return true;
}

bool encodeF16(const float* x, uint8_t* b) {
  return std::isfinite(storeHalf(b, *x));
}

bool encodeBF16(const float* x, uint8_t* b) {
  const uint16_t h = floatToBf16(*x);
  storeU16(b, h);
  return std::isfinite(bf16ToFloat(h));
}

using EncodeBlock = bool (*)(const float* x, uint8_t* block);

EncodeBlock encoderFor(TensorType type) {
  switch (type) {
    case TensorType::kF32:
      return encodeF32;
    case TensorType::kF16:
      return encodeF16;
    case TensorType::kBF16:
      return encodeBF16;
    case TensorType::kQ4_0:
      return encodeQ4_0;
    case TensorType::kQ4_1:
      return encodeQ4_1;
    case TensorType::kQ5_0:
      return encodeQ5_0;
    case TensorType::kQ5_1:
      return encodeQ5_1;
    case TensorType::kQ8_0:
      return encodeQ8_0;
    case TensorType::kMXFP4:
      return encodeMXFP4;
    case TensorType::kIQ4_NL:
      return encodeIQ4_NL;
    case TensorType::kIQ4_XS:
      return encodeIQ4_XS;
    case TensorType::kQ2_K:
      return encodeQ2_K;
    case TensorType::kQ3_K:
      return encodeQ3_K;
    case TensorType::kQ4_K:
      return encodeQ4_K;
    case TensorType::kQ5_K:
      return encodeQ5_K;
    case TensorType::kQ6_K:
      return encodeQ6_K;
    default:
      return nullptr;
  }
}

}  // namespace

bool canQuantize(TensorType type) {
  return encoderFor(type) != nullptr;
}

Status quantize(TensorType type, std::span<const float> in, std::span<uint8_t> out) {
  const EncodeBlock encode = encoderFor(type);
  const std::optional<TypeTraits> tt = typeTraits(static_cast<uint32_t>(type));
  if (!encode || !tt) {
    return makeError(ErrorCode::kUnsupported, "cannot quantize to tensor type {}",
                     tt ? tt->name : std::string_view("unknown"));
  }
  const std::optional<uint64_t> bytes = byteSize(type, in.size());
  if (!bytes || out.size() != *bytes) {
    return makeError(ErrorCode::kInvalidArgument,
                     "quantize {}: {} values into {} bytes (need a multiple of {} values, {} "
                     "bytes per block)",
                     tt->name, in.size(), out.size(), tt->blockElements, tt->blockBytes);
  }
  for (size_t i = 0; i < in.size(); ++i) {
    if (!std::isfinite(in[i]))
      return makeError(ErrorCode::kInvalidArgument, "quantize {}: value {} is {}", tt->name, i,
                       in[i]);
  }
  // Encoders OR bit fields into place, so blocks start zeroed.
  std::fill(out.begin(), out.end(), uint8_t{0});
  const size_t blocks = in.size() / tt->blockElements;
  for (size_t i = 0; i < blocks; ++i) {
    if (!encode(in.data() + i * tt->blockElements, out.data() + i * tt->blockBytes)) {
      return makeError(ErrorCode::kInvalidArgument,
                       "quantize {}: block {} holds values too large for its fp16 scales", tt->name,
                       i);
    }
  }
  return okStatus();
}

Expected<std::vector<uint8_t>> quantize(TensorType type, std::span<const float> in) {
  const std::optional<uint64_t> bytes = byteSize(type, in.size());
  std::vector<uint8_t> out(bytes.value_or(0));
  KVS_TRY(quantize(type, in, out));
  return out;
}

}  // namespace kvscope::gguf
