// recorder-coredump through the real kernel.core_pattern (issue 6): real
// crashes of tests/programs/fr_crash stored with metadata, a backtrace and
// recorderd's history; cores extracted byte for byte; bad input on the hook's
// stdin; a crash storm. The previous core_pattern is restored afterwards,
// whatever happens.
#include <elf.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/personality.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/scoped_fd.h"
#include "common/terminal_escape.h"
#include "store/record_file.h"
#include "tests/support/daemon.h"
#include "tests/support/files.h"
#include "tests/support/run.h"

namespace flightrec::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kPatternFile = "/proc/sys/kernel/core_pattern";
constexpr const char* kPipeLimitFile = "/proc/sys/kernel/core_pipe_limit";

// Puts back the core_pattern and core_pipe_limit found at construction
// (optionally setting others meanwhile), whatever happens in between.
class PatternGuard {
 public:
  PatternGuard() : pattern_(ReadFile(kPatternFile)), limit_(ReadFile(kPipeLimitFile)) {}
  PatternGuard(const std::string& pattern, const std::string& limit) : PatternGuard() {
    std::ofstream(kPatternFile) << pattern;
    std::ofstream(kPipeLimitFile) << limit;
  }
  ~PatternGuard() {
    std::ofstream(kPatternFile) << pattern_;
    std::ofstream(kPipeLimitFile) << limit_;
  }
  const std::string& pattern() const { return pattern_; }
  const std::string& limit() const { return limit_; }

 private:
  std::string pattern_, limit_;
};

// In the environment of every crashing test program: no record may hold it.
constexpr const char* kSecretValue = "hunter2-flightrec-7f3a9c";

// Every section of a record but `except`, decompressed, with its meta.
std::string RecordText(const std::string& store, const std::string& id,
                       const std::string& except = "") {
  std::string all;
  for (const auto& e : fs::directory_iterator(store)) {
    if (e.path().filename().string().rfind(id, 0) != 0) continue;
    auto r = store::RecordReader::Open(e.path().string());
    if (!r.ok()) continue;
    all += (*r)->meta().dump();
    for (const auto& sec : (*r)->sections()) {
      if (sec.name == except) continue;
      auto text = (*r)->ReadSection(sec.name);
      if (text.ok()) all += *text;
    }
  }
  return all;
}

// A line "Name:\tvalue" of /proc/PID/status ("" if absent).
std::string StatusField(pid_t pid, const std::string& name) {
  std::istringstream in(ReadFile(fmt::format("/proc/{}/status", pid)));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + ":", 0) == 0) {
      std::string v = line.substr(name.size() + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  }
  return "";
}

class CoredumpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    guard_ = new PatternGuard();
    dir_ = new TempDir();
    chmod(dir_->path().c_str(), 0755);
    // Every test's crashes are root's and most want their history: the
    // daemon's per-uid dump budget (20 an hour by default) is not what this
    // suite tests.
    daemon_ = new Daemon(
        dir_->path(), {"--max-dumps-per-hour", "10000", "--max-dumps-per-uid-per-hour", "10000"});
    ASSERT_TRUE(daemon_->ready()) << daemon_->Log();
    auto r = daemon_->Cli(
        {"coredump", "install", "--hook", BuildPath("coredump-hook/recorder-coredump")});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_NE(ReadFile("/proc/sys/kernel/core_pattern").find("recorder-coredump"),
              std::string::npos);
  }
  // Each test starts with no cores counted against the per-executable rate
  // limit (the storm test exhausts it on purpose).
  void SetUp() override {
    std::error_code ec;
    fs::remove(daemon_->store() + "/.coredump-rate", ec);
  }
  static void TearDownTestSuite() {
    auto r = daemon_->Cli({"coredump", "uninstall"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    delete daemon_;
    delete dir_;
    delete guard_;  // restores the original pattern even if uninstall failed
  }

  // Runs fr_crash MODE (spinning MS ms first, a secret in its environment)
  // and returns its pid once it died from a signal.
  static pid_t Crash(const std::string& mode, int* sig, int ms = 400) {
    pid_t pid = fork();
    if (pid == 0) {
      rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
      setrlimit(RLIMIT_CORE, &unlimited);
      int devnull = open("/dev/null", O_WRONLY);
      dup2(devnull, 1);
      setenv("FLIGHTREC_TEST_SECRET", kSecretValue, 1);
      execl(BuildPath("tests/programs/fr_crash").c_str(), "fr_crash", mode.c_str(),
            std::to_string(ms).c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    *sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    return pid;
  }

  // The crash record of pid, waiting (bounded) for the hook to commit it.
  static nlohmann::json WaitForCrash(pid_t pid) {
    auto deadline = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < deadline) {
      auto r = daemon_->Cli({"crash", "list", "--pid", std::to_string(pid), "--json"});
      if (r.exit_code == 0) {
        auto j = nlohmann::json::parse(r.out, nullptr, false);
        if (j.is_array() && !j.empty()) return j[0];
      }
      std::this_thread::sleep_for(50ms);
    }
    return nullptr;
  }

  static PatternGuard* guard_;
  static TempDir* dir_;
  static Daemon* daemon_;
};

PatternGuard* CoredumpTest::guard_ = nullptr;
TempDir* CoredumpTest::dir_ = nullptr;
Daemon* CoredumpTest::daemon_ = nullptr;

struct Case {
  std::string mode;
  int signal;
  std::string signame;
  std::string crashing_function;
  std::string caller;
  int ms = 400;  // CPU time spun in spin_a before the crash
};

// Names of a backtrace thread's frames, innermost first.
std::vector<std::string> FrameNames(const nlohmann::json& thread) {
  std::vector<std::string> names;
  for (const auto& f : thread["frames"]) names.push_back(f.value("function", ""));
  return names;
}
bool Has(const std::vector<std::string>& v, const std::string& name) {
  return std::find(v.begin(), v.end(), name) != v.end();
}

TEST_F(CoredumpTest, RealCrashesAreStoredWithBacktraceAndHistory) {
  // segv spins 6 s so that its history fills the whole 5 s window.
  for (const Case& c :
       std::vector<Case>{{"segv", SIGSEGV, "SIGSEGV", "crash_here", "main", 6000},
                         {"abort", SIGABRT, "SIGABRT", "abort", "crash_here"},
                         {"fpe", SIGFPE, "SIGFPE", "crash_here", "main"},
                         {"threads", SIGSEGV, "SIGSEGV", "crash_here", "thread_main"}}) {
    SCOPED_TRACE(c.mode);
    int sig = 0;
    pid_t pid = Crash(c.mode, &sig, c.ms);
    ASSERT_EQ(sig, c.signal);
    nlohmann::json crash = WaitForCrash(pid);
    ASSERT_FALSE(crash.is_null()) << "no crash listed for pid " << pid << "\n" << daemon_->Log();
    EXPECT_EQ(crash["pid"], pid);
    EXPECT_EQ(crash["signal_name"], c.signame);
    EXPECT_EQ(crash["exe"], fs::canonical(BuildPath("tests/programs/fr_crash")).string());
    EXPECT_TRUE(crash["core_stored"].get<bool>());
    EXPECT_FALSE(crash["truncated"].get<bool>());
    const std::string id = crash["id"];

    // The core comes back whole, and is this process's core: its ELF notes
    // name the pid and the signal.
    const std::string core = dir_->path() + "/core." + c.mode;
    auto r = daemon_->Cli({"crash", "core", id, "-o", core});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(fs::file_size(core), crash["core_size"].get<uint64_t>());
    auto notes = RunCommand({"/usr/bin/eu-readelf", "--notes", core});
    ASSERT_EQ(notes.exit_code, 0) << notes.err;
    EXPECT_NE(notes.out.find("CORE"), std::string::npos);
    EXPECT_NE(notes.out.find("info.si_signo: " + std::to_string(c.signal)), std::string::npos)
        << notes.out.substr(0, 2000);
    EXPECT_NE(notes.out.find("pid: " + std::to_string(pid)), std::string::npos);

    // Backtrace: the crashing function and its caller, crashing thread first
    // (by its global tid); every thread unwound to fr_crash's own entry.
    auto info = daemon_->Cli({"crash", "info", id, "--json"});
    ASSERT_EQ(info.exit_code, 0) << info.err;
    auto j = nlohmann::json::parse(info.out);
    const auto& threads = j["backtrace"]["threads"];
    ASSERT_FALSE(threads.empty()) << info.out;
    EXPECT_EQ(j["backtrace"]["crashing_tid"], crash["global_tid"]);
    EXPECT_EQ(threads[0]["tid"], crash["global_tid"]);
    std::vector<std::string> names = FrameNames(threads[0]);
    auto at = std::find(names.begin(), names.end(), c.crashing_function);
    ASSERT_NE(at, names.end()) << j["backtrace"].dump();
    EXPECT_NE(std::find_if(at + 1, names.end(),
                           [&](const std::string& n) { return n.rfind(c.caller, 0) == 0; }),
              names.end())
        << j["backtrace"].dump();
    const size_t want_threads = c.mode == "threads" ? 2 : 1;
    ASSERT_EQ(threads.size(), want_threads) << j["backtrace"].dump();
    ASSERT_EQ(j["metadata"]["threads"].size(), want_threads) << j["metadata"].dump();
    std::set<int> tids;
    for (const auto& t : j["metadata"]["threads"]) tids.insert(t["tid"].get<int>());
    for (size_t k = 0; k < threads.size(); ++k) {
      SCOPED_TRACE("thread " + std::to_string(k));
      EXPECT_TRUE(tids.count(threads[k]["tid"].get<int>())) << threads[k].dump();
      auto tn = FrameNames(threads[k]);
      // The main thread spins in spin_a (or the clock it reads) under main;
      // the crashing one of `threads` is under thread_main.
      EXPECT_TRUE(Has(tn, k == 0 && c.mode == "threads" ? "thread_main" : "main"))
          << threads[k].dump();
      if (c.mode == "threads" && k == 1) {
        EXPECT_TRUE(Has(tn, "spin_a")) << threads[k].dump();
      }
    }
    // The reduced copy the unwinder read held all of this small core.
    EXPECT_FALSE(j["backtrace"]["input"]["reduced"].get<bool>()) << j["backtrace"]["input"];

    // History: the crashing thread's (global tid) last seconds show spin_a,
    // over the 5 s window before the crash, also as a timeline.
    ASSERT_FALSE(j["history"].is_null()) << info.out;
    const auto& h = j["history"];
    EXPECT_EQ(h["tid"], crash["global_tid"]);
    EXPECT_GT(h["samples"].get<uint64_t>(), 20u) << info.out;
    EXPECT_EQ(h["top"][0]["function"], "spin_a") << info.out;
    EXPECT_GE(h["window_s"].get<double>(), 4.5) << h.dump();
    EXPECT_LE(h["window_s"].get<double>(), 5.5) << h.dump();
    EXPECT_GE(h["first_ns"].get<uint64_t>(), h["window_start_ns"].get<uint64_t>());
    EXPECT_LE(h["last_ns"].get<uint64_t>(), h["window_end_ns"].get<uint64_t>());
    if (c.ms > 5000) {
      // Busy for longer than the window: its samples span most of it (the
      // daemon is asked a little after the crash).
      EXPECT_GE(h["span_s"].get<double>(), 3.0) << h.dump();
      EXPECT_LE(h["span_s"].get<double>(), 5.5) << h.dump();
    }
    const auto& tl = h["timeline"];
    EXPECT_EQ(tl["bins"], 20);
    ASSERT_EQ(tl["lane"].size(), 20u);
    ASSERT_FALSE(tl["legend"].empty());
    EXPECT_EQ(tl["legend"][0]["function"], "spin_a");
    EXPECT_EQ(tl["legend"][0]["letter"], "A");
    // The thread ran until the crash: late bins show it (the window ends
    // when the hook asked, a little after the crash).
    const std::string lane_text = tl["text"];
    ASSERT_EQ(lane_text.size(), 20u);
    const size_t last_busy = lane_text.find_last_not_of('.');
    ASSERT_NE(last_busy, std::string::npos) << lane_text;
    EXPECT_GE(last_busy, 10u) << lane_text;
    EXPECT_NE(lane_text.find('A'), std::string::npos) << lane_text;
    uint64_t binned = 0;
    for (const auto& b : tl["lane"]) {
      for (const auto& [f, n] : b["counts"].items()) binned += n.get<uint64_t>();
    }
    EXPECT_EQ(binned, h["samples"].get<uint64_t>());

    // /proc/PID/maps at the crash is stored and shown.
    EXPECT_NE(j["maps"].get<std::string>().find(crash["exe"].get<std::string>()), std::string::npos)
        << j["maps"];
    auto text = daemon_->Cli({"crash", "info", id, "--maps"});
    EXPECT_NE(text.out.find("Backtrace (crashing thread first)"), std::string::npos);
    EXPECT_NE(text.out.find("spin_a"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("timeline (20 bins"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("|" + tl["text"].get<std::string>() + "|"), std::string::npos)
        << text.out;
    EXPECT_NE(text.out.find("Mappings (/proc/"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find(j["maps"].get<std::string>()), std::string::npos);
    EXPECT_EQ(daemon_->Cli({"crash", "info", id}).out.find("Mappings (/proc/"), std::string::npos);

    // The environment is not stored: not in the metadata, the backtrace,
    // the maps, the history (only the core, the process's memory, has it).
    const std::string stored = RecordText(daemon_->store(), id, "core") +
                               RecordText(daemon_->store(), h["id"].get<std::string>());
    EXPECT_GT(stored.size(), 1000u);
    EXPECT_EQ(stored.find(kSecretValue), std::string::npos);
    EXPECT_EQ(stored.find("FLIGHTREC_TEST_SECRET"), std::string::npos);
    EXPECT_NE(ReadFile(core).find(kSecretValue), std::string::npos)
        << "the secret was in the process's environment";
  }
}

// Issue 13 item 5: threads are named as pthread_setname_np named them, in
// the backtrace (JSON and text) and in the history before the crash.
TEST_F(CoredumpTest, CrashInfoNamesTheThreadsInTheBacktraceAndTheHistory) {
  int sig = 0;
  // worker-two spins 1 s of CPU time in spin_b, then dereferences NULL;
  // worker-one spins in spin_a throughout; main waits in pthread_join.
  pid_t pid = Crash("names", &sig, 1000);
  ASSERT_EQ(sig, SIGSEGV);
  nlohmann::json crash = WaitForCrash(pid);
  ASSERT_FALSE(crash.is_null()) << "no crash listed for pid " << pid << "\n" << daemon_->Log();
  const std::string id = crash["id"];
  auto info = daemon_->Cli({"crash", "info", id, "--json"});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  auto j = nlohmann::json::parse(info.out);
  const auto& threads = j["backtrace"]["threads"];
  ASSERT_EQ(threads.size(), 3u) << j["backtrace"].dump();
  // Each backtrace thread carries its name, and the name goes with its own
  // stack: worker-two crashed in crash_here under spin_b's caller, worker-one
  // was in spin_a, the main thread (the process's name) in pthread_join.
  EXPECT_EQ(threads[0]["tid"], crash["global_tid"]);
  EXPECT_EQ(threads[0]["comm"], "worker-two") << threads[0].dump();
  EXPECT_TRUE(Has(FrameNames(threads[0]), "crash_here")) << threads[0].dump();
  EXPECT_TRUE(Has(FrameNames(threads[0]), "named_main")) << threads[0].dump();
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& t : threads) by_name[t.value("comm", "")] = t;
  ASSERT_EQ(by_name.count("worker-one"), 1u) << j["backtrace"].dump();
  ASSERT_EQ(by_name.count("fr_crash"), 1u) << j["backtrace"].dump();
  EXPECT_TRUE(Has(FrameNames(by_name["worker-one"]), "named_main")) << j["backtrace"].dump();
  EXPECT_FALSE(Has(FrameNames(by_name["worker-one"]), "spin_b")) << j["backtrace"].dump();
  EXPECT_TRUE(Has(FrameNames(by_name["fr_crash"]), "main")) << j["backtrace"].dump();
  EXPECT_FALSE(Has(FrameNames(by_name["fr_crash"]), "named_main")) << j["backtrace"].dump();
  // The metadata's names (read from /proc at the crash) agree, tid by tid.
  std::map<int, std::string> meta;
  for (const auto& t : j["metadata"]["threads"]) meta[t["tid"]] = t["comm"];
  for (const auto& t : threads) EXPECT_EQ(meta[t["tid"].get<int>()], t["comm"]) << t.dump();

  // History: the crashing thread's samples, named after it (from the
  // samples' own comm, not the process's), busy in spin_b.
  ASSERT_FALSE(j["history"].is_null()) << info.out;
  const auto& h = j["history"];
  EXPECT_EQ(h["tid"], crash["global_tid"]);
  EXPECT_EQ(h["comm"], "worker-two") << h.dump();
  EXPECT_GT(h["samples"].get<uint64_t>(), 20u) << h.dump();
  EXPECT_EQ(h["top"][0]["function"], "spin_b") << h.dump();
  // The history record itself names both workers' samples (report --sort
  // comm on it, the process's samples), with the crashing tid's under
  // worker-two.
  auto rep = daemon_->Cli({"report", h["id"].get<std::string>(), "--pid", std::to_string(pid),
                           "--sort", "comm", "--json"});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  std::map<std::string, uint64_t> rows;
  const auto report = nlohmann::json::parse(rep.out);
  for (const auto& row : report["rows"]) rows[row["key"]] = row["self"];
  EXPECT_GE(rows["worker-one"], 20u) << rep.out;
  EXPECT_GE(rows["worker-two"], 20u) << rep.out;

  // Text form: each backtrace thread's header names it, the crashed one
  // first; the history line names the thread.
  auto text = daemon_->Cli({"crash", "info", id});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  const auto tid_of = [&](const std::string& n) {
    return std::to_string(by_name[n]["tid"].get<int>());
  };
  EXPECT_NE(text.out.find("  thread " + tid_of("worker-two") + " worker-two (crashed):\n"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("  thread " + tid_of("worker-one") + " worker-one:\n"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("  thread " + tid_of("fr_crash") + " fr_crash:\n"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find(" samples of thread " + tid_of("worker-two") + " (worker-two) in the "),
            std::string::npos)
      << text.out;
}

TEST_F(CoredumpTest, CrashListFiltersByNewestTimePidAndExecutable) {
  int sig = 0;
  const std::string exe = fs::canonical(BuildPath("tests/programs/fr_crash")).string();
  pid_t a = Crash("segv", &sig, 0);
  auto ca = WaitForCrash(a);
  ASSERT_FALSE(ca.is_null());
  // --since: 1 ms after a was stored, so before b (which crashes after).
  const std::string since_arg =
      fmt::format("@{:.6f}", (ca["created_ns"].get<int64_t>() + 1'000'000) / 1e9);
  pid_t b = Crash("fpe", &sig, 0);
  auto cb = WaitForCrash(b);
  ASSERT_FALSE(cb.is_null());
  auto list = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"crash", "list"});
    auto r = daemon_->Cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r;
  };
  auto pids = [](const std::string& json) {
    std::set<pid_t> out;
    for (const auto& c : nlohmann::json::parse(json)) out.insert(c["pid"].get<pid_t>());
    return out;
  };
  auto all = pids(list({"--json"}).out);
  EXPECT_TRUE(all.count(a) && all.count(b));
  EXPECT_EQ(pids(list({"--pid", std::to_string(a), "--json"}).out), std::set<pid_t>{a});
  auto newest = nlohmann::json::parse(list({"-1", "--json"}).out);
  ASSERT_EQ(newest.size(), 1u);
  EXPECT_EQ(newest[0]["id"], cb["id"]);
  auto since = pids(list({"--since", since_arg, "--json"}).out);
  EXPECT_TRUE(since.count(b));
  EXPECT_FALSE(since.count(a));
  EXPECT_EQ(pids(list({"--exe", exe, "--json"}).out).count(a), 1u);
  EXPECT_TRUE(pids(list({"--exe", "/no/such/exe", "--json"}).out).empty());
  // The JSON rows carry what the table shows.
  auto row = nlohmann::json::parse(list({"--pid", std::to_string(b), "--json"}).out)[0];
  EXPECT_EQ(row["signal_name"], "SIGFPE");
  EXPECT_EQ(row["exe"], exe);
  EXPECT_GT(row["stored_bytes"].get<uint64_t>(), 0u);
  // Table form: a header and b's row.
  auto table = list({"--pid", std::to_string(b)}).out;
  EXPECT_NE(table.find("SIGFPE"), std::string::npos) << table;
  EXPECT_NE(table.find(cb["id"].get<std::string>()), std::string::npos) << table;
  EXPECT_NE(list({"--pid", "1"}).out.find("(no crashes)"), std::string::npos);
  auto bad = daemon_->Cli({"crash", "list", "--since", "yesterday-ish"});
  EXPECT_NE(bad.exit_code, 0);
}

// Runs the hook directly, as the kernel would, with stdin from a file.
struct HookRun {
  int exit_code = -1;
  long max_rss_kb = 0;
  double seconds = 0;
  std::string err;
  // The record id from the hook's log line, empty if nothing was stored.
  std::string id() const {
    size_t at = err.find("stored as ");
    return at == std::string::npos ? "" : err.substr(at + 10, 23);
  }
};
// What the kernel would pass for a crash of `pid`.
struct FakeCrash {
  pid_t pid = 0;
  int64_t time_s = 0;  // 0: now
  uid_t uid = 0;
  int dumpable = 1;
  std::string comm = "fr_test";
  int pidfd = -1;  // installed as fd 3 and passed as %F, like the kernel does
};
HookRun RunHook(const std::string& store, const std::string& sock, const FakeCrash& c,
                const std::string& input, const std::vector<std::string>& extra = {}) {
  std::string errfile = input + ".err";  // next to the input, not in a (full) store
  auto t0 = std::chrono::steady_clock::now();
  pid_t child = fork();
  if (child == 0) {
    if (c.pidfd >= 0) {
      dup2(c.pidfd, 3);
      fcntl(3, F_SETFD, 0);  // dup2 onto itself keeps O_CLOEXEC
    }
    int in = open(input.c_str(), O_RDONLY);
    dup2(in, 0);
    int err = open(errfile.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(err, 2);
    std::vector<std::string> args = {BuildPath("coredump-hook/recorder-coredump")};
    // No settings file but the one a test names in `extra`.
    if (std::find(extra.begin(), extra.end(), "--config") == extra.end()) {
      args.insert(args.end(), {"--config", "/nonexistent"});
    }
    args.insert(args.end(), {"--store", store, "--socket", sock});
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back("--");  // the kernel's values follow, as in the installed pattern
    for (const auto& v :
         {std::to_string(c.pid), std::to_string(c.pid), std::to_string(c.pid), std::string("11"),
          std::to_string(c.time_s ? c.time_s : time(nullptr)), std::string("-1"),
          std::to_string(c.uid), std::to_string(c.uid), std::to_string(c.dumpable), c.comm}) {
      args.push_back(v);
    }
    if (c.pidfd >= 0) args.push_back("3");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int st = 0;
  rusage ru{};
  wait4(child, &st, 0, &ru);
  HookRun r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.max_rss_kb = ru.ru_maxrss;
  r.err = ReadFile(errfile);
  return r;
}
HookRun RunHookOn(const std::string& store, const std::string& sock, pid_t pid,
                  const std::string& input, const std::vector<std::string>& extra = {}) {
  FakeCrash c;
  c.pid = pid;
  return RunHook(store, sock, c, input, extra);
}

// `recorder crash info ID --json` on `store`, as root.
nlohmann::json CrashInfo(const std::string& store, const std::string& id) {
  auto r = RunCommand(
      {BuildPath("recorder/cli/recorder"), "--store", store, "crash", "info", id, "--json"});
  if (r.exit_code != 0) return nullptr;
  return nlohmann::json::parse(r.out, nullptr, false);
}

// In a forked child: becomes uid (gid = uid, no groups) and execs argv.
[[noreturn]] void ExecAs(uid_t uid, const std::vector<std::string>& argv) {
  if (setgroups(0, nullptr) != 0 || setresgid(uid, uid, uid) != 0 ||
      setresuid(uid, uid, uid) != 0) {
    _exit(126);
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execv(args[0], args.data());
  _exit(127);
}

// Starts argv as uid (gid = uid), stdout to /dev/null.
pid_t SpawnAs(uid_t uid, const std::vector<std::string>& argv) {
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    ExecAs(uid, argv);
  }
  return pid;
}

// The ELF layout of a core: every program header, and each note's owner, type
// and size — what two cores of the same program, run the same way without
// address randomization, have in common (memory contents, times and pids
// differ).
std::vector<std::string> CoreShape(const std::string& path) {
  std::string b = ReadFile(path);
  std::vector<std::string> out;
  if (b.size() < sizeof(Elf64_Ehdr)) return out;
  Elf64_Ehdr eh;
  memcpy(&eh, b.data(), sizeof(eh));
  out.push_back(fmt::format("type {} machine {} phnum {}", eh.e_type, eh.e_machine, eh.e_phnum));
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    size_t off = eh.e_phoff + i * sizeof(ph);
    if (off + sizeof(ph) > b.size()) break;
    memcpy(&ph, b.data() + off, sizeof(ph));
    out.push_back(fmt::format("phdr {} off {} vaddr {:#x} filesz {} memsz {} flags {}", ph.p_type,
                              ph.p_offset, ph.p_vaddr, ph.p_filesz, ph.p_memsz, ph.p_flags));
    if (ph.p_type != PT_NOTE) continue;
    size_t n = ph.p_offset, end = std::min<size_t>(b.size(), ph.p_offset + ph.p_filesz);
    while (n + sizeof(Elf64_Nhdr) <= end) {
      Elf64_Nhdr nh;
      memcpy(&nh, b.data() + n, sizeof(nh));
      std::string name(b.data() + n + sizeof(nh), nh.n_namesz ? nh.n_namesz - 1 : 0);
      out.push_back(fmt::format("note {} {} {}", name, nh.n_type, nh.n_descsz));
      n += sizeof(nh) + ((nh.n_namesz + 3) & ~3u) + ((nh.n_descsz + 3) & ~3u);
    }
  }
  out.push_back(fmt::format("size {}", b.size()));
  return out;
}

// Puts back the core_pattern found at construction (for a test that points
// it elsewhere for a moment).
class ScopedPattern {
 public:
  explicit ScopedPattern(const std::string& pattern)
      : saved_(ReadFile("/proc/sys/kernel/core_pattern")) {
    std::ofstream("/proc/sys/kernel/core_pattern") << pattern;
  }
  ~ScopedPattern() { std::ofstream("/proc/sys/kernel/core_pattern") << saved_; }

 private:
  std::string saved_;
};

// fr_crash segv without address randomization, as `personality -R` would.
pid_t CrashNoAslr(const std::string& core_dir) {
  pid_t pid = fork();
  if (pid == 0) {
    personality(ADDR_NO_RANDOMIZE);
    rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
    setrlimit(RLIMIT_CORE, &unlimited);
    if (chdir(core_dir.c_str()) != 0) _exit(126);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    execle(BuildPath("tests/programs/fr_crash").c_str(), "fr_crash", "segv", "50",
           static_cast<char*>(nullptr), static_cast<char**>(nullptr));
    _exit(127);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV ? pid : -1;
}

TEST_F(CoredumpTest, StoredCoreIsTheKernelsCoreByteForByte) {
  TempDir tmp;
  chmod(tmp.path().c_str(), 0755);
  const std::string hook = fs::canonical(BuildPath("coredump-hook/recorder-coredump")).string();
  // 1. Exactly the kernel's bytes: a core_pattern handler that copies the
  // kernel's stream to a file on its way into the hook (same bytes, one
  // crash), then `crash core` must give back that file.
  {
    const std::string tee = tmp.path() + "/tee-hook";
    std::ofstream(tee) << "#!/bin/sh\ntee " << tmp.path() << "/kernel.core.$1 | exec " << hook
                       << " \"$@\"\n";
    chmod(tee.c_str(), 0755);
    ScopedPattern p("|" + tee + " %P %i %I %s %t %c %u %g %d %e");
    int sig = 0;
    pid_t pid = Crash("threads", &sig);
    ASSERT_EQ(sig, SIGSEGV);
    auto crash = WaitForCrash(pid);
    ASSERT_FALSE(crash.is_null()) << daemon_->Log();
    const std::string out = tmp.path() + "/stored.core";
    auto r = daemon_->Cli({"crash", "core", crash["id"], "-o", out});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string kernel = ReadFile(tmp.path() + "/kernel.core." + std::to_string(pid));
    ASSERT_GT(kernel.size(), 4096u);
    EXPECT_EQ(kernel.compare(0, 4,
                             "\x7f"
                             "ELF"),
              0);
    EXPECT_TRUE(ReadFile(out) == kernel)
        << "stored " << fs::file_size(out) << " bytes, kernel " << kernel.size();
  }
  // 2. Against a core the kernel wrote to a plain file: the same program run
  // the same way gives a core of the same layout through the hook.
  std::string plain;
  {
    ScopedPattern p(tmp.path() + "/plain.core.%p");
    pid_t pid = CrashNoAslr(tmp.path());
    ASSERT_GT(pid, 0);
    plain = tmp.path() + "/plain.core." + std::to_string(pid);
    ASSERT_TRUE(fs::exists(plain));
  }
  pid_t pid = CrashNoAslr(tmp.path());
  ASSERT_GT(pid, 0);
  auto crash = WaitForCrash(pid);
  ASSERT_FALSE(crash.is_null());
  const std::string hooked = tmp.path() + "/hooked.core";
  ASSERT_EQ(daemon_->Cli({"crash", "core", crash["id"], "-o", hooked}).exit_code, 0);
  auto a = CoreShape(plain), b = CoreShape(hooked);
  ASSERT_GT(a.size(), 10u);
  EXPECT_EQ(a, b);
}

TEST_F(CoredumpTest, BadInputIsStoredOrRefusedWithAReasonNeverACrash) {
  TempDir tmp;
  const std::string store = tmp.path() + "/store";
  const std::string nosock = tmp.path() + "/no.sock";
  // A live process whose metadata the hook can read.
  pid_t sleeper = Spawn({"/bin/sleep", "60"});
  std::mt19937 rng(42);
  std::string garbage(1 << 20, '\0');
  for (char& ch : garbage) ch = static_cast<char>(rng());
  // A real core to cut and bend.
  int sig = 0;
  pid_t crashed = Crash("segv", &sig);
  auto listed = WaitForCrash(crashed);
  ASSERT_FALSE(listed.is_null());
  const std::string real = tmp.path() + "/real.core";
  ASSERT_EQ(daemon_->Cli({"crash", "core", listed["id"], "-o", real}).exit_code, 0);
  std::string core = ReadFile(real);
  std::string wrong_class = core;
  wrong_class[EI_CLASS] = ELFCLASS32;
  std::string wrong_endian = core;
  wrong_endian[EI_DATA] = ELFDATA2MSB;
  // Why each gets no backtrace (a note of the record); "" = it gets one.
  struct Input {
    std::string bytes, why;
  };
  std::map<std::string, Input> inputs = {
      {"empty", {"", "the kernel sent an empty core"}},
      {"truncated", {core.substr(0, 2000), "before its notes"}},
      {"half", {core.substr(0, core.size() / 2), "?"}},  // notes, part of the memory
      {"garbage", {garbage, "no backtrace: not an ELF file"}},
      {"wrong-class", {wrong_class, "no backtrace: ELF class 1"}},
      {"wrong-endian", {wrong_endian, "no backtrace: ELF data encoding 2 (big-endian"}},
      {"whole", {core, ""}}};
  for (const auto& [name, input] : inputs) {
    SCOPED_TRACE(name);
    const std::string& bytes = input.bytes;
    std::string path = tmp.path() + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    HookRun r = RunHookOn(store, nosock, sleeper, path);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("stored as"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("recorderd is not reachable"), std::string::npos) << r.err;
    // What was stored is exactly what came in.
    auto id = r.err.substr(r.err.find("stored as ") + 10, 23);
    auto out = tmp.path() + "/" + name + ".out";
    auto x = RunCommand(
        {BuildPath("recorder/cli/recorder"), "--store", store, "crash", "core", id, "-o", out});
    if (bytes.empty()) {
      EXPECT_EQ(x.exit_code, 0) << x.err;
    } else {
      ASSERT_EQ(x.exit_code, 0) << x.err;
    }
    EXPECT_EQ(ReadFile(out), bytes);
    auto j = CrashInfo(store, id);
    ASSERT_FALSE(j.is_null());
    const std::string notes = j["crash"]["notes"].dump();
    if (input.why == "?") {
      // Whatever the unwinder makes of it, it is stored (above).
    } else if (input.why.empty()) {
      EXPECT_FALSE(j["backtrace"]["threads"].empty()) << j.dump();
      EXPECT_EQ(notes.find("no backtrace"), std::string::npos) << notes;
    } else {
      EXPECT_NE(notes.find(input.why), std::string::npos) << notes;
      EXPECT_FALSE(j["backtrace"].contains("threads")) << j["backtrace"].dump();
    }
  }
  // A pid that does not exist any more: stored, with the reason.
  pid_t gone = Spawn({"/bin/true"});
  waitpid(gone, nullptr, 0);
  HookRun g = RunHookOn(store, nosock, gone, tmp.path() + "/garbage");
  EXPECT_EQ(g.exit_code, 0) << g.err;
  EXPECT_NE(g.err.find("is gone"), std::string::npos) << g.err;
  // A 20 GiB stream of zeros (sparse: written by a generator, no file) with
  // a 19 GiB limit: cut at exactly the limit, flagged, and the hook's memory
  // stays small whatever it reads.
  {
    std::string fifo = tmp.path() + "/zeros";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    pid_t writer = fork();
    if (writer == 0) {
      signal(SIGPIPE, SIG_DFL);
      int fd = open(fifo.c_str(), O_WRONLY);
      std::vector<char> zeros(1 << 20, 0);
      for (int i = 0; i < 20 * 1024; ++i) {
        if (write(fd, zeros.data(), zeros.size()) < 0) _exit(1);
      }
      _exit(0);
    }
    HookRun z = RunHookOn(store, nosock, sleeper, fifo, {"--max-core-size", "19G"});
    int wst = 0;
    waitpid(writer, &wst, 0);
    EXPECT_EQ(z.exit_code, 0) << z.err;
    EXPECT_NE(z.err.find("truncated"), std::string::npos) << z.err;
    EXPECT_LE(z.max_rss_kb, 64 * 1024) << "peak RSS of the hook";
    auto j = CrashInfo(store, z.id());
    ASSERT_FALSE(j.is_null()) << z.err;
    EXPECT_EQ(j["crash"]["core_size"].get<uint64_t>(), 19ull << 30);
    EXPECT_TRUE(j["crash"]["truncated"].get<bool>());
    std::printf("20 GiB stream: %.1f s, peak RSS %ld KiB\n", z.seconds, z.max_rss_kb);
  }
  // Malformed arguments: refused with a reason, exit 2.
  auto bad =
      RunCommand({BuildPath("coredump-hook/recorder-coredump"), "--store", store, "--", "1", "x"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("expected the core_pattern values"), std::string::npos) << bad.err;
  // Values after options but without "--": refused, never parsed.
  bad = RunCommand({BuildPath("coredump-hook/recorder-coredump"), "--store", store, "1", "x"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("must follow"), std::string::npos) << bad.err;
  // A filesystem too full for the core: the crash is stored without it,
  // saying why, nothing half-written.
  {
    std::string mnt = tmp.path() + "/full";
    fs::create_directories(mnt);
    ASSERT_EQ(
        RunCommand({"/usr/bin/mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", mnt}).exit_code,
        0);
    HookRun f = RunHookOn(mnt + "/store", nosock, sleeper, tmp.path() + "/garbage");
    EXPECT_EQ(f.exit_code, 0) << f.err;
    EXPECT_NE(f.err.find("core not stored: no space"), std::string::npos) << f.err;
    auto j = CrashInfo(mnt + "/store", f.id());
    ASSERT_FALSE(j.is_null()) << f.err;
    EXPECT_FALSE(j["crash"]["core_stored"].get<bool>());
    auto v = RunCommand({BuildPath("recorder/cli/recorder"), "--store", mnt + "/store", "verify"});
    EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
    RunCommand({"/usr/bin/umount", mnt});
  }
  kill(sleeper, SIGKILL);
  waitpid(sleeper, nullptr, 0);
}

TEST_F(CoredumpTest, APidThatWasReusedGetsNoMetadata) {
  TempDir tmp;
  const std::string store = tmp.path() + "/store", nosock = tmp.path() + "/no.sock";
  const std::string input = tmp.path() + "/garbage";
  std::ofstream(input) << std::string(4096, 'x');
  pid_t sleeper = Spawn({"/bin/sleep", "60"});
  // The sleeper is alive, but started after this "crash": another process
  // with the crashed one's pid. The core is stored; /proc is not trusted.
  FakeCrash c;
  c.pid = sleeper;
  c.time_s = time(nullptr) - 600;
  HookRun r = RunHook(store, nosock, c, input);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("the pid was reused"), std::string::npos) << r.err;
  auto j = CrashInfo(store, r.id());
  ASSERT_FALSE(j.is_null()) << r.err;
  EXPECT_FALSE(j["metadata"]["verified"].get<bool>());
  EXPECT_FALSE(j["metadata"].contains("cmdline")) << j["metadata"].dump();
  EXPECT_TRUE(j["crash"]["core_stored"].get<bool>());
  // Another uid than the crash's: the same.
  c.time_s = 0;
  c.uid = 4242;
  r = RunHook(store, nosock, c, input);
  EXPECT_NE(r.err.find("belongs to uid 0, the crash to uid 4242"), std::string::npos) << r.err;
  // The kernel's pidfd (%F) names the process for certain: one of another
  // pid is refused, the right one is used.
  pid_t other = Spawn({"/bin/sleep", "60"});
  ScopedFd wrong(static_cast<int>(syscall(SYS_pidfd_open, other, 0)));
  ScopedFd right(static_cast<int>(syscall(SYS_pidfd_open, sleeper, 0)));
  ASSERT_TRUE(wrong && right);
  c.uid = 0;
  c.pidfd = wrong.get();
  r = RunHook(store, nosock, c, input);
  EXPECT_NE(r.err.find(fmt::format("names pid {}, not {}", other, sleeper)), std::string::npos)
      << r.err;
  c.pidfd = right.get();
  r = RunHook(store, nosock, c, input);
  j = CrashInfo(store, r.id());
  ASSERT_FALSE(j.is_null()) << r.err;
  EXPECT_TRUE(j["metadata"]["verified"].get<bool>()) << r.err;
  EXPECT_EQ(j["metadata"]["pidfd"], "kernel");
  EXPECT_EQ(j["metadata"]["exe"], fs::canonical("/bin/sleep").string());
  for (pid_t p : {sleeper, other}) {
    kill(p, SIGKILL);
    waitpid(p, nullptr, 0);
  }
}

TEST_F(CoredumpTest, ASilentDaemonDelaysTheCoreOnlyUpToTheTimeout) {
  TempDir tmp;
  const std::string store = tmp.path() + "/store", sock = tmp.path() + "/silent.sock";
  // Listens, never accepts nor answers: a hung recorderd.
  ScopedFd srv(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", sock.c_str());
  ASSERT_EQ(bind(srv.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(srv.get(), 8), 0);
  const std::string input = tmp.path() + "/garbage";
  std::ofstream(input) << std::string(4096, 'x');
  pid_t sleeper = Spawn({"/bin/sleep", "60"});
  HookRun r = RunHookOn(store, sock, sleeper, input, {"--history-timeout", "700ms"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("did not give history within 700 ms"), std::string::npos) << r.err;
  EXPECT_LT(r.seconds, 5.0) << r.err;
  auto j = CrashInfo(store, r.id());
  ASSERT_FALSE(j.is_null()) << r.err;
  EXPECT_TRUE(j["crash"]["core_stored"].get<bool>());
  EXPECT_EQ(j["crash"]["history"], "");
  kill(sleeper, SIGKILL);
  waitpid(sleeper, nullptr, 0);
}

TEST_F(CoredumpTest, ACrashOfTheHookItselfIsNotHandled) {
  TempDir tmp;
  const std::string store = tmp.path() + "/store";
  const std::string input = tmp.path() + "/garbage";
  std::ofstream(input) << std::string(4096, 'x');
  pid_t sleeper = Spawn({"/bin/sleep", "60"});
  FakeCrash c;
  c.pid = sleeper;
  c.comm = "recorder-coredu";  // %e: the hook's comm, cut to 15 characters
  HookRun r = RunHook(store, tmp.path() + "/no.sock", c, input);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // Not by a name: any program may be called so (and the kernel's %e is
  // not even what is stored: /proc's comm is).
  EXPECT_EQ(r.err.find("not handling a crash of recorder-coredump itself"), std::string::npos)
      << r.err;
  ASSERT_NE(r.id(), "") << r.err;
  EXPECT_EQ(CrashInfo(store, r.id())["crash"]["comm"], "sleep");
  // Recognised by its executable, whatever its comm.
  pid_t hook = fork();
  if (hook == 0) {
    int devnull = open("/dev/null", O_RDWR);
    dup2(devnull, 2);
    int p[2];
    if (pipe(p) != 0) _exit(1);
    dup2(p[0], 0);  // stdin that never ends: the hook waits for its core
    const std::string pid = std::to_string(sleeper);  // its "crash" is the sleeper's
    execl(BuildPath("coredump-hook/recorder-coredump").c_str(), "recorder-coredump", "--config",
          "/nonexistent", "--store", (tmp.path() + "/other").c_str(), "--socket",
          (tmp.path() + "/no.sock").c_str(), "--", pid.c_str(), pid.c_str(), pid.c_str(), "11", "0",
          "0", "0", "0", "1", "x", static_cast<char*>(nullptr));
    _exit(127);
  }
  // The running hook (waiting for its core on stdin) is a process whose exe
  // is the hook: a "crash" of it is refused.
  c.pid = hook;
  c.comm = "worker";
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (ReadFile(fmt::format("/proc/{}/comm", hook)).rfind("recorder-", 0) != 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  r = RunHook(store, tmp.path() + "/no.sock", c, input);
  EXPECT_NE(r.err.find("not handling a crash of recorder-coredump itself"), std::string::npos)
      << r.err << CrashInfo(store, r.id()).dump();
  EXPECT_EQ(r.id(), "");
  for (pid_t p : {sleeper, hook}) {
    kill(p, SIGKILL);
    waitpid(p, nullptr, 0);
  }
}

// Runs argv as uid/gid (nobody), capturing stdout and stderr.
RunResult RunAs(uid_t uid, const std::vector<std::string>& argv) {
  int out[2], err[2];
  if (pipe(out) != 0 || pipe(err) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    close(out[0]);
    close(err[0]);
    ExecAs(uid, argv);
  }
  close(out[1]);
  close(err[1]);
  RunResult r;
  r.out = ReadAll(out[0]);
  r.err = ReadAll(err[0]);
  close(out[0]);
  close(err[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

// Runs prog segv as uid (gid = uid); returns its pid once it crashed.
pid_t CrashAs(uid_t uid, const std::string& prog) {
  pid_t pid = fork();
  if (pid == 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(uid, uid, uid) != 0 ||
        setresuid(uid, uid, uid) != 0) {
      _exit(126);
    }
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    execl(prog.c_str(), "fr_crash", "segv", "300", static_cast<char*>(nullptr));
    _exit(127);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFSIGNALED(st) ? pid : -1;
}

TEST_F(CoredumpTest, UsersSeeAndReadOnlyTheirOwnCrashes) {
  // Two ordinary users (nobody and daemon, both in Debian's base passwd)
  // and root.
  constexpr uid_t kNobody = 65534, kDaemon = 1;
  TempDir tmp;
  chmod(tmp.path().c_str(), 0777);
  const std::string prog = tmp.path() + "/fr_crash", rec = tmp.path() + "/recorder";
  fs::copy_file(BuildPath("tests/programs/fr_crash"), prog);
  fs::copy_file(BuildPath("recorder/cli/recorder"), rec);
  int sig = 0;
  pid_t root_pid = Crash("segv", &sig);
  auto root_crash = WaitForCrash(root_pid);
  ASSERT_FALSE(root_crash.is_null());
  std::map<uid_t, nlohmann::json> crash_of;
  for (uid_t uid : {kNobody, kDaemon}) {
    pid_t pid = CrashAs(uid, prog);
    ASSERT_GT(pid, 0) << "uid " << uid;
    crash_of[uid] = WaitForCrash(pid);
    ASSERT_FALSE(crash_of[uid].is_null()) << "uid " << uid;
    EXPECT_EQ(crash_of[uid]["uid"], uid);
  }
  const std::string store = daemon_->store();
  // A crash of nobody's process that was not dumpable (%d = 0: setuid and
  // the like): stored, but root's only.
  pid_t sleeper = SpawnAs(kNobody, {"/bin/sleep", "60"});
  const std::string input = tmp.path() + "/input";
  std::ofstream(input) << std::string(4096, 'x');
  FakeCrash nd;
  nd.pid = sleeper;
  nd.uid = kNobody;
  nd.dumpable = 0;
  HookRun hr = RunHook(store, tmp.path() + "/no.sock", nd, input);
  kill(sleeper, SIGKILL);
  waitpid(sleeper, nullptr, 0);
  ASSERT_NE(hr.id(), "") << hr.err;
  auto all = daemon_->Cli({"crash", "list", "--json"});
  EXPECT_NE(all.out.find(hr.id()), std::string::npos) << "root sees the non-dumpable crash";
  for (const auto& [uid, mine] : crash_of) {
    SCOPED_TRACE("uid " + std::to_string(uid));
    const uid_t other_uid = uid == kNobody ? kDaemon : kNobody;
    const std::string other = crash_of[other_uid]["id"];
    auto list = RunAs(uid, {rec, "--store", store, "crash", "list", "--json"});
    ASSERT_EQ(list.exit_code, 0) << list.err;
    auto j = nlohmann::json::parse(list.out);
    ASSERT_EQ(j.size(), 1u) << list.out;
    EXPECT_EQ(j[0]["id"], mine["id"]);
    // Their own core and history: readable.
    const std::string core_out = fmt::format("{}/{}.core", tmp.path(), uid);
    auto core = RunAs(uid, {rec, "--store", store, "crash", "core", mine["id"], "-o", core_out});
    EXPECT_EQ(core.exit_code, 0) << core.err;
    EXPECT_EQ(fs::file_size(core_out), mine["core_size"].get<uint64_t>());
    auto info = RunAs(uid, {rec, "--store", store, "crash", "info", mine["id"], "--json"});
    ASSERT_EQ(info.exit_code, 0) << info.err;
    EXPECT_FALSE(nlohmann::json::parse(info.out)["history"].is_null()) << info.out;
    // The other user's, root's and the non-dumpable one: neither readable
    // through the CLI nor as files, nor is the index.
    for (const std::string& id : {other, root_crash["id"].get<std::string>(), hr.id()}) {
      SCOPED_TRACE(id);
      const std::string stolen = tmp.path() + "/stolen.core";
      auto c = RunAs(uid, {rec, "--store", store, "crash", "core", id, "-o", stolen});
      EXPECT_NE(c.exit_code, 0);
      EXPECT_NE(c.err.find("no crash"), std::string::npos) << c.err;
      EXPECT_FALSE(fs::exists(stolen));
      auto i = RunAs(uid, {rec, "--store", store, "crash", "info", id});
      EXPECT_NE(i.exit_code, 0) << i.out;
      EXPECT_EQ(i.out.find("Backtrace"), std::string::npos) << i.out;
      for (const auto& e : fs::directory_iterator(store)) {
        if (e.path().filename().string().rfind(id, 0) != 0) continue;
        auto cat = RunAs(uid, {"/bin/cat", e.path().string()});
        EXPECT_NE(cat.exit_code, 0) << e.path() << " is readable by uid " << uid;
      }
    }
    auto sql = RunAs(uid, {rec, "--store", store, "sql", "SELECT * FROM crashes"});
    EXPECT_NE(sql.exit_code, 0) << sql.out;
  }
}

TEST_F(CoredumpTest, ACrashStormIsFullyAccountedFor) {
  constexpr int kCrashes = 32;
  std::vector<pid_t> pids;
  for (int i = 0; i < kCrashes; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      int devnull = open("/dev/null", O_WRONLY);
      dup2(devnull, 1);
      execl(BuildPath("tests/programs/fr_crash").c_str(), "fr_crash", "segv", "0",
            static_cast<char*>(nullptr));
      _exit(127);
    }
    pids.push_back(pid);
  }
  for (pid_t p : pids) waitpid(p, nullptr, 0);
  size_t stored = 0, limited = 0;
  for (pid_t p : pids) {
    auto c = WaitForCrash(p);
    ASSERT_FALSE(c.is_null()) << "crash of " << p << " not accounted for";
    if (c["core_stored"].get<bool>()) ++stored;
    if (c["rate_limited"].get<bool>()) ++limited;
  }
  EXPECT_EQ(stored + limited, static_cast<size_t>(kCrashes));
  EXPECT_GT(limited, 0u) << "20 cores per executable per hour, then metadata only";
  auto v = daemon_->Cli({"verify"});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
}

// The ids of every crash in the store.
std::set<std::string> CrashIds(const Daemon& d) {
  std::set<std::string> ids;
  auto r = d.Cli({"crash", "list", "--json"});
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  if (j.is_array()) {
    for (const auto& c : j) ids.insert(c["id"].get<std::string>());
  }
  return ids;
}

TEST_F(CoredumpTest, ACrashInAPidNamespaceIsFollowedByItsGlobalThreadId) {
  // fr_crash threads as pid 2 of a new pid namespace (sh is 1): its
  // crashing thread is 3 there (%i) and something else outside (%I), which
  // is what samples carry.
  const std::set<std::string> before = CrashIds(*daemon_);
  const std::string exe = fs::canonical(BuildPath("tests/programs/fr_crash")).string();
  pid_t pid = fork();
  if (pid == 0) {
    rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
    setrlimit(RLIMIT_CORE, &unlimited);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    execl("/usr/bin/unshare", "unshare", "--pid", "--fork", "/bin/sh", "-c",
          "\"$0\" threads 600; exit 0", exe.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  nlohmann::json crash;
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (crash.is_null() && std::chrono::steady_clock::now() < deadline) {
    auto j = nlohmann::json::parse(daemon_->Cli({"crash", "list", "--json"}).out, nullptr, false);
    for (const auto& c : j) {
      if (!before.count(c["id"].get<std::string>()) && c["exe"] == exe) crash = c;
    }
    if (crash.is_null()) std::this_thread::sleep_for(50ms);
  }
  ASSERT_FALSE(crash.is_null()) << daemon_->Log();
  const int ns_tid = crash["tid"], global_tid = crash["global_tid"];
  EXPECT_EQ(ns_tid, 3) << crash.dump();
  EXPECT_NE(global_tid, ns_tid);
  auto info = daemon_->Cli({"crash", "info", crash["id"], "--json"});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  auto j = nlohmann::json::parse(info.out);
  // The metadata maps each thread's two ids.
  bool mapped = false;
  for (const auto& t : j["metadata"]["threads"]) {
    if (t["tid"] == global_tid) mapped = t["ns_tid"] == ns_tid;
  }
  EXPECT_TRUE(mapped) << j["metadata"]["threads"].dump();
  // Backtrace: the crashing thread first, named by its global tid.
  const auto& bt = j["backtrace"];
  ASSERT_EQ(bt["threads"].size(), 2u) << bt.dump();
  EXPECT_EQ(bt["crashing_tid"], global_tid);
  EXPECT_EQ(bt["threads"][0]["tid"], global_tid);
  EXPECT_EQ(bt["threads"][0]["ns_tid"], ns_tid);
  auto names = FrameNames(bt["threads"][0]);
  EXPECT_TRUE(Has(names, "crash_here") && Has(names, "thread_main")) << bt.dump();
  EXPECT_TRUE(Has(FrameNames(bt["threads"][1]), "main")) << bt.dump();
  // History: that thread's samples (found by its global tid).
  ASSERT_FALSE(j["history"].is_null()) << info.out;
  EXPECT_EQ(j["history"]["tid"], global_tid);
  EXPECT_GT(j["history"]["samples"].get<uint64_t>(), 20u) << j["history"].dump();
  EXPECT_EQ(j["history"]["top"][0]["function"], "spin_a") << j["history"].dump();
}

TEST_F(CoredumpTest, InstallPersistsAndUninstallRestoresExactlyThePreviousSettings) {
  const std::string dropin = "/etc/sysctl.d/50-flightrec-coredump.conf";
  ASSERT_FALSE(fs::exists(dropin)) << dropin << " exists before the test: whose is it?";
  const std::string hook = fs::canonical(BuildPath("coredump-hook/recorder-coredump")).string();
  // The fixture's install undone: exactly what the machine had.
  auto u = daemon_->Cli({"coredump", "uninstall"});
  ASSERT_EQ(u.exit_code, 0) << u.err;
  EXPECT_EQ(ReadFile(kPatternFile), guard_->pattern());
  EXPECT_EQ(ReadFile(kPipeLimitFile), guard_->limit());
  {
    // From settings of our own, put back on the way out whatever happens.
    PatternGuard mine("core.fr-test.%p", "3");
    auto i = daemon_->Cli({"coredump", "install", "--persist", "--hook", hook});
    ASSERT_EQ(i.exit_code, 0) << i.err;
    const std::string pattern = "|" + hook + " -- %P %i %I %s %t %c %u %g %d %e %F";
    EXPECT_EQ(ReadFile(kPatternFile), pattern + "\n");
    EXPECT_EQ(ReadFile(kPipeLimitFile), "64\n");
    EXPECT_EQ(ReadFile(dropin),
              "# written by `recorder coredump install --persist`\nkernel.core_pattern=" + pattern +
                  "\nkernel.core_pipe_limit=64\n");
    // sysctl itself reads it back to the same settings.
    auto p = RunCommand({"/usr/sbin/sysctl", "-p", dropin});
    EXPECT_EQ(p.exit_code, 0) << p.err;
    EXPECT_EQ(ReadFile(kPatternFile), pattern + "\n");
    // A second install keeps the settings saved by the first.
    ASSERT_EQ(daemon_->Cli({"coredump", "install", "--hook", hook}).exit_code, 0);
    u = daemon_->Cli({"coredump", "uninstall"});
    ASSERT_EQ(u.exit_code, 0) << u.err;
    EXPECT_EQ(ReadFile(kPatternFile), "core.fr-test.%p\n");
    EXPECT_EQ(ReadFile(kPipeLimitFile), "3\n");
    EXPECT_FALSE(fs::exists(dropin));
    EXPECT_FALSE(fs::exists("/etc/flightrec/coredump.json"));
    // Nothing saved any more: a second uninstall says so and changes nothing.
    u = daemon_->Cli({"coredump", "uninstall"});
    EXPECT_NE(u.exit_code, 0);
    EXPECT_NE(u.err.find("no saved core_pattern"), std::string::npos) << u.err;
    EXPECT_EQ(ReadFile(kPatternFile), "core.fr-test.%p\n");
  }
  EXPECT_EQ(ReadFile(kPatternFile), guard_->pattern());
  std::error_code ec;
  fs::remove(dropin, ec);
  // Back to the fixture's state for the other tests.
  auto r = daemon_->Cli({"coredump", "install", "--hook", hook});
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(CoredumpTest, CrashDebugRunsGdbOnTheCoreInAPrivateDirectoryAndRemovesIt) {
  int sig = 0;
  pid_t pid = Crash("segv", &sig, 0);
  auto crash = WaitForCrash(pid);
  ASSERT_FALSE(crash.is_null());
  TempDir tmp;
  const std::string rec = BuildPath("recorder/cli/recorder");
  auto r = RunCommand(
      {rec, "--store", daemon_->store(), "crash", "debug", crash["id"], "-A",
       "-batch -nx -ex 'info threads' -ex bt -ex 'shell stat -c \"mode %a %n\" \"$TMPDIR\"/*/'"},
      {"TMPDIR=" + tmp.path()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  // gdb loaded this core: its backtrace names the crashing function and main.
  EXPECT_NE(r.out.find("crash_here"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("main"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("core extracted to " + tmp.path() + "/flightrec-debug-"), std::string::npos)
      << r.err;
  // While gdb ran, the core was in a directory of its own, 0700.
  EXPECT_NE(r.out.find("mode 700 " + tmp.path() + "/flightrec-debug-"), std::string::npos) << r.out;
  // The private directory and the core are gone.
  EXPECT_TRUE(fs::is_empty(tmp.path())) << fs::directory_iterator(tmp.path())->path();
  // gdb failing is reported, and still cleans up.
  auto bad = RunCommand({rec, "--store", daemon_->store(), "crash", "debug", crash["id"], "-A",
                         "-batch -nx -ex 'this-is-not-a-gdb-command' --no-such-gdb-option"},
                        {"TMPDIR=" + tmp.path()});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("gdb exited with status"), std::string::npos) << bad.err;
  EXPECT_TRUE(fs::is_empty(tmp.path()));
  auto quote = RunCommand(
      {rec, "--store", daemon_->store(), "crash", "debug", crash["id"], "-A", "-ex 'bt"});
  EXPECT_NE(quote.exit_code, 0);
  EXPECT_NE(quote.err.find("unterminated quote"), std::string::npos) << quote.err;
  // `crash core -o` writes a fresh private file (O_EXCL, 0600: a core is
  // the process's memory) renamed into place, nothing left beside it.
  const std::string out = tmp.path() + "/c.core";
  auto c = RunCommand({rec, "--store", daemon_->store(), "crash", "core", crash["id"], "-o", out});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(fs::file_size(out), crash["core_size"].get<uint64_t>());
  EXPECT_EQ(fs::status(out).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(tmp.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 1u);
}

TEST_F(CoredumpTest, TheHookDropsItsPrivilegesAndTheUnwinderRunsAsTheCrashedUser) {
  constexpr uid_t kNobody = 65534;
  TempDir tmp;
  const std::string store = tmp.path() + "/store";
  // A real core to feed it, and a live process of nobody's as "the crash".
  int sig = 0;
  pid_t crashed = Crash("segv", &sig, 0);
  auto listed = WaitForCrash(crashed);
  ASSERT_FALSE(listed.is_null());
  const std::string core = tmp.path() + "/real.core";
  ASSERT_EQ(daemon_->Cli({"crash", "core", listed["id"], "-o", core}).exit_code, 0);
  pid_t sleeper = SpawnAs(kNobody, {"/bin/sleep", "60"});
  // Wait (bounded) for the sleeper to be nobody's sleep.
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (ReadFile(fmt::format("/proc/{}/comm", sleeper)) != "sleep\n" &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  // The hook, its core coming through a pipe we hold: it waits for it with
  // /proc read and its privileges dropped.
  int in[2];
  ASSERT_EQ(pipe(in), 0);
  const std::string errfile = tmp.path() + "/hook.err";
  pid_t hook = fork();
  if (hook == 0) {
    dup2(in[0], 0);
    close(in[1]);
    int err = open(errfile.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(err, 2);
    const std::string p = std::to_string(sleeper), u = std::to_string(kNobody);
    execl(BuildPath("coredump-hook/recorder-coredump").c_str(), "recorder-coredump", "--config",
          "/nonexistent", "--store", store.c_str(), "--socket", (tmp.path() + "/no.sock").c_str(),
          "--", p.c_str(), p.c_str(), p.c_str(), "11", "0", "0", u.c_str(), u.c_str(), "1", "sleep",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(in[0]);
  // Dropped: CAP_KILL (bit 5) only, nothing to regain, still uid 0.
  deadline = std::chrono::steady_clock::now() + 30s;
  while (StatusField(hook, "CapEff") != "0000000000000020" &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(StatusField(hook, "CapEff"), "0000000000000020") << ReadFile(errfile);
  EXPECT_EQ(StatusField(hook, "CapPrm"), "0000000000000020");
  EXPECT_EQ(StatusField(hook, "CapInh"), "0000000000000000");
  EXPECT_EQ(StatusField(hook, "CapBnd"), "0000000000000000");
  EXPECT_EQ(StatusField(hook, "CapAmb"), "0000000000000000");
  EXPECT_EQ(StatusField(hook, "NoNewPrivs"), "1");
  EXPECT_EQ(StatusField(hook, "Uid"), "0\t0\t0\t0");
  // Its unwinder, waiting for the core: nobody, no capabilities.
  pid_t unwinder = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (StatusField(std::stoi(name), "PPid") == std::to_string(hook)) unwinder = std::stoi(name);
  }
  ASSERT_GT(unwinder, 0) << "no child of the hook";
  EXPECT_EQ(StatusField(unwinder, "Uid"), "65534\t65534\t65534\t65534");
  EXPECT_EQ(StatusField(unwinder, "Gid"), "65534\t65534\t65534\t65534");
  EXPECT_EQ(StatusField(unwinder, "CapEff"), "0000000000000000");
  EXPECT_EQ(StatusField(unwinder, "CapPrm"), "0000000000000000");
  EXPECT_EQ(StatusField(unwinder, "NoNewPrivs"), "1");
  // Under its seccomp filter (mode 2) before the first byte of the core
  // reaches it: the core is parsed there and nowhere else.
  deadline = std::chrono::steady_clock::now() + 10s;
  while (StatusField(unwinder, "Seccomp") != "2" && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(StatusField(unwinder, "Seccomp"), "2");
  EXPECT_EQ(StatusField(unwinder, "Seccomp_filters"), "1");
  // Everything still works unprivileged: the core is stored, unwound, and
  // its record made readable to the crashed user (an ACL by the owner).
  std::string bytes = ReadFile(core);
  for (size_t off = 0; off < bytes.size();) {
    ssize_t n = write(in[1], bytes.data() + off, bytes.size() - off);
    ASSERT_GT(n, 0);
    off += static_cast<size_t>(n);
  }
  close(in[1]);
  int st = 0;
  waitpid(hook, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  std::string err = ReadFile(errfile);
  EXPECT_EQ(err.find("could not drop privileges"), std::string::npos) << err;
  HookRun hr;
  hr.err = err;
  auto j = CrashInfo(store, hr.id());
  ASSERT_FALSE(j.is_null()) << err;
  EXPECT_TRUE(j["crash"]["core_stored"].get<bool>());
  EXPECT_FALSE(j["backtrace"]["threads"].empty()) << j["backtrace"].dump();
  const std::string rec = tmp.path() + "/recorder";
  fs::copy_file(BuildPath("recorder/cli/recorder"), rec);
  chmod(tmp.path().c_str(), 0755);
  chmod(store.c_str(), 0755);  // what `coredump install` does to the system store
  auto mine = RunAs(kNobody, {rec, "--store", store, "crash", "list", "--json"});
  EXPECT_NE(mine.out.find(hr.id()), std::string::npos) << mine.out << mine.err;
  kill(sleeper, SIGKILL);
  waitpid(sleeper, nullptr, 0);
}

TEST_F(CoredumpTest, AHugeCoreGetsABacktraceFromABoundedCopy) {
  // 3 GiB of memory (one page touched, the rest zeros), above the old 2 GiB
  // cut-off for backtraces: the unwinder's copy keeps the notes and the
  // stacks, not the 3 GiB.
  int sig = 0;
  pid_t pid = Crash("bigmap", &sig, 0);
  ASSERT_EQ(sig, SIGSEGV);
  auto crash = WaitForCrash(pid);
  ASSERT_FALSE(crash.is_null()) << daemon_->Log();
  EXPECT_GT(crash["core_size"].get<uint64_t>(), 3ull << 30);
  EXPECT_TRUE(crash["core_stored"].get<bool>());
  auto j = CrashInfo(daemon_->store(), crash["id"]);
  ASSERT_FALSE(j.is_null());
  const auto& in = j["backtrace"]["input"];
  EXPECT_TRUE(in["reduced"].get<bool>()) << in.dump();
  EXPECT_GT(in["core_memory_bytes"].get<uint64_t>(), 3ull << 30) << in.dump();
  EXPECT_LE(in["kept_memory_bytes"].get<uint64_t>(), 48ull << 20) << in.dump();
  EXPECT_FALSE(in.contains("stacks_left_out")) << in.dump();
  auto names = FrameNames(j["backtrace"]["threads"][0]);
  auto at = std::find(names.begin(), names.end(), "crash_here");
  ASSERT_NE(at, names.end()) << j["backtrace"].dump();
  EXPECT_NE(std::find(at + 1, names.end(), "main"), names.end()) << j["backtrace"].dump();
}

TEST_F(CoredumpTest, AReducedCopyStillUnwindsThroughSharedLibrariesAndEveryThread) {
  // The same reduction as for a huge core, forced on small ones by a 64 KiB
  // budget (through a core_pattern wrapper that passes the option): abort()
  // is in libc, so the walk must cross it (ELF headers kept), and both
  // threads of `threads` must still unwind (both stacks kept).
  TempDir tmp;
  chmod(tmp.path().c_str(), 0755);
  const std::string hook = fs::canonical(BuildPath("coredump-hook/recorder-coredump")).string();
  const std::string wrapper = tmp.path() + "/small-budget-hook";
  std::ofstream(wrapper) << "#!/bin/sh\nexec " << hook << " --backtrace-memory-max 64K -- \"$@\"\n";
  chmod(wrapper.c_str(), 0755);
  ScopedPattern p("|" + wrapper + " %P %i %I %s %t %c %u %g %d %e");
  for (const Case& c :
       std::vector<Case>{{"abort", SIGABRT, "SIGABRT", "abort", "crash_here"},
                         {"threads", SIGSEGV, "SIGSEGV", "crash_here", "thread_main"}}) {
    SCOPED_TRACE(c.mode);
    int sig = 0;
    pid_t pid = Crash(c.mode, &sig, 300);  // time for main to be in spin_a
    ASSERT_EQ(sig, c.signal);
    auto crash = WaitForCrash(pid);
    ASSERT_FALSE(crash.is_null()) << daemon_->Log();
    auto j = CrashInfo(daemon_->store(), crash["id"]);
    ASSERT_FALSE(j.is_null());
    const auto& bt = j["backtrace"];
    EXPECT_TRUE(bt["input"]["reduced"].get<bool>()) << bt["input"].dump();
    EXPECT_LE(bt["input"]["kept_memory_bytes"].get<uint64_t>(), 64u << 10);
    ASSERT_FALSE(bt["threads"].empty()) << bt.dump();
    auto names = FrameNames(bt["threads"][0]);
    auto at = std::find(names.begin(), names.end(), c.crashing_function);
    ASSERT_NE(at, names.end()) << bt.dump();
    EXPECT_NE(std::find_if(at + 1, names.end(),
                           [&](const std::string& n) { return n.rfind(c.caller, 0) == 0; }),
              names.end())
        << bt.dump();
    EXPECT_TRUE(Has(names, "main") || Has(names, "thread_main")) << bt.dump();
    if (c.mode == "threads") {
      ASSERT_EQ(bt["threads"].size(), 2u);
      auto other = FrameNames(bt["threads"][1]);
      EXPECT_TRUE(Has(other, "spin_a") && Has(other, "main")) << bt.dump();
    }
  }
}

// Runs `path` MODE MS as uid (gid = uid; 0: root, as is) with an unlimited
// core size; returns its pid once it died from SIGSEGV, -1 otherwise. The
// program's comm is its file name (cut to 15 bytes) unless MODE sets one.
pid_t CrashProgram(const std::string& path, const std::string& mode = "segv", uid_t uid = 0,
                   int ms = 0) {
  pid_t pid = fork();
  if (pid == 0) {
    rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
    setrlimit(RLIMIT_CORE, &unlimited);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    if (uid != 0 && (setgroups(0, nullptr) != 0 || setresgid(uid, uid, uid) != 0 ||
                     setresuid(uid, uid, uid) != 0)) {
      _exit(126);
    }
    const std::string ms_text = std::to_string(ms);
    execl(path.c_str(), path.c_str(), mode.c_str(), ms_text.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV ? pid : -1;
}

TEST_F(CoredumpTest, ACrashingProgramsNameIsNeverAnOptionOfTheHook) {
  // The kernel passes %e (comm, which the program chooses: its file name,
  // or anything through PR_SET_NAME; '/' becomes '!') to the root hook,
  // whose working directory is "/". Were it parsed as an option,
  // `--store=tmp` would make /tmp the store (its recovery removing
  // temporaries there and indexing planted records), `-h` would end the hook
  // before storing anything, `--socket=` would pick the daemon.
  TempDir tmp;
  chmod(tmp.path().c_str(), 0755);
  const std::string planted_tmp = "/tmp/.tmp-flightrec-coredump-test-planted";
  const std::string planted_rec = "/tmp/flightrec-coredump-test-planted.frec";
  std::ofstream(planted_tmp) << "another user's file";
  std::ofstream(planted_rec) << "not a record";
  const bool tmp_had_index = fs::exists("/tmp/index.sqlite");
  struct Name {
    std::string file;  // the program's file name
    std::string mode;  // fr_crash's mode: segv, or comm=NAME
    std::string comm;  // what /proc says its comm is
  };
  std::vector<Name> names = {
      {"--store=tmp", "segv", "--store=tmp"},
      {"--socket=x", "segv", "--socket=x"},
      {"fr_crash_a", "comm=--socket=/tmp/x", "--socket=/tmp/x"},
      {"-h", "segv", "-h"},
      {"--help", "segv", "--help"},
      {"--config", "segv", "--config"},
      {"--config=tmp", "segv", "--config=tmp"},
      {"fr_crash_b", "comm=--config=/tmp/", "--config=/tmp/"},
      {"--", "segv", "--"},
      {"-", "segv", "-"},
      {"\x1b[31m\x1b]0;t\x07x", "segv", "\x1b[31m\x1b]0;t\x07x"},
      {"\x01\x02\x7f-h", "segv", "\x01\x02\x7f-h"},
  };
  for (const Name& n : names) {
    SCOPED_TRACE(nlohmann::json(n.comm).dump());
    const std::string prog = tmp.path() + "/" + n.file;
    fs::copy_file(BuildPath("tests/programs/fr_crash"), prog);
    pid_t pid = CrashProgram(prog, n.mode);
    ASSERT_GT(pid, 0);
    nlohmann::json crash = WaitForCrash(pid);
    ASSERT_FALSE(crash.is_null()) << "crash not stored in the configured store\n" << daemon_->Log();
    EXPECT_EQ(crash["comm"], n.comm);
    EXPECT_EQ(crash["exe"], fs::canonical(prog).string());
    EXPECT_TRUE(crash["core_stored"].get<bool>()) << crash.dump();
    // The configured daemon was asked for the history (it may refuse:
    // its own budget is not this test's business).
    auto info = CrashInfo(daemon_->store(), crash["id"]);
    EXPECT_EQ(info["crash"]["notes"].dump().find("not reachable"), std::string::npos)
        << info["crash"]["notes"].dump();
  }
  // Nothing went to /tmp, and what was planted there is untouched.
  EXPECT_EQ(ReadFile(planted_tmp), "another user's file");
  EXPECT_EQ(ReadFile(planted_rec), "not a record");
  if (!tmp_had_index) {
    EXPECT_FALSE(fs::exists("/tmp/index.sqlite"));
  }
  EXPECT_FALSE(fs::exists("/tmp/.coredump-rate"));
  std::error_code ec;
  fs::remove(planted_tmp, ec);
  fs::remove(planted_rec, ec);
}

// A tmpfs mounted at `dir` (created) for the object's life.
class ScopedTmpfs {
 public:
  ScopedTmpfs(const std::string& dir, const std::string& size) : dir_(dir) {
    fs::create_directories(dir);
    ok_ =
        RunCommand({"/bin/mount", "-t", "tmpfs", "-o", "size=" + size + ",mode=0755", "tmpfs", dir})
            .exit_code == 0;
  }
  ~ScopedTmpfs() {
    if (ok_) RunCommand({"/bin/umount", "-l", dir_});
  }
  bool ok() const { return ok_; }

 private:
  std::string dir_;
  bool ok_ = false;
};

// Fills the filesystem of `dir` with one file until only `leave` bytes are
// free.
void FillLeaving(const std::string& dir, uint64_t leave) {
  const std::string filler = dir + "/filler";
  ScopedFd fd(open(filler.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  std::string block(1 << 16, 'f');
  while (write(fd.get(), block.data(), block.size()) > 0) {
  }
  fsync(fd.get());
  struct stat st;
  fstat(fd.get(), &st);
  const uint64_t written = static_cast<uint64_t>(st.st_size);
  if (ftruncate(fd.get(), static_cast<off_t>(written > leave ? written - leave : 0)) != 0) return;
}

TEST_F(CoredumpTest, AFullStoreKeepsTheCrashWithoutItsCoreAndSaysWhy) {
  // A 24 MiB store, full but for 4 MiB, and a crash whose core is 8 MiB of
  // noise: the core cannot be written, but the crash (metadata, backtrace,
  // history) is stored, with a note saying why the core is missing.
  TempDir tmp;
  chmod(tmp.path().c_str(), 0755);
  ScopedTmpfs small(tmp.path() + "/store", "24m");
  ASSERT_TRUE(small.ok());
  {
    Daemon d(tmp.path());
    ASSERT_TRUE(d.ready()) << d.Log();
    const std::string hook = fs::canonical(BuildPath("coredump-hook/recorder-coredump")).string();
    ASSERT_EQ(d.Cli({"coredump", "install", "--hook", hook}).exit_code, 0);
    FillLeaving(d.store(), 4 << 20);
    pid_t pid = CrashProgram(BuildPath("tests/programs/fr_crash"), "noise", 0, 300);
    ASSERT_GT(pid, 0);
    nlohmann::json crash;
    auto deadline = std::chrono::steady_clock::now() + 30s;
    while (crash.is_null() && std::chrono::steady_clock::now() < deadline) {
      auto j = nlohmann::json::parse(
          d.Cli({"crash", "list", "--pid", std::to_string(pid), "--json"}).out, nullptr, false);
      if (j.is_array() && !j.empty()) crash = j[0];
      if (crash.is_null()) std::this_thread::sleep_for(50ms);
    }
    // Back to the suite's store before anything can fail.
    ASSERT_EQ(daemon_->Cli({"coredump", "install", "--hook", hook}).exit_code, 0);
    ASSERT_FALSE(crash.is_null()) << "the crash was lost on a full store\n" << d.Log();
    EXPECT_FALSE(crash["core_stored"].get<bool>()) << crash.dump();
    auto info = d.Cli({"crash", "info", crash["id"], "--json"});
    ASSERT_EQ(info.exit_code, 0) << info.err;
    auto j = nlohmann::json::parse(info.out);
    const std::string notes = j["crash"]["notes"].dump();
    EXPECT_NE(notes.find("core not stored: no space"), std::string::npos) << notes;
    EXPECT_EQ(j["metadata"]["exe"], fs::canonical(BuildPath("tests/programs/fr_crash")).string());
    // The backtrace came from the core as it streamed by.
    ASSERT_FALSE(j["backtrace"]["threads"].empty()) << j["backtrace"].dump() << notes;
    EXPECT_TRUE(Has(FrameNames(j["backtrace"]["threads"][0]), "crash_here"))
        << j["backtrace"].dump();
    auto text = d.Cli({"crash", "info", crash["id"]});
    EXPECT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("Core: not stored"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("Note: core not stored: no space"), std::string::npos) << text.out;
    // No core to extract, said plainly.
    auto core = d.Cli({"crash", "core", crash["id"], "-o", tmp.path() + "/out.core"});
    EXPECT_NE(core.exit_code, 0);
    EXPECT_TRUE(d.Cli({"verify"}).exit_code == 0);
  }
}

// The hook's settings file with `changes` merged in, for the object's life
// (`coredump install` writes it afresh afterwards).
class ScopedHookConfig {
 public:
  ScopedHookConfig(const Daemon& d, const nlohmann::json& changes) : daemon_(d) {
    auto j = nlohmann::json::parse(ReadFile(kConfig), nullptr, false);
    ok_ = j.is_object();
    j.update(changes);
    std::ofstream(kConfig, std::ios::trunc) << j.dump();
  }
  ~ScopedHookConfig() {
    daemon_.Cli({"coredump", "install", "--hook",
                 fs::canonical(BuildPath("coredump-hook/recorder-coredump")).string()});
  }
  bool ok() const { return ok_; }

 private:
  static constexpr const char* kConfig = "/etc/flightrec/coredump.json";
  const Daemon& daemon_;
  bool ok_ = false;
};

TEST_F(CoredumpTest, OneUserCannotUseUpEveryonesCoreBudget) {
  // Cores are budgeted per uid (what a user cannot mint), not only per
  // executable (which a copy mints): nobody's sixth crash of six copies
  // keeps metadata only, and root's and daemon's next crashes still get
  // their cores.
  constexpr uid_t kNobody = 65534, kDaemon = 1;
  ScopedHookConfig config(*daemon_, {{"max_per_uid_per_hour", 4}});
  ASSERT_TRUE(config.ok());
  TempDir tmp;
  chmod(tmp.path().c_str(), 0755);
  for (int i = 0; i < 6; ++i) {
    SCOPED_TRACE(i);
    // Named to forge lines of the hook's count file for root if it kept
    // names raw.
    const std::string forged = fmt::format("\n{}\t0\tforged", time(nullptr));
    const std::string prog = fmt::format("{}/copy{}{}{}{}", tmp.path(), i, forged, forged, forged);
    fs::copy_file(BuildPath("tests/programs/fr_crash"), prog);
    pid_t pid = CrashProgram(prog, "segv", kNobody);
    ASSERT_GT(pid, 0);
    auto crash = WaitForCrash(pid);
    ASSERT_FALSE(crash.is_null()) << daemon_->Log();
    EXPECT_EQ(crash["uid"], kNobody);
    EXPECT_EQ(crash["core_stored"].get<bool>(), i < 4) << crash.dump();
    EXPECT_EQ(crash["rate_limited"].get<bool>(), i >= 4) << crash.dump();
    if (i >= 4) {
      auto j = CrashInfo(daemon_->store(), crash["id"]);
      EXPECT_NE(j["crash"]["notes"].dump().find("uid 65534"), std::string::npos)
          << j["crash"]["notes"].dump();
    }
  }
  for (uid_t uid : {uid_t{0}, kDaemon}) {
    SCOPED_TRACE(uid);
    const std::string prog = fmt::format("{}/other{}", tmp.path(), uid);
    fs::copy_file(BuildPath("tests/programs/fr_crash"), prog);
    pid_t pid = CrashProgram(prog, "segv", uid);
    ASSERT_GT(pid, 0);
    auto crash = WaitForCrash(pid);
    ASSERT_FALSE(crash.is_null()) << daemon_->Log();
    EXPECT_TRUE(crash["core_stored"].get<bool>()) << crash.dump();
    EXPECT_FALSE(crash["rate_limited"].get<bool>()) << crash.dump();
  }
}

TEST_F(CoredumpTest, ProgramsNamedLikeTheHookOrTheCliAreRecorded) {
  // Only the hook's own crashes are left alone (by its executable), not
  // every program whose name starts like it.
  TempDir tmp;
  chmod(tmp.path().c_str(), 0755);
  for (const std::string name : {"recorder", "recorder-coredump", "recorderd"}) {
    SCOPED_TRACE(name);
    const std::string prog = tmp.path() + "/" + name;
    fs::copy_file(BuildPath("tests/programs/fr_crash"), prog);
    pid_t pid = CrashProgram(prog);
    ASSERT_GT(pid, 0);
    auto crash = WaitForCrash(pid);
    ASSERT_FALSE(crash.is_null()) << daemon_->Log();
    EXPECT_EQ(crash["comm"], name.substr(0, 15));
    EXPECT_TRUE(crash["core_stored"].get<bool>()) << crash.dump();
  }
}

TEST_F(CoredumpTest, AnExecutableDeeperThanPathMaxKeepsItsMetadata) {
  // /proc/PID/exe cannot name a file deeper than PATH_MAX (readlink fails
  // with ENAMETOOLONG), yet the process is alive and its metadata readable.
  TempDir tmp;
  chmod(tmp.path().c_str(), 0755);
  const std::string component(200, 'd');
  std::vector<int> fds = {open(tmp.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  for (int depth = 0; depth < 24; ++depth) {  // 24 * 201 bytes > 4096
    ASSERT_EQ(mkdirat(fds.back(), component.c_str(), 0755), 0) << strerror(errno);
    fds.push_back(openat(fds.back(), component.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_GE(fds.back(), 0);
  }
  {
    ScopedFd out(openat(fds.back(), "fr_crash", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755));
    ASSERT_TRUE(out);
    const std::string bytes = ReadFile(BuildPath("tests/programs/fr_crash"));
    ASSERT_EQ(write(out.get(), bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }
  pid_t pid = fork();
  if (pid == 0) {
    rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
    setrlimit(RLIMIT_CORE, &unlimited);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    if (fchdir(fds.back()) != 0) _exit(126);
    execl("./fr_crash", "fr_crash", "segv", "0", static_cast<char*>(nullptr));
    _exit(127);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV) << st;
  auto crash = WaitForCrash(pid);
  ASSERT_FALSE(crash.is_null()) << daemon_->Log();
  EXPECT_TRUE(crash["core_stored"].get<bool>()) << crash.dump();
  auto j = CrashInfo(daemon_->store(), crash["id"]);
  ASSERT_FALSE(j.is_null());
  const std::string notes = j["crash"]["notes"].dump();
  EXPECT_TRUE(j["metadata"].value("verified", false)) << j["metadata"].dump() << notes;
  EXPECT_EQ(notes.find("has exited"), std::string::npos) << notes;
  EXPECT_NE(notes.find("longer than PATH_MAX"), std::string::npos) << notes;
  EXPECT_EQ(j["metadata"]["cmdline"], "fr_crash segv 0") << j["metadata"].dump();
  EXPECT_FALSE(j["metadata"]["build_id"].get<std::string>().empty()) << j["metadata"].dump();
  EXPECT_EQ(j["crash"]["comm"], "fr_crash");
  EXPECT_FALSE(j["backtrace"]["threads"].empty()) << j["backtrace"].dump() << notes;
  // Removed from the bottom up, by directory fds (no path is short enough).
  unlinkat(fds.back(), "fr_crash", 0);
  for (size_t k = fds.size() - 1; k > 0; --k) {
    close(fds[k]);
    unlinkat(fds[k - 1], component.c_str(), AT_REMOVEDIR);
  }
  close(fds[0]);
}

// Lowercase hex of `s` (what the hook stores as `key_hex`).
std::string Hex(const std::string& s) {
  std::string out;
  for (unsigned char c : s) out += fmt::format("{:02x}", c);
  return out;
}

TEST_F(CoredumpTest, NamesPathsAndArgvThatAreNotUtf8AreStoredExactly) {
  // A program's name, path, argv and cwd are bytes. JSON strings are UTF-8
  // and nlohmann's dump() throws on anything else: the root hook died on
  // such a crash (losing it) when it sent recorderd the history request, and
  // again when it wrote the metadata and the record's table of contents.
  TempDir tmp;
  chmod(tmp.path().c_str(), 0755);
  const std::string dir = tmp.path() + "/d\xff\x80ir";
  ASSERT_TRUE(fs::create_directory(dir));
  chmod(dir.c_str(), 0755);
  const std::string name =
      "\xff\xfe\x80"
      "crash";
  const std::string prog = dir + "/" + name;
  fs::copy_file(BuildPath("tests/programs/fr_crash"), prog);
  const std::string bad_arg = "arg\xff\xc0\xed\xa0\x80";  // stray, overlong lead, surrogate
  pid_t pid = fork();
  if (pid == 0) {
    rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
    setrlimit(RLIMIT_CORE, &unlimited);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    if (chdir(dir.c_str()) != 0) _exit(125);
    execl(prog.c_str(), prog.c_str(), "segv", "0", bad_arg.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV) << st;
  nlohmann::json crash = WaitForCrash(pid);
  ASSERT_FALSE(crash.is_null()) << "crash lost\n" << daemon_->Log();
  EXPECT_TRUE(crash["core_stored"].get<bool>()) << crash.dump();
  auto info = CrashInfo(daemon_->store(), crash["id"]);
  ASSERT_TRUE(info.is_object());
  // Readable UTF-8 (U+FFFD for each bad byte), and the exact bytes in hex.
  const std::string canon = fs::canonical(prog).string();
  EXPECT_EQ(info["crash"]["comm"],
            "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
            "crash");
  EXPECT_EQ(info["crash"]["comm_hex"], Hex(name));
  EXPECT_EQ(info["crash"]["exe_hex"], Hex(canon));
  EXPECT_EQ(info["metadata"]["comm_hex"], Hex(name));
  EXPECT_EQ(info["metadata"]["exe_hex"], Hex(canon));
  EXPECT_EQ(info["metadata"]["cwd_hex"], Hex(fs::canonical(dir).string()));
  EXPECT_EQ(info["metadata"]["cmdline_hex"], Hex(prog + " segv 0 " + bad_arg));
  // recorderd got the request (its reason quotes the name) and stored the
  // history.
  EXPECT_FALSE(info["crash"]["history"].get<std::string>().empty()) << info["crash"].dump();
  EXPECT_TRUE(info["history_error"].is_null()) << info.dump();
  // The CLI shows the exact bytes, escaped for the terminal.
  auto text = daemon_->Cli({"crash", "info", crash["id"]});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  const std::string esc_dir = EscapeForTerminal(fs::canonical(dir).string());
  EXPECT_NE(text.out.find("Executable: " + esc_dir + "/\\xff\\xfe\\x80crash\n"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("CWD: " + esc_dir + "\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("segv 0 arg\\xff\\xc0\\xed\\xa0\\x80\n"), std::string::npos) << text.out;
  auto list = daemon_->Cli({"crash", "list", "--pid", std::to_string(pid)});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("\\xff\\xfe\\x80crash"), std::string::npos) << list.out;
  EXPECT_EQ(list.out.find("\xff"), std::string::npos) << list.out;
}

TEST_F(CoredumpTest, RecorderdSurvivesARequestThatIsNotUtf8) {
  // Any local client may send recorderd bytes that are not UTF-8 (the
  // hook's reason quotes a program's name): refused, and it goes on.
  ScopedFd s(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(s);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  const std::string sock = dir_->path() + "/control.sock";
  std::snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock.c_str());
  ASSERT_EQ(connect(s.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0) << sock;
  const std::string payload =
      "{\"v\":1,\"id\":1,\"method\":\"dump\",\"params\":{\"last_ns\":1000000,"
      "\"reason\":\"history of \xff\xfe\x80 (1) killed by SIGSEGV\"}}";
  std::string frame(4, '\0');
  frame[2] = static_cast<char>(payload.size() >> 8);
  frame[3] = static_cast<char>(payload.size() & 0xff);
  frame += payload;
  ASSERT_EQ(write(s.get(), frame.data(), frame.size()), static_cast<ssize_t>(frame.size()));
  // An answer comes (bounded by the daemon's own idle timeout).
  char buf[4096];
  ssize_t n = read(s.get(), buf, sizeof(buf));
  EXPECT_GT(n, 4);
  auto r = daemon_->Cli({"status", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err << daemon_->Log();
}

// A socket at `path` that answers one request with `answer` (a frame's
// JSON), as whatever listens at the hook's socket path might.
class OneAnswerServer {
 public:
  OneAnswerServer(const std::string& path, std::string answer) {
    fd_.reset(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path.c_str());
    ok_ = bind(fd_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0 &&
          listen(fd_.get(), 4) == 0;
    thread_ = std::thread([this, answer] {
      ScopedFd c(accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!c) return;
      char buf[65536];
      (void)!read(c.get(), buf, sizeof(buf));  // the request (not looked at)
      std::string frame(4, '\0');
      frame[2] = static_cast<char>(answer.size() >> 8);
      frame[3] = static_cast<char>(answer.size() & 0xff);
      frame += answer;
      (void)!write(c.get(), frame.data(), frame.size());
    });
  }
  ~OneAnswerServer() {
    shutdown(fd_.get(), SHUT_RDWR);  // ends an accept() nobody connected to
    thread_.join();
  }
  bool ok() const { return ok_; }

 private:
  ScopedFd fd_;
  bool ok_ = false;
  std::thread thread_;
};

TEST_F(CoredumpTest, AMistypedConfigOrAMisshapenDaemonAnswerLosesNoCrash) {
  // nlohmann's value() throws on a value of another type, and an uncaught
  // throw aborts the root hook: every later crash would be lost to one
  // hand-edited setting, or to one answer of the wrong shape on the socket.
  TempDir tmp;
  const std::string store = tmp.path() + "/store";
  pid_t sleeper = Spawn({"/bin/sleep", "60"});
  const std::string input = tmp.path() + "/core";
  std::ofstream(input) << "not a core";
  const std::string config = tmp.path() + "/coredump.json";
  std::ofstream(config) << R"({"max_core_bytes": "1G", "history_ns": [5], "socket": 7,
                              "max_per_hour": 1.5, "store": {"x": 1}})";
  HookRun r = RunHookOn(store, tmp.path() + "/no.sock", sleeper, input, {"--config", config});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(r.id().empty()) << r.err;
  EXPECT_NE(r.err.find("ignoring \"max_core_bytes\""), std::string::npos) << r.err;
  for (const std::string answer : {
           R"({"v":1,"id":1,"ok":true,"result":{"id":5,"file":["x"]}})",
           R"({"v":1,"id":1,"ok":"yes","error":{"code":5,"message":[]}})",
           R"({"v":1,"id":1,"ok":false,"error":"no"})",
           R"({"v":1,"id":1,"ok":true,"result":[1]})",
       }) {
    SCOPED_TRACE(answer);
    const std::string sock = tmp.path() + "/fake.sock";
    unlink(sock.c_str());
    OneAnswerServer server(sock, answer);
    ASSERT_TRUE(server.ok());
    HookRun h = RunHookOn(store, sock, sleeper, input);
    EXPECT_EQ(h.exit_code, 0) << h.err;
    EXPECT_FALSE(h.id().empty()) << h.err;
    EXPECT_NE(h.err.find("no history"), std::string::npos) << h.err;
  }
  kill(sleeper, SIGKILL);
  waitpid(sleeper, nullptr, 0);
}

TEST_F(CoredumpTest, TheHookStoresOnlyInADirectoryNoOtherUserControls) {
  // The root hook creates, indexes, opens and deletes files in its store:
  // in a directory a user owns or may write (a store configured under a
  // user's home or a shared directory), that user could plant records and
  // symlinks for it. Such a store is refused with a log line.
  TempDir tmp;
  chmod(tmp.path().c_str(), 0755);
  pid_t sleeper = Spawn({"/bin/sleep", "60"});
  const std::string input = tmp.path() + "/core";
  std::ofstream(input) << "not a core";
  const std::string users = tmp.path() + "/users";  // nobody's directory
  ASSERT_TRUE(fs::create_directory(users));
  ASSERT_EQ(chown(users.c_str(), 65534, 65534), 0);
  const std::string shared = tmp.path() + "/shared";  // everyone's, not sticky
  ASSERT_TRUE(fs::create_directory(shared));
  chmod(shared.c_str(), 0777);
  for (const std::string& store : {users, users + "/store", shared + "/store"}) {
    SCOPED_TRACE(store);
    HookRun r = RunHookOn(store, tmp.path() + "/no.sock", sleeper, input);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("crash not stored: store " + store), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(store + "/index.sqlite"));
  }
  // A symlink to a good store is refused too.
  const std::string good = tmp.path() + "/good";
  HookRun ok = RunHookOn(good, tmp.path() + "/no.sock", sleeper, input);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_FALSE(ok.id().empty()) << ok.err;
  fs::create_directory_symlink(good, tmp.path() + "/link");
  HookRun link = RunHookOn(tmp.path() + "/link", tmp.path() + "/no.sock", sleeper, input);
  EXPECT_EQ(link.exit_code, 1) << link.err;
  EXPECT_NE(link.err.find("symlinks are refused"), std::string::npos) << link.err;
  kill(sleeper, SIGKILL);
  waitpid(sleeper, nullptr, 0);
}

}  // namespace
}  // namespace flightrec::testing
