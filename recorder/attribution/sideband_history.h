// The sideband of the history window, replayable at any instant in it.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "recorder/attribution/process_table.h"

namespace flightrec::recorder::attribution {

// The sideband of the history window, so a record can replay mapping changes
// at the instant they happened: a process that execs, dlcloses or remaps
// inside the window has its earlier samples attributed with its earlier
// mappings. Holds a ProcessTable as of a base time plus every sideband event
// since, in arrival order (the order the backend vouches for: the module
// backend moves an exec before its image's mappings although the exec's
// timestamp is later).
//
// Thread: the daemon's loop thread (or `recorder record`'s only thread).
class SidebandHistory {
 public:
  explicit SidebandHistory(CookieTable* cookies) : base_(cookies) {}
  // Appends a sideband event (samples are not sideband and are ignored).
  void Add(const Event& e);
  // Applies the events older than cutoff_ns to the base table and forgets
  // them; drops processes that exited before cutoff_ns. Also trims when more
  // than max_events are held (a storm of mmaps), counting what it moved early.
  void Trim(uint64_t cutoff_ns, size_t max_events = 1'000'000);
  // What a record of samples of `pids` in [start_ns, end_ns] needs, in stream
  // order: events rebuilding each process's state just before start_ns (and
  // that of the parents they fork from inside the window), then each of their
  // sideband events up to end_ns. Times are made non-decreasing (each event
  // takes the minimum of its own and every later event's time), so merging
  // with samples by time keeps the arrival order.
  std::vector<Event> EventsFor(const std::vector<uint32_t>& pids, uint64_t start_ns,
                               uint64_t end_ns) const;
  // The table at the base time; new processes found by a /proc scan go here.
  ProcessTable& base() { return base_; }
  const ProcessTable& base() const { return base_; }
  size_t held() const { return log_.size(); }
  uint64_t trimmed_early() const { return trimmed_early_; }

 private:
  ProcessTable base_;
  std::deque<Event> log_;
  uint64_t trimmed_early_ = 0;
};

// The pid whose attribution a sideband event can change (mmap, exec, comm,
// fork child), or nullopt (exit, loss): replay keeps cached stacks of every
// other process.
std::optional<uint32_t> AffectedPid(const Event& e);

}  // namespace flightrec::recorder::attribution
