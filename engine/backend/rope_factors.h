#pragma once
// Per-frequency RoPE divisors (theta_i is divided by factor_i): read from a
// GGUF `rope_freqs.weight` tensor, or computed from a Hugging Face config's
// llama3 scaling parameters. Empty when the model uses no such scaling.

#include <vector>

#include "core/error.h"
#include "model/model_config.h"
#include "model/weight_source.h"

namespace kvscope::backend {

Expected<std::vector<float>> ropeFrequencyFactors(const model::ModelConfig& config,
                                                  const model::TensorView* ropeFreqs);

}  // namespace kvscope::backend
