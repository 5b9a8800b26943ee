// OpenPerfEvent: the one place flightrec calls perf_event_open(2). Every
// errno becomes a message that says what to do (after rr's PerfCounters.cc).
#pragma once

#include <linux/perf_event.h>

#include <string>
#include <vector>

#include "common/scoped_fd.h"
#include "common/status.h"

namespace flightrec::recorder::perf {

// what: a short description for messages ("cpu-clock sampling on cpu 1").
StatusOr<ScopedFd> OpenPerfEvent(perf_event_attr& attr, int pid, int cpu, int group_fd,
                                 const std::string& what);

// Reads /proc/sys/kernel/perf_event_paranoid (2 if unreadable).
int PerfEventParanoid();

// CPUs that are online now (from /sys/devices/system/cpu/online).
std::vector<int> OnlineCpus();

}  // namespace flightrec::recorder::perf
