#include "recorder/capture/blocked_threads.h"

#include <gtest/gtest.h>

namespace flightrec::recorder {
namespace {

constexpr uint64_t kS = 0x1, kD = 0x2, kRunnable = 0;
constexpr uint64_t kSec = 1'000'000'000;

TEST(BlockedThreadsTest, AThreadIsBlockedFromItsSwitchOutUntilItsSwitchIn) {
  BlockedThreads b;
  b.OnSwitch(1 * kSec, 10, kD, 0);  // 10 blocks in D, the CPU goes idle
  b.OnSwitch(2 * kSec, 11, kS, 12);
  auto r = b.BlockedFor(5 * kSec, 2 * kSec, "DS");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].tid, 10u);
  EXPECT_EQ(r[0].since_ns, 1 * kSec);
  EXPECT_EQ(r[0].state, 'D');
  EXPECT_EQ(r[1].tid, 11u);
  EXPECT_EQ(r[1].state, 'S');
  // Only the states asked, only those blocked long enough.
  EXPECT_EQ(b.BlockedFor(5 * kSec, 2 * kSec, "D").size(), 1u);
  EXPECT_EQ(b.BlockedFor(5 * kSec, 3500'000'000, "DS").size(), 1u);
  b.OnSwitch(6 * kSec, 12, kRunnable, 10);  // 10 runs again
  EXPECT_EQ(b.BlockedFor(7 * kSec, 0, "D").size(), 0u);
}

TEST(BlockedThreadsTest, ASwitchInReadBeforeAnEarlierSwitchOutOfAnotherCpuEndsTheBlock) {
  BlockedThreads b;
  b.OnSwitch(3 * kSec, 99, kRunnable, 10);  // CPU 1's log, read first
  b.OnSwitch(1 * kSec, 10, kS, 0);          // CPU 0's, older
  EXPECT_TRUE(b.BlockedFor(9 * kSec, 0, "DS").empty());
}

TEST(BlockedThreadsTest, APreemptedOrExitingThreadIsNotBlocked) {
  BlockedThreads b;
  b.OnSwitch(1 * kSec, 10, kRunnable, 11);
  b.OnSwitch(1 * kSec, 11, 0x10, 0);  // exit (TASK_REPORT's Z)
  EXPECT_TRUE(b.BlockedFor(9 * kSec, 0, "DS").empty());
}

TEST(BlockedThreadsTest, ResetAndPruneForgetWhatCannotBeTrusted) {
  BlockedThreads b;
  b.OnSwitch(1 * kSec, 10, kS, 11);
  b.Reset();
  EXPECT_TRUE(b.BlockedFor(9 * kSec, 0, "DS").empty());
  b.OnSwitch(1 * kSec, 10, kS, 11);  // 10 blocked, 11 running
  b.Prune(20 * kSec, 10 * kSec);
  EXPECT_EQ(b.size(), 1u);  // the blocked thread is kept
  EXPECT_EQ(b.BlockedFor(20 * kSec, 0, "S").size(), 1u);
}

}  // namespace
}  // namespace flightrec::recorder
