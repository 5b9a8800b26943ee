// CaptureBackend: what the daemon needs from a capture backend (perf_event or
// flightrec.ko), so that dumps, status, triggers and records are the same
// whichever one records.
//
// Thread: every method is called on the daemon's io thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "recorder/capture/blocked_threads.h"
#include "recorder/capture/snapshot.h"
#include "recorder/model/events.h"

namespace flightrec::recorder {

// What --history gets: how long the rings last at the configured rate on a
// busy CPU (an idle one takes fewer samples), and a sentence saying so.
struct HistoryPlan {
  double asked_s = 0;
  double held_s = 0;
  std::string text;  // "--history 10s asked; at 999 Hz with 8.0 KiB stacks the rings hold ~4.0 s"
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
  // The threads blocked now, and since when, as far as the switches drained
  // with the sideband tell (off-CPU capture); nullptr: this backend does not
  // follow context switches as they happen.
  virtual const BlockedThreads* blocked_threads() const { return nullptr; }
  // Known before any sample: nullopt where the rate is not (a fixed period
  // of a counted event) or the rings are another program's (the module's).
  virtual std::optional<HistoryPlan> PlannedHistory() const { return std::nullopt; }
};

}  // namespace flightrec::recorder
