#pragma once
// A read-only view of a model's tensors by their GGUF names, whatever file
// format they came from. Shapes use GGUF order: shape[0] is the row length
// (fastest-varying), so a projection W[out, in] has shape {in, out}.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/tensor_type.h"

namespace kvscope::model {

struct TensorView {
  std::string name;
  gguf::TensorType type = gguf::TensorType::kF32;
  std::vector<uint64_t> shape;
  std::span<const uint8_t> data;  // valid while the owning file is open

  uint64_t elements() const {
    uint64_t n = 1;
    for (uint64_t d : shape) n *= d;
    return n;
  }
};

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual const TensorView* find(std::string_view name) const = 0;
  virtual std::span<const TensorView> all() const = 0;
};

}  // namespace kvscope::model
