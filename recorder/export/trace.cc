// Timeline export: Chrome trace-event JSON (Perfetto's native protobuf has
// its own exporter, perfetto.cc). It is written by a state machine that
// turns the time-ordered samples into slices on two kinds of lanes:
//   - one lane per thread, with the thread's stack as nested slices (a frame
//     stays open while consecutive samples of the thread keep it on the
//     stack), like magic-trace or Perfetto's flame-chart view;
//   - one lane per CPU, with a slice per run of the same thread on it.
// A slice ends where its last sample's interval ends, or where the next
// sample of the lane begins if that is earlier, so every lane is ordered.
#include <map>
#include <set>

#include <fmt/format.h>

#include "common/checked_json.h"
#include "recorder/export/exporters.h"

namespace flightrec::recorder::exporter {
namespace {

struct LaneKey {
  bool cpu = false;
  uint32_t pid = 0;  // thread lanes
  uint32_t tid = 0;  // thread lanes; the CPU number for CPU lanes
  auto operator<=>(const LaneKey&) const = default;
};

struct Lane {
  uint64_t id = 0;
  std::vector<std::string> open;  // outermost first
  uint64_t last_end = 0;
  std::string comm;  // thread lanes: the name the lane was last given
};

// What a trace format writes.
class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void Start(const analysis::RecordInfo& info, std::ostream* out) = 0;
  // First use of a lane: the thread's name or the CPU's. Called again when
  // the thread's name changes inside the window (an exec, a prctl): viewers
  // keep the last name given.
  virtual void NewLane(const LaneKey& key, uint64_t id, const std::string& comm) = 0;
  // The process's name, first given or changed (an exec): viewers keep the
  // last one.
  virtual void NameProcess(uint32_t pid, const std::string& name) = 0;
  virtual void Begin(const LaneKey& key, uint64_t id, uint64_t ts, const std::string& name,
                     const std::string& dso) = 0;
  virtual void End(const LaneKey& key, uint64_t id, uint64_t ts) = 0;
  virtual Status Finish() = 0;
};

class TraceExporter : public Exporter {
 public:
  explicit TraceExporter(std::unique_ptr<TraceSink> sink) : sink_(std::move(sink)) {}

  void Begin(const analysis::RecordInfo& info, std::ostream* out) override {
    // How long one sample stands for: the period itself for clock events
    // (ns), else one sampling interval.
    // The record's config, checked like any input from a file.
    const auto& backend = json::Object(info.config, "backend");
    std::string event = json::Str(backend, "event");
    uint64_t hz = json::Get<uint64_t>(backend, "frequency_hz", 0);
    clock_event_ = event.find("clock") != std::string::npos;
    interval_ns_ = hz ? 1'000'000'000 / hz : 1'000'000;
    sink_->Start(info, out);
  }

  void Add(const analysis::ResolvedSample& rs) override {
    const auto& s = *rs.sample;
    uint64_t len = clock_event_ && s.period ? s.period : interval_ns_;
    uint64_t t = s.time_ns;
    // Thread lane: the stack as nested slices.
    std::vector<std::string> names;
    std::vector<std::string> dsos;
    if (std::string marker = IncompleteStackMarker(s); !marker.empty()) {
      names.push_back(std::move(marker));  // the root end of an incomplete stack
      dsos.emplace_back();
    }
    for (auto it = rs.stack.rbegin(); it != rs.stack.rend(); ++it) {
      names.push_back((*it)->inlined ? (*it)->Display() + " [inlined]" : (*it)->Display());
      dsos.push_back((*it)->dso);
    }
    LaneKey tk{false, s.pid, s.tid};
    Lane& tl = GetLane(tk, s.comm);
    if (const std::string* process = ProcessName(rs)) {
      auto [pn, fresh] = process_names_.try_emplace(s.pid, *process);
      if (fresh || pn->second != *process) {
        pn->second = *process;
        sink_->NameProcess(s.pid, *process);
      }
    }
    size_t keep = 0;
    if (t <= tl.last_end + len) {  // no gap: frames shared with the last sample stay open
      while (keep < tl.open.size() && keep < names.size() && tl.open[keep] == names[keep]) ++keep;
    }
    Close(tk, tl, keep, t);
    for (size_t i = keep; i < names.size(); ++i) {
      sink_->Begin(tk, tl.id, t, names[i], dsos[i]);
      tl.open.push_back(names[i]);
    }
    tl.last_end = t + len;
    // CPU lane: which thread ran.
    LaneKey ck{true, 0, s.cpu};
    Lane& cl = GetLane(ck, "");
    std::string who = fmt::format("{} {}/{}", s.comm.empty() ? "?" : s.comm, s.pid, s.tid);
    if (cl.open.empty() || cl.open[0] != who || t > cl.last_end + len) {
      Close(ck, cl, 0, t);
      sink_->Begin(ck, cl.id, t, who, "");
      cl.open.push_back(who);
    }
    cl.last_end = t + len;
  }

  Status Finish() override {
    for (auto& [key, lane] : lanes_) Close(key, lane, 0, lane.last_end);
    return sink_->Finish();
  }

 private:
  Lane& GetLane(const LaneKey& key, const std::string& comm) {
    auto [it, fresh] = lanes_.try_emplace(key);
    if (fresh) {
      it->second.id = ++next_id_;
      it->second.comm = comm;
      sink_->NewLane(key, it->second.id, comm);
    } else if (!key.cpu && it->second.comm != comm) {
      it->second.comm = comm;
      sink_->NewLane(key, it->second.id, comm);
    }
    return it->second;
  }
  // Ends the lane's open slices above depth `keep`, innermost first.
  void Close(const LaneKey& key, Lane& lane, size_t keep, uint64_t now) {
    uint64_t ts = std::min(lane.last_end, now);
    while (lane.open.size() > keep) {
      sink_->End(key, lane.id, ts);
      lane.open.pop_back();
    }
  }

  std::unique_ptr<TraceSink> sink_;
  std::map<LaneKey, Lane> lanes_;
  std::map<uint32_t, std::string> process_names_;  // the last name each pid was given
  uint64_t next_id_ = 0;
  bool clock_event_ = true;
  uint64_t interval_ns_ = 1'000'000;
};

// The pseudo-process that holds the CPU lanes in the Chrome format.
constexpr uint32_t kCpuPid = 0x7fffffff;

class ChromeSink : public TraceSink {
 public:
  void Start(const analysis::RecordInfo& info, std::ostream* out) override {
    out_ = out;
    base_ = info.window_start_ns;
    *out_ << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"record\":\"" << JsonEscape(info.id)
          << "\",\"exporter\":\"flightrec\",\"start_wall_ns\":"
          << static_cast<int64_t>(info.window_start_ns) + info.mono_to_wall_ns
          << "},\"traceEvents\":[\n";
  }
  void NewLane(const LaneKey& key, uint64_t, const std::string& comm) override {
    if (key.cpu) {
      if (!cpu_named_) {
        Emit(
            fmt::format("{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"tid\":0,"
                        "\"args\":{{\"name\":\"CPUs\"}}}}",
                        kCpuPid));
        cpu_named_ = true;
      }
      Emit(
          fmt::format("{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},"
                      "\"args\":{{\"name\":\"CPU {}\"}}}}",
                      kCpuPid, key.tid, key.tid));
      return;
    }
    Emit(
        fmt::format("{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},"
                    "\"args\":{{\"name\":\"{}\"}}}}",
                    key.pid, key.tid, JsonEscape(comm)));
  }
  void NameProcess(uint32_t pid, const std::string& name) override {
    Emit(
        fmt::format("{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"tid\":{},"
                    "\"args\":{{\"name\":\"{}\"}}}}",
                    pid, pid, JsonEscape(name)));
  }
  void Begin(const LaneKey& key, uint64_t, uint64_t ts, const std::string& name,
             const std::string& dso) override {
    ChromeLane& lane = lanes_[key];
    ts = std::max(ts, lane.last_ts);
    Flush(key, lane, ts);
    lane.open.push_back({name, dso});
    lane.last_ts = lane.written = ts;
    Emit(Event('B', key, ts, lane.open.back()));
  }
  // Held until the lane's next Begin (or the end): an E that falls on the
  // same timestamp as the next B moves 1 ns earlier, see Flush.
  void End(const LaneKey& key, uint64_t, uint64_t ts) override {
    ChromeLane& lane = lanes_[key];
    if (lane.open.empty()) return;  // the state machine never does this
    lane.last_ts = std::max(ts, lane.last_ts);
    lane.pending.push_back({std::move(lane.open.back()), lane.last_ts});
    lane.open.pop_back();
  }
  Status Finish() override {
    for (auto& [key, lane] : lanes_) Flush(key, lane, UINT64_MAX);
    *out_ << "\n]}\n";
    return out_->good() ? OkStatus() : Status(StatusCode::kInternal, "writing the trace failed");
  }

 private:
  // Microseconds from the window start, with ns precision.
  std::string Us(uint64_t ts) const {
    int64_t ns = static_cast<int64_t>(ts) - static_cast<int64_t>(base_);
    return fmt::format("{}{}.{:03}", ns < 0 ? "-" : "", std::abs(ns) / 1000, std::abs(ns) % 1000);
  }
  struct Frame {
    std::string name;
    std::string dso;
  };
  struct Pending {
    Frame frame;
    uint64_t ts = 0;
  };
  struct ChromeLane {
    std::vector<Frame> open;       // outermost first
    std::vector<Pending> pending;  // ends not yet written, innermost first
    uint64_t last_ts = 0;          // of the lane's last written or held event
    uint64_t written = 0;          // of the lane's last written event
  };
  // Writes the lane's held E events before a B at `next_begin`. speedscope
  // (import/trace-event.ts) queues a lane's B and E events apart, sorted by
  // ts, and at a tie takes the B first when its name equals the E's: a
  // stack change at one instant such as [main, a, f] -> [main, f] would then
  // open the new f inside the old one, and the following "E a" would not
  // match. Ending 1 ns before the next B keeps every lane strictly nested
  // for any reader that orders by ts.
  void Flush(const LaneKey& key, ChromeLane& lane, uint64_t next_begin) {
    for (auto& p : lane.pending) {
      // Never before the lane's last written event (its B, at the latest):
      // only two samples of one thread in the same ns could tie here.
      uint64_t ts = std::max(std::min(p.ts, next_begin - 1), lane.written);
      Emit(Event('E', key, ts, p.frame));
      lane.written = ts;
    }
    lane.pending.clear();
  }
  // A slice event: the frame's name as it is, the dso as the category.
  // Not in "args": speedscope names each frame "<name> <JSON of args>",
  // which is how the dso used to end up inside every frame name there.
  // The E event carries the same name and category as its B: speedscope
  // ignores an E whose name differs from the frame on top of the stack
  // (chrome://tracing ends the innermost open slice whatever the E says).
  std::string Event(char ph, const LaneKey& key, uint64_t ts, const Frame& f) const {
    return fmt::format("{{\"ph\":\"{}\",\"ts\":{},\"pid\":{},\"tid\":{},\"name\":\"{}\"{}}}", ph,
                       Us(ts), key.cpu ? kCpuPid : key.pid, key.tid, JsonEscape(f.name),
                       f.dso.empty() ? "" : ",\"cat\":\"" + JsonEscape(f.dso) + "\"");
  }
  void Emit(const std::string& e) {
    if (!first_) *out_ << ",\n";
    first_ = false;
    *out_ << e;
  }
  std::ostream* out_ = nullptr;
  uint64_t base_ = 0;
  bool first_ = true;
  bool cpu_named_ = false;
  std::map<LaneKey, ChromeLane> lanes_;
};

}  // namespace

std::unique_ptr<Exporter> MakeChromeTrace() {
  return std::make_unique<TraceExporter>(std::make_unique<ChromeSink>());
}

}  // namespace flightrec::recorder::exporter
