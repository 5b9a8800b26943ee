// The crashing thread's last seconds, from the history record linked to a
// crash: top functions, its last samples, and a timeline over the record's
// window (the same bins as `recorder timeline`). `recorder crash info` prints
// it; the JSON is its --json "history" object.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "recorder/analysis/replay.h"
#include "store/record_file.h"

namespace flightrec::recorder::analysis {

// The aggregation alone, on (time, innermost function) points of one thread:
// "samples", "top" (10 functions, most first), "last" (10 latest samples),
// "span_s", "first_ns", "last_ns", "window_start_ns", "window_end_ns",
// "window_s" and "timeline" ({bins, bin_ns, lane, text, legend}). The window
// is [window_start_ns, window_end_ns) when the record states one, else the
// points' own span.
nlohmann::json SummarizeThreadHistory(std::vector<std::pair<uint64_t, std::string>> points,
                                      uint64_t window_start_ns, uint64_t window_end_ns, int bins);

// Every thread of a process over a record: on-CPU samples and off-CPU time
// side by side, so that a hang shows the threads that never ran, and where
// each was blocked. Add() takes Replay's samples and off-CPU intervals of
// one process; ToJson() is an array, one object per tid (ascending): "tid",
// "comm", "samples", "off_cpu_ns", "off_cpu_intervals", and for the longest
// interval "longest_off_cpu_ns", "longest_state" (S/D), "blocked_at_end"
// (still blocked when the record was frozen) and "blocked_in" (its user
// frames "f <- caller <- ...", innermost first, up to the first in the
// process's executable, at most 8; else its innermost frame).
class ThreadActivity {
 public:
  void Add(const ResolvedSample& rs);
  nlohmann::json ToJson() const;
  std::map<uint32_t, std::string> Comms() const;
  // The thread's latest on-CPU sample (0: none).
  uint64_t LastOnCpuNs(uint32_t tid) const;

 private:
  struct Thread {
    std::string comm;
    uint64_t samples = 0, off_cpu_ns = 0, intervals = 0, longest_ns = 0, last_on_cpu_ns = 0;
    char longest_state = 0;
    bool blocked_at_end = false;
    std::string blocked_in;
  };
  std::map<uint32_t, Thread> threads_;
};

// Replays `hreader` (record `hid`) for the crashed thread named by `crash`
// (the crash record's "crash" metadata: pid, and global_tid, the %I that
// samples carry, else tid) and summarizes it, adding "id", "tid", "comm" (the
// thread's name at its last sample), "source" (crash marker or live rings)
// "end_mono_ns" and "threads" (ThreadActivity: every thread of the process
// in the record, off-CPU time included when the record has it) and "locks"
// (LockGraph of the process's threads still waiting for a mutex at the end,
// from section lock_waits; "locks_error" if that section is malformed).
StatusOr<nlohmann::json> CrashHistory(const store::RecordReader& hreader,
                                      const nlohmann::json& crash, const std::string& hid,
                                      int bins);

// Where process `pid`'s memory went over an oom record (section
// `mem_growth`): "samples", "faults" (what they stand for), "top" (at most
// 10 stacks by sampled faults, most first: "function" the innermost user
// frame, "stack" its user frames "f <- caller <- ..." up to the first in the
// process's executable (at most 8), "samples", "faults", "share_pct" of the
// sampled growth).
StatusOr<nlohmann::json> MemGrowthSummary(const store::RecordReader& reader, uint32_t pid);

}  // namespace flightrec::recorder::analysis
