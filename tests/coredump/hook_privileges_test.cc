// The hook's privileges and its bounded unwinder, program names that look like
// options, a full store.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "common/scoped_fd.h"
#include "tests/coredump/coredump_fixture.h"
#include "tests/support/proc.h"

namespace flightrec::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

TEST_F(CoredumpTest, TheHookDropsItsPrivilegesAndTheUnwinderRunsAsTheCrashedUser) {
  constexpr uid_t kNobody = 65534;
  TempDir tmp;
  const std::string store = tmp.path() + "/store";
  // A real core to feed it, and a live process of nobody's as "the crash".
  const std::string core = tmp.path() + "/real.core";
  ASSERT_NO_FATAL_FAILURE(StoredCore("segv", 0, core));
  Sleeper nobodys(kNobody);
  const pid_t sleeper = nobodys.pid();
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
  FakeCrash crash;
  crash.pid = sleeper;
  crash.time_s = 0;
  crash.core_limit = "0";
  crash.uid = kNobody;
  crash.comm = "sleep";
  const auto hook_argv = HookArgv(store, tmp.path() + "/no.sock", crash);
  pid_t hook = fork();
  if (hook == 0) {
    dup2(in[0], 0);
    close(in[1]);
    int err = open(errfile.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(err, 2);
    ExecAs(std::nullopt, hook_argv);
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
  // Under its seccomp filter (mode 2) before the first byte of the core
  // reaches it: the core is parsed there and nowhere else. The child loads
  // the filter after it became nobody (sandbox.cc), so once the filter is
  // there the ids below are final; read earlier, a child found just after
  // the hook's own drop could still be root's.
  deadline = std::chrono::steady_clock::now() + 10s;
  while (StatusField(unwinder, "Seccomp") != "2" && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(StatusField(unwinder, "Seccomp"), "2");
  EXPECT_EQ(StatusField(unwinder, "Seccomp_filters"), "1");
  EXPECT_EQ(StatusField(unwinder, "Uid"), "65534\t65534\t65534\t65534");
  EXPECT_EQ(StatusField(unwinder, "Gid"), "65534\t65534\t65534\t65534");
  EXPECT_EQ(StatusField(unwinder, "CapEff"), "0000000000000000");
  EXPECT_EQ(StatusField(unwinder, "CapPrm"), "0000000000000000");
  EXPECT_EQ(StatusField(unwinder, "NoNewPrivs"), "1");
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
  const std::string hook = HookPath();
  const std::string wrapper = tmp.path() + "/small-budget-hook";
  std::ofstream(wrapper) << "#!/bin/sh\nexec " << hook << " --backtrace-memory-max 64K -- \"$@\"\n";
  chmod(wrapper.c_str(), 0755);
  PatternGuard p("|" + wrapper + " %P %i %I %s %t %c %u %g %d %e");
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
    ASSERT_TRUE(Has(names, c.crashing_function)) << bt.dump();
    EXPECT_TRUE(CalledFrom(names, c.crashing_function, c.caller)) << bt.dump();
    EXPECT_TRUE(Has(names, "main") || Has(names, "thread_main")) << bt.dump();
    if (c.mode == "threads") {
      ASSERT_EQ(bt["threads"].size(), 2u);
      auto other = FrameNames(bt["threads"][1]);
      EXPECT_TRUE(Has(other, "spin_a") && Has(other, "main")) << bt.dump();
    }
  }
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
    nlohmann::json crash = CrashCopy(prog, n.mode);
    ASSERT_FALSE(crash.is_null()) << "crash not stored in the configured store";
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

TEST_F(CoredumpTest, ALegacyPatternKeepsTheCrashOfAProgramNamedDoubleDash) {
  // A core_pattern written before "--" was added passes the values only
  // (%P first): a program named "--" is the 10th value there, not the end
  // of the hook's options.
  TempDir tmp;
  chmod(tmp.path().c_str(), 0755);
  PatternGuard legacy("|" + HookPath() + " %P %i %I %s %t %c %u %g %d %e %F");
  for (const std::string name : {"--", "-"}) {
    SCOPED_TRACE(name);
    nlohmann::json crash = CrashCopy(tmp.path() + "/" + name);
    ASSERT_FALSE(crash.is_null()) << "crash not stored";
    EXPECT_EQ(crash["comm"], name);
    EXPECT_TRUE(crash["core_stored"].get<bool>()) << crash.dump();
  }
}

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
  ScopedTmpfs small(tmp.path() + "/store", "size=24m,mode=0755");
  ASSERT_TRUE(small.ok());
  {
    Daemon d(tmp.path());
    ASSERT_TRUE(d.ready()) << d.Log();
    const std::string hook = HookPath();
    ASSERT_EQ(d.Cli({"coredump", "install", "--hook", hook}).exit_code, 0);
    FillLeaving(d.store(), 4 << 20);
    pid_t pid = CrashProgram(BuildPath("tests/programs/fr_crash"), "noise", 0, 300);
    ASSERT_GT(pid, 0);
    nlohmann::json crash = WaitForCrashIn(d, pid);
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

}  // namespace
}  // namespace flightrec::testing
