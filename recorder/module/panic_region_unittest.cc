// The panic region's parser on regions written byte by byte per the uapi
// (panic_region_builder.h): valid, cold, refused and damaged ones. The bytes
// come from RAM that survived a reboot, so each damaged part must be dropped
// and named while the rest is kept, and nothing may read out of bounds.
#include "recorder/module/panic_region.h"

#include <gtest/gtest.h>

#include <random>

#include "recorder/module/panic_region_builder.h"

namespace flightrec::recorder::module {
namespace {

using testing::PanicRegionBuilder;

bool Mentions(const std::vector<std::string>& lines, const std::string& what) {
  for (const auto& l : lines) {
    if (l.find(what) != std::string::npos) return true;
  }
  return false;
}

// Two CPUs with a few samples each (enough on cpu 0 to cross a chunk and
// need a PAD record), two mappings, one module.
PanicRegionBuilder TwoCpuRegion() {
  PanicRegionBuilder b(256 * 1024, 2);
  b.SetMessage("sysrq triggered crash\n");
  b.header().panic_cpu = 1;
  b.header().panic_time_ns = 5'000'000'000;
  b.cpu(1).flags |= FLIGHTREC_PANIC_CPU_PANICKING;
  b.cpu(0).overwritten = 40;
  b.cpu(0).not_copied = 3;
  for (int i = 0; i < 100; ++i) {
    b.AddSample(0, 4'000'000'000 + i * 10'000'000ull, 77, 77, 0x401000 + i, false, {},
                {0x401000 + static_cast<uint64_t>(i), 0x401200});
  }
  b.AddSample(1, 4'990'000'000, 0, 0, 0xffffffff81234567, true,
              {0xffffffff81200000, 0xffffffff81100010}, {});
  b.AddMmap(1'000, 77, 0x400000, 0x2000, 0, 0x801, 1234, "/usr/bin/spin");
  b.AddMmap(1'001, 77, 0x7f0000000000, 0x1000, 0, 0x801, 99, "/usr/lib/libc.so.6");
  b.AddModule("flightrec", 0xffffffffc0100000, 0x8000);
  // The panic record: cpu 1's stack at panic() entry.
  b.SetPanicRecord(1, 5'000'000'000, 1, 0xffffffff81100000,
                   {0xffffffff81500012, 0xffffffff81510040}, {});
  return b;
}

TEST(PanicRegionTest, ValidRegionKeepsEveryPart) {
  auto b = TwoCpuRegion();
  auto bytes = b.Build();
  auto r = ParsePanicRegion(bytes.data(), bytes.size());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->damaged.empty()) << r->damaged.front();
  EXPECT_EQ(r->boot_id, "10111213-1415-1617-1819-1a1b1c1d1e1f");
  EXPECT_EQ(r->release, "6.1.0-56-amd64");
  EXPECT_EQ(r->panic_msg, "sysrq triggered crash\n");
  ASSERT_EQ(r->cpus.size(), 2u);
  EXPECT_EQ(r->cpus[0].records.size(), 100u);
  EXPECT_EQ(r->cpus[0].desc.records, 100u);
  EXPECT_EQ(r->cpus[0].desc.written, 143u);  // overwritten + not_copied + records
  EXPECT_EQ(r->cpus[0].records[99].h.time_ns, 4'990'000'000u);
  ASSERT_EQ(r->cpus[1].records.size(), 1u);
  EXPECT_EQ(r->cpus[1].records[0].kframes[1], 0xffffffff81100010u);
  ASSERT_EQ(r->sideband.size(), 2u);
  EXPECT_STREQ(r->sideband[0].path, "/usr/bin/spin");
  ASSERT_EQ(r->modules.size(), 1u);
  EXPECT_STREQ(r->modules[0].name, "flightrec");
  ASSERT_TRUE(r->panic_record.has_value());
  EXPECT_EQ(r->panic_record->h.cpu, 1u);
  EXPECT_EQ(r->panic_record->h.time_ns, 5'000'000'000u);
  // Its seq is the panicking CPU's head, past its copy.
  EXPECT_EQ(r->panic_record->h.seq, r->cpus[1].desc.data_end);
  ASSERT_EQ(r->panic_record->h.nr_kframes, 2u);
  EXPECT_EQ(r->panic_record->kframes[1], 0xffffffff81510040u);
}

// The panic record lives in the header area (rec_off/rec_size/rec_crc): a
// damaged one is dropped and named, the CPUs' histories are kept.
TEST(PanicRegionTest, DamagedPanicRecordIsDroppedAndNamed) {
  auto b = TwoCpuRegion();
  auto bytes = b.Build();
  auto h = PanicRegionBuilder::HeaderOf(bytes);
  {
    auto bad = bytes;
    bad[h.rec_off + sizeof(flightrec_sample)] ^= 1;  // a frame, behind rec_crc
    auto r = ParsePanicRegion(bad.data(), bad.size());
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_FALSE(r->panic_record.has_value());
    EXPECT_TRUE(Mentions(r->damaged, "panic record: checksum mismatch")) << r->damaged.size();
    EXPECT_EQ(r->cpus.size(), 2u);
  }
  for (auto [off, size] : {std::pair<uint64_t, uint32_t>{8, h.rec_size},
                           {FLIGHTREC_PANIC_HEADER_BYTES - 8, h.rec_size},
                           {h.rec_off, 4096},
                           {h.rec_off, 8}}) {
    auto hh = h;
    hh.rec_off = off;
    hh.rec_size = size;
    auto bad = bytes;
    PanicRegionBuilder::Reseal(&bad, hh);
    auto r = ParsePanicRegion(bad.data(), bad.size());
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_FALSE(r->panic_record.has_value()) << off << " " << size;
    EXPECT_TRUE(Mentions(r->damaged, "panic record:")) << off << " " << size;
  }
  {
    auto hh = h;
    hh.rec_off = 0;  // a notifier that took none
    auto bad = bytes;
    PanicRegionBuilder::Reseal(&bad, hh);
    auto r = ParsePanicRegion(bad.data(), bad.size());
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r->panic_record.has_value());
    EXPECT_TRUE(Mentions(r->damaged, "panic record: none"));
  }
}

TEST(PanicRegionTest, ColdRegionWithoutMagicIsNotFound) {
  std::vector<uint8_t> zero(64 * 1024, 0);
  auto r = ParsePanicRegion(zero.data(), zero.size());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("no magic"), std::string::npos);
  EXPECT_EQ(ParsePanicRegion(nullptr, 0).status().code(), StatusCode::kNotFound);
}

TEST(PanicRegionTest, ArmedRegionHoldsNoPanic) {
  auto b = TwoCpuRegion();
  b.header().state = FLIGHTREC_PANIC_ARMED;
  auto bytes = b.Build();
  auto r = ParsePanicRegion(bytes.data(), bytes.size());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("holds no panic"), std::string::npos);
}

TEST(PanicRegionTest, HeaderChecksumMismatchRefusesTheRegion) {
  auto bytes = TwoCpuRegion().Build();
  bytes[offsetof(flightrec_panic_header, panic_cpu)] ^= 1;  // behind the crc
  auto r = ParsePanicRegion(bytes.data(), bytes.size());
  EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(r.status().message().find("header checksum mismatch"), std::string::npos);
}

TEST(PanicRegionTest, OtherVersionIsUnsupported) {
  auto bytes = TwoCpuRegion().Build();
  auto h = PanicRegionBuilder::HeaderOf(bytes);
  h.version = 2;
  PanicRegionBuilder::Reseal(&bytes, h);
  EXPECT_EQ(ParsePanicRegion(bytes.data(), bytes.size()).status().code(), StatusCode::kUnsupported);
}

TEST(PanicRegionTest, DamagedCpuDataDropsOnlyThatCpu) {
  auto bytes = TwoCpuRegion().Build();
  const auto c1 = PanicRegionBuilder::CpuOf(bytes, 1);
  bytes[c1.data_off + 20] ^= 0x40;  // a bit flip in cpu 1's copy
  auto r = ParsePanicRegion(bytes.data(), bytes.size());
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->cpus.size(), 1u);
  EXPECT_EQ(r->cpus[0].desc.cpu, 0u);
  EXPECT_EQ(r->cpus[0].records.size(), 100u);
  EXPECT_TRUE(Mentions(r->damaged, "cpu 1: data checksum mismatch")) << r->damaged.size();
  EXPECT_EQ(r->sideband.size(), 2u);
}

TEST(PanicRegionTest, TruncatedRegionKeepsTheCpusThatWereRead) {
  auto bytes = TwoCpuRegion().Build();
  const auto c1 = PanicRegionBuilder::CpuOf(bytes, 1);
  // The read stopped inside cpu 1's copy: cpu 0's (before it) is whole.
  auto r = ParsePanicRegion(bytes.data(), c1.data_off + 8);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->cpus.size(), 1u);
  EXPECT_EQ(r->cpus[0].desc.cpu, 0u);
  EXPECT_TRUE(Mentions(r->damaged, "region: only"));
  EXPECT_TRUE(Mentions(r->damaged, "cpu 1: data")) << r->damaged.back();
  EXPECT_TRUE(Mentions(r->damaged, "region truncated"));
  // Shorter than the header: refused, not read past.
  EXPECT_EQ(ParsePanicRegion(bytes.data(), 100).status().code(), StatusCode::kCorrupt);
}

TEST(PanicRegionTest, DamagedTablesAreDroppedAndNamed) {
  auto bytes = TwoCpuRegion().Build();
  auto h = PanicRegionBuilder::HeaderOf(bytes);
  bytes[h.sb_off + 3] ^= 1;
  bytes[h.mod_off + 1] ^= 1;
  auto r = ParsePanicRegion(bytes.data(), bytes.size());
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->sideband_ok);
  EXPECT_TRUE(r->sideband.empty());
  EXPECT_TRUE(Mentions(r->damaged, "sideband: checksum mismatch"));
  EXPECT_TRUE(Mentions(r->damaged, "module table: checksum mismatch"));
  EXPECT_EQ(r->cpus.size(), 2u);
  // A CPU table whose checksum fails drops every CPU, keeps the rest.
  bytes = TwoCpuRegion().Build();
  bytes[h.cpu_off + 4] ^= 1;
  r = ParsePanicRegion(bytes.data(), bytes.size());
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->cpus.empty());
  EXPECT_TRUE(Mentions(r->damaged, "cpu table: checksum mismatch"));
  EXPECT_EQ(r->sideband.size(), 2u);
}

// Offsets and counts that point anywhere, with valid checksums (a writer
// that means harm can compute them): refused or dropped, never followed.
TEST(PanicRegionTest, HostileOffsetsAndCountsAreBounded) {
  auto bytes = TwoCpuRegion().Build();
  auto h = PanicRegionBuilder::HeaderOf(bytes);
  auto with = [&](auto change) {
    auto copy = bytes;
    auto hh = h;
    change(&hh);
    PanicRegionBuilder::Reseal(&copy, hh);
    return ParsePanicRegion(copy.data(), copy.size());
  };
  EXPECT_EQ(with([](auto* x) { x->nr_cpus = 1u << 30; }).status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(with([](auto* x) { x->region_size = 1ull << 62; }).status().code(),
            StatusCode::kCorrupt);
  EXPECT_EQ(with([](auto* x) { x->header_size = 8; }).status().code(), StatusCode::kCorrupt);
  auto r = with([](auto* x) { x->sb_count = 0xffffffff; });
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(Mentions(r->damaged, "sideband: "));
  r = with([](auto* x) { x->sb_off = UINT64_MAX - 100; });
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(Mentions(r->damaged, "past the end"));
  r = with([](auto* x) { x->cpu_off = 16; });  // inside the header
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->cpus.empty());
  EXPECT_TRUE(Mentions(r->damaged, "inside the header area"));
  r = with([](auto* x) { x->panic_cpu = 7; });
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(Mentions(r->damaged, "panic cpu 7"));

  // Every CPU descriptor naming the same whole range (checksums right): the
  // work stays bounded by the region's size, the repeats are dropped.
  PanicRegionBuilder b(64 * 1024, 64);
  for (int i = 0; i < 10; ++i) b.AddSample(0, 1000 + i, 1, 1, 0x1000, false, {}, {0x1000});
  auto many = b.Build();
  auto mh = PanicRegionBuilder::HeaderOf(many);
  auto c0 = PanicRegionBuilder::CpuOf(many, 0);
  c0.data_off = mh.data_off;
  c0.data_len = many.size() - mh.data_off;
  c0.data_crc = PanicCrc32(many.data() + c0.data_off, c0.data_len);
  for (uint32_t i = 0; i < 64; ++i) {
    c0.cpu = i;
    std::memcpy(many.data() + mh.cpu_off + i * sizeof(c0), &c0, sizeof(c0));
  }
  mh.cpu_crc = PanicCrc32(many.data() + mh.cpu_off, 64 * sizeof(c0));
  PanicRegionBuilder::Reseal(&many, mh);
  auto m = ParsePanicRegion(many.data(), many.size());
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->cpus.size(), 1u);
  EXPECT_EQ(m->cpus[0].records.size(), 10u);
  EXPECT_TRUE(Mentions(m->damaged, "cpu 63: data overlaps other CPUs'"));
}

// A CPU whose copy is empty but whose offset lies near 2^64 (checksums
// right): even a pointer to it would overflow, so the entry is dropped and
// named like any other offset past the region.
TEST(PanicRegionTest, AnEmptyCpuCopyAtAHugeOffsetIsDropped) {
  auto bytes = TwoCpuRegion().Build();
  auto h = PanicRegionBuilder::HeaderOf(bytes);
  auto c = PanicRegionBuilder::CpuOf(bytes, 0);
  c.data_off = 0xfffffffffffff000;
  c.data_len = 0;
  std::memcpy(bytes.data() + h.cpu_off, &c, sizeof(c));
  h.cpu_crc = PanicCrc32(bytes.data() + h.cpu_off, h.nr_cpus * sizeof(c));
  PanicRegionBuilder::Reseal(&bytes, h);
  auto r = ParsePanicRegion(bytes.data(), bytes.size());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(Mentions(r->damaged, "cpu 0: data [18446744073709547520, +0) is past the end"))
      << (r->damaged.empty() ? "nothing damaged" : r->damaged.front());
  ASSERT_EQ(r->cpus.size(), 1u);
  EXPECT_EQ(r->cpus[0].desc.cpu, 1u);
}

// Random damage anywhere, with the header resealed half of the time so the
// damage reaches the parts behind it: the parser returns, whatever it finds.
TEST(PanicRegionTest, RandomDamageNeverCrashes) {
  const auto good = TwoCpuRegion().Build();
  std::mt19937_64 rng(15);
  for (int round = 0; round < 2000; ++round) {
    auto bytes = good;
    const int flips = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < flips; ++i) {
      // Bias towards the header and tables, where offsets and counts live.
      const size_t span = rng() % 2 ? 8192 : bytes.size();
      bytes[rng() % span] ^= static_cast<uint8_t>(1u << (rng() % 8));
    }
    if (round % 2) PanicRegionBuilder::Reseal(&bytes, PanicRegionBuilder::HeaderOf(bytes));
    const size_t len = rng() % 4 ? bytes.size() : rng() % bytes.size();
    auto r = ParsePanicRegion(bytes.data(), len);
    if (r.ok()) {
      for (const auto& c : r->cpus) EXPECT_LE(c.records.size(), len / sizeof(flightrec_sample));
    }
  }
}

}  // namespace
}  // namespace flightrec::recorder::module
