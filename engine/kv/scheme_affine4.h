#pragma once
// affine4: MLX-style 4-bit affine groups of 32 (the last may be partial), a
// cheap V scheme. Per group: min and s = (max - min) / 15 stored as fp16;
// codes q = clamp(roundf((x - min16) / s16), 0, 15) against the stored
// (fp16-rounded) min16 and s16, all 0 when s16 == 0. Decode: min16 + q * s16.
// Row: [nb x fp16 min][nb x fp16 s][ceil(dim/2) nibbles][zero padding to 4].

#include "kv/kv_scheme.h"

namespace kvscope::kv {

class Affine4Scheme final : public KvScheme {
 public:
  explicit Affine4Scheme(const SchemeParams& params);
  std::string_view name() const override { return "affine4"; }
  RowCode rowCode() const override { return RowCode::kAffine4; }
  void encode(std::span<const float> row, std::span<uint8_t> out) const override;
  void decode(std::span<const uint8_t> in, std::span<float> row) const override;
};

}  // namespace kvscope::kv
