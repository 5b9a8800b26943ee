#include "recorder/analysis/crash_history.h"

#include <algorithm>
#include <map>

#include "common/checked_json.h"
#include "recorder/analysis/lock_graph.h"
#include "recorder/analysis/replay.h"
#include "recorder/analysis/timeline.h"
#include "recorder/record/lock_waits_section.h"

namespace flightrec::recorder::analysis {

nlohmann::json SummarizeThreadHistory(std::vector<std::pair<uint64_t, std::string>> points,
                                      uint64_t window_start_ns, uint64_t window_end_ns, int bins) {
  std::sort(points.begin(), points.end());
  std::map<std::string, uint64_t> top;
  for (const auto& [t, f] : points) ++top[f];
  const uint64_t total = points.size();
  const uint64_t first = total ? points.front().first : 0, last = total ? points.back().first : 0;
  std::vector<std::pair<uint64_t, std::string>> sorted;
  for (const auto& [f, n] : top) sorted.emplace_back(n, f);
  std::sort(sorted.begin(), sorted.end(), [](const auto& x, const auto& y) {
    return x.first != y.first ? x.first > y.first : x.second < y.second;
  });
  nlohmann::json tj = nlohmann::json::array();
  for (size_t i = 0; i < sorted.size() && i < 10; ++i) {
    tj.push_back({{"function", sorted[i].second},
                  {"samples", sorted[i].first},
                  {"pct", total ? 100.0 * sorted[i].first / total : 0}});
  }
  nlohmann::json lj = nlohmann::json::array();
  for (size_t i = total > 10 ? total - 10 : 0; i < total; ++i) {
    lj.push_back({{"time_ns", points[i].first}, {"function", points[i].second}});
  }
  // The window the daemon froze (the last N seconds before it was asked);
  // the samples' own span when the record does not say.
  uint64_t start = window_start_ns, end = window_end_ns;
  if (start == 0 || end <= start) {
    start = first;
    end = last + 1;
  }
  const TimelineBins tb(start, end, bins);
  TimelineLane lane;
  for (const auto& [t, label] : points) tb.Add(&lane, t, label);
  if (lane.bins.empty()) lane.bins.resize(tb.bins());
  const TimelineLegend legend({&lane});
  nlohmann::json legend_json = nlohmann::json::array();
  for (const auto& [label, n] : legend.order()) {
    legend_json.push_back(
        {{"letter", std::string(1, legend.Letter(label))}, {"function", label}, {"samples", n}});
  }
  return nlohmann::json{{"samples", total},
                        {"top", tj},
                        {"last", lj},
                        {"span_s", total ? (last - first) / 1e9 : 0.0},
                        {"first_ns", first},
                        {"last_ns", last},
                        {"window_start_ns", start},
                        {"window_end_ns", end},
                        {"window_s", (end - start) / 1e9},
                        {"timeline",
                         {{"bins", tb.bins()},
                          {"bin_ns", static_cast<uint64_t>(tb.width_ns())},
                          {"lane", tb.LaneJson(lane)},
                          {"text", legend.LaneText(lane)},
                          {"legend", legend_json}}}};
}

namespace {

// A sample's user frames, innermost first, up to the first of the program's
// own (a blocked stack is the scheduler's, then libc's; a fault's may be in
// libc's memset), at most 8; else its innermost frame.
std::string UserFrames(const ResolvedSample& rs) {
  std::string out;
  size_t shown = 0;
  for (const auto* f : rs.stack) {
    if (f->dso.rfind("[kernel", 0) == 0) continue;
    out += (shown ? " <- " : "") + f->Display();
    if (++shown == 8 || (rs.process_exe != nullptr && f->dso == *rs.process_exe)) break;
  }
  if (out.empty()) out = rs.stack.empty() ? "[no frames]" : rs.stack.front()->Display();
  return out;
}

}  // namespace

void ThreadActivity::Add(const ResolvedSample& rs) {
  const auto& s = *rs.sample;
  Thread& t = threads_[s.tid];
  if (!s.comm.empty()) t.comm = s.comm;
  if (rs.off_cpu == nullptr) {
    ++t.samples;
    t.last_on_cpu_ns = std::max(t.last_on_cpu_ns, s.time_ns);
    return;
  }
  t.off_cpu_ns += s.period;
  ++t.intervals;
  if (s.period < t.longest_ns) return;
  t.longest_ns = s.period;
  t.longest_state = rs.off_cpu->state;
  t.blocked_at_end = rs.off_cpu->ongoing;
  // Where it waited: its user frames, innermost first, up to the first of
  // the program's own (a blocked stack is the scheduler's, then libc's).
  t.blocked_in = UserFrames(rs);
}

nlohmann::json ThreadActivity::ToJson() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [tid, t] : threads_) {
    nlohmann::json j = {{"tid", tid},
                        {"comm", t.comm},
                        {"samples", t.samples},
                        {"off_cpu_ns", t.off_cpu_ns},
                        {"off_cpu_intervals", t.intervals}};
    if (t.intervals > 0) {
      j.update({{"longest_off_cpu_ns", t.longest_ns},
                {"longest_state", std::string(1, t.longest_state)},
                {"blocked_at_end", t.blocked_at_end},
                {"blocked_in", t.blocked_in}});
    }
    out.push_back(std::move(j));
  }
  return out;
}

std::map<uint32_t, std::string> ThreadActivity::Comms() const {
  std::map<uint32_t, std::string> out;
  for (const auto& [tid, t] : threads_) out[tid] = t.comm;
  return out;
}

uint64_t ThreadActivity::LastOnCpuNs(uint32_t tid) const {
  auto it = threads_.find(tid);
  return it == threads_.end() ? 0 : it->second.last_on_cpu_ns;
}

namespace {

// A thread that ran (was sampled on a CPU) this long after its wait ended
// had the mutex, or gave up: dying takes microseconds.
constexpr uint64_t kRanAfterWaitNs = 10'000'000;

// The wait-for graph of pid's threads still waiting at the end of the record
// (a wait that ended, then nothing: the thread woke only to die).
void AddLocks(const store::RecordReader& hreader, uint32_t pid, const ThreadActivity& threads,
              nlohmann::json* out) {
  auto waits = LoadLockWaits(hreader);
  if (!waits.ok()) {
    (*out)["locks_error"] = waits.status().message();
    return;
  }
  std::vector<LockEdge> edges;
  for (const RecordedLockWait& w : *waits) {
    if (w.pid != pid) continue;
    if (w.end_ns != 0 && threads.LastOnCpuNs(w.tid) > w.end_ns + kRanAfterWaitNs) continue;
    edges.push_back({w.tid, w.mutex, w.owner, w.owner_in_process});
  }
  (*out)["locks"] = LockGraph(edges, threads.Comms());
}

}  // namespace

StatusOr<nlohmann::json> CrashHistory(const store::RecordReader& hreader,
                                      const nlohmann::json& crash, const std::string& hid,
                                      int bins) {
  ReplayOptions ro;
  ro.pid = json::Get<uint32_t>(crash, "pid", 0);
  // Samples carry tids of the initial pid namespace, so the thread is %I
  // (global_tid), not %i.
  const uint32_t tid =
      json::Get<uint32_t>(crash, "global_tid", json::Get<uint32_t>(crash, "tid", 0));
  // Every thread of the process, off CPU too: the crashed thread's own
  // points are picked out below.
  ro.off_cpu = true;
  ro.progress = false;
  ThreadActivity threads;
  RecordInfo info;
  std::vector<std::pair<uint64_t, std::string>> points;
  // The thread's name at its last sample (pthread_setname_np names, not the
  // process's).
  std::string comm;
  uint64_t comm_time = 0;
  ASSIGN_OR_RETURN(auto stats, Replay(
                                   hreader, ro, [&](const RecordInfo& i) { info = i; },
                                   [&](const ResolvedSample& rs) {
                                     threads.Add(rs);
                                     if (rs.off_cpu || (tid != 0 && rs.sample->tid != tid)) return;
                                     points.emplace_back(
                                         rs.sample->time_ns,
                                         rs.stack.empty() ? "[no frames]" : rs.stack[0]->Display());
                                     if (rs.sample->time_ns >= comm_time) {
                                       comm_time = rs.sample->time_ns;
                                       comm = rs.sample->comm;
                                     }
                                   }));
  (void)stats;
  nlohmann::json out =
      SummarizeThreadHistory(std::move(points), info.window_start_ns, info.window_end_ns, bins);
  out["id"] = hid;
  out["tid"] = tid;
  out["comm"] = comm;
  // Where recorderd took it from: a crash marker (cut at the crash in kernel
  // context) or its live rings.
  out["source"] = json::Field(info.config, "history_source");
  out["end_mono_ns"] = info.window_end_ns;
  out["off_cpu"] = info.off_cpu;
  out["threads"] = threads.ToJson();
  AddLocks(hreader, ro.pid.value_or(0), threads, &out);
  return out;
}

StatusOr<nlohmann::json> MemGrowthSummary(const store::RecordReader& reader, uint32_t pid) {
  ReplayOptions ro;
  ro.pid = pid;
  ro.mem_growth = true;
  ro.progress = false;
  ro.source_lines = false;
  struct Stack {
    std::string function;
    uint64_t samples = 0, faults = 0;
  };
  std::map<std::string, Stack> stacks;
  uint64_t samples = 0, faults = 0;
  ASSIGN_OR_RETURN(auto stats, Replay(reader, ro, nullptr, [&](const ResolvedSample& rs) {
                     if (!rs.mem_growth) return;
                     Stack& st = stacks[UserFrames(rs)];
                     if (st.function.empty()) {
                       for (const auto* f : rs.stack) {
                         if (f->dso.rfind("[kernel", 0) == 0) continue;
                         st.function = f->Display();
                         break;
                       }
                       if (st.function.empty()) st.function = "[no user frames]";
                     }
                     ++st.samples;
                     st.faults += rs.sample->period;
                     ++samples;
                     faults += rs.sample->period;
                   }));
  (void)stats;
  std::vector<std::pair<std::string, Stack>> sorted(stacks.begin(), stacks.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& x, const auto& y) {
    return x.second.faults != y.second.faults ? x.second.faults > y.second.faults
                                              : x.first < y.first;
  });
  nlohmann::json top = nlohmann::json::array();
  for (size_t i = 0; i < sorted.size() && i < 10; ++i) {
    const Stack& st = sorted[i].second;
    top.push_back({{"function", st.function},
                   {"stack", sorted[i].first},
                   {"samples", st.samples},
                   {"faults", st.faults},
                   {"share_pct", faults ? 100.0 * static_cast<double>(st.faults) / faults : 0}});
  }
  return nlohmann::json{{"samples", samples}, {"faults", faults}, {"top", top}};
}

}  // namespace flightrec::recorder::analysis
