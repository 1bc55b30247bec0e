#pragma once
// The folder of saved KV caches (runtime/kv_file.h) the app keeps beside its
// conversations: one "<conversation id>.kvcache" per conversation, within a
// total size the user sets; when it is over, the caches used least recently
// (oldest modification time) go first. Temporaries a save cut short left
// behind (.kvcache.tmp) count as caches, so they go too.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"

namespace kvscope::runtime {

class Observer;
class Session;

inline constexpr const char* kKvCacheExtension = ".kvcache";

// Bytes the folder's saved caches take.
uint64_t kvCacheFolderBytes(const std::filesystem::path& folder);
// Removes saved caches, oldest first, until the folder holds at most
// `maxBytes`; `keep` (the cache just written) goes last, and only when it
// alone is over. Returns the removed files. Other files are never touched.
std::vector<std::filesystem::path> evictKvCaches(const std::filesystem::path& folder,
                                                 uint64_t maxBytes,
                                                 const std::filesystem::path& keep = {});

// What saveKvCacheTo did.
struct KvCacheSave {
  enum class Outcome {
    kSaved,     // `file` holds the cache
    kTooLarge,  // the cache is over the per-file limit: not written
    kEvicted,   // written, then evicted: the cache alone is over the folder's limit
  };
  Outcome outcome = Outcome::kSaved;
  uint64_t cacheBytes = 0;  // the cached rows at the layout's bytes per token
  uint64_t fileBytes = 0;   // the file written (kSaved)
  uint32_t tokens = 0;      // rows the cache holds
  size_t evicted = 0;       // other caches removed to make room
};

// Saves `session`'s cache as `file` (Session::saveCache) within the limits:
// a cache over `maxFileBytes` is not written, and an older file of it goes (a
// shorter cache of the same conversation would only mislead); after writing,
// the folder is evicted down to `maxFolderBytes`. Errors: the write failed.
Expected<KvCacheSave> saveKvCacheTo(const Session& session, const std::filesystem::path& file,
                                    uint64_t maxFileBytes, uint64_t maxFolderBytes);

// Restores `session`'s cache from `file` (Session::restoreCache). On failure a
// damaged file (kBadFile) is removed; one made for another model or policy
// stays for them.
Status restoreKvCacheFrom(Session& session, const std::filesystem::path& file,
                          Observer* observer = nullptr);

}  // namespace kvscope::runtime
