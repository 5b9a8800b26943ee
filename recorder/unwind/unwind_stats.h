// What DWARF unwinding of a record's user stacks achieved, and where and why
// the incomplete ones stopped: counted by the unwinder, carried to consumers
// in analysis::ReplayStats, printed by report, timeline and export.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace flightrec::recorder::unwind {

struct UnwindStats {
  uint64_t samples = 0;  // samples whose user stack was unwound from a DWARF copy
  uint64_t frames = 0;
  uint64_t complete = 0;        // reached the outermost frame (_start, clone)
  uint64_t truncated = 0;       // the stack copy (or the frame limit) ended first
  uint64_t missing_file = 0;    // a frame's file is gone, rebuilt, or anonymous ([vdso], JIT)
  uint64_t no_unwind_info = 0;  // a frame's file has no CFI for it
  uint64_t errors = 0;          // anything else (unmapped address, bad CFI)
  // Complete stacks whose every frame had a simple rule kept from earlier
  // samples (dwarf_unwinder.cc FastWalk; the rest went through libunwind).
  // Not printed: how, not what.
  uint64_t fast = 0;
  // Where incomplete stacks stopped, by (status, place). A place is coarse so
  // that it aggregates: "stack copy of 8192 bytes", a file's path, "[vdso]".
  std::map<std::pair<std::string, std::string>, uint64_t> stops;

  uint64_t incomplete() const { return truncated + missing_file + no_unwind_info + errors; }
};

// Text for reports, one line each without a leading "# ": a summary, then
// the `max_places` places where most stacks stopped. Empty when no sample
// carried a DWARF stack copy.
std::vector<std::string> DescribeUnwindStats(const UnwindStats& s, size_t max_places = 5);

// {"stacks", "complete", "truncated", "missing_file", "no_unwind_info",
// "error", "stops": [{"status", "place", "samples"}...]} (most samples first).
nlohmann::json UnwindStatsJson(const UnwindStats& s);

}  // namespace flightrec::recorder::unwind
