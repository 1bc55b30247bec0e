#include "model/model_fingerprint.h"

#include <algorithm>

#include "core/checksum.h"

namespace kvscope::model {

uint64_t modelFingerprint(const std::string& architecture, const WeightSource& weights) {
  constexpr size_t kSample = 4096;
  Fnv1a64 h;
  h.add(architecture);
  for (const TensorView& t : weights.all()) {
    h.add(t.name);
    h.add(static_cast<uint64_t>(t.type));
    h.add(uint64_t{t.shape.size()});
    for (uint64_t d : t.shape) h.add(d);
    const size_t n = std::min(kSample, t.data.size());
    h.add(t.data.first(n));
    if (t.data.size() > n) h.add(t.data.last(std::min(kSample, t.data.size() - n)));
  }
  return h.value();
}

}  // namespace kvscope::model
