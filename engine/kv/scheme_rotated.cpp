#include "kv/scheme_rotated.h"

#include <array>
#include <cassert>

namespace kvscope::kv {

RotatedScheme::RotatedScheme(const SchemeParams& params, std::shared_ptr<const KvScheme> base)
    : KvScheme(params, base->rowLayout()),
      m_name(std::string(base->name()) + "r"),
      m_base(std::move(base)),
      m_rotation(params.dim, params.seed) {
  assert(m_base->dim() == params.dim && !m_base->rotated());
}

void RotatedScheme::encode(std::span<const float> row, std::span<uint8_t> out) const {
  assert(row.size() == dim());
  std::array<float, kMaxKvDim> yBuffer;  // per token: on the stack
  const std::span<float> y = std::span(yBuffer).first(dim());
  m_rotation.rotate(row, y);
  m_base->encode(y, out);
}

void RotatedScheme::decodeRotated(std::span<const uint8_t> in, std::span<float> row) const {
  m_base->decode(in, row);
}

void RotatedScheme::decode(std::span<const uint8_t> in, std::span<float> row) const {
  std::array<float, kMaxKvDim> yBuffer;
  const std::span<float> y = std::span(yBuffer).first(dim());
  m_base->decode(in, y);
  m_rotation.rotateBack(y, row);
}

}  // namespace kvscope::kv
