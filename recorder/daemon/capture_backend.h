// CaptureBackend: what the daemon needs from a capture backend (perf_event or
// flightrec.ko), so that dumps, status, triggers and records are the same
// whichever one records.
//
// Thread: every method is called on the daemon's io thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "recorder/model/events.h"

namespace flightrec::recorder {

// The history copied out of the rings for one dump.
struct Snapshot {
  uint64_t freeze_time_ns = 0;    // CLOCK_MONOTONIC instant the rings were frozen
  uint64_t window_start_ns = 0;   // freeze_time - requested window
  uint64_t oldest_sample_ns = 0;  // oldest sample kept (0 if none)
  std::vector<Sample> samples;    // all CPUs, sorted by time, inside the window
  // Exact loss accounting by cause (LossCauseName → count), plus "produced".
  std::map<std::string, uint64_t> counters;
  nlohmann::json per_cpu = nlohmann::json::array();
  int64_t copy_ns = 0;  // time the rings were frozen
  // produced - (in ring + each loss cause): 0 for discrete events; timer
  // periods without a sample for cpu-clock.
  int64_t unaccounted = 0;
  // Where the history comes from: {"kind": "live_rings"} (frozen at the dump)
  // or {"kind": "crash_marker", ...} (preserved at a crash instant in kernel
  // context: marker time, pid/tid/signal, how long after the crash it was read).
  nlohmann::json source = {{"kind", "live_rings"}};
};

class CaptureBackend {
 public:
  virtual ~CaptureBackend() = default;
  virtual std::string name() const = 0;  // "perf" or "module"
  // Event in use, rate, CPUs, ring sizes: for status and for every record.
  virtual nlohmann::json Describe() const = 0;
  // Pollable fds that become readable when sideband is waiting.
  virtual std::vector<int> SidebandFds() const = 0;
  // Drains pending sideband (mmap/comm/fork/exit) into sink, in time order per CPU.
  virtual Status DrainSideband(const std::function<void(const Event&)>& sink) = 0;
  // Freezes every CPU's ring, copies out samples newer than now - last_ns,
  // resumes. pids empty = all processes.
  virtual StatusOr<Snapshot> TakeSnapshot(int64_t last_ns) = 0;
  // The history of crashed process `pid` as preserved at the instant its core
  // dump started (flightrec.ko's crash markers): the last `last_ns` before
  // the crash, whatever happened since. Waits up to `wait_ns` for the marker
  // to appear and frees its slot. Unsupported: this backend keeps no crash
  // markers; NotFound: none for `pid` (the caller falls back to TakeSnapshot).
  virtual StatusOr<Snapshot> TakeCrashSnapshot(uint32_t pid, int64_t last_ns, int64_t wait_ns) {
    (void)pid;
    (void)last_ns;
    (void)wait_ns;
    return Unsupported(name() + " backend: no crash markers");
  }
  // Live counters and how many seconds of history the rings hold now.
  virtual nlohmann::json Stats() = 0;
};

}  // namespace flightrec::recorder
