#include "kv/scheme_affine4.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstring>
#include <vector>

#include "kv/code_packing.h"

namespace kvscope::kv {

namespace {
RowLayout affineLayout(uint32_t dim) {
  const uint32_t scales = 4 * blockCount(dim, kKvBlock), codes = packedCodeBytes(4, dim);
  return {codes, scales, padTo4(scales + codes)};
}
}  // namespace

Affine4Scheme::Affine4Scheme(const SchemeParams& params)
    : KvScheme(params, affineLayout(params.dim)) {}

void Affine4Scheme::encode(std::span<const float> row, std::span<uint8_t> out) const {
  assert(row.size() == dim() && out.size() >= rowBytes());
  const uint32_t nb = blockCount(dim(), kKvBlock);
  std::array<uint8_t, kMaxKvDim> codeBuffer;  // rows are encoded per token: no allocation
  const std::span<uint8_t> codes = std::span(codeBuffer).first(dim());
  for (uint32_t b = 0; b < nb; ++b) {
    const uint32_t begin = b * kKvBlock, end = std::min(dim(), begin + kKvBlock);
    const auto [lo, hi] = std::minmax_element(row.begin() + begin, row.begin() + end);
    const float min = storeHalf(out, b, *lo);
    const float s = storeHalf(out, nb + b, (*hi - *lo) / 15.0f);
    for (uint32_t i = begin; i < end; ++i) {
      const float q = s != 0.0f ? std::round((row[i] - min) / s) : 0.0f;
      codes[i] = static_cast<uint8_t>(std::clamp(q, 0.0f, 15.0f));
    }
  }
  const uint32_t at = rowLayout().scaleBytes;
  packCodes(codes, 4, out.subspan(at));
  std::memset(out.data() + at + rowLayout().codeBytes, 0, rowLayout().paddingBytes);
}

void Affine4Scheme::decode(std::span<const uint8_t> in, std::span<float> row) const {
  assert(row.size() == dim() && in.size() >= rowBytes());
  const uint32_t nb = blockCount(dim(), kKvBlock);
  const auto codes = in.subspan(rowLayout().scaleBytes);
  for (uint32_t i = 0; i < dim(); ++i) {
    const uint32_t b = i / kKvBlock;
    row[i] =
        loadHalf(in, b) + static_cast<float>(unpackCode(codes, 4, dim(), i)) * loadHalf(in, nb + b);
  }
}

}  // namespace kvscope::kv
