// Unit tests of the attribution pipeline's pure logic: kernel symbol bounds
// (core text, modules, gaps) and the sideband history a record is cut from.
// Real binaries are tested in tests/attribution.
#include "recorder/attribution/attribution.h"

#include <fcntl.h>
#include <gelf.h>
#include <gtest/gtest.h>
#include <libelf.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <set>

#include "common/scoped_fd.h"
#include "recorder/attribution/plt_symbols.h"
#include "recorder/attribution/proc_scan.h"
#include "recorder/attribution/vdso.h"

namespace flightrec::recorder::attribution {
namespace {

constexpr const char* kKallsyms =
    "ffffffff81000000 T _text\n"
    "ffffffff81000100 T do_one\n"
    "ffffffff81000200 t do_two\n"
    "ffffffff81001000 T _etext\n"
    "ffffffff82000000 D some_data\n"
    "ffffffffc0001000 t mod_a_fn\t[mod_a]\n"
    "ffffffffc0001400 t mod_a_other\t[mod_a]\n"
    "ffffffffc0200000 t bpf_prog_1\t[bpf]\n";
constexpr const char* kModules =
    "mod_a 16384 0 - Live 0xffffffffc0000000\n"
    "mod_b 8192 0 - Live 0xffffffffc0100000 (OE)\n";

KernelSymbols Load() {
  auto k = KernelSymbols::FromText(kKallsyms);
  EXPECT_TRUE(k.ok());
  k->AddModules(kModules);
  return std::move(*k);
}

TEST(KernelSymbolsTest, CoreAddressesResolveWithinTheKernelText) {
  KernelSymbols k = Load();
  EXPECT_EQ(k.Resolve(0xffffffff81000104), "do_one+0x4");
  EXPECT_EQ(k.Resolve(0xffffffff81000fff), "do_two+0xdff");
  // Past _etext (data, freed init text) and below every symbol: unknown.
  EXPECT_EQ(k.Resolve(0xffffffff81001004), "");
  EXPECT_EQ(k.Resolve(0xffffffff82000010), "");
  EXPECT_EQ(k.Resolve(0xffffffff80000000), "");
}

// Init text (.init.text, from _sinittext to _einittext) lies past _etext;
// kallsyms keeps its symbols after boot, and the idle task of the boot CPU
// runs on a stack whose roots are there (x86_64_start_kernel, start_kernel).
constexpr const char* kInitKallsyms =
    "ffffffff81000000 T _text\n"
    "ffffffff81000100 T do_one\n"
    "ffffffff81001000 T _etext\n"
    "ffffffff82000000 D some_data\n"
    "ffffffff83000000 T _sinittext\n"
    "ffffffff83000000 B __init_begin\n"
    "ffffffff83000b10 T start_kernel\n"
    "ffffffff8300d950 T x86_64_start_kernel\n"
    "ffffffff83070000 t init_last\n"
    "ffffffff830767d0 T _einittext\n"
    "ffffffff83100000 B some_bss\n"
    "ffffffffc0001000 t mod_a_fn\t[mod_a]\n";

TEST(KernelSymbolsTest, InitTextPastEtextIsNamed) {
  auto k = KernelSymbols::FromText(kInitKallsyms);
  ASSERT_TRUE(k.ok());
  k->AddModules(kModules);
  EXPECT_EQ(k->Resolve(0xffffffff83000b20), "start_kernel+0x10");
  EXPECT_EQ(k->Resolve(0xffffffff8300d955), "x86_64_start_kernel+0x5");
  EXPECT_EQ(k->Resolve(0xffffffff830767cf), "init_last+0x67cf");
  EXPECT_EQ(k->Resolve(0xffffffff81000104), "do_one+0x4");
  // Between the text and the init text (rodata, data), past the init text,
  // and in the modules: as before.
  EXPECT_EQ(k->Resolve(0xffffffff81001004), "");
  EXPECT_EQ(k->Resolve(0xffffffff82000010), "");
  EXPECT_EQ(k->Resolve(0xffffffff830767d0), "");
  EXPECT_EQ(k->Resolve(0xffffffff83100010), "");
  EXPECT_EQ(k->Resolve(0xffffffffc0001010), "mod_a_fn+0x10 [mod_a]");
  EXPECT_EQ(k->Resolve(0xffffffffc0004000), "");
  // A record's subset keeps the init text's bounds.
  const std::vector<uint64_t> addrs = {0xffffffff83000b20, 0xffffffff8300d955, 0xffffffff82000010,
                                       0xffffffff830767d0, 0xffffffff83100010};
  auto sub = KernelSymbols::FromText(k->Subset(addrs));
  ASSERT_TRUE(sub.ok());
  for (uint64_t a : addrs) EXPECT_EQ(sub->Resolve(a), k->Resolve(a)) << std::hex << a;
}

TEST(KernelSymbolsTest, ModuleAddressesNameTheModule) {
  KernelSymbols k = Load();
  EXPECT_EQ(k.Resolve(0xffffffffc0001410), "mod_a_other+0x10 [mod_a]");
  // Inside mod_a, below its first symbol: the module and the offset.
  KernelSymbol s = k.Lookup(0xffffffffc0000010);
  EXPECT_TRUE(s.found);
  EXPECT_EQ(s.name, "");
  EXPECT_EQ(s.module, "mod_a");
  EXPECT_EQ(s.offset, 0x10u);
  EXPECT_EQ(k.Resolve(0xffffffffc0000010), "[mod_a]+0x10");
  // mod_b has no symbols (stripped): never named after mod_a's.
  EXPECT_EQ(k.Resolve(0xffffffffc0100020), "[mod_b]+0x20");
  // Between mod_a's end and mod_b: in no module, unknown.
  EXPECT_EQ(k.Resolve(0xffffffffc0004000), "");
  // A pseudo-module without an extent ([bpf]): its nearest symbol.
  EXPECT_EQ(k.Resolve(0xffffffffc0200008), "bpf_prog_1+0x8 [bpf]");
}

TEST(KernelSymbolsTest, SubsetResolvesItsAddressesLikeTheWhole) {
  KernelSymbols k = Load();
  std::vector<uint64_t> addrs = {0xffffffff81000104, 0xffffffffc0001410, 0xffffffffc0000010,
                                 0xffffffffc0100020, 0xffffffff81001004, 0xffffffffc0004000};
  auto sub = KernelSymbols::FromText(k.Subset(addrs));
  ASSERT_TRUE(sub.ok());
  for (uint64_t a : addrs) EXPECT_EQ(sub->Resolve(a), k.Resolve(a)) << std::hex << a;
}

// Records for users name kernel frames by reference (docs/FORMAT.md,
// "Kernel frames in records written for users"): a table built from the
// lookups resolves each reference to what the address resolved to.
TEST(KernelSymbolsTest, NameReferencesResolveLikeTheAddressesTheyReplace) {
  KernelSymbols k = Load();
  const std::vector<uint64_t> addrs = {0xffffffff81000104, 0xffffffffc0001410, 0xffffffffc0000010,
                                       0xffffffffc0100020};
  nlohmann::json table = nlohmann::json::array();
  std::vector<uint64_t> refs;
  for (uint64_t a : addrs) {
    KernelSymbol s = k.Lookup(a);
    ASSERT_TRUE(s.found);
    refs.push_back(KernelSymbols::NameRef(static_cast<uint32_t>(table.size()), s.offset));
    table.push_back({s.name, s.module});
  }
  auto named = KernelSymbols::FromNames(table.dump());
  ASSERT_TRUE(named.ok()) << named.status().message();
  EXPECT_TRUE(named->names_only());
  for (size_t i = 0; i < addrs.size(); ++i) {
    EXPECT_EQ(named->Resolve(refs[i]), k.Resolve(addrs[i])) << std::hex << addrs[i];
    EXPECT_LT(refs[i], 1ull << 40);  // nothing like a kernel address
  }
  // 0 and references past the table: a kernel frame without a name.
  EXPECT_FALSE(named->Lookup(0).found);
  EXPECT_FALSE(named->Lookup(KernelSymbols::NameRef(4, 0)).found);
  // Addresses mean nothing in a table of names.
  EXPECT_FALSE(named->Lookup(0xffffffff81000104).found);
}

TEST(KernelSymbolsTest, HostileNameTablesAreRefused) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  for (const std::string& bad :
       {std::string("{}"), std::string("[1]"), std::string("[[\"a\"]]"),
        std::string("[[\"a\", 5]]"), std::string("[[\"a\", \"b\", \"c\"]]"),
        std::string("[[\"") + std::string(600, 'x') + "\", \"\"]]", std::string("not json"),
        std::string("[[[\"a\"], \"b\"]]"), deep}) {
    auto k = KernelSymbols::FromNames(bad);
    EXPECT_FALSE(k.ok()) << bad.substr(0, 40);
    if (!k.ok()) {
      EXPECT_EQ(k.status().code(), StatusCode::kCorrupt);
    }
  }
  // Brackets inside names are not nesting.
  auto k = KernelSymbols::FromNames(R"([["f[[[[", "m]]]\"x"]])");
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_EQ(k->Resolve(KernelSymbols::NameRef(0, 3)), "f[[[[+0x3 [m]]]\"x]");
}

TEST(KernelSymbolsTest, MalformedTextIsSkippedNotFatal) {
  auto k = KernelSymbols::FromText("garbage\nffff\nmodule x\nmodule y zz 1\n0 T hidden\n");
  ASSERT_TRUE(k.ok());
  EXPECT_TRUE(k->empty());
  k->AddModules("a b c\n\nm 1 0 - Live 0x0\n");
  EXPECT_EQ(k->Resolve(0x1234), "");
}

MmapEvent Map(uint64_t t, uint32_t pid, uint64_t start, const std::string& file) {
  MmapEvent m;
  m.time_ns = t;
  m.pid = m.tid = pid;
  m.start = start;
  m.len = 0x1000;
  m.prot = PROT_READ | PROT_EXEC;
  m.filename = file;
  m.ino = std::hash<std::string>()(file);
  return m;
}
CommEvent Exec(uint64_t t, uint32_t pid, const std::string& comm) {
  CommEvent c;
  c.time_ns = t;
  c.pid = c.tid = pid;
  c.comm = comm;
  c.exec = true;
  return c;
}
Sample At(uint64_t t, uint32_t pid, uint64_t ip) {
  Sample s;
  s.time_ns = t;
  s.pid = s.tid = pid;
  s.mode = CpuMode::kUser;
  s.ip = ip;
  return s;
}

// Replays EventsFor + samples merged by time, as WriteDump does; returns each
// sample's leaf file.
std::vector<std::string> Attribute(const SidebandHistory& h, std::vector<Sample> samples,
                                   uint64_t start, uint64_t end) {
  std::vector<uint32_t> pids;
  for (const auto& s : samples) pids.push_back(s.pid);
  std::vector<Event> side = h.EventsFor(pids, start, end);
  for (size_t i = 1; i < side.size(); ++i) {
    EXPECT_LE(EventTime(side[i - 1]), EventTime(side[i])) << "times must not decrease";
  }
  Attributor a;
  std::vector<std::string> out;
  size_t next = 0;
  for (const auto& s : samples) {
    while (next < side.size() && EventTime(side[next]) <= s.time_ns) a.Add(side[next++]);
    auto as = a.Add(s);
    const Cookie* c = as->frames.empty() ? nullptr : a.cookies().Get(as->frames[0].cookie);
    out.push_back(c ? c->path : "?");
  }
  return out;
}

TEST(SidebandHistoryTest, AnExecInsideTheWindowSwitchesImagesAtItsTime) {
  CookieTable cookies;
  SidebandHistory h(&cookies);
  h.Add(Exec(10, 7, "old"));
  h.Add(Map(11, 7, 0x1000, "/old"));
  h.Add(Exec(100, 7, "new"));
  h.Add(Map(101, 7, 0x1000, "/new"));
  auto files = Attribute(h, {At(50, 7, 0x1010), At(99, 7, 0x1010), At(150, 7, 0x1010)}, 40, 200);
  EXPECT_EQ(files, (std::vector<std::string>{"/old", "/old", "/new"}));
  // The same after the events before the window moved into the base table.
  h.Trim(30);
  EXPECT_EQ(h.held(), 2u);
  files = Attribute(h, {At(50, 7, 0x1010), At(150, 7, 0x1010)}, 40, 200);
  EXPECT_EQ(files, (std::vector<std::string>{"/old", "/new"}));
}

TEST(SidebandHistoryTest, AMovedExecKeepsItsArrivalOrder) {
  // The module backend reports an exec after its image's mappings and moves
  // it before them; its timestamp stays the later one.
  CookieTable cookies;
  SidebandHistory h(&cookies);
  h.Add(Map(5, 7, 0x1000, "/old"));
  h.Add(Exec(120, 7, "new"));
  h.Add(Map(101, 7, 0x1000, "/new"));
  auto files = Attribute(h, {At(50, 7, 0x1010), At(110, 7, 0x1010)}, 40, 200);
  EXPECT_EQ(files, (std::vector<std::string>{"/old", "/new"}));
}

TEST(SidebandHistoryTest, AChildForkedInsideTheWindowStartsFromItsParent) {
  CookieTable cookies;
  SidebandHistory h(&cookies);
  h.Add(Map(5, 1, 0x1000, "/parent"));
  TaskEvent fork;
  fork.time_ns = 60;
  fork.pid = fork.tid = 2;
  fork.ppid = fork.ptid = 1;
  h.Add(fork);
  h.Add(Map(70, 1, 0x1000, "/parent-later"));  // the parent's, after the fork
  // Only the child was sampled; its parent's state comes along.
  auto files = Attribute(h, {At(80, 2, 0x1010)}, 40, 200);
  EXPECT_EQ(files, (std::vector<std::string>{"/parent"}));
}

TEST(SidebandHistoryTest, TrimKeepsExitedProcessesOnlyUntilTheCutoff) {
  CookieTable cookies;
  SidebandHistory h(&cookies);
  h.Add(Map(5, 3, 0x1000, "/gone"));
  TaskEvent exit;
  exit.time_ns = 20;
  exit.pid = exit.tid = exit.ppid = exit.ptid = 3;
  exit.exit = true;
  h.Add(exit);
  h.Trim(10);
  EXPECT_NE(h.base().Find(3), nullptr);
  h.Trim(30);
  EXPECT_EQ(h.base().Find(3), nullptr);
  // A storm beyond the bound is moved into the base early, and counted.
  for (uint64_t t = 100; t < 110; ++t) h.Add(Map(t, 4, 0x1000 * t, "/x"));
  h.Trim(50, 4);
  EXPECT_EQ(h.held(), 4u);
  EXPECT_EQ(h.trimmed_early(), 6u);
}

CommEvent Rename(uint64_t t, uint32_t pid, uint32_t tid, const std::string& comm) {
  CommEvent c = Exec(t, pid, comm);
  c.tid = tid;
  c.exec = false;
  return c;
}
TaskEvent Clone(uint64_t t, uint32_t pid, uint32_t tid, uint32_t ppid, uint32_t ptid) {
  return TaskEvent{.time_ns = t, .pid = pid, .ppid = ppid, .tid = tid, .ptid = ptid};
}

// Replays EventsFor + samples like Attribute above; returns each sample's comm.
std::vector<std::string> Comms(const SidebandHistory& h, const std::vector<Sample>& samples,
                               uint64_t start, uint64_t end) {
  std::vector<uint32_t> pids;
  for (const auto& s : samples) pids.push_back(s.pid);
  std::vector<Event> side = h.EventsFor(pids, start, end);
  Attributor a;
  std::vector<std::string> out;
  size_t next = 0;
  for (const auto& s : samples) {
    while (next < side.size() && EventTime(side[next]) <= s.time_ns) a.Add(side[next++]);
    out.push_back(a.Add(s)->comm);
  }
  return out;
}

Sample OnThread(uint64_t t, uint32_t pid, uint32_t tid) {
  Sample s = At(t, pid, 0x1010);
  s.tid = tid;
  return s;
}

TEST(SidebandHistoryTest, SamplesCarryTheirThreadsNameAtTheirTime) {
  CookieTable cookies;
  SidebandHistory h(&cookies);
  h.Add(Exec(1, 7, "server"));
  h.Add(Clone(2, 7, 8, 7, 7));  // a thread starts with its creator's name
  h.Add(Clone(3, 7, 9, 7, 7));
  h.Add(Rename(4, 7, 9, "worker-two"));
  h.Add(Rename(50, 7, 8, "worker-one"));
  h.Add(Rename(100, 7, 8, "renamed"));
  h.Add(Clone(120, 11, 11, 7, 9));  // a fork from thread 9 is named like it
  const std::vector<Sample> samples = {OnThread(40, 7, 8),  OnThread(45, 7, 7),
                                       OnThread(60, 7, 8),  OnThread(70, 7, 9),
                                       OnThread(110, 7, 8), OnThread(130, 11, 11)};
  const std::vector<std::string> want = {"server",     "server",  "worker-one",
                                         "worker-two", "renamed", "worker-two"};
  EXPECT_EQ(Comms(h, samples, 30, 200), want);
  // The names given before the window reach the record as state events.
  h.Trim(30);
  EXPECT_EQ(Comms(h, samples, 30, 200), want);
  EXPECT_EQ(h.base().ThreadComm(7, 9), "worker-two");
  EXPECT_EQ(h.base().ThreadComm(7, 12), "server");  // unknown thread: the process's
  EXPECT_EQ(h.base().ThreadComm(99, 99), "");
}

// The idle task (pid 0, tid 0 on every CPU) has no /proc entry and no comm
// event: it is named as perf names it, wherever a sample's name is asked.
TEST(ProcessTableTest, TheIdleTaskIsNamedSwapper) {
  CookieTable cookies;
  ProcessTable t(&cookies);
  EXPECT_EQ(t.ThreadComm(0, 0), "swapper");
  EXPECT_EQ(*t.ThreadAt(0, 0, 100).comm, "swapper");
  EXPECT_EQ(t.ThreadComm(99, 99), "");
}

TEST(SidebandHistoryTest, ExitedThreadsAreForgottenAfterTheCutoff) {
  CookieTable cookies;
  SidebandHistory h(&cookies);
  h.Add(Exec(1, 7, "server"));
  h.Add(Rename(2, 7, 8, "worker"));
  TaskEvent exit = Clone(20, 7, 8, 7, 7);
  exit.exit = true;
  h.Add(exit);
  h.Trim(10);
  EXPECT_EQ(h.base().ThreadComm(7, 8), "worker");
  h.Trim(30);
  EXPECT_EQ(h.base().ThreadComm(7, 8), "server");
  // An exec leaves only the main thread.
  h.Add(Rename(40, 7, 9, "other"));
  h.Add(Exec(50, 7, "next"));
  h.Trim(60);
  EXPECT_TRUE(h.base().Find(7)->threads.empty());
}

// Samples the kernel takes after a thread's pid was detached carry tid -1
// (pid -1 too for a process's last thread): they belong to the thread of
// their process that exited last, else they are named "[exiting]".
TEST(SidebandHistoryTest, SamplesOfAThreadOnItsWayOutGoToTheThreadThatExited) {
  CookieTable cookies;
  SidebandHistory h(&cookies);
  h.Add(Exec(1, 7, "server"));
  h.Add(Clone(2, 7, 8, 7, 7));
  h.Add(Rename(3, 7, 8, "worker-one"));
  h.Add(Clone(4, 7, 9, 7, 7));
  h.Add(Rename(5, 7, 9, "worker-two"));
  TaskEvent exit8 = Clone(50, 7, 8, 7, 7);
  exit8.exit = true;
  h.Add(exit8);
  TaskEvent exit9 = Clone(60, 7, 9, 7, 7);
  exit9.exit = true;
  h.Add(exit9);
  constexpr uint32_t kGone = UINT32_MAX;
  std::vector<Event> side = h.EventsFor({7}, 0, 200);
  Attributor a;
  size_t next = 0;
  auto at = [&](uint64_t t, uint32_t pid, uint32_t tid) {
    while (next < side.size() && EventTime(side[next]) <= t) a.Add(side[next++]);
    auto as = a.Add(OnThread(t, pid, tid));
    return std::make_pair(as->tid, as->comm);
  };
  // Before any thread exited: nobody to give it to.
  EXPECT_EQ(at(40, 7, kGone), std::make_pair(kGone, std::string("[exiting]")));
  EXPECT_EQ(at(55, 7, kGone), std::make_pair(8u, std::string("worker-one")));
  EXPECT_EQ(at(65, 7, kGone), std::make_pair(9u, std::string("worker-two")));
  EXPECT_EQ(at(66, 7, 7), std::make_pair(7u, std::string("server")));  // others keep theirs
  EXPECT_EQ(at(70, kGone, kGone), std::make_pair(kGone, std::string("[exiting]")));
  // Long after the last exit it is not that thread's any more.
  const uint64_t late = 60 + ProcessTable::kExitTailNs + 1;
  EXPECT_EQ(at(late, 7, kGone), std::make_pair(kGone, std::string("[exiting]")));
}

TEST(AffectedPidTest, OnlyMappingChangesInvalidate) {
  EXPECT_EQ(AffectedPid(Map(1, 9, 0, "/x")), 9u);
  EXPECT_EQ(AffectedPid(Exec(1, 9, "x")), 9u);
  TaskEvent t;
  t.pid = t.tid = 9;
  t.ppid = t.ptid = 8;
  EXPECT_EQ(AffectedPid(t), 9u);
  t.exit = true;
  EXPECT_FALSE(AffectedPid(t).has_value());
  TaskEvent thread;
  thread.pid = thread.ppid = 9;
  thread.tid = 10;
  EXPECT_FALSE(AffectedPid(thread).has_value());
}

// The stubs objdump labels "<name@plt>" in this very test binary are the ones
// synthesized, at the same addresses.
TEST(PltSymbolsTest, MatchObjdumpsLabels) {
  std::map<uint64_t, std::string> want;
  // (popen's child is a shell: /proc/self/exe would be objdump itself.)
  char self[4096] = {};
  ASSERT_GT(readlink("/proc/self/exe", self, sizeof(self) - 1), 0);
  const std::string cmd =
      std::string("objdump -d --section=.plt --section=.plt.sec --section=.plt.got '") + self +
      "' 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char line[4096];
  while (std::fgets(line, sizeof(line), p) != nullptr) {
    unsigned long long addr = 0;
    char name[1024];
    if (std::sscanf(line, "%llx <%1023[^>]>:", &addr, name) == 2 &&
        std::string(name).find("@plt") != std::string::npos &&
        std::string(name).find('+') == std::string::npos &&
        std::string(name).find('-') == std::string::npos) {
      std::string n = name;
      want[addr] = n.substr(0, n.find('@')) + "@plt";  // objdump adds @GLIBC_x versions
    }
  }
  pclose(p);
  ASSERT_GE(want.size(), 3u) << "objdump found no PLT stubs";
  ScopedFd fd(open(self, O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(fd);
  elf_version(EV_CURRENT);
  Elf* elf = elf_begin(fd.get(), ELF_C_READ_MMAP, nullptr);
  ASSERT_NE(elf, nullptr);
  std::map<uint64_t, std::string> got;
  for (auto& s : SynthesizePltSymbols(elf)) {
    if (s.name != ".plt") got[s.addr] = s.name;
  }
  elf_end(elf);
  EXPECT_EQ(got, want);
}

// A process that exits between the scan's open(2) of /proc/PID/maps and its
// read(2) makes the read fail with ESRCH (fs/proc/task_mmu.c, m_start():
// "if (!priv->task) return ERR_PTR(-ESRCH)"). recorderd scans /proc as it
// starts, and once died there in CI: an istreambuf_iterator over the maps
// threw std::ios_base::failure ("No such process"). Processes that come and go
// while the scan runs are skipped, and the scan goes on.
TEST(ProcScanTest, ProcessesExitingDuringTheScanAreSkipped) {
  std::vector<pid_t> churners;
  for (int i = 0; i < 2; ++i) {
    pid_t c = fork();
    ASSERT_GE(c, 0);
    if (c == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      for (;;) {
        pid_t p = fork();
        if (p == 0) {
          // Alive long enough to be listed and opened, gone soon after.
          for (int k = 0; k < 20000; ++k) asm volatile("" ::: "memory");
          _exit(0);
        }
        if (p > 0) waitpid(p, nullptr, 0);
      }
    }
    churners.push_back(c);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(4);
  int scans = 0;
  bool self_seen = true;
  while (std::chrono::steady_clock::now() < deadline) {
    bool seen = false;
    for (const Event& e : ScanProc(1)) {
      const auto* m = std::get_if<MmapEvent>(&e);
      if (m != nullptr && m->pid == static_cast<uint32_t>(getpid())) seen = true;
    }
    self_seen = self_seen && seen;
    ++scans;
  }
  for (pid_t c : churners) {
    kill(c, SIGKILL);
    waitpid(c, nullptr, 0);
  }
  EXPECT_GT(scans, 0);
  // The scan still reports the processes that stay (this one's mappings).
  EXPECT_TRUE(self_seen) << "after " << scans << " scans";
}

}  // namespace
}  // namespace flightrec::recorder::attribution
