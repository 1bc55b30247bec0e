#pragma once
// The TurboQuant family (Zandieh et al. 2025, "TurboQuant: online vector
// quantization with near-optimal distortion rate"): turbo4, turbo3, turbo2
// and the group-scaled turbo4g, turbo3g, turbo2g. One class, parameterized
// by the code width b and the scale grouping.
//
// Encode a row x (d values; R = makeRotation(d, seed), c = the b-bit
// Lloyd-Max codebook of a unit vector's coordinate in R^d):
//   y = R x; u = y / ||x|| (u = 0 when ||x|| = 0);
//   code_i = the number of midpoints (c_j + c_{j+1}) / 2 strictly below u_i
//            (so the nearest centroid, ties to the lower one);
//   c_hat_i = c[code_i];
//   plain:   gamma = ||x|| / ||c_hat|| (0 when ||x|| = 0), one fp16;
//   grouped: per kTurboGroup consecutive rotated coordinates (last group may
//            be partial) gamma_g = ||y_g|| / ||c_hat_g|| (0 when c_hat_g = 0).
// Decode: y_hat = fp16(gamma) * c_hat (decodeRotated), x_hat = R^T y_hat.
// The plain decoded row has the original norm up to the fp16 rounding of
// gamma; the grouped one each group's norm (robust to outlier channels).
// Row: [1 or ceil(d/16) x fp16 gamma][packed codes][zero padding to 4].

#include <string>
#include <vector>

#include "kv/kv_scheme.h"

namespace kvscope::kv {

class TurboScheme final : public KvScheme {
 public:
  // bits in 2..4; params.dim >= kMinTurboDim (makeScheme checks).
  TurboScheme(const SchemeParams& params, uint32_t bits, bool grouped);

  std::string_view name() const override { return m_name; }
  void encode(std::span<const float> row, std::span<uint8_t> out) const override;
  void decode(std::span<const uint8_t> in, std::span<float> row) const override;
  bool rotated() const override { return true; }
  std::span<const float> rotation() const override { return m_rotation; }
  std::span<const float> hadamardSigns() const override { return m_signs; }
  void decodeRotated(std::span<const uint8_t> in, std::span<float> row) const override;
  std::span<const float> codebook() const override { return m_codebook; }

  uint32_t bits() const { return m_bits; }
  bool grouped() const { return m_grouped; }

 private:
  std::string m_name;
  uint32_t m_bits;
  bool m_grouped;
  std::vector<float> m_rotation;      // d x d, row-major
  std::vector<float> m_signs;         // d: R's signs when it is a Hadamard rotation
  std::span<const float> m_codebook;  // process-wide cache
  std::vector<float> m_midpoints;     // 2^b - 1 decision boundaries
};

inline constexpr uint32_t kMinTurboDim = 4;

}  // namespace kvscope::kv
