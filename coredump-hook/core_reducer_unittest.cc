// CoreReducer on synthetic cores laid out like the kernel's (headers, notes,
// then memory): what it keeps, what it leaves out, how it refuses input that
// is not a native core, and that chunking of the stream does not matter;
// which notes are given to libunwind (core_notes.h), and what the unwinder
// child makes of notes that are not. (Real cores go through it in
// tests/coredump.)
#include "coredump-hook/core_reducer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/procfs.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/scoped_fd.h"
#include "coredump-hook/core_notes.h"
#include "coredump-hook/sandbox.h"
#include "tests/support/run.h"

namespace flightrec::coredump {
namespace {

constexpr int kSpReg = 19;  // RSP in <sys/reg.h>

struct Segment {
  uint64_t vaddr;
  uint64_t size;
};

struct FakeCore {
  std::string bytes;
  std::vector<Segment> segs;
  static char ByteAt(uint64_t v) { return static_cast<char>((v * 2654435761u) >> 13); }
};

// An NT_FILE note's desc: count, page size, (start, end, offset in pages)
// per entry, then the names (fs/binfmt_elf.c fill_files_note); `count`
// overrides the number of entries the note claims.
std::string NtFileDesc(const std::vector<uint64_t>& file_starts,
                       std::optional<uint64_t> count = std::nullopt,
                       const std::string& names = "") {
  std::string d;
  auto u64 = [&](uint64_t v) { d.append(reinterpret_cast<const char*>(&v), 8); };
  u64(count.value_or(file_starts.size()));
  u64(4096);
  for (uint64_t start : file_starts) {
    u64(start);
    u64(start + 4096);
    u64(0);
  }
  if (names.empty()) {
    for (size_t k = 0; k < file_starts.size(); ++k) d += "/lib/x.so" + std::string(1, '\0');
  } else {
    d += names;
  }
  return d;
}

// A core of `segs` (memory byte at vaddr v is a function of v) with one
// NT_PRSTATUS per (tid, sp), and an NT_FILE note of desc `nt_file` if any.
FakeCore MakeCore(const std::vector<Segment>& segs,
                  const std::vector<std::pair<pid_t, uint64_t>>& threads,
                  const std::string& nt_file = "") {
  FakeCore c;
  c.segs = segs;
  std::string notes;
  if (!nt_file.empty()) {
    Elf64_Nhdr nh{5, static_cast<uint32_t>(nt_file.size()), NT_FILE};
    notes.append(reinterpret_cast<const char*>(&nh), sizeof(nh));
    notes.append("CORE\0\0\0\0", 8);
    notes += nt_file;
    notes.resize((notes.size() + 3) / 4 * 4, '\0');
  }
  for (const auto& [tid, sp] : threads) {
    prstatus_t st{};
    st.pr_pid = tid;
    st.pr_reg[kSpReg] = sp;
    Elf64_Nhdr nh{5, sizeof(st), NT_PRSTATUS};
    notes.append(reinterpret_cast<const char*>(&nh), sizeof(nh));
    notes.append("CORE\0\0\0\0", 8);
    notes.append(reinterpret_cast<const char*>(&st), sizeof(st));
  }
  const size_t phnum = 1 + segs.size();
  Elf64_Ehdr eh{};
  memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_CORE;
  eh.e_machine = EM_X86_64;
  eh.e_version = EV_CURRENT;
  eh.e_phoff = sizeof(eh);
  eh.e_ehsize = sizeof(eh);
  eh.e_phentsize = sizeof(Elf64_Phdr);
  eh.e_phnum = static_cast<uint16_t>(phnum);
  std::vector<Elf64_Phdr> ph(phnum);
  uint64_t off = sizeof(eh) + phnum * sizeof(Elf64_Phdr);
  ph[0] = {PT_NOTE, 0, off, 0, 0, notes.size(), 0, 4};
  off = (off + notes.size() + 4095) / 4096 * 4096;
  for (size_t i = 0; i < segs.size(); ++i) {
    ph[i + 1] = {PT_LOAD, PF_R | PF_W, off, segs[i].vaddr, 0, segs[i].size, segs[i].size, 4096};
    off += segs[i].size;
  }
  c.bytes.append(reinterpret_cast<const char*>(&eh), sizeof(eh));
  c.bytes.append(reinterpret_cast<const char*>(ph.data()), ph.size() * sizeof(Elf64_Phdr));
  c.bytes += notes;
  c.bytes.resize(ph.size() > 1 ? ph[1].p_offset : c.bytes.size(), '\0');
  for (const auto& s : segs) {
    for (uint64_t v = s.vaddr; v < s.vaddr + s.size; ++v) c.bytes.push_back(FakeCore::ByteAt(v));
  }
  return c;
}

struct Reduced {
  Status status;
  std::string bytes;  // the output file
  uint64_t kept = 0;
  bool reduced = false;
  std::vector<CoreReducer::Thread> threads;
  // Loaded segments of the output: vaddr -> (offset, size).
  std::vector<Elf64_Phdr> loads;
  std::vector<Elf64_Phdr> all;  // every program header
};

Reduced Reduce(const std::string& in, CoreReducer::Limits limits, size_t chunk = 1 << 16,
               size_t stop_at = std::string::npos) {
  ScopedFd fd(open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  EXPECT_TRUE(fd);
  CoreReducer r(fd.get(), limits);
  size_t end = std::min(in.size(), stop_at);
  std::mt19937 rng(7);
  for (size_t off = 0; off < end;) {
    size_t n = std::min(end - off, chunk == 0 ? 1 + rng() % 5000 : chunk);
    r.Feed(in.data() + off, n);
    off += n;
  }
  Reduced out;
  out.status = r.Finish();
  out.kept = r.kept_bytes();
  out.reduced = r.reduced();
  out.threads = r.threads();
  struct stat st;
  fstat(fd.get(), &st);
  out.bytes.resize(static_cast<size_t>(st.st_size));
  EXPECT_EQ(pread(fd.get(), out.bytes.data(), out.bytes.size(), 0),
            static_cast<ssize_t>(out.bytes.size()));
  if (out.status.ok()) {
    Elf64_Ehdr eh;
    memcpy(&eh, out.bytes.data(), sizeof(eh));
    for (int i = 0; i < eh.e_phnum; ++i) {
      Elf64_Phdr ph;
      memcpy(&ph, out.bytes.data() + eh.e_phoff + i * sizeof(ph), sizeof(ph));
      out.all.push_back(ph);
      if (ph.p_type == PT_LOAD && ph.p_filesz > 0) out.loads.push_back(ph);
    }
  }
  return out;
}

// Every kept byte is the core's byte at that address.
void ExpectMemoryMatches(const Reduced& r) {
  for (const auto& ph : r.loads) {
    ASSERT_LE(ph.p_offset + ph.p_filesz, r.bytes.size());
    for (uint64_t k = 0; k < ph.p_filesz; k += 97) {
      ASSERT_EQ(r.bytes[ph.p_offset + k], FakeCore::ByteAt(ph.p_vaddr + k))
          << "vaddr " << std::hex << ph.p_vaddr + k;
    }
    EXPECT_GE(ph.p_memsz, ph.p_filesz);
  }
}

TEST(CoreReducerTest, ASmallCoreIsKeptWhole) {
  auto core = MakeCore({{0x400000, 8192}, {0x7ff000, 65536}}, {{42, 0x7ff000 + 40000}});
  auto r = Reduce(core.bytes, {});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_FALSE(r.reduced);
  EXPECT_EQ(r.kept, 8192u + 65536u);
  ASSERT_EQ(r.loads.size(), 2u);
  EXPECT_EQ(r.loads[0].p_vaddr, 0x400000u);
  EXPECT_EQ(r.loads[1].p_filesz, 65536u);
  ExpectMemoryMatches(r);
  ASSERT_EQ(r.threads.size(), 1u);
  EXPECT_EQ(r.threads[0].tid, 42);
  EXPECT_TRUE(r.threads[0].stack_kept);
}

TEST(CoreReducerTest, ALargeCoreKeepsStacksThenSmallSegmentsWithinTheBudget) {
  // A 4 MiB heap, a 1 MiB stack with sp in its middle, two ELF-header pages.
  const uint64_t stack = 0x7f0000000000, sp = stack + 512 * 1024 + 123;
  auto core = MakeCore(
      {{0x400000, 4096}, {0x500000, 4 << 20}, {0x7e0000000000, 4096}, {stack, 1 << 20}}, {{7, sp}});
  CoreReducer::Limits l;
  l.max_memory = 128 << 10;
  l.stack_window = 64 << 10;
  auto r = Reduce(core.bytes, l);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_TRUE(r.reduced);
  EXPECT_LE(r.kept, l.max_memory);
  ASSERT_EQ(r.loads.size(), 3u);  // both header pages and the stack window; no heap
  bool stack_found = false;
  for (const auto& ph : r.loads) {
    EXPECT_FALSE(ph.p_vaddr >= 0x500000 && ph.p_vaddr < 0x900000) << "heap kept";
    if (ph.p_vaddr >= stack && ph.p_vaddr < stack + (1 << 20)) {
      stack_found = true;
      EXPECT_LE(ph.p_vaddr, sp - 128) << "the red zone below sp";
      EXPECT_EQ(ph.p_vaddr + ph.p_filesz, sp + l.stack_window);
    }
  }
  EXPECT_TRUE(stack_found);
  ExpectMemoryMatches(r);
  // The heap is still described (mapped, not in the core), as the kernel
  // describes memory it does not dump.
  bool heap_described = false;
  for (const auto& ph : r.all) {
    if (ph.p_vaddr == 0x500000) {
      heap_described = ph.p_filesz == 0 && ph.p_memsz == (4u << 20) && ph.p_type == PT_LOAD;
    }
  }
  EXPECT_TRUE(heap_described);
  EXPECT_TRUE(r.threads[0].stack_kept);
  // Packed: the output is about as large as what it holds.
  EXPECT_LT(r.bytes.size(), r.kept + 64 * 1024);
}

TEST(CoreReducerTest, TheCrashingThreadsStackComesFirstWhenOnlyOneFits) {
  const uint64_t a = 0x7f0000000000, b = 0x7f1000000000;
  auto core = MakeCore({{a, 256 << 10}, {b, 256 << 10}}, {{10, b + 4096 * 10}, {11, a + 8192}});
  CoreReducer::Limits l;
  l.max_memory = 200 << 10;
  l.stack_window = 1 << 20;
  auto r = Reduce(core.bytes, l);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  // The crashing thread's window (220 KiB) is cut to the 200 KiB budget;
  // nothing is left for the other.
  EXPECT_EQ(r.kept, l.max_memory);
  ASSERT_EQ(r.loads.size(), 1u);
  EXPECT_LT(r.loads[0].p_vaddr, b + 4096 * 10);
  ASSERT_EQ(r.threads.size(), 2u);
  EXPECT_EQ(r.threads[0].tid, 10);
  EXPECT_TRUE(r.threads[0].stack_kept);
  EXPECT_FALSE(r.threads[1].stack_kept);
  ExpectMemoryMatches(r);
}

TEST(CoreReducerTest, MappedFileHeadersComeBeforeOtherThreadsStacks) {
  // Budget: the crashing thread's stack window and one page. The page goes
  // to the ELF header of a mapped file (NT_FILE), not to the other thread's
  // stack nor to an anonymous page.
  const uint64_t a = 0x7f0000000000, b = 0x7f1000000000, lib = 0x7e0000000000;
  auto core = MakeCore({{0x600000, 4096}, {lib, 4096}, {a, 64 << 10}, {b, 64 << 10}},
                       {{10, a + (60 << 10)}, {11, b + (60 << 10)}}, NtFileDesc({lib}));
  CoreReducer::Limits l;
  l.max_memory = (8 << 10) + 4096;
  auto r = Reduce(core.bytes, l);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  ASSERT_EQ(r.loads.size(), 2u);
  EXPECT_EQ(r.loads[0].p_vaddr, lib);
  EXPECT_EQ(r.loads[1].p_vaddr, a + (56 << 10));
  EXPECT_TRUE(r.threads[0].stack_kept);
  EXPECT_FALSE(r.threads[1].stack_kept);
  ExpectMemoryMatches(r);
}

TEST(CoreReducerTest, ChunkingOfTheStreamDoesNotMatter) {
  auto core = MakeCore({{0x400000, 4096}, {0x500000, 300000}, {0x7f0000000000, 200000}},
                       {{1, 0x7f0000000000 + 100000}, {2, 0x500000 + 5}});
  CoreReducer::Limits l;
  l.max_memory = 100000;
  l.stack_window = 30000;
  auto whole = Reduce(core.bytes, l, core.bytes.size());
  auto bytewise = Reduce(core.bytes, l, 1);
  auto random = Reduce(core.bytes, l, 0);
  ASSERT_TRUE(whole.status.ok()) << whole.status.message();
  EXPECT_EQ(whole.bytes, bytewise.bytes);
  EXPECT_EQ(whole.bytes, random.bytes);
  ExpectMemoryMatches(whole);
}

TEST(CoreReducerTest, ACoreCutShortKeepsWhatArrived) {
  auto core = MakeCore({{0x400000, 4096}, {0x7f0000000000, 65536}}, {{5, 0x7f0000000000 + 100}});
  auto r = Reduce(core.bytes, {}, 1 << 16, core.bytes.size() - 60000);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  ASSERT_EQ(r.loads.size(), 2u);
  EXPECT_EQ(r.loads[1].p_filesz, 65536u - 60000u);
  ExpectMemoryMatches(r);
}

TEST(CoreReducerTest, InputThatIsNotANativeCoreIsRefusedWithTheReason) {
  auto core = MakeCore({{0x400000, 4096}}, {{5, 0x400000}});
  auto with = [&](size_t at, char v) {
    std::string b = core.bytes;
    b[at] = v;
    return b;
  };
  std::string exec_type = core.bytes;
  uint16_t et = ET_EXEC;
  memcpy(exec_type.data() + offsetof(Elf64_Ehdr, e_type), &et, 2);
  std::string xnum = core.bytes;
  uint16_t pn = PN_XNUM;
  memcpy(xnum.data() + offsetof(Elf64_Ehdr, e_phnum), &pn, 2);
  std::string no_notes = core.bytes;
  uint32_t null_type = PT_NULL;
  memcpy(no_notes.data() + sizeof(Elf64_Ehdr), &null_type, 4);  // the PT_NOTE header
  std::string huge_notes = core.bytes;
  uint64_t big = 1ull << 40;
  memcpy(huge_notes.data() + sizeof(Elf64_Ehdr) + offsetof(Elf64_Phdr, p_filesz), &big, 8);
  struct Bad {
    std::string name, bytes, reason;
  };
  for (const Bad& b : std::vector<Bad>{
           {"empty", "", "empty core"},
           {"garbage", std::string(10000, 'x'), "not an ELF file"},
           {"32-bit", with(EI_CLASS, ELFCLASS32), "ELF class 1"},
           {"big-endian", with(EI_DATA, ELFDATA2MSB), "big-endian"},
           {"not a core", exec_type, "not a core"},
           {"PN_XNUM", xnum, "PN_XNUM"},
           {"no notes", no_notes, "no notes"},
           {"huge notes", huge_notes, "over the"},
           {"cut in the headers", core.bytes.substr(0, 100), "before its notes"},
       }) {
    SCOPED_TRACE(b.name);
    auto r = Reduce(b.bytes, {});
    ASSERT_FALSE(r.status.ok());
    EXPECT_NE(r.status.message().find(b.reason), std::string::npos) << r.status.message();
    EXPECT_LE(r.bytes.size(), 0u) << "nothing written for refused input";
  }
}

// PT_LOAD sizes that wrap: 128 segments claim 2^57 bytes each (the most a
// segment may claim), so their sum wraps to the stack's 8 KiB and would
// pass for a core within the limit, every segment kept whole. The first of
// them then takes every byte the stream brings after it (it grew to 367 MiB
// against 48); the others lie past the stream's end. Small: 128 KiB.
TEST(CoreReducerTest, SegmentSizesThatWrapPast2To64StayWithinTheLimit) {
  const uint64_t stack = 0x7f0000000000;
  std::vector<Segment> segs = {{stack, 8192}, {0x10000000000, 128 << 10}};
  for (uint64_t k = 1; k < 128; ++k) segs.push_back({0x10000000000 + (k << 32), 0});
  auto core = MakeCore(segs, {{5, stack + 4096}});
  Elf64_Ehdr eh;
  memcpy(&eh, core.bytes.data(), sizeof(eh));
  for (size_t i = 2; i < eh.e_phnum; ++i) {  // [0] notes, [1] the stack
    Elf64_Phdr ph;
    char* at = core.bytes.data() + eh.e_phoff + i * sizeof(ph);
    memcpy(&ph, at, sizeof(ph));
    ph.p_filesz = ph.p_memsz = 1ull << 57;
    if (i > 2) ph.p_offset = 1ull << 56;
    memcpy(at, &ph, sizeof(ph));
  }
  CoreReducer::Limits l;
  l.max_memory = 16 << 10;
  ScopedFd fd(open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  ASSERT_TRUE(fd);
  CoreReducer r(fd.get(), l);
  for (size_t off = 0; off < core.bytes.size(); off += 4096) {
    r.Feed(core.bytes.data() + off, std::min<size_t>(4096, core.bytes.size() - off));
  }
  Status st = r.Finish();
  struct stat sb;
  ASSERT_EQ(fstat(fd.get(), &sb), 0);
  // Bytes on disk (the file may be sparse): headers, notes and the limit.
  const uint64_t headers = 64 << 10;
  EXPECT_LE(static_cast<uint64_t>(sb.st_blocks) * 512, headers + l.max_memory);
  EXPECT_LE(r.kept_bytes(), l.max_memory);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(r.reduced()) << "the sum wrapped: every segment was kept whole";
  EXPECT_EQ(r.memory_bytes(), UINT64_MAX);
  EXPECT_TRUE(r.threads()[0].stack_kept);
}

bool NotesOk(const FakeCore& core, std::string* why) {
  ScopedFd fd(open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!fd || write(fd.get(), core.bytes.data(), core.bytes.size()) !=
                 static_cast<ssize_t>(core.bytes.size())) {
    *why = "no temporary file";
    return false;
  }
  Status s = CheckNotesForLibunwind(fmt::format("/proc/self/fd/{}", fd.get()));
  *why = s.message();
  return s.ok();
}

// Notes as the kernel writes them pass; NT_FILE notes libunwind-coredump
// would read past (a filename without its NUL, a count past the note's
// end, entries that are no mappings) and notes whose name or desc leave
// their segment are refused, with the reason.
TEST(CoreNotesTest, OnlyNotesAKernelCouldWriteAreGivenToLibunwind) {
  const std::vector<Segment> segs = {{0x7e0000000000, 4096}, {0x7f0000000000, 8192}};
  const std::vector<std::pair<pid_t, uint64_t>> threads = {{5, 0x7f0000001000}};
  std::string why;
  EXPECT_TRUE(NotesOk(MakeCore(segs, threads, NtFileDesc({0x7e0000000000, 0x7e0000001000})), &why))
      << why;
  EXPECT_TRUE(NotesOk(MakeCore(segs, threads), &why)) << why;
  struct Bad {
    std::string name, nt_file, reason;
  };
  std::string zero_page = NtFileDesc({0x7e0000000000});
  memset(zero_page.data() + 8, 0, 8);
  for (const Bad& b : std::vector<Bad>{
           // 12 bytes of name, no NUL, the note's last bytes.
           {"unterminated filename", NtFileDesc({0x7e0000000000}, std::nullopt, "/lib/xy.so.1"),
            "filename 0 of 1 does not end within the note"},
           {"second filename unterminated",
            NtFileDesc({0x7e0000000000, 0x7e0000001000}, std::nullopt, std::string("/a\0/b.so", 8)),
            "filename 1 of 2"},
           {"count past the end", NtFileDesc({0x7e0000000000}, 1ull << 40),
            "1099511627776 entries do not fit"},
           {"count one past the end", NtFileDesc({0x7e0000000000}, 2), "2 entries do not fit"},
           {"zero page size", zero_page, "page size 0"},
           {"empty range", NtFileDesc({0x7e0000000000}).replace(24, 8, std::string(8, '\0')),
            "entry 0 maps"},
           {"short header", std::string(12, '\1'), "shorter than its header"},
       }) {
    SCOPED_TRACE(b.name);
    EXPECT_FALSE(NotesOk(MakeCore(segs, threads, b.nt_file), &why));
    EXPECT_NE(why.find(b.reason), std::string::npos) << why;
  }
  // A note whose desc runs past its segment, and one whose name has no NUL.
  auto core = MakeCore(segs, threads);
  Elf64_Phdr notes;
  memcpy(&notes, core.bytes.data() + sizeof(Elf64_Ehdr), sizeof(notes));
  auto patched = core;
  uint32_t big = 1u << 20;
  memcpy(patched.bytes.data() + notes.p_offset + 4, &big, 4);  // n_descsz
  EXPECT_FALSE(NotesOk(patched, &why));
  EXPECT_NE(why.find("past its segment"), std::string::npos) << why;
  patched = core;
  memcpy(patched.bytes.data() + notes.p_offset + 12, "COREXXXX", 8);  // namesz 5: "COREX"
  EXPECT_FALSE(NotesOk(patched, &why));
  EXPECT_NE(why.find("name not NUL-terminated"), std::string::npos) << why;
}

// The unwinder's walk on a core whose NT_FILE claims 2^40 entries:
// libunwind-coredump's _handle_nt_file_note would strlen() 24 TiB past the
// note (SIGSEGV). The walk skips libunwind, says why, and still returns
// the threads (libdwfl's walk). In a child: a crash fails the test.
TEST(CoreNotesTest, TheWalkSkipsLibunwindOnACraftedNtFile) {
  const uint64_t stack = 0x7f0000000000;
  auto core = MakeCore({{0x7e0000000000, 4096}, {stack, 8192}}, {{getpid(), stack + 4096}},
                       NtFileDesc({0x7e0000000000}, 1ull << 40));
  ScopedFd fd(open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  ASSERT_TRUE(fd);
  ASSERT_EQ(write(fd.get(), core.bytes.data(), core.bytes.size()),
            static_cast<ssize_t>(core.bytes.size()));
  const std::string path = fmt::format("/proc/self/fd/{}", fd.get());
  const int st = testing::RunInChild([&] {
    nlohmann::json j = Backtrace(path, "", getpid(), getpid(), {});
    const std::string note = j.value("note", "");
    if (note.find("libunwind's walk skipped") == std::string::npos ||
        note.find("entries do not fit") == std::string::npos) {
      return 1;
    }
    for (const auto& t : j["threads"]) {
      if (t.value("unwind", "") != "libdwfl") return 2;
    }
    return j.contains("signal") ? 3 : 0;  // libunwind's
  });
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
      << (WIFSIGNALED(st) ? "killed by " + std::string(sigabbrev_np(WTERMSIG(st)))
                          : "exit " + std::to_string(WEXITSTATUS(st)));
}

// End to end through the sandboxed unwinder (as nobody, under seccomp): the
// same core gives a backtrace with the note, not "backtrace process died".
TEST(CoreNotesTest, TheSandboxedUnwinderReportsACraftedNtFileInsteadOfDying) {
  const uint64_t stack = 0x7f0000000000;
  auto core = MakeCore({{0x7e0000000000, 4096}, {stack, 8192}}, {{1, stack + 4096}},
                       NtFileDesc({0x7e0000000000}, 1ull << 40));
  ScopedFd tmp(open("/var/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  ASSERT_TRUE(tmp);
  ASSERT_EQ(fchown(tmp.get(), 65534, 65534), 0);  // the unwinder runs as nobody for uid 0
  HookArgs a;
  a.pid = getpid();
  a.global_tid = getpid();
  UnwinderChild child;
  ASSERT_TRUE(child.Start(tmp.get(), "", a, {{1, getpid()}}, {}).ok());
  child.Feed(core.bytes.data(), core.bytes.size());
  std::string why;
  nlohmann::json j = child.Run(&why);
  ASSERT_TRUE(j.is_object()) << why;
  EXPECT_NE(j.value("note", "").find("NT_FILE: 1099511627776 entries do not fit"),
            std::string::npos)
      << j.dump();
  ASSERT_TRUE(j.contains("input")) << j.dump();
  EXPECT_EQ(j["input"]["kept_memory_bytes"], 4096u + 8192u);
}

}  // namespace
}  // namespace flightrec::coredump
