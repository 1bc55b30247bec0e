#pragma once
// Minimal leveled logging to stderr. The level comes from KVSCOPE_LOG
// (error|warn|info|debug; default warn) and can be changed at run time.
// A sink can be installed (e.g. by the UI) to receive the lines instead.

#include <functional>
#include <string_view>

#include <fmt/format.h>

namespace kvscope::log {

enum class Level { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

Level level();
void setLevel(Level level);
using Sink = std::function<void(Level, std::string_view)>;
void setSink(Sink sink);  // empty sink restores stderr
void write(Level level, std::string_view message);

template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
  write(Level::kError, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  if (level() >= Level::kWarn) write(Level::kWarn, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  if (level() >= Level::kInfo) write(Level::kInfo, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  if (level() >= Level::kDebug) write(Level::kDebug, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace kvscope::log
