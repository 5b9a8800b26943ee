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

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/scoped_fd.h"
#include "tests/cli/run_util.h"
#include "tests/recorder/daemon_util.h"
#include "tests/store/test_util.h"

namespace flightrec::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string ReadFile(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Puts back the core_pattern and core_pipe_limit found at construction.
class PatternGuard {
 public:
  PatternGuard()
      : pattern_(ReadFile("/proc/sys/kernel/core_pattern")),
        limit_(ReadFile("/proc/sys/kernel/core_pipe_limit")) {}
  ~PatternGuard() {
    std::ofstream("/proc/sys/kernel/core_pattern") << pattern_;
    std::ofstream("/proc/sys/kernel/core_pipe_limit") << limit_;
  }

 private:
  std::string pattern_, limit_;
};

class CoredumpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    guard_ = new PatternGuard();
    dir_ = new store::testing::TempDir();
    chmod(dir_->path().c_str(), 0755);
    daemon_ = new Daemon(dir_->path());
    ASSERT_TRUE(daemon_->ready()) << daemon_->Log();
    auto r = daemon_->Cli(
        {"coredump", "install", "--hook", BuildPath("coredump-hook/recorder-coredump")});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_NE(ReadFile("/proc/sys/kernel/core_pattern").find("recorder-coredump"),
              std::string::npos);
  }
  static void TearDownTestSuite() {
    auto r = daemon_->Cli({"coredump", "uninstall"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    delete daemon_;
    delete dir_;
    delete guard_;  // restores the original pattern even if uninstall failed
  }

  // Runs fr_crash MODE and returns its pid once it died from a signal.
  static pid_t Crash(const std::string& mode, int* sig) {
    pid_t pid = fork();
    if (pid == 0) {
      rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
      setrlimit(RLIMIT_CORE, &unlimited);
      int devnull = open("/dev/null", O_WRONLY);
      dup2(devnull, 1);
      execl(BuildPath("tests/programs/fr_crash").c_str(), "fr_crash", mode.c_str(), "400",
            static_cast<char*>(nullptr));
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
  static store::testing::TempDir* dir_;
  static Daemon* daemon_;
};

PatternGuard* CoredumpTest::guard_ = nullptr;
store::testing::TempDir* CoredumpTest::dir_ = nullptr;
Daemon* CoredumpTest::daemon_ = nullptr;

struct Case {
  std::string mode;
  int signal;
  std::string signame;
  std::string crashing_function;
  std::string caller;
};

TEST_F(CoredumpTest, RealCrashesAreStoredWithBacktraceAndHistory) {
  for (const Case& c :
       std::vector<Case>{{"segv", SIGSEGV, "SIGSEGV", "crash_here", "main"},
                         {"abort", SIGABRT, "SIGABRT", "abort", "crash_here"},
                         {"fpe", SIGFPE, "SIGFPE", "crash_here", "main"},
                         {"threads", SIGSEGV, "SIGSEGV", "crash_here", "thread_main"}}) {
    SCOPED_TRACE(c.mode);
    int sig = 0;
    pid_t pid = Crash(c.mode, &sig);
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

    // Backtrace: the crashing function and its caller, crashing thread first;
    // history: the crashing thread's last seconds show spin_a.
    auto info = daemon_->Cli({"crash", "info", id, "--json"});
    ASSERT_EQ(info.exit_code, 0) << info.err;
    auto j = nlohmann::json::parse(info.out);
    ASSERT_FALSE(j["backtrace"]["threads"].empty()) << info.out;
    std::vector<std::string> names;
    for (const auto& f : j["backtrace"]["threads"][0]["frames"]) names.push_back(f["function"]);
    auto at = std::find(names.begin(), names.end(), c.crashing_function);
    ASSERT_NE(at, names.end()) << j["backtrace"].dump();
    EXPECT_NE(std::find_if(at + 1, names.end(),
                           [&](const std::string& n) { return n.rfind(c.caller, 0) == 0; }),
              names.end())
        << j["backtrace"].dump();
    ASSERT_FALSE(j["history"].is_null()) << info.out;
    EXPECT_GT(j["history"]["samples"].get<uint64_t>(), 20u) << info.out;
    EXPECT_EQ(j["history"]["top"][0]["function"], "spin_a") << info.out;
    auto text = daemon_->Cli({"crash", "info", id});
    EXPECT_NE(text.out.find("Backtrace (crashing thread first)"), std::string::npos);
    EXPECT_NE(text.out.find("spin_a"), std::string::npos) << text.out;
  }
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
    std::vector<std::string> args = {BuildPath("coredump-hook/recorder-coredump"),
                                     "--config",
                                     "/nonexistent",
                                     "--store",
                                     store,
                                     "--socket",
                                     sock};
    args.insert(args.end(), extra.begin(), extra.end());
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

// Starts argv as uid (gid = uid), stdout to /dev/null.
pid_t SpawnAs(uid_t uid, const std::vector<std::string>& argv) {
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
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
  store::testing::TempDir tmp;
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
  store::testing::TempDir tmp;
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
  wrong_class[4] = 1;  // ELFCLASS32
  std::map<std::string, std::string> inputs = {{"empty", ""},
                                               {"truncated", core.substr(0, core.size() / 7)},
                                               {"garbage", garbage},
                                               {"wrong-class", wrong_class},
                                               {"whole", core}};
  for (const auto& [name, bytes] : inputs) {
    SCOPED_TRACE(name);
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
  auto bad = RunCommand({BuildPath("coredump-hook/recorder-coredump"), "--store", store, "1", "x"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("expected the core_pattern values"), std::string::npos) << bad.err;
  // A full filesystem: refused with the reason, nothing half-written.
  {
    std::string mnt = tmp.path() + "/full";
    fs::create_directories(mnt);
    ASSERT_EQ(
        RunCommand({"/usr/bin/mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", mnt}).exit_code,
        0);
    HookRun f = RunHookOn(mnt + "/store", nosock, sleeper, tmp.path() + "/garbage");
    EXPECT_EQ(f.exit_code, 1) << f.err;
    EXPECT_NE(f.err.find("no space"), std::string::npos) << f.err;
    auto v = RunCommand({BuildPath("recorder/cli/recorder"), "--store", mnt + "/store", "verify"});
    EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
    RunCommand({"/usr/bin/umount", mnt});
  }
  kill(sleeper, SIGKILL);
  waitpid(sleeper, nullptr, 0);
}

TEST_F(CoredumpTest, APidThatWasReusedGetsNoMetadata) {
  store::testing::TempDir tmp;
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
  store::testing::TempDir tmp;
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
  store::testing::TempDir tmp;
  const std::string store = tmp.path() + "/store";
  const std::string input = tmp.path() + "/garbage";
  std::ofstream(input) << std::string(4096, 'x');
  pid_t sleeper = Spawn({"/bin/sleep", "60"});
  FakeCrash c;
  c.pid = sleeper;
  c.comm = "recorder-coredu";  // %e: the hook's comm, cut to 15 characters
  HookRun r = RunHook(store, tmp.path() + "/no.sock", c, input);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("not handling a crash of recorder-coredump itself"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.id(), "");
  // Recognised by its executable too, whatever its comm.
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
          (tmp.path() + "/no.sock").c_str(), pid.c_str(), pid.c_str(), pid.c_str(), "11", "0", "0",
          "0", "0", "1", "x", static_cast<char*>(nullptr));
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

TEST_F(CoredumpTest, UsersSeeAndReadOnlyTheirOwnCrashes) {
  constexpr uid_t kNobody = 65534;
  store::testing::TempDir tmp;
  chmod(tmp.path().c_str(), 0777);
  const std::string prog = tmp.path() + "/fr_crash", rec = tmp.path() + "/recorder";
  fs::copy_file(BuildPath("tests/programs/fr_crash"), prog);
  fs::copy_file(BuildPath("recorder/cli/recorder"), rec);
  // A crash of root's, and one of nobody's.
  int sig = 0;
  pid_t root_pid = Crash("segv", &sig);
  auto root_crash = WaitForCrash(root_pid);
  ASSERT_FALSE(root_crash.is_null());
  pid_t pid = fork();
  if (pid == 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(kNobody, kNobody, kNobody) != 0 ||
        setresuid(kNobody, kNobody, kNobody) != 0) {
      _exit(126);
    }
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    execl(prog.c_str(), "fr_crash", "segv", "300", static_cast<char*>(nullptr));
    _exit(127);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFSIGNALED(st));
  auto mine = WaitForCrash(pid);
  ASSERT_FALSE(mine.is_null());
  EXPECT_EQ(mine["uid"], kNobody);
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
  auto list = RunAs(kNobody, {rec, "--store", store, "crash", "list", "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  auto j = nlohmann::json::parse(list.out);
  ASSERT_EQ(j.size(), 1u) << list.out;
  EXPECT_EQ(j[0]["id"], mine["id"]);
  // Their own core and history: readable.
  auto core = RunAs(kNobody, {rec, "--store", store, "crash", "core", mine["id"], "-o",
                              tmp.path() + "/mine.core"});
  EXPECT_EQ(core.exit_code, 0) << core.err;
  EXPECT_EQ(fs::file_size(tmp.path() + "/mine.core"), mine["core_size"].get<uint64_t>());
  auto info = RunAs(kNobody, {rec, "--store", store, "crash", "info", mine["id"], "--json"});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_FALSE(nlohmann::json::parse(info.out)["history"].is_null()) << info.out;
  // Root's: neither listed nor readable, nor the index, nor the file itself.
  auto other = RunAs(kNobody, {rec, "--store", store, "crash", "core", root_crash["id"], "-o",
                               tmp.path() + "/other.core"});
  EXPECT_NE(other.exit_code, 0);
  EXPECT_NE(other.err.find("no crash"), std::string::npos) << other.err;
  EXPECT_FALSE(fs::exists(tmp.path() + "/other.core"));
  auto sql = RunAs(kNobody, {rec, "--store", store, "sql", "SELECT * FROM crashes"});
  EXPECT_NE(sql.exit_code, 0) << sql.out;
  auto nd_info = RunAs(kNobody, {rec, "--store", store, "crash", "info", hr.id()});
  EXPECT_NE(nd_info.exit_code, 0) << nd_info.out;
  for (const auto& e : fs::directory_iterator(store)) {
    for (const std::string& id : {root_crash["id"].get<std::string>(), hr.id()}) {
      if (e.path().filename().string().rfind(id, 0) != 0) continue;
      auto cat = RunAs(kNobody, {"/bin/cat", e.path().string()});
      EXPECT_NE(cat.exit_code, 0) << e.path() << " is readable by nobody";
    }
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

}  // namespace
}  // namespace flightrec::testing
