// HungTaskEvents: the kernel's hung-task reports (sched:sched_process_hang)
// as they happen. khungtaskd (kernel/hung_task.c, CONFIG_DETECT_HUNG_TASK)
// wakes every hung_task_check_interval_secs (0: every timeout) and, for
// each task in TASK_UNINTERRUPTIBLE that is neither killable
// (TASK_WAKEKILL) nor TASK_NOLOAD nor frozen, and whose context-switch
// count has not moved for kernel.hung_task_timeout_secs, calls
// check_hung_task(), which fires the tracepoint (before its warning limit,
// so it fires at every check while the task stays hung). A timeout of 0
// turns the detector off. One event per CPU, a one-page ring woken per
// record, like the uprobe triggers.
//
// Thread: created and drained on the daemon's io thread.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/scoped_fd.h"
#include "common/status.h"

namespace flightrec::recorder {

class HungTaskEvents {
 public:
  // Unsupported without the tracepoint or the detector, or when the
  // detector is off (hung_task_timeout_secs = 0).
  static StatusOr<std::unique_ptr<HungTaskEvents>> Create();
  std::vector<int> fds() const;
  bool Pending() const;
  // The hung tasks' thread ids reported since the last call.
  std::vector<uint32_t> Drain();
  uint64_t reports() const { return reports_; }

 private:
  struct Cpu {
    ScopedFd fd;
    ScopedMmap ring;
  };
  HungTaskEvents() = default;
  std::vector<Cpu> cpus_;
  uint32_t pid_offset_ = 0;
  uint64_t reports_ = 0;
};

}  // namespace flightrec::recorder
