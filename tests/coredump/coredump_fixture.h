// The suite of recorder-coredump tests through the real kernel.core_pattern
// (issue 6), split over several files (crash_records_test.cc, ...) that share
// this fixture: one recorderd whose hook is installed as the core_pattern for
// the whole suite; the previous core_pattern is restored afterwards, whatever
// happens. Also the helpers more than one of those files uses: crashing a
// test program, running the hook by hand as the kernel would, reading a
// stored crash back.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/daemon.h"
#include "tests/support/files.h"
#include "tests/support/run.h"

namespace flightrec::testing {

inline constexpr const char* kPatternFile = "/proc/sys/kernel/core_pattern";
inline constexpr const char* kPipeLimitFile = "/proc/sys/kernel/core_pipe_limit";

// In the environment of every crashing test program: no record may hold it.
inline constexpr const char* kSecretValue = "hunter2-flightrec-7f3a9c";

// Puts back the core_pattern and core_pipe_limit found at construction
// (optionally setting others meanwhile), whatever happens in between.
class PatternGuard {
 public:
  PatternGuard();
  // Sets the core_pattern only (a test pointing it elsewhere for a moment).
  explicit PatternGuard(const std::string& pattern);
  PatternGuard(const std::string& pattern, const std::string& limit);
  ~PatternGuard();
  PatternGuard(const PatternGuard&) = delete;
  PatternGuard& operator=(const PatternGuard&) = delete;
  const std::string& pattern() const { return pattern_; }
  const std::string& limit() const { return limit_; }

 private:
  std::string pattern_, limit_;
};

// How a test program is started: the executable, its argv (argv[0]
// included) and what the child sets up before exec. Every child has an
// unlimited core size and its stdout on /dev/null.
struct Launch {
  Launch(std::string p, std::vector<std::string> a) : path(std::move(p)), argv(std::move(a)) {}
  std::string path;
  std::vector<std::string> argv;
  uid_t uid = 0;           // 0: stays root; else that uid and gid, no groups
  std::string cwd;         // chdir() first ("": stays)
  int cwd_fd = -1;         // fchdir() first (-1: stays)
  bool no_aslr = false;    // personality(ADDR_NO_RANDOMIZE), as `setarch -R`
  bool secret = false;     // kSecretValue in FLIGHTREC_TEST_SECRET
  bool empty_env = false;  // exec with an empty environment
};
// Forks and execs `l`; the child exits 126 if its setup failed, 127 if exec
// did. Returns the child's pid (the caller waits).
pid_t Start(const Launch& l);

// Runs `path` MODE MS as uid (gid = uid; 0: root, as is); returns its pid
// once it died from SIGSEGV, -1 otherwise. The program's comm is its file
// name (cut to 15 bytes) unless MODE sets one.
pid_t CrashProgram(const std::string& path, const std::string& mode = "segv", uid_t uid = 0,
                   int ms = 0);

// The crash record of pid in d's store, waiting (bounded) for the hook to
// commit it; null if none came.
nlohmann::json WaitForCrashIn(const Daemon& d, pid_t pid);

// `recorder crash info ID --json` on `store`, as root.
nlohmann::json CrashInfo(const std::string& store, const std::string& id);

// The hook's canonical path (what `coredump install --hook` is given).
std::string HookPath();

// Runs argv as uid (gid = uid, no groups), capturing stdout and stderr.
inline RunResult RunAs(uid_t uid, const std::vector<std::string>& argv) {
  return RunCommand(argv, {}, uid);
}

// A crash mode of fr_crash and what its backtrace must show.
struct Case {
  std::string mode;
  int signal;
  std::string signame;
  std::string crashing_function;
  std::string caller;
  int ms = 400;  // CPU time spun in spin_a before the crash
};

// Names of a backtrace thread's frames, innermost first.
std::vector<std::string> FrameNames(const nlohmann::json& thread);
bool Has(const std::vector<std::string>& v, const std::string& name);
// The crashing function is in `names`, and a function whose name starts with
// `caller` above it.
bool CalledFrom(const std::vector<std::string>& names, const std::string& function,
                const std::string& caller);

// Runs the hook directly, as the kernel would, with stdin from a file.
struct HookRun {
  int exit_code = -1;
  long max_rss_kb = 0;
  double seconds = 0;
  std::string err;
  // The record id from the hook's log line, empty if nothing was stored.
  std::string id() const;
};
// What the kernel would pass for a crash of `pid`.
struct FakeCrash {
  pid_t pid = 0;
  std::optional<int64_t> time_s;  // %t; none: now
  std::string core_limit = "-1";  // %c
  uid_t uid = 0;
  int dumpable = 1;
  std::string comm = "fr_test";
  int pidfd = -1;  // installed as fd 3 and passed as %F, like the kernel does
};
// The hook's command line for `c`, as the installed core_pattern makes it:
// no settings file but one that `extra` names.
std::vector<std::string> HookArgv(const std::string& store, const std::string& sock,
                                  const FakeCrash& c, const std::vector<std::string>& extra = {});
HookRun RunHook(const std::string& store, const std::string& sock, const FakeCrash& c,
                const std::string& input, const std::vector<std::string>& extra = {});
HookRun RunHookOn(const std::string& store, const std::string& sock, pid_t pid,
                  const std::string& input, const std::vector<std::string>& extra = {});

// A `/bin/sleep 60` (as uid, if given): a live process whose metadata the
// hook can read. Killed and reaped by Stop() or when the object goes.
class Sleeper {
 public:
  explicit Sleeper(std::optional<uid_t> uid = std::nullopt);
  ~Sleeper() { Stop(); }
  Sleeper(const Sleeper&) = delete;
  Sleeper& operator=(const Sleeper&) = delete;
  void Stop();
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_;
};

// The fixture: recorderd on a fresh directory, its hook installed as the
// core_pattern for the suite.
class CoredumpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite();
  static void TearDownTestSuite();
  // Each test starts with no cores counted against the per-executable rate
  // limit (the storm test exhausts it on purpose).
  void SetUp() override;

  // Runs fr_crash MODE (spinning MS ms first, a secret in its environment)
  // and returns its pid once it died from a signal (*sig; 0 if none).
  static pid_t Crash(const std::string& mode, int* sig, int ms = 400);
  // The crash record of pid, waiting (bounded) for the hook to commit it.
  static nlohmann::json WaitForCrash(pid_t pid) { return WaitForCrashIn(*daemon_, pid); }
  // Crashes fr_crash MODE MS as root and writes its stored core to `out`.
  static void StoredCore(const std::string& mode, int ms, const std::string& out);
  // Copies fr_crash to `prog`, crashes it (CrashProgram) and returns its
  // crash record; null (a test failure) if it did not crash or was not
  // stored.
  static nlohmann::json CrashCopy(const std::string& prog, const std::string& mode = "segv",
                                  uid_t uid = 0);

  static inline PatternGuard* guard_ = nullptr;
  static inline TempDir* dir_ = nullptr;
  static inline Daemon* daemon_ = nullptr;
};

}  // namespace flightrec::testing
