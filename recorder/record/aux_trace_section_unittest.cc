#include "recorder/record/aux_trace_section.h"

#include <gtest/gtest.h>

namespace flightrec::recorder {
namespace {

AuxTrace Sample() {
  AuxTrace t;
  t.pmu = "intel_pt";
  t.pmu_type = 8;
  t.config = 0x300e601;
  t.time_mult = 123;
  t.time_shift = 10;
  t.time_zero = 99;
  AuxCpuTrace c;
  c.cpu = 3;
  c.pid = 10;
  c.tid = 11;
  c.aux_size = 64;
  c.aux_head = 1000;
  c.flags = kAuxFlagOverwrite | kAuxFlagTruncated;
  c.cut_time_ns = 5;
  c.data = std::string(64, 'x');
  t.cpus = {c, c};
  t.cpus[1].cpu = 4;
  t.cpus[1].data = "abc";
  return t;
}

std::string Encoded(const AuxTrace& t) { return EncodeAuxTrace(t); }

TEST(AuxTraceSectionTest, RoundTripsEveryField) {
  const AuxTrace t = Sample();
  auto d = DecodeAuxTrace(Encoded(t), "r");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->pmu, "intel_pt");
  EXPECT_EQ(d->config, t.config);
  EXPECT_EQ(d->time_mult, 123u);
  EXPECT_EQ(d->time_shift, 10);
  EXPECT_EQ(d->time_zero, 99u);
  ASSERT_EQ(d->cpus.size(), 2u);
  EXPECT_EQ(d->cpus[0].data, t.cpus[0].data);
  EXPECT_EQ(d->cpus[0].stream_offset(), 1000u - 64);
  EXPECT_EQ(d->cpus[1].cpu, 4u);
  EXPECT_EQ(d->cpus[1].flags, t.cpus[1].flags);
  EXPECT_EQ(AuxFlagNames(d->cpus[1].flags), "truncated|overwrite");
  EXPECT_EQ(AuxFlagNames(0x14), "partial|0x10");
}

void ExpectRefused(const std::string& bytes, const std::string& words) {
  auto d = DecodeAuxTrace(bytes, "rec1");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("record rec1: section 'aux_trace'"), std::string::npos)
      << d.status().ToString();
  EXPECT_NE(d.status().message().find(words), std::string::npos) << d.status().ToString();
}

TEST(AuxTraceSectionTest, EveryTruncationIsRefusedNamingTheSection) {
  const std::string good = Encoded(Sample());
  for (size_t n = 0; n < good.size(); ++n) ExpectRefused(good.substr(0, n), "");
  ExpectRefused(good + "z", "bytes after the last CPU entry");
}

TEST(AuxTraceSectionTest, HostileFieldsAreRefused) {
  ExpectRefused("NOTAUX1\n", "FRAUX1");
  AuxTrace t = Sample();
  t.cpus[0].aux_size = 48;  // not a power of two
  t.cpus[0].data = "x";
  ExpectRefused(Encoded(t), "not a power of two");
  t.cpus[0].aux_size = 1ull << 31;  // past the bound
  ExpectRefused(Encoded(t), "not a power of two up to");
  t = Sample();
  t.cpus[0].data = std::string(65, 'x');  // more than the area holds
  ExpectRefused(Encoded(t), "data");
  t = Sample();
  t.cpus[0].aux_head = 10;  // fewer bytes written than held
  ExpectRefused(Encoded(t), "aux_head is 10");
  t = Sample();
  t.pmu = std::string(100, 'p');
  ExpectRefused(Encoded(t), "PMU name");
  t = Sample();
  t.time_shift = 64;
  ExpectRefused(Encoded(t), "time conversion");
  t = Sample();
  t.cpus.resize(kMaxAuxCpus + 1, t.cpus[1]);
  ExpectRefused(Encoded(t), "CPU count");
  // A length that claims more than the section holds.
  std::string huge = Encoded(Sample());
  huge.resize(huge.size() - 3);
  ExpectRefused(huge, "data");
}

}  // namespace
}  // namespace flightrec::recorder
