// The saved-cache folder's cap: the oldest caches go first, the one just
// written last, and files that are not caches are never touched. Saving a
// session's cache within the per-file and folder limits (saveKvCacheTo), and
// restoring one (restoreKvCacheFrom): a damaged file goes, others stay.
#include "runtime/kv_cache_folder.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "model/default_model.h"
#include "runtime/session.h"
#include "runtime/session_load.h"

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

// The demo model on the CPU backend at f16, after a short prompt.
std::unique_ptr<Session> demoSession() {
  auto path = model::findDefaultModel();
  EXPECT_TRUE(path.ok());
  if (!path.ok()) return nullptr;
  auto checked = checkLoad(*path, {.kind = "cpu", .contextLimit = 256, .threads = 2});
  EXPECT_TRUE(checked.ok()) << checked.error().describe();
  if (!checked.ok()) return nullptr;
  std::string notice;
  auto session = startSession(std::move(checked).value(), &notice);
  EXPECT_TRUE(session.ok()) << session.error().describe();
  if (!session.ok()) return nullptr;
  EXPECT_TRUE(notice.empty());
  GenerateOptions options;
  options.maxTokens = 4;
  options.sampler.temperature = 0.0f;
  EXPECT_TRUE(
      (*session)->generate((*session)->tokenizeCompletion("Once upon a time"), options).ok());
  return std::move(session).value();
}

TEST_F(KvCacheFolder, SavesWithinThePerFileAndFolderLimits) {
  const std::unique_ptr<Session> session = demoSession();
  ASSERT_TRUE(session);
  const uint32_t tokens = static_cast<uint32_t>(session->history().size());
  // f16: 2 bytes a value, K and V, every layer and KV head.
  const model::ModelConfig& c = session->config();
  const uint64_t cacheBytes = uint64_t{tokens} * c.nLayer * c.nHeadKv * c.headDim * 2 * 2;
  const fs::path file = m_dir / "chat.kvcache";

  // Over the per-file limit: not written, and the older file of it goes.
  make("chat.kvcache", 10, 5);
  auto saved = saveKvCacheTo(*session, file, cacheBytes - 1, 1 << 30);
  ASSERT_TRUE(saved.ok());
  EXPECT_EQ(saved->outcome, KvCacheSave::Outcome::kTooLarge);
  EXPECT_EQ(saved->cacheBytes, cacheBytes);
  EXPECT_FALSE(fs::exists(file));

  // Within both: written; an older cache goes to make room.
  const fs::path old = make("old.kvcache", 100, 5);
  saved = saveKvCacheTo(*session, file, cacheBytes, cacheBytes * 2);
  ASSERT_TRUE(saved.ok());
  EXPECT_EQ(saved->outcome, KvCacheSave::Outcome::kSaved);
  EXPECT_EQ(saved->tokens, tokens);
  EXPECT_EQ(saved->fileBytes, fs::file_size(file));
  EXPECT_GT(saved->fileBytes, cacheBytes);  // the rows and the header
  EXPECT_EQ(saved->evicted, 0u);
  EXPECT_TRUE(fs::exists(old));
  const uint64_t fileBytes = saved->fileBytes;
  saved = saveKvCacheTo(*session, file, cacheBytes, fileBytes + 50);
  ASSERT_TRUE(saved.ok());
  EXPECT_EQ(saved->outcome, KvCacheSave::Outcome::kSaved);
  EXPECT_EQ(saved->evicted, 1u);
  EXPECT_FALSE(fs::exists(old));

  // The cache alone over the folder's limit: written, then evicted itself.
  saved = saveKvCacheTo(*session, file, cacheBytes, fileBytes - 1);
  ASSERT_TRUE(saved.ok());
  EXPECT_EQ(saved->outcome, KvCacheSave::Outcome::kEvicted);
  EXPECT_EQ(saved->evicted, 0u);
  EXPECT_FALSE(fs::exists(file));
}

TEST_F(KvCacheFolder, ARestoreRemovesADamagedFileOnly) {
  const std::unique_ptr<Session> session = demoSession();
  ASSERT_TRUE(session);
  const fs::path file = m_dir / "chat.kvcache";
  ASSERT_TRUE(saveKvCacheTo(*session, file, 1 << 30, 1 << 30).ok());
  EXPECT_TRUE(restoreKvCacheFrom(*session, file).ok());
  EXPECT_TRUE(fs::exists(file));

  // Another policy's cache is refused and kept for it.
  auto checked =
      checkLoad(*model::findDefaultModel(), {.kind = "cpu",
                                             .contextLimit = 256,
                                             .threads = 2,
                                             .kvPolicy = *kv::KvPolicy::parse("k=q8_0,v=q8_0")});
  ASSERT_TRUE(checked.ok());
  auto other = startSession(std::move(checked).value(), nullptr);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(restoreKvCacheFrom(**other, file).ok());
  EXPECT_TRUE(fs::exists(file));

  // A damaged file is refused and removed.
  fs::resize_file(file, fs::file_size(file) / 2);
  const Status st = restoreKvCacheFrom(*session, file);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::kBadFile);
  EXPECT_FALSE(fs::exists(file));
}

}  // namespace
}  // namespace kvscope::runtime
