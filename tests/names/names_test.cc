// Names a user reads in every output (issue 13 item 5), on a real process
// sampled by a real recorderd: each sample carries its thread's name
// (pthread_setname_np), not the process's; samples in the vDSO are named
// from the record's vDSO image (__vdso_clock_gettime); samples in a PLT stub
// are named as perf names them (clock_gettime@plt), never after the symbol
// below the PLT (`_init`). Checked in report,
// script (replayed and live attribution), and the pprof (go tool pprof),
// folded, Perfetto (protoc --decode_raw), Chrome trace (its thread_name
// metadata) and perf.data (perf script) exports: each names the workers'
// own tids after them.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/support/proc.h"
#include "tests/support/protoc.h"
#include "tests/support/recording.h"

namespace flightrec::testing {
namespace {

class NamesTest : public RecordedSuite<NamesTest> {
 protected:
  static void SetUpTestSuite() {
    Record({BuildPath("tests/names/fr_names"), "2"}, {"--live-attribution"});
  }
  // Report rows as key -> self samples.
  static std::map<std::string, uint64_t> Rows(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"report", id_, "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = daemon_->Cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    if (r.exit_code != 0) return {};
    return SelfByKey(r.out);
  }
  // script --json: for each comm, the leaf functions of its samples.
  static std::map<std::string, std::map<std::string, int>> LeavesByComm(bool live) {
    std::vector<std::string> args = {"script", id_, "--json"};
    if (live) args.push_back("--live");
    auto r = daemon_->Cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::map<std::string, std::map<std::string, int>> out;
    std::istringstream in(r.out);
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line);
      const auto& frames = j["frames"];
      std::string leaf = frames.empty() ? "" : frames[0]["function"].get<std::string>();
      ++out[j["comm"].get<std::string>()][leaf];
    }
    return out;
  }
  // script --json: each tid's comm (one per tid: the workers name
  // themselves before they spin), with the tids of worker-one and worker-two.
  using CommCounts = std::map<uint32_t, std::map<std::string, int>>;
  static std::map<uint32_t, std::string> CommByTid(const CommCounts& counts) {
    std::map<uint32_t, std::string> out;
    for (const auto& [tid, comms] : counts) out[tid] = Top(comms);
    return out;
  }
  // script --json: every name each tid had in a sample. The main thread has
  // two when a sample fell between Spawn's fork and its exec (the test
  // binary's name, then fr_names); under load those can be most of its
  // samples, so CommByTid's top name is not the one it ended with.
  static CommCounts CommCountsByTid() {
    auto r = daemon_->Cli({"script", id_, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    CommCounts seen;
    std::istringstream in(r.out);
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line);
      ++seen[j["tid"].get<uint32_t>()][j["comm"].get<std::string>()];
    }
    return seen;
  }
  // Every sampled tid's track or lane has one of the names script gives
  // that tid (the one it had, for a thread never renamed).
  static void ExpectEachTidNamedAsInScript(const CommCounts& counts,
                                           std::map<int64_t, std::string> named) {
    for (const auto& [t, comms] : counts) {
      EXPECT_TRUE(comms.count(named[t])) << "tid " << t << " named \"" << named[t]
                                         << "\", script says " << ::testing::PrintToString(comms);
    }
  }
  // script --json: every name the main thread (tid == pid) had in the
  // record: fr_names, and the test binary's own name when a sample fell
  // between Spawn's fork and its exec (a real name of that thread).
  static std::set<std::string> MainThreadComms() {
    auto r = daemon_->Cli({"script", id_, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::set<std::string> out;
    std::istringstream in(r.out);
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line);
      if (j["tid"].get<int64_t>() == pid_) out.insert(j["comm"].get<std::string>());
    }
    return out;
  }
  static uint32_t TidOf(const std::map<uint32_t, std::string>& by_tid, const std::string& comm) {
    for (const auto& [tid, c] : by_tid) {
      if (c == comm) return tid;
    }
    return 0;
  }
  static std::string Top(const std::map<std::string, int>& counts) {
    std::string best;
    int n = -1;
    for (const auto& [k, v] : counts) {
      if (v > n) {
        best = k;
        n = v;
      }
    }
    return best;
  }
};

TEST_F(NamesTest, ReportSortedByCommShowsEachThreadsName) {
  auto rows = Rows({"--sort", "comm"});
  EXPECT_GE(rows["worker-one"], 50u) << ::testing::PrintToString(rows);
  EXPECT_GE(rows["worker-two"], 50u) << ::testing::PrintToString(rows);
  EXPECT_GE(rows["clock-spin"], 50u) << ::testing::PrintToString(rows);
  // The process's own name is the main thread's, which only sets up, then waits.
  EXPECT_LT(rows["fr_names"], rows["worker-one"] / 10 + 1) << ::testing::PrintToString(rows);
}

TEST_F(NamesTest, ScriptNamesEachSampleAfterTheThreadThatRanIt) {
  for (bool live : {false, true}) {
    auto by_comm = LeavesByComm(live);
    EXPECT_EQ(Top(by_comm["worker-one"]), "hot_one") << "live " << live;
    EXPECT_EQ(Top(by_comm["worker-two"]), "hot_two") << "live " << live;
    EXPECT_EQ(by_comm["worker-one"].count("hot_two"), 0u) << "live " << live;
    EXPECT_EQ(by_comm["worker-two"].count("hot_one"), 0u) << "live " << live;
    // The clock thread's samples are in its PLT stub, the vDSO and libc.
    EXPECT_GT(by_comm["clock-spin"]["__vdso_clock_gettime"], 0) << "live " << live;
    EXPECT_GT(by_comm["clock-spin"]["clock_gettime@plt"], 0) << "live " << live;
  }
  // Text form too.
  auto r = daemon_->Cli({"script", id_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* comm : {"worker-one", "worker-two"}) {
    EXPECT_TRUE(std::regex_search(
        r.out, std::regex(std::string(comm) + " +" + std::to_string(pid_) + "/[0-9]+ ")))
        << comm;
  }
}

TEST_F(NamesTest, VdsoAndPltFramesAreSymbolized) {
  auto rows = Rows({"--sort", "symbol", "--limit", "0"});
  EXPECT_GT(rows["__vdso_clock_gettime"], 0u) << ::testing::PrintToString(rows);
  // clock-spin spins in its PLT stub for half the run (fr_names.c).
  EXPECT_GT(rows["clock_gettime@plt"], 20u) << ::testing::PrintToString(rows);
  for (const auto& [key, n] : rows) {
    EXPECT_EQ(key.rfind("[vdso]+", 0), std::string::npos) << key << " left unnamed";
    EXPECT_NE(key, "_init") << "a PLT stub named after the symbol below it";
  }
}

TEST_F(NamesTest, PprofLabelsEachSampleWithItsThreadsName) {
  auto r = daemon_->Cli({"export", id_, "--format", "pprof", "-o", Out("names.pb.gz")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> env = {"HOME=" + dir_->path(),
                                        "GOCACHE=" + dir_->path() + "/gocache",
                                        "PPROF_TMPDIR=" + dir_->path()};
  for (const auto& [comm, fn] :
       std::map<std::string, std::string>{{"worker-one", "hot_one"}, {"worker-two", "hot_two"}}) {
    auto top = RunCommand({"/usr/bin/go", "tool", "pprof", "-top", "-nodecount=1",
                           "-tagfocus=comm=" + comm, Out("names.pb.gz")},
                          env);
    ASSERT_EQ(top.exit_code, 0) << top.err;
    // The only row is the thread's own hot loop.
    EXPECT_NE(top.out.find(" " + fn + "\n"), std::string::npos) << comm << "\n" << top.out;
  }
  auto top = RunCommand(
      {"/usr/bin/go", "tool", "pprof", "-top", "-tagfocus=comm=clock-spin", Out("names.pb.gz")},
      env);
  ASSERT_EQ(top.exit_code, 0) << top.err;
  EXPECT_NE(top.out.find("__vdso_clock_gettime"), std::string::npos) << top.out;
  EXPECT_NE(top.out.find("clock_gettime@plt"), std::string::npos) << top.out;
}

TEST_F(NamesTest, FoldedStacksStartWithTheThreadsName) {
  auto r = daemon_->Cli({"export", id_, "--format", "folded", "-o", Out("names.folded")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(Out("names.folded"));
  std::map<std::string, std::set<std::string>> leaves;  // root frame -> leaves
  std::string line;
  while (std::getline(in, line)) {
    const std::string stack = line.substr(0, line.rfind(' '));
    leaves[stack.substr(0, stack.find(';'))].insert(stack.substr(stack.rfind(';') + 1));
  }
  EXPECT_TRUE(leaves["worker-one"].count("hot_one")) << ::testing::PrintToString(leaves);
  EXPECT_TRUE(leaves["worker-two"].count("hot_two")) << ::testing::PrintToString(leaves);
  EXPECT_TRUE(leaves["clock-spin"].count("__vdso_clock_gettime"))
      << ::testing::PrintToString(leaves);
  EXPECT_FALSE(leaves["worker-one"].count("hot_two"));
}

// The workers' tids as the record names them; each export must agree.
TEST_F(NamesTest, PerfettoThreadTracksCarryEachThreadsName) {
  const auto counts = CommCountsByTid();
  const auto by_tid = CommByTid(counts);
  const uint32_t one = TidOf(by_tid, "worker-one"), two = TidOf(by_tid, "worker-two");
  ASSERT_TRUE(one && two && one != two && one != static_cast<uint32_t>(pid_))
      << ::testing::PrintToString(by_tid);
  const std::string file = Out("names.pftrace");
  auto r = daemon_->Cli({"export", id_, "--format", "perfetto", "-o", file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Decoded with a schema naming just the TrackDescriptor's thread and
  // process fields (numbers as in recorder/export/perfetto.cc, from
  // Perfetto's track_descriptor.proto, thread_descriptor.proto and
  // process_descriptor.proto): the names as strings, not --decode_raw's
  // guesses.
  auto typed =
      ProtocDecode(dir_->path(), "tracks.proto",
                   "syntax = \"proto2\";\n"
                   "message ThreadDescriptor { optional int32 pid = 1; "
                   "optional int32 tid = 2; optional string thread_name = 5; }\n"
                   "message ProcessDescriptor { optional int32 pid = 1; "
                   "optional string process_name = 6; }\n"
                   "message TrackDescriptor { optional uint64 uuid = 1; "
                   "optional ProcessDescriptor process = 3; "
                   "optional ThreadDescriptor thread = 4; }\n"
                   "message TracePacket { optional TrackDescriptor track_descriptor = 60; }\n"
                   "message Trace { repeated TracePacket packet = 1; }\n",
                   file);
  ASSERT_EQ(typed.exit_code, 0) << typed.err;
  // thread { pid: P tid: T thread_name: "N" }, one field a line.
  std::map<uint32_t, std::string> names;  // the last name each tid's track was given
  std::set<uint32_t> pids;
  std::set<std::string> process_names;
  std::istringstream in(typed.out);
  std::string line;
  std::smatch m;
  uint32_t pid = 0, tid = 0;
  bool in_thread = false;
  while (std::getline(in, line)) {
    if (line.find("thread {") != std::string::npos) {
      in_thread = true;
      pid = tid = 0;
    } else if (in_thread && std::regex_search(line, m, std::regex("^ *pid: ([0-9]+)$"))) {
      pid = static_cast<uint32_t>(std::stoul(m[1]));
    } else if (in_thread && std::regex_search(line, m, std::regex("^ *tid: ([0-9]+)$"))) {
      tid = static_cast<uint32_t>(std::stoul(m[1]));
    } else if (in_thread && std::regex_search(line, m, std::regex("^ *thread_name: \"(.*)\"$"))) {
      names[tid] = m[1];
      pids.insert(pid);
    } else if (line.find('}') != std::string::npos) {
      in_thread = false;
    } else if (std::regex_search(line, m, std::regex("^ *process_name: \"(.*)\"$"))) {
      process_names.insert(m[1]);
    }
  }
  // The process is named after what its main thread was called, from the
  // exec, never after a worker: each process name is fr_names or one the main
  // thread had in a sample (before exec, the test binary's). fr_names' main
  // thread is seldom sampled after its exec, so fr_names comes from the exec.
  auto main_comms = MainThreadComms();
  main_comms.insert("fr_names");
  for (const auto& n : process_names)
    EXPECT_TRUE(main_comms.count(n)) << n << " not in " << ::testing::PrintToString(main_comms);
  EXPECT_TRUE(process_names.count("fr_names")) << ::testing::PrintToString(process_names);
  EXPECT_EQ(names[one], "worker-one") << typed.out.substr(0, 4000);
  EXPECT_EQ(names[two], "worker-two") << typed.out.substr(0, 4000);
  EXPECT_EQ(names[TidOf(by_tid, "clock-spin")], "clock-spin");
  EXPECT_TRUE(pids.count(static_cast<uint32_t>(pid_))) << typed.out.substr(0, 4000);
  // Every sampled tid has a named track, with a name script gives it.
  ExpectEachTidNamedAsInScript(counts, {names.begin(), names.end()});
  // The raw decode agrees: PerfSample (66) tids are these tracks' tids.
  auto raw = ProtocDecodeRaw(file);
  ASSERT_EQ(raw.exit_code, 0) << raw.err;
  EXPECT_NE(raw.out.find("5: \"worker-one\""), std::string::npos);
}

TEST_F(NamesTest, ChromeTraceNamesEachThreadsLaneAndItsSlices) {
  const auto counts = CommCountsByTid();
  const auto by_tid = CommByTid(counts);
  const uint32_t one = TidOf(by_tid, "worker-one"), two = TidOf(by_tid, "worker-two");
  ASSERT_TRUE(one && two && one != two) << ::testing::PrintToString(by_tid);
  auto r = daemon_->Cli({"export", id_, "--format", "chrome", "-o", Out("names.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(Out("names.json"));
  const auto j = nlohmann::json::parse(in);
  std::map<int64_t, std::string> lane_name;         // tid -> thread_name
  std::map<int64_t, std::set<std::string>> slices;  // tid -> slice names
  auto main_comms = MainThreadComms();
  main_comms.insert("fr_names");  // from the exec, as in the Perfetto test
  std::string last_process_name;
  for (const auto& e : j["traceEvents"]) {
    if (e["pid"] != pid_) continue;
    if (e["ph"] == "M" && e["name"] == "process_name") {
      // A name the main thread had (renamed by the exec: emitted again),
      // never a worker's.
      last_process_name = e["args"]["name"];
      EXPECT_TRUE(main_comms.count(last_process_name))
          << last_process_name << ": named after a thread, not the process; main thread had "
          << ::testing::PrintToString(main_comms);
    } else if (e["ph"] == "M" && e["name"] == "thread_name") {
      lane_name[e["tid"].get<int64_t>()] = e["args"]["name"];
    } else if (e["ph"] == "B") {
      slices[e["tid"].get<int64_t>()].insert(e["name"].get<std::string>());
    }
  }
  EXPECT_EQ(last_process_name, "fr_names");
  EXPECT_EQ(lane_name[one], "worker-one") << ::testing::PrintToString(lane_name);
  EXPECT_EQ(lane_name[two], "worker-two") << ::testing::PrintToString(lane_name);
  ExpectEachTidNamedAsInScript(counts, lane_name);
  // The named lanes hold their own thread's work.
  EXPECT_TRUE(slices[one].count("hot_one") && !slices[one].count("hot_two"));
  EXPECT_TRUE(slices[two].count("hot_two") && !slices[two].count("hot_one"));
}

TEST_F(NamesTest, PerfScriptShowsEachThreadsNameWithItsTid) {
  const auto by_tid = CommByTid(CommCountsByTid());
  const uint32_t one = TidOf(by_tid, "worker-one"), two = TidOf(by_tid, "worker-two");
  ASSERT_TRUE(one && two && one != two) << ::testing::PrintToString(by_tid);
  auto r = daemon_->Cli({"export", id_, "-f", "perf", "-o", Out("names.perf.data")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // HOME: perf's build-id cache starts empty (see tests/export/perf_data_test.cc).
  auto lines = RunCommand({"/usr/bin/perf", "script", "-i", Out("names.perf.data"), "-F",
                           "comm,tid,ip,sym", "--hide-call-graph"},
                          {"HOME=" + dir_->path(), "PAGER=cat"});
  ASSERT_EQ(lines.exit_code, 0) << lines.err;
  // "COMM TID IP SYM" per sample (perf prints sym only with ip): the comm
  // perf shows for each tid, and the leaf symbols seen under each comm.
  std::map<uint32_t, std::set<std::string>> comms;
  std::map<std::string, std::map<std::string, int>> syms;
  std::istringstream in(lines.out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string comm, ip, sym;
    uint32_t tid = 0;
    if (!(f >> comm >> tid >> ip)) continue;
    f >> sym;
    comms[tid].insert(comm);
    ++syms[comm][sym];
  }
  EXPECT_EQ(comms[one], std::set<std::string>{"worker-one"}) << lines.out.substr(0, 2000);
  EXPECT_EQ(comms[two], std::set<std::string>{"worker-two"}) << lines.out.substr(0, 2000);
  for (const auto& [t, c] : by_tid) {
    EXPECT_TRUE(comms[t].count(c)) << "tid " << t << " " << c;
  }
  EXPECT_EQ(Top(syms["worker-one"]), "hot_one") << ::testing::PrintToString(syms["worker-one"]);
  EXPECT_EQ(Top(syms["worker-two"]), "hot_two") << ::testing::PrintToString(syms["worker-two"]);
  EXPECT_EQ(syms["worker-one"].count("hot_two"), 0u);
  EXPECT_EQ(syms["worker-two"].count("hot_one"), 0u);
}

// pprof's main binary ("File:") is the recorded process's executable, not
// the first file by name (a library, or another process's memfd).
TEST_F(NamesTest, PprofMainBinaryIsTheRecordedExecutable) {
  ASSERT_EQ(daemon_->Cli({"export", id_, "-f", "pprof", "-o", Out("main.pb.gz")}).exit_code, 0);
  auto top = RunCommand({"/usr/bin/go", "tool", "pprof", "-top", "-nodecount=1", Out("main.pb.gz")},
                        {"HOME=" + dir_->path(), "GOCACHE=" + dir_->path() + "/gocache",
                         "PPROF_TMPDIR=" + dir_->path()});
  ASSERT_EQ(top.exit_code, 0) << top.err;
  EXPECT_NE(top.out.find("File: fr_names\n"), std::string::npos) << top.out;
}

// Threads named before recorderd started are known from its /proc scan
// (/proc/PID/task/TID/comm), not only from later COMM records.
TEST(NamesBeforeTheDaemonTest, ThreadsNamedBeforeTheDaemonStartedKeepTheirNames) {
  TempDir dir;
  pid_t p = Spawn({BuildPath("tests/names/fr_names"), "120"});  // ended below
  // Wait (bounded) until the threads have named themselves.
  auto named = [&] {
    std::set<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(
             "/proc/" + std::to_string(p) + "/task", std::filesystem::directory_options::none)) {
      std::ifstream in(e.path() / "comm");
      std::string c;
      std::getline(in, c);
      names.insert(c);
    }
    return names.count("worker-one") && names.count("worker-two");
  };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!named() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(named());
  Daemon daemon(dir.path());
  ASSERT_TRUE(daemon.ready()) << daemon.Log();
  int st = 0;
  ASSERT_EQ(waitpid(p, &st, WNOHANG), 0) << "fr_names ended before recorderd was ready";
  // Let its threads run for two CPU seconds under recorderd (bounded), then
  // end it.
  const uint64_t start = CpuTicks(p), hz = static_cast<uint64_t>(sysconf(_SC_CLK_TCK));
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (CpuTicks(p) < start + 2 * hz && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(p, SIGTERM);
  ASSERT_EQ(waitpid(p, &st, 0), p);
  ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
  std::string id;
  ASSERT_NO_FATAL_FAILURE(DumpLast5s(daemon, p, {}, &id));
  auto rep = daemon.Cli({"report", id, "--sort", "comm", "--json"});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  auto rows = SelfByKey(rep.out);
  EXPECT_GE(rows["worker-one"], 20u) << rep.out;
  EXPECT_GE(rows["worker-two"], 20u) << rep.out;
  // The main thread (fr_names) only sets up, then sleeps and joins.
  EXPECT_LT(rows["fr_names"], rows["worker-one"] / 10 + 1) << rep.out;
}

}  // namespace
}  // namespace flightrec::testing
