// Post-mortem queries on real records (issue 4): live-vs-replay equivalence,
// the timeline and report filters, and bad input (corrupt, foreign, unknown
// records) for every query command.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "store/record_file.h"
#include "tests/support/recording.h"

namespace flightrec::testing {
namespace {

namespace fs = std::filesystem;

// One recording shared by the tests of this file: fr_spin (spin_a/spin_b) and
// fr_dlopen (a library dlopened, burned in, dlclosed; the process exits
// before the dump) — the mapping changes attribution has to get right.
class QueryTest : public RecordedSuite<QueryTest> {
 protected:
  static void SetUpTestSuite() {
    ASSERT_NO_FATAL_FAILURE(StartDaemon());
    pid_t spin = Spawn({BuildPath("tests/programs/fr_spin"), "1.5"});
    pid_t dl = Spawn({BuildPath("tests/programs/fr_dlopen"),
                      BuildPath("tests/programs/libfr_plugin.so"), "0.5"});
    // One pid, two images inside the window: exec_spin, then fr_spin.
    pid_t ex = Spawn(
        {BuildPath("tests/programs/fr_exec"), "0.6", BuildPath("tests/programs/fr_spin"), "0.8"});
    int st = 0;
    waitpid(ex, &st, 0);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    exec_pid_ = ex;
    dl_pid_ = dl;
    waitpid(dl, &st, 0);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    waitpid(spin, &st, 0);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    spin_pid_ = spin;
    DumpLast5s(*daemon_, 0, {"--live-attribution"}, &id_);
  }
  static RunResult Cli(const std::vector<std::string>& args) { return daemon_->Cli(args); }

  static inline pid_t spin_pid_ = 0, exec_pid_ = 0, dl_pid_ = 0;
};

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

TEST_F(QueryTest, LiveAttributionAndReplayOfTheRecordAreIdentical) {
  auto replay = Cli({"script", id_, "--json"});
  auto live = Cli({"script", id_, "--json", "--live"});
  ASSERT_EQ(replay.exit_code, 0) << replay.err;
  ASSERT_EQ(live.exit_code, 0) << live.err;
  auto a = Lines(replay.out), b = Lines(live.out);
  ASSERT_GT(a.size(), 500u) << "too few samples to compare";
  ASSERT_EQ(a.size(), b.size());
  size_t plugin = 0, spin = 0, before_exec = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i], b[i]) << "sample " << i << " differs between live and replay";
    if (a[i].find("\"plugin_burn\"") != std::string::npos) ++plugin;
    if (a[i].find("\"spin_a\"") != std::string::npos) ++spin;
    if (a[i].find("\"exec_spin\"") != std::string::npos) ++before_exec;
  }
  // The comparison covered the cases that matter: the dlopened library of an
  // exited process, a process that exec'd inside the window, and a running
  // program.
  EXPECT_GT(plugin, 50u);
  EXPECT_GT(spin, 200u);
  EXPECT_GT(before_exec, 20u);
}

// The user frames of a sample's JSON line: (function, dso) innermost first.
std::vector<std::pair<std::string, std::string>> UserFrames(const nlohmann::json& j) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& f : j["frames"]) {
    std::string dso = f.value("dso", "");
    if (dso == "[kernel.kallsyms]") continue;
    out.emplace_back(f.value("function", ""), dso);
  }
  return out;
}

TEST_F(QueryTest, AProcessThatExecsInsideTheWindowIsAttributedToEachImageInTurn) {
  auto r = Cli({"script", id_, "--json", "--pid", std::to_string(exec_pid_)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  uint64_t last_before = 0, first_after = UINT64_MAX;
  size_t before = 0, after = 0;
  for (const auto& line : Lines(r.out)) {
    auto j = nlohmann::json::parse(line);
    auto frames = UserFrames(j);
    if (frames.empty()) continue;  // in the kernel only
    // Inside execve the old address space is already gone (exec_mmap runs
    // before the new image is mapped) while the saved user registers still
    // point into it: such a sample's user frame is rightly unknown.
    if (line.find("execve") != std::string::npos) continue;
    const auto& [fn, dso] = frames.front();
    uint64_t t = j["time_ns"];
    // The leaf lies in a mapped file (one of the two images, the fork's
    // parent, libc, ld.so) or the vDSO: never unmapped. (Callers of code
    // without frame pointers can be garbage in a frame-pointer chain.)
    EXPECT_NE(dso, "[unknown]") << line;
    if (fn == "exec_spin") {
      EXPECT_NE(dso.find("fr_exec"), std::string::npos) << line;
      ++before;
      last_before = std::max(last_before, t);
    } else if (fn == "spin_a" || fn == "spin_b") {
      EXPECT_NE(dso.find("fr_spin"), std::string::npos) << line;
      ++after;
      first_after = std::min(first_after, t);
    }
  }
  EXPECT_GT(before, 20u) << r.out;
  EXPECT_GT(after, 30u) << r.out;
  EXPECT_LT(last_before, first_after) << "the old image's samples all precede the new one's";
}

TEST_F(QueryTest, ReportFiltersAndSortKeys) {
  auto all = Cli({"report", id_, "--json"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  auto aj = nlohmann::json::parse(all.out);
  auto one = Cli({"report", id_, "--json", "--pid", std::to_string(spin_pid_)});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  auto oj = nlohmann::json::parse(one.out);
  EXPECT_LT(oj["samples"].get<uint64_t>(), aj["samples"].get<uint64_t>());
  EXPECT_EQ(oj["rows"][0]["key"], "spin_a") << one.out;
  EXPECT_NEAR(oj["rows"][0]["self_pct"].get<double>(), 70.0, 12.0);
  for (const auto& r : oj["rows"]) EXPECT_NE(r["key"], "plugin_burn");
  auto comm = Cli({"report", id_, "--json", "--sort", "comm"});
  ASSERT_EQ(comm.exit_code, 0) << comm.err;
  std::set<std::string> comms;
  const auto cj = nlohmann::json::parse(comm.out);
  for (const auto& r : cj["rows"]) comms.insert(r["key"].get<std::string>());
  EXPECT_TRUE(comms.count("fr_spin") && comms.count("fr_dlopen")) << comm.out;
  // --since/--until split the window at the median sample: both halves hold
  // samples and add up to the whole.
  auto info = nlohmann::json::parse(Cli({"info", id_, "--json"}).out);
  const int64_t window_start =
      info["end_ns"].get<int64_t>() - info["meta"]["asked_ns"].get<int64_t>();
  std::vector<int64_t> offsets;
  for (const auto& line : Lines(Cli({"script", id_, "--json"}).out)) {
    offsets.push_back(nlohmann::json::parse(line)["wall_ns"].get<int64_t>() - window_start);
  }
  ASSERT_GT(offsets.size(), 100u);
  std::sort(offsets.begin(), offsets.end());
  const int64_t split = offsets[offsets.size() / 2];
  auto first = Cli({"report", id_, "--json", "--until", std::to_string(split) + "ns"});
  auto second = Cli({"report", id_, "--json", "--since", std::to_string(split + 1) + "ns"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ASSERT_EQ(second.exit_code, 0) << second.err;
  const uint64_t n1 = nlohmann::json::parse(first.out)["samples"];
  const uint64_t n2 = nlohmann::json::parse(second.out)["samples"];
  EXPECT_GT(n1, offsets.size() / 4);
  EXPECT_GT(n2, offsets.size() / 4);
  EXPECT_EQ(n1 + n2, aj["samples"].get<uint64_t>());
  // --tid and the other sort keys.
  auto tid = Cli({"report", id_, "--json", "--tid", std::to_string(spin_pid_), "--sort", "tid"});
  ASSERT_EQ(tid.exit_code, 0) << tid.err;
  auto tj = nlohmann::json::parse(tid.out);
  ASSERT_EQ(tj["rows"].size(), 1u) << tid.out;
  EXPECT_EQ(tj["rows"][0]["key"], std::to_string(spin_pid_));
  EXPECT_EQ(tj["samples"], oj["samples"]);
  auto pid = Cli({"report", id_, "--json", "--sort", "pid", "--limit", "0"});
  auto pj = nlohmann::json::parse(pid.out);
  uint64_t pid_total = 0;
  bool spin_row = false;
  for (const auto& r : pj["rows"]) {
    pid_total += r["self"].get<uint64_t>();
    if (r["key"] == std::to_string(spin_pid_)) {
      spin_row = true;
      EXPECT_EQ(r["self"], oj["samples"]);
    }
  }
  EXPECT_TRUE(spin_row) << pid.out;
  EXPECT_EQ(pid_total, aj["samples"].get<uint64_t>());
  auto dso = Cli({"report", id_, "--json", "--pid", std::to_string(spin_pid_), "--sort", "dso"});
  auto dj = nlohmann::json::parse(dso.out);
  ASSERT_FALSE(dj["rows"].empty());
  EXPECT_NE(dj["rows"][0]["key"].get<std::string>().find("fr_spin"), std::string::npos) << dso.out;
  // --children: the callers of the hot functions come first, main above
  // spin_a (everything spin_a does, main does).
  auto ch = Cli({"report", id_, "--json", "--pid", std::to_string(spin_pid_), "--children"});
  auto cj2 = nlohmann::json::parse(ch.out);
  double main_children = -1, spin_children = -1, prev = 101;
  for (const auto& r : cj2["rows"]) {
    double c = r["children_pct"];
    EXPECT_LE(c, prev) << "rows not ordered by children";
    prev = c;
    if (r["key"] == "main") main_children = c;
    if (r["key"] == "spin_a") spin_children = c;
  }
  EXPECT_GT(main_children, 85.0) << ch.out;
  EXPECT_GT(main_children, spin_children);
  auto bad = Cli({"report", id_, "--sort", "colour"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--sort must be one of"), std::string::npos) << bad.err;
  bad = Cli({"report", id_, "--since", "3s", "--until", "1s"});
  EXPECT_EQ(bad.exit_code, 2);
}

TEST_F(QueryTest, TimelineShowsEachCpuAndThreadOverTheWindow) {
  auto r = Cli({"timeline", id_, "--json", "--bins", "10"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["bins"], 10);
  ASSERT_FALSE(j["cpus"].empty());
  bool found = false;
  uint64_t thread_samples = 0, cpu_samples = 0;
  for (const auto& c : j["cpus"]) cpu_samples += c["samples"].get<uint64_t>();
  for (const auto& t : j["threads"]) {
    thread_samples += t["samples"].get<uint64_t>();
    ASSERT_EQ(t["bins"].size(), 10u);
    if (t["pid"] != spin_pid_) continue;
    found = true;
    // Bins are in time order and the spinning thread's bins say spin_a.
    uint64_t prev = 0, spin_bins = 0;
    for (const auto& b : t["bins"]) {
      EXPECT_GE(b["start_ns"].get<uint64_t>(), prev);
      prev = b["start_ns"];
      if (b["top"] == "spin_a") ++spin_bins;
    }
    EXPECT_GE(spin_bins, 2u) << t.dump();
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(cpu_samples, thread_samples);
  auto text = Cli({"timeline", id_, "--bins", "20"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("LEGEND"), std::string::npos);
  EXPECT_NE(text.out.find("spin_a"), std::string::npos);
  EXPECT_NE(text.out.find("fr_spin " + std::to_string(spin_pid_)), std::string::npos) << text.out;
}

// Every query command on bad input: a clear message, a non-zero exit, no crash.
void ExpectCleanFailure(const RunResult& r, const std::string& what, const std::string& needle) {
  EXPECT_NE(r.exit_code, 0) << what;
  EXPECT_LT(r.exit_code, 128) << what << " crashed: " << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << what << ": " << r.err;
}

const std::vector<std::vector<std::string>> kQueries = {
    {"report"}, {"script"}, {"script", "--json"}, {"timeline"}, {"info"}};

TEST_F(QueryTest, ProgressIsShownOnATerminalAndNeverWhenPiped) {
  const std::string cmd = BuildPath("recorder/cli/recorder") + " --store " + daemon_->store() +
                          " report " + id_ + " >/dev/null";
  // script(1) gives the command a terminal; the threshold is lowered from a
  // second to nothing so that a small record shows progress too.
  auto tty = RunCommand({"/usr/bin/env", "FLIGHTREC_PROGRESS_AFTER_MS=0", "/usr/bin/script", "-qec",
                         cmd, "/dev/null"});
  ASSERT_EQ(tty.exit_code, 0) << tty.err;
  EXPECT_NE(tty.out.find("replaying: "), std::string::npos) << tty.out;
  EXPECT_NE(tty.out.find("\r\033[K"), std::string::npos) << "erased when done";
  auto piped =
      RunCommand({"/usr/bin/env", "FLIGHTREC_PROGRESS_AFTER_MS=0",
                  BuildPath("recorder/cli/recorder"), "--store", daemon_->store(), "report", id_});
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.err.find("replaying"), std::string::npos) << piped.err;
  EXPECT_EQ(piped.out.find("replaying"), std::string::npos);
  // script prints its samples on stdout: no progress line among them, even
  // on a terminal.
  auto script_tty = RunCommand(
      {"/usr/bin/env", "FLIGHTREC_PROGRESS_AFTER_MS=0", "/usr/bin/script", "-qec",
       BuildPath("recorder/cli/recorder") + " --store " + daemon_->store() + " script " + id_,
       "/dev/null"});
  ASSERT_EQ(script_tty.exit_code, 0);
  EXPECT_EQ(script_tty.out.find("replaying"), std::string::npos);
}

TEST_F(QueryTest, HelpExplainsEveryQueryCommand) {
  for (const char* cmd : {"report", "script", "timeline", "export", "flamegraph"}) {
    auto r = RunCommand({BuildPath("recorder/cli/recorder"), cmd, "--help"});
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_NE(r.out.find("ID"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--pid"), std::string::npos) << cmd << ": " << r.out;
  }
  auto r = RunCommand({BuildPath("recorder/cli/recorder"), "report", "--help"});
  for (const char* opt : {"--sort", "--children", "--since", "--until", "--tid", "--json"}) {
    EXPECT_NE(r.out.find(opt), std::string::npos) << opt;
  }
}

TEST_F(QueryTest, ListAndInfoNameTheRecordedProcesses) {
  auto list = Cli({"list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  for (const char* col : {"PIDS", "SIG", "EXE"}) {
    EXPECT_NE(list.out.find(col), std::string::npos) << list.out;
  }
  auto info = Cli({"info", id_});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("Processes:"), std::string::npos) << info.out;
  // The whole list is in --json; an exec'd process is named by what it became.
  auto j = nlohmann::json::parse(Cli({"info", id_, "--json"}).out);
  std::map<uint32_t, std::string> comm;
  for (const auto& p : j["meta"]["processes"]) comm[p["pid"]] = p["comm"];
  EXPECT_EQ(comm[spin_pid_], "fr_spin");
  EXPECT_EQ(comm[exec_pid_], "fr_spin");
  EXPECT_EQ(comm[dl_pid_], "fr_dlopen");
}

TEST_F(QueryTest, UnknownIdIsAClearError) {
  for (const auto& q : kQueries) {
    std::vector<std::string> args = {q[0], "no-such-record"};
    args.insert(args.end(), q.begin() + 1, q.end());
    ExpectCleanFailure(Cli(args), q[0], "no record");
  }
}

// Copies the store, then damages the record file in the copy.
std::string DamagedStore(const std::string& from, const std::string& to, const std::string& id,
                         const std::function<void(const std::string&)>& damage) {
  fs::copy(from, to, fs::copy_options::recursive);
  for (const auto& e : fs::recursive_directory_iterator(to)) {
    if (e.path().filename().string().find(id) != std::string::npos) {
      damage(e.path().string());
      return e.path().string();
    }
  }
  return "";
}

TEST_F(QueryTest, CorruptAndForeignRecordsAreClearErrors) {
  TempDir tmp;
  struct Case {
    std::string name, needle;
    std::function<void(const std::string&)> damage;
  };
  std::vector<Case> cases = {
      // zstd notices first ("damaged") or the section checksum does ("altered").
      {"flipped", "section 'events'",
       [](const std::string& p) {
         // Flip bytes in the middle of the events section, the one every
         // query reads (the record also holds sections replay skips).
         auto reader = store::RecordReader::Open(p);
         ASSERT_TRUE(reader.ok()) << reader.status().message();
         const auto* ev = (*reader)->FindSection("events");
         ASSERT_NE(ev, nullptr);
         off_t at = static_cast<off_t>(ev->offset + ev->stored_size / 2);
         int fd = open(p.c_str(), O_RDWR);
         char buf[16];
         ASSERT_EQ(pread(fd, buf, sizeof(buf), at), static_cast<ssize_t>(sizeof(buf)));
         for (char& c : buf) c = static_cast<char>(~c);
         ASSERT_EQ(pwrite(fd, buf, sizeof(buf), at), static_cast<ssize_t>(sizeof(buf)));
         close(fd);
       }},
      {"truncated", "", [](const std::string& p) { fs::resize_file(p, fs::file_size(p) / 3); }},
      {"foreign", "not a flightrec record",
       [](const std::string& p) {
         // Somebody else's file under the record's name: an ELF binary.
         fs::copy_file("/bin/true", p, fs::copy_options::overwrite_existing);
       }},
  };
  for (const auto& c : cases) {
    std::string store = tmp.path() + "/" + c.name;
    ASSERT_FALSE(DamagedStore(daemon_->store(), store, id_, c.damage).empty());
    for (const auto& q : kQueries) {
      if (q[0] == "info") continue;  // info reads the index; verify covers the file
      std::vector<std::string> args = {BuildPath("recorder/cli/recorder"), "--store", store, q[0],
                                       id_};
      args.insert(args.end(), q.begin() + 1, q.end());
      auto r = RunCommand(args);
      ExpectCleanFailure(r, c.name + " " + q[0], c.needle);
      EXPECT_NE(r.err.find(id_), std::string::npos) << "the error names the record: " << r.err;
    }
  }
}

}  // namespace
}  // namespace flightrec::testing
