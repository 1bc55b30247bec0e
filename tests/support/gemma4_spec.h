#pragma once
// The small Gemma 4 shape the runtime, indexer, codec-error and vetting tests
// share: 4 layers of width 128 and 4 query heads; window layers 0 and 2 of 2
// KV heads of 32 values (their own RoPE over all 32), global layers 1 and 3
// of one KV head of 64; layers 2 and 3 KV-shared (reading 0 and 1). Each test
// sets what it exercises beside it (experts, per-layer inputs, ...).

#include <cstdint>

#include "model/synthetic_model.h"

namespace kvscope::test {

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
