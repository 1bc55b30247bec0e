#pragma once
// The TurboQuant family (Zandieh et al. 2025, "TurboQuant: online vector
// quantization with near-optimal distortion rate"): rows rotated by R, then
// coded with a b-bit Lloyd-Max codebook and fp16 scales. One class,
// parameterized by the code width b (2..4; 2..6 block-scaled) and how the
// scales are kept:
//
//   turbo4/3/2    (TurboScale::kRow)   one gamma per row, norm-matched;
//   turbo4g/3g/2g (TurboScale::kGroup) one gamma per kTurboGroup rotated
//                                      coordinates, norm-matched;
//   turbo6b/5b/4b/3b/2b (TurboScale::kBlock) one scale per kKvBlock
//                                      rotated coordinates, chosen for least
//                                      error.
//
// Row and group scales (R = makeRotation(d, seed), c = the b-bit Lloyd-Max
// codebook of a unit vector's coordinate in R^d):
//   y = R x; u = y / ||x|| (u = 0 when ||x|| = 0);
//   code_i = the number of midpoints (c_j + c_{j+1}) / 2 strictly below u_i
//            (so the nearest centroid, ties to the lower one);
//   row:   gamma = ||x|| / ||c_hat|| (0 when ||x|| = 0);
//   group: gamma_g = ||y_g|| / ||c_hat_g|| (0 when c_hat_g = 0).
// The row-scaled decoded row has the original norm up to the fp16 rounding
// of gamma; the grouped one each group's norm (robust to outlier channels).
//
// Block scales (c = the b-bit Lloyd-Max codebook of N(0, 1)): per block y_b
// of 32 rotated coordinates (the last may be partial), in float32 and in
// this order, so that the device encoder repeats it:
//   r = sqrt(sum y_i^2 / n); for each step f of kTurboBlockSteps, the
//   candidate s = fp16(r * f), codes by the midpoint rule applied to y_i / s,
//   error sum (y_i - s c[code_i])^2; keep the first candidate of least error;
//   then one least-squares step s' = fp16(sum y_i c_i / sum c_i^2) with the
//   kept codes, re-coded, kept when its error is strictly lower.
// Choosing the scale for least error rather than to match a norm, and per
// 32 values, is what makes turbo4b beat q4_0 at q4_0's 4.5 bits per value at
// head_dim 64 while turbo4 does not (docs/RESULTS.md).
//
// Decode: y_hat = fp16(scale) * c[code] (decodeRotated), x_hat = R^T y_hat.
// Row: [scales: 1, ceil(d/16) or ceil(d/32) fp16][packed codes][zero padding to 4].

#include <string>
#include <vector>

#include "kv/kv_scheme.h"
#include "kv/midpoint_search.h"
#include "kv/rotation.h"

namespace kvscope::kv {

enum class TurboScale { kRow, kGroup, kBlock };

// The multiples of a block's RMS that turbo*b tries as its scale (a 16-step
// grid over the range where the least-error scale of Gaussian blocks falls).
inline constexpr float kTurboBlockSteps[16] = {0.70f, 0.74f, 0.78f, 0.82f, 0.86f, 0.90f,
                                               0.94f, 0.98f, 1.02f, 1.06f, 1.10f, 1.14f,
                                               1.18f, 1.22f, 1.26f, 1.30f};

class TurboScheme final : public KvScheme {
 public:
  // bits in 2..4, 2..6 for kBlock; params.dim >= kMinTurboDim (makeScheme
  // checks).
  TurboScheme(const SchemeParams& params, uint32_t bits, TurboScale scale);

  std::string_view name() const override { return m_name; }
  RowCode rowCode() const override { return RowCode::kTurbo; }
  void encode(std::span<const float> row, std::span<uint8_t> out) const override;
  void decode(std::span<const uint8_t> in, std::span<float> row) const override;
  bool rotated() const override { return true; }
  std::span<const float> rotation() const override { return m_rotation.matrix(); }
  std::span<const float> hadamardSigns() const override { return m_rotation.signs(); }
  void decodeRotated(std::span<const uint8_t> in, std::span<float> row) const override;
  std::span<const float> codebook() const override { return m_codebook; }

  uint32_t bits() const { return m_bits; }
  TurboScale scale() const { return m_scale; }
  // Rotated values per scale: dim(), kTurboGroup or kKvBlock.
  uint32_t scaleWidth() const;

 private:
  // The codes of y_i / s by the midpoint rule (s = 0 gives the middle code).
  void codesFor(std::span<const float> y, float s, std::span<uint8_t> codes) const;
  // Chooses one block's scale (the kBlock rule above); writes its codes.
  float blockScale(std::span<const float> y, std::span<uint8_t> codes) const;

  std::string m_name;
  uint32_t m_bits;
  TurboScale m_scale;
  StreamRotation m_rotation;
  std::span<const float> m_codebook;  // process-wide cache
  MidpointSearch m_search;            // over the 2^b - 1 decision boundaries
};

inline constexpr uint32_t kMinTurboDim = 4;

}  // namespace kvscope::kv
