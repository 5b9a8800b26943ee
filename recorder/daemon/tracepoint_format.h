// A tracepoint's directory and field layout as tracefs gives them, and its
// perf event opened on every online CPU into a normal ring: what the death
// watch (signal:signal_generate) and the OOM watch (oom:mark_victim) share.
// The layout is the kernel's TP_STRUCT__entry, which may change between
// releases: offsets are read from the format file, never assumed.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "common/scoped_fd.h"
#include "common/status.h"

namespace flightrec::recorder {

// events/<system>/<name> under tracefs (mounting tracefs at
// /sys/kernel/tracing when no tracefs is mounted).
StatusOr<std::string> TracepointDir(const std::string& system, const std::string& name);

struct TracepointField {
  size_t offset = 0;
  size_t size = 0;
};

// "field:int sig;\toffset:8;\tsize:4;\tsigned:1;" -> {8, 4} for "sig".
// Absent (or without offset/size) -> nullopt.
std::optional<TracepointField> FindTracepointField(const std::string& format,
                                                   const std::string& name);

// One CPU's perf event of the tracepoint and its mapped normal ring.
struct TracepointRing {
  ScopedFd fd;
  ScopedMmap ring;
};

// The tracepoint (its directory) sampled at every hit on every online CPU
// (PERF_SAMPLE_TID | TIME | RAW, CLOCK_MONOTONIC), `filter` applied when
// given, each into a ring of `pages` data pages.
StatusOr<std::vector<TracepointRing>> OpenTracepointOnCpus(const std::string& dir,
                                                           const char* filter, size_t pages);

// The first `max` bytes of a file ("" if it cannot be read): /proc and
// cgroup texts can be longer than what a record keeps (cut, not refused).
std::string ReadFilePrefix(const std::string& path, size_t max);

}  // namespace flightrec::recorder
