#pragma once
// Per-user directories following the XDG Base Directory spec:
// $XDG_CACHE_HOME/kvscope (default ~/.cache/kvscope) and
// $XDG_DATA_HOME/kvscope (default ~/.local/share/kvscope).
// Directories are created on demand; failure is reported, not fatal.

#include <filesystem>

#include "core/error.h"

namespace kvscope::paths {

Expected<std::filesystem::path> cacheDir();
Expected<std::filesystem::path> dataDir();

// Writes `bytes` to `path` atomically: a temp file in the same directory,
// flushed, then renamed over the target. Readers never see a partial file.
Status writeFileAtomic(const std::filesystem::path& path, const void* bytes, size_t size);

}  // namespace kvscope::paths
