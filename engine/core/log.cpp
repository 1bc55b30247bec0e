#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace kvscope::log {
namespace {

Level initialLevel() {
  const char* env = std::getenv("KVSCOPE_LOG");
  if (!env) return Level::kWarn;
  if (std::strcmp(env, "error") == 0) return Level::kError;
  if (std::strcmp(env, "info") == 0) return Level::kInfo;
  if (std::strcmp(env, "debug") == 0) return Level::kDebug;
  return Level::kWarn;
}

std::atomic<Level> g_level{initialLevel()};
std::mutex g_mutex;
Sink g_sink;

const char* levelName(Level l) {
  switch (l) {
    case Level::kError:
      return "error";
    case Level::kWarn:
      return "warn";
    case Level::kInfo:
      return "info";
    case Level::kDebug:
      return "debug";
  }
  return "";
}

}  // namespace

Level level() {
  return g_level.load(std::memory_order_relaxed);
}
void setLevel(Level l) {
  g_level.store(l, std::memory_order_relaxed);
}

void setSink(Sink sink) {
  std::lock_guard lock(g_mutex);
  g_sink = std::move(sink);
}

void write(Level l, std::string_view message) {
  std::lock_guard lock(g_mutex);
  if (g_sink) {
    g_sink(l, message);
    return;
  }
  std::fprintf(stderr, "kvscope %s: %.*s\n", levelName(l), static_cast<int>(message.size()),
               message.data());
}

}  // namespace kvscope::log
