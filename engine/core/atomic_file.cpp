#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kvscope {

Expected<AtomicFile> AtomicFile::create(const std::filesystem::path& path) {
  AtomicFile f;
  f.m_path = path;
  f.m_tmp = path.string() + ".tmp";
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  const int fd = ::open(f.m_tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return f.failure(std::strerror(errno));
  f.m_file.reset(::fdopen(fd, "wb"));
  if (!f.m_file) {
    ::close(fd);
    return f.failure(std::strerror(errno));
  }
  return f;
}

AtomicFile::~AtomicFile() {
  if (!m_file) return;
  m_file.reset();
  std::error_code ec;
  std::filesystem::remove(m_tmp, ec);
}

Error AtomicFile::failure(std::string_view what) const {
  return makeError(ErrorCode::kIo, "cannot write {}: {}", m_path.string(), what);
}

Status AtomicFile::write(std::span<const uint8_t> bytes) {
  if (!m_file) return failure("the file is closed");
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), m_file.get()) != bytes.size())
    return failure(std::strerror(errno));
  return okStatus();
}

Status AtomicFile::writeAt(uint64_t offset, std::span<const uint8_t> bytes) {
  if (!m_file) return failure("the file is closed");
  const long end = std::ftell(m_file.get());
  if (end < 0 || std::fseek(m_file.get(), static_cast<long>(offset), SEEK_SET) != 0)
    return failure(std::strerror(errno));
  KVS_TRY(write(bytes));
  if (std::fseek(m_file.get(), end, SEEK_SET) != 0) return failure(std::strerror(errno));
  return okStatus();
}

Status AtomicFile::commit() {
  if (!m_file) return failure("the file is closed");
  if (std::fflush(m_file.get()) != 0 || ::fsync(::fileno(m_file.get())) != 0)
    return failure(std::strerror(errno));
  if (std::fclose(m_file.release()) != 0) return failure(std::strerror(errno));
  std::error_code ec;
  std::filesystem::rename(m_tmp, m_path, ec);
  if (ec) {
    std::filesystem::remove(m_tmp, ec);
    return failure(ec.message());
  }
  return okStatus();
}

Status writeFileAtomically(const std::filesystem::path& path, std::string_view text) {
  KVS_ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::create(path));
  KVS_TRY(file.write(text));
  return file.commit();
}

}  // namespace kvscope
