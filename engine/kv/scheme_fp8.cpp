#include "kv/scheme_fp8.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "core/float_convert.h"
#include "kv/code_packing.h"

namespace kvscope::kv {

namespace {
RowLayout fp8Layout(uint32_t dim) {
  const uint32_t scales = blockCount(dim, kKvBlock);
  return {dim, scales, padTo4(scales + dim)};
}
}  // namespace

Fp8Scheme::Fp8Scheme(const SchemeParams& params) : KvScheme(params, fp8Layout(params.dim)) {}

void Fp8Scheme::encode(std::span<const float> row, std::span<uint8_t> out) const {
  assert(row.size() == dim() && out.size() >= rowBytes());
  const uint32_t nb = blockCount(dim(), kKvBlock), codes = rowLayout().scaleBytes;
  for (uint32_t b = 0; b < nb; ++b) {
    const uint32_t begin = b * kKvBlock, end = std::min(dim(), begin + kKvBlock);
    float amax = 0.0f;
    for (uint32_t i = begin; i < end; ++i) amax = std::max(amax, std::fabs(row[i]));
    // 2^e >= amax / 448 <=> amax / 2^e <= 448; ue8m0 byte 127 is 2^0.
    const uint8_t e = amax > 0.0f ? floatToUe8m0Ceil(amax / kE4m3Max) : uint8_t{127};
    out[b] = e;
    const int exponent = int{e} - 127;
    for (uint32_t i = begin; i < end; ++i)
      out[codes + i] = floatToE4m3(std::ldexp(row[i], -exponent));
  }
  std::memset(out.data() + codes + dim(), 0, rowLayout().paddingBytes);
}

void Fp8Scheme::decode(std::span<const uint8_t> in, std::span<float> row) const {
  assert(row.size() == dim() && in.size() >= rowBytes());
  const uint32_t codes = rowLayout().scaleBytes;
  for (uint32_t i = 0; i < dim(); ++i)
    row[i] = e4m3ToFloat(in[codes + i]) * ue8m0ToFloat(in[i / kKvBlock]);
}

}  // namespace kvscope::kv
