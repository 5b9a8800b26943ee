// Time bins of labelled samples (what ran, per bin), shared by `recorder
// timeline` (a lane per CPU and per thread) and `recorder crash info` (the
// crashing thread's lane over the attached history), so both draw and
// serialize a timeline the same way.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace flightrec::recorder::cli {

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

}  // namespace flightrec::recorder::cli
