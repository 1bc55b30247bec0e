#include "kv/scheme_q4_0.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstring>
#include <vector>

#include "kv/code_packing.h"

namespace kvscope::kv {

namespace {
RowLayout q4Layout(uint32_t dim) {
  const uint32_t scales = 2 * blockCount(dim, kKvBlock), codes = packedCodeBytes(4, dim);
  return {codes, scales, padTo4(scales + codes)};
}
}  // namespace

Q4_0Scheme::Q4_0Scheme(const SchemeParams& params) : KvScheme(params, q4Layout(params.dim)) {}

void Q4_0Scheme::encode(std::span<const float> row, std::span<uint8_t> out) const {
  assert(row.size() == dim() && out.size() >= rowBytes());
  const uint32_t nb = blockCount(dim(), kKvBlock);
  std::array<uint8_t, kMaxKvDim> codeBuffer;  // rows are encoded per token: no allocation
  const std::span<uint8_t> codes = std::span(codeBuffer).first(dim());
  for (uint32_t b = 0; b < nb; ++b) {
    const uint32_t begin = b * kKvBlock, end = std::min(dim(), begin + kKvBlock);
    float m = 0.0f;
    for (uint32_t i = begin; i < end; ++i)
      if (std::fabs(row[i]) > std::fabs(m)) m = row[i];
    const float s = m / -8.0f;
    storeHalf(out, b, s);
    for (uint32_t i = begin; i < end; ++i) {
      // (int) truncates toward zero; x / s + 8.5 >= 0 because |x / s| <= 8.
      codes[i] = s != 0.0f ? static_cast<uint8_t>(std::min(15, static_cast<int>(row[i] / s + 8.5f)))
                           : uint8_t{8};
    }
  }
  const uint32_t at = rowLayout().scaleBytes;
  packCodes(codes, 4, out.subspan(at));
  std::memset(out.data() + at + rowLayout().codeBytes, 0, rowLayout().paddingBytes);
}

void Q4_0Scheme::decode(std::span<const uint8_t> in, std::span<float> row) const {
  assert(row.size() == dim() && in.size() >= rowBytes());
  const auto codes = in.subspan(rowLayout().scaleBytes);
  for (uint32_t i = 0; i < dim(); ++i) {
    const int q = unpackCode(codes, 4, dim(), i);
    row[i] = static_cast<float>(q - 8) * loadHalf(in, i / kKvBlock);
  }
}

}  // namespace kvscope::kv
