// The pure parts of hardware-trace capture (spec parsing, PMU format terms,
// snapshot bytes across wraps) and, for real, what this machine without a
// trace PMU gets: an error naming the PMU, never a half-open capture.
#include "recorder/perf/aux_trace.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>

#include "tests/support/files.h"

namespace flightrec::recorder::perf {
namespace {

TEST(AuxTraceSpecTest, ParsesKindSizeAndKnobs) {
  auto s = ParseAuxTraceSpec("pt,size=8M,cyc,mtc,kernel");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->kind, "pt");
  EXPECT_EQ(s->size_bytes, 8u << 20);
  EXPECT_TRUE(s->cyc && s->mtc && s->kernel);
  EXPECT_FALSE(s->user);
  s = ParseAuxTraceSpec("spe");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->size_bytes, 4u << 20);
  EXPECT_TRUE(s->user);
  EXPECT_FALSE(s->kernel);
}

TEST(AuxTraceSpecTest, BadSpecsSayWhatIsAllowed) {
  for (const auto& [spec, words] :
       std::vector<std::pair<std::string, std::string>>{{"lbr", "not a trace kind"},
                                                        {"pt,size=3M", "power of two"},
                                                        {"pt,size=4K", "power of two"},
                                                        {"pt,size=2G", "power of two"},
                                                        {"pt,size=lots", ""},
                                                        {"pt,fast", "unknown option 'fast'"},
                                                        {"pt,branch-only,cyc", "branch-only"}}) {
    auto s = ParseAuxTraceSpec(spec);
    ASSERT_FALSE(s.ok()) << spec;
    EXPECT_NE(s.status().message().find(words), std::string::npos) << s.status().ToString();
  }
}

// A sysfs tree shaped like intel_pt's on a machine that has one.
void WritePt(const std::string& root) {
  mkdir((root + "/intel_pt").c_str(), 0755);
  mkdir((root + "/intel_pt/format").c_str(), 0755);
  std::ofstream(root + "/intel_pt/type") << "8\n";
  for (auto [term, f] : {std::pair{"cyc", "config:1"},
                         {"mtc", "config:9"},
                         {"tsc", "config:10"},
                         {"branch", "config:13"},
                         {"noretcomp", "config:11"}}) {
    std::ofstream(root + "/intel_pt/format/" + term) << f << "\n";
  }
}

TEST(TracePmuTest, ReadsTypeAndFormatTermsAndBuildsTheAttr) {
  testing::TempDir dir;
  WritePt(dir.path());
  TracePmu pmu = ProbeTracePmu("pt", dir.path());
  ASSERT_TRUE(pmu.present) << pmu.why;
  EXPECT_EQ(pmu.type, 8u);
  EXPECT_EQ(pmu.format.at("branch"), "config:13");
  auto a = BuildAuxTraceAttr(pmu, *ParseAuxTraceSpec("pt,cyc"));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->type, 8u);
  EXPECT_EQ(a->config, (1ull << 13) | (1ull << 10) | (1ull << 1));  // branch, tsc, cyc
  EXPECT_EQ(a->exclude_kernel, 1u);
  EXPECT_EQ(a->exclude_user, 0u);
  EXPECT_EQ(a->disabled, 1u);
  a = BuildAuxTraceAttr(pmu, *ParseAuxTraceSpec("pt,branch-only,kernel"));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->config, 1ull << 13);  // no timing packets
  EXPECT_EQ(a->exclude_user, 1u);
}

TEST(TracePmuTest, FormatRangesAndHostileTermsAreChecked) {
  TracePmu pmu;
  pmu.name = "intel_pt";
  pmu.format = {
      {"mtc_period", "config:14-17"}, {"bad", "config:70"}, {"odd", "weird:1"}, {"junk", "config"}};
  perf_event_attr a{};
  a.config = ~0ull;
  ASSERT_TRUE(SetFormatTerm(pmu, "mtc_period", 3, &a).ok());
  EXPECT_EQ((a.config >> 14) & 0xf, 3u);
  EXPECT_EQ(a.config | (0xfull << 14), ~0ull);  // nothing else touched
  for (const char* t : {"bad", "odd", "junk", "absent"}) {
    EXPECT_FALSE(SetFormatTerm(pmu, t, 1, &a).ok()) << t;
  }
}

TEST(TracePmuTest, AuxActionBitsLandWhere613KernelsReadThem) {
  perf_event_attr a{};
  SetAuxAction(&a, kAuxPause);
  uint32_t v;
  std::memcpy(&v, reinterpret_cast<char*>(&a) + 116, 4);
  EXPECT_EQ(v, 2u);
  EXPECT_EQ(a.aux_sample_size, 0u);
  EXPECT_EQ(a.sig_data, 0u);
}

TEST(TracePmuTest, TheCrashPauseEventIsAKprobeWithAuxPause) {
  const std::string func = "vfs_coredump";
  perf_event_attr a = BuildCrashPauseAttr(6, func);
  EXPECT_EQ(a.type, 6u);
  EXPECT_EQ(a.config1, reinterpret_cast<uintptr_t>(func.c_str()));
  EXPECT_EQ(a.sample_period, 1u);
  uint32_t v;
  std::memcpy(&v, reinterpret_cast<char*>(&a) + 116, 4);
  EXPECT_EQ(v, kAuxPause);
}

TEST(AuxSnapshotTest, BytesComeOutOldestFirstAcrossWraps) {
  uint8_t area[16];
  for (int i = 0; i < 16; ++i) area[i] = static_cast<uint8_t>('a' + i);
  // Not wrapped: the bytes from the start up to the head.
  EXPECT_EQ(SnapshotBytes(area, 16, 5, false), "abcde");
  EXPECT_EQ(SnapshotBytes(area, 16, 0, false), "");
  // Wrapped, head as an offset in the area (PT's snapshot mode): the area
  // from the head round to it.
  EXPECT_EQ(SnapshotBytes(area, 16, 5, true), "fghijklmnopabcde");
  EXPECT_EQ(SnapshotBytes(area, 16, 0, true), "abcdefghijklmnop");
  // Head as a running count (other PMUs): the same positions.
  EXPECT_EQ(SnapshotBytes(area, 16, 37, false), "fghijklmnopabcde");
  EXPECT_EQ(SnapshotBytes(area, 16, 32, false), "abcdefghijklmnop");
  EXPECT_EQ(SnapshotBytes(area, 16, 16, false).size(), 16u);
}

TEST(AuxSnapshotTest, AWrapIsSeenInTheLastPageOfAZeroedArea) {
  std::vector<uint8_t> area(16384, 0);
  EXPECT_FALSE(AreaWrapped(area.data(), area.size()));
  area[100] = 0x02;  // trace near the start only: not wrapped yet
  EXPECT_FALSE(AreaWrapped(area.data(), area.size()));
  area[16384 - 4096] = 0x02;
  EXPECT_TRUE(AreaWrapped(area.data(), area.size()));
}

TEST(AuxSnapshotTest, EachCpuIsDecodedAgainstItsLastTaskOrTheCrashedOne) {
  std::vector<Sample> samples(4);
  samples[0].cpu = 0, samples[0].pid = 7, samples[0].tid = 8;  // the crash, earlier
  samples[1].cpu = 0, samples[1].pid = 9, samples[1].tid = 9;
  samples[2].cpu = 1, samples[2].pid = 5, samples[2].tid = 6;
  samples[3].cpu = 1, samples[3].pid = 4, samples[3].tid = 4;
  AuxTrace t;
  t.cpus.resize(3);
  t.cpus[0].cpu = 0, t.cpus[1].cpu = 1, t.cpus[2].cpu = 2;
  AssignTracedTasks(samples, 7, &t);
  EXPECT_EQ(t.cpus[0].pid, 7u);
  EXPECT_EQ(t.cpus[0].tid, 8u);
  EXPECT_EQ(t.cpus[1].pid, 4u);
  EXPECT_EQ(t.cpus[2].pid, 0u);  // no sample: unknown
}

TEST(AuxTraceCaptureTest, WithoutATracePmuOpenFailsNamingIt) {
  // This machine (and CI's) has no intel_pt: the real probe and open.
  TracePmu pmu = ProbeTracePmu("pt");
  ASSERT_FALSE(pmu.present) << "this test expects a machine without Intel PT";
  EXPECT_NE(pmu.why.find("no pt PMU"), std::string::npos) << pmu.why;
  EXPECT_NE(pmu.why.find("intel_pt"), std::string::npos) << pmu.why;
  auto c = AuxTraceCapture::Open(*ParseAuxTraceSpec("pt"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), pmu.why);
  nlohmann::json off = AuxTraceOffJson(pmu, true, pmu.why);
  EXPECT_EQ(off["pmu_present"], false);
  EXPECT_EQ(off["enabled"], false);
}

}  // namespace
}  // namespace flightrec::recorder::perf
