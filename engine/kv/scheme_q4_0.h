#pragma once
// q4_0: llama.cpp's 4-bit symmetric blocks, for any dim. Per block of 32
// values (the last may be partial): m = the value of largest magnitude (sign
// kept), s = m / -8 in float, codes q = min(15, (int)(x / s + 8.5)) (8 when
// s == 0), s stored as fp16. Decode: (q - 8) * fp16(s).
// Row: [nb x fp16 s][ceil(dim/2) nibbles, code 2i low][zero padding to 4].
// Unlike a ggml q4_0 block, the nibbles follow the value order.

#include "kv/kv_scheme.h"

namespace kvscope::kv {

class Q4_0Scheme final : public KvScheme {
 public:
  explicit Q4_0Scheme(const SchemeParams& params);
  std::string_view name() const override { return "q4_0"; }
  RowCode rowCode() const override { return RowCode::kQ4_0; }
  void encode(std::span<const float> row, std::span<uint8_t> out) const override;
  void decode(std::span<const uint8_t> in, std::span<float> row) const override;
};

}  // namespace kvscope::kv
