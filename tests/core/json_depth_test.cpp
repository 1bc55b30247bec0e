// jsonNestingDepth against depths counted by hand.
#include "core/json_depth.h"

#include <string>

#include <gtest/gtest.h>

namespace kvscope {
namespace {

TEST(JsonDepth, CountsArraysAndObjectsOutsideStrings) {
  EXPECT_EQ(jsonNestingDepth("1"), 0u);
  EXPECT_EQ(jsonNestingDepth(R"("[[[")"), 0u);
  EXPECT_EQ(jsonNestingDepth("[]"), 1u);
  EXPECT_EQ(jsonNestingDepth(R"({"a":[1,{"b":[]}],"c":{}})"), 4u);
  EXPECT_EQ(jsonNestingDepth("[[],[[]],[]]"), 3u);
  // Escaped quotes and backslashes keep the string open or closed correctly.
  EXPECT_EQ(jsonNestingDepth(R"(["a\"[[[", "b\\", [1]])"), 2u);
  EXPECT_EQ(jsonNestingDepth(R"(["\\\"{{"])"), 1u);
  // Unbalanced text is measured, not judged: the parser reports it.
  EXPECT_EQ(jsonNestingDepth("]]][["), 2u);
}

TEST(JsonDepth, StopsPastTheLimit) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(jsonNestingDepth(deep), kMaxJsonDepth + 1);
  EXPECT_EQ(jsonNestingDepth(deep, 10), 11u);
  const std::string at = std::string(kMaxJsonDepth, '{') + std::string(kMaxJsonDepth, '}');
  EXPECT_EQ(jsonNestingDepth(at), kMaxJsonDepth);
}

}  // namespace
}  // namespace kvscope
