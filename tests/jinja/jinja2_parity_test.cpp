// kvscope's Jinja interpreter against Python's jinja2: every real chat template
// in tests/data/chat_templates (and the shared hf-llama3 / hf-qwen3 ones) for
// every conversation in conversations.json, plus the small feature templates
// of tests/data/jinja/features.json, must render byte for byte what
// tools/render-chat-templates.py recorded from jinja2 in Hugging Face's set-up,
// and fail where jinja2 fails (with the template's own message for
// raise_exception()).

#include <algorithm>
#include <cctype>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/text_file.h"
#include "jinja/template.h"
#include "support/test_support.h"

namespace kvscope::jinja {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

const fs::path kData = KVSCOPE_TEST_DATA;

Json readJson(const fs::path& path) {
  return Json::parse(readTextFile(path).value());
}

// conversations.json's "now" (2026-07-26T10:30:00), as strftime_now sees it.
std::tm fixedNow(const Json& conversations) {
  std::tm t{};
  std::istringstream in(conversations["now"].get<std::string>());
  in >> std::get_time(&t, "%Y-%m-%dT%H:%M:%S");
  t.tm_isdst = -1;
  std::mktime(&t);  // fills in the weekday and day of the year
  return t;
}

Object chatVariables(const Json& conversations, const Json& c, bool generationPrompt) {
  Object vars;
  vars.set("messages", Value::fromJson(c["messages"]));
  vars.set("tools", c.contains("tools") ? Value::fromJson(c["tools"]) : Value::none());
  vars.set("documents", Value::none());
  vars.set("add_generation_prompt", generationPrompt);
  vars.set("bos_token", conversations["bos_token"].get<std::string>());
  vars.set("eos_token", conversations["eos_token"].get<std::string>());
  if (c.contains("enable_thinking")) vars.set("enable_thinking", c["enable_thinking"].get<bool>());
  return vars;
}

// Compares one render with jinja2's recorded result; returns a failure note or "".
std::string compare(const Expected<std::string>& got, const Json& want) {
  if (want.contains("text")) {
    if (!got.ok()) return "kvscope failed: " + got.error().message;
    if (*got != want["text"].get<std::string>()) {
      return "kvscope rendered:\n" + *got + "\n--- jinja2 rendered:\n" +
             want["text"].get<std::string>();
    }
    return {};
  }
  if (got.ok())
    return "jinja2 failed (" + want["error"].get<std::string>() + ") but kvscope rendered:\n" +
           *got;
  if (want["raised"].get<bool>() &&
      !got.error().message.ends_with(": " + want["error"].get<std::string>())) {
    return "raise_exception message differs: " + got.error().message;
  }
  return {};
}

std::vector<std::string> templateNames() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(kData / "chat_templates" / "expected")) {
    names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

class RealChatTemplate : public ::testing::TestWithParam<std::string> {};

TEST_P(RealChatTemplate, RendersAsJinja2) {
  const std::string name = GetParam();
  std::string source;
  if (name.starts_with("hf-")) {
    const fs::path config =
        test::sharedFile(fs::path("tokenizer") / name / "tokenizer_config.json");
    KVS_REQUIRE_FIXTURE(config);
    source = readJson(config)["chat_template"].get<std::string>();
  } else {
    source = readTextFile(kData / "chat_templates" / (name + ".jinja")).value();
  }
  const Json conversations = readJson(kData / "chat_templates" / "conversations.json");
  const Json expected = readJson(kData / "chat_templates" / "expected" / (name + ".json"));
  const auto parsed = Template::parse(source);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  const std::tm now = fixedNow(conversations);
  int compared = 0;
  for (const auto& [caseName, c] : conversations["cases"].items()) {
    for (const bool gen : {true, false}) {
      const std::string key = caseName + (gen ? ".gen" : ".nogen");
      ASSERT_TRUE(expected.contains(key))
          << "expected file lacks " << key << ": rerun tools/render-chat-templates.py";
      const std::string failure =
          compare(parsed->render(chatVariables(conversations, c, gen), now), expected[key]);
      EXPECT_EQ(failure, "") << name << " / " << key;
      ++compared;
    }
  }
  EXPECT_GE(compared, 16);
}

INSTANTIATE_TEST_SUITE_P(Jinja2, RealChatTemplate, ::testing::ValuesIn(templateNames()),
                         [](const auto& param) {
                           std::string n = param.param;
                           for (char& ch : n) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

TEST(Jinja2Features, EveryFeatureRendersAsJinja2) {
  const Json features = readJson(kData / "jinja" / "features.json");
  const Json expected = readJson(kData / "jinja" / "features.expected.json");
  const Json conversations = readJson(kData / "chat_templates" / "conversations.json");
  for (const Json& f : features["cases"]) {
    const std::string name = f["name"].get<std::string>();
    ASSERT_TRUE(expected.contains(name)) << "rerun tools/render-chat-templates.py";
    Object vars;
    if (f.contains("variables")) vars = Value::fromJson(f["variables"]).asObject();
    const auto parsed = Template::parse(f["template"].get<std::string>());
    const Expected<std::string> got = parsed.ok() ? parsed->render(vars, fixedNow(conversations))
                                                  : Expected<std::string>(parsed.error());
    EXPECT_EQ(compare(got, expected[name]), "") << name;
  }
}

}  // namespace
}  // namespace kvscope::jinja
