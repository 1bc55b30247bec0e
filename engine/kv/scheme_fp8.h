#pragma once
// fp8: OCP E4M3 values with one UE8M0 (power-of-two) scale per block of 32,
// as in the packed FP8 KV rows of DeepSeek-V4 engines. Per block: e = the
// smallest integer with amax / 2^e <= 448 (e = 0 for an all-zero block,
// clamped to the UE8M0 range), byte e + 127 stored; codes e4m3(x / 2^e),
// round to nearest even, saturating. Decode: e4m3 value * 2^e.
// Row: [nb x ue8m0][dim x e4m3][zero padding to 4].

#include "kv/kv_scheme.h"

namespace kvscope::kv {

class Fp8Scheme final : public KvScheme {
 public:
  explicit Fp8Scheme(const SchemeParams& params);
  std::string_view name() const override { return "fp8"; }
  RowCode rowCode() const override { return RowCode::kFp8; }
  void encode(std::span<const float> row, std::span<uint8_t> out) const override;
  void decode(std::span<const uint8_t> in, std::span<float> row) const override;
};

}  // namespace kvscope::kv
