#include "recorder/unwind/unwind_stats.h"

#include <algorithm>

#include <fmt/format.h>

namespace flightrec::recorder::unwind {
namespace {

// The stops, most samples first (then by status and place, for stable output).
std::vector<std::pair<const std::pair<std::string, std::string>*, uint64_t>> Sorted(
    const UnwindStats& s) {
  std::vector<std::pair<const std::pair<std::string, std::string>*, uint64_t>> v;
  for (const auto& [k, n] : s.stops) v.emplace_back(&k, n);
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : *a.first < *b.first;
  });
  return v;
}

std::string Reason(const std::string& status) {
  if (status == "truncated") return "truncated";
  if (status == "missing_file") return "missing file";
  if (status == "no_unwind_info") return "no unwind info";
  return "unwind error";
}

}  // namespace

std::vector<std::string> DescribeUnwindStats(const UnwindStats& s, size_t max_places) {
  std::vector<std::string> lines;
  if (s.samples == 0) return lines;
  std::string line =
      fmt::format("DWARF unwinding: {} of {} user stacks complete", s.complete, s.samples);
  if (s.incomplete() > 0) {
    std::vector<std::string> parts;
    auto part = [&](uint64_t n, const char* what) {
      if (n) parts.push_back(fmt::format("{} {}", n, what));
    };
    part(s.truncated, "truncated (stack copy too short)");
    part(s.missing_file, "missing file");
    part(s.no_unwind_info, "no unwind info");
    part(s.errors, "unwind error");
    line += "; incomplete: ";
    for (size_t i = 0; i < parts.size(); ++i) line += (i ? ", " : "") + parts[i];
  }
  lines.push_back(std::move(line));
  auto sorted = Sorted(s);
  for (size_t i = 0; i < sorted.size() && i < max_places; ++i) {
    lines.push_back(fmt::format("  {} samples stopped: {} at {}", sorted[i].second,
                                Reason(sorted[i].first->first), sorted[i].first->second));
  }
  if (sorted.size() > max_places) {
    uint64_t rest = 0;
    for (size_t i = max_places; i < sorted.size(); ++i) rest += sorted[i].second;
    lines.push_back(
        fmt::format("  {} samples stopped at {} other places", rest, sorted.size() - max_places));
  }
  return lines;
}

nlohmann::json UnwindStatsJson(const UnwindStats& s) {
  nlohmann::json stops = nlohmann::json::array();
  for (const auto& [k, n] : Sorted(s)) {
    stops.push_back({{"status", k->first}, {"place", k->second}, {"samples", n}});
  }
  return {{"stacks", s.samples},
          {"complete", s.complete},
          {"truncated", s.truncated},
          {"missing_file", s.missing_file},
          {"no_unwind_info", s.no_unwind_info},
          {"error", s.errors},
          {"stops", std::move(stops)}};
}

}  // namespace flightrec::recorder::unwind
