#pragma once
// f16: each value stored as IEEE binary16 (round to nearest even). The
// reference scheme; llama.cpp's default cache type. Rows are padded to a
// multiple of 4 bytes (odd head_dim) so GPU kernels address them in words.

#include "kv/kv_scheme.h"

namespace kvscope::kv {

class F16Scheme final : public KvScheme {
 public:
  explicit F16Scheme(const SchemeParams& params)
      : KvScheme(params, {params.dim * 2, 0, padTo4(params.dim * 2)}) {}
  std::string_view name() const override { return "f16"; }
  RowCode rowCode() const override { return RowCode::kF16; }
  void encode(std::span<const float> row, std::span<uint8_t> out) const override;
  void decode(std::span<const uint8_t> in, std::span<float> row) const override;
};

}  // namespace kvscope::kv
