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
  // Live counters and how many seconds of history the rings hold now.
  virtual nlohmann::json Stats() = 0;
};

}  // namespace flightrec::recorder
