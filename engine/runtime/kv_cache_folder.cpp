#include "runtime/kv_cache_folder.h"

#include <algorithm>

#include "runtime/observer.h"
#include "runtime/session.h"

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

Expected<KvCacheSave> saveKvCacheTo(const Session& session, const fs::path& file,
                                    uint64_t maxFileBytes, uint64_t maxFolderBytes) {
  KvCacheSave save;
  save.tokens = static_cast<uint32_t>(session.history().size());
  const kv::KvLayout* layout = session.backend().kvLayout();
  save.cacheBytes = layout ? layout->canonicalBytes(save.tokens) : 0;
  std::error_code ec;
  if (save.cacheBytes > maxFileBytes) {
    fs::remove(file, ec);
    save.outcome = KvCacheSave::Outcome::kTooLarge;
    return save;
  }
  KVS_TRY(session.saveCache(file));
  save.evicted = evictKvCaches(file.parent_path(), maxFolderBytes, file).size();
  if (!fs::exists(file, ec)) {
    // The file went last (evictKvCaches keeps it to the end): not one of the others.
    save.outcome = KvCacheSave::Outcome::kEvicted;
    save.evicted -= std::min<size_t>(save.evicted, 1);
    return save;
  }
  save.fileBytes = fs::file_size(file, ec);
  return save;
}

Status restoreKvCacheFrom(Session& session, const fs::path& file, Observer* observer) {
  Status st = session.restoreCache(file, observer);
  std::error_code ec;
  if (!st.ok() && st.error().code == ErrorCode::kBadFile) fs::remove(file, ec);
  return st;
}

}  // namespace kvscope::runtime
