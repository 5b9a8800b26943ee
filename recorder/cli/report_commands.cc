// recorder report: top functions (self and children), like `perf report`.
// recorder timeline: what each CPU and each thread ran over the window, as
// text bins. Both are consumers of analysis::Replay, the one pipeline.
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/checked_json.h"
#include "common/terminal_escape.h"
#include "common/units.h"
#include "recorder/analysis/replay.h"
#include "recorder/analysis/report.h"
#include "recorder/analysis/timeline.h"
#include "recorder/cli/cli.h"
#include "recorder/cli/query_args.h"
#include "recorder/record/loss_report.h"

namespace flightrec::recorder::cli {
namespace {

std::string LossLine(const LossReport& loss) {
  if (!loss.present) return "";
  const LossLedger& w = loss.window;
  // Records that measure the loss inside their window say that; older ones
  // (and flightrec.ko's) have only the backend's lifetime counters.
  if (w.Has(LossCounter::kLostInWindow)) {
    return fmt::format(", lost in the window: {} paused, {} overwritten, {} ring-lost",
                       w.Get(LossCounter::kPausedInWindow),
                       w.Get(LossCounter::kOverwrittenInWindow),
                       w.Get(LossCounter::kRingLostInWindow));
  }
  return fmt::format(", lost: {} paused, {} overwritten, {} outside window",
                     w.Get(LossCounter::kPaused), w.Get(LossCounter::kOverwritten),
                     w.Get(LossCounter::kOutsideWindow));
}

// "# DWARF unwinding: ..." lines: how many user stacks were complete, and
// where and why the others stopped. Nothing for records without DWARF stacks.
void PrintUnwindSummary(const unwind::UnwindStats& u) {
  for (const auto& line : unwind::DescribeUnwindStats(u))
    std::printf("# %s\n", EscapeForTerminal(line).c_str());
}

// --------------------------------------------------------------- report

struct ReportArgs : QueryArgs {
  std::string sort = "symbol";
  bool children = false;
  size_t limit = 30;
  bool off_cpu = false;
};

// "# off-CPU: ..." : the off-CPU history's own accounting (loss section,
// key off_cpu): what the kernel produced, what the rings lost, and what the
// record left out (threshold, ends unknown).
std::string OffCpuLossLine(const LossReport& loss) {
  const LossReport::OffCpu off = loss.off_cpu.value_or(LossReport::OffCpu{});
  using enum LossCounter;
  return fmt::format(
      "off-CPU: {} blocking switch-outs ({} in the rings, {} overwritten, {} paused), {} "
      "switch-ins ({} overwritten); {} below the threshold, {} whose end was overwritten",
      off.switch_out.Get(kProduced), off.switch_out.Get(kInRing), off.switch_out.Get(kOverwritten),
      off.switch_out.Get(kPaused), off.switch_in.Get(kProduced), off.switch_in.Get(kOverwritten),
      off.intervals.Get(kBelowThreshold), off.intervals.Get(kEndUnknown));
}

Status ReportOn(const store::RecordReader* reader, const ReportArgs& a) {
  ASSIGN_OR_RETURN(auto opts, a.Options());
  opts.source_lines = false;  // rows are functions
  ASSIGN_OR_RETURN(analysis::ReportKey key, analysis::ParseReportKey(a.sort));
  opts.thread_names = key == analysis::ReportKey::kTid || key == analysis::ReportKey::kComm;
  analysis::ReportBuilder builder(key);
  if (analysis::KeyedByProcess(key)) {
    std::unordered_map<uint32_t, std::string> names;
    for (const auto& [pid, l] : attribution::LabelsByPid(reader->meta())) {
      names[pid] = key == analysis::ReportKey::kUnit        ? l.cgroup.unit
                   : key == analysis::ReportKey::kContainer ? ContainerName(l)
                                                            : l.cgroup.path;
    }
    builder.SetProcessKeys(std::move(names));
  }
  analysis::RecordInfo info;
  opts.off_cpu = a.off_cpu;
  // --off-cpu: only the off-CPU intervals, each weighing its nanoseconds.
  ASSIGN_OR_RETURN(auto stats, a.Replay(
                                   *reader, opts, [&](const analysis::RecordInfo& i) { info = i; },
                                   [&](const analysis::ResolvedSample& rs) {
                                     if (!a.off_cpu) return builder.Add(rs);
                                     if (rs.off_cpu) builder.Add(rs, rs.sample->period);
                                   }));
  if (a.off_cpu && !info.off_cpu) {
    return InvalidArgument(
        fmt::format("record {} has no off-CPU history: it was written without recorderd --off-cpu",
                    EscapeForTerminal(info.id)));
  }
  const analysis::Report report = builder.Finish(a.children);
  const uint64_t total = report.total;
  const auto& changed_files = report.changed_files;
  const auto& missing_files = report.missing_files;
  const std::unordered_set<uint32_t>& sampled_pids = stats.pids;
  std::vector<const analysis::ReportRow*> sorted;
  for (const auto& r : report.rows) sorted.push_back(&r);
  auto pct = [&](uint64_t n) { return total ? 100.0 * static_cast<double>(n) / total : 0.0; };
  if (a.json) {
    nlohmann::json out = {{"id", info.id},
                          {"samples", a.off_cpu ? stats.off_cpu_intervals : total},
                          {"filtered", stats.filtered},
                          {"sort", a.sort},
                          {"files_changed", changed_files},
                          {"files_missing", missing_files},
                          {"files_read", stats.files_opened},
                          {"rows", nlohmann::json::array()}};
    size_t n = 0;
    for (const analysis::ReportRow* r : sorted) {
      if (a.limit && n++ == a.limit) break;
      nlohmann::json j = {{"key", r->key},
                          {"self", r->self},
                          {"children", r->children},
                          {"self_pct", pct(r->self)},
                          {"children_pct", pct(r->children)}};
      if (a.sort == "symbol") {
        j["dso"] = r->dso;
        j["inlined"] = r->inlined;
      }
      out["rows"].push_back(std::move(j));
    }
    out["window_start_mono_ns"] = info.window_start_ns;
    out["freeze_time_mono_ns"] = info.window_end_ns;
    if (a.off_cpu) {
      out["unit"] = "ns";  // self and children are nanoseconds off CPU
      out["off_cpu_ns"] = total;
      out["off_cpu_threshold_ns"] = info.off_cpu_threshold_ns;
    }
    out["loss"] = info.loss;
    out["unwind"] = unwind::UnwindStatsJson(stats.unwind);
    std::printf("%s\n", json::Dump(out, 2).c_str());
    return AllExecutablesGone(reader->meta(), sampled_pids);
  }
  // Ids, file, function and process names come from the record (and the
  // binaries it names): escaped for the terminal. (FormatTable escapes its
  // cells.)
  if (a.off_cpu) {
    std::printf("# record %s: %llu off-CPU intervals of at least %s, %s blocked in all\n",
                EscapeForTerminal(info.id).c_str(),
                static_cast<unsigned long long>(stats.off_cpu_intervals),
                FormatDurationNs(info.off_cpu_threshold_ns).c_str(),
                FormatDurationNs(static_cast<int64_t>(total)).c_str());
    std::printf("# %s\n", OffCpuLossLine(LossReport::FromJson(info.loss)).c_str());
  } else {
    std::printf("# record %s: %llu samples%s\n", EscapeForTerminal(info.id).c_str(),
                static_cast<unsigned long long>(total),
                LossLine(LossReport::FromJson(info.loss)).c_str());
  }
  if (stats.filtered) {
    std::printf(
        "# %llu samples left out by --pid/--tid/--since/--until/--cgroup/--unit/"
        "--container\n",
        static_cast<unsigned long long>(stats.filtered));
  }
  PrintUnwindSummary(stats.unwind);
  for (const auto& f : changed_files) {
    std::printf(
        "# warning: %s changed since the record was made (build-id differs); its samples "
        "are shown as offsets, not attributed to the new file's symbols\n",
        EscapeForTerminal(f).c_str());
  }
  for (const auto& f : missing_files) {
    std::printf("# warning: %s is gone; its samples are shown as file offsets\n",
                EscapeForTerminal(f).c_str());
  }
  std::vector<std::vector<std::string>> table;
  size_t n = 0;
  for (const analysis::ReportRow* r : sorted) {
    if (a.limit && n++ == a.limit) break;
    std::vector<std::string> row = {
        fmt::format("{:6.2f}%", pct(r->self)), fmt::format("{:6.2f}%", pct(r->children)),
        a.off_cpu ? FormatDurationNs(static_cast<int64_t>(r->self)) : std::to_string(r->self),
        r->inlined ? r->key + " (inlined)" : r->key};
    if (a.sort == "symbol") row.push_back(r->dso);
    table.push_back(std::move(row));
  }
  std::vector<std::string> header = {"SELF", "CHILDREN", a.off_cpu ? "OFF-CPU" : "SAMPLES",
                                     a.sort == "symbol" ? "SYMBOL" : a.sort};
  if (a.sort == "symbol") header.push_back("DSO");
  std::fputs(FormatTable(header, table).c_str(), stdout);
  return AllExecutablesGone(reader->meta(), sampled_pids);
}

Status RunReport(const CliContext& ctx, const ReportArgs& a) {
  RETURN_IF_ERROR(analysis::ParseReportKey(a.sort).status());
  RETURN_IF_ERROR(a.Options().status());
  ASSIGN_OR_RETURN(auto reader, ctx.OpenRecord(a.id));
  return ReportOn(reader.get(), a);
}

// ------------------------------------------------------------- timeline

struct TimelineArgs : QueryArgs {
  int bins = 0;  // 0 = fit the terminal (or 40 when not a terminal)
  std::string by = "function";
};

Status TimelineOn(const store::RecordReader* reader, const TimelineArgs& a,
                  analysis::ReplayOptions opts, int bins);

Status RunTimeline(const CliContext& ctx, const TimelineArgs& a) {
  if (a.by != "function" && a.by != "comm") {
    return InvalidArgument("--by must be function or comm");
  }
  ASSIGN_OR_RETURN(auto opts, a.Options());
  opts.source_lines = false;  // bins are labelled by function or comm
  int bins = a.bins;
  if (bins == 0) {
    winsize ws{};
    bins = 40;
    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 60) {
      bins = std::min(100, ws.ws_col - 40);
    }
  }
  if (bins < 1 || bins > 10000) return InvalidArgument("--bins must be between 1 and 10000");
  ASSIGN_OR_RETURN(auto reader, ctx.OpenRecord(a.id));
  return TimelineOn(reader.get(), a, opts, bins);
}

// An off-CPU interval as the timeline bins it.
struct OffSpan {
  uint32_t pid, tid;
  uint64_t t, ns;
  char state;
  bool ongoing;
  std::string comm;
};

// One lane per blocked thread (none before the window is known), for at
// most kMaxOffCpuLanes threads: each lane costs memory per bin, and a
// record may hold 2^22 intervals; the others are counted in *left_out.
constexpr size_t kMaxOffCpuLanes = 4096;
using OffCpuLaneMap = std::map<std::pair<uint32_t, uint32_t>, analysis::OffCpuLane>;
OffCpuLaneMap OffCpuLanes(const analysis::Timeline& timeline, const std::vector<OffSpan>& spans,
                          uint64_t* left_out) {
  OffCpuLaneMap lanes;
  if (timeline.empty) return lanes;
  for (const OffSpan& o : spans) {
    const std::pair<uint32_t, uint32_t> key{o.pid, o.tid};
    if (lanes.size() >= kMaxOffCpuLanes && lanes.count(key) == 0) {
      ++*left_out;
      continue;
    }
    auto& lane = lanes[key];
    lane.comm = o.comm;
    analysis::AddOffCpuSpan(timeline.bins.front(), &lane, o.t, o.ns, o.state, o.ongoing);
  }
  return lanes;
}

nlohmann::json OffCpuJson(const analysis::TimelineBins& tb, const OffCpuLaneMap& lanes) {
  nlohmann::json threads = nlohmann::json::array();
  for (const auto& [key, lane] : lanes) {
    threads.push_back({{"pid", key.first},
                       {"tid", key.second},
                       {"comm", lane.comm},
                       {"off_cpu_ns", lane.off_cpu_ns},
                       {"intervals", lane.intervals},
                       {"spans", lane.spans},
                       {"bins", analysis::OffCpuLaneText(tb, lane)}});
  }
  return threads;
}

void PrintOffCpuLanes(const analysis::TimelineBins& tb, const OffCpuLaneMap& lanes,
                      uint64_t left_out) {
  if (!lanes.empty()) {
    std::printf("\nOFF CPU (S sleeping, D uninterruptible: blocked half the bin or more)\n");
  }
  if (left_out > 0) {
    std::printf("  (%llu intervals of threads past the first %zu left out)\n",
                static_cast<unsigned long long>(left_out), kMaxOffCpuLanes);
  }
  for (const auto& [key, lane] : lanes) {
    std::string title = fmt::format("{} {}/{}", lane.comm, key.first, key.second);
    if (title.size() > 24) title = title.substr(0, 24);
    std::printf("  %-24s |%s| %s\n", EscapeForTerminal(title).c_str(),
                analysis::OffCpuLaneText(tb, lane).c_str(),
                FormatDurationNs(static_cast<int64_t>(lane.off_cpu_ns)).c_str());
  }
}

Status TimelineOn(const store::RecordReader* reader, const TimelineArgs& a,
                  analysis::ReplayOptions opts, int bins) {
  analysis::RecordInfo info;
  // Samples are buffered as (time, cpu, thread, label) so the window can be
  // taken from the samples when the record does not state it.
  std::vector<analysis::TimelinePoint> points;
  std::set<std::string> labels;
  std::map<std::pair<uint32_t, uint32_t>, std::string> comm_of;
  // Off-CPU intervals (records of recorderd --off-cpu), binned once the
  // window is known.
  std::vector<OffSpan> off_spans;
  opts.off_cpu = true;
  ASSIGN_OR_RETURN(auto stats,
                   a.Replay(
                       *reader, opts, [&](const analysis::RecordInfo& i) { info = i; },
                       [&](const analysis::ResolvedSample& rs) {
                         const auto& s = *rs.sample;
                         if (rs.off_cpu != nullptr) {
                           off_spans.push_back({s.pid, s.tid, s.time_ns, s.period,
                                                rs.off_cpu->state, rs.off_cpu->ongoing, s.comm});
                           return;
                         }
                         std::string label;
                         if (a.by == "comm") {
                           label = s.comm.empty() ? std::to_string(s.pid) : s.comm;
                         } else {
                           label = rs.stack.empty() ? "[no frames]" : rs.stack[0]->Display();
                         }
                         auto it = labels.insert(std::move(label)).first;
                         comm_of[{s.pid, s.tid}] = s.comm;
                         points.push_back({s.time_ns, s.cpu, s.pid, s.tid, &*it});
                       }));
  const analysis::Timeline timeline =
      analysis::BuildTimeline(points, info.window_start_ns, info.window_end_ns, opts.since_ns,
                              opts.until_ns, bins, !off_spans.empty());
  uint64_t off_left_out = 0;
  const auto off_lanes = OffCpuLanes(timeline, off_spans, &off_left_out);
  const uint64_t start = timeline.start_ns, end = timeline.end_ns;
  if (timeline.empty) {
    if (a.json) {
      std::printf("%s\n", nlohmann::json{{"id", info.id},
                                         {"samples", 0},
                                         {"cpus", nlohmann::json::array()},
                                         {"threads", nlohmann::json::array()},
                                         {"unwind", unwind::UnwindStatsJson(stats.unwind)}}
                              .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
                              .c_str());
    } else {
      std::printf("# record %s: no samples in the selected window\n",
                  EscapeForTerminal(info.id).c_str());
      PrintUnwindSummary(stats.unwind);
    }
    return OkStatus();
  }
  const analysis::TimelineBins& tb = timeline.bins.front();
  const auto& cpus = timeline.cpus;
  const auto& threads = timeline.threads;
  if (a.json) {
    nlohmann::json out = {{"id", info.id},
                          {"start_mono_ns", start},
                          {"end_mono_ns", end},
                          {"mono_to_wall_ns", info.mono_to_wall_ns},
                          {"bins", bins},
                          {"by", a.by},
                          {"cpus", nlohmann::json::array()},
                          {"threads", nlohmann::json::array()},
                          {"unwind", unwind::UnwindStatsJson(stats.unwind)}};
    for (const auto& [cpu, lane] : cpus) {
      out["cpus"].push_back({{"cpu", cpu}, {"samples", lane.samples}, {"bins", tb.LaneJson(lane)}});
    }
    for (const auto& [key, lane] : threads) {
      out["threads"].push_back({{"pid", key.first},
                                {"tid", key.second},
                                {"comm", comm_of[key]},
                                {"samples", lane.samples},
                                {"bins", tb.LaneJson(lane)}});
    }
    out["off_cpu"] = info.off_cpu;
    out["off_cpu_threads"] = OffCpuJson(tb, off_lanes);
    out["off_cpu_intervals_left_out"] = off_left_out;
    std::printf("%s\n", json::Dump(out, 2).c_str());
    return AllExecutablesGone(reader->meta(), stats.pids);
  }
  // Text: one character per bin, a letter per label (most samples first), '.'
  // for a bin without samples; the legend maps letters to labels.
  std::vector<const analysis::TimelineLane*> every;  // each sample once: the CPU lanes
  for (const auto& [cpu, lane] : cpus) every.push_back(&lane);
  const analysis::TimelineLegend legend(every);
  auto lane_text = [&](const analysis::TimelineLane& lane) { return legend.LaneText(lane); };
  const double width = tb.width_ns();
  std::printf("# record %s: %.3f s from %s, %d bins of %s, by %s\n",
              EscapeForTerminal(info.id).c_str(), (end - start) / 1e9,
              FormatTimeNs(static_cast<int64_t>(start) + info.mono_to_wall_ns).c_str(), bins,
              FormatDurationNs(static_cast<int64_t>(width)).c_str(), a.by.c_str());
  PrintUnwindSummary(stats.unwind);
  std::printf("\nCPU\n");
  for (const auto& [cpu, lane] : cpus) {
    std::printf("  %-24s |%s| %llu\n", fmt::format("cpu {}", cpu).c_str(), lane_text(lane).c_str(),
                static_cast<unsigned long long>(lane.samples));
  }
  std::printf("\nTHREAD\n");
  for (const auto& [key, lane] : threads) {
    // Cut before escaping, so an escape sequence is never cut in half.
    std::string title = fmt::format("{} {}/{}", comm_of[key], key.first, key.second);
    if (title.size() > 24) title = title.substr(0, 24);
    title = EscapeForTerminal(title);
    std::printf("  %-24s |%s| %llu\n", title.c_str(), lane_text(lane).c_str(),
                static_cast<unsigned long long>(lane.samples));
  }
  PrintOffCpuLanes(tb, off_lanes, off_left_out);
  std::printf("\nLEGEND (letter = what ran most in the bin)\n");
  for (const auto& [label, n] : legend.order()) {
    std::printf("  %c  %s  (%llu samples)\n", legend.Letter(label),
                EscapeForTerminal(label).c_str(), static_cast<unsigned long long>(n));
  }
  return AllExecutablesGone(reader->meta(), stats.pids);
}

}  // namespace

Status ExerciseReportCommands(const store::RecordReader& reader, int pick) {
  Status first;
  // 12 report variants, 2 of report --off-cpu, then 4 timeline ones.
  constexpr int kVariants = 18;
  int variant = 0;
  auto wanted = [&] { return pick < 0 || variant++ == pick % kVariants; };
  auto keep = [&](Status st) {
    if (first.ok() && !st.ok()) first = st;
  };
  for (const char* sort : {"symbol", "dso", "pid", "tid", "comm", "container"}) {
    for (bool json : {false, true}) {
      if (!wanted()) continue;
      ReportArgs a;
      a.sort = sort;
      a.json = json;
      a.children = json;
      a.progress = false;
      keep(ReportOn(&reader, a));
    }
  }
  for (bool json : {false, true}) {
    if (!wanted()) continue;
    ReportArgs a;
    a.off_cpu = true;
    a.sort = json ? "tid" : "symbol";
    a.json = json;
    a.progress = false;
    keep(ReportOn(&reader, a));
  }
  for (const char* by : {"function", "comm"}) {
    for (bool json : {false, true}) {
      if (!wanted()) continue;
      TimelineArgs a;
      a.by = by;
      a.json = json;
      a.progress = false;
      keep(TimelineOn(&reader, a, *a.Options(), 16));
    }
  }
  return first;
}

void AddReportCommands(CLI::App& app, CliContext& ctx) {
  auto ra = std::make_shared<ReportArgs>();
  auto* report = app.add_subcommand(
      "report", "Top functions of a record with self and children percentages, like `perf report`");
  ra->Register(report);
  report
      ->add_option("--sort", ra->sort,
                   "symbol, dso, pid, tid, comm, or where the process ran: unit (systemd), "
                   "container (runtime://id), cgroup")
      ->capture_default_str();
  report->add_option("--limit", ra->limit, "Rows to print (0: all)")->capture_default_str();
  report->add_flag("--children", ra->children,
                   "Sort by inclusive share (samples with the function anywhere on the stack)");
  report->add_flag("--off-cpu", ra->off_cpu,
                   "Rank stacks by time blocked off CPU instead of on-CPU samples: each blocked "
                   "interval (recorderd --off-cpu) weighs the nanoseconds from its switch-out to "
                   "its switch-in, or to the dump if the thread never ran again");
  report->callback([&ctx, ra] { ctx.action = [&ctx, ra] { return RunReport(ctx, *ra); }; });

  auto ta = std::make_shared<TimelineArgs>();
  auto* timeline = app.add_subcommand(
      "timeline", "What each CPU and each thread ran over the record's window, as text bins");
  ta->Register(timeline);
  timeline->add_option("--bins", ta->bins, "Number of time bins (default: fit the terminal)");
  timeline->add_option("--by", ta->by, "Label bins by function or comm")->capture_default_str();
  timeline->callback([&ctx, ta] { ctx.action = [&ctx, ta] { return RunTimeline(ctx, *ta); }; });
}

}  // namespace flightrec::recorder::cli
