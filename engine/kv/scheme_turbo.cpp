#include "kv/scheme_turbo.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "kv/code_packing.h"
#include "kv/lloyd_max.h"
#include "kv/rotation.h"

namespace kvscope::kv {

namespace {
uint32_t scaleWidthOf(TurboScale scale, uint32_t dim) {
  switch (scale) {
    case TurboScale::kGroup:
      return kTurboGroup;
    case TurboScale::kBlock:
      return kKvBlock;
    default:
      return dim;
  }
}
RowLayout turboLayout(uint32_t dim, uint32_t bits, TurboScale scale) {
  const uint32_t scales = 2 * blockCount(dim, scaleWidthOf(scale, dim));
  const uint32_t codes = packedCodeBytes(bits, dim);
  return {codes, scales, padTo4(scales + codes)};
}
const char* suffix(TurboScale scale) {
  switch (scale) {
    case TurboScale::kGroup:
      return "g";
    case TurboScale::kBlock:
      return "b";
    default:
      return "";
  }
}
}  // namespace

TurboScheme::TurboScheme(const SchemeParams& params, uint32_t bits, TurboScale scale)
    : KvScheme(params, turboLayout(params.dim, bits, scale)),
      m_name(fmt::format("turbo{}{}", bits, suffix(scale))),
      m_bits(bits),
      m_scale(scale),
      m_rotation(params.dim, params.seed),
      m_codebook(scale == TurboScale::kBlock ? cachedGaussianCodebook(bits)
                                             : cachedUnitVectorCodebook(bits, params.dim)) {
  assert(bits >= 2 && bits <= (scale == TurboScale::kBlock ? 6u : 4u) &&
         params.dim >= kMinTurboDim);
  for (size_t j = 0; j + 1 < m_codebook.size(); ++j)
    m_midpoints.push_back(0.5f * (m_codebook[j] + m_codebook[j + 1]));
}

uint32_t TurboScheme::scaleWidth() const {
  return scaleWidthOf(m_scale, dim());
}

void TurboScheme::codesFor(std::span<const float> y, float s, std::span<uint8_t> codes) const {
  // The midpoints strictly below u (a NaN u: none): a branch-free count up to
  // 4 bits (15 midpoints), by bisection above (up to 63).
  const bool bisect = m_midpoints.size() > 15;
  for (size_t i = 0; i < y.size(); ++i) {
    const float u = s > 0.0f ? y[i] / s : 0.0f;
    uint8_t code = 0;
    if (bisect) {
      code = static_cast<uint8_t>(std::lower_bound(m_midpoints.begin(), m_midpoints.end(), u) -
                                  m_midpoints.begin());
    } else {
      for (float m : m_midpoints) code += m < u ? 1 : 0;
    }
    codes[i] = code;
  }
}

float TurboScheme::blockScale(std::span<const float> y, std::span<uint8_t> codes) const {
  std::array<uint8_t, kKvBlock> trial;
  const auto n = static_cast<uint32_t>(y.size());
  auto errorOf = [&](float s, std::span<const uint8_t> c) {
    float e = 0.0f;
    for (uint32_t i = 0; i < n; ++i) {
      const float r = y[i] - s * m_codebook[c[i]];
      e += r * r;
    }
    return e;
  };
  float sumSq = 0.0f;
  for (float v : y) sumSq += v * v;
  const float rms = std::sqrt(sumSq / static_cast<float>(n));
  float best = 0.0f, bestError = 0.0f;
  for (const float step : kTurboBlockSteps) {
    const float s = roundToFp16(rms * step);
    codesFor(y, s, std::span(trial).first(n));
    const float e = errorOf(s, std::span(trial).first(n));
    // The first candidate always lands, so codes are set even when every
    // error is NaN or infinite (an overflowing scale).
    if (step == kTurboBlockSteps[0] || e < bestError) {
      bestError = e;
      best = s;
      std::copy_n(trial.begin(), n, codes.begin());
    }
  }
  float num = 0.0f, den = 0.0f;
  for (uint32_t i = 0; i < n; ++i) {
    const float c = m_codebook[codes[i]];
    num += y[i] * c;
    den += c * c;
  }
  if (den > 0.0f) {
    const float s = roundToFp16(num / den);
    codesFor(y, s, std::span(trial).first(n));
    if (errorOf(s, std::span(trial).first(n)) < bestError) {
      best = s;
      std::copy_n(trial.begin(), n, codes.begin());
    }
  }
  return best;
}

void TurboScheme::encode(std::span<const float> row, std::span<uint8_t> out) const {
  assert(row.size() == dim() && out.size() >= rowBytes());
  const uint32_t d = dim();
  // Rows are encoded per token: scratch on the stack, not the heap.
  std::array<float, kMaxKvDim> yBuffer;
  std::array<uint8_t, kMaxKvDim> codeBuffer;
  const std::span<float> y = std::span(yBuffer).first(d);
  const std::span<uint8_t> codes = std::span(codeBuffer).first(d);
  // Power-of-two dims: R = H S / sqrt(d) in O(d log d), in float32 (the
  // device encoder rotates in float32 as well); others the dense R.
  m_rotation.rotate(row, y);

  const uint32_t width = scaleWidth(), scales = blockCount(d, width);
  if (m_scale == TurboScale::kBlock) {
    for (uint32_t b = 0; b < scales; ++b) {
      const uint32_t begin = b * width, n = std::min(d, begin + width) - begin;
      storeHalf(out, b, blockScale(y.subspan(begin, n), codes.subspan(begin, n)));
    }
  } else {
    double sumSq = 0.0;
    for (float v : row) sumSq += double{v} * v;
    const auto norm = static_cast<float>(std::sqrt(sumSq));
    codesFor(y, norm, codes);
    for (uint32_t g = 0; g < scales; ++g) {
      double ySq = 0.0, cSq = 0.0;
      for (uint32_t i = g * width; i < std::min(d, (g + 1) * width); ++i) {
        ySq += double{y[i]} * y[i];
        cSq += double{m_codebook[codes[i]]} * m_codebook[codes[i]];
      }
      // Row: ||x|| / ||c_hat|| (||x|| rather than ||y||: R is orthogonal).
      const double target = m_scale == TurboScale::kGroup ? std::sqrt(ySq) : double{norm};
      storeHalf(out, g,
                cSq > 0.0 && target > 0.0 ? static_cast<float>(target / std::sqrt(cSq)) : 0.0f);
    }
  }
  const uint32_t at = rowLayout().scaleBytes;
  packCodes(codes, m_bits, out.subspan(at));
  std::memset(out.data() + at + rowLayout().codeBytes, 0, rowLayout().paddingBytes);
}

void TurboScheme::decodeRotated(std::span<const uint8_t> in, std::span<float> row) const {
  assert(row.size() == dim() && in.size() >= rowBytes());
  const auto codes = in.subspan(rowLayout().scaleBytes);
  const uint32_t d = dim(), width = scaleWidth();
  for (uint32_t begin = 0, g = 0; begin < d; begin += width, ++g) {
    const float scale = loadHalf(in, g);  // one scale per group, loaded once
    for (uint32_t i = begin; i < std::min(d, begin + width); ++i)
      row[i] = scale * m_codebook[unpackCode(codes, m_bits, d, i)];
  }
}

void TurboScheme::decode(std::span<const uint8_t> in, std::span<float> row) const {
  std::array<float, kMaxKvDim> yBuffer;
  const std::span<float> y = std::span(yBuffer).first(dim());
  decodeRotated(in, y);
  m_rotation.rotateBack(y, row);
}

}  // namespace kvscope::kv
