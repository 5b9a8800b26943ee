#include "recorder/analysis/timeline.h"

#include <algorithm>

namespace flightrec::recorder::analysis {

TimelineBins::TimelineBins(uint64_t start_ns, uint64_t end_ns, int bins)
    : start_(start_ns),
      end_(std::max(end_ns, start_ns + 1)),
      bins_(std::max(bins, 1)),
      width_(static_cast<double>(end_ - start_) / bins_) {}

bool TimelineBins::Add(TimelineLane* lane, uint64_t t, const std::string& label) const {
  if (t < start_ || t >= end_) return false;
  size_t b = std::min<size_t>(static_cast<size_t>((t - start_) / width_), bins_ - 1);
  if (lane->bins.empty()) lane->bins.resize(bins_);
  lane->bins[b][label]++;
  lane->samples++;
  return true;
}

void AddOffCpuSpan(const TimelineBins& tb, OffCpuLane* lane, uint64_t t, uint64_t ns, char state,
                   bool ongoing) {
  const size_t n = static_cast<size_t>(tb.bins());
  if (lane->part_s.empty()) {
    lane->part_s.assign(n, 0);
    lane->part_d.assign(n, 0);
    lane->whole_s.assign(n + 1, 0);
    lane->whole_d.assign(n + 1, 0);
  }
  lane->off_cpu_ns += ns;
  if (lane->intervals++ < OffCpuLane::kMaxSpans) {
    lane->spans.push_back(
        {{"start_mono_ns", t}, {"ns", ns}, {"state", std::string(1, state)}, {"ongoing", ongoing}});
  }
  const uint64_t a = std::max(t, tb.start_ns());
  const uint64_t b = std::min(ns > UINT64_MAX - t ? UINT64_MAX : t + ns, tb.end_ns());
  if (a >= b) return;
  auto& part = state == 'D' ? lane->part_d : lane->part_s;
  auto& whole = state == 'D' ? lane->whole_d : lane->whole_s;
  const double w = tb.width_ns();
  auto bin_of = [&](uint64_t x) {
    return std::min<size_t>(static_cast<size_t>((x - tb.start_ns()) / w), n - 1);
  };
  const size_t first = bin_of(a), last = bin_of(b - 1);
  auto bin_start = [&](size_t i) { return tb.start_ns() + i * w; };
  if (first == last) {
    part[first] += static_cast<double>(b - a);
    return;
  }
  part[first] += bin_start(first + 1) - static_cast<double>(a);
  part[last] += static_cast<double>(b) - bin_start(last);
  ++whole[first + 1];  // bins first+1 .. last-1 whole
  --whole[last];
}

std::string OffCpuLaneText(const TimelineBins& tb, const OffCpuLane& lane) {
  const size_t n = static_cast<size_t>(tb.bins());
  std::string text(n, '.');
  if (lane.part_s.empty()) return text;
  const double w = tb.width_ns();
  int64_t ws = 0, wd = 0;
  for (size_t i = 0; i < n; ++i) {
    ws += lane.whole_s[i];
    wd += lane.whole_d[i];
    const double s = lane.part_s[i] + static_cast<double>(ws) * w;
    const double d = lane.part_d[i] + static_cast<double>(wd) * w;
    if (s + d >= w / 2) text[i] = d > s ? 'D' : 'S';
  }
  return text;
}

nlohmann::json TimelineBins::LaneJson(const TimelineLane& lane) const {
  nlohmann::json bj = nlohmann::json::array();
  for (int b = 0; b < bins_; ++b) {
    nlohmann::json counts = nlohmann::json::object();
    std::string top;
    if (static_cast<size_t>(b) < lane.bins.size()) {
      for (const auto& [k, v] : lane.bins[b]) counts[k] = v;
      top = TopLabel(lane.bins[b]).first;
    }
    bj.push_back({{"start_ns", start_ + static_cast<uint64_t>(b * width_)},
                  {"end_ns", start_ + static_cast<uint64_t>((b + 1) * width_)},
                  {"top", top},
                  {"counts", counts}});
  }
  return bj;
}

std::pair<std::string, uint64_t> TopLabel(const std::map<std::string, uint64_t>& bin) {
  std::pair<std::string, uint64_t> best{"", 0};
  for (const auto& [k, v] : bin) {
    if (v > best.second) best = {k, v};
  }
  return best;
}

TimelineLegend::TimelineLegend(const std::vector<const TimelineLane*>& lanes) {
  std::map<std::string, uint64_t> total;
  for (const TimelineLane* lane : lanes) {
    for (const auto& b : lane->bins) {
      for (const auto& [k, v] : b) total[k] += v;
    }
  }
  order_.assign(total.begin(), total.end());
  std::sort(order_.begin(), order_.end(), [](const auto& x, const auto& y) {
    return x.second != y.second ? x.second > y.second : x.first < y.first;
  });
  static const std::string kLetters =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  for (size_t i = 0; i < order_.size(); ++i) {
    letter_[order_[i].first] = i < kLetters.size() ? kLetters[i] : '*';
  }
}

char TimelineLegend::Letter(const std::string& label) const {
  auto it = letter_.find(label);
  return it == letter_.end() ? '?' : it->second;
}

std::string TimelineLegend::LaneText(const TimelineLane& lane) const {
  std::string s;
  for (const auto& b : lane.bins) s += b.empty() ? '.' : Letter(TopLabel(b).first);
  return s;
}

Timeline BuildTimeline(const std::vector<TimelinePoint>& points, uint64_t window_start_ns,
                       uint64_t window_end_ns, std::optional<int64_t> since_ns,
                       std::optional<int64_t> until_ns, int bins, bool bins_without_points) {
  Timeline out;
  uint64_t start = window_start_ns, end = window_end_ns;
  if (start == 0 || end <= start) {
    start = UINT64_MAX;
    end = 0;
    for (const auto& p : points) {
      start = std::min(start, p.t);
      end = std::max(end, p.t + 1);
    }
  }
  if (since_ns) start = window_start_ns + static_cast<uint64_t>(*since_ns);
  if (until_ns) end = std::min(end, window_start_ns + static_cast<uint64_t>(*until_ns));
  out.start_ns = start;
  out.end_ns = end;
  if ((points.empty() && !bins_without_points) || end <= start || start == UINT64_MAX) return out;
  out.empty = false;
  const TimelineBins& tb = out.bins.emplace_back(start, end, bins);
  for (const auto& p : points) {
    if (tb.Add(&out.cpus[p.cpu], p.t, *p.label))
      tb.Add(&out.threads[{p.pid, p.tid}], p.t, *p.label);
  }
  std::erase_if(out.cpus, [](const auto& kv) { return kv.second.samples == 0; });
  std::erase_if(out.threads, [](const auto& kv) { return kv.second.samples == 0; });
  return out;
}

}  // namespace flightrec::recorder::analysis
