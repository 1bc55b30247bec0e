// `kvscope-cli template` prints exactly what Python's jinja2 renders (the
// expected file comes from tools/render-chat-templates.py), takes BOS/EOS from
// the model, and refuses bad input with a one-line error.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "cli_runner.h"
#include "core/text_file.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

const std::filesystem::path kCliData =
    std::filesystem::path(KVSCOPE_TEST_DATA) / "chat_templates" / "cli";

TEST(CliTemplate, ChatmlFileOnStories260kPrintsWhatJinja2Renders) {
  const auto model = sharedFile("models/stories260K.gguf");
  KVS_REQUIRE_FIXTURE(model);
  const auto r = runCli("template -m " + model.string() + " --template " +
                        (kCliData / "chatml.jinja").string() + " --messages " +
                        (kCliData / "multi_turn.json").string());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out,
            readTextFile(kCliData / "chatml.multi_turn.expected.txt").value());  // no newline added
}

TEST(CliTemplate, BosAndEosComeFromTheModelOrTheFlags) {
  const auto model = sharedFile("models/stories260K.gguf");
  KVS_REQUIRE_FIXTURE(model);
  const auto dir = std::filesystem::temp_directory_path() / "kvscope-template-test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "t.jinja")
      << "{{ bos_token }}|{% for m in messages %}{{ m.content }}{% endfor %}|{{ eos_token }}";
  std::ofstream(dir / "m.json") << R"({"messages": [{"role": "user", "content": "hi"}]})";
  const std::string files =
      " --template " + (dir / "t.jinja").string() + " --messages " + (dir / "m.json").string();
  EXPECT_EQ(runCli("template -m " + model.string() + files).out, "<s>|hi|</s>");
  EXPECT_EQ(runCli("template" + files).out, "|hi|");
  EXPECT_EQ(runCli("template" + files + " --bos '<B>' --eos '<E>'").out, "<B>|hi|<E>");
  std::filesystem::remove_all(dir);
}

TEST(CliTemplate, BadInputGetsAOneLineError) {
  const auto dir = std::filesystem::temp_directory_path() / "kvscope-template-bad";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "ok.json") << R"([{"role": "system", "content": "s"}])";
  std::ofstream(dir / "bad.json") << "[{\"role\": ";
  std::ofstream(dir / "raises.jinja")
      << "{% if messages[0].role == 'system' %}{{ raise_exception('no system') }}{% endif %}";
  std::ofstream(dir / "broken.jinja") << "{% for m in messages %}";
  const std::string d = dir.string();
  auto r = runCli("template --template " + d + "/raises.jinja --messages " + d + "/bad.json");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("not valid JSON"), std::string::npos) << r.err;
  r = runCli("template --template " + d + "/raises.jinja --messages " + d + "/ok.json");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("line 1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no system"), std::string::npos) << r.err;
  r = runCli("template --template " + d + "/broken.jinja --messages " + d + "/ok.json");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("endfor"), std::string::npos) << r.err;
  r = runCli("template --template " + d + "/missing.jinja --messages " + d + "/ok.json");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kvscope::test
