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

namespace kvscope::runtime {

inline constexpr const char* kKvCacheExtension = ".kvcache";

// Bytes the folder's saved caches take.
uint64_t kvCacheFolderBytes(const std::filesystem::path& folder);
// Removes saved caches, oldest first, until the folder holds at most
// `maxBytes`; `keep` (the cache just written) goes last, and only when it
// alone is over. Returns the removed files. Other files are never touched.
std::vector<std::filesystem::path> evictKvCaches(const std::filesystem::path& folder,
                                                 uint64_t maxBytes,
                                                 const std::filesystem::path& keep = {});

}  // namespace kvscope::runtime
