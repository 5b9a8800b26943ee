// The command line against a real recorderd and store: every command's
// --json, record ids by any unique part, --store/--socket after the command,
// `dump --pid` of a pid that never ran, the dump's "lost" being the loss
// inside its window, usage errors (exit 2), filters that match nothing and
// `record` of a program that cannot run.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "store/record_file.h"
#include "tests/support/daemon.h"
#include "tests/support/files.h"
#include "tests/support/proc.h"
#include "tests/support/run.h"
#include "tests/support/wait.h"

namespace flightrec::testing {
namespace {

// A pid no process has now (the highest free one below pid_max).
uint32_t FreePid() {
  std::ifstream in("/proc/sys/kernel/pid_max");
  long max = 32768;
  in >> max;
  for (long p = max - 1; p > 300; --p) {
    if (kill(static_cast<pid_t>(p), 0) != 0 && errno == ESRCH) return static_cast<uint32_t>(p);
  }
  return 0;
}

// Runs fr_spin for `seconds` and waits for it to exit; returns its pid.
pid_t SpinToTheEnd(const std::string& seconds) {
  pid_t spin = 0;
  EXPECT_TRUE(RunToSuccess({BuildPath("tests/programs/fr_spin"), seconds}, &spin));
  return spin;
}

nlohmann::json Json(const RunResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  return j;
}

// `dump --json` of the last 5 s of a spinning fr_spin: its pid, the record's
// id and how many samples it holds (some).
void DumpASpinner(const Daemon& d, pid_t* spin, std::string* id, uint64_t* samples) {
  *spin = SpinToTheEnd("1");
  auto dump = Json(d.Cli({"dump", "--last", "5s", "--pid", std::to_string(*spin), "--json"}));
  *id = dump["id"];
  *samples = dump["samples"];
  ASSERT_GT(*samples, 0u);
}

TEST(RecorderCliTest, ExportFlamegraphAndVerifyPrintJsonAndIdsMatchByAnyPart) {
  TempDir dir;
  Daemon d(dir.path());
  ASSERT_TRUE(d.ready()) << d.Log();
  pid_t spin = 0;
  std::string id;
  uint64_t samples = 0;
  ASSERT_NO_FATAL_FAILURE(DumpASpinner(d, &spin, &id, &samples));
  // The random suffix alone names the record (`report 67f484`).
  const std::string suffix = id.substr(id.find('-') + 1);
  ASSERT_EQ(suffix.size(), 6u);

  for (const std::string cmd : {"export", "flamegraph"}) {
    const std::string out = dir.path() + "/out-" + cmd;
    std::vector<std::string> args = {cmd, suffix, "-o", out, "--json"};
    if (cmd == "export") args.insert(args.end(), {"-f", "folded"});
    auto j = Json(d.Cli(args));
    struct stat st {};
    ASSERT_EQ(stat(out.c_str(), &st), 0) << cmd;
    EXPECT_EQ(j["record"], id) << cmd;
    EXPECT_EQ(j["output"], out) << cmd;
    EXPECT_EQ(j["format"], cmd == "export" ? "folded" : "svg") << cmd;
    EXPECT_EQ(j["samples"], samples) << cmd;
    EXPECT_EQ(j["bytes"], static_cast<uint64_t>(st.st_size)) << cmd;
  }
  // --json and the data both on stdout would mix: refused, saying why.
  auto mixed = d.Cli({"export", id, "-f", "folded", "-o", "-", "--json"});
  EXPECT_EQ(mixed.exit_code, 2);
  EXPECT_NE(mixed.err.find("give the output a file"), std::string::npos) << mixed.err;

  auto v = Json(d.Cli({"verify", suffix, "--json"}));
  EXPECT_EQ(v["ok"], true);
  ASSERT_EQ(v["records"].size(), 1u);
  EXPECT_EQ(v["records"][0]["id"], id);
  ASSERT_FALSE(v["records"][0]["sections"].empty());
  bool has_events = false;
  for (const auto& s : v["records"][0]["sections"]) {
    EXPECT_EQ(s["ok"], true) << s;
    has_events = has_events || s["name"] == "events";
  }
  EXPECT_TRUE(has_events);

  auto rep = d.Cli({"report", suffix, "--json"});
  EXPECT_EQ(rep.exit_code, 0) << rep.err;
}

TEST(RecorderCliTest, StoreAndSocketOptionsGoBeforeOrAfterTheCommand) {
  TempDir dir;
  Daemon d(dir.path());
  ASSERT_TRUE(d.ready()) << d.Log();
  const std::string recorder = BuildPath("recorder/cli/recorder");
  // After the command, as `perf report -i` / `coredumpctl --directory` users type them.
  auto s = RunCommand({recorder, "status", "--json", "--socket", d.sock()});
  auto j = Json(s);
  EXPECT_EQ(j["pid"], d.pid());
  auto dump = Json(RunCommand({recorder, "dump", "--last", "1s", "--socket", d.sock(), "--json"}));
  auto list = Json(RunCommand({recorder, "list", "--json", "--store", d.store()}));
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["id"], dump["id"]);
  // Before it, as always.
  EXPECT_EQ(Json(RunCommand({recorder, "--store", d.store(), "list", "--json"})).size(), 1u);
  // Nested commands too.
  auto tl = RunCommand({recorder, "trigger", "list", "--json", "--socket", d.sock()});
  EXPECT_EQ(tl.exit_code, 0) << tl.err;
}

TEST(RecorderCliTest, DumpOfAPidThatNeverRanIsAnError) {
  TempDir dir;
  Daemon d(dir.path());
  ASSERT_TRUE(d.ready()) << d.Log();
  const uint32_t nobody = FreePid();
  ASSERT_NE(nobody, 0u);
  auto r = d.Cli({"dump", "--last", "2s", "--pid", std::to_string(nobody)});
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.err.find("no process with pid " + std::to_string(nobody)), std::string::npos)
      << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  auto list = Json(d.Cli({"list", "--json"}));
  EXPECT_TRUE(list.empty()) << list;  // no empty record was written
  // A process that ran in the window and has exited is still dumpable ...
  pid_t spin = SpinToTheEnd("0.3");
  auto ok = Json(d.Cli({"dump", "--last", "5s", "--pid", std::to_string(spin), "--json"}));
  EXPECT_GT(ok["samples"].get<uint64_t>(), 0u);
  // ... and so is one alive now, even with no sample (it sleeps).
  Json(d.Cli({"dump", "--last", "1s", "--pid", "1", "--json"}));
}

TEST(RecorderCliTest, DumpLostCountsOnlyTheLossInsideTheWindow) {
  TempDir dir;
  // A ring of 4 pages per CPU holds some tens of ms at 999 Hz: it has
  // wrapped (overwritten samples) long before the first dump.
  Daemon d(dir.path(), {"--ring-pages", "4"});
  ASSERT_TRUE(d.ready()) << d.Log();
  SpinToTheEnd("1");
  auto small = Json(d.Cli({"dump", "--last", "5ms", "--json"}));
  auto rec = store::RecordReader::Open(d.store() + "/" + small["file"].get<std::string>());
  ASSERT_TRUE(rec.ok()) << rec.status().message();
  auto loss = nlohmann::json::parse(*(*rec)->ReadSection("loss"));
  // The ring did overwrite samples, all of them before this short window,
  // which it holds whole: nothing of the window was lost.
  EXPECT_GT(loss["overwritten"].get<uint64_t>(), 0u) << loss;
  EXPECT_GT(loss["outside_window"].get<uint64_t>(), 0u) << loss;
  EXPECT_EQ(small["lost"], 0u) << loss;
  EXPECT_NE(small["summary"].get<std::string>().find(", 0 lost"), std::string::npos)
      << small["summary"];
  // A window the rings cannot hold lost samples in it: counted.
  auto big = Json(d.Cli({"dump", "--last", "20s", "--json"}));
  EXPECT_LT(big["covered_s"].get<double>(), big["asked_s"].get<double>());
  EXPECT_GT(big["lost"].get<uint64_t>(), 0u);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

// A usage error: exit 2, what is wrong on the first line, where to read on
// the second, nothing on stdout.
void ExpectUsageError(const RunResult& r, const std::string& needle, const std::string& help) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  auto lines = Lines(r.err);
  ASSERT_EQ(lines.size(), 2u) << r.err;
  EXPECT_EQ(lines[0].rfind("recorder: ", 0), 0u) << r.err;
  EXPECT_NE(lines[0].find(needle), std::string::npos) << r.err;
  EXPECT_NE(lines[1].find("'" + help + " --help'"), std::string::npos) << r.err;
}

TEST(RecorderCliTest, UsageErrorsSayWhatIsWrongAndExit2) {
  TempDir dir;
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {BuildPath("recorder/cli/recorder"), "--store", dir.path()});
    return RunCommand(args);
  };
  // A typo names the command meant.
  ExpectUsageError(cli({"reprot", "-1"}), "unknown command 'reprot'; did you mean 'report'?",
                   "recorder");
  ExpectUsageError(cli({"crash", "lst"}), "unknown command 'lst'; did you mean 'list'?",
                   "recorder crash");
  // A word like none of them lists them.
  auto far = cli({"frobnicate"});
  ExpectUsageError(far, "unknown command 'frobnicate'; commands: ", "recorder");
  for (const char* verb : {"dump", "report", "record", "crash", "export"})
    EXPECT_NE(far.err.find(verb), std::string::npos) << verb << ": " << far.err;
  ExpectUsageError(cli({}), "no command given; commands: ", "recorder");
  // Options: unknown, missing a value, a value of the wrong type; a missing
  // argument.
  ExpectUsageError(cli({"report", "-1", "--bogus"}), "--bogus", "recorder report");
  ExpectUsageError(cli({"report", "-1", "--pid", "abc"}), "--pid", "recorder report");
  ExpectUsageError(cli({"report"}), "ID is required", "recorder report");
  ExpectUsageError(cli({"export", "-1", "-o"}), "-o", "recorder export");
  ExpectUsageError(cli({"--bogus", "list"}), "--bogus", "recorder list");
  // Help is no error.
  auto help = cli({"--help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_NE(help.out.find("Exit status"), std::string::npos) << help.out;
  auto report_help = cli({"report", "--help"});
  EXPECT_EQ(report_help.exit_code, 0) << report_help.err;
  EXPECT_NE(report_help.out.find("--pid"), std::string::npos) << report_help.out;
}

// Every query command with a filter that leaves out all of a record's
// samples: an error saying what the record holds, nothing on stdout, no file.
TEST(RecorderCliTest, AFilterThatMatchesNoSampleIsAnErrorSayingWhatTheRecordHolds) {
  TempDir dir;
  Daemon d(dir.path());
  ASSERT_TRUE(d.ready()) << d.Log();
  pid_t spin = 0;
  std::string id;
  uint64_t samples = 0;
  ASSERT_NO_FATAL_FAILURE(DumpASpinner(d, &spin, &id, &samples));
  const std::string nobody = std::to_string(FreePid());
  const std::string out = dir.path() + "/out";
  const std::vector<std::vector<std::string>> commands = {{"report"},
                                                          {"script"},
                                                          {"timeline"},
                                                          {"export", "-f", "folded", "-o", out},
                                                          {"flamegraph", "-o", out}};
  const std::vector<std::vector<std::string>> filters = {
      {"--pid", nobody}, {"--tid", nobody}, {"--since", "10s"}};
  for (const auto& command : commands) {
    for (const auto& filter : filters) {
      std::vector<std::string> args = command;
      args.insert(args.begin() + 1, id);
      args.insert(args.end(), filter.begin(), filter.end());
      const std::string what = command[0] + " " + filter[0] + " " + filter[1];
      auto r = d.Cli(args);
      EXPECT_EQ(r.exit_code, 1) << what << ": " << r.err;
      EXPECT_TRUE(r.out.empty()) << what << ": " << r.out;
      EXPECT_FALSE(std::filesystem::exists(out)) << what;
      EXPECT_NE(r.err.find("no samples match " + filter[0] + " " + filter[1] + " in record " + id),
                std::string::npos)
          << what << ": " << r.err;
      EXPECT_NE(r.err.find("it holds " + std::to_string(samples) + " samples of pid " +
                           std::to_string(spin)),
                std::string::npos)
          << what << ": " << r.err;
    }
    // A filter that matches some samples is no error.
    std::vector<std::string> args = command;
    args.insert(args.begin() + 1, id);
    args.insert(args.end(), {"--pid", std::to_string(spin)});
    auto r = d.Cli(args);
    EXPECT_EQ(r.exit_code, 0) << command[0] << ": " << r.err;
    std::filesystem::remove(out);
  }
}

// A record with no sample at all is a result, filtered or not: the filter
// left nothing out.
TEST(RecorderCliTest, ARecordWithoutSamplesIsReportedAsEmpty) {
  TempDir dir;
  Daemon d(dir.path());
  ASSERT_TRUE(d.ready()) << d.Log();
  // A window of a few ms after the sleeper fell asleep (its start ran on a
  // CPU) holds none of its samples.
  const pid_t sleeper = Spawn({"/bin/sleep", "30"});
  ASSERT_TRUE(WaitFor(
      [&] {
        return StatusField(sleeper, "Name") == "sleep" &&
               StatusField(sleeper, "State").rfind("S", 0) == 0;
      },
      std::chrono::seconds(10), std::chrono::milliseconds(5)));
  auto dump = Json(d.Cli({"dump", "--last", "5ms", "--pid", std::to_string(sleeper), "--json"}));
  kill(sleeper, SIGKILL);
  WaitStatus(sleeper);
  const std::string id = dump["id"];
  ASSERT_EQ(dump["samples"], 0u) << dump;
  for (const std::vector<std::string>& filter :
       {std::vector<std::string>{}, {"--pid", std::to_string(sleeper)}}) {
    std::vector<std::string> args = {"report", id};
    args.insert(args.end(), filter.begin(), filter.end());
    auto r = d.Cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("# record " + id + ": 0 samples"), std::string::npos) << r.out;
    args[0] = "timeline";
    r = d.Cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("no samples in the selected window"), std::string::npos) << r.out;
  }
}

// `record` of a program that cannot run says why before recording anything,
// and exits as a shell would (127: not found, 126: found but not runnable).
TEST(RecorderCliTest, RecordOfAProgramThatCannotRunSaysWhyAndExitsLikeAShell) {
  TempDir dir;
  const std::string recorder = BuildPath("recorder/cli/recorder");
  const std::string plain = dir.path() + "/plain";
  std::ofstream(plain) << "#!/bin/sh\n";
  ASSERT_EQ(chmod(plain.c_str(), 0644), 0);
  struct Case {
    std::vector<std::string> env;
    std::string program;
    int exit_code;
    std::string why;
  };
  const std::vector<Case> cases = {
      {{}, dir.path() + "/missing", 127, "no such file"},
      {{}, "flightrec-no-such-program", 127, "no such file"},
      {{}, plain, 126, "permission denied"},
      {{}, dir.path(), 126, "permission denied"},  // a directory
      {{"PATH=" + dir.path()}, "plain", 126, "permission denied"},
  };
  for (const auto& c : cases) {
    auto r =
        RunCommand({recorder, "--store", dir.path() + "/store", "record", "--", c.program}, c.env);
    EXPECT_EQ(r.exit_code, c.exit_code) << c.program << ": " << r.err;
    EXPECT_NE(r.err.find("cannot run " + c.program + ": " + c.why), std::string::npos)
        << c.program << ": " << r.err;
    EXPECT_EQ(r.err.find("recording"), std::string::npos) << c.program << ": " << r.err;
  }
}

}  // namespace
}  // namespace flightrec::testing
