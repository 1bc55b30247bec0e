#include "kv/midpoint_search.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace kvscope::kv {

MidpointSearch::MidpointSearch(std::vector<float> midpoints) : m_midpoints(std::move(midpoints)) {
  assert(m_midpoints.size() <= 63);
  if (m_midpoints.size() <= 15) return;
  // Bins over [-r, r], r past the outer midpoints by more than two bins.
  constexpr int kBins = 512;
  float gap = INFINITY;
  for (size_t j = 1; j < m_midpoints.size(); ++j)
    gap = std::min(gap, m_midpoints[j] - m_midpoints[j - 1]);
  const float r = 1.25f * std::max(-m_midpoints.front(), m_midpoints.back());
  const float width = 2.0f * r / kBins;
  assert(2.0f * width < gap && r - std::max(-m_midpoints.front(), m_midpoints.back()) > 2 * width);
  m_binOrigin = r;
  m_binsPerUnit = 1.0f / width;
  for (int b = 0; b < kBins; ++b) {
    const float edge = -r + static_cast<float>(b) * width;
    m_binBelow.push_back(static_cast<int32_t>(
        std::lower_bound(m_midpoints.begin(), m_midpoints.end(), edge) - m_midpoints.begin()));
  }
}

}  // namespace kvscope::kv
