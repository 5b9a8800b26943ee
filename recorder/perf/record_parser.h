// ParsePerfRecord: one perf ring record → one model event.
//
// Layouts from include/uapi/linux/perf_event.h (enum perf_event_type). Every
// length is checked against the record's size: a record is parsed from the
// kernel's ring, but a dump may hold a torn record and we must never read
// past it.
#pragma once

#include <linux/perf_event.h>

#include <optional>
#include <string_view>

#include "recorder/model/events.h"

namespace flightrec::recorder::perf {

// The sample_type every flightrec sampling event uses; sideband events use
// kSampleIdType for their sample_id_all trailer (and so do sampling events,
// since the trailer holds only TID, TIME and CPU bits in that order).
inline constexpr uint64_t kSampleType = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                                        PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD |
                                        PERF_SAMPLE_CALLCHAIN;
inline constexpr uint64_t kSampleTypeNoChain = kSampleType & ~uint64_t{PERF_SAMPLE_CALLCHAIN};
inline constexpr uint64_t kSideSampleType = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU;

struct ParseResult {
  std::optional<Event> event;  // empty for record types we do not use
  bool malformed = false;
  uint32_t type = 0;
};

// sample_type must be kSampleType, kSampleTypeNoChain or kSideSampleType.
ParseResult ParsePerfRecord(std::string_view rec, uint64_t sample_type, uint32_t cpu_hint);

}  // namespace flightrec::recorder::perf
