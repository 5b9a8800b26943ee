// Off-CPU intervals: how long each thread stayed blocked, from a snapshot's
// switch-outs (a blocking thread's sched_switch, with its stack and state)
// and switch-ins (a thread put back on a CPU). Pure logic, shared by every
// backend that captures context switches, so that its accounting is tested
// on its own (recorder/capture/off_cpu_unittest.cc).
//
// Thread: none of its own.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "recorder/capture/loss_ledger.h"
#include "recorder/model/events.h"

namespace flightrec::recorder {

// One stretch a thread spent blocked. sample is its switch-out (time, tid,
// call chains, user stack) with period = the nanoseconds it stayed off CPU;
// state is 'S' (interruptible sleep) or 'D' (uninterruptible); ongoing: the
// thread had not run again when the rings froze, so the interval ends at the
// freeze (it was still blocked then).
struct OffCpuInterval {
  Sample sample;
  char state = 'S';
  bool ongoing = false;
};

struct SwitchOut {
  Sample sample;
  char state = 'S';
};
struct SwitchIn {
  uint64_t time_ns = 0;
  uint32_t tid = 0;
};

struct OffCpuMatch {
  int64_t threshold_ns = 0;  // intervals shorter than this are dropped (counted)
  uint64_t window_start_ns = 0;
  uint64_t freeze_ns = 0;
  // Switch-ins at or after this instant are all present (the switch-in rings
  // lost only older ones); 0 = none was lost.
  uint64_t switch_ins_complete_since_ns = 0;
  // Each thread's last switch-in up to the freeze, from every switch-in since
  // last_switch_in_complete_since_ns (a log the daemon drains as it goes, not
  // an overwrite ring): a switch-out older than the rings' switch-ins, whose
  // thread has not switched in since, was still blocked at the freeze.
  const std::unordered_map<uint32_t, uint64_t>* last_switch_in = nullptr;
  uint64_t last_switch_in_complete_since_ns = UINT64_MAX;
  // Each thread's latest on-CPU sample: a thread sampled on a CPU after its
  // switch-out ran again, whatever the switch-ins say (the kernel does not
  // report every switch-in, docs/ARCHITECTURE.md).
  const std::unordered_map<uint32_t, uint64_t>* last_on_cpu = nullptr;
};

// Pairs each switch-out with its thread's next switch-in. A switch-out with
// no later switch-in ends at the freeze (ongoing) when no switch-in after it
// can have been lost, or when the last-switch-in log says the thread has not
// run since; otherwise (or when the same thread switched out again first,
// its switch-in overwritten) it is dropped and counted as end_unknown. Intervals that ended before
// the window, or are shorter than the threshold, are counted (outside_window, below_threshold) and
// dropped. Returns the intervals sorted by switch-out time.
std::vector<OffCpuInterval> MatchOffCpu(std::vector<SwitchOut> outs, std::vector<SwitchIn> ins,
                                        const OffCpuMatch& m, LossLedger* ledger);

// 'S', 'D' for a sched_switch prev_state's TASK_REPORT bits; 0 for any
// other state (runnable, stopped, dead: not blocked).
char BlockedState(uint64_t prev_state);

}  // namespace flightrec::recorder
