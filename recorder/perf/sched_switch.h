// The sched:sched_switch tracepoint, for off-CPU capture: where tracefs is,
// the tracepoint's id, and the offsets of the fields flightrec reads in its
// raw record (PERF_SAMPLE_RAW), taken from the tracepoint's `format` file
// rather than hard-coded: the layout of struct trace_event_raw_sched_switch
// (include/trace/events/sched.h) has changed across kernels (prev_state was
// an int before 4.14's long, the comm fields have moved).
//
// The tracepoint fires in __schedule (kernel/sched/core.c) before
// context_switch(), in the context of the task switching out: a sample's
// callchain, registers and stack are the blocking task's, `prev_state` is the
// state it blocks in (TASK_INTERRUPTIBLE = S, TASK_UNINTERRUPTIBLE = D, 0 =
// preempted, still runnable) and `next_pid` is the task switching in.
//
// Thread: none of its own.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace flightrec::recorder::perf {

// The task state bits of prev_state that mean "blocked" (include/linux/sched.h
// TASK_INTERRUPTIBLE 0x1, TASK_UNINTERRUPTIBLE 0x2): what off-CPU capture keeps.
inline constexpr uint64_t kTaskInterruptible = 0x1;
inline constexpr uint64_t kTaskUninterruptible = 0x2;

struct SchedSwitchFormat {
  uint32_t id = 0;  // attr.config of a PERF_TYPE_TRACEPOINT event
  struct Field {
    uint32_t offset = 0;
    uint32_t size = 0;
  };
  Field prev_pid, prev_state, next_pid;
  // The fields of one raw record (the bytes after PERF_SAMPLE_RAW's u32
  // size). False when the record is too short for them.
  struct Values {
    uint32_t prev_pid = 0;
    uint64_t prev_state = 0;
    uint32_t next_pid = 0;
  };
  bool Read(std::string_view raw, Values* out) const;
};

// Parses the text of events/sched/sched_switch/format. A missing field, a
// size flightrec cannot read (pids must be 4 bytes, prev_state 4 or 8) or an
// offset past 64 KiB is an error naming the field.
StatusOr<SchedSwitchFormat> ParseSchedSwitchFormat(std::string_view text);

// Another tracepoint's id and the offset and size of one of its fields,
// from its format text (bounded as for sched_switch); an error names what
// is missing.
struct TracepointField {
  uint32_t id = 0;
  SchedSwitchFormat::Field field;
};
StatusOr<TracepointField> ParseTracepointField(std::string_view text, std::string_view name);

// The tracefs mount point: the first tracefs in /proc/self/mounts, else
// tracefs is mounted on /sys/kernel/tracing (as perf's tracefs__mount does,
// tools/lib/api/fs/tracing_path.c); root only.
StatusOr<std::string> TracefsDir();

// TracefsDir() + the tracepoint's format, parsed.
StatusOr<SchedSwitchFormat> LoadSchedSwitchFormat();

}  // namespace flightrec::recorder::perf
