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
RowLayout turboLayout(uint32_t dim, uint32_t bits, bool grouped) {
  const uint32_t scales = 2 * (grouped ? blockCount(dim, kTurboGroup) : 1);
  const uint32_t codes = packedCodeBytes(bits, dim);
  return {codes, scales, padTo4(scales + codes)};
}
}  // namespace

TurboScheme::TurboScheme(const SchemeParams& params, uint32_t bits, bool grouped)
    : KvScheme(params, turboLayout(params.dim, bits, grouped)),
      m_name(fmt::format("turbo{}{}", bits, grouped ? "g" : "")),
      m_bits(bits),
      m_grouped(grouped),
      m_rotation(makeRotation(params.dim, params.seed)),
      m_codebook(cachedUnitVectorCodebook(bits, params.dim)) {
  assert(bits >= 2 && bits <= 4 && params.dim >= kMinTurboDim);
  if (std::has_single_bit(params.dim)) {
    // makeRotation's H S / sqrt(d): H's first row is all +1, so R's first
    // row carries the signs.
    for (uint32_t j = 0; j < params.dim; ++j) m_signs.push_back(m_rotation[j] > 0 ? 1.0f : -1.0f);
  }
  for (size_t j = 0; j + 1 < m_codebook.size(); ++j)
    m_midpoints.push_back(0.5f * (m_codebook[j] + m_codebook[j + 1]));
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
  if (m_signs.empty()) {
    rotateVector(m_rotation, row, y);
  } else {
    hadamardRotate(m_signs, row.data(), y.data());
  }
  double sumSq = 0.0;
  for (float v : row) sumSq += double{v} * v;
  const auto norm = static_cast<float>(std::sqrt(sumSq));

  for (uint32_t i = 0; i < d; ++i) {
    const float u = norm > 0.0f ? y[i] / norm : 0.0f;
    uint8_t code = 0;
    for (float m : m_midpoints) code += m < u ? 1 : 0;
    codes[i] = code;
  }

  const uint32_t groups = m_grouped ? blockCount(d, kTurboGroup) : 1;
  const uint32_t width = m_grouped ? kTurboGroup : d;
  for (uint32_t g = 0; g < groups; ++g) {
    double ySq = 0.0, cSq = 0.0;
    for (uint32_t i = g * width; i < std::min(d, (g + 1) * width); ++i) {
      ySq += double{y[i]} * y[i];
      cSq += double{m_codebook[codes[i]]} * m_codebook[codes[i]];
    }
    // Plain: ||x|| / ||c_hat|| (||x|| rather than ||y||: R is orthogonal).
    const double target = m_grouped ? std::sqrt(ySq) : double{norm};
    storeHalf(out, g,
              cSq > 0.0 && target > 0.0 ? static_cast<float>(target / std::sqrt(cSq)) : 0.0f);
  }
  const uint32_t at = rowLayout().scaleBytes;
  packCodes(codes, m_bits, out.subspan(at));
  std::memset(out.data() + at + rowLayout().codeBytes, 0, rowLayout().paddingBytes);
}

void TurboScheme::decodeRotated(std::span<const uint8_t> in, std::span<float> row) const {
  assert(row.size() == dim() && in.size() >= rowBytes());
  const auto codes = in.subspan(rowLayout().scaleBytes);
  const uint32_t d = dim(), width = m_grouped ? kTurboGroup : d;
  for (uint32_t begin = 0, g = 0; begin < d; begin += width, ++g) {
    const float gamma = loadHalf(in, g);  // one scale per group, loaded once
    for (uint32_t i = begin; i < std::min(d, begin + width); ++i)
      row[i] = gamma * m_codebook[unpackCode(codes, m_bits, d, i)];
  }
}

void TurboScheme::decode(std::span<const uint8_t> in, std::span<float> row) const {
  std::array<float, kMaxKvDim> yBuffer;
  const std::span<float> y = std::span(yBuffer).first(dim());
  decodeRotated(in, y);
  if (m_signs.empty()) {
    rotateVectorBack(m_rotation, y, row);
  } else {
    hadamardRotateBack(m_signs, y.data(), row.data());
  }
}

}  // namespace kvscope::kv
