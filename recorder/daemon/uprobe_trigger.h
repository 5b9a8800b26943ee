// UprobeTrigger: "dump the preceding history when function F runs" (seed 004,
// like magic-trace's stop indicator but system-wide and re-armed).
//
// Uses the kernel's `uprobe` perf PMU (/sys/bus/event_source/devices/uprobe):
// one event per CPU, pid = -1, so every process that maps the file — now or
// later — is covered (uprobes are installed into every mapping of the file,
// kernel/events/uprobes.c). Each hit writes a tiny sample (TID, TIME) into a
// per-CPU ring with wakeup_events = 1, so the fds become readable and the
// daemon's event loop learns of the hit without polling.
//
// Thread: created and drained on the daemon's io thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/scoped_fd.h"
#include "common/status.h"
#include "recorder/daemon/elf_symbol.h"

namespace flightrec::recorder {

struct UprobeHit {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t time_ns = 0;  // CLOCK_MONOTONIC
  uint32_t cpu = 0;
};

class UprobeTrigger {
 public:
  // Resolves spec ("/path/bin:symbol") with this process's credentials and
  // opens one uprobe event per online CPU.
  static StatusOr<std::unique_ptr<UprobeTrigger>> Create(const std::string& spec);
  // The same on a target already resolved (ResolveUprobeTargetAs): the
  // events go on target.file, not on whatever its path names now.
  static StatusOr<std::unique_ptr<UprobeTrigger>> Create(UprobeTarget target,
                                                         const std::string& spec);
  ~UprobeTrigger();

  const UprobeTarget& target() const { return target_; }
  // Pollable fds, one per CPU: readable when a hit is waiting.
  std::vector<int> fds() const;
  // Reads every pending hit from all CPUs (consumes them).
  std::vector<UprobeHit> Drain();
  // True if some CPU's ring holds hits not yet drained (does not consume).
  bool Pending() const;
  // Total hits seen so far (including ones drained while rate-limited).
  uint64_t hits() const { return hits_; }

 private:
  struct Cpu {
    ScopedFd fd;
    ScopedMmap ring;
    uint32_t cpu = 0;
  };
  UprobeTrigger() = default;
  UprobeTarget target_;
  std::vector<Cpu> cpus_;
  uint64_t hits_ = 0;
};

}  // namespace flightrec::recorder
