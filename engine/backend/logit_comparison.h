#pragma once
// How far one backend's logits are from a reference backend's, step by step,
// measured relative to the spread (max - min) of the reference row: a scale
// that means the same for every model and weight type. Used by the parity
// tests and by the Vulkan device vetting (runtime/device_vetting.h).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>

namespace kvscope::backend {

inline int32_t argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

struct LogitComparison {
  double worstRel = 0.0;  // max over steps of max|diff| / spread
  double lastGap =
      0.0;  // the last step: reference top logit - reference logit of got's top, / spread
  double meanRel = 0.0;   // mean |diff| / spread over all logits so far
  // Steps whose top tokens agree, or tie: the reference's logits of the two
  // picks are within tieRel of the spread. 0 (the default) asks for the same
  // token or an exact tie; a caller whose models have near ties (random weights) that float
  // rounding of a correct backend can flip sets it. (A bound in terms of the
  // step's own difference would excuse every flip: a flip needs differences
  // of at least half the gap.)
  double tieRel = 0.0;
  uint32_t steps = 0, argmaxAgree = 0;

  // Adds one step: `ref` from the reference backend, `got` from the tested one.
  void add(std::span<const float> ref, std::span<const float> got) {
    const auto [lo, hi] = std::minmax_element(ref.begin(), ref.end());
    const double spread = std::max(1e-6, static_cast<double>(*hi - *lo));
    for (size_t i = 0; i < ref.size(); ++i) {
      double d = std::fabs(ref[i] - got[i]) / spread;
      if (!std::isfinite(d)) d = std::numeric_limits<double>::infinity();  // NaN fails too
      worstRel = std::max(worstRel, d);
      m_sum += d;
    }
    m_count += ref.size();
    meanRel = m_sum / static_cast<double>(m_count);
    const int32_t a = argmax(ref), b = argmax(got);
    lastGap = (static_cast<double>(ref[a]) - ref[b]) / spread;
    argmaxAgree += a == b || lastGap <= tieRel ? 1 : 0;
    ++steps;
  }

 private:
  double m_sum = 0.0;
  size_t m_count = 0;
};

}  // namespace kvscope::backend
