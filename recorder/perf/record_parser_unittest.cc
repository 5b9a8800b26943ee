// ParsePerfRecord on hand-built PERF_RECORD_SAMPLE records with user
// registers and a user stack copy (include/uapi/linux/perf_event.h layout),
// and the --call-graph option.
#include "recorder/perf/record_parser.h"

#include <asm/perf_regs.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "recorder/perf/perf_backend.h"

namespace flightrec::recorder::perf {
namespace {

class RecordBuilder {
 public:
  explicit RecordBuilder(uint16_t misc = PERF_RECORD_MISC_USER) {
    perf_event_header h{PERF_RECORD_SAMPLE, misc, 0};
    Put(&h, sizeof(h));
  }
  RecordBuilder& U64(uint64_t v) { return Put(&v, 8); }
  RecordBuilder& U32(uint32_t v) { return Put(&v, 4); }
  RecordBuilder& Bytes(const std::vector<uint8_t>& b) { return Put(b.data(), b.size()); }
  // The fixed part of kSampleType: ip, pid/tid, time, cpu/res, period.
  RecordBuilder& Head(uint64_t ip) {
    return U64(ip).U32(100).U32(101).U64(5000).U32(1).U32(0).U64(10000);
  }
  std::string Done() {
    uint16_t size = static_cast<uint16_t>(buf_.size());
    std::memcpy(buf_.data() + 6, &size, 2);
    return buf_;
  }

 private:
  RecordBuilder& Put(const void* p, size_t n) {
    buf_.append(static_cast<const char*>(p), n);
    return *this;
  }
  std::string buf_;
};

constexpr int kRegs = __builtin_popcountll(kUserRegsMask);

// `b` parsed as a --call-graph dwarf sample: well formed, but with neither
// user registers nor a stack copy.
void ExpectSampleWithoutUserStack(RecordBuilder& b) {
  auto r = ParsePerfRecord(b.Done(), kSampleTypeDwarf, 0);
  ASSERT_FALSE(r.malformed);
  const auto& s = std::get<Sample>(*r.event);
  EXPECT_TRUE(s.user_stack.regs.empty());
  EXPECT_TRUE(s.user_stack.stack.empty());
}

std::vector<uint8_t> Pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 7 + 3);
  return v;
}

TEST(RecordParserTest, DwarfSampleKeepsRegistersInMaskOrderAndOnlyTheCopiedStackBytes) {
  RecordBuilder b;
  b.Head(0x401000);
  // callchain: kernel part only (exclude_callchain_user)
  b.U64(3).U64(PERF_CONTEXT_KERNEL).U64(0xffffffff81000010).U64(0xffffffff81000020);
  b.U64(PERF_SAMPLE_REGS_ABI_64);
  for (int i = 0; i < kRegs; ++i) b.U64(0x1000 + i);
  auto stack = Pattern(64);
  b.U64(64).Bytes(stack).U64(40);  // 64 reserved, 40 copied
  auto r = ParsePerfRecord(b.Done(), kSampleTypeDwarf, 0);
  ASSERT_FALSE(r.malformed);
  const auto& s = std::get<Sample>(*r.event);
  EXPECT_EQ(s.ip, 0x401000u);
  EXPECT_EQ(s.kernel_chain.size(), 2u);
  EXPECT_TRUE(s.user_chain.empty());
  EXPECT_EQ(s.user_stack.regs_mask, kUserRegsMask);
  ASSERT_EQ(s.user_stack.regs.size(), static_cast<size_t>(kRegs));
  for (int i = 0; i < kRegs; ++i) EXPECT_EQ(s.user_stack.regs[i], 0x1000u + i);
  EXPECT_EQ(s.user_stack.dyn_size, 40u);
  EXPECT_EQ(s.user_stack.stack, std::vector<uint8_t>(stack.begin(), stack.begin() + 40));
}

TEST(RecordParserTest, KernelThreadSampleHasNoRegistersAndAZeroSizeStack) {
  RecordBuilder b(PERF_RECORD_MISC_KERNEL);
  b.Head(0xffffffff81000000);
  b.U64(2).U64(PERF_CONTEXT_KERNEL).U64(0xffffffff81000000);
  b.U64(PERF_SAMPLE_REGS_ABI_NONE);  // no regs follow
  b.U64(0);                          // size 0: no data, no dyn_size
  ExpectSampleWithoutUserStack(b);
}

TEST(RecordParserTest, ThirtyTwoBitTaskRegistersAreSkippedNotMisread) {
  RecordBuilder b;
  b.Head(0x8048000);
  b.U64(0);
  b.U64(PERF_SAMPLE_REGS_ABI_32);
  for (int i = 0; i < kRegs; ++i) b.U64(i);
  b.U64(16).Bytes(Pattern(16)).U64(16);
  ExpectSampleWithoutUserStack(b);
}

TEST(RecordParserTest, TruncatedOrInconsistentStackCopiesAreMalformed) {
  auto base = [] {
    RecordBuilder b;
    b.Head(0x401000);
    b.U64(0);
    b.U64(PERF_SAMPLE_REGS_ABI_64);
    for (int i = 0; i < kRegs; ++i) b.U64(i);
    return b;
  };
  {  // size claims more bytes than the record holds
    auto b = base();
    b.U64(4096).Bytes(Pattern(64)).U64(64);
    EXPECT_TRUE(ParsePerfRecord(b.Done(), kSampleTypeDwarf, 0).malformed);
  }
  {  // dyn_size larger than size
    auto b = base();
    b.U64(64).Bytes(Pattern(64)).U64(65);
    EXPECT_TRUE(ParsePerfRecord(b.Done(), kSampleTypeDwarf, 0).malformed);
  }
  {  // dyn_size missing
    auto b = base();
    b.U64(64).Bytes(Pattern(64));
    EXPECT_TRUE(ParsePerfRecord(b.Done(), kSampleTypeDwarf, 0).malformed);
  }
  {  // registers cut short
    RecordBuilder b;
    b.Head(0x401000);
    b.U64(0);
    b.U64(PERF_SAMPLE_REGS_ABI_64).U64(1).U64(2);
    EXPECT_TRUE(ParsePerfRecord(b.Done(), kSampleTypeDwarf, 0).malformed);
  }
}

TEST(RecordParserTest, RegisterCountFollowsTheEventsMask) {
  const uint64_t mask = (1ull << PERF_REG_X86_IP) | (1ull << PERF_REG_X86_SP);
  RecordBuilder b;
  b.Head(0x401000);
  b.U64(0);
  b.U64(PERF_SAMPLE_REGS_ABI_64).U64(0x7ffc0000).U64(0x401000);  // SP (bit 7), IP (bit 8)
  b.U64(8).Bytes(Pattern(8)).U64(8);
  auto r = ParsePerfRecord(b.Done(), kSampleTypeDwarf, 0, mask);
  ASSERT_FALSE(r.malformed);
  const auto& s = std::get<Sample>(*r.event);
  EXPECT_EQ(s.user_stack.regs, (std::vector<uint64_t>{0x7ffc0000, 0x401000}));
  EXPECT_EQ(s.user_stack.stack.size(), 8u);
}

TEST(CallGraphTest, ParsesFpDwarfAndSizes) {
  auto fp = ParseCallGraph("fp");
  ASSERT_TRUE(fp.ok());
  EXPECT_TRUE(fp->callchain);
  EXPECT_EQ(fp->dwarf_stack_bytes, 0u);
  auto none = ParseCallGraph("none");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->callchain);
  auto d = ParseCallGraph("dwarf");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->dwarf_stack_bytes, kDefaultDwarfStackBytes);
  EXPECT_EQ(d->ToString(), "dwarf,8192");
  auto d2 = ParseCallGraph("dwarf,1001");
  ASSERT_TRUE(d2.ok());
  EXPECT_EQ(d2->dwarf_stack_bytes, 1008u) << "rounded up to a multiple of 8, like perf";
  EXPECT_EQ(ParseCallGraph("dwarf,65528")->dwarf_stack_bytes, 65528u);
}

TEST(CallGraphTest, RejectsBadValuesWithAMessage) {
  for (const char* bad : {"lbr", "dwarf,", "dwarf,0", "dwarf,65529", "dwarf,12k", "dwarf,-8", ""}) {
    auto r = ParseCallGraph(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--call-graph"), std::string::npos) << r.status().message();
  }
}

TEST(RingSizingTest, DwarfSamplesGetBiggerRings) {
  PerfConfig fp;
  PerfConfig dwarf;
  dwarf.dwarf_stack_bytes = 8192;
  EXPECT_GT(BytesPerSample(dwarf), 8192u);
  EXPECT_LT(BytesPerSample(fp), 512u);
  // 30 s at 99 Hz of 8 KiB stacks: 24 MiB, more than the frame-pointer cap.
  EXPECT_EQ(RingPagesFor(30'000'000'000, 99, BytesPerSample(dwarf), 4096, 8192), 8192u);
  EXPECT_EQ(RingPagesFor(30'000'000'000, 99, BytesPerSample(fp), 4096), 256u);
}

TEST(RingSizingTest, ThePlanSaysWhatHistoryTheRingsHoldAndWhyLess) {
  PerfConfig dwarf;
  dwarf.dwarf_stack_bytes = 8192;
  dwarf.frequency_hz = 997;
  dwarf.history_ns = 10'000'000'000;
  const size_t ring = size_t{kMaxDwarfRingPages} * 4096;
  HistoryPlan p = PlanHistory(dwarf, ring);
  EXPECT_EQ(p.asked_s, 10.0);
  EXPECT_DOUBLE_EQ(p.held_s, static_cast<double>(ring) / (997.0 * BytesPerSample(dwarf)));
  EXPECT_EQ(p.text,
            "--history 10s asked; at 997 Hz with 8.0 KiB stacks the rings hold ~4.0 s (32.0 MiB "
            "per CPU, the largest DWARF ring; a lower -F or a smaller dwarf,STACK_BYTES holds "
            "more)");
  // The user's own ring size is named as the reason.
  dwarf.data_pages = 128;
  EXPECT_NE(PlanHistory(dwarf, 128 * 4096).text.find("(--ring-pages 128: 512.0 KiB per CPU)"),
            std::string::npos);
  // Enough ring: no reason given.
  PerfConfig fp;
  fp.history_ns = 1'500'000'000;
  p = PlanHistory(fp,
                  RingPagesFor(fp.history_ns, fp.frequency_hz, BytesPerSample(fp), 4096) * 4096);
  EXPECT_GE(p.held_s, 1.5);
  EXPECT_EQ(p.text.find("--history 1.50 s asked; at 99 Hz with frame-pointer call chains the "
                        "rings hold ~"),
            0u)
      << p.text;
  EXPECT_EQ(p.text.find('('), std::string::npos) << p.text;
}

}  // namespace
}  // namespace flightrec::recorder::perf
