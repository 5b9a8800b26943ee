// Snapshot: the history one capture backend copied out of its rings for one
// dump, and the bookkeeping every snapshot path shares (window bounds, time
// order, the crash-marker fallback).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "recorder/capture/loss_ledger.h"
#include "recorder/capture/off_cpu.h"
#include "recorder/model/events.h"

namespace flightrec::recorder {

struct Snapshot {
  uint64_t freeze_time_ns = 0;    // CLOCK_MONOTONIC instant the rings were frozen
  uint64_t window_start_ns = 0;   // freeze_time - requested window
  uint64_t oldest_sample_ns = 0;  // oldest sample kept (0 if none)
  std::vector<Sample> samples;    // all CPUs, sorted by time, inside the window
  // Exact loss accounting by counter (the record's `loss` section).
  LossLedger counters;
  nlohmann::json per_cpu = nlohmann::json::array();
  int64_t copy_ns = 0;  // time the rings were frozen
  // produced - (in ring + each loss cause): 0 for discrete events; timer
  // periods without a sample for cpu-clock.
  int64_t unaccounted = 0;
  // Where the history comes from: {"kind": "live_rings"} (frozen at the dump)
  // or {"kind": "crash_marker", ...} (preserved at a crash instant in kernel
  // context: marker time, pid/tid/signal, how long after the crash it was read).
  nlohmann::json source = {{"kind", "live_rings"}};
  // Off-CPU capture (recorderd --off-cpu): whether it was on, the blocked
  // intervals of the window (sorted by switch-out time), and their own
  // accounting (the record's loss section, key "off_cpu").
  bool off_cpu = false;
  int64_t off_cpu_threshold_ns = 0;
  std::vector<OffCpuInterval> off_cpu_intervals;
  nlohmann::json off_cpu_loss = nlohmann::json::object();
  // The glibc mutexes blocked threads waited for, with their owners
  // (LockWaitTable::ToJson): section `lock_waits`.
  nlohmann::json lock_waits = nlohmann::json::array();

  // Sets freeze_time_ns = end_ns and the window's start `last_ns` before it
  // (0 when the window reaches back past boot).
  void SetWindow(uint64_t end_ns, int64_t last_ns);
  // Sorts the samples of every CPU by time and sets oldest_sample_ns.
  void SortSamples();
  // Sets samples to the runs merged by time (equal times: the lower run
  // first, then run order) and oldest_sample_ns. Each run is one CPU's
  // samples, expected in time order (a ring's order); a run that is not is
  // stable-sorted first, so the result is sorted whatever the input. Linear
  // in the samples for sorted runs (log of the runs per sample), where
  // SortSamples is n log n moves of whole samples.
  void MergeSampleRuns(std::vector<std::vector<Sample>> runs);
};

// Sorts samples by time, stably (equal times keep their order); only a
// pass over them when they are in order already, as a backend's are.
void SortByTimeIfNeeded(std::vector<Sample>& samples);

class CaptureBackend;

// A crashed process's history: from its crash marker when the backend keeps
// them (cut at the crash instant, however late the hook asks), else the live
// rings as of now. When it falls back for another reason than "this backend
// keeps no markers", the snapshot's source says why under "crash_marker" and
// *fallback_reason is set (for the caller's log).
StatusOr<Snapshot> TakeCrashHistory(CaptureBackend& backend, uint32_t pid, int64_t last_ns,
                                    int64_t wait_ns, std::string* fallback_reason);

}  // namespace flightrec::recorder
