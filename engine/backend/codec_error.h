#pragma once
// CodecErrorMeter: the measured reconstruction error of a KV cache, per layer
// and part (K, V). Each row written adds ||x - x_hat||^2 and ||x||^2, where
// x is the row before encoding and x_hat = decode(encode(x)) through the
// part's scheme; error() is the relative RMS sqrt(sum err / sum norm) over
// every row added since the last reset(). Rows later trimmed still count: the
// error describes the codec on this conversation's data, not a cache state.

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_cache.h"
#include "kv/kv_scheme.h"

namespace kvscope::backend {

class CodecErrorMeter {
 public:
  explicit CodecErrorMeter(uint32_t nLayer = 0) : m_sums(size_t{nLayer} * 2) {}

  // Adds row `x` and its reconstruction `decoded` (same length).
  void add(uint32_t layer, kv::KvPart part, std::span<const float> x,
           std::span<const float> decoded);
  // Round-trips `x` through `scheme` (encode, decode) and adds it.
  void measure(uint32_t layer, kv::KvPart part, const kv::KvScheme& scheme,
               std::span<const float> x);
  // Takes (layer, part)'s sums from `other` (a stream copied as stored keeps
  // what its source measured, weighted as its source weighted it).
  void copyStream(const CodecErrorMeter& other, uint32_t layer, kv::KvPart part);
  // Relative RMS error of the rows added for (layer, part); negative when none.
  double error(uint32_t layer, kv::KvPart part) const;
  void reset();

 private:
  struct Sums {
    double error = 0.0;  // sum of ||x - x_hat||^2
    double norm = 0.0;   // sum of ||x||^2
    uint64_t rows = 0;
  };
  static size_t index(uint32_t layer, kv::KvPart part) {
    return size_t{layer} * 2 + (part == kv::KvPart::kKey ? 0 : 1);
  }

  std::vector<Sums> m_sums;  // [nLayer][K, V]
  std::vector<uint8_t> m_code;
  std::vector<float> m_decoded;
};

}  // namespace kvscope::backend
