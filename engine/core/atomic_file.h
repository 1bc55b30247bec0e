#pragma once
// AtomicFile: writes a file so that a crash or a full disk leaves either the
// old file or the complete new one, never a torn one: the bytes go to
// PATH.tmp, commit() flushes them to disk (fsync) and renames the temporary
// over PATH. A file dropped without commit() removes its temporary.

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <span>
#include <string_view>

#include "core/error.h"

namespace kvscope {

class AtomicFile {
 public:
  // Creates PATH.tmp (and PATH's folder). kIo when it cannot.
  static Expected<AtomicFile> create(const std::filesystem::path& path);
  AtomicFile(AtomicFile&&) noexcept = default;
  AtomicFile& operator=(AtomicFile&&) noexcept = default;
  ~AtomicFile();

  Status write(std::span<const uint8_t> bytes);
  Status write(std::string_view text) {
    return write({reinterpret_cast<const uint8_t*>(text.data()), text.size()});
  }
  // Overwrites bytes already written, at `offset` from the start.
  Status writeAt(uint64_t offset, std::span<const uint8_t> bytes);
  Status commit();

 private:
  AtomicFile() = default;
  Error failure(std::string_view what) const;

  std::filesystem::path m_path, m_tmp;
  std::unique_ptr<FILE, int (*)(FILE*)> m_file{nullptr, &std::fclose};
};

// The whole of `text` as the new content of `path`, atomically.
Status writeFileAtomically(const std::filesystem::path& path, std::string_view text);

}  // namespace kvscope
