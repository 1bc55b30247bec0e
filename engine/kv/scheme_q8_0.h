#pragma once
// q8_0: llama.cpp's 8-bit symmetric blocks, for any dim. Per block of 32
// values (the last may be partial): s = amax / 127 in float, codes
// q = roundf(x / s) (half away from zero; 0 when s == 0), s stored as fp16.
// Decode: q * fp16(s). Row: [nb x fp16 s][dim x int8][zero padding to 4].

#include "kv/kv_scheme.h"

namespace kvscope::kv {

class Q8_0Scheme final : public KvScheme {
 public:
  explicit Q8_0Scheme(const SchemeParams& params);
  std::string_view name() const override { return "q8_0"; }
  RowCode rowCode() const override { return RowCode::kQ8_0; }
  void encode(std::span<const float> row, std::span<uint8_t> out) const override;
  void decode(std::span<const uint8_t> in, std::span<float> row) const override;
};

}  // namespace kvscope::kv
