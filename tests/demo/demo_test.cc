// The README's main job (issue 13 item 7): scripts/demo_recorder.sh — what
// scripts/demo.sh runs after setup — shows the workload's report with labels
// that match it, then a crash with its backtrace and the seconds before it,
// and puts the core_pattern back. It changes core_pattern while it runs:
// never run it alongside coredump_test.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>

#include "tests/support/files.h"
#include "tests/support/run.h"

namespace flightrec::testing {
namespace {

// The percentage in a report row "SELF% CHILDREN% SAMPLES SYMBOL DSO".
double SelfPercent(const std::string& out, const std::string& symbol) {
  std::smatch m;
  std::regex row("\\n *([0-9.]+)%[^\\n]*\\b" + symbol + "\\b");
  return std::regex_search(out, m, row) ? std::stod(m[1]) : -1;
}

TEST(DemoTest, ShowsTheWorkloadThenTheCrashWithItsHistoryAndRestoresCorePattern) {
  const std::string pattern = ReadFile("/proc/sys/kernel/core_pattern");
  const std::string limit = ReadFile("/proc/sys/kernel/core_pipe_limit");
  const char* src = std::getenv("FLIGHTREC_SOURCE_DIR");
  ASSERT_NE(src, nullptr);
  auto r = RunCommand({"/bin/bash", std::string(src) + "/scripts/demo_recorder.sh"},
                      {"FLIGHTREC_BUILD_DIR=" + BuildPath("")});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string& out = r.out;
  // The core_pattern is back, whatever the demo did.
  EXPECT_EQ(ReadFile("/proc/sys/kernel/core_pattern"), pattern);
  EXPECT_EQ(ReadFile("/proc/sys/kernel/core_pipe_limit"), limit);
  EXPECT_NE(out.find("core_pattern restored: " + pattern.substr(0, pattern.size() - 1)),
            std::string::npos)
      << out;

  // The workload part: the label says 70 / 30 and the report agrees with
  // it within 5 points (~2500 samples at the demo's 499 Hz: one sigma of
  // sampling noise is under a point).
  auto work = out.substr(0, out.find("== recorder coredump install"));
  EXPECT_NE(work.find("spin_a ~70%, spin_b ~30%"), std::string::npos) << work;
  double a = SelfPercent(work, "spin_a"), b = SelfPercent(work, "spin_b");
  ASSERT_GT(a, 0) << work;
  ASSERT_GT(b, 0) << work;
  EXPECT_NEAR(a / (a + b), 0.7, 0.05) << work;

  // The crash part: crash info with the backtrace and the history.
  auto pos = out.find("== recorder crash info -1");
  ASSERT_NE(pos, std::string::npos) << out;
  auto crash = out.substr(pos, out.find("== recorder list", pos) - pos);
  EXPECT_NE(crash.find("SIGSEGV"), std::string::npos) << crash;
  EXPECT_NE(crash.find("fr_crash"), std::string::npos) << crash;
  // The crashing thread's backtrace, from the core.
  EXPECT_NE(crash.find("crash_here"), std::string::npos) << crash;
  // The seconds before the crash, from the daemon's rings: the function it
  // spun in for 0.5 s of CPU time.
  EXPECT_EQ(crash.find("History: none"), std::string::npos) << crash;
  auto history = crash.find("before the crash");
  ASSERT_NE(history, std::string::npos) << crash;
  EXPECT_NE(crash.find("spin_a", history), std::string::npos) << crash;
}

}  // namespace
}  // namespace flightrec::testing
