// DWARF unwinding end to end on this machine's kernel (issue 7, acceptance 1
// and 2): `recorder record --call-graph fp|dwarf[,N] -- fr_deep` and
// `recorderd --call-graph dwarf` with the perf backend, then `recorder
// script --json` / `report` / `timeline` / `export` through the shared
// replay. fr_deep is built -O2 -fomit-frame-pointer; its hot function sits 20
// calls deep, through the executable and a shared library. fr_deep_df is the
// same program with its CFI only in .debug_frame.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/daemon.h"
#include "tests/support/files.h"
#include "tests/support/run.h"
#include "tests/support/wait.h"

namespace flightrec {
namespace {

using testing::BuildPath;
using testing::Daemon;
using testing::RunCommand;
using testing::Spawn;
using testing::TempDir;

// Fewer samples than this and a percentage says little. The tests' workloads
// give 2-6 times as many on the development VMs (~4 ms of CPU a call).
constexpr size_t kMinSamples = 100;

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
  // Records `program` (fr_deep or fr_deep_df) running its chain `calls`
  // times with this call graph; returns the samples of `recorder script
  // --json` (the program's own). A fixed number of calls is a fixed amount
  // of CPU work, so the sample count does not depend on how busy the machine
  // is (cpu-clock counts the task's own time); the window is the whole run.
  std::vector<nlohmann::json> Record(const std::string& call_graph, const std::string& calls,
                                     const std::string& program = "fr_deep",
                                     const std::string& rate = "499") {
    std::string recorder = BuildPath("recorder/cli/recorder");
    auto rec = RunCommand({recorder, "--store", dir_, "record", "--call-graph", call_graph, "-F",
                           rate, "--history", "10m", "--last", "10m", "--always", "--",
                           BuildPath("tests/unwind/" + program), "-n", calls});
    EXPECT_EQ(rec.exit_code, 0) << rec.err;
    return Script(recorder, {"--store", dir_, "script", "-1", "--json"}, program);
  }

  // The samples of `recorder script --json` whose comm is `comm` (and pid
  // `pid` if not 0).
  static std::vector<nlohmann::json> Script(const std::string& recorder,
                                            std::vector<std::string> args, const std::string& comm,
                                            uint32_t pid = 0) {
    args.insert(args.begin(), recorder);
    auto script = RunCommand(args);
    EXPECT_EQ(script.exit_code, 0) << script.err;
    std::vector<nlohmann::json> out;
    std::istringstream in(script.out);
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line);
      if (j["comm"] == comm && (pid == 0 || j["pid"] == pid)) out.push_back(std::move(j));
    }
    return out;
  }

  // How many samples have the whole chain, in order, with main below it and
  // an "ok" note; one example of those that do not.
  static size_t CountComplete(const std::vector<nlohmann::json>& samples, std::string* example) {
    const auto expected = Expected();
    size_t complete = 0;
    for (const auto& s : samples) {
      auto names = UserFunctions(s);
      if (names.size() > expected.size() &&
          std::equal(expected.begin(), expected.end(), names.begin())) {
        ++complete;
        // Below the 20: main and libc's start, then the outermost frame.
        EXPECT_EQ(names[expected.size()], "main") << s.dump();
        EXPECT_EQ(s["unwind"]["status"], "ok") << s.dump();
      } else if (example->empty()) {
        *example = s.dump();
      }
    }
    return complete;
  }

  static std::vector<std::string> UserFunctions(const nlohmann::json& sample) {
    std::vector<std::string> names;
    for (const auto& f : sample["frames"]) {
      if (f["dso"] == "[kernel.kallsyms]") continue;
      names.push_back(f["function"].get<std::string>());
    }
    return names;
  }

  TempDir tmp_;
  const std::string dir_ = tmp_.path();
};

TEST_F(UnwindTest, FramePointersSeeAtMostThreeUserFramesOfTheDeepProgram) {
  auto samples = Record("fp", "150");
  ASSERT_GE(samples.size(), kMinSamples);
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
  auto samples = Record("dwarf", "300");
  ASSERT_GE(samples.size(), kMinSamples);
  const auto expected = Expected();
  std::string example;
  size_t complete = CountComplete(samples, &example);
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
  // It says how many user stacks were unwound completely.
  EXPECT_GE(j["unwind"]["stacks"].get<uint64_t>(), samples.size()) << j["unwind"].dump();
  EXPECT_GE(j["unwind"]["complete"].get<uint64_t>(), complete) << j["unwind"].dump();
}

// Replay decodes the events where they were decompressed, 4 MiB at a time,
// and unwinds each stack copy in place: a record of many chunks has samples
// cut by a chunk's end, which must be made whole, not lost or misread.
TEST_F(UnwindTest, StackCopiesCutByTheReplaysChunkEndsUnwindWhole) {
  auto samples = Record("dwarf,4096", "300", "fr_deep", "4999");
  ASSERT_GE(samples.size(), 2000u);
  auto info =
      RunCommand({BuildPath("recorder/cli/recorder"), "--store", dir_, "info", "-1", "--json"});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  uint64_t events = 0;
  const auto record = nlohmann::json::parse(info.out);
  for (const auto& sec : record["sections"]) {
    if (sec["name"] == "events") events = sec["raw_size"].get<uint64_t>();
  }
  EXPECT_GT(events, 3u * (4u << 20)) << "several of replay's chunks";
  std::string example;
  size_t complete = CountComplete(samples, &example);
  EXPECT_GE(complete * 100, samples.size() * 95)
      << complete << " of " << samples.size() << " complete; e.g. " << example;
}

TEST_F(UnwindTest, DwarfUnwindsCodeWhoseOnlyCfiIsDebugFrame) {
  // fr_deep_df and its library have no .eh_frame for their own code (crt1.o
  // gives the executable an .eh_frame_hdr for _start only): every frame of
  // the chain comes from .debug_frame.
  auto samples = Record("dwarf", "300", "fr_deep_df");
  ASSERT_GE(samples.size(), kMinSamples);
  std::string example;
  size_t complete = CountComplete(samples, &example);
  EXPECT_GE(complete * 100, samples.size() * 95)
      << complete << " of " << samples.size() << " complete; e.g. " << example;
}

TEST_F(UnwindTest, RecorderdWithDwarfCallGraphsGivesTheDeepStacks) {
  // The always-on daemon, system-wide, with --call-graph dwarf: a dump taken
  // after fr_deep has exited holds its samples, unwound through 20 frames.
  Daemon d(dir_, {"--call-graph", "dwarf", "--history", "60s"});
  ASSERT_TRUE(d.ready()) << d.Log();
  auto status = d.Cli({"status", "--json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("dwarf,8192"), std::string::npos) << status.out;
  auto t0 = std::chrono::steady_clock::now();
  pid_t deep = Spawn({BuildPath("tests/unwind/fr_deep"), "-n", "150"});
  int st = 0;
  ASSERT_EQ(waitpid(deep, &st, 0), deep);  // the samples exist once it has run
  ASSERT_TRUE(WIFEXITED(st)) << st;
  // A window over the whole run, however long the busy machine made it (the
  // daemon's rings hold what they can of it: a few seconds at this rate).
  auto ran_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  auto dump = d.Cli({"dump", "--last", std::to_string(ran_ms + 1000) + "ms", "--json"});
  ASSERT_EQ(dump.exit_code, 0) << dump.err << d.Log();
  std::string id = nlohmann::json::parse(dump.out)["id"];
  std::string pid = std::to_string(deep);
  // System-wide: only fr_deep's samples, by pid (another fr_deep may run).
  auto samples =
      Script(BuildPath("recorder/cli/recorder"), {"--store", d.store(), "script", id, "--json"},
             "fr_deep", static_cast<uint32_t>(deep));
  ASSERT_GE(samples.size(), kMinSamples) << "150 calls at " << testing::kDaemonHz << " Hz";
  std::string example;
  size_t complete = CountComplete(samples, &example);
  EXPECT_GE(complete * 100, samples.size() * 95)
      << complete << " of " << samples.size() << " complete; e.g. " << example;
  auto report = d.Cli({"report", id, "--pid", pid, "--children", "--json"});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  auto j = nlohmann::json::parse(report.out);
  size_t found = 0;
  for (const auto& row : j["rows"]) {
    const auto expected = Expected();
    if (std::find(expected.begin(), expected.end(), row["key"]) == expected.end()) continue;
    ++found;
    EXPECT_GE(row["children"].get<uint64_t>() * 100, samples.size() * 95) << row.dump();
  }
  EXPECT_EQ(found, Expected().size()) << report.out.substr(0, 4000);
  EXPECT_GE(j["unwind"]["complete"].get<uint64_t>(), complete);
}

// The user functions of a `script --json` sample, outermost first, up to and
// without libc's start: ["main", "spin_clock", ...].
std::vector<std::string> FromMain(const nlohmann::json& sample) {
  std::vector<std::string> names;
  for (const auto& f : sample["frames"]) {
    if (f["dso"] == "[kernel.kallsyms]") continue;
    names.push_back(f["function"].get<std::string>());
  }
  std::reverse(names.begin(), names.end());
  auto main = std::find(names.begin(), names.end(), "main");
  names.erase(names.begin(), main);
  return names;
}

// How many of `samples` are in the vDSO with the whole chain main ->
// spin_clock -> ... -> __vdso_clock_gettime above them; one example of the
// vDSO samples that are not.
size_t VdsoSamplesWithTheirCallers(const std::vector<nlohmann::json>& samples, size_t* in_vdso,
                                   std::string* example) {
  size_t whole = 0;
  *in_vdso = 0;
  for (const auto& s : samples) {
    const auto& frames = s["frames"];
    auto leaf = std::find_if(frames.begin(), frames.end(),
                             [](const auto& f) { return f["dso"] != "[kernel.kallsyms]"; });
    if (leaf == frames.end() || (*leaf)["dso"] != "[vdso]") continue;
    ++*in_vdso;
    auto names = FromMain(s);
    bool ok = names.size() >= 3 && names[1] == "spin_clock" &&
              names.back().find("clock_gettime") != std::string::npos;
    if (ok) {
      ++whole;
    } else if (example->empty()) {
      *example = s.dump();
    }
  }
  return whole;
}

TEST_F(UnwindTest, DwarfUnwindsThroughTheVdsoToItsCallers) {
  // fr_spin's clock mode spends nearly all its time in the vDSO's
  // clock_gettime, which no file holds: its CFI comes from the vDSO image the
  // record carries. The daemon's own (live) attribution and the replay of the
  // record must both find main -> spin_clock above it.
  Daemon d(dir_, {"--call-graph", "dwarf", "--history", "60s"});
  ASSERT_TRUE(d.ready()) << d.Log();
  auto t0 = std::chrono::steady_clock::now();
  pid_t spin = Spawn({BuildPath("tests/programs/fr_spin"), "2", "clock"});
  int st = 0;
  ASSERT_EQ(waitpid(spin, &st, 0), spin);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  auto ran_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  auto dump = d.Cli({"dump", "--last", std::to_string(ran_ms + 1000) + "ms", "--pid",
                     std::to_string(spin), "--live-attribution", "--json"});
  ASSERT_EQ(dump.exit_code, 0) << dump.err << d.Log();
  std::string id = nlohmann::json::parse(dump.out)["id"];
  const std::string recorder = BuildPath("recorder/cli/recorder");
  for (bool live : {false, true}) {
    std::vector<std::string> args = {"--store", d.store(), "script", id, "--json"};
    if (live) args.push_back("--live");
    auto samples = Script(recorder, args, "fr_spin", static_cast<uint32_t>(spin));
    ASSERT_GE(samples.size(), kMinSamples) << (live ? "live" : "replay");
    size_t in_vdso = 0;
    std::string example;
    size_t whole = VdsoSamplesWithTheirCallers(samples, &in_vdso, &example);
    // Most of the time goes to the vDSO (the rest: the loop in spin_clock and
    // libc's clock_gettime wrapper).
    EXPECT_GE(in_vdso * 2, samples.size()) << (live ? "live" : "replay");
    EXPECT_GE(whole * 100, in_vdso * 95) << (live ? "live: " : "replay: ") << whole << " of "
                                         << in_vdso << " [vdso] samples whole; e.g. " << example;
  }
  // report --children: main holds (nearly) all of the process's samples, and
  // no stack stopped for want of the vDSO's file.
  auto report = d.Cli({"report", id, "--pid", std::to_string(spin), "--children", "--json"});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  auto j = nlohmann::json::parse(report.out);
  uint64_t total = j["samples"].get<uint64_t>();
  uint64_t main_children = 0, spin_children = 0;
  for (const auto& row : j["rows"]) {
    // fr_spin's own (not those of the test binary the child ran before exec).
    if (!row["dso"].get<std::string>().ends_with("/fr_spin")) continue;
    if (row["key"] == "main") main_children = row["children"].get<uint64_t>();
    if (row["key"] == "spin_clock") spin_children = row["children"].get<uint64_t>();
  }
  EXPECT_GE(main_children * 100, total * 95) << report.out.substr(0, 4000);
  EXPECT_GE(spin_children * 100, total * 95) << report.out.substr(0, 4000);
  EXPECT_EQ(j["unwind"]["missing_file"], 0) << j["unwind"].dump();
  for (const auto& stop : j["unwind"]["stops"]) {
    EXPECT_EQ(stop["place"].get<std::string>().find("[vdso]"), std::string::npos) << stop.dump();
  }
}

TEST_F(UnwindTest, AStackDeeperThanTheCopyIsReportedTruncatedNotWrong) {
  // 256 bytes hold ~16 of fr_deep's 16-byte frames, not 20.
  auto samples = Record("dwarf,256", "150");
  ASSERT_GE(samples.size(), kMinSamples);
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
  const std::string recorder = BuildPath("recorder/cli/recorder");
  auto script = RunCommand({recorder, "--store", dir_, "script", "-1"});
  EXPECT_NE(script.out.find("(stack incomplete: truncated at stack copy of 256 bytes"),
            std::string::npos)
      << script.out.substr(0, 3000);

  // report, timeline and export say how many stacks stopped, why and where.
  auto report = RunCommand({recorder, "--store", dir_, "report", "-1"});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find("# DWARF unwinding: "), std::string::npos) << report.out;
  EXPECT_NE(report.out.find(" truncated (stack copy too short)"), std::string::npos) << report.out;
  EXPECT_NE(report.out.find("samples stopped: truncated at stack copy of 256 bytes"),
            std::string::npos)
      << report.out;
  auto rj = RunCommand({recorder, "--store", dir_, "report", "-1", "--json"});
  ASSERT_EQ(rj.exit_code, 0) << rj.err;
  auto unwind = nlohmann::json::parse(rj.out)["unwind"];
  EXPECT_GE(unwind["truncated"].get<uint64_t>(), truncated) << unwind.dump();
  ASSERT_FALSE(unwind["stops"].empty());
  EXPECT_EQ(unwind["stops"][0]["status"], "truncated");
  EXPECT_EQ(unwind["stops"][0]["place"], "stack copy of 256 bytes");
  auto timeline = RunCommand({recorder, "--store", dir_, "timeline", "-1"});
  ASSERT_EQ(timeline.exit_code, 0) << timeline.err;
  EXPECT_NE(timeline.out.find("samples stopped: truncated at stack copy of 256 bytes"),
            std::string::npos)
      << timeline.out;
  auto tj = RunCommand({recorder, "--store", dir_, "timeline", "-1", "--json"});
  ASSERT_EQ(tj.exit_code, 0) << tj.err;
  EXPECT_EQ(nlohmann::json::parse(tj.out)["unwind"], unwind);

  // Exports: the truncated stacks end in a [truncated] frame at their root.
  auto folded = RunCommand({recorder, "--store", dir_, "export", "-1", "-f", "folded", "-o", "-"});
  ASSERT_EQ(folded.exit_code, 0) << folded.err;
  EXPECT_NE(folded.err.find("samples stopped: truncated at stack copy of 256 bytes"),
            std::string::npos)
      << folded.err;
  size_t marked = 0;
  std::istringstream lines(folded.out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("fr_deep;", 0) != 0 || line.find("fr_deep_hot") == std::string::npos) continue;
    EXPECT_EQ(line.rfind("fr_deep;[truncated];", 0), 0u) << line;
    marked += std::stoul(line.substr(line.rfind(' ') + 1));
  }
  EXPECT_EQ(marked, truncated);
  std::string svg_path = dir_ + "/deep.svg";
  auto svg = RunCommand({recorder, "--store", dir_, "flamegraph", "-1", "-o", svg_path});
  ASSERT_EQ(svg.exit_code, 0) << svg.err;
  std::ifstream svg_in(svg_path);
  std::string svg_text((std::istreambuf_iterator<char>(svg_in)), {});
  EXPECT_NE(svg_text.find("[truncated]"), std::string::npos);
}

// "~4.0 s" as the start-up sentence prints a history in seconds.
std::string Approx(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "~%.1f s", seconds);
  return buf;
}

TEST_F(UnwindTest, RecorderdSaysHowMuchHistoryItsRingsHold) {
  // 10 s of 8 KiB stacks at 999 Hz is ~85 MB a CPU, more than the largest
  // DWARF ring (32 MiB): recorderd says at start-up (a warning) and in status
  // what the rings will hold, instead of silently holding less.
  {
    Daemon d(dir_, {"--call-graph", "dwarf", "--history", "10s"});
    ASSERT_TRUE(d.ready()) << d.Log();
    auto status = d.Cli({"status", "--json"});
    ASSERT_EQ(status.exit_code, 0) << status.err;
    auto j = nlohmann::json::parse(status.out);
    ASSERT_TRUE(j.contains("history_capacity_s")) << status.out;
    const double ring = j["backend"]["data_ring_bytes_per_cpu"].get<double>();
    const double held = j["history_capacity_s"].get<double>();
    // Each sample reserves its whole 8 KiB stack copy and less than 1 KiB
    // besides (header, registers, kernel chain).
    EXPECT_LE(held, ring / (testing::kDaemonHz * 8192.0)) << status.out;
    EXPECT_GE(held, ring / (testing::kDaemonHz * (8192.0 + 1024))) << status.out;
    EXPECT_LT(held, 10.0);
    EXPECT_EQ(j["history_requested_s"], 10.0);
    const std::string said = "--history 10s asked; at " + std::to_string(testing::kDaemonHz) +
                             " Hz with 8.0 KiB stacks the rings hold " + Approx(held) +
                             " (32.0 MiB per CPU";
    EXPECT_TRUE(testing::WaitFor([&] { return d.Log().find(said) != std::string::npos; },
                                 std::chrono::seconds(10)))
        << said << "\n"
        << d.Log();
    EXPECT_NE(d.Log().find("warning: " + said), std::string::npos) << d.Log();
  }
  {
    // Frame-pointer samples at the same rate: the rings hold what was asked.
    Daemon d(dir_, {"--call-graph", "fp", "--history", "10s"});
    ASSERT_TRUE(d.ready()) << d.Log();
    auto j = nlohmann::json::parse(d.Cli({"status", "--json"}).out);
    const double held = j["history_capacity_s"].get<double>();
    EXPECT_GE(held, 10.0) << j.dump();
    const std::string said = "info: --history 10s asked; at " + std::to_string(testing::kDaemonHz) +
                             " Hz with frame-pointer call chains the rings hold " + Approx(held);
    EXPECT_TRUE(testing::WaitFor([&] { return d.Log().find(said) != std::string::npos; },
                                 std::chrono::seconds(10)))
        << said << "\n"
        << d.Log();
  }
  // recorder record says it on its start-up line too.
  auto rec =
      RunCommand({BuildPath("recorder/cli/recorder"), "--store", dir_, "record", "--call-graph",
                  "dwarf", "-F", "999", "--history", "10s", "--", "/bin/true"});
  EXPECT_EQ(rec.exit_code, 0) << rec.err;
  EXPECT_NE(rec.err.find("--history 10s asked; at 999 Hz with 8.0 KiB stacks the rings hold ~"),
            std::string::npos)
      << rec.err;
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
