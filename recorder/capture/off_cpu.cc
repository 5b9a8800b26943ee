#include "recorder/capture/off_cpu.h"

#include <algorithm>
#include <tuple>

namespace flightrec::recorder {

namespace {

// Whether the log of last switch-ins shows that s's thread has not run
// since s switched it out.
bool NotRunSince(const OffCpuMatch& m, const Sample& s) {
  if (m.last_switch_in == nullptr || s.time_ns < m.last_switch_in_complete_since_ns) return false;
  auto it = m.last_switch_in->find(s.tid);
  return it == m.last_switch_in->end() || it->second < s.time_ns;
}

bool SampledSince(const OffCpuMatch& m, const Sample& s) {
  if (m.last_on_cpu == nullptr) return false;
  auto it = m.last_on_cpu->find(s.tid);
  return it != m.last_on_cpu->end() && it->second > s.time_ns;
}

}  // namespace

char BlockedState(uint64_t prev_state) {
  // include/linux/sched.h: TASK_INTERRUPTIBLE 0x1, TASK_UNINTERRUPTIBLE 0x2,
  // as __trace_sched_switch_state reports them (one TASK_REPORT bit).
  if (prev_state & 0x2) return 'D';
  if (prev_state & 0x1) return 'S';
  return 0;
}

std::vector<OffCpuInterval> MatchOffCpu(std::vector<SwitchOut> outs, std::vector<SwitchIn> ins,
                                        const OffCpuMatch& m, LossLedger* ledger) {
  std::stable_sort(outs.begin(), outs.end(), [](const SwitchOut& a, const SwitchOut& b) {
    return std::tie(a.sample.tid, a.sample.time_ns) < std::tie(b.sample.tid, b.sample.time_ns);
  });
  std::sort(ins.begin(), ins.end(), [](const SwitchIn& a, const SwitchIn& b) {
    return std::tie(a.tid, a.time_ns) < std::tie(b.tid, b.time_ns);
  });
  uint64_t below = 0, unknown = 0, outside = 0;
  std::vector<OffCpuInterval> result;
  for (size_t i = 0; i < outs.size(); ++i) {
    Sample& s = outs[i].sample;
    const bool next_out_same_tid = i + 1 < outs.size() && outs[i + 1].sample.tid == s.tid;
    const uint64_t next_out = next_out_same_tid ? outs[i + 1].sample.time_ns : UINT64_MAX;
    auto in = std::lower_bound(ins.begin(), ins.end(), SwitchIn{s.time_ns, s.tid},
                               [](const SwitchIn& a, const SwitchIn& b) {
                                 return std::tie(a.tid, a.time_ns) < std::tie(b.tid, b.time_ns);
                               });
    const bool found = in != ins.end() && in->tid == s.tid && in->time_ns <= next_out;
    OffCpuInterval iv;
    if (found) {
      iv.sample.period = in->time_ns - s.time_ns;
    } else if (!next_out_same_tid && s.time_ns <= m.freeze_ns && !SampledSince(m, s) &&
               (s.time_ns >= m.switch_ins_complete_since_ns || NotRunSince(m, s))) {
      iv.sample.period = m.freeze_ns - s.time_ns;
      iv.ongoing = true;
    } else {
      ++unknown;
      continue;
    }
    const uint64_t end = s.time_ns + iv.sample.period;
    if (end < m.window_start_ns) {
      ++outside;
      continue;
    }
    if (static_cast<int64_t>(iv.sample.period) < m.threshold_ns) {
      ++below;
      continue;
    }
    const uint64_t period = iv.sample.period;
    iv.sample = std::move(s);
    iv.sample.period = period;
    iv.state = outs[i].state;
    result.push_back(std::move(iv));
  }
  std::stable_sort(result.begin(), result.end(),
                   [](const OffCpuInterval& a, const OffCpuInterval& b) {
                     return a.sample.time_ns < b.sample.time_ns;
                   });
  ledger->Add(LossCounter::kBelowThreshold, below);
  ledger->Add(LossCounter::kEndUnknown, unknown);
  ledger->Add(LossCounter::kOutsideWindow, outside);
  ledger->Set(LossCounter::kInWindow, result.size());
  return result;
}

}  // namespace flightrec::recorder
