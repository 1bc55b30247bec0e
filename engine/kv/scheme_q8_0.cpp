#include "kv/scheme_q8_0.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "kv/code_packing.h"

namespace kvscope::kv {

namespace {
RowLayout q8Layout(uint32_t dim) {
  const uint32_t scales = 2 * blockCount(dim, kKvBlock);
  return {dim, scales, padTo4(scales + dim)};
}
}  // namespace

Q8_0Scheme::Q8_0Scheme(const SchemeParams& params) : KvScheme(params, q8Layout(params.dim)) {}

void Q8_0Scheme::encode(std::span<const float> row, std::span<uint8_t> out) const {
  assert(row.size() == dim() && out.size() >= rowBytes());
  const uint32_t nb = blockCount(dim(), kKvBlock), codes = rowLayout().scaleBytes;
  for (uint32_t b = 0; b < nb; ++b) {
    const uint32_t begin = b * kKvBlock, end = std::min(dim(), begin + kKvBlock);
    float amax = 0.0f;
    for (uint32_t i = begin; i < end; ++i) amax = std::max(amax, std::fabs(row[i]));
    const float s = amax / 127.0f;
    storeHalf(out, b, s);
    for (uint32_t i = begin; i < end; ++i) {
      const float q = s != 0.0f ? std::round(row[i] / s) : 0.0f;
      out[codes + i] = static_cast<uint8_t>(static_cast<int8_t>(q));
    }
  }
  std::memset(out.data() + codes + dim(), 0, rowLayout().paddingBytes);
}

void Q8_0Scheme::decode(std::span<const uint8_t> in, std::span<float> row) const {
  assert(row.size() == dim() && in.size() >= rowBytes());
  const uint32_t codes = rowLayout().scaleBytes;
  for (uint32_t i = 0; i < dim(); ++i) {
    row[i] = static_cast<float>(static_cast<int8_t>(in[codes + i])) * loadHalf(in, i / kKvBlock);
  }
}

}  // namespace kvscope::kv
