// The panic region's ingest, pure parts: the crashed kernel's symbol table
// (KASLR delta, module bases, when it cannot be resolved and why), the
// Snapshot's counters, and build-ids only from the file that was mapped.
#include "recorder/module/panic_ingest.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "recorder/module/panic_region_builder.h"

namespace flightrec::recorder::module {
namespace {

using testing::PanicRegionBuilder;

KernelEnv Running(const std::string& release, bool hide_addresses = false) {
  KernelEnv k;
  k.release = release;
  k.kallsyms = hide_addresses ? "0000000000000000 T _stext\n0000000000000000 T panic\n"
                              : "ffffffff81000000 T _stext\nffffffff81100000 T panic\n"
                                "ffffffff81200000 T do_thing\nffffffff81800000 T _etext\n"
                                "ffffffffc0200100 t mod_fn\t[good]\n";
  k.modules = "good 65536 0 - Live 0xffffffffc0200000\n";
  return k;
}

PanicRegion Parse(PanicRegionBuilder& b) {
  auto bytes = b.Build();
  auto r = ParsePanicRegion(bytes.data(), bytes.size());
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? std::move(*r) : PanicRegion{};
}

TEST(PanicIngestTest, SameReleaseShiftsSymbolsByTheKaslrDelta) {
  PanicRegionBuilder b(64 * 1024, 1);
  b.header().kernel_anchor = 0xffffffff81100000 + 0x600000;
  b.AddModule("good", 0xffffffffc0900000, 0x1000);
  // A name that would break the "module NAME BASE SIZE" line it goes into.
  b.AddModule("bad name\nmodule x", 0xffffffffc0a00000, 0x1000);
  auto r = Parse(b);
  CrashedKernel k = CrashedKernelSymbols(r, Running("6.1.0-56-amd64"));
  ASSERT_TRUE(k.resolved) << k.note;
  EXPECT_EQ(k.kaslr_delta, 0x600000);
  auto syms = attribution::KernelSymbols::FromText(k.symbols_text);
  ASSERT_TRUE(syms.ok());
  EXPECT_EQ(syms->Resolve(0xffffffff81200010 + 0x600000), "do_thing+0x10");
  EXPECT_EQ(syms->Resolve(0xffffffffc0900108), "mod_fn+0x8 [good]");
  EXPECT_EQ(k.symbols_text.find("bad name"), std::string::npos);
  EXPECT_EQ(syms->Resolve(0xffffffffc0a00010), "");  // skipped: not named at all
}

TEST(PanicIngestTest, HiddenKallsymsOrOtherReleaseLeaveFramesUnresolved) {
  PanicRegionBuilder b(64 * 1024, 1);
  b.AddModule("good", 0xffffffffc0900000, 0x1000);
  auto r = Parse(b);
  CrashedKernel hidden = CrashedKernelSymbols(r, Running("6.1.0-56-amd64", true));
  EXPECT_FALSE(hidden.resolved);
  EXPECT_NE(hidden.note.find("gives no address for panic"), std::string::npos) << hidden.note;
  CrashedKernel other = CrashedKernelSymbols(r, Running("6.12.0"));
  EXPECT_FALSE(other.resolved);
  EXPECT_EQ(other.note,
            "kernel release 6.1.0-56-amd64 differs from running 6.12.0: kernel frames unresolved");
  auto syms = attribution::KernelSymbols::FromText(other.symbols_text);
  ASSERT_TRUE(syms.ok());
  EXPECT_EQ(syms->Resolve(0xffffffff81234567), "[kernel]+0x1234567");
  EXPECT_EQ(syms->Resolve(0xffffffffc0900010), "[good]+0x10");
}

TEST(PanicIngestTest, SnapshotCountersAddUpAndEndAtThePanic) {
  PanicRegionBuilder b(64 * 1024, 2);
  b.header().panic_time_ns = 10'000;
  b.header().panic_cpu = 1;
  b.cpu(0).overwritten = 5;
  b.cpu(1).not_copied = 2;
  b.cpu(1).dropped_frozen = 1;
  for (int i = 0; i < 4; ++i) b.AddSample(0, 1'000 + i, 9, 9, 0x1000, false, {}, {0x1000});
  b.AddSample(1, 9'000, 0, 0, 0xffffffff81000010, true, {0xffffffff81000020}, {});
  auto r = Parse(b);
  auto d =
      BuildPanicDump(r, Running("6.1.0-56-amd64"), [](const MmapEvent&) { return std::string(); });
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->snap.samples.size(), 5u);
  EXPECT_EQ(d->snap.samples.front().time_ns, 1'000u);  // sorted over CPUs
  EXPECT_EQ(d->snap.samples.back().kernel_chain.size(), 2u);
  EXPECT_EQ(d->snap.freeze_time_ns, 10'000u);
  EXPECT_EQ(d->last_ns, 9'000);
  EXPECT_EQ(d->snap.unaccounted, 0);
  EXPECT_EQ(d->snap.counters.at("overwritten"), 5u);
  EXPECT_EQ(d->snap.counters.at("not_copied"), 2u);
  EXPECT_EQ(d->snap.counters.at("paused"), 1u);
  EXPECT_EQ(d->panic["samples_held"], 5u);
  EXPECT_EQ(d->snap.source["kind"], "panic_region");
  EXPECT_FALSE(d->panic.contains("panic_record"));
  EXPECT_EQ(d->panic["taken_at"], "notifier");
}

// The panic record (header rec_off) is one more sample, at the panic, with
// panic()'s callers as its kernel chain; it is in no counter.
// The wall-clock time of the panic is panic_time_ns + mono_to_real_ns, both
// the crashed boot's: a sum past int64 is no time at all. It is left out
// (and said why), not wrapped into a date.
TEST(PanicIngestTest, AWallClockTimeOutsideInt64IsLeftOutAndNamed) {
  for (auto [mono, to_real] : std::vector<std::pair<uint64_t, int64_t>>{
           {INT64_MAX, INT64_MAX}, {UINT64_MAX, 0}, {UINT64_MAX, INT64_MIN + 1}}) {
    SCOPED_TRACE(std::to_string(mono) + " " + std::to_string(to_real));
    PanicRegionBuilder b(64 * 1024, 1);
    b.header().panic_time_ns = mono;
    b.header().mono_to_real_ns = to_real;
    auto r = Parse(b);
    auto d = BuildPanicDump(r, Running("6.1.0-56-amd64"),
                            [](const MmapEvent&) { return std::string(); });
    ASSERT_TRUE(d.ok()) << d.status().message();
    EXPECT_EQ(d->panic["panic_time_mono_ns"], mono);
    EXPECT_FALSE(d->panic.contains("panic_time_ns")) << d->panic["panic_time_ns"];
    EXPECT_FALSE(d->summary.contains("time_ns"));
    EXPECT_NE(d->panic["damaged"].dump().find("no wall-clock time"), std::string::npos)
        << d->panic["damaged"];
  }
  // In range: the sum, negative offsets included.
  PanicRegionBuilder b(64 * 1024, 1);
  b.header().panic_time_ns = 5'000;
  b.header().mono_to_real_ns = -2'000;
  auto r = Parse(b);
  auto d =
      BuildPanicDump(r, Running("6.1.0-56-amd64"), [](const MmapEvent&) { return std::string(); });
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->panic["panic_time_ns"], 3'000);
  EXPECT_EQ(d->summary["time_ns"], 3'000);
}

TEST(PanicIngestTest, PanicRecordIsTheLastSampleOfThePanickingCpu) {
  PanicRegionBuilder b(64 * 1024, 2);
  b.cpu(0).overwritten = 5;
  for (int i = 0; i < 4; ++i) b.AddSample(0, 1'000 + i, 9, 9, 0x1000, false, {}, {0x1000});
  b.AddSample(1, 9'000, 0, 0, 0xffffffff81000010, true, {0xffffffff81000020}, {});
  b.SetPanicRecord(1, 10'000, 33, 0xffffffff81100000, {0xffffffff81200010, 0xffffffff81200020},
                   {0x401000});
  auto r = Parse(b);
  ASSERT_TRUE(r.panic_record.has_value());
  auto d =
      BuildPanicDump(r, Running("6.1.0-56-amd64"), [](const MmapEvent&) { return std::string(); });
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_EQ(d->snap.samples.size(), 6u);
  const Sample& last = d->snap.samples.back();
  EXPECT_EQ(last.time_ns, 10'000u);
  EXPECT_EQ(last.cpu, 1u);
  EXPECT_EQ(last.pid, 33u);
  ASSERT_EQ(last.kernel_chain.size(), 3u);  // ip + two callers
  EXPECT_EQ(last.kernel_chain[2], 0xffffffff81200020u);
  EXPECT_EQ(last.user_chain.size(), 1u);
  // The counters are the rings' only: 5 held, the record is not one of them.
  EXPECT_EQ(d->snap.counters.at("in_ring"), 5u);
  EXPECT_EQ(d->snap.unaccounted, 0);
  EXPECT_EQ(d->panic["panic_record"]["time_mono_ns"], 10'000u);
  EXPECT_EQ(d->panic["panic_record"]["pid"], 33u);
  EXPECT_EQ(d->panic["taken_at"], "panic_entry");
}

TEST(PanicIngestTest, BuildIdOnlyFromTheFileThatWasMapped) {
  struct stat st {};
  ASSERT_EQ(stat("/proc/self/exe", &st), 0);
  MmapEvent m;
  m.filename = std::filesystem::read_symlink("/proc/self/exe").string();
  m.ino = st.st_ino;
  const std::string id = BuildIdIfSameFile(m);
  EXPECT_EQ(id, attribution::ReadBuildId(m.filename));
  EXPECT_FALSE(id.empty()) << "the test binary has a build-id (gcc --build-id)";
  m.ino = st.st_ino + 1;  // replaced since the mapping
  EXPECT_EQ(BuildIdIfSameFile(m), "");
  m.filename = "[vdso]";
  EXPECT_EQ(BuildIdIfSameFile(m), "");
}

// The claim's device side without the module: a missing device is one log
// line, a device that does not know PANIC_INFO (ENOTTY: a module without
// panic support) says nothing; neither asks for the kernel's symbols nor
// stores anything.
TEST(PanicIngestTest, ClaimWithoutAPanicCapableDeviceStoresNothing) {
  bool asked = false, stored = false;
  auto env = [&] {
    asked = true;
    return KernelEnv{};
  };
  auto store = [&](PanicDump&) -> StatusOr<std::string> {
    stored = true;
    return std::string("x");
  };
  PanicClaim c = ClaimPanicRegion("/nonexistent/flightrec", env, store);
  EXPECT_EQ(c.outcome, PanicClaim::Outcome::kFailed);
  EXPECT_NE(c.message.find("opening /nonexistent/flightrec"), std::string::npos) << c.message;
  c = ClaimPanicRegion("/dev/null", env, store);
  EXPECT_EQ(c.outcome, PanicClaim::Outcome::kNothing) << c.message;
  EXPECT_TRUE(c.message.empty());
  EXPECT_FALSE(asked);
  EXPECT_FALSE(stored);
}

// What recorderd logs for each PANIC_INFO state but HELD: a cold or claimed
// region says there is nothing, a refused one names the module's reason,
// an unusable one says how to fix it; none is stored.
TEST(PanicIngestTest, EachPanicInfoStateHasItsLogLine) {
  using O = PanicClaim::Outcome;
  const std::string where = "at 0x30000000 (4.0 MiB)";
  flightrec_panic_info info{};
  info.state = FLIGHTREC_PANIC_NONE;
  auto c = ClaimFromInfo(info, where);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->outcome, O::kNothing);
  EXPECT_TRUE(c->message.empty());
  info.state = FLIGHTREC_PANIC_EMPTY;
  c = ClaimFromInfo(info, where);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->outcome, O::kEmpty);
  EXPECT_EQ(c->message,
            "no panic record from an earlier boot (panic region at 0x30000000 (4.0 MiB) armed "
            "for this boot)");
  info.state = FLIGHTREC_PANIC_REFUSED;
  info.error = -EBADMSG;
  c = ClaimFromInfo(info, where);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->outcome, O::kRefused);
  EXPECT_NE(c->message.find("(EBADMSG: bad header checksum); nothing stored"), std::string::npos)
      << c->message;
  info.state = FLIGHTREC_PANIC_UNAVAILABLE;
  info.error = -EBUSY;
  c = ClaimFromInfo(info, where);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->outcome, O::kUnavailable);
  EXPECT_NE(c->message.find("memmap=SIZE$ADDR"), std::string::npos) << c->message;
  info.state = 77;
  c = ClaimFromInfo(info, where);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->outcome, O::kFailed);
  EXPECT_NE(c->message.find("unknown state 77"), std::string::npos);
  info.state = FLIGHTREC_PANIC_HELD;
  EXPECT_FALSE(ClaimFromInfo(info, where).has_value());
}

}  // namespace
}  // namespace flightrec::recorder::module
