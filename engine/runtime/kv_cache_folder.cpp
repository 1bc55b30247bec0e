#include "runtime/kv_cache_folder.h"

#include <algorithm>

namespace kvscope::runtime {
namespace {

namespace fs = std::filesystem;

struct Cached {
  fs::path path;
  uint64_t bytes = 0;
  fs::file_time_type time;
};

std::vector<Cached> listCaches(const fs::path& folder) {
  std::vector<Cached> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    std::error_code e;
    // Caches, and what a save cut short left behind (PATH.kvcache.tmp).
    const std::string name = entry.path().filename().string();
    const bool cache = name.ends_with(kKvCacheExtension) ||
                       name.ends_with(std::string(kKvCacheExtension) + ".tmp");
    if (!entry.is_regular_file(e) || !cache) continue;
    const uint64_t bytes = entry.file_size(e);
    const auto time = entry.last_write_time(e);
    if (!e) out.push_back({entry.path(), bytes, time});
  }
  return out;
}

}  // namespace

uint64_t kvCacheFolderBytes(const fs::path& folder) {
  uint64_t total = 0;
  for (const Cached& c : listCaches(folder)) total += c.bytes;
  return total;
}

std::vector<fs::path> evictKvCaches(const fs::path& folder, uint64_t maxBytes,
                                    const fs::path& keep) {
  std::vector<Cached> caches = listCaches(folder);
  uint64_t total = 0;
  for (const Cached& c : caches) total += c.bytes;
  std::error_code ec;
  const auto isKept = [&](const Cached& c) {
    return !keep.empty() && fs::equivalent(c.path, keep, ec);
  };
  // Oldest first, the one to keep last.
  std::sort(caches.begin(), caches.end(), [&](const Cached& a, const Cached& b) {
    const bool ka = isKept(a), kb = isKept(b);
    if (ka != kb) return kb;
    return a.time < b.time;
  });
  std::vector<fs::path> removed;
  for (const Cached& c : caches) {
    if (total <= maxBytes) break;
    if (fs::remove(c.path, ec)) {
      total -= c.bytes;
      removed.push_back(c.path);
    }
  }
  return removed;
}

}  // namespace kvscope::runtime
