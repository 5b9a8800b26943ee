#include "tests/coredump/coredump_fixture.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/personality.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

namespace flightrec::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

PatternGuard::PatternGuard() : pattern_(ReadFile(kPatternFile)), limit_(ReadFile(kPipeLimitFile)) {}

PatternGuard::PatternGuard(const std::string& pattern) : PatternGuard() {
  std::ofstream(kPatternFile) << pattern;
}

PatternGuard::PatternGuard(const std::string& pattern, const std::string& limit)
    : PatternGuard(pattern) {
  std::ofstream(kPipeLimitFile) << limit;
}

PatternGuard::~PatternGuard() {
  std::ofstream(kPatternFile) << pattern_;
  std::ofstream(kPipeLimitFile) << limit_;
}

pid_t Start(const Launch& l) {
  pid_t pid = fork();
  if (pid == 0) {
    if (l.no_aslr) personality(ADDR_NO_RANDOMIZE);
    rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
    setrlimit(RLIMIT_CORE, &unlimited);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    if (!l.cwd.empty() && chdir(l.cwd.c_str()) != 0) _exit(126);
    if (l.cwd_fd >= 0 && fchdir(l.cwd_fd) != 0) _exit(126);
    if (l.uid != 0 && (setgroups(0, nullptr) != 0 || setresgid(l.uid, l.uid, l.uid) != 0 ||
                       setresuid(l.uid, l.uid, l.uid) != 0)) {
      _exit(126);
    }
    if (l.secret) setenv("FLIGHTREC_TEST_SECRET", kSecretValue, 1);
    std::vector<char*> argv;
    for (const auto& a : l.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    char* no_env[] = {nullptr};
    execve(l.path.c_str(), argv.data(), l.empty_env ? no_env : environ);
    _exit(127);
  }
  return pid;
}

pid_t CrashProgram(const std::string& path, const std::string& mode, uid_t uid, int ms) {
  Launch l(path, {path, mode, std::to_string(ms)});
  l.uid = uid;
  pid_t pid = Start(l);
  int st = WaitStatus(pid);
  return WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV ? pid : -1;
}

nlohmann::json WaitForCrashIn(const Daemon& d, pid_t pid) {
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    auto r = d.Cli({"crash", "list", "--pid", std::to_string(pid), "--json"});
    if (r.exit_code == 0) {
      auto j = nlohmann::json::parse(r.out, nullptr, false);
      if (j.is_array() && !j.empty()) return j[0];
    }
    std::this_thread::sleep_for(50ms);
  }
  return nullptr;
}

nlohmann::json CrashInfo(const std::string& store, const std::string& id) {
  auto r = RunCommand(
      {BuildPath("recorder/cli/recorder"), "--store", store, "crash", "info", id, "--json"});
  if (r.exit_code != 0) return nullptr;
  return nlohmann::json::parse(r.out, nullptr, false);
}

std::vector<std::string> FrameNames(const nlohmann::json& thread) {
  std::vector<std::string> names;
  for (const auto& f : thread["frames"]) names.push_back(f.value("function", ""));
  return names;
}

bool Has(const std::vector<std::string>& v, const std::string& name) {
  return std::find(v.begin(), v.end(), name) != v.end();
}

bool CalledFrom(const std::vector<std::string>& names, const std::string& function,
                const std::string& caller) {
  auto at = std::find(names.begin(), names.end(), function);
  return at != names.end() && std::find_if(at + 1, names.end(), [&](const std::string& n) {
                                return n.rfind(caller, 0) == 0;
                              }) != names.end();
}

std::string HookRun::id() const {
  size_t at = err.find("stored as ");
  return at == std::string::npos ? "" : err.substr(at + 10, 23);
}

std::vector<std::string> HookArgv(const std::string& store, const std::string& sock,
                                  const FakeCrash& c, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {BuildPath("coredump-hook/recorder-coredump")};
  if (std::find(extra.begin(), extra.end(), "--config") == extra.end()) {
    args.insert(args.end(), {"--config", "/nonexistent"});
  }
  args.insert(args.end(), {"--store", store, "--socket", sock});
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back("--");  // the kernel's values follow, as in the installed pattern
  const std::string pid = std::to_string(c.pid), uid = std::to_string(c.uid);
  const std::string t = std::to_string(c.time_s ? *c.time_s : time(nullptr));
  args.insert(args.end(),
              {pid, pid, pid, "11", t, c.core_limit, uid, uid, std::to_string(c.dumpable), c.comm});
  if (c.pidfd >= 0) args.push_back("3");
  return args;
}

HookRun RunHook(const std::string& store, const std::string& sock, const FakeCrash& c,
                const std::string& input, const std::vector<std::string>& extra) {
  std::string errfile = input + ".err";  // next to the input, not in a (full) store
  const std::vector<std::string> args = HookArgv(store, sock, c, extra);
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
    ExecAs(std::nullopt, args);
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
                  const std::string& input, const std::vector<std::string>& extra) {
  FakeCrash c;
  c.pid = pid;
  return RunHook(store, sock, c, input, extra);
}

Sleeper::Sleeper(std::optional<uid_t> uid) : pid_(Spawn({"/bin/sleep", "60"}, true, uid)) {}

void Sleeper::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void CoredumpTest::SetUpTestSuite() {
  guard_ = new PatternGuard();
  dir_ = new TempDir();
  chmod(dir_->path().c_str(), 0755);
  // Every test's crashes are root's and most want their history: the
  // daemon's per-uid dump budget (20 an hour by default) is not what this
  // suite tests.
  daemon_ = new Daemon(dir_->path(),
                       {"--max-dumps-per-hour", "10000", "--max-dumps-per-uid-per-hour", "10000"});
  ASSERT_TRUE(daemon_->ready()) << daemon_->Log();
  auto r =
      daemon_->Cli({"coredump", "install", "--hook", BuildPath("coredump-hook/recorder-coredump")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_NE(ReadFile(kPatternFile).find("recorder-coredump"), std::string::npos);
}

void CoredumpTest::SetUp() {
  std::error_code ec;
  fs::remove(daemon_->store() + "/.coredump-rate", ec);
}

void CoredumpTest::TearDownTestSuite() {
  auto r = daemon_->Cli({"coredump", "uninstall"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  delete daemon_;
  delete dir_;
  delete guard_;  // restores the original pattern even if uninstall failed
}

pid_t CoredumpTest::Crash(const std::string& mode, int* sig, int ms) {
  Launch l(BuildPath("tests/programs/fr_crash"), {"fr_crash", mode, std::to_string(ms)});
  l.secret = true;
  pid_t pid = Start(l);
  int st = WaitStatus(pid);
  *sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
  return pid;
}

void CoredumpTest::StoredCore(const std::string& mode, int ms, const std::string& out) {
  int sig = 0;
  pid_t crashed = Crash(mode, &sig, ms);
  auto listed = WaitForCrash(crashed);
  ASSERT_FALSE(listed.is_null());
  ASSERT_EQ(daemon_->Cli({"crash", "core", listed["id"], "-o", out}).exit_code, 0);
}

nlohmann::json CoredumpTest::CrashCopy(const std::string& prog, const std::string& mode,
                                       uid_t uid) {
  fs::copy_file(BuildPath("tests/programs/fr_crash"), prog);
  pid_t pid = CrashProgram(prog, mode, uid);
  EXPECT_GT(pid, 0) << prog << " did not die from SIGSEGV";
  if (pid <= 0) return nullptr;
  auto crash = WaitForCrash(pid);
  EXPECT_FALSE(crash.is_null()) << "crash of " << prog << " not stored\n" << daemon_->Log();
  return crash;
}

std::string HookPath() {
  return fs::canonical(BuildPath("coredump-hook/recorder-coredump")).string();
}

}  // namespace flightrec::testing
