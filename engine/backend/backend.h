#pragma once
// Backend: runs a llama-family model on one device. It owns the weights (in
// their GGUF types) and the KV cache on that device. forward() takes a batch
// of consecutive tokens that continue the cached sequence, appends their K/V
// rows, and returns logits. CpuBackend (float32 reference) and VulkanBackend
// implement it and must agree within the tolerances their tests state.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "model/model_config.h"

namespace kvscope::backend {

struct KernelTiming {
  std::string kernelClass;  // "matvec", "attention", "norm", …
  uint32_t dispatches = 0;
  double ms = 0.0;
};

struct Batch {
  std::span<const int32_t> tokens;  // consecutive tokens, n >= 1
  bool allLogits = false;           // logits for every token, else only for the last
};

// Logits of the batch: [rows, nVocab] row-major.
struct Logits {
  std::vector<float> values;
  uint32_t rows = 0;
  uint32_t vocab = 0;
  std::span<const float> row(uint32_t r) const {
    return {values.data() + size_t{r} * vocab, vocab};
  }
  std::span<const float> last() const { return row(rows - 1); }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual const model::ModelConfig& config() const = 0;

  // Tokens are placed at positions [cachedTokens(), cachedTokens() + n).
  // Fails without side effects when the batch would exceed contextLimit().
  virtual Status forward(const Batch& batch, Logits& out) = 0;

  virtual uint32_t cachedTokens() const = 0;
  virtual uint32_t contextLimit() const = 0;
  // Keeps the first n cached tokens (n <= cachedTokens()).
  virtual Status trim(uint32_t n) = 0;
  // Device time per kernel class of the last forward(), when the backend
  // measures it (GPU timestamp queries); empty otherwise.
  virtual std::vector<KernelTiming> kernelTimings() const { return {}; }
};

}  // namespace kvscope::backend
