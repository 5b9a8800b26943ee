#include "recorder/cli/usage.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace flightrec::recorder::cli {
namespace {

const std::vector<std::string> kVerbs = {"crash",    "dump",    "export", "flamegraph", "info",
                                         "list",     "record",  "report", "script",     "status",
                                         "timeline", "trigger", "verify"};

TEST(EditDistanceTest, CountsInsertionsDeletionsSubstitutionsAndSwaps) {
  EXPECT_EQ(EditDistance("report", "report"), 0u);
  EXPECT_EQ(EditDistance("reprot", "report"), 1u);  // two letters swapped
  EXPECT_EQ(EditDistance("repor", "report"), 1u);
  EXPECT_EQ(EditDistance("reportt", "report"), 1u);
  EXPECT_EQ(EditDistance("rexort", "report"), 1u);
  EXPECT_EQ(EditDistance("", "dump"), 4u);
  EXPECT_EQ(EditDistance("dump", ""), 4u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
}

TEST(ClosestVerbTest, ATypoNamesTheVerbMeant) {
  EXPECT_EQ(ClosestVerb("reprot", kVerbs), "report");
  EXPECT_EQ(ClosestVerb("lst", kVerbs), "list");
  EXPECT_EQ(ClosestVerb("dmup", kVerbs), "dump");
  EXPECT_EQ(ClosestVerb("timelines", kVerbs), "timeline");
  EXPECT_EQ(ClosestVerb("flamegrahp", kVerbs), "flamegraph");
  EXPECT_EQ(ClosestVerb("REPORT", kVerbs), "report");  // case is one slip, not six
}

TEST(ClosestVerbTest, AWordLikeNoVerbNamesNone) {
  // Suggesting `list` for `ls` or `dump` for `du` would guess, not correct.
  for (const char* far : {"frobnicate", "ls", "du", "x", "", "perf", "repository"}) {
    EXPECT_EQ(ClosestVerb(far, kVerbs), "") << far;
  }
}

TEST(ClosestVerbTest, TiesGoToTheFirstVerbListed) {
  EXPECT_EQ(ClosestVerb("ab", {"aa", "bb", "ab"}), "ab");  // an exact match wins
  EXPECT_EQ(ClosestVerb("abcx", {"abcy", "abcz"}), "abcy");
}

TEST(UnknownCommandMessageTest, SuggestsOrLists) {
  EXPECT_EQ(UnknownCommandMessage("reprot", kVerbs),
            "unknown command 'reprot'; did you mean 'report'?");
  EXPECT_EQ(UnknownCommandMessage("zz", {"dump", "list"}),
            "unknown command 'zz'; commands: dump, list");
}

}  // namespace
}  // namespace flightrec::recorder::cli
