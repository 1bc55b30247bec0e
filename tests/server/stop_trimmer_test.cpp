// Stop sequences over streamed pieces: nothing from a stop sequence on is
// released, wherever the pieces split it.
#include "server/stop_trimmer.h"

#include <gtest/gtest.h>

namespace kvscope::server {
namespace {

// Pushes the pieces and returns what was released, "|" between pushes.
std::string run(StopTrimmer& t, std::initializer_list<std::string_view> pieces) {
  std::string out;
  for (std::string_view p : pieces) out += t.push(p) + "|";
  return out;
}

TEST(StopTrimmer, WithoutStopsReleasesEverythingAtOnce) {
  StopTrimmer t({});
  EXPECT_EQ(run(t, {"a", "b"}), "a|b|");
  EXPECT_EQ(t.finish(), "");
  EXPECT_FALSE(t.stopped());
}

TEST(StopTrimmer, StopSpanningPiecesIsNeverSent) {
  StopTrimmer t({"World"});
  EXPECT_EQ(run(t, {"Hello W", "or", "ld and more"}), "Hello |||");
  EXPECT_TRUE(t.stopped());
  EXPECT_EQ(t.push("later"), "");
  EXPECT_EQ(t.finish(), "");
}

TEST(StopTrimmer, APartialMatchThatFailsIsReleased) {
  StopTrimmer t({"World"});
  EXPECT_EQ(run(t, {"Hello Wo", "rm"}), "Hello |Worm|");
  EXPECT_FALSE(t.stopped());
}

TEST(StopTrimmer, HeldTextComesOutAtTheEnd) {
  StopTrimmer t({"</s>"});
  EXPECT_EQ(run(t, {"end <", "/"}), "end ||");
  EXPECT_EQ(t.finish(), "</");
}

TEST(StopTrimmer, EarliestStopWinsAndTextBeforeItInThePieceIsKept) {
  StopTrimmer t({"cd", "b"});
  EXPECT_EQ(run(t, {"abcd"}), "a|");
  EXPECT_TRUE(t.stopped());
}

TEST(StopTrimmer, LongestPossiblePrefixIsHeld) {
  // "aab" must not be lost when "aaab" starts one character later.
  StopTrimmer t({"aab"});
  EXPECT_EQ(run(t, {"a", "a", "a", "b!"}), "||a||");
  EXPECT_TRUE(t.stopped());
}

TEST(StopTrimmer, MultiByteCharactersStayWhole) {
  StopTrimmer t({"\xC3\xA9t\xC3\xA9"});  // "été"
  // "é" alone may begin the stop: held, and released once " " follows it.
  EXPECT_EQ(run(t, {"caf\xC3\xA9", " \xC3\xA9", "t\xC3\xA9"}), "caf|\xC3\xA9 ||");
  EXPECT_TRUE(t.stopped());
}

}  // namespace
}  // namespace kvscope::server
