// The saved-cache folder's cap: the oldest caches go first, the one just
// written last, and files that are not caches are never touched.
#include "runtime/kv_cache_folder.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace kvscope::runtime {
namespace {

namespace fs = std::filesystem;

class KvCacheFolder : public testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("kvscope-cache-folder-" + std::to_string(::getpid()));
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }

  // A file of `bytes` bytes, `age` hours old.
  fs::path make(const std::string& name, size_t bytes, int age) {
    const fs::path p = m_dir / name;
    std::ofstream(p, std::ios::binary) << std::string(bytes, 'x');
    fs::last_write_time(p, fs::file_time_type::clock::now() - std::chrono::hours(age));
    return p;
  }

  fs::path m_dir;
};

TEST_F(KvCacheFolder, EvictsTheOldestCachesUntilTheFolderFits) {
  const fs::path oldest = make("a.kvcache", 100, 30);
  const fs::path older = make("b.kvcache", 100, 20);
  const fs::path recent = make("c.kvcache", 100, 10);
  const fs::path other = make("notes.json", 1000, 40);
  const fs::path leftover = make("d.kvcache.tmp", 50, 40);  // a save cut short
  EXPECT_EQ(kvCacheFolderBytes(m_dir), 350u);

  const auto removed = evictKvCaches(m_dir, 150);
  ASSERT_EQ(removed.size(), 3u);
  EXPECT_EQ(removed[0], leftover);
  EXPECT_EQ(removed[1], oldest);
  EXPECT_EQ(removed[2], older);
  EXPECT_TRUE(fs::exists(recent));
  EXPECT_TRUE(fs::exists(other));
  EXPECT_EQ(kvCacheFolderBytes(m_dir), 100u);
  EXPECT_TRUE(evictKvCaches(m_dir, 100).empty());
}

TEST_F(KvCacheFolder, TheCacheJustWrittenGoesLast) {
  const fs::path kept = make("old-but-new.kvcache", 100, 50);
  const fs::path a = make("a.kvcache", 100, 10);
  auto removed = evictKvCaches(m_dir, 100, kept);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0], a);
  EXPECT_TRUE(fs::exists(kept));
  removed = evictKvCaches(m_dir, 50, kept);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0], kept);
}

}  // namespace
}  // namespace kvscope::runtime
