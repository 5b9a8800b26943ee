// CoreReducer on synthetic cores laid out like the kernel's (headers, notes,
// then memory): what it keeps, what it leaves out, how it refuses input that
// is not a native core, and that chunking of the stream does not matter.
// (Real cores go through it in tests/coredump.)
#include "coredump-hook/core_reducer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/procfs.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/scoped_fd.h"

namespace flightrec::coredump {
namespace {

constexpr int kSpReg = 19;  // RSP in <sys/reg.h>

struct Segment {
  uint64_t vaddr;
  uint64_t size;
};

// A core of `segs` (memory byte at vaddr v is a function of v) with one
// NT_PRSTATUS per (tid, sp).
struct FakeCore {
  std::string bytes;
  std::vector<Segment> segs;
  static char ByteAt(uint64_t v) { return static_cast<char>((v * 2654435761u) >> 13); }
};

FakeCore MakeCore(const std::vector<Segment>& segs,
                  const std::vector<std::pair<pid_t, uint64_t>>& threads,
                  const std::vector<uint64_t>& file_starts = {}) {
  FakeCore c;
  c.segs = segs;
  std::string notes;
  if (!file_starts.empty()) {
    // NT_FILE: count, page size, (start, end, offset in pages)..., names.
    std::string d;
    auto u64 = [&](uint64_t v) { d.append(reinterpret_cast<const char*>(&v), 8); };
    u64(file_starts.size());
    u64(4096);
    for (uint64_t start : file_starts) {
      u64(start);
      u64(start + 4096);
      u64(0);
    }
    for (size_t k = 0; k < file_starts.size(); ++k) d += "/lib/x.so" + std::string(1, '\0');
    d.resize((d.size() + 3) / 4 * 4, '\0');
    Elf64_Nhdr nh{5, static_cast<uint32_t>(d.size()), NT_FILE};
    notes.append(reinterpret_cast<const char*>(&nh), sizeof(nh));
    notes.append("CORE\0\0\0\0", 8);
    notes += d;
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
                       {{10, a + (60 << 10)}, {11, b + (60 << 10)}}, {lib});
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

}  // namespace
}  // namespace flightrec::coredump
