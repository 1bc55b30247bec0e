#include "core/error.h"

namespace kvscope {

const char* errorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid argument";
    case ErrorCode::kNotFound:
      return "not found";
    case ErrorCode::kIo:
      return "I/O error";
    case ErrorCode::kBadFile:
      return "bad file";
    case ErrorCode::kUnsupported:
      return "unsupported";
    case ErrorCode::kOutOfMemory:
      return "out of memory";
    case ErrorCode::kDevice:
      return "device error";
    case ErrorCode::kCancelled:
      return "cancelled";
    case ErrorCode::kInternal:
      return "internal error";
  }
  return "error";
}

std::string Error::describe() const {
  return fmt::format("{}: {}", errorCodeName(code), message);
}

}  // namespace kvscope
