// The flame graph's search as a user sees it: the SVG's own embedded script,
// run by node on the SVG's own frames (flamegraph_search_check.js), shows
// "Matched: x%" of all samples, counts a match inside a match once, and its
// button turns into a reset that clears the highlight and the percentage.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "recorder/export/export.h"

namespace flightrec::recorder::exporter {
namespace {

// Five samples of one thread `x`, all under main:
//   main>alpha, main>alpha>alpha_inner, main>beta>alpha, main>beta, main>gamma
std::string FlameGraphSvg() {
  std::deque<attribution::Symbol> syms;
  auto sym = [&](const std::string& name) {
    attribution::Symbol s;
    s.function = name;
    s.dso = "/bin/x";
    s.status = "ok";
    syms.push_back(s);
    return &syms.back();
  };
  auto* main = sym("main");
  auto* alpha = sym("alpha");
  auto* inner = sym("alpha_inner");
  auto* beta = sym("beta");
  auto* gamma = sym("gamma");
  // Innermost frame first, as the replay gives them.
  std::vector<std::vector<const attribution::Symbol*>> stacks = {
      {alpha, main}, {inner, alpha, main}, {alpha, beta, main}, {beta, main}, {gamma, main}};
  std::vector<attribution::AttributedSample> samples(stacks.size());
  auto ex = MakeExporter("svg");
  EXPECT_TRUE(ex.ok());
  std::ostringstream out;
  analysis::RecordInfo info;
  info.id = "r";
  (*ex)->Begin(info, &out);
  for (size_t i = 0; i < stacks.size(); ++i) {
    samples[i].pid = 7;
    samples[i].tid = 7;
    samples[i].comm = "x";
    samples[i].time_ns = 1'000'000'000 + i;
    (*ex)->Add(analysis::ResolvedSample{&samples[i], stacks[i], 0, nullptr});
  }
  EXPECT_TRUE((*ex)->Finish().ok());
  return out.str();
}

// Runs the check script on the SVG with the given search terms; one JSON
// object per line of its output.
std::vector<nlohmann::json> Search(const std::string& svg, const std::vector<std::string>& terms) {
  char path[] = "/tmp/flamegraph_unittest_XXXXXX.svg";
  int fd = mkstemps(path, 4);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, svg.data(), svg.size()), static_cast<ssize_t>(svg.size()));
  close(fd);
  const char* src = std::getenv("FLIGHTREC_SOURCE_DIR");
  std::string cmd = std::string("node ") + (src ? src : ".") +
                    "/recorder/export/flamegraph_search_check.js " + path;
  for (const auto& t : terms) cmd += " '" + t + "'";
  std::string text;
  FILE* p = popen(cmd.c_str(), "r");
  EXPECT_NE(p, nullptr);
  char buf[4096];
  size_t n;
  while (p && (n = fread(buf, 1, sizeof(buf), p)) > 0) text.append(buf, n);
  int st = p ? pclose(p) : -1;
  unlink(path);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << cmd << "\n" << text;
  std::vector<nlohmann::json> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(FlameGraphTest, SvgHasTheMatchedLineAndEachFramesSampleCount) {
  std::string svg = FlameGraphSvg();
  EXPECT_NE(svg.find("<text id=\"matched\""), std::string::npos);
  EXPECT_NE(svg.find("data-samples=\"5\"><title>all (5 samples"), std::string::npos);
  EXPECT_NE(svg.find("data-samples=\"2\"><title>beta (2 samples"), std::string::npos);
}

TEST(FlameGraphTest, SearchShowsTheMatchedShareCountingNestedMatchesOnce) {
  auto r = Search(FlameGraphSvg(), {"alpha", "^beta$", "gamma|alpha_inner", "nothing-here"});
  ASSERT_EQ(r.size(), 5u);
  // alpha (2 samples, alpha_inner inside it not counted again) + the alpha
  // under beta (1): 3 of 5.
  EXPECT_EQ(r[0]["matched"], "Matched: 60.0%");
  EXPECT_EQ(r[0]["button"], "Reset Search");
  EXPECT_EQ(r[0]["highlighted"].size(), 3u);  // both alphas and alpha_inner
  EXPECT_EQ(r[1]["matched"], "Matched: 40.0%");
  EXPECT_EQ(r[1]["highlighted"], nlohmann::json::array({"beta"}));
  EXPECT_EQ(r[2]["matched"], "Matched: 40.0%");
  EXPECT_EQ(r[3]["matched"], "Matched: 0.0%");
  EXPECT_TRUE(r[3]["highlighted"].empty());
  // The button, clicked again, resets: no highlight, no percentage.
  EXPECT_EQ(r[4]["button"], "Search");
  EXPECT_EQ(r[4]["matched"], " ");
  EXPECT_TRUE(r[4]["highlighted"].empty());
}

}  // namespace
}  // namespace flightrec::recorder::exporter
