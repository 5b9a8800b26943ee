// The crashing thread's last seconds, from the history record linked to a
// crash: top functions, its last samples, and a timeline over the record's
// window (the same bins as `recorder timeline`). `recorder crash info` prints
// it; the JSON is its --json "history" object.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "store/record_file.h"

namespace flightrec::recorder::analysis {

// The aggregation alone, on (time, innermost function) points of one thread:
// "samples", "top" (10 functions, most first), "last" (10 latest samples),
// "span_s", "first_ns", "last_ns", "window_start_ns", "window_end_ns",
// "window_s" and "timeline" ({bins, bin_ns, lane, text, legend}). The window
// is [window_start_ns, window_end_ns) when the record states one, else the
// points' own span.
nlohmann::json SummarizeThreadHistory(std::vector<std::pair<uint64_t, std::string>> points,
                                      uint64_t window_start_ns, uint64_t window_end_ns, int bins);

// Replays `hreader` (record `hid`) for the crashed thread named by `crash`
// (the crash record's "crash" metadata: pid, and global_tid, the %I that
// samples carry, else tid) and summarizes it, adding "id", "tid", "comm" (the
// thread's name at its last sample), "source" (crash marker or live rings)
// and "end_mono_ns".
StatusOr<nlohmann::json> CrashHistory(const store::RecordReader& hreader,
                                      const nlohmann::json& crash, const std::string& hid,
                                      int bins);

}  // namespace flightrec::recorder::analysis
