// What reaches the hook: the kernel's core byte for byte, bad input on its
// stdin, a reused pid, a silent daemon, a crash of the hook itself.
#include <elf.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "common/scoped_fd.h"
#include "tests/coredump/coredump_fixture.h"
#include "tests/support/unix_socket.h"

namespace flightrec::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

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

// fr_crash segv without address randomization, as `personality -R` would.
// Its environment is empty, so that the stack's layout is the same each time.
pid_t CrashNoAslr(const std::string& core_dir) {
  Launch l(BuildPath("tests/programs/fr_crash"), {"fr_crash", "segv", "50"});
  l.cwd = core_dir;
  l.no_aslr = true;
  l.empty_env = true;
  pid_t pid = Start(l);
  int st = WaitStatus(pid);
  return WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV ? pid : -1;
}

TEST_F(CoredumpTest, StoredCoreIsTheKernelsCoreByteForByte) {
  TempDir tmp;
  chmod(tmp.path().c_str(), 0755);
  const std::string hook = HookPath();
  // 1. Exactly the kernel's bytes: a core_pattern handler that copies the
  // kernel's stream to a file on its way into the hook (same bytes, one
  // crash), then `crash core` must give back that file.
  {
    const std::string tee = tmp.path() + "/tee-hook";
    std::ofstream(tee) << "#!/bin/sh\ntee " << tmp.path() << "/kernel.core.$1 | exec " << hook
                       << " \"$@\"\n";
    chmod(tee.c_str(), 0755);
    PatternGuard p("|" + tee + " %P %i %I %s %t %c %u %g %d %e");
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
    PatternGuard p(tmp.path() + "/plain.core.%p");
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
  Sleeper sleeper;
  std::mt19937 rng(42);
  std::string garbage(1 << 20, '\0');
  for (char& ch : garbage) ch = static_cast<char>(rng());
  // A real core to cut and bend.
  const std::string real = tmp.path() + "/real.core";
  ASSERT_NO_FATAL_FAILURE(StoredCore("segv", 400, real));
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
    HookRun r = RunHookOn(store, nosock, sleeper.pid(), path);
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
    HookRun z = RunHookOn(store, nosock, sleeper.pid(), fifo, {"--max-core-size", "19G"});
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
    ScopedTmpfs full(mnt, "size=256k");
    ASSERT_TRUE(full.ok());
    HookRun f = RunHookOn(mnt + "/store", nosock, sleeper.pid(), tmp.path() + "/garbage");
    EXPECT_EQ(f.exit_code, 0) << f.err;
    EXPECT_NE(f.err.find("core not stored: no space"), std::string::npos) << f.err;
    auto j = CrashInfo(mnt + "/store", f.id());
    ASSERT_FALSE(j.is_null()) << f.err;
    EXPECT_FALSE(j["crash"]["core_stored"].get<bool>());
    auto v = RunCommand({BuildPath("recorder/cli/recorder"), "--store", mnt + "/store", "verify"});
    EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  }
}

TEST_F(CoredumpTest, APidThatWasReusedGetsNoMetadata) {
  TempDir tmp;
  const std::string store = tmp.path() + "/store", nosock = tmp.path() + "/no.sock";
  const std::string input = tmp.path() + "/garbage";
  std::ofstream(input) << std::string(4096, 'x');
  Sleeper sleeper;
  // The sleeper is alive, but started after this "crash": another process
  // with the crashed one's pid. The core is stored; /proc is not trusted.
  FakeCrash c;
  c.pid = sleeper.pid();
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
  c.time_s = std::nullopt;
  c.uid = 4242;
  r = RunHook(store, nosock, c, input);
  EXPECT_NE(r.err.find("belongs to uid 0, the crash to uid 4242"), std::string::npos) << r.err;
  // The kernel's pidfd (%F) names the process for certain: one of another
  // pid is refused, the right one is used.
  Sleeper other;
  ScopedFd wrong(static_cast<int>(syscall(SYS_pidfd_open, other.pid(), 0)));
  ScopedFd right(static_cast<int>(syscall(SYS_pidfd_open, sleeper.pid(), 0)));
  ASSERT_TRUE(wrong && right);
  c.uid = 0;
  c.pidfd = wrong.get();
  r = RunHook(store, nosock, c, input);
  EXPECT_NE(r.err.find(fmt::format("names pid {}, not {}", other.pid(), sleeper.pid())),
            std::string::npos)
      << r.err;
  c.pidfd = right.get();
  r = RunHook(store, nosock, c, input);
  j = CrashInfo(store, r.id());
  ASSERT_FALSE(j.is_null()) << r.err;
  EXPECT_TRUE(j["metadata"]["verified"].get<bool>()) << r.err;
  EXPECT_EQ(j["metadata"]["pidfd"], "kernel");
  EXPECT_EQ(j["metadata"]["exe"], fs::canonical("/bin/sleep").string());
}

TEST_F(CoredumpTest, ASilentDaemonDelaysTheCoreOnlyUpToTheTimeout) {
  TempDir tmp;
  const std::string store = tmp.path() + "/store", sock = tmp.path() + "/silent.sock";
  // Listens, never accepts nor answers: a hung recorderd.
  ScopedFd srv(ListenUnix(sock, 8));
  ASSERT_TRUE(srv);
  const std::string input = tmp.path() + "/garbage";
  std::ofstream(input) << std::string(4096, 'x');
  Sleeper sleeper;
  HookRun r = RunHookOn(store, sock, sleeper.pid(), input, {"--history-timeout", "700ms"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("did not give history within 700 ms"), std::string::npos) << r.err;
  EXPECT_LT(r.seconds, 5.0) << r.err;
  auto j = CrashInfo(store, r.id());
  ASSERT_FALSE(j.is_null()) << r.err;
  EXPECT_TRUE(j["crash"]["core_stored"].get<bool>());
  EXPECT_EQ(j["crash"]["history"], "");
}

TEST_F(CoredumpTest, ACrashOfTheHookItselfIsNotHandled) {
  TempDir tmp;
  const std::string store = tmp.path() + "/store";
  const std::string input = tmp.path() + "/garbage";
  std::ofstream(input) << std::string(4096, 'x');
  Sleeper sleeper;
  FakeCrash c;
  c.pid = sleeper.pid();
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
  // Its "crash" is the sleeper's.
  FakeCrash waiting;
  waiting.pid = sleeper.pid();
  waiting.time_s = 0;
  waiting.core_limit = "0";
  waiting.comm = "x";
  const auto hook_argv = HookArgv(tmp.path() + "/other", tmp.path() + "/no.sock", waiting);
  pid_t hook = fork();
  if (hook == 0) {
    int devnull = open("/dev/null", O_RDWR);
    dup2(devnull, 2);
    int p[2];
    if (pipe(p) != 0) _exit(1);
    dup2(p[0], 0);  // stdin that never ends: the hook waits for its core
    ExecAs(std::nullopt, hook_argv);
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
  kill(hook, SIGKILL);
  waitpid(hook, nullptr, 0);
}

}  // namespace
}  // namespace flightrec::testing
