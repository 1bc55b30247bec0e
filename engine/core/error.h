#pragma once
// Typed errors for every failure a user can cause (bad file, unsupported
// architecture, invalid scheme, out of memory, bad request). Functions that can
// fail return Expected<T> (a value or an Error) or Status (= Expected<void>).
// Messages are written for the user: say what is wrong and what to do.
// Internal invariants use assert, not Error.

#include <cassert>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace kvscope {

enum class ErrorCode {
  kInvalidArgument,  // a bad option, request or value from the user
  kNotFound,         // a file, device or name that does not exist
  kIo,               // the OS refused a read/write/map
  kBadFile,          // a file that exists but is corrupt, truncated or hostile
  kUnsupported,      // valid input this build does not handle (architecture, type)
  kOutOfMemory,      // host or device memory exhausted
  kDevice,           // the Vulkan loader/driver/device failed
  kCancelled,        // the user stopped the operation
  kInternal,         // a bug: should never reach the user
};

const char* errorCodeName(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;

  // "bad file: tensor 'x' extends past the end of the file"
  std::string describe() const;
};

template <typename... Args>
Error makeError(ErrorCode code, fmt::format_string<Args...> f, Args&&... args) {
  return Error{code, fmt::format(f, std::forward<Args>(args)...)};
}

// A value or an Error. Deliberately small: no monadic chains, just checks.
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : m_v(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Expected(Error error) : m_v(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return m_v.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(m_v);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(m_v);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(m_v));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const {
    assert(!ok());
    return std::get<1>(m_v);
  }
  Error&& takeError() {
    assert(!ok());
    return std::get<1>(std::move(m_v));
  }

 private:
  std::variant<T, Error> m_v;
};

template <>
class [[nodiscard]] Expected<void> {
 public:
  Expected() = default;
  Expected(Error error) : m_error(std::move(error)), m_ok(false) {}  // NOLINT

  bool ok() const { return m_ok; }
  explicit operator bool() const { return ok(); }
  const Error& error() const {
    assert(!ok());
    return m_error;
  }
  Error&& takeError() {
    assert(!ok());
    return std::move(m_error);
  }

 private:
  Error m_error;
  bool m_ok = true;
};

using Status = Expected<void>;

inline Status okStatus() {
  return {};
}

}  // namespace kvscope

// Propagate an error from an Expected/Status expression.
#define KVS_TRY(expr)                                              \
  do {                                                             \
    auto kvs_try_result_ = (expr);                                 \
    if (!kvs_try_result_.ok()) return kvs_try_result_.takeError(); \
  } while (0)

// Evaluate an Expected<T> expression; on success bind its value to `lhs`.
#define KVS_CONCAT_INNER_(a, b) a##b
#define KVS_CONCAT_(a, b) KVS_CONCAT_INNER_(a, b)
#define KVS_ASSIGN_OR_RETURN(lhs, expr) \
  KVS_ASSIGN_OR_RETURN_IMPL_(KVS_CONCAT_(kvs_e_, __LINE__), lhs, expr)
#define KVS_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.takeError();           \
  lhs = std::move(tmp).value()
