#pragma once
// The block formats in rotated space: q8_0r, q4_0r, fp8r and affine4r store
// the row y = R x in the bytes of q8_0, q4_0, fp8 and affine4 (the same row
// layout, kv_scheme.h), R = makeRotation(dim, seed), the turbo* schemes'
// seeded orthogonal rotation. Rotating first spreads an outlier channel's
// energy over the row, so a block's scale is set by the row's spread rather
// than by its largest value (what llama.cpp does for its quantized KV types
// since ggml-org/llama.cpp#21038, with a plain Hadamard matrix).
//
// encode: y = R x (StreamRotation: the fast transform for power-of-two dims,
// else the dense R), then the base format's encode of y. decodeRotated: the base
// format's decode (y_hat); decode: x_hat = R^T y_hat. Attention reads the
// rotated form as for turbo* (kv_scheme.h).

#include <memory>
#include <string>
#include <vector>

#include "kv/kv_scheme.h"
#include "kv/rotation.h"

namespace kvscope::kv {

class RotatedScheme final : public KvScheme {
 public:
  // base: the unrotated format, built for params.dim.
  RotatedScheme(const SchemeParams& params, std::shared_ptr<const KvScheme> base);

  std::string_view name() const override { return m_name; }
  RowCode rowCode() const override { return m_base->rowCode(); }
  void encode(std::span<const float> row, std::span<uint8_t> out) const override;
  void decode(std::span<const uint8_t> in, std::span<float> row) const override;
  bool rotated() const override { return true; }
  std::span<const float> rotation() const override { return m_rotation.matrix(); }
  std::span<const float> hadamardSigns() const override { return m_rotation.signs(); }
  void decodeRotated(std::span<const uint8_t> in, std::span<float> row) const override;

  const KvScheme& base() const { return *m_base; }

 private:
  std::string m_name;
  std::shared_ptr<const KvScheme> m_base;
  StreamRotation m_rotation;
};

}  // namespace kvscope::kv
