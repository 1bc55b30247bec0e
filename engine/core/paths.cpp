#include "core/paths.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

namespace kvscope::paths {
namespace {

Expected<std::filesystem::path> xdgDir(const char* var, const char* fallback) {
  std::filesystem::path base;
  if (const char* v = std::getenv(var); v && v[0] == '/') {
    base = v;
  } else if (const char* home = std::getenv("HOME"); home && home[0]) {
    base = std::filesystem::path(home) / fallback;
  } else {
    return makeError(ErrorCode::kNotFound, "neither ${} nor $HOME is set", var);
  }
  std::filesystem::path dir = base / "kvscope";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return makeError(ErrorCode::kIo, "cannot create {}: {}", dir.string(), ec.message());
  return dir;
}

}  // namespace

Expected<std::filesystem::path> cacheDir() {
  return xdgDir("XDG_CACHE_HOME", ".cache");
}
Expected<std::filesystem::path> dataDir() {
  return xdgDir("XDG_DATA_HOME", ".local/share");
}

Status writeFileAtomic(const std::filesystem::path& path, const void* bytes, size_t size) {
  std::string tmp = path.string() + ".tmpXXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) return makeError(ErrorCode::kIo, "cannot create {}: {}", tmp, std::strerror(errno));
  // mkstemp creates 0600; a saved file gets the usual rw-r--r--.
  ::fchmod(fd, 0644);
  const char* p = static_cast<const char*>(bytes);
  size_t left = size;
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return makeError(ErrorCode::kIo, "cannot write {}: {}", path.string(), std::strerror(err));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return makeError(ErrorCode::kIo, "cannot flush {}: {}", path.string(), std::strerror(errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return makeError(ErrorCode::kIo, "cannot replace {}: {}", path.string(), std::strerror(err));
  }
  return okStatus();
}

}  // namespace kvscope::paths
