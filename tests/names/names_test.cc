// Names a user reads in every output (issue 13 item 5), on a real process
// sampled by a real recorderd: each sample carries its thread's name
// (pthread_setname_np), not the process's; samples in the vDSO are named
// from the record's vDSO image (__vdso_clock_gettime); samples in a PLT stub
// are named as perf names them (clock_gettime@plt), never after the symbol
// below the PLT (`_init`). Checked in report,
// script (replayed and live attribution), and the pprof (go tool pprof) and
// folded exports.
#include <gtest/gtest.h>
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

#include "tests/cli/run_util.h"
#include "tests/recorder/daemon_util.h"
#include "tests/store/test_util.h"

namespace flightrec::testing {
namespace {

class NamesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new store::testing::TempDir();
    daemon_ = new Daemon(dir_->path());
    ASSERT_TRUE(daemon_->ready()) << daemon_->Log();
    pid_t p = Spawn({BuildPath("tests/names/fr_names"), "2"});
    int st = 0;
    waitpid(p, &st, 0);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    pid_ = p;
    auto r = daemon_->Cli(
        {"dump", "--last", "5s", "--pid", std::to_string(p), "--live-attribution", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    id_ = nlohmann::json::parse(r.out)["id"];
  }
  static void TearDownTestSuite() {
    delete daemon_;
    delete dir_;
  }
  static std::string Out(const std::string& name) { return dir_->path() + "/" + name; }
  // Report rows as key -> self samples.
  static std::map<std::string, uint64_t> Rows(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"report", id_, "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = daemon_->Cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::map<std::string, uint64_t> rows;
    if (r.exit_code != 0) return rows;
    const auto report = nlohmann::json::parse(r.out);
    for (const auto& row : report["rows"]) {
      rows[row["key"].get<std::string>()] += row["self"].get<uint64_t>();
    }
    return rows;
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

  static store::testing::TempDir* dir_;
  static Daemon* daemon_;
  static std::string id_;
  static pid_t pid_;
};

store::testing::TempDir* NamesTest::dir_ = nullptr;
Daemon* NamesTest::daemon_ = nullptr;
std::string NamesTest::id_;
pid_t NamesTest::pid_ = 0;

TEST_F(NamesTest, ReportSortedByCommShowsEachThreadsName) {
  auto rows = Rows({"--sort", "comm"});
  EXPECT_GE(rows["worker-one"], 50u) << ::testing::PrintToString(rows);
  EXPECT_GE(rows["worker-two"], 50u) << ::testing::PrintToString(rows);
  EXPECT_GE(rows["clock-spin"], 50u) << ::testing::PrintToString(rows);
  // The process's own name is the main thread's, which only waits.
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

// Threads named before recorderd started are known from its /proc scan
// (/proc/PID/task/TID/comm), not only from later COMM records.
TEST(NamesBeforeTheDaemonTest, ThreadsNamedBeforeTheDaemonStartedKeepTheirNames) {
  store::testing::TempDir dir;
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
  auto cpu_ticks = [&] {
    std::ifstream in("/proc/" + std::to_string(p) + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), {});
    std::istringstream f(text.substr(text.rfind(')') + 2));
    std::string field;
    uint64_t utime = 0, stime = 0;
    for (int i = 3; i <= 15 && f >> field; ++i) {
      if (i == 14) utime = std::stoull(field);
      if (i == 15) stime = std::stoull(field);
    }
    return utime + stime;
  };
  const uint64_t start = cpu_ticks(), hz = static_cast<uint64_t>(sysconf(_SC_CLK_TCK));
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (cpu_ticks() < start + 2 * hz && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(p, SIGTERM);
  ASSERT_EQ(waitpid(p, &st, 0), p);
  ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
  auto r = daemon.Cli({"dump", "--last", "5s", "--pid", std::to_string(p), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string id = nlohmann::json::parse(r.out)["id"];
  auto rep = daemon.Cli({"report", id, "--sort", "comm", "--json"});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  std::map<std::string, uint64_t> rows;
  const auto report = nlohmann::json::parse(rep.out);
  for (const auto& row : report["rows"]) rows[row["key"]] = row["self"];
  EXPECT_GE(rows["worker-one"], 20u) << rep.out;
  EXPECT_GE(rows["worker-two"], 20u) << rep.out;
  // The main thread (fr_names) only sleeps and joins.
  EXPECT_LT(rows["fr_names"], rows["worker-one"] / 10 + 1) << rep.out;
}

}  // namespace
}  // namespace flightrec::testing
