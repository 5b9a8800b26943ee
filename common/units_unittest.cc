#include "common/units.h"

#include <gtest/gtest.h>

namespace flightrec {
namespace {

TEST(UnitsTest, DurationsParse) {
  EXPECT_EQ(*ParseDurationNs("5s"), 5'000'000'000);
  EXPECT_EQ(*ParseDurationNs("250ms"), 250'000'000);
  EXPECT_EQ(*ParseDurationNs("1.5"), 1'500'000'000);
  EXPECT_EQ(*ParseDurationNs("2h"), 7'200'000'000'000);
  EXPECT_FALSE(ParseDurationNs("five").ok());
  EXPECT_FALSE(ParseDurationNs("5 parsecs").ok());
  EXPECT_FALSE(ParseDurationNs("-5s").ok());
}

TEST(UnitsTest, SizesUseBinaryMultiples) {
  EXPECT_EQ(*ParseSize("4096"), 4096u);
  EXPECT_EQ(*ParseSize("64K"), 65536u);
  EXPECT_EQ(*ParseSize("4GiB"), 4ull << 30);
  EXPECT_EQ(*ParseSize("1.5M"), 1572864u);
  EXPECT_FALSE(ParseSize("lots").ok());
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
}

TEST(UnitsTest, TimesParseAbsoluteAndRelative) {
  int64_t now = 1'800'000'000'000'000'000;
  EXPECT_EQ(*ParseTimeNs("@100", now), 100'000'000'000);
  EXPECT_EQ(*ParseTimeNs("-5m", now), now - 300'000'000'000);
  EXPECT_EQ(*ParseTimeNs("5m ago", now), now - 300'000'000'000);
  EXPECT_EQ(*ParseTimeNs("1970-01-01T00:01:00Z", now), 60'000'000'000);
  EXPECT_EQ(*ParseTimeNs("1970-01-02", now), 86400'000'000'000);
  EXPECT_FALSE(ParseTimeNs("yesterday-ish", now).ok());
  EXPECT_EQ(FormatTimeNs(60'000'000'000), "1970-01-01T00:01:00.000Z");
}

}  // namespace
}  // namespace flightrec
