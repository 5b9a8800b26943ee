// DwarfUnwinder on a stack this test captures from itself: registers taken
// with inline assembly, the stack copied from the stack pointer up, the
// process table built from /proc/self/maps — the same inputs a perf sample
// gives, without perf. Checks the unwound return addresses against the ones
// the compiler reports (__builtin_return_address), and what a short copy and
// a rebuilt file give.
#include "recorder/unwind/dwarf_unwinder.h"

#include <asm/perf_regs.h>
#include <dlfcn.h>
#include <elf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "recorder/attribution/vdso.h"
#include "recorder/perf/record_parser.h"

namespace flightrec::recorder::unwind {
namespace {

struct Captured {
  Sample sample;
  uint64_t ret_into_level2 = 0;  // Capture's return address
  uint64_t ret_into_level1 = 0;  // Level2's return address
};

uint64_t StackTop(uint64_t sp) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    uint64_t lo = 0, hi = 0;
    if (sscanf(line.c_str(), "%lx-%lx", &lo, &hi) == 2 && sp >= lo && sp < hi) return hi;
  }
  return sp;
}

// Registers in kUserRegsMask order: BX, BP, SP, IP, R12, R13, R14, R15.
__attribute__((noinline)) void Capture(Captured* c, size_t copy) {
  uint64_t r[8];
  asm volatile(
      "movq %%rbx, 0(%0)\n\t"
      "movq %%rbp, 8(%0)\n\t"
      "movq %%rsp, 16(%0)\n\t"
      "leaq 0(%%rip), %%rax\n\t"
      "movq %%rax, 24(%0)\n\t"
      "movq %%r12, 32(%0)\n\t"
      "movq %%r13, 40(%0)\n\t"
      "movq %%r14, 48(%0)\n\t"
      "movq %%r15, 56(%0)\n\t"
      :
      : "r"(r)
      : "rax", "memory");
  Sample& s = c->sample;
  s.pid = s.tid = static_cast<uint32_t>(getpid());
  s.mode = CpuMode::kUser;
  s.ip = r[3];
  s.user_stack.regs_mask = perf::kUserRegsMask;
  s.user_stack.regs.assign(r, r + 8);
  uint64_t sp = r[2];
  size_t n = std::min<uint64_t>(copy, StackTop(sp) - sp);
  s.user_stack.stack.resize(n);
  std::memcpy(s.user_stack.stack.data(), reinterpret_cast<const void*>(sp), n);
  s.user_stack.dyn_size = n;
  c->ret_into_level2 = reinterpret_cast<uint64_t>(__builtin_return_address(0));
}

__attribute__((noinline)) int Level2(Captured* c, size_t copy) {
  Capture(c, copy);
  c->ret_into_level1 = reinterpret_cast<uint64_t>(__builtin_return_address(0));
  asm volatile("" ::: "memory");  // work after the call: no tail call
  return 2;
}

__attribute__((noinline)) int Level1(Captured* c, size_t copy) {
  int r = Level2(c, copy);
  asm volatile("" ::: "memory");
  return r + 1;
}

// This thread's stack as Capture sees it, called through Level1 and Level2,
// with 8 KiB of it copied.
Captured CaptureOwnStack() {
  Captured c;
  Level1(&c, 8192);
  return c;
}

std::string SelfMaps() {
  std::ifstream f("/proc/self/maps");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The process table of this process as a record would hold it; optionally
// with one file's build-id changed, or one file's mappings named `as` (a
// copy with the same build-id).
attribution::Attributor TableOfThisProcess(const std::string& corrupt_build_id_of = "",
                                           const std::string& rename = "",
                                           const std::string& as = "") {
  attribution::Attributor a;
  for (auto& m : attribution::MapsEvents(static_cast<uint32_t>(getpid()), SelfMaps(), 0)) {
    if (!corrupt_build_id_of.empty() && m.filename == corrupt_build_id_of) {
      m.build_id = std::string(20, '\x5a');
    }
    if (!rename.empty() && m.filename == rename) m.filename = as;
    a.table().Apply(m);
  }
  return a;
}

std::string SelfExe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf));
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

TEST(DwarfUnwinderTest, UnwindsItsOwnStackToTheReturnAddressesTheCompilerReports) {
  Captured c = CaptureOwnStack();
  attribution::Attributor a = TableOfThisProcess();
  auto u = MakeDwarfUnwinder();
  attribution::UnwindNote note;
  auto ips = u->Unwind(c.sample, a.table(), a.cookies(), &note);
  ASSERT_GE(ips.size(), 4u) << note.status << " " << note.where;
  EXPECT_EQ(ips[0], c.sample.ip);
  EXPECT_EQ(ips[1], c.ret_into_level2);
  EXPECT_EQ(ips[2], c.ret_into_level1);
  // Through gtest and libc up to _start: a complete stack, or one that ran
  // past the copy or into the dynamic loader's entry (no CFI) — never an error.
  EXPECT_TRUE(note.status == "ok" || note.status == "truncated" || note.status == "no_unwind_info")
      << note.status << " " << note.where;
  EXPECT_EQ(u->stats().samples, 1u);

  // Twice: the second walk uses the rules kept from the first.
  attribution::UnwindNote again;
  EXPECT_EQ(u->Unwind(c.sample, a.table(), a.cookies(), &again), ips);
  EXPECT_EQ(again.status, note.status);
  EXPECT_EQ(again.where, note.where);
}

TEST(DwarfUnwinderTest, TheFastWalkGivesWhatLibunwindGives) {
  Captured c;
  Level1(&c, 65536);  // enough for the whole stack: a complete walk
  attribution::Attributor a = TableOfThisProcess();
  auto u = MakeDwarfUnwinder();
  attribution::UnwindNote first;
  auto ips = u->Unwind(c.sample, a.table(), a.cookies(), &first);
  ASSERT_EQ(first.status, "ok") << first.where;
  EXPECT_EQ(u->stats().fast, 0u);  // no rules known yet: all through libunwind
  // Every rule is known now (gtest's and libc's frames are all of the simple
  // kind): the same sample again takes the fast walk, to the same frames.
  attribution::UnwindNote second;
  EXPECT_EQ(u->Unwind(c.sample, a.table(), a.cookies(), &second), ips);
  EXPECT_EQ(second.status, "ok");
  EXPECT_EQ(u->stats().fast, 1u);
  EXPECT_EQ(u->stats().complete, 2u);
  EXPECT_EQ(u->stats().frames, 2 * ips.size());
  // A different value in a saved register slot must not change the frames
  // (only CFA-relative return addresses matter), but a different return
  // address must: the fast walk reads the copy, not a memo of the sample.
  ASSERT_GE(ips.size(), 3u);
  Captured changed = c;
  auto& stack = changed.sample.user_stack.stack;
  const uint64_t old_ret = ips[2];
  auto at = std::search(stack.begin(), stack.end(), reinterpret_cast<const uint8_t*>(&old_ret),
                        reinterpret_cast<const uint8_t*>(&old_ret) + 8);
  ASSERT_NE(at, stack.end());
  const uint64_t moved = ips[1];  // another address with a rule, so the walk goes on
  std::memcpy(&*at, &moved, 8);
  attribution::UnwindNote third;
  auto other = u->Unwind(changed.sample, a.table(), a.cookies(), &third);
  ASSERT_GE(other.size(), 3u);
  EXPECT_EQ(other[2], moved);
}

TEST(DwarfUnwinderTest, AShortCopyGivesTheRightPrefixAndSaysTruncated) {
  Captured full = CaptureOwnStack();
  attribution::Attributor a = TableOfThisProcess();
  auto u = MakeDwarfUnwinder();
  attribution::UnwindNote note;
  auto all = u->Unwind(full.sample, a.table(), a.cookies(), &note);
  ASSERT_GE(all.size(), 4u);
  // The same stack with only 8 bytes copied: Capture's own frame is larger.
  full.sample.user_stack.stack.resize(8);
  full.sample.user_stack.dyn_size = 8;
  auto ips = u->Unwind(full.sample, a.table(), a.cookies(), &note);
  EXPECT_EQ(note.status, "truncated") << note.where;
  EXPECT_NE(note.where.find("stack copy of 8 bytes"), std::string::npos) << note.where;
  ASSERT_LT(ips.size(), all.size());
  EXPECT_TRUE(std::equal(ips.begin(), ips.end(), all.begin()));
  EXPECT_EQ(u->stats().truncated, 1u);
}

TEST(DwarfUnwinderTest, AFileRebuiltSinceTheRecordIsMissingNotGuessed) {
  Captured c = CaptureOwnStack();
  attribution::Attributor a = TableOfThisProcess(SelfExe());
  auto u = MakeDwarfUnwinder();
  attribution::UnwindNote note;
  auto ips = u->Unwind(c.sample, a.table(), a.cookies(), &note);
  EXPECT_EQ(note.status, "missing_file");
  EXPECT_NE(note.where.find("build-id differs"), std::string::npos) << note.where;
  EXPECT_EQ(ips, std::vector<uint64_t>{c.sample.ip}) << "only the sampled ip, nothing guessed";
}

TEST(DwarfUnwinderTest, AnIpOutsideEveryMappingIsAnErrorWithTheAddress) {
  Captured c = CaptureOwnStack();
  attribution::Attributor empty;
  auto u = MakeDwarfUnwinder();
  attribution::UnwindNote note;
  auto ips = u->Unwind(c.sample, empty.table(), empty.cookies(), &note);
  EXPECT_EQ(note.status, "error");
  EXPECT_NE(note.where.find("not in any mapping"), std::string::npos) << note.where;
  EXPECT_EQ(ips.size(), 1u);
}

// The test libraries (testdata/cfi_lib.c), each built with other CFI.
extern "C" {
typedef void (*cfi_callback)(void* arg);
int cfi_debug_frame_outer(cfi_callback cb, void* arg, void** ret);
int cfi_debug_frame_zlib_outer(cfi_callback cb, void* arg, void** ret);
int cfi_debug_frame_zstd_outer(cfi_callback cb, void* arg, void** ret);
int cfi_eh_frame_nohdr_outer(cfi_callback cb, void* arg, void** ret);
int cfi_no_cfi_outer(cfi_callback cb, void* arg, void** ret);
}

__attribute__((noinline)) void CaptureFromLibrary(void* arg) {
  Captured* c = static_cast<Captured*>(arg);
  Capture(c, 8192);
  asm volatile("" ::: "memory");  // work after the call: no tail call
}

// Unwinds a stack captured below `outer` (a library's two frames) and
// checks that both of the library's return addresses come out, in order,
// right after the callback's.
// Captures a stack below `outer` (ret gets the library's two return
// addresses) and unwinds it with this process's mappings.
std::vector<uint64_t> CaptureAndUnwind(int (*outer)(cfi_callback, void*, void**), void* ret[2],
                                       attribution::UnwindNote* note) {
  Captured c;
  outer(&CaptureFromLibrary, &c, ret);
  attribution::Attributor a = TableOfThisProcess();
  auto u = MakeDwarfUnwinder();
  return u->Unwind(c.sample, a.table(), a.cookies(), note);
}

void ExpectUnwoundThrough(int (*outer)(cfi_callback, void*, void**), const char* what) {
  void* ret[2] = {nullptr, nullptr};
  attribution::UnwindNote note;
  auto ips = CaptureAndUnwind(outer, ret, &note);
  // ips: the sampled ip in Capture, then the return addresses into
  // CaptureFromLibrary, <lib>inner, <lib>outer (ret[0]), this function
  // (ret[1]), ...
  auto at = std::find(ips.begin(), ips.end(), reinterpret_cast<uint64_t>(ret[0]));
  ASSERT_NE(at, ips.end()) << what << ": " << note.status << " " << note.where;
  ASSERT_NE(at + 1, ips.end()) << what << ": " << note.status << " " << note.where;
  EXPECT_EQ(at[1], reinterpret_cast<uint64_t>(ret[1])) << what;
  EXPECT_EQ(at - ips.begin(), 3) << what;
  EXPECT_TRUE(note.status == "ok" || note.status == "truncated" || note.status == "no_unwind_info")
      << what << ": " << note.status << " " << note.where;
}

TEST(DwarfUnwinderTest, UnwindsThroughCodeWhoseOnlyCfiIsDebugFrame) {
  ExpectUnwoundThrough(&cfi_debug_frame_outer, ".debug_frame only");
}

TEST(DwarfUnwinderTest, UnwindsThroughACompressedDebugFrame) {
  ExpectUnwoundThrough(&cfi_debug_frame_zlib_outer, ".debug_frame, zlib-compressed");
  ExpectUnwoundThrough(&cfi_debug_frame_zstd_outer, ".debug_frame, zstd-compressed");
}

TEST(DwarfUnwinderTest, UnwindsThroughAnEhFrameWithoutEhFrameHdr) {
  ExpectUnwoundThrough(&cfi_eh_frame_nohdr_outer, ".eh_frame without .eh_frame_hdr");
}

TEST(DwarfUnwinderTest, CodeWithoutAnyCfiIsReportedNotGuessed) {
  Captured c;
  void* ret[2] = {nullptr, nullptr};
  cfi_no_cfi_outer(&CaptureFromLibrary, &c, ret);
  attribution::Attributor a = TableOfThisProcess();
  auto u = MakeDwarfUnwinder();
  attribution::UnwindNote note;
  auto ips = u->Unwind(c.sample, a.table(), a.cookies(), &note);
  EXPECT_EQ(note.status, "no_unwind_info") << note.where;
  EXPECT_NE(note.where.find("libunwind_cfi_no_cfi.so"), std::string::npos) << note.where;
  EXPECT_NE(note.where.find("no .eh_frame_hdr, .eh_frame or .debug_frame"), std::string::npos)
      << note.where;
  // The ip in Capture, the return addresses into the callback and into the
  // library's inner frame, whose own caller needs the CFI that is missing.
  EXPECT_EQ(ips.size(), 3u) << note.where;
  EXPECT_EQ(std::find(ips.begin(), ips.end(), reinterpret_cast<uint64_t>(ret[0])), ips.end());
  ASSERT_EQ(u->stats().stops.size(), 1u);
  EXPECT_EQ(u->stats().stops.begin()->first.first, "no_unwind_info");
  EXPECT_NE(u->stats().stops.begin()->first.second.find("libunwind_cfi_no_cfi.so"),
            std::string::npos);
}

// The path this process loaded a library from (the one holding `fn`).
std::string LibraryPath(void* fn) {
  Dl_info info;
  if (dladdr(fn, &info) == 0 || info.dli_fname == nullptr) return "";
  return std::filesystem::canonical(info.dli_fname).string();
}

// A copy of `path` in which `damage` has rewritten the .debug_frame bytes.
std::string DamagedCopy(const std::string& path, const std::string& name,
                        const std::function<void(uint8_t*, size_t)>& damage) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  Elf64_Ehdr eh;
  std::memcpy(&eh, bytes.data(), sizeof(eh));
  Elf64_Shdr strtab;
  std::memcpy(&strtab, bytes.data() + eh.e_shoff + eh.e_shstrndx * sizeof(Elf64_Shdr),
              sizeof(strtab));
  for (int i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, bytes.data() + eh.e_shoff + i * sizeof(Elf64_Shdr), sizeof(sh));
    if (std::string(bytes.data() + strtab.sh_offset + sh.sh_name) == ".debug_frame") {
      damage(reinterpret_cast<uint8_t*>(bytes.data() + sh.sh_offset), sh.sh_size);
    }
  }
  std::string out = ::testing::TempDir() + "/" + name;
  std::ofstream(out, std::ios::binary) << bytes;
  return out;
}

TEST(DwarfUnwinderTest, ADamagedDebugFrameIsReportedNeverFollowed) {
  const std::string lib = LibraryPath(reinterpret_cast<void*>(&cfi_debug_frame_outer));
  ASSERT_FALSE(lib.empty());
  struct Case {
    const char* name;
    std::function<void(uint8_t*, size_t)> damage;
    const char* detail;  // in the note
  };
  const Case cases[] = {
      {"all-ones", [](uint8_t* p, size_t n) { std::memset(p, 0xff, n); },
       "64-bit DWARF .debug_frame entries are not supported"},
      {"first-length-past-the-end",
       [](uint8_t* p, size_t n) {
         uint32_t len = static_cast<uint32_t>(n) + 100;
         std::memcpy(p, &len, 4);
       },
       "no .eh_frame_hdr, .eh_frame or .debug_frame"},
      {"unknown-cfa-op-in-cie",
       [](uint8_t* p, size_t) {
         // The CIE comes first (offset 0): version 1, "", code/data
         // alignment, return column, then its instructions at byte 4+4+1+1+1+1+1.
         p[13] = 0x3f;  // a vendor opcode no converter may guess at
       },
       ".debug_frame FDEs in an unsupported form left out"},
  };
  for (const Case& c : cases) {
    std::string copy = DamagedCopy(lib, std::string("damaged-") + c.name + ".so", c.damage);
    Captured cap;
    void* ret[2] = {nullptr, nullptr};
    cfi_debug_frame_outer(&CaptureFromLibrary, &cap, ret);
    attribution::Attributor a = TableOfThisProcess("", lib, copy);
    auto u = MakeDwarfUnwinder();
    attribution::UnwindNote note;
    auto ips = u->Unwind(cap.sample, a.table(), a.cookies(), &note);
    EXPECT_EQ(note.status, "no_unwind_info") << c.name << ": " << note.where;
    EXPECT_NE(note.where.find(c.detail), std::string::npos) << c.name << ": " << note.where;
    // Capture, the callback and the return into the library; nothing past it.
    EXPECT_EQ(ips.size(), 3u) << c.name << ": " << note.where;
    std::filesystem::remove(copy);
  }
}

// The entry of this process's vDSO clock_gettime: glibc registers the vDSO
// as a loaded object of its own.
uint64_t VdsoClockGettime() {
  void* vdso = dlopen("linux-vdso.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (vdso == nullptr) return 0;
  void* fn = dlsym(vdso, "__vdso_clock_gettime");
  dlclose(vdso);
  return reinterpret_cast<uint64_t>(fn);
}

// A sample at the first instruction of the vDSO's clock_gettime, called from
// where `c` was captured: the return address pushed below Capture's stack.
Sample SampleEnteringTheVdso(const Captured& c, uint64_t entry) {
  Sample s = c.sample;
  const uint64_t ret = c.sample.ip;  // a call "from" Capture's sampled ip
  std::vector<uint8_t>& stack = s.user_stack.stack;
  stack.insert(stack.begin(), reinterpret_cast<const uint8_t*>(&ret),
               reinterpret_cast<const uint8_t*>(&ret) + sizeof(ret));
  s.user_stack.dyn_size = stack.size();
  s.user_stack.regs[2] -= sizeof(ret);  // sp (kUserRegsMask order: BX, BP, SP, IP, ...)
  s.user_stack.regs[3] = entry;         // ip
  s.ip = entry;
  return s;
}

TEST(DwarfUnwinderTest, UnwindsThroughTheVdsoWithItsImage) {
  auto image = attribution::ReadOwnVdso();
  ASSERT_TRUE(image.ok()) << image.status().message();
  const uint64_t entry = VdsoClockGettime();
  ASSERT_NE(entry, 0u) << dlerror();
  Captured c = CaptureOwnStack();
  Sample s = SampleEnteringTheVdso(c, entry);
  attribution::Attributor a = TableOfThisProcess();

  // Without the image the walk stops at the vDSO and says why.
  auto bare = MakeDwarfUnwinder();
  attribution::UnwindNote note;
  auto ips = bare->Unwind(s, a.table(), a.cookies(), &note);
  EXPECT_EQ(note.status, "missing_file");
  EXPECT_NE(note.where.find("[vdso]+"), std::string::npos) << note.where;
  EXPECT_NE(note.where.find("no vDSO image"), std::string::npos) << note.where;
  EXPECT_EQ(ips, std::vector<uint64_t>{entry});

  // With it, through the vDSO's .eh_frame to the caller and on.
  auto u = MakeDwarfUnwinder();
  u->set_vdso(*image);
  ips = u->Unwind(s, a.table(), a.cookies(), &note);
  ASSERT_GE(ips.size(), 4u) << note.status << " " << note.where;
  EXPECT_EQ(ips[0], entry);
  EXPECT_EQ(ips[1], c.sample.ip);
  EXPECT_EQ(ips[2], c.ret_into_level2);
  EXPECT_EQ(ips[3], c.ret_into_level1);
  EXPECT_NE(note.status, "missing_file") << note.where;
  // An image that is not ELF is no CFI, said as such.
  u->set_vdso("not an ELF image");
  ips = u->Unwind(s, a.table(), a.cookies(), &note);
  EXPECT_EQ(note.status, "no_unwind_info") << note.where;
  EXPECT_EQ(ips.size(), 1u);
}

TEST(DwarfUnwinderTest, ADamagedVdsoImageNeverCrashesTheUnwinder) {
  // The image comes from the record: hostile. Every byte set to values that
  // make offsets and sizes large (0xff, 0x80) or zero, every aligned field
  // near 2^64, and truncations.
  auto image = attribution::ReadOwnVdso();
  ASSERT_TRUE(image.ok()) << image.status().message();
  const uint64_t entry = VdsoClockGettime();
  ASSERT_NE(entry, 0u);
  Captured c = CaptureOwnStack();
  Sample s = SampleEnteringTheVdso(c, entry);
  attribution::Attributor a = TableOfThisProcess();
  auto u = MakeDwarfUnwinder();
  attribution::UnwindNote note;
  size_t walks = 0;
  auto walk = [&](const std::string& bad) {
    u->set_vdso(bad);
    auto ips = u->Unwind(s, a.table(), a.cookies(), &note);
    ASSERT_FALSE(ips.empty());
    EXPECT_EQ(ips[0], entry);
    EXPECT_LE(ips.size(), DwarfUnwinder::kMaxFrames);
    ++walks;
  };
  for (size_t i = 0; i < image->size(); ++i) {
    for (char v : {'\xff', '\x80', '\0'}) {
      std::string bad = *image;
      bad[i] = v;
      walk(bad);
    }
  }
  // Fields near 2^64 (an offset or size that a sum would wrap), at every
  // 4-byte boundary (ELF fields are 2, 4 or 8 bytes, aligned).
  for (size_t i = 0; i + 8 <= image->size(); i += 4) {
    for (uint64_t v : {~uint64_t{0}, ~uint64_t{0} - 0xfff}) {
      std::string bad = *image;
      std::memcpy(bad.data() + i, &v, sizeof(v));
      walk(bad);
    }
  }
  for (size_t len : {size_t{0}, size_t{16}, sizeof(Elf64_Ehdr), size_t{0x200}, size_t{0x650},
                     image->size() / 2, image->size() - 1}) {
    walk(image->substr(0, len));
  }
  EXPECT_EQ(walks, 3 * image->size() + 2 * ((image->size() - 8) / 4 + 1) + 7);
  // And the real image after all of them: nothing of theirs was kept.
  u->set_vdso(*image);
  auto ips = u->Unwind(s, a.table(), a.cookies(), &note);
  ASSERT_GE(ips.size(), 2u);
  EXPECT_EQ(ips[1], c.sample.ip);
}

TEST(DwarfUnwinderTest, StatsSayWhereIncompleteStacksStopped) {
  Captured full = CaptureOwnStack();
  attribution::Attributor a = TableOfThisProcess();
  auto u = MakeDwarfUnwinder();
  attribution::UnwindNote note;
  for (size_t copy : {8, 16}) {
    Sample s = full.sample;
    s.user_stack.stack.resize(copy);
    u->Unwind(s, a.table(), a.cookies(), &note);
    u->Unwind(s, a.table(), a.cookies(), &note);
  }
  const UnwindStats& st = u->stats();
  EXPECT_EQ(st.samples, 4u);
  EXPECT_EQ(st.truncated, 4u);
  EXPECT_EQ(st.incomplete(), 4u);
  using Key = std::pair<std::string, std::string>;
  EXPECT_EQ(st.stops.at(Key("truncated", "stack copy of 8 bytes")), 2u);
  EXPECT_EQ(st.stops.at(Key("truncated", "stack copy of 16 bytes")), 2u);
  auto lines = DescribeUnwindStats(st);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0],
            "DWARF unwinding: 0 of 4 user stacks complete; incomplete: 4 truncated "
            "(stack copy too short)");
  EXPECT_EQ(lines[1], "  2 samples stopped: truncated at stack copy of 16 bytes");
  auto j = UnwindStatsJson(st);
  EXPECT_EQ(j["stacks"], 4);
  EXPECT_EQ(j["truncated"], 4);
  EXPECT_EQ(j["stops"].size(), 2u);
  EXPECT_EQ(j["stops"][0]["samples"], 2);
}

TEST(DwarfUnwinderTest, NoSummaryWithoutDwarfStacks) {
  EXPECT_TRUE(DescribeUnwindStats(UnwindStats{}).empty());
}

TEST(DwarfUnwinderTest, ASampleWithoutIpOrSpIsRefused) {
  Sample s;
  s.user_stack.regs_mask = 1ull << PERF_REG_X86_BX;
  s.user_stack.regs = {1};
  attribution::Attributor a;
  auto u = MakeDwarfUnwinder();
  attribution::UnwindNote note;
  EXPECT_TRUE(u->Unwind(s, a.table(), a.cookies(), &note).empty());
  EXPECT_EQ(note.status, "error");
}

}  // namespace
}  // namespace flightrec::recorder::unwind
