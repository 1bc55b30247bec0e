#include "backend/codec_error.h"

#include <cmath>

namespace kvscope::backend {

void CodecErrorMeter::add(uint32_t layer, kv::KvPart part, std::span<const float> x,
                          std::span<const float> decoded) {
  Sums& s = m_sums[index(layer, part)];
  for (size_t i = 0; i < x.size(); ++i) {
    const double diff = double{x[i]} - double{decoded[i]};
    s.error += diff * diff;
    s.norm += double{x[i]} * double{x[i]};
  }
  ++s.rows;
}

void CodecErrorMeter::measure(uint32_t layer, kv::KvPart part, const kv::KvScheme& scheme,
                              std::span<const float> x) {
  m_code.resize(scheme.rowBytes());
  m_decoded.resize(x.size());
  scheme.encode(x, m_code);
  scheme.decode(m_code, m_decoded);
  add(layer, part, x, m_decoded);
}

double CodecErrorMeter::error(uint32_t layer, kv::KvPart part) const {
  const Sums& s = m_sums[index(layer, part)];
  if (s.rows == 0) return -1.0;
  return s.norm > 0.0 ? std::sqrt(s.error / s.norm) : 0.0;
}

void CodecErrorMeter::copyStream(const CodecErrorMeter& other, uint32_t layer, kv::KvPart part) {
  const size_t i = index(layer, part);
  if (i < m_sums.size() && i < other.m_sums.size()) m_sums[i] = other.m_sums[i];
}

void CodecErrorMeter::reset() {
  for (Sums& s : m_sums) s = {};
}

}  // namespace kvscope::backend
