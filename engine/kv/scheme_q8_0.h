#pragma once
// q8_0: llama.cpp's 8-bit symmetric blocks, for any dim. Row: [nb x fp16 s]
// [dim x int8][zero padding to 4]; decode: q * fp16(s). Two encoders write it:
//
//   Q8Scale::kAbsMax (the q8_0 scheme: llama.cpp's math) per block of 32
//   values (the last may be partial): s = amax / 127 in float, codes
//   q = roundf(x / s) (half away from zero; 0 when s == 0), s stored as fp16.
//
//   Q8Scale::kSearched (q8_0r's base, on rotated rows): the scale of least
//   error. For each step f of kQ8BlockSteps the candidate s = fp16(amax f /
//   127), codes q = clamp(roundf(x / s), -127, 127), error sum (x - s q)^2 in
//   order; keep the first candidate of least error; then one least-squares
//   step s' = fp16(sum x q / sum q^2) with the kept codes, re-coded, kept when
//   its error is strictly lower. A scale a little above amax / 127 lands more
//   of the block's values near a grid point than the one that fits the
//   largest exactly: on Gaussian blocks (what rotated rows look like) the
//   mean squared error is 0.79x absmax's, for the same bytes.

#include "kv/kv_scheme.h"

namespace kvscope::kv {

enum class Q8Scale { kAbsMax, kSearched };

// The searched rule's scale steps, multiples of amax / 127 (the first: absmax).
inline constexpr float kQ8BlockSteps[16] = {1.000f, 1.006f, 1.012f, 1.018f, 1.024f, 1.030f,
                                            1.036f, 1.042f, 1.048f, 1.054f, 1.060f, 1.066f,
                                            1.072f, 1.078f, 1.084f, 1.090f};

class Q8_0Scheme final : public KvScheme {
 public:
  explicit Q8_0Scheme(const SchemeParams& params, Q8Scale scale = Q8Scale::kAbsMax);
  std::string_view name() const override { return "q8_0"; }
  RowCode rowCode() const override { return RowCode::kQ8_0; }
  void encode(std::span<const float> row, std::span<uint8_t> out) const override;
  void decode(std::span<const uint8_t> in, std::span<float> row) const override;

 private:
  Q8Scale m_scale;
};

}  // namespace kvscope::kv
