// The off-CPU sections' encoding round trip, and hostile section bytes: a
// huge duration, a state count that does not match, an unknown state, a
// non-sample event, a bad JSON object: each a Corrupt error that says what.
#include "recorder/record/off_cpu_section.h"

#include <gtest/gtest.h>

#include "common/checked_json.h"
#include "recorder/model/event_codec.h"

namespace flightrec::recorder {
namespace {

OffCpuInterval Interval(uint32_t tid, uint64_t t, uint64_t ns, char state, bool ongoing) {
  OffCpuInterval iv;
  iv.sample.pid = 100;
  iv.sample.tid = tid;
  iv.sample.time_ns = t;
  iv.sample.period = ns;
  iv.sample.mode = CpuMode::kKernel;
  iv.sample.ip = 0xffffffff81000000ull;
  iv.sample.kernel_chain = {0xffffffff81000000ull, 0xffffffff81000100ull};
  iv.sample.user_chain = {0x401000, 0x401100};
  iv.state = state;
  iv.ongoing = ongoing;
  return iv;
}

TEST(OffCpuSectionTest, IntervalsRoundTrip) {
  OffCpuSections s = EncodeOffCpu(
      {Interval(101, 1000, 500, 'S', false), Interval(102, 2000, 8000, 'D', true)}, 1'000'000);
  auto r = DecodeOffCpu(s.events, s.info, 10'000, "r1");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->present);
  EXPECT_EQ(r->threshold_ns, 1'000'000);
  ASSERT_EQ(r->intervals.size(), 2u);
  EXPECT_EQ(r->intervals[0].sample.tid, 101u);
  EXPECT_EQ(r->intervals[0].sample.period, 500u);
  EXPECT_EQ(r->intervals[0].state, 'S');
  EXPECT_FALSE(r->intervals[0].ongoing);
  EXPECT_EQ(r->intervals[1].state, 'D');
  EXPECT_TRUE(r->intervals[1].ongoing);
  EXPECT_EQ(r->intervals[1].sample.user_chain, (std::vector<uint64_t>{0x401000, 0x401100}));
}

void ExpectCorrupt(std::string_view events, std::string_view info, const std::string& says) {
  auto r = DecodeOffCpu(events, info, 10'000, "r1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorrupt) << r.status().message();
  EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("r1"), std::string::npos) << r.status().message();
}

TEST(OffCpuSectionTest, HostileSectionsAreCorruptErrorsThatSayWhat) {
  // A duration past the freeze time (and one that would overflow).
  OffCpuSections huge = EncodeOffCpu({Interval(7, 1000, UINT64_MAX - 10, 'S', false)}, 0);
  ExpectCorrupt(huge.events, huge.info, "past the record's freeze time");
  OffCpuSections late = EncodeOffCpu({Interval(7, 20'000, 1, 'S', false)}, 0);
  ExpectCorrupt(late.events, late.info, "past the record's freeze time");
  OffCpuSections ok = EncodeOffCpu({Interval(7, 1000, 10, 'S', false)}, 0);
  ExpectCorrupt(ok.events, R"({"version":1,"states":"SS"})", "1 intervals but 2 states");
  ExpectCorrupt(ok.events, R"({"version":1,"states":""})", "more intervals than");
  ExpectCorrupt(ok.events, R"({"version":1,"states":"X"})", "is not S, D, s or d");
  ExpectCorrupt(ok.events, R"({"version":2,"states":"S"})", "version 1");
  ExpectCorrupt(ok.events, "[1,2", "version 1");
  EventEncoder enc;
  enc.Add(Event{TaskEvent{.time_ns = 5, .pid = 1, .tid = 1}});
  ExpectCorrupt(enc.buffer(), R"({"version":1,"states":"S"})", "not a sample");
  ExpectCorrupt(std::string("\x07\xff\xff", 3), R"({"version":1,"states":"S"})", "off_cpu");
  // More states than a record may hold: refused before any is decoded.
  nlohmann::json many = {{"version", 1}, {"states", std::string(kMaxOffCpuIntervals + 1, 'S')}};
  ExpectCorrupt(ok.events, json::Dump(many), "more than a record may hold");
}

}  // namespace
}  // namespace flightrec::recorder
