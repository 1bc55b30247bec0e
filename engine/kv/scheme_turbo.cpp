#include "kv/scheme_turbo.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "kv/block_scale_search.h"
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

// The squared error of y coded as `codes` under scale s, summed in order.
float codedError(std::span<const float> y, float s, std::span<const float> codebook,
                 std::span<const uint8_t> codes) {
  float e = 0.0f;
  for (size_t i = 0; i < y.size(); ++i) {
    const float r = y[i] - s * codebook[codes[i]];
    e += r * r;
  }
  return e;
}

#if defined(__AVX2__)
// The error of each of 8 scales at once: lane c runs codesFor and codedError
// for scales[c] in the scalar order (values in turn, multiply then add: the
// build has -ffp-contract=off), so the sums are the scalar ones bit for bit.
// kValues values are coded side by side, to overlap the latencies of the
// search's gathers; their errors are then added in order.
template <size_t kValues>
void candidateErrors8(std::span<const float> y, const MidpointSearch& search,
                      std::span<const float> codebook, const float* scales, float* errors) {
  const __m256 s = _mm256_loadu_ps(scales);
  const __m256 positive = _mm256_cmp_ps(s, _mm256_setzero_ps(), _CMP_GT_OQ);
  __m256 e = _mm256_setzero_ps();
  for (size_t i = 0; i < y.size(); i += kValues) {
    const size_t values = std::min(kValues, y.size() - i);
    __m256 yv[kValues];
    __m256i code[kValues];
    for (size_t k = 0; k < kValues; ++k) {
      yv[k] = _mm256_set1_ps(y[i + std::min(k, values - 1)]);
      code[k] = search.codes8(_mm256_and_ps(_mm256_div_ps(yv[k], s), positive));
    }
    for (size_t k = 0; k < values; ++k) {
      const __m256 c = _mm256_i32gather_ps(codebook.data(), code[k], 4);
      const __m256 r = _mm256_sub_ps(yv[k], _mm256_mul_ps(s, c));
      e = _mm256_add_ps(e, _mm256_mul_ps(r, r));
    }
  }
  _mm256_storeu_ps(errors, e);
}
#endif

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
  std::vector<float> midpoints;
  for (size_t j = 0; j + 1 < m_codebook.size(); ++j)
    midpoints.push_back(0.5f * (m_codebook[j] + m_codebook[j + 1]));
  m_search = MidpointSearch(std::move(midpoints));
}

uint32_t TurboScheme::scaleWidth() const {
  return scaleWidthOf(m_scale, dim());
}

void TurboScheme::codesFor(std::span<const float> y, float s, std::span<uint8_t> codes) const {
  size_t i = 0;
#if defined(__AVX2__)
  if (s > 0.0f) {
    const __m256 sv = _mm256_set1_ps(s);
    for (; i + 8 <= y.size(); i += 8) {
      alignas(32) int32_t c[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(c),
                         m_search.codes8(_mm256_div_ps(_mm256_loadu_ps(&y[i]), sv)));
      for (size_t k = 0; k < 8; ++k) codes[i + k] = static_cast<uint8_t>(c[k]);
    }
  }
#endif
  for (; i < y.size(); ++i) codes[i] = m_search.code(s > 0.0f ? y[i] / s : 0.0f);
}

float TurboScheme::blockScale(std::span<const float> y, std::span<uint8_t> codes) const {
  std::array<uint8_t, kKvBlock> trial;
  const auto n = static_cast<uint32_t>(y.size());
  float sumSq = 0.0f;
  for (float v : y) sumSq += v * v;
  const float rms = std::sqrt(sumSq / static_cast<float>(n));
  constexpr size_t kSteps = std::size(kTurboBlockSteps);
  std::array<float, kSteps> scales, errors;
  for (size_t t = 0; t < kSteps; ++t) scales[t] = roundToFp16(rms * kTurboBlockSteps[t]);
#if defined(__AVX2__)
  static_assert(kSteps % 8 == 0);
  for (size_t t = 0; t < kSteps; t += 8) {
    // The count up to 4 bits has no latency to hide.
    if (m_search.midpoints().size() <= 15) {
      candidateErrors8<1>(y, m_search, m_codebook, &scales[t], &errors[t]);
    } else {
      candidateErrors8<4>(y, m_search, m_codebook, &scales[t], &errors[t]);
    }
  }
#else
  for (size_t t = 0; t < kSteps; ++t) {
    codesFor(y, scales[t], std::span(trial).first(n));
    errors[t] = codedError(y, scales[t], m_codebook, std::span(trial).first(n));
  }
#endif
  const size_t chosen = firstLeastError(errors);
  float best = scales[chosen];
  const float bestError = errors[chosen];
  codesFor(y, best, codes.first(n));
  float num = 0.0f, den = 0.0f;
  for (uint32_t i = 0; i < n; ++i) {
    const float c = m_codebook[codes[i]];
    num += y[i] * c;
    den += c * c;
  }
  if (den > 0.0f) {
    const float s = roundToFp16(num / den);
    codesFor(y, s, std::span(trial).first(n));
    if (codedError(y, s, m_codebook, std::span(trial).first(n)) < bestError) {
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
