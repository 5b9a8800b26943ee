// DWARF unwinding end to end on this machine's kernel (issue 7, acceptance 1
// and 2): `recorder record --call-graph fp|dwarf[,N] -- fr_deep` with the
// perf backend, then `recorder script --json` / `report` through the shared
// replay. fr_deep is built -O2 -fomit-frame-pointer; its hot function sits 20
// calls deep, through the executable and a shared library.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli/run_util.h"

namespace flightrec {
namespace {

using testing::BuildPath;
using testing::RunCommand;

// Innermost first: the chain fr_deep builds, 20 frames.
std::vector<std::string> Expected() {
  std::vector<std::string> v = {"fr_deep_hot"};
  for (int i = 19; i >= 11; --i) v.push_back("fr_deep_l" + std::to_string(i));
  for (int i = 10; i >= 1; --i)
    v.push_back((i < 10 ? "fr_deep_e0" : "fr_deep_e") + std::to_string(i));
  return v;
}

class UnwindTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/flightrec-unwind-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Records fr_deep for `seconds` with this call graph; returns the samples
  // of `recorder script --json` (fr_deep's own).
  std::vector<nlohmann::json> Record(const std::string& call_graph, const std::string& seconds) {
    std::string recorder = BuildPath("recorder/cli/recorder");
    auto rec = RunCommand({recorder, "--store", dir_, "record", "--call-graph", call_graph, "-F",
                           "499", "--history", "5s", "--last", "5s", "--always", "--",
                           BuildPath("tests/unwind/fr_deep"), seconds});
    EXPECT_EQ(rec.exit_code, 0) << rec.err;
    auto script = RunCommand({recorder, "--store", dir_, "script", "-1", "--json"});
    EXPECT_EQ(script.exit_code, 0) << script.err;
    std::vector<nlohmann::json> out;
    std::istringstream in(script.out);
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line);
      if (j["comm"] == "fr_deep") out.push_back(std::move(j));
    }
    return out;
  }

  static std::vector<std::string> UserFunctions(const nlohmann::json& sample) {
    std::vector<std::string> names;
    for (const auto& f : sample["frames"]) {
      if (f["dso"] == "[kernel.kallsyms]") continue;
      names.push_back(f["function"].get<std::string>());
    }
    return names;
  }

  std::string dir_;
};

TEST_F(UnwindTest, FramePointersSeeAtMostThreeUserFramesOfTheDeepProgram) {
  auto samples = Record("fp", "1");
  ASSERT_GE(samples.size(), 200u);
  const auto expected = Expected();
  size_t in_chain = 0;
  for (const auto& s : samples) {
    EXPECT_FALSE(s.contains("unwind")) << "no DWARF note without --call-graph dwarf";
    auto names = UserFunctions(s);
    // Samples in the chain's code. (Elsewhere, e.g. in libc at exit, the
    // kernel's frame-pointer walk may follow garbage: not this test's point.)
    if (names.empty() || std::find(expected.begin(), expected.end(), names[0]) == expected.end()) {
      continue;
    }
    ++in_chain;
    EXPECT_LE(names.size(), 3u) << s.dump();
  }
  EXPECT_GE(in_chain, samples.size() * 9 / 10) << "the hot function is where the time goes";
}

TEST_F(UnwindTest, DwarfFindsAllTwentyFramesInOrderInNearlyEverySample) {
  auto samples = Record("dwarf", "2");
  ASSERT_GE(samples.size(), 400u);
  const auto expected = Expected();
  size_t complete = 0;
  std::string example;
  for (const auto& s : samples) {
    auto names = UserFunctions(s);
    if (names.size() >= expected.size() &&
        std::equal(expected.begin(), expected.end(), names.begin())) {
      ++complete;
      // Below the 20: main and libc's start, then the outermost frame.
      EXPECT_EQ(names[expected.size()], "main") << s.dump();
      EXPECT_EQ(s["unwind"]["status"], "ok") << s.dump();
    } else if (example.empty()) {
      example = s.dump();
    }
  }
  EXPECT_GE(complete * 100, samples.size() * 95)
      << complete << " of " << samples.size() << " complete; e.g. " << example;

  // report --children: every function of the chain holds the hot samples.
  auto report = RunCommand({BuildPath("recorder/cli/recorder"), "--store", dir_, "report", "-1",
                            "--children", "--json"});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  auto j = nlohmann::json::parse(report.out);
  size_t found = 0;
  for (const auto& row : j["rows"]) {
    std::string key = row["key"];
    if (std::find(expected.begin(), expected.end(), key) == expected.end()) continue;
    ++found;
    EXPECT_GE(row["children"].get<uint64_t>() * 100, samples.size() * 95) << row.dump();
  }
  EXPECT_EQ(found, expected.size()) << report.out.substr(0, 4000);
}

TEST_F(UnwindTest, AStackDeeperThanTheCopyIsReportedTruncatedNotWrong) {
  // 256 bytes hold ~16 of fr_deep's 16-byte frames, not 20.
  auto samples = Record("dwarf,256", "1");
  ASSERT_GE(samples.size(), 200u);
  const auto expected = Expected();
  size_t truncated = 0;
  for (const auto& s : samples) {
    auto names = UserFunctions(s);
    if (names.empty() || names[0] != "fr_deep_hot") continue;
    ASSERT_TRUE(s.contains("unwind")) << s.dump();
    EXPECT_EQ(s["unwind"]["status"], "truncated") << s.dump();
    EXPECT_NE(s["unwind"]["where"].get<std::string>().find("stack copy of"), std::string::npos)
        << s.dump();
    // What was unwound is right: a prefix of the real chain.
    ASSERT_LT(names.size(), expected.size()) << s.dump();
    EXPECT_TRUE(std::equal(names.begin(), names.end(), expected.begin())) << s.dump();
    ++truncated;
  }
  EXPECT_GE(truncated, samples.size() * 9 / 10);
  // The text form says it too.
  auto script = RunCommand({BuildPath("recorder/cli/recorder"), "--store", dir_, "script", "-1"});
  EXPECT_NE(script.out.find("(stack incomplete: truncated at stack copy of 256 bytes"),
            std::string::npos)
      << script.out.substr(0, 3000);
}

TEST_F(UnwindTest, BadCallGraphValuesAreRefusedWithAMessage) {
  for (const char* bad : {"dwarf,0", "dwarf,70000", "lbr"}) {
    auto r = RunCommand({BuildPath("recorder/cli/recorder"), "--store", dir_, "record",
                         "--call-graph", bad, "--", "/bin/true"});
    EXPECT_NE(r.exit_code, 0) << bad;
    EXPECT_NE(r.err.find("--call-graph"), std::string::npos) << r.err;
  }
  auto d = RunCommand(
      {BuildPath("recorder/daemon/recorderd"), "--store", dir_, "--call-graph", "dwarf,abc"});
  EXPECT_EQ(d.exit_code, 2);
  EXPECT_NE(d.err.find("--call-graph dwarf,abc"), std::string::npos) << d.err;
}

}  // namespace
}  // namespace flightrec
