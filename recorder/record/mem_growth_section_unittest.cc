// An oom record's sections as hostile input: growth samples outside the
// window or standing for absurd growth, events that are no samples, an
// `oom` section that is not the shape written or too big: each a Corrupt
// error that says what, never a crash.
#include "recorder/record/mem_growth_section.h"

#include <gtest/gtest.h>

#include "recorder/model/event_codec.h"

namespace flightrec::recorder {
namespace {

Sample Growth(uint64_t t, uint64_t period) {
  Sample s;
  s.pid = 100;
  s.tid = 100;
  s.time_ns = t;
  s.period = period;
  s.mode = CpuMode::kUser;
  s.ip = 0x401000;
  s.user_chain = {0x401000, 0x401100};
  return s;
}

TEST(MemGrowthSectionTest, SamplesRoundTrip) {
  auto r = DecodeMemGrowth(EncodeMemGrowth({Growth(1000, 64), Growth(2000, 64)}), 1000, 3000, "r");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[1].user_chain, (std::vector<uint64_t>{0x401000, 0x401100}));
  EXPECT_EQ((*r)[1].period, 64u);
  auto empty = DecodeMemGrowth("", 0, 1, "r");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(MemGrowthSectionTest, HostileSamplesAreCorruptErrorsThatSayWhat) {
  struct Case {
    std::string bytes;
    const char* says;
  };
  EventEncoder other;
  other.Add(Event(CommEvent{1500, 100, 100, "x", false}));
  const std::vector<Case> cases = {
      {EncodeMemGrowth({Growth(999, 64)}), "outside the record's window"},
      {EncodeMemGrowth({Growth(3001, 64)}), "outside the record's window"},
      {EncodeMemGrowth({Growth(1500, 0)}), "stands for 0 faults"},
      {EncodeMemGrowth({Growth(1500, uint64_t{1} << 40)}), "faults"},
      {other.Take(), "is not a sample"},
      {std::string("\xff\xff\xff\xff garbage", 12), "mem_growth"},
  };
  for (const auto& c : cases) {
    auto r = DecodeMemGrowth(c.bytes, 1000, 3000, "r1");
    ASSERT_FALSE(r.ok()) << c.says;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("r1"), std::string::npos) << r.status().message();
  }
}

TEST(OomSectionTest, OnlyTheWrittenShapeWithinBoundsIsRead) {
  auto ok = ParseOomSection(R"({"version":1,"rss":[{"time_mono_ns":1,"rss_bytes":2}]})", "r");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  std::string many = R"({"version":1,"rss":[)";
  for (size_t i = 0; i <= kMaxRssPointsInRecord; ++i) many += (i ? ",0" : "0");
  many += "]}";
  const std::vector<std::pair<std::string, const char*>> bad = {
      {"not json", "section 'oom'"},
      {"[1,2]", "version 1"},
      {R"({"version":2})", "version 1"},
      {R"({"version":1,"rss":{}})", "not an array"},
      {many, "RSS points"},
      {std::string(2000, '[') + std::string(2000, ']'), "section 'oom'"},
      {std::string(kMaxOomSectionBytes + 1, ' '), "bytes"},
  };
  for (const auto& [text, says] : bad) {
    auto r = ParseOomSection(text, "r1");
    ASSERT_FALSE(r.ok()) << says;
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace flightrec::recorder
