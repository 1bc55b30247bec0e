#pragma once
// The small sliding-window shapes the tests share. Each test sets what it
// exercises beside them (experts, per-layer inputs, the context, ...).

#include <cstdint>

#include "model/synthetic_model.h"

namespace kvscope::test {

// Gemma 3: `layers` layers of width 128, 4 query heads over 2 KV heads of 64,
// a window of `window` rows on the layers windowLayersOfPeriod(layers,
// period) marks (period 2: layer 0 a window layer, layer 1 global, ...).
inline model::SyntheticModelSpec smallGemma3Spec(uint32_t layers, uint32_t window, uint32_t period,
                                                 uint32_t seed) {
  model::SyntheticModelSpec spec;
  spec.architecture = "gemma3";
  spec.nLayer = layers;
  spec.nEmbd = 128;
  spec.nFf = 256;
  spec.nHead = 4;
  spec.nHeadKv = 2;
  spec.headDim = 64;
  spec.slidingWindow = window;
  spec.windowPeriod = period;
  spec.seed = seed;
  return spec;
}

// Gemma 4: 4 layers of width 128 and 4 query heads; window layers 0 and 2 of
// 2 KV heads of 32 values (their own RoPE over all 32), global layers 1 and 3
// of one KV head of 64; layers 2 and 3 KV-shared (reading 0 and 1).
inline model::SyntheticModelSpec smallGemma4Spec(uint32_t window, uint32_t seed) {
  model::SyntheticModelSpec spec;
  spec.architecture = "gemma4";
  spec.nLayer = 4;
  spec.nEmbd = 128;
  spec.nFf = 256;
  spec.nHead = 4;
  spec.nHeadKv = 2;
  spec.headDim = 64;
  spec.headDimWindow = spec.ropeDimsWindow = 32;
  spec.layerHeadsKv = {2, 1, 2, 1};
  spec.nKvShared = 2;
  spec.slidingWindow = window;
  spec.windowPeriod = 2;
  spec.seed = seed;
  return spec;
}

}  // namespace kvscope::test
