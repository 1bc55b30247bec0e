#include "kv/scheme_rotated.h"

#include <array>
#include <bit>
#include <cassert>

#include "kv/rotation.h"

namespace kvscope::kv {

RotatedScheme::RotatedScheme(const SchemeParams& params, std::shared_ptr<const KvScheme> base)
    : KvScheme(params, base->rowLayout()),
      m_name(std::string(base->name()) + "r"),
      m_base(std::move(base)),
      m_rotation(makeRotation(params.dim, params.seed)) {
  assert(m_base->dim() == params.dim && !m_base->rotated());
  if (std::has_single_bit(params.dim)) {
    // makeRotation's H S / sqrt(d): H's first row is all +1, so R's first
    // row carries the signs.
    for (uint32_t j = 0; j < params.dim; ++j) m_signs.push_back(m_rotation[j] > 0 ? 1.0f : -1.0f);
  }
}

void RotatedScheme::encode(std::span<const float> row, std::span<uint8_t> out) const {
  assert(row.size() == dim());
  std::array<float, kMaxKvDim> yBuffer;  // per token: on the stack
  const std::span<float> y = std::span(yBuffer).first(dim());
  if (m_signs.empty()) {
    rotateVector(m_rotation, row, y);
  } else {
    hadamardRotate(m_signs, row.data(), y.data());
  }
  m_base->encode(y, out);
}

void RotatedScheme::decodeRotated(std::span<const uint8_t> in, std::span<float> row) const {
  m_base->decode(in, row);
}

void RotatedScheme::decode(std::span<const uint8_t> in, std::span<float> row) const {
  std::array<float, kMaxKvDim> yBuffer;
  const std::span<float> y = std::span(yBuffer).first(dim());
  m_base->decode(in, y);
  if (m_signs.empty()) {
    rotateVectorBack(m_rotation, y, row);
  } else {
    hadamardRotateBack(m_signs, y.data(), row.data());
  }
}

}  // namespace kvscope::kv
