#include "recorder/cli/panic_info.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include <fmt/format.h>

#include "common/checked_json.h"
#include "common/terminal_escape.h"
#include "common/units.h"
#include "recorder/analysis/replay.h"
#include "recorder/analysis/timeline.h"
#include "recorder/record/sections.h"

namespace flightrec::recorder::cli {
namespace {

using analysis::TimelineBins;
using analysis::TimelineLane;
using analysis::TimelineLegend;
using json::Array;
using json::Get;
using json::Object;
using json::Str;

// The writer's `panic` section is a few KiB per CPU; more is not trusted.
constexpr uint64_t kMaxPanicSectionBytes = 16ull << 20;
constexpr size_t kLastStacks = 3;    // the panicking CPU's last samples shown
constexpr size_t kStackFrames = 24;  // frames shown per stack
constexpr size_t kTopPerCpu = 5;     // functions per CPU in the last second
constexpr uint64_t kLastSecondNs = 1'000'000'000;

std::string Frame(const attribution::Symbol& s) {
  return s.function.empty() ? s.Display() : fmt::format("{} ({})", s.function, s.dso);
}

struct Point {
  uint64_t time_ns;
  uint32_t cpu;
  const std::string* label;
};

}  // namespace

std::vector<std::string> PanicListCells(const std::string& id, int64_t created_ns,
                                        const nlohmann::json& meta) {
  const auto& p = Object(meta, "panic");
  const int64_t t = Get<int64_t>(p, "time_ns", created_ns);
  std::string what = "kernel " + json::RawText(p, "release");
  if (std::string m = json::RawText(p, "message"); !m.empty()) {
    while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
    if (m.size() > 60) m = m.substr(0, 57) + "...";
    what += ": " + m;
  }
  return {id, RecordKindName(RecordKind::kPanic), FormatTimeNs(t), "-", "-", "panic", what, "-",
          id};
}

nlohmann::json PanicListJson(const std::string& id, int64_t created_ns, uint64_t stored_bytes,
                             const nlohmann::json& meta) {
  return {{"kind", RecordKind::kPanic},
          {"id", id},
          {"created_ns", created_ns},
          {"stored_bytes", stored_bytes},
          {"panic", Object(meta, "panic")}};
}

Status PrintPanicInfo(const std::string& id, const store::RecordReader& reader, bool as_json,
                      int bins) {
  nlohmann::json panic = nlohmann::json::object();
  if (reader.FindSection(kSectionPanic)) {
    ASSIGN_OR_RETURN(std::string t, reader.ReadSection(kSectionPanic, kMaxPanicSectionBytes));
    auto j = json::ParseBounded(t);
    if (j.is_object()) panic = std::move(j);
  }
  const uint32_t panic_cpu = Get<uint32_t>(panic, "panic_cpu", UINT32_MAX);
  uint64_t panic_mono = Get<uint64_t>(panic, "panic_time_mono_ns", 0);
  // The panic record (the panicking CPU's stack at panic() entry) is one
  // sample of the record: known by its cpu, time and thread.
  const auto& prec = Object(panic, "panic_record");
  const bool have_prec = prec.contains("time_mono_ns");
  const uint64_t prec_time = Get<uint64_t>(prec, "time_mono_ns", 0);
  const uint32_t prec_tid = Get<uint32_t>(prec, "tid", 0);
  // The timer's newest sample on the panicking CPU (not the panic record).
  uint64_t last_timer_ns = 0;

  // One replay: each sample's innermost function labels the timeline and the
  // top lists; the panicking CPU's last samples keep their whole stacks.
  analysis::ReplayOptions ro;
  ro.progress = false;
  ro.source_lines = false;
  analysis::RecordInfo info;
  std::set<std::string> labels;
  std::vector<Point> points;
  struct Stack {
    uint64_t time_ns;
    uint32_t pid, tid;
    std::string comm;
    std::vector<std::string> frames;
    bool panic_record = false;
  };
  std::vector<Stack> last;  // ring of the panicking CPU's newest samples
  std::string replay_error;
  auto stats = analysis::Replay(
      reader, ro, [&](const analysis::RecordInfo& i) { info = i; },
      [&](const analysis::ResolvedSample& rs) {
        const auto* s = rs.sample;
        auto it = labels.insert(rs.stack.empty() ? "[no frames]" : Frame(*rs.stack[0])).first;
        points.push_back({s->time_ns, s->cpu, &*it});
        if (s->cpu != panic_cpu) return;
        const bool is_prec = have_prec && s->time_ns == prec_time && s->tid == prec_tid;
        if (!is_prec) last_timer_ns = std::max(last_timer_ns, s->time_ns);
        Stack st{s->time_ns, s->pid, s->tid, s->comm, {}, is_prec};
        for (size_t i = 0; i < rs.stack.size() && i < kStackFrames; ++i) {
          st.frames.push_back(Frame(*rs.stack[i]));
        }
        if (rs.stack.size() > kStackFrames) {
          st.frames.push_back(fmt::format("... {} more", rs.stack.size() - kStackFrames));
        }
        // Replay hands samples over in time order: keep the newest few.
        last.push_back(std::move(st));
        if (last.size() > kLastStacks) last.erase(last.begin());
      });
  if (!stats.ok()) replay_error = stats.status().message();
  std::stable_sort(points.begin(), points.end(),
                   [](const Point& a, const Point& b) { return a.time_ns < b.time_ns; });
  // A record without a panic section: its window's end, else its last sample.
  if (panic_mono == 0) panic_mono = info.window_end_ns;
  if (panic_mono == 0 && !points.empty()) panic_mono = points.back().time_ns;

  // Per-CPU lanes over the whole history, the panic at the right edge.
  uint64_t start = points.empty() ? panic_mono : points.front().time_ns;
  uint64_t end = std::max(panic_mono, points.empty() ? 0 : points.back().time_ns) + 1;
  start = std::min(start, end - 1);
  const TimelineBins tb(start, end, bins);
  std::map<uint32_t, TimelineLane> lanes;
  std::map<uint32_t, std::map<std::string, uint64_t>> last_second;
  std::map<uint32_t, uint64_t> last_second_total;
  const uint64_t second_start = panic_mono > kLastSecondNs ? panic_mono - kLastSecondNs : 0;
  for (const auto& p : points) {
    tb.Add(&lanes[p.cpu], p.time_ns, *p.label);
    if (p.time_ns >= second_start && p.time_ns <= panic_mono) {
      ++last_second[p.cpu][*p.label];
      ++last_second_total[p.cpu];
    }
  }
  std::vector<const TimelineLane*> lane_ptrs;
  for (auto& [cpu, lane] : lanes) {
    if (lane.bins.empty()) lane.bins.resize(tb.bins());
    lane_ptrs.push_back(&lane);
  }
  const TimelineLegend legend(lane_ptrs);

  nlohmann::json cpus = nlohmann::json::array();
  for (const auto& [cpu, lane] : lanes) {
    std::vector<std::pair<uint64_t, std::string>> top;
    for (const auto& [f, n] : last_second[cpu]) top.emplace_back(n, f);
    std::sort(top.begin(), top.end(), [](const auto& x, const auto& y) {
      return x.first != y.first ? x.first > y.first : x.second < y.second;
    });
    nlohmann::json tj = nlohmann::json::array();
    const uint64_t total = last_second_total[cpu];
    for (size_t i = 0; i < top.size() && i < kTopPerCpu; ++i) {
      tj.push_back({{"function", top[i].second},
                    {"samples", top[i].first},
                    {"pct", total ? 100.0 * top[i].first / total : 0.0}});
    }
    cpus.push_back({{"cpu", cpu},
                    {"samples", lane.samples},
                    {"panicking", cpu == panic_cpu},
                    {"last_second", {{"samples", total}, {"top", tj}}},
                    {"timeline", {{"lane", tb.LaneJson(lane)}, {"text", legend.LaneText(lane)}}}});
  }
  nlohmann::json stacks = nlohmann::json::array();
  for (const auto& s : last) {
    stacks.push_back({{"time_mono_ns", s.time_ns},
                      {"before_panic_ns", static_cast<int64_t>(panic_mono - s.time_ns)},
                      {"pid", s.pid},
                      {"tid", s.tid},
                      {"comm", s.comm},
                      {"panic_record", s.panic_record},
                      {"frames", s.frames}});
  }
  nlohmann::json legend_json = nlohmann::json::array();
  for (const auto& [label, n] : legend.order()) {
    legend_json.push_back(
        {{"letter", std::string(1, legend.Letter(label))}, {"function", label}, {"samples", n}});
  }

  if (as_json) {
    const int64_t gap = last_timer_ns ? static_cast<int64_t>(panic_mono - last_timer_ns) : 0;
    nlohmann::json pc = {{"cpu", panic_cpu},
                         {"last_samples", stacks},
                         {"last_timer_sample_mono_ns", last_timer_ns},
                         {"last_timer_sample_before_panic_ns", gap}};
    nlohmann::json timeline = {{"bins", tb.bins()},
                               {"bin_ns", static_cast<uint64_t>(tb.width_ns())},
                               {"start_mono_ns", tb.start_ns()},
                               {"end_mono_ns", tb.end_ns()},
                               {"legend", legend_json}};
    nlohmann::json out = {{"id", id},
                          {"kind", RecordKind::kPanic},
                          {"panic", panic},
                          {"samples", points.size()},
                          {"panicking_cpu", std::move(pc)},
                          {"cpus", cpus},
                          {"timeline", std::move(timeline)}};
    if (!replay_error.empty()) out["history_error"] = replay_error;
    std::printf("%s\n", json::Dump(out, 2).c_str());
    return OkStatus();
  }
  // Everything below comes from the record (the crashed kernel's message
  // and release, its programs' names): escaped for the terminal.
  auto E = [](const std::string& s) { return EscapeForTerminal(s); };
  std::string msg = json::RawText(panic, "message");
  while (!msg.empty() && msg.back() == '\n') msg.pop_back();
  std::printf("           ID: %s\n", E(id).c_str());
  std::printf("         Kind: %s\n", E(Str(panic, "reason", "kernel panic")).c_str());
  std::printf("      Message: %s\n", E(msg).c_str());
  // Absent when the crashed boot's clocks give no wall-clock time (Damaged says so).
  std::printf("    Timestamp: %s\n",
              panic.contains("panic_time_ns")
                  ? FormatTimeNs(Get<int64_t>(panic, "panic_time_ns", 0)).c_str()
                  : "unknown");
  std::printf("      Boot ID: %s (the boot that panicked)\n", E(Str(panic, "boot_id")).c_str());
  std::printf("       Kernel: %s\n", E(json::RawText(panic, "release")).c_str());
  std::printf("Kernel frames: %s (%s)\n", E(Str(panic, "kernel_frames")).c_str(),
              E(json::RawText(panic, "kernel_frames_note")).c_str());
  std::printf("    Panic CPU: %u\n", panic_cpu);
  std::printf("  Panics lost: %llu\n",
              static_cast<unsigned long long>(Get<uint64_t>(panic, "panics_lost", 0)));
  uint64_t over = 0, notc = 0;
  for (const auto& c : Array(panic, "cpus")) {
    over += Get<uint64_t>(c, "overwritten", 0);
    notc += Get<uint64_t>(c, "not_copied", 0);
  }
  std::printf(
      "      Samples: %llu held on %zu CPUs (before them: %llu overwritten in the rings, %llu "
      "still in the rings but beyond the region's share)\n",
      static_cast<unsigned long long>(Get<uint64_t>(panic, "samples_held", points.size())),
      Array(panic, "cpus").size(), static_cast<unsigned long long>(over),
      static_cast<unsigned long long>(notc));
  for (const auto& d : Array(panic, "damaged")) {
    std::printf("      Damaged: %s\n", E(d.is_string() ? Str(d) : json::Dump(d)).c_str());
  }
  if (!replay_error.empty()) std::printf("      History: %s\n", E(replay_error).c_str());

  std::printf("\nPanicking CPU %u, its last samples (newest last):\n", panic_cpu);
  if (stacks.empty()) std::printf("  (none held)\n");
  for (const auto& s : last) {
    std::printf("  %.3f ms before the panic: pid %u tid %u (%s)%s\n",
                static_cast<int64_t>(panic_mono - s.time_ns) / 1e6, s.pid, s.tid, E(s.comm).c_str(),
                s.panic_record ? ", the panic record (at panic())" : "");
    for (size_t i = 0; i < s.frames.size(); ++i) {
      std::printf("    #%-2zu %s\n", i, E(s.frames[i]).c_str());
    }
  }
  std::printf(
      "\nTimeline (%d bins of %s per CPU, the panic at the right; letter = what ran "
      "most, . = no sample):\n",
      tb.bins(), FormatDurationNs(static_cast<int64_t>(tb.width_ns())).c_str());
  for (const auto& [cpu, lane] : lanes) {
    std::printf("  cpu %-3u |%s|%s\n", cpu, E(legend.LaneText(lane)).c_str(),
                cpu == panic_cpu ? " (panicked)" : "");
  }
  for (const auto& l : legend_json) {
    std::printf("    %s  %s (%llu)\n", E(Str(l, "letter")).c_str(), E(Str(l, "function")).c_str(),
                static_cast<unsigned long long>(Get<uint64_t>(l, "samples", 0)));
  }
  std::printf("\nTop functions in the last second before the panic:\n");
  for (const auto& c : cpus) {
    std::printf(
        "  cpu %u (%llu samples):\n", Get<uint32_t>(c, "cpu", 0),
        static_cast<unsigned long long>(Get<uint64_t>(Object(c, "last_second"), "samples", 0)));
    for (const auto& t : Array(Object(c, "last_second"), "top")) {
      std::printf("    %6.2f%%  %s\n", Get<double>(t, "pct", 0), E(Str(t, "function")).c_str());
    }
  }
  std::printf("\n(recorder report %s, recorder timeline %s for more)\n", E(id).c_str(),
              E(id).c_str());
  return OkStatus();
}

}  // namespace flightrec::recorder::cli
