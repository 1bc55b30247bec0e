// `kvscope-cli chat --session FILE` end to end on the demo model: a chat split
// over two runs replies as one run does, the second run restoring the KV
// cache instead of prefilling; a damaged cache is set aside with a message and
// the reply stays the same; a session file that cannot be read is refused and
// left as it was.
#include <filesystem>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "cli_runner.h"

namespace kvscope::test {
namespace {

namespace fs = std::filesystem;

class CliChatSession : public testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("kvscope-chat-session-" + std::to_string(::getpid()));
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }

  CliResult chat(const std::string& lines, const std::string& extra = "") {
    const fs::path input = m_dir / "input.txt";
    std::ofstream(input) << lines;
    return runCli("chat --backend cpu --kv-policy k=q8_0,v=turbo4 --temp 0 -n 16 " + extra + " < " +
                  input.string());
  }
  std::string session() const { return (m_dir / "chat.json").string(); }

  fs::path m_dir;
};

// The text after the last "tok/s]" line's reply: each reply is printed to
// stdout on its own, so the last reply is what follows the previous one.
std::string lastReply(const std::string& out, const std::string& before) {
  const size_t at = out.rfind(before);
  return at == std::string::npos ? out : out.substr(at + before.size());
}

TEST_F(CliChatSession, ASecondRunRestoresTheCacheAndRepliesAsOneRunDoes) {
  const CliResult whole = chat("Tell me about a cat\nAnd a dog?\n");
  ASSERT_EQ(whole.exitCode, 0) << whole.err;

  const CliResult first = chat("Tell me about a cat\n", "--session " + session());
  ASSERT_EQ(first.exitCode, 0) << first.err;
  ASSERT_TRUE(fs::exists(session()));
  ASSERT_TRUE(fs::exists(session() + ".kvcache"));
  const CliResult second = chat("And a dog?\n", "--session " + session());
  ASSERT_EQ(second.exitCode, 0) << second.err;
  EXPECT_NE(second.err.find("2 messages, "), std::string::npos) << second.err;
  EXPECT_NE(second.err.find("restored from the saved KV cache"), std::string::npos) << second.err;
  // One run printed both replies; the second run only the second one.
  ASSERT_FALSE(second.out.empty());
  EXPECT_EQ(lastReply(whole.out, first.out), second.out);
}

TEST_F(CliChatSession, ADamagedCacheIsSetAsideAndTheReplyStaysTheSame) {
  ASSERT_EQ(chat("Tell me about a cat\n", "--session " + session()).exitCode, 0);
  const std::string cache = session() + ".kvcache";
  std::string bytes;
  {
    std::ifstream in(cache, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  fs::copy_file(session(), m_dir / "copy.json");
  fs::copy_file(cache, m_dir / "copy.json.kvcache");
  bytes[bytes.size() / 2] ^= 0x40;
  std::ofstream(cache, std::ios::binary) << bytes;

  const CliResult restored = chat("And a dog?\n", "--session " + (m_dir / "copy.json").string());
  const CliResult damaged = chat("And a dog?\n", "--session " + session());
  ASSERT_EQ(damaged.exitCode, 0) << damaged.err;
  EXPECT_NE(damaged.err.find("the saved KV cache was not used"), std::string::npos) << damaged.err;
  EXPECT_NE(damaged.err.find("damaged"), std::string::npos) << damaged.err;
  EXPECT_EQ(damaged.out, restored.out);
}

TEST_F(CliChatSession, AnUnreadableSessionIsRefusedAndKept) {
  std::ofstream(session()) << "{ not json";
  const CliResult r = chat("Hello\n", "--session " + session());
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("not a readable chat session"), std::string::npos) << r.err;
  std::ifstream in(session());
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "{ not json");
}

}  // namespace
}  // namespace kvscope::test
