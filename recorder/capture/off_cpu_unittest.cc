// MatchOffCpu: pairing blocking switch-outs with switch-ins, and what it
// counts when it cannot (pure logic; off_cpu_test runs it on a real kernel).
#include "recorder/capture/off_cpu.h"

#include <gtest/gtest.h>

namespace flightrec::recorder {
namespace {

SwitchOut Out(uint32_t tid, uint64_t t, char state = 'S') {
  SwitchOut o;
  o.sample.tid = tid;
  o.sample.pid = tid;
  o.sample.time_ns = t;
  o.state = state;
  return o;
}

TEST(OffCpuMatchTest, SwitchOutEndsAtTheThreadsNextSwitchInOrAtTheFreeze) {
  LossLedger l;
  OffCpuMatch m{.threshold_ns = 0, .window_start_ns = 0, .freeze_ns = 1000};
  auto r = MatchOffCpu({Out(7, 100, 'D'), Out(8, 300), Out(7, 600)}, {{500, 8}, {250, 7}, {900, 9}},
                       m, &l);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].sample.tid, 7u);
  EXPECT_EQ(r[0].sample.period, 150u);  // 100 -> 250
  EXPECT_EQ(r[0].state, 'D');
  EXPECT_FALSE(r[0].ongoing);
  EXPECT_EQ(r[1].sample.period, 200u);  // tid 8: 300 -> 500
  EXPECT_EQ(r[2].sample.period, 400u);  // tid 7 again: 600 -> freeze
  EXPECT_TRUE(r[2].ongoing);
  EXPECT_EQ(l.Get(LossCounter::kInWindow), 3u);
}

TEST(OffCpuMatchTest, ThresholdWindowAndOverwrittenSwitchInsAreCounted) {
  LossLedger l;
  // Switch-ins before 400 may have been overwritten.
  OffCpuMatch m{.threshold_ns = 50,
                .window_start_ns = 200,
                .freeze_ns = 1000,
                .switch_ins_complete_since_ns = 400};
  auto r = MatchOffCpu({Out(1, 100), Out(2, 450), Out(3, 10), Out(4, 300), Out(4, 500)},
                       {{150, 1}, {460, 2}, {50, 3}, {800, 4}}, m, &l);
  // tid 1 ended before the window, tid 2 blocked 10 ns, tid 3 outside too;
  // tid 4's first switch-out has no switch-in before its second: unknown.
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].sample.tid, 4u);
  EXPECT_EQ(r[0].sample.period, 300u);
  EXPECT_EQ(l.Get(LossCounter::kOutsideWindow), 2u);
  EXPECT_EQ(l.Get(LossCounter::kBelowThreshold), 1u);
  EXPECT_EQ(l.Get(LossCounter::kEndUnknown), 1u);
}

TEST(OffCpuMatchTest, OldSwitchOutIsOngoingOnlyIfTheLogSaysTheThreadNeverRanSince) {
  std::unordered_map<uint32_t, uint64_t> last = {{1, 50}, {2, 350}};
  OffCpuMatch m{.threshold_ns = 0,
                .window_start_ns = 0,
                .freeze_ns = 1000,
                .switch_ins_complete_since_ns = 500,
                .last_switch_in = &last,
                .last_switch_in_complete_since_ns = 10};
  LossLedger l;
  // tid 1 last ran at 50, before its switch-out at 100: still blocked.
  // tid 2 ran at 350, after its switch-out at 200: when it ended is lost.
  auto r = MatchOffCpu({Out(1, 100), Out(2, 200)}, {}, m, &l);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].sample.tid, 1u);
  EXPECT_TRUE(r[0].ongoing);
  EXPECT_EQ(r[0].sample.period, 900u);
  EXPECT_EQ(l.Get(LossCounter::kEndUnknown), 1u);
  // A log that is itself incomplete before the switch-out proves nothing.
  m.last_switch_in_complete_since_ns = 150;
  LossLedger l2;
  EXPECT_TRUE(MatchOffCpu({Out(1, 100)}, {}, m, &l2).empty());
  EXPECT_EQ(l2.Get(LossCounter::kEndUnknown), 1u);
}

TEST(OffCpuMatchTest, AThreadSampledOnCpuAfterItsSwitchOutIsNotStillBlocked) {
  // Its switch-in was not reported, but an on-CPU sample at 700 shows it ran.
  std::unordered_map<uint32_t, uint64_t> sampled = {{1, 700}, {2, 50}};
  OffCpuMatch m{
      .threshold_ns = 0, .window_start_ns = 0, .freeze_ns = 1000, .last_on_cpu = &sampled};
  LossLedger l;
  auto r = MatchOffCpu({Out(1, 100), Out(2, 100)}, {}, m, &l);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].sample.tid, 2u);
  EXPECT_TRUE(r[0].ongoing);
  EXPECT_EQ(l.Get(LossCounter::kEndUnknown), 1u);
}

TEST(OffCpuMatchTest, BlockedStateIsSOrDAndNothingElse) {
  EXPECT_EQ(BlockedState(0x1), 'S');
  EXPECT_EQ(BlockedState(0x2), 'D');
  EXPECT_EQ(BlockedState(0x0), 0);
  EXPECT_EQ(BlockedState(0x100), 0);  // TASK_REPORT_MAX: preempted
  EXPECT_EQ(BlockedState(0x80), 0);   // idle kernel thread
}

}  // namespace
}  // namespace flightrec::recorder
