// Conversions from the module's records to the event stream (pure logic; the
// module itself is exercised in the QEMU guest, tests/vm).
#include "recorder/module/module_backend.h"

#include <linux/perf_event.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace flightrec::recorder::module {
namespace {

// A sideband record of `type` from task pid/tid at time_ns; the rest zero.
flightrec_sideband Sideband(uint32_t type, uint64_t time_ns, uint32_t pid, uint32_t tid) {
  flightrec_sideband r{};
  r.type = type;
  r.time_ns = time_ns;
  r.pid = pid;
  r.tid = tid;
  return r;
}

// A gap in the SIDEBAND ring (it was full) arrives as a LOST record before
// the next record: it becomes a sideband LostEvent with the count, kept in
// the sideband history so a record covering that time says mappings may be
// missing.
TEST(ModuleBackendTest, SidebandLostRecordBecomesSidebandLostEvent) {
  flightrec_sideband r{};
  r.type = FLIGHTREC_SB_LOST;
  r.time_ns = 2'000;
  r.start = 1'000;
  r.len = 37;
  auto e = SidebandEvent(r);
  ASSERT_TRUE(e && std::holds_alternative<LostEvent>(*e));
  const auto& l = std::get<LostEvent>(*e);
  EXPECT_EQ(l.count, 37u);
  EXPECT_EQ(l.time_ns, 2'000u);
  EXPECT_EQ(l.cause, LossCause::kSidebandLost);
  // It keeps its place in a batch (no exec/mmap reordering moves it).
  flightrec_sideband fork = Sideband(FLIGHTREC_SB_FORK, 2'000, 5, 0);
  auto out = OrderSideband({r, fork});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(std::holds_alternative<LostEvent>(out[0]));
}

TEST(ModuleBackendTest, CrashHookReasonSaysWhyMarkersAreUnavailable) {
  flightrec_stats s{};
  s.crash_hook = FLIGHTREC_HOOK_TRACEPOINT;
  EXPECT_EQ(CrashHookReason(s, "auto", ""), "");
  s.crash_hook = FLIGHTREC_HOOK_UNKNOWN;  // an older module: assume it hooks
  EXPECT_EQ(CrashHookReason(s, "", ""), "");
  s.crash_hook = FLIGHTREC_HOOK_NONE;
  s.crash_hook_error = -ENOENT;
  EXPECT_EQ(CrashHookReason(s, "kprobe", "fr_no_such_symbol"),
            "flightrec.ko could not attach its kprobe hook on fr_no_such_symbol: No such file or "
            "directory (ENOENT: no such symbol or tracepoint in this kernel)");
  EXPECT_EQ(CrashHookReason(s, "auto", ""),
            "flightrec.ko could not attach its tracepoint (signal_deliver) and kprobe hooks on "
            "vfs_coredump/do_coredump: No such file or directory (ENOENT: no such symbol or "
            "tracepoint in this kernel)");
  s.crash_hook_error = 0;
  EXPECT_EQ(CrashHookReason(s, "none", ""), "flightrec.ko was loaded with crash_hook=none");
  EXPECT_EQ(EventStateName(FLIGHTREC_EVSTATE_ERROR), "error");
  EXPECT_EQ(EventStateName(FLIGHTREC_EVSTATE_ACTIVE), "active");
}

TEST(ModuleBackendTest, SidebandRecordsBecomeMmapExecAndTaskEvents) {
  flightrec_sideband r = Sideband(FLIGHTREC_SB_MMAP, 5, 10, 11);
  r.start = 0x7f0000001000;
  r.len = 0x2000;
  r.pgoff = 0x1000;
  r.ino = 99;
  r.dev = (8u << 8) | 1u;  // new_encode_dev(MKDEV(8, 1))
  std::strcpy(r.path, "/usr/lib/libx.so");
  auto e = SidebandEvent(r);
  ASSERT_TRUE(e && std::holds_alternative<MmapEvent>(*e));
  const auto& m = std::get<MmapEvent>(*e);
  EXPECT_EQ(m.maj, 8u);
  EXPECT_EQ(m.min, 1u);
  EXPECT_EQ(m.start, 0x7f0000001000u);
  EXPECT_EQ(m.pgoff, 0x1000u);
  EXPECT_EQ(m.filename, "/usr/lib/libx.so");
  r.type = FLIGHTREC_SB_EXEC;
  std::strcpy(r.path, "/usr/bin/a-very-long-program-name");
  e = SidebandEvent(r);
  ASSERT_TRUE(e && std::holds_alternative<CommEvent>(*e));
  EXPECT_EQ(std::get<CommEvent>(*e).comm, "a-very-long-pro");  // TASK_COMM_LEN - 1
  EXPECT_TRUE(std::get<CommEvent>(*e).exec);
  r.type = FLIGHTREC_SB_EXIT;
  e = SidebandEvent(r);
  ASSERT_TRUE(e && std::holds_alternative<TaskEvent>(*e));
  EXPECT_TRUE(std::get<TaskEvent>(*e).exit);
  r.type = 77;  // unknown: skipped
  EXPECT_FALSE(SidebandEvent(r));
  // A path without its NUL is cut at the field, not read past it.
  r.type = FLIGHTREC_SB_MMAP;
  std::memset(r.path, 'a', sizeof(r.path));
  e = SidebandEvent(r);
  EXPECT_EQ(std::get<MmapEvent>(*e).filename.size(), sizeof(r.path));
}

TEST(ModuleBackendTest, SamplesCarryChainsLikePerfAndTheAuxStack) {
  SampleRecord r{};
  r.h.time_ns = 100;
  r.h.cpu = 1;
  r.h.pid = 10;
  r.h.tid = 11;
  r.h.ip = 0xffffffff81000010;
  r.h.mode = FLIGHTREC_MODE_KERNEL;
  r.h.nr_kframes = 2;
  r.kframes[0] = 0xffffffff81000100;
  r.kframes[1] = 0xffffffff81000200;
  r.h.nr_uframes = 2;
  r.uframes[0] = 0x401000;
  r.uframes[1] = 0x402000;
  Sample s = SampleFromRecord(r, 1'000'000, nullptr, nullptr, 0);
  EXPECT_EQ(s.mode, CpuMode::kKernel);
  EXPECT_EQ(s.kernel_chain,
            (std::vector<uint64_t>{r.h.ip, 0xffffffff81000100, 0xffffffff81000200}));
  EXPECT_EQ(s.user_chain, (std::vector<uint64_t>{0x401000, 0x402000}));
  EXPECT_EQ(s.period, 1'000'000u);
  EXPECT_TRUE(s.user_stack.regs.empty());
  // A user sample with its AUX blob; counts past the arrays are clamped.
  r.h.mode = FLIGHTREC_MODE_USER;
  r.h.ip = 0x401000;
  r.h.nr_kframes = 0;
  r.h.nr_uframes = 1000;
  r.h.abi = PERF_SAMPLE_REGS_ABI_64;
  flightrec_aux aux{};
  aux.abi = PERF_SAMPLE_REGS_ABI_64;
  aux.regs[7] = 0x7ffc0000;  // PERF_REG_X86_SP
  uint8_t stack[16] = {1, 2, 3};
  CallGraphMode dwarf;
  dwarf.dwarf_stack_bytes = 1024;
  s = SampleFromRecord(r, 1'000'000, &aux, stack, sizeof(stack), dwarf);
  EXPECT_TRUE(s.kernel_chain.empty());
  EXPECT_EQ(s.user_chain.size(), static_cast<size_t>(FLIGHTREC_MAX_UFRAMES));
  EXPECT_EQ(s.user_stack.regs.size(), static_cast<size_t>(FLIGHTREC_NR_REGS));
  EXPECT_EQ(s.user_stack.regs[7], 0x7ffc0000u);
  EXPECT_EQ(s.user_stack.stack.size(), sizeof(stack));
  EXPECT_EQ(s.user_stack.dyn_size, sizeof(stack));
}

// A user-mode record of that ABI whose ip is its first user frame.
SampleRecord UserRecord(const std::vector<uint64_t>& uframes, uint16_t abi) {
  SampleRecord r{};
  r.h.mode = FLIGHTREC_MODE_USER;
  r.h.ip = uframes.at(0);
  r.h.nr_uframes = static_cast<uint16_t>(uframes.size());
  std::copy(uframes.begin(), uframes.end(), r.uframes);
  r.h.abi = abi;
  return r;
}

TEST(ModuleBackendTest, TheCallGraphModeDecidesWhatASampleKeeps) {
  SampleRecord r = UserRecord({0x401000, 0x402000}, PERF_SAMPLE_REGS_ABI_64);
  flightrec_aux aux{};
  aux.abi = PERF_SAMPLE_REGS_ABI_64;
  uint8_t stack[64];
  for (size_t i = 0; i < sizeof(stack); ++i) stack[i] = static_cast<uint8_t>(i);
  // fp (the default): the frame-pointer chain, no registers or stack bytes.
  Sample s = SampleFromRecord(r, 1, &aux, stack, sizeof(stack), CallGraphMode{});
  EXPECT_EQ(s.user_chain.size(), 2u);
  EXPECT_TRUE(s.user_stack.regs.empty());
  EXPECT_TRUE(s.user_stack.stack.empty());
  // dwarf,16: the innermost 16 bytes (the copy starts at the stack pointer).
  CallGraphMode d16;
  d16.dwarf_stack_bytes = 16;
  s = SampleFromRecord(r, 1, &aux, stack, sizeof(stack), d16);
  ASSERT_EQ(s.user_stack.stack.size(), 16u);
  EXPECT_EQ(s.user_stack.stack[15], 15);
  EXPECT_EQ(s.user_stack.dyn_size, 16u);
  EXPECT_EQ(s.user_chain.size(), 2u) << "dwarf keeps the chain, as perf's dwarf mode does";
  // none: only the ip.
  CallGraphMode none;
  none.callchain = false;
  r.h.mode = FLIGHTREC_MODE_KERNEL;
  r.h.nr_kframes = 1;
  r.kframes[0] = 0xffffffff81000100;
  s = SampleFromRecord(r, 1, &aux, stack, sizeof(stack), none);
  EXPECT_TRUE(s.kernel_chain.empty());
  EXPECT_TRUE(s.user_chain.empty());
  EXPECT_EQ(s.ip, 0x401000u);
  EXPECT_EQ(d16.ToString(), "dwarf,16");
  EXPECT_EQ(none.ToString(), "none");
  EXPECT_EQ(CallGraphMode{}.ToString(), "fp");
}

TEST(ModuleBackendTest, ACompatTasksStackIsNeverGivenToTheX8664Unwinder) {
  // A 32-bit task: the module walked its frame-pointer chain in 4-byte
  // words and recorded ABI_32; its registers and stack bytes must not reach
  // the x86_64 DWARF unwinder, which would read them as 8-byte words.
  SampleRecord r = UserRecord({0x8049000, 0x8049100, 0x8049200}, PERF_SAMPLE_REGS_ABI_32);
  flightrec_aux aux{};
  aux.abi = PERF_SAMPLE_REGS_ABI_32;
  aux.regs[7] = 0xffffd000;
  uint8_t stack[64] = {};
  CallGraphMode dwarf;
  dwarf.dwarf_stack_bytes = 64;
  Sample s = SampleFromRecord(r, 1, &aux, stack, sizeof(stack), dwarf);
  EXPECT_EQ(s.user_chain, (std::vector<uint64_t>{0x8049000, 0x8049100, 0x8049200}));
  EXPECT_TRUE(s.user_stack.regs.empty());
  EXPECT_TRUE(s.user_stack.stack.empty());
  // The same record as ABI_64 does reach it: the test above is not vacuous.
  r.h.abi = PERF_SAMPLE_REGS_ABI_64;
  aux.abi = PERF_SAMPLE_REGS_ABI_64;
  s = SampleFromRecord(r, 1, &aux, stack, sizeof(stack), dwarf);
  EXPECT_EQ(s.user_stack.stack.size(), sizeof(stack));
}

TEST(ModuleBackendTest, DwarfNeedsTheModuleToCopyAtLeastTheAskedStack) {
  ModuleConfig c;
  auto fp = ResolveCallGraph(c, 0);
  ASSERT_TRUE(fp.ok());
  EXPECT_EQ(fp->dwarf_stack_bytes, 0u);
  c.dwarf = true;
  auto all = ResolveCallGraph(c, 2048);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->dwarf_stack_bytes, 2048u) << "dwarf alone: what the module copies";
  EXPECT_EQ(ResolveCallGraph(c, 1001)->dwarf_stack_bytes, 1000u) << "whole words";
  c.dwarf_stack_bytes = 512;
  EXPECT_EQ(ResolveCallGraph(c, 2048)->dwarf_stack_bytes, 512u);
  c.dwarf_stack_bytes = 4096;
  auto more = ResolveCallGraph(c, 2048);
  ASSERT_FALSE(more.ok());
  EXPECT_NE(more.status().message().find("copies only 2048 bytes"), std::string::npos)
      << more.status().message();
  EXPECT_NE(more.status().message().find("stack_bytes=4096"), std::string::npos);
  c.dwarf_stack_bytes = 0;
  auto zero = ResolveCallGraph(c, 0);
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("stack_bytes parameter is 0"), std::string::npos);
}

// DATA bytes as the module lays them out: variable-length records, a PAD
// record filling a chunk's tail, positions in bytes.
struct DataBytes {
  std::vector<uint8_t> bytes;
  uint64_t first = 3 * FLIGHTREC_DATA_CHUNK + 4096 - 512;  // 512 bytes before a chunk ends

  uint64_t Pos() const { return first + bytes.size(); }
  void Sample(uint16_t nk, uint16_t nu, uint64_t ip) {
    flightrec_sample h{};
    h.type = FLIGHTREC_REC_SAMPLE;
    h.size = static_cast<uint32_t>(sizeof(h) + 8 * (nk + nu));
    h.seq = Pos();
    h.ip = ip;
    h.nr_kframes = nk;
    h.nr_uframes = nu;
    Put(&h, sizeof(h));
    for (uint64_t i = 0; i < nk + nu; ++i) {
      uint64_t f = ip + 1 + i;
      Put(&f, 8);
    }
  }
  void Pad(uint32_t size) {
    flightrec_sample h{};
    h.type = FLIGHTREC_REC_PAD;
    h.size = size;
    Put(&h, 8);
    bytes.resize(bytes.size() + size - 8, 0xee);  // stale bytes a reader must skip
  }
  void Put(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
  }
};

TEST(ModuleBackendTest, DataRecordsAreWalkedBySizeAcrossPads) {
  DataBytes d;
  d.Sample(2, 3, 0x1000);                              // 104 bytes
  d.Sample(0, 1, 0x2000);                              // 72 bytes
  d.Pad(static_cast<uint32_t>(512 - d.bytes.size()));  // to the chunk end
  d.Sample(24, 32, 0x3000);                            // the largest record
  uint64_t bad = 1;
  auto recs = ParseDataRecords(d.bytes.data(), d.bytes.size(), d.first, &bad);
  EXPECT_EQ(bad, 0u);
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[0].h.nr_kframes, 2u);
  EXPECT_EQ(recs[0].kframes[1], 0x1002u);
  EXPECT_EQ(recs[0].uframes[0], 0x1003u);
  EXPECT_EQ(recs[0].uframes[2], 0x1005u);
  EXPECT_EQ(recs[1].uframes[0], 0x2001u);
  EXPECT_EQ(recs[2].h.seq % FLIGHTREC_DATA_CHUNK, 0u);
  EXPECT_EQ(recs[2].uframes[31], 0x3000u + 1 + 24 + 31);
  Sample s = SampleFromRecord(recs[0], 1, nullptr, nullptr, 0);
  EXPECT_EQ(s.user_chain, (std::vector<uint64_t>{0x1003, 0x1004, 0x1005}));
}

TEST(ModuleBackendTest, AMalformedDataRecordEndsTheWalk) {
  for (int damage = 0; damage < 5; ++damage) {
    DataBytes d;
    d.Sample(1, 1, 0x1000);
    const size_t second = d.bytes.size();
    d.Sample(1, 1, 0x2000);
    auto* h = reinterpret_cast<flightrec_sample*>(d.bytes.data() + second);
    switch (damage) {
      case 0:
        h->size = 12;
        break;  // not a multiple of 8
      case 1:
        h->size = 1 << 20;
        break;  // past the copy
      case 2:
        h->seq += 8;
        break;  // not where it lies
      case 3:
        h->nr_uframes = 40;
        break;  // more than the module writes
      case 4:
        h->type = 7;
        break;  // unknown type
    }
    uint64_t bad = 0;
    auto recs = ParseDataRecords(d.bytes.data(), d.bytes.size(), d.first, &bad);
    EXPECT_EQ(recs.size(), 1u) << damage;
    EXPECT_EQ(bad, d.bytes.size() - second) << damage;
  }
  // A record may not cross a chunk boundary either.
  DataBytes d;
  d.first = FLIGHTREC_DATA_CHUNK - 64;
  d.Sample(1, 1, 0x1000);  // 80 bytes from 64 before the boundary
  uint64_t bad = 0;
  EXPECT_TRUE(ParseDataRecords(d.bytes.data(), d.bytes.size(), d.first, &bad).empty());
  EXPECT_EQ(bad, 80u);
}

// Two records with AUX blobs laid out as the module writes them.
struct Rings {
  std::vector<SampleRecord> recs;
  std::vector<uint8_t> aux;
  uint64_t aux_first = 4096;  // ring position of aux[0]

  void Add(uint64_t seq, uint64_t time, size_t stack_len) {
    SampleRecord r{};
    r.h.seq = seq;
    r.h.time_ns = time;
    r.h.mode = FLIGHTREC_MODE_USER;
    r.h.ip = 0x401000 + seq;
    r.h.flags = FLIGHTREC_SAMPLE_HAS_AUX;
    r.h.abi = PERF_SAMPLE_REGS_ABI_64;
    r.h.aux_pos = aux_first + aux.size();
    flightrec_aux a{};
    a.seq = seq;
    a.abi = PERF_SAMPLE_REGS_ABI_64;
    a.stack_len = static_cast<uint32_t>(stack_len);
    a.len = static_cast<uint32_t>(sizeof(a) + stack_len);
    a.regs[7] = 0x7ffc0000 + seq;
    r.h.aux_len = a.len;
    const auto* p = reinterpret_cast<const uint8_t*>(&a);
    aux.insert(aux.end(), p, p + sizeof(a));
    aux.insert(aux.end(), stack_len, static_cast<uint8_t>(seq));
    recs.push_back(r);
  }
  CpuCopy Copy() const {
    return CpuCopy{recs.data(), recs.size(), aux.data(), aux_first, aux_first + aux.size()};
  }
};

TEST(ModuleBackendTest, SamplesGetTheirOwnAuxBlobOnlyWhileItIsWhole) {
  Rings rings;
  rings.Add(1, 100, 32);
  rings.Add(2, 200, 64);
  rings.Add(3, 300, 8);
  CallGraphMode dwarf;
  dwarf.dwarf_stack_bytes = 4096;
  std::vector<Sample> out;
  // Window from t=150: the first record is counted outside, not kept.
  EXPECT_EQ(AppendSamples(rings.Copy(), 150, 10, dwarf, &out), 1u);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].user_stack.stack.size(), 64u);
  EXPECT_EQ(out[0].user_stack.stack[0], 2);
  EXPECT_EQ(out[0].user_stack.regs[7], 0x7ffc0002u);
  EXPECT_EQ(out[1].user_stack.stack.size(), 8u);
  // A blob overwritten by a later sample (its seq no longer matches) and one
  // cut by the copy's end are dropped; the samples stay.
  auto* second = reinterpret_cast<flightrec_aux*>(rings.aux.data() +
                                                  (rings.recs[1].h.aux_pos - rings.aux_first));
  second->seq = 99;
  CpuCopy c = rings.Copy();
  c.aux_end -= 1;  // the third blob is not whole
  out.clear();
  EXPECT_EQ(AppendSamples(c, 0, 10, dwarf, &out), 0u);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].user_stack.stack.size(), 32u);
  EXPECT_TRUE(out[1].user_stack.regs.empty());
  EXPECT_TRUE(out[2].user_stack.regs.empty());
  // Blobs before the copy's first position are gone too.
  c = rings.Copy();
  c.aux_first += 1;
  c.aux += 1;
  out.clear();
  AppendSamples(c, 0, 10, dwarf, &out);
  EXPECT_TRUE(out[0].user_stack.regs.empty());
}

TEST(ModuleBackendTest, ACrashFindsItsOwnNewestMarkerAndOldOnesGoStale) {
  auto marker = [](uint64_t id, uint32_t slot, uint32_t pid, uint64_t t) {
    flightrec_marker m{};
    m.id = id;
    m.slot = slot;
    m.pid = pid;
    m.tid = pid;
    m.time_ns = t;
    return m;
  };
  const int64_t ttl = 10'000'000'000;
  // Slot 0: pid 7 long ago (a reused pid's old crash); slot 1: pid 7 now.
  std::vector<flightrec_marker> ms = {marker(1, 0, 7, 1'000'000'000),
                                      marker(5, 1, 7, 20'000'000'000),
                                      marker(3, 2, 8, 19'000'000'000)};
  const uint64_t now = 21'000'000'000;
  const flightrec_marker* m = FindMarker(ms, 7, now, ttl);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->slot, 1u);
  EXPECT_EQ(FindMarker(ms, 9, now, ttl), nullptr);
  // Only pid 7's old marker is stale; the others are within the TTL.
  auto stale = StaleMarkers(ms, now, ttl);
  ASSERT_EQ(stale.size(), 1u);
  EXPECT_EQ(stale[0].slot, 0u);
  EXPECT_EQ(FindMarker({ms[0]}, 7, now, ttl), nullptr) << "a stale marker is not this crash's";
}

TEST(ModuleBackendTest, AnExecComesBeforeTheMappingsOfItsImage) {
  auto rec = [](uint32_t type, uint32_t pid, uint64_t t) {
    flightrec_sideband r = Sideband(type, t, pid, pid);
    std::strcpy(r.path, "/bin/x");
    return r;
  };
  // fork of 5 by 1, 5 maps its new image, then the module reports the exec.
  auto out = OrderSideband({rec(FLIGHTREC_SB_FORK, 5, 1), rec(FLIGHTREC_SB_MMAP, 5, 2),
                            rec(FLIGHTREC_SB_MMAP, 6, 3), rec(FLIGHTREC_SB_MMAP, 5, 4),
                            rec(FLIGHTREC_SB_EXEC, 5, 5)});
  ASSERT_EQ(out.size(), 5u);
  EXPECT_TRUE(std::holds_alternative<TaskEvent>(out[0]));
  ASSERT_TRUE(std::holds_alternative<CommEvent>(out[1]));
  EXPECT_TRUE(std::get<CommEvent>(out[1]).exec);
  EXPECT_EQ(std::get<MmapEvent>(out[2]).time_ns, 2u);
  EXPECT_EQ(std::get<MmapEvent>(out[3]).pid, 6u);
  EXPECT_EQ(std::get<MmapEvent>(out[4]).time_ns, 4u);
  // The image's mappings were drained before: the exec only renames.
  out = OrderSideband({rec(FLIGHTREC_SB_EXEC, 5, 5)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(std::get<CommEvent>(out[0]).exec);
  EXPECT_EQ(std::get<CommEvent>(out[0]).comm, "x");
}

// load_elf_binary maps the executable, then ld.so; the exec record comes
// last. A drain that falls between the two mappings delivers the
// executable's with one batch and ld.so's and the exec with the next.
TEST(ModuleBackendTest, AnExecSplitByADrainKeepsTheExecutablesMapping) {
  auto rec = [](uint32_t type, uint64_t t, uint64_t ino, const char* path) {
    flightrec_sideband r = Sideband(type, t, 5, 5);
    r.ino = ino;
    r.dev = 0x801;
    std::strcpy(r.path, path);
    return r;
  };
  const auto fr_crash = [&](uint32_t type, uint64_t t) { return rec(type, t, 10, "/fr_crash"); };
  const auto ld_so = [&](uint64_t t) { return rec(FLIGHTREC_SB_MMAP, t, 20, "/ld.so"); };
  // Batch 1 (fork, the executable's mapping) went out before; batch 2 is
  // ld.so's mapping and the exec: the exec renames, clears nothing.
  auto out = OrderSideband({ld_so(3), fr_crash(FLIGHTREC_SB_EXEC, 4)});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(std::get<MmapEvent>(out[0]).filename, "/ld.so");
  ASSERT_TRUE(std::holds_alternative<CommEvent>(out[1]));
  EXPECT_FALSE(std::get<CommEvent>(out[1]).exec) << "would drop /fr_crash's mapping";
  // Whole in one batch, after an earlier image's mappings (no fork record
  // in the batch): the exec goes before the executable's mapping, and the
  // earlier image is cleared.
  out = OrderSideband({ld_so(1), fr_crash(FLIGHTREC_SB_MMAP, 2), fr_crash(FLIGHTREC_SB_MMAP, 3),
                       ld_so(4), fr_crash(FLIGHTREC_SB_EXEC, 5)});
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(std::get<MmapEvent>(out[0]).time_ns, 1u);
  ASSERT_TRUE(std::holds_alternative<CommEvent>(out[1]));
  EXPECT_TRUE(std::get<CommEvent>(out[1]).exec);
  EXPECT_EQ(std::get<MmapEvent>(out[2]).time_ns, 2u);
  EXPECT_EQ(std::get<MmapEvent>(out[4]).time_ns, 4u);
}

TEST(ModuleBackendTest, MissingDeviceSaysWhatToDo) {
  auto b = ModuleBackend::Create("/nonexistent/flightrec");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("is flightrec.ko loaded?"), std::string::npos);
}

}  // namespace
}  // namespace flightrec::recorder::module
