#pragma once
// The choice both block-scale searches make (turbo*b in scheme_turbo.cpp,
// q8_0r in scheme_q8_0.cpp, and kv_encode.comp's blockScale on the device):
// among candidate scales in order, the first of least error. The first
// candidate always lands, so a scale is set even when every error is NaN or
// infinite (an overflowing scale).

#include <cstddef>
#include <span>

namespace kvscope::kv {

inline size_t firstLeastError(std::span<const float> errors) {
  size_t best = 0;
  for (size_t t = 1; t < errors.size(); ++t)
    if (errors[t] < errors[best]) best = t;
  return best;
}

}  // namespace kvscope::kv
