// Time bins of labelled samples (what ran, per bin), shared by `recorder
// timeline` (a lane per CPU and per thread) and `recorder crash info` (the
// crashing thread's lane over the attached history), so both draw and
// serialize a timeline the same way.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace flightrec::recorder::analysis {

// One row of a timeline: for each bin, how often each label ran.
struct TimelineLane {
  std::vector<std::map<std::string, uint64_t>> bins;
  uint64_t samples = 0;
};

// `bins` equal bins over [start_ns, end_ns) (CLOCK_MONOTONIC ns).
class TimelineBins {
 public:
  TimelineBins(uint64_t start_ns, uint64_t end_ns, int bins);

  // Counts one sample at t in `lane`; false (not counted) outside the window.
  bool Add(TimelineLane* lane, uint64_t t, const std::string& label) const;
  // [{start_ns, end_ns, top, counts{label: n}}] per bin.
  nlohmann::json LaneJson(const TimelineLane& lane) const;

  int bins() const { return bins_; }
  uint64_t start_ns() const { return start_; }
  uint64_t end_ns() const { return end_; }
  double width_ns() const { return width_; }

 private:
  uint64_t start_, end_;
  int bins_;
  double width_;
};

// One thread's off-CPU spans over a timeline (records of recorderd
// --off-cpu): its blocked time per bin, in S and in D, and the spans
// themselves (the first kMaxSpans).
struct OffCpuLane {
  static constexpr size_t kMaxSpans = 1000;
  std::string comm;
  uint64_t off_cpu_ns = 0;  // whole intervals, as report --off-cpu counts them
  uint64_t intervals = 0;
  nlohmann::json spans = nlohmann::json::array();
  // Per bin: partial coverage in ns, and whole bins in difference form (so
  // that a span costs O(1) whatever it covers).
  std::vector<double> part_s, part_d;
  std::vector<int64_t> whole_s, whole_d;
};
// Adds the interval [t, t + ns) in state 'S' or 'D' to `lane`.
void AddOffCpuSpan(const TimelineBins& tb, OffCpuLane* lane, uint64_t t, uint64_t ns, char state,
                   bool ongoing);
// A character per bin: 'S' or 'D' where the thread was off CPU at least half
// the bin (the state it spent longer in), '.' elsewhere.
std::string OffCpuLaneText(const TimelineBins& tb, const OffCpuLane& lane);

// The label with most samples in a bin (ties: the first in label order).
std::pair<std::string, uint64_t> TopLabel(const std::map<std::string, uint64_t>& bin);

// Text form: one character per bin, the letter of the label that ran most
// in it ('.' for an empty bin); letters go to labels by total samples over
// the given lanes, most first.
class TimelineLegend {
 public:
  explicit TimelineLegend(const std::vector<const TimelineLane*>& lanes);
  std::string LaneText(const TimelineLane& lane) const;
  // (label, samples), most samples first: the legend's rows.
  const std::vector<std::pair<std::string, uint64_t>>& order() const { return order_; }
  char Letter(const std::string& label) const;

 private:
  std::vector<std::pair<std::string, uint64_t>> order_;
  std::map<std::string, char> letter_;
};

// `recorder timeline`'s aggregation: samples as (time, cpu, thread, label)
// into one lane per CPU and one per thread over a window: the record's
// stated window (else the samples' span), cut to [since, until) (offsets from
// the window start). Lanes without a sample in the window are left out.
struct TimelinePoint {
  uint64_t t;
  uint32_t cpu;
  uint32_t pid, tid;
  const std::string* label;  // owned by the caller (one string per label)
};
struct Timeline {
  uint64_t start_ns = 0, end_ns = 0;
  bool empty = true;               // no points, or an empty window: no bins
  std::vector<TimelineBins> bins;  // one element unless empty
  std::map<uint32_t, TimelineLane> cpus;
  std::map<std::pair<uint32_t, uint32_t>, TimelineLane> threads;
};
// bins_without_points: bins over the record's window even without a point
// (a record whose threads were all off CPU).
Timeline BuildTimeline(const std::vector<TimelinePoint>& points, uint64_t window_start_ns,
                       uint64_t window_end_ns, std::optional<int64_t> since_ns,
                       std::optional<int64_t> until_ns, int bins, bool bins_without_points = false);

}  // namespace flightrec::recorder::analysis
