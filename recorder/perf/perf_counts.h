// Reading a perf event's counts (value, times, and with PERF_FORMAT_LOST the
// samples the kernel could not output), shared by the sampling and the
// off-CPU rings of PerfBackend.
//
// Thread: the caller's.
#pragma once

#include <cstdint>

#include "recorder/perf/ring_buffer.h"

namespace flightrec::recorder::perf {

// PERF_FORMAT_LOST (kernel >= 6.0): read() also returns the number of samples
// the kernel could not output (event->lost_samples), e.g. while paused.
inline constexpr uint64_t kFormatLost = 1u << 4;

struct Counts {
  uint64_t value = 0;
  uint64_t enabled = 0;
  uint64_t running = 0;
  uint64_t lost = 0;
};

// read_format = TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING (| LOST).
Counts ReadCounts(int fd, bool with_lost);

// The counts of an event whose output is paused, once they hold still. A
// sample already past the paused check in __perf_output_begin when it was
// paused may still be landing, and read() may interrupt a software event
// between its count update and its output (perf_swevent_event adds to
// event->count before perf_swevent_overflow writes or counts it lost). While
// paused every new period raises count/period and lost_samples together, so
// (count/period - lost) and data_head are stable once nothing is in flight:
// waits (bounded to 300 ms) for them to hold still for 10 ms. The writer runs
// with preemption off, but a virtual CPU can be descheduled by the host in
// the middle of it; 2 ms was seen to be too short on a loaded 2-vCPU VM.
Counts StableCounts(int fd, const PerfRingBuffer& ring, bool with_lost, uint64_t period);

}  // namespace flightrec::recorder::perf
