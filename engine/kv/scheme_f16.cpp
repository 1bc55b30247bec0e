#include "kv/scheme_f16.h"

#include <cassert>
#include <cstring>

#include "kv/code_packing.h"

namespace kvscope::kv {

void F16Scheme::encode(std::span<const float> row, std::span<uint8_t> out) const {
  assert(row.size() == dim() && out.size() >= rowBytes());
  for (uint32_t i = 0; i < dim(); ++i) storeHalf(out, i, row[i]);
  std::memset(out.data() + 2 * dim(), 0, rowLayout().paddingBytes);
}

void F16Scheme::decode(std::span<const uint8_t> in, std::span<float> row) const {
  assert(row.size() == dim() && in.size() >= rowBytes());
  for (uint32_t i = 0; i < dim(); ++i) row[i] = loadHalf(in, i);
}

}  // namespace kvscope::kv
