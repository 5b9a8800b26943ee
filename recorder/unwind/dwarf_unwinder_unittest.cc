// DwarfUnwinder on a stack this test captures from itself: registers taken
// with inline assembly, the stack copied from the stack pointer up, the
// process table built from /proc/self/maps — the same inputs a perf sample
// gives, without perf. Checks the unwound return addresses against the ones
// the compiler reports (__builtin_return_address), and what a short copy and
// a rebuilt file give.
#include "recorder/unwind/dwarf_unwinder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

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

std::string SelfMaps() {
  std::ifstream f("/proc/self/maps");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

attribution::Attributor TableOfThisProcess(const std::string& corrupt_build_id_of = "") {
  attribution::Attributor a;
  for (auto& m : attribution::MapsEvents(static_cast<uint32_t>(getpid()), SelfMaps(), 0)) {
    if (!corrupt_build_id_of.empty() && m.filename == corrupt_build_id_of) {
      m.build_id = std::string(20, '\x5a');
    }
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
  Captured c;
  Level1(&c, 8192);
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
}

TEST(DwarfUnwinderTest, AShortCopyGivesTheRightPrefixAndSaysTruncated) {
  Captured full, c;
  Level1(&full, 8192);
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
  Captured c;
  Level1(&c, 8192);
  attribution::Attributor a = TableOfThisProcess(SelfExe());
  auto u = MakeDwarfUnwinder();
  attribution::UnwindNote note;
  auto ips = u->Unwind(c.sample, a.table(), a.cookies(), &note);
  EXPECT_EQ(note.status, "missing_file");
  EXPECT_NE(note.where.find("build-id differs"), std::string::npos) << note.where;
  EXPECT_EQ(ips, std::vector<uint64_t>{c.sample.ip}) << "only the sampled ip, nothing guessed";
}

TEST(DwarfUnwinderTest, AnIpOutsideEveryMappingIsAnErrorWithTheAddress) {
  Captured c;
  Level1(&c, 8192);
  attribution::Attributor empty;
  auto u = MakeDwarfUnwinder();
  attribution::UnwindNote note;
  auto ips = u->Unwind(c.sample, empty.table(), empty.cookies(), &note);
  EXPECT_EQ(note.status, "error");
  EXPECT_NE(note.where.find("not in any mapping"), std::string::npos) << note.where;
  EXPECT_EQ(ips.size(), 1u);
}

TEST(DwarfUnwinderTest, ASampleWithoutIpOrSpIsRefused) {
  Sample s;
  s.user_stack.regs_mask = 1ull << perf::kPerfRegBx;
  s.user_stack.regs = {1};
  attribution::Attributor a;
  auto u = MakeDwarfUnwinder();
  attribution::UnwindNote note;
  EXPECT_TRUE(u->Unwind(s, a.table(), a.cookies(), &note).empty());
  EXPECT_EQ(note.status, "error");
}

}  // namespace
}  // namespace flightrec::recorder::unwind
