#include "backend/backend.h"

namespace kvscope::backend {

Status Backend::exportKv(const std::function<Status(std::span<const uint8_t>)>&) const {
  return makeError(ErrorCode::kUnsupported, "the {} backend cannot save its KV cache", name());
}

Status Backend::importKv(const kv::KvLayout&, uint32_t,
                         const std::function<Status(std::span<uint8_t>)>&) {
  return makeError(ErrorCode::kUnsupported, "the {} backend cannot restore a KV cache", name());
}

}  // namespace kvscope::backend
