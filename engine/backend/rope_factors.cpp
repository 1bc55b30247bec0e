#include "backend/rope_factors.h"

#include <cmath>
#include <numbers>

#include "backend/cpu_matmul.h"

namespace kvscope::backend {

Expected<std::vector<float>> ropeFrequencyFactors(const model::ModelConfig& c,
                                                  const model::TensorView* ropeFreqs) {
  if (c.rope.scaling != model::RopeScaling::kFreqFactors) return std::vector<float>{};
  const uint32_t half = c.rope.dims / 2;
  std::vector<float> factors(half);
  if (ropeFreqs) {
    cpu::dequantizeRow(*ropeFreqs, 0, factors);
    return factors;
  }
  if (c.rope.originalContext == 0 || !(c.rope.highFreqFactor > c.rope.lowFreqFactor)) {
    return makeError(ErrorCode::kBadFile,
                     "llama3 RoPE scaling needs original_max_position_embeddings and "
                     "high_freq_factor > low_freq_factor");
  }
  // Meta's llama3 rule: long wavelengths are slowed by `factor`, short ones kept,
  // and the band between is interpolated smoothly.
  const double lowWavelen = c.rope.originalContext / c.rope.lowFreqFactor;
  const double highWavelen = c.rope.originalContext / c.rope.highFreqFactor;
  for (uint32_t i = 0; i < half; ++i) {
    const double freq = std::pow(static_cast<double>(c.rope.theta), -2.0 * i / c.rope.dims);
    const double wavelen = 2.0 * std::numbers::pi / freq;
    double divisor = 1.0;
    if (wavelen > lowWavelen) {
      divisor = c.rope.factor;
    } else if (wavelen >= highWavelen) {
      const double smooth = (c.rope.originalContext / wavelen - c.rope.lowFreqFactor) /
                            (c.rope.highFreqFactor - c.rope.lowFreqFactor);
      divisor = 1.0 / ((1.0 - smooth) / c.rope.factor + smooth);
    }
    factors[i] = static_cast<float>(divisor);
  }
  return factors;
}

}  // namespace kvscope::backend
