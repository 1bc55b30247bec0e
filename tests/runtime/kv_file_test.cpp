// The saved KV cache reader (runtime/kv_file.h) on a file the stories260K
// session saves: it reads back what was written; every truncation, every
// flipped header or table byte and a damaged section are refused; and
// sections made consistent again around bad content (support/kv_file_parts.h)
// are refused for that content — a row count the file cannot hold before
// anything is allocated, a token outside the vocabulary, numbers that are not
// unsigned integers, an auto state without an auto policy, row sizes this
// build's schemes do not have.
#include "runtime/kv_file.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/kv_file_parts.h"
#include "support/stories_session.h"

namespace kvscope::test {
namespace {

namespace fs = std::filesystem;

class KvFile : public testing::Test {
 protected:
  void SetUp() override {
    m_path = fs::temp_directory_path() / ("kvscope-kv-file-" + std::to_string(::getpid()));
    m_session = openStoriesSession(256);
    ASSERT_TRUE(m_session);
    runtime::GenerateOptions options;
    options.maxTokens = 8;
    options.sampler.temperature = 0.0f;
    ASSERT_TRUE(
        m_session->generate(m_session->tokenizeCompletion("Once upon a time"), options).ok());
    ASSERT_TRUE(m_session->saveCache(m_path).ok());
    std::ifstream in(m_path, std::ios::binary);
    m_bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  void TearDown() override { fs::remove(m_path); }

  // The file with its META JSON changed by `edit`, consistent otherwise.
  std::string withMeta(const std::function<void(nlohmann::json&)>& edit) const {
    auto parts = splitKvFile(m_bytes);
    EXPECT_TRUE(parts);
    nlohmann::json meta = nlohmann::json::parse(parts->meta);
    edit(meta);
    parts->meta = meta.dump();
    return joinKvFile(*parts, m_bytes);
  }
  // Restores `bytes` into a fresh session.
  Status restore(const std::string& bytes) const {
    std::ofstream(m_path, std::ios::binary) << bytes;
    auto fresh = openStoriesSession(256);
    EXPECT_TRUE(fresh);
    return fresh ? fresh->restoreCache(m_path) : okStatus();
  }

  fs::path m_path;
  std::unique_ptr<runtime::Session> m_session;
  std::string m_bytes;
};

TEST_F(KvFile, ReadsBackWhatWasWritten) {
  auto reader = runtime::KvFileReader::parse(m_bytes);
  ASSERT_TRUE(reader.ok()) << reader.error().describe();
  const runtime::KvFileInfo& info = reader->info();
  EXPECT_EQ(info.tokens, m_session->history());
  EXPECT_EQ(info.nLayer, m_session->config().nLayer);
  EXPECT_EQ(info.schemes, m_session->backend().kvLayout()->layerSchemes());
  EXPECT_EQ(info.cacheSeed, m_session->backend().kvLayout()->cacheSeed());
  EXPECT_EQ(info.backend, "cpu");
  std::vector<uint8_t> expected;
  ASSERT_TRUE(m_session->backend()
                  .exportKv([&](std::span<const uint8_t> run) {
                    expected.insert(expected.end(), run.begin(), run.end());
                    return okStatus();
                  })
                  .ok());
  std::vector<uint8_t> rows(expected.size());
  ASSERT_TRUE(reader->readRows(rows).ok());
  EXPECT_EQ(rows, expected);
  uint8_t more = 0;
  EXPECT_FALSE(reader->readRows({&more, 1}).ok()) << "past the end";
  // Rewritten from the same session: the same bytes.
  auto parts = splitKvFile(m_bytes);
  ASSERT_TRUE(parts);
  EXPECT_EQ(joinKvFile(*parts, m_bytes), m_bytes);
}

TEST_F(KvFile, RefusesEveryTruncationAndEveryFlippedHeaderByte) {
  for (size_t n = 0; n < m_bytes.size(); ++n) {
    auto r = runtime::KvFileReader::parse(m_bytes.substr(0, n));
    ASSERT_FALSE(r.ok()) << "truncated to " << n;
    EXPECT_EQ(r.error().code, ErrorCode::kBadFile) << n;
  }
  EXPECT_FALSE(runtime::KvFileReader::parse(m_bytes + "x").ok()) << "a trailing byte";
  for (size_t i = 0; i < 64 + 3 * 24; ++i) {
    std::string flipped = m_bytes;
    flipped[i] = static_cast<char>(flipped[i] ^ 0x01);
    EXPECT_FALSE(runtime::KvFileReader::parse(flipped).ok()) << "byte " << i;
  }
  // A flipped row byte passes the header, and fails at the rows' checksum.
  std::string flippedRow = m_bytes;
  flippedRow[flippedRow.size() - 1] = static_cast<char>(flippedRow.back() ^ 0x01);
  auto r = runtime::KvFileReader::parse(flippedRow);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->verifyRows().ok());
  EXPECT_EQ(restore(flippedRow).error().code, ErrorCode::kBadFile);
}

TEST_F(KvFile, RefusesConsistentFilesWithBadContent) {
  const auto refused = [](const std::string& bytes, const char* what) {
    auto r = runtime::KvFileReader::parse(bytes);
    EXPECT_FALSE(r.ok()) << what;
    if (!r.ok()) {
      EXPECT_EQ(r.error().code, ErrorCode::kBadFile) << what << ": " << r.error().message;
    }
  };
  // The untouched file, reassembled, is accepted: the edits below are what is refused.
  ASSERT_TRUE(runtime::KvFileReader::parse(withMeta([](nlohmann::json&) {})).ok());
  refused(withMeta([](nlohmann::json& m) { m["cache"]["rows"] = runtime::kMaxKvFileRows; }),
          "more rows than the file holds");
  refused(withMeta([](nlohmann::json& m) { m["cache"]["rows"] = uint64_t{1} << 40; }),
          "a row count past the bound");
  refused(withMeta([](nlohmann::json& m) { m["model"]["layers"] = 5.5; }), "a float layer count");
  refused(withMeta([](nlohmann::json& m) { m["model"]["layers"] = -5; }), "a negative count");
  refused(withMeta([](nlohmann::json& m) { m["model"]["vocab"] = 2; }), "a token past vocab");
  refused(withMeta([](nlohmann::json& m) { m["model"]["layer_shapes"].erase(0); }),
          "a layer's shape missing");
  refused(withMeta([](nlohmann::json& m) { m["model"]["layer_shapes"][1][0] = 0; }),
          "a layer of no KV heads");
  refused(withMeta([](nlohmann::json& m) { m["model"]["layer_shapes"][1] = {2}; }),
          "a layer shape without its head width");
  refused(withMeta([](nlohmann::json& m) { m["cache"]["schemes"][0][1] = "nope"; }),
          "an unknown scheme");
  refused(withMeta([](nlohmann::json& m) { m["cache"]["schemes"].erase(0); }), "a layer missing");
  refused(withMeta([](nlohmann::json& m) { m["policy"]["auto"] = "settled"; }),
          "a settled auto state without its plan");
  refused(withMeta([](nlohmann::json& m) { m.erase("model"); }), "no model");
  refused(withMeta([](nlohmann::json& m) {
            m["cache"]["tail"] = {{"held", uint64_t{m["cache"]["rows"]} + 1}, {"bytes", 0}};
          }),
          "a precision tail longer than the cache");
  refused(withMeta([](nlohmann::json& m) {
            m["cache"]["tail"] = {{"held", 1}, {"bytes", uint64_t{1} << 40}};
          }),
          "a precision tail larger than f16 rows");
  refused(withMeta([](nlohmann::json& m) {
            m["cache"]["tail"] = {{"held", 1}, {"bytes", 64}};
          }),
          "a precision tail the rows section does not hold");
  refused(withMeta([](nlohmann::json& m) { m["format"] = "something else"; }), "another format");
  // A 4.1 file's tail held no copy of a layer's f16 part: with such a layer
  // it is refused by name (a 4.2 file's tail holds both parts).
  auto mixed = splitKvFile(m_bytes);
  ASSERT_TRUE(mixed);
  nlohmann::json mixedMeta = nlohmann::json::parse(mixed->meta);
  mixedMeta["cache"]["schemes"][0] = {"f16", "q8_0"};
  mixedMeta["cache"]["tail"] = {{"held", 1}, {"bytes", 64}};
  mixed->meta = mixedMeta.dump();
  std::string older = m_bytes;
  older[10] = 1;  // minor
  auto read41 = runtime::KvFileReader::parse(joinKvFile(*mixed, older));
  ASSERT_FALSE(read41.ok());
  EXPECT_NE(read41.error().message.find("format 4.1"), std::string::npos) << read41.error().message;

  // Consistent to the reader, refused by the restore.
  const Status failedAuto = restore(withMeta([](nlohmann::json& m) {
    m["policy"]["auto"] = "failed";
    m["policy"]["auto_failure"] = "x";
  }));
  ASSERT_FALSE(failedAuto.ok());
  EXPECT_EQ(failedAuto.error().code, ErrorCode::kBadFile) << failedAuto.error().message;
  // Layer 0's K rows four bytes longer and the rows section as long as that
  // claims: the sizes add up, but this build's f16 rows are not that size.
  auto parts = splitKvFile(m_bytes);
  ASSERT_TRUE(parts);
  nlohmann::json meta = nlohmann::json::parse(parts->meta);
  const uint32_t k = meta["cache"]["row_bytes"][0][0];
  meta["cache"]["row_bytes"][0][0] = k + 4;
  const uint64_t rows = meta["cache"]["rows"], heads = meta["model"]["layer_shapes"][0][0];
  parts->meta = meta.dump();
  parts->rows.append(rows * heads * 4, '\0');
  const std::string longer = joinKvFile(*parts, m_bytes);
  ASSERT_TRUE(runtime::KvFileReader::parse(longer).ok());
  const Status rowSize = restore(longer);
  ASSERT_FALSE(rowSize.ok());
  EXPECT_NE(rowSize.error().message.find("rows of another size"), std::string::npos)
      << rowSize.error().message;
  // Layer 1 with twice its KV heads and the rows section as long as that
  // claims: a consistent file of another model's shapes, refused by the restore.
  auto wider = splitKvFile(m_bytes);
  ASSERT_TRUE(wider);
  nlohmann::json wide = nlohmann::json::parse(wider->meta);
  const uint64_t heads1 = wide["model"]["layer_shapes"][1][0];
  const uint64_t rowBytes1 =
      uint64_t{wide["cache"]["row_bytes"][1][0]} + uint64_t{wide["cache"]["row_bytes"][1][1]};
  wide["model"]["layer_shapes"][1][0] = 2 * heads1;
  wider->meta = wide.dump();
  wider->rows.append(rows * heads1 * rowBytes1, '\0');
  const std::string widerFile = joinKvFile(*wider, m_bytes);
  ASSERT_TRUE(runtime::KvFileReader::parse(widerFile).ok());
  const Status otherShapes = restore(widerFile);
  ASSERT_FALSE(otherShapes.ok());
  EXPECT_NE(otherShapes.error().message.find("another model"), std::string::npos)
      << otherShapes.error().message;
  // A precision tail the file holds but this session's cache keeps none of.
  auto tailed = splitKvFile(m_bytes);
  ASSERT_TRUE(tailed);
  nlohmann::json tailMeta = nlohmann::json::parse(tailed->meta);
  tailMeta["cache"]["tail"] = {{"held", 1}, {"bytes", 64}};
  tailed->meta = tailMeta.dump();
  tailed->rows.append(64, '\0');
  const std::string tailFile = joinKvFile(*tailed, m_bytes);
  ASSERT_TRUE(runtime::KvFileReader::parse(tailFile).ok());
  const Status tail = restore(tailFile);
  ASSERT_FALSE(tail.ok());
  EXPECT_EQ(tail.error().code, ErrorCode::kBadFile);
  EXPECT_NE(tail.error().message.find("precision tail"), std::string::npos) << tail.error().message;
  EXPECT_TRUE(restore(m_bytes).ok());
}

TEST_F(KvFile, ACacheLongerThanTheContextLeavesABusySessionAsItWas) {
  auto small = openStoriesSession(8);
  ASSERT_TRUE(small);
  runtime::GenerateOptions options;
  options.maxTokens = 2;
  options.sampler.temperature = 0.0f;
  ASSERT_TRUE(small->generate(small->tokenizeCompletion("Once"), options).ok());
  const std::vector<int32_t> before = small->history();
  ASSERT_FALSE(before.empty());
  ASSERT_GT(m_session->history().size(), 8u);
  const Status st = small->restoreCache(m_path);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("context"), std::string::npos) << st.error().message;
  EXPECT_EQ(small->history(), before);
  EXPECT_EQ(small->backend().cachedTokens(), before.size());
}

}  // namespace
}  // namespace kvscope::test
