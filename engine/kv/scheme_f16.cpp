#include "kv/scheme_f16.h"

#include <cassert>
#include <cstring>

#include "core/float_convert.h"

namespace kvscope::kv {

void F16Scheme::encode(std::span<const float> row, std::span<uint8_t> out) const {
  assert(out.size() >= row.size() * 2);
  for (size_t i = 0; i < row.size(); ++i) {
    const uint16_t h = floatToFp16(row[i]);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
}

void F16Scheme::decode(std::span<const uint8_t> in, std::span<float> row) const {
  assert(in.size() >= row.size() * 2);
  for (size_t i = 0; i < row.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, in.data() + 2 * i, 2);
    row[i] = fp16ToFloat(h);
  }
}

}  // namespace kvscope::kv
