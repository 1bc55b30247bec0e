#pragma once
// llama.cpp's tokenizer test vectors (tests/test-tokenizer-0 format): for
// `<stem>`, `<stem>.inp` holds the strings, cut at each
// "\n__ggml_vocab_test__\n" (so a string keeps its own inner newlines), and
// `<stem>.out` the expected ids of each string on one line, space separated.
// They are tokenized with add_special = false and parse_special = false.

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace kvscope::test {

struct VocabCase {
  std::string text;
  std::vector<int32_t> expected;
};

inline std::string readWholeFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// `inp`'s strings: cut at each separator; a closing separator ends the last.
inline std::vector<std::string> readVocabTexts(const std::filesystem::path& inp) {
  const std::string text = readWholeFile(inp);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < text.size();) {
    const size_t next = text.find(sep, pos);
    if (next == std::string::npos) {
      texts.push_back(text.substr(pos));
      break;
    }
    texts.push_back(text.substr(pos, next - pos));
    pos = next + sep.size();
  }
  return texts;
}

// `out`'s lines of ids paired with `texts` in order.
inline std::vector<VocabCase> pairWithIds(const std::vector<std::string>& texts,
                                          const std::filesystem::path& out) {
  std::istringstream lines(readWholeFile(out));
  std::vector<VocabCase> cases;
  std::string line;
  for (size_t i = 0; i < texts.size() && std::getline(lines, line); ++i) {
    VocabCase c{texts[i], {}};
    std::istringstream ids(line);
    for (int32_t id = 0; ids >> id;) c.expected.push_back(id);
    cases.push_back(std::move(c));
  }
  EXPECT_EQ(cases.size(), texts.size()) << out << " has fewer lines than there are strings";
  return cases;
}

inline std::vector<VocabCase> readVocabCases(const std::filesystem::path& stem) {
  return pairWithIds(readVocabTexts(stem.string() + ".inp"), stem.string() + ".out");
}

}  // namespace kvscope::test
