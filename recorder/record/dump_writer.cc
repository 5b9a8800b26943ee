#include "recorder/record/dump_record.h"

#include <fmt/format.h>
#include <time.h>

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <iterator>
#include <map>
#include <set>
#include <unordered_map>

#include "common/checked_json.h"
#include "common/units.h"
#include "recorder/attribution/vdso.h"
#include "recorder/capture/snapshot.h"
#include "recorder/model/event_codec.h"
#include "recorder/record/lock_waits_section.h"
#include "recorder/record/loss_report.h"
#include "recorder/record/off_cpu_section.h"
#include "recorder/record/sections.h"
#include "recorder/unwind/dwarf_unwinder.h"

namespace flightrec::recorder {

int64_t MonotonicToWallOffset() {
  // Bracket the wall-clock read with two monotonic reads for a tight offset.
  int64_t m0 = MonotonicNs();
  int64_t w = WallClockNs();
  int64_t m1 = MonotonicNs();
  return w - (m0 + (m1 - m0) / 2);
}

namespace {
// CLOCK_BOOTTIME - CLOCK_MONOTONIC now (the time spent suspended), so
// exports can place samples on Perfetto's default clock.
int64_t MonotonicToBoottimeOffset() {
  auto read = [](clockid_t id) {
    timespec ts{};
    clock_gettime(id, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  };
  int64_t m0 = read(CLOCK_MONOTONIC);
  int64_t b = read(CLOCK_BOOTTIME);
  int64_t m1 = read(CLOCK_MONOTONIC);
  return b - (m0 + (m1 - m0) / 2);
}

// Each KernelFrames value's name, indexed by the value.
constexpr const char* kKernelFramesNames[] = {"addresses", "symbolized", "none"};
static_assert(std::size(kKernelFramesNames) == static_cast<size_t>(KernelFrames::kNone) + 1);

}  // namespace

const char* KernelFramesName(KernelFrames k) {
  const auto i = static_cast<size_t>(k);
  return i < std::size(kKernelFramesNames) ? kKernelFramesNames[i] : "?";
}

StatusOr<KernelFrames> ParseKernelFrames(const std::string& name) {
  for (size_t i = 0; i < std::size(kKernelFramesNames); ++i) {
    if (name == kKernelFramesNames[i]) return static_cast<KernelFrames>(i);
  }
  return InvalidArgument(
      fmt::format("kernel frames: '{}' is not one of addresses, symbolized, none", name));
}

namespace {

// x86-64 and arm64 put the kernel in the upper half of the address space.
constexpr uint64_t kKernelHalf = 1ull << 63;

// Takes every kernel address out of a record's samples: symbolized, each
// becomes a reference into a table of (symbol, module) names, looked up now
// with the daemon's kallsyms (attribution::KernelSymbols::NameRef); none, the
// kernel chain goes and a sample taken in the kernel keeps only the fact
// (one frame, unnamed). Any other kernel-half value a sample carries (the ip
// of a guest or hypervisor sample, a corrupt user chain entry) becomes 0.
class KernelRedactor {
 public:
  KernelRedactor(const attribution::KernelSymbols& ksyms, KernelFrames policy)
      : ksyms_(ksyms), policy_(policy) {}

  void Redact(Sample* s) {
    if (policy_ == KernelFrames::kNone) {
      s->kernel_chain.clear();
    } else {
      for (uint64_t& a : s->kernel_chain) a = Ref(a);
    }
    if (s->mode == CpuMode::kKernel) {
      s->ip = Ref(s->ip);
    } else if (s->ip >= kKernelHalf) {
      s->ip = 0;
    }
    for (uint64_t& a : s->user_chain) {
      if (a >= kKernelHalf) a = 0;
    }
  }

  // Kernel maps (perf's kernel and module mmaps) are addresses themselves.
  static bool Keep(const Event& e) {
    const auto* m = std::get_if<MmapEvent>(&e);
    return m == nullptr || (!m->kernel && m->start < kKernelHalf);
  }

  // Section `kernel_names`: [[name, module], ...], index order.
  std::string NamesJson() const {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& [name, module] : names_) j.push_back({name, module});
    return json::Dump(j);
  }

 private:
  uint64_t Ref(uint64_t addr) {
    if (policy_ == KernelFrames::kNone) return 0;
    auto it = refs_.find(addr);
    if (it != refs_.end()) return it->second;
    uint64_t ref = 0;
    attribution::KernelSymbol k = ksyms_.Lookup(addr);
    if (k.found && k.offset <= UINT32_MAX) {
      auto key = std::make_pair(k.name, k.module);
      auto idx = index_.find(key);
      if (idx == index_.end() && names_.size() < attribution::KernelSymbols::kNameRefLimit) {
        idx = index_.emplace(key, static_cast<uint32_t>(names_.size())).first;
        names_.push_back(std::move(key));
      }
      if (idx != index_.end()) ref = attribution::KernelSymbols::NameRef(idx->second, k.offset);
    }
    refs_.emplace(addr, ref);
    return ref;
  }

  const attribution::KernelSymbols& ksyms_;
  KernelFrames policy_;
  std::map<std::pair<std::string, std::string>, uint32_t> index_;
  std::vector<std::pair<std::string, std::string>> names_;
  std::unordered_map<uint64_t, uint64_t> refs_;  // address -> reference
};

}  // namespace

nlohmann::json DumpResult::ToJson() const {
  return {
      {"id", row.id}, {"samples", samples},     {"covered_s", covered_s},   {"asked_s", asked_s},
      {"lost", lost}, {"bytes", row.file_size}, {"took_ms", took_ns / 1e6}, {"file", row.file}};
}

std::string DumpResult::Summary() const {
  std::string s = fmt::format("{}: {} samples, {:.2f} s covered", row.id, samples, covered_s);
  if (covered_s + 0.05 < asked_s) {
    s += fmt::format(" (asked for {:.2f} s; the rings held less)", asked_s);
  }
  s += fmt::format(", {} lost, {}, {:.1f} ms", lost, FormatBytes(row.file_size), took_ns / 1e6);
  return s;
}

Status CheckRequestedPids(const DumpRequest& req, const Snapshot& snap,
                          const attribution::SidebandHistory& history) {
  std::vector<uint32_t> unknown;
  for (uint32_t pid : std::set<uint32_t>(req.pids.begin(), req.pids.end())) {
    // pid 0 is the idle task: it has samples but no /proc entry.
    if (pid != 0 && (kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM)) continue;
    if (std::any_of(snap.samples.begin(), snap.samples.end(),
                    [pid](const Sample& s) { return s.pid == pid; })) {
      continue;
    }
    auto side = history.EventsFor({pid}, snap.window_start_ns, snap.freeze_time_ns);
    if (std::any_of(side.begin(), side.end(), [&](const Event& e) {
          return EventTime(e) >= snap.window_start_ns && !std::holds_alternative<LostEvent>(e);
        })) {
      continue;
    }
    unknown.push_back(pid);
  }
  if (unknown.empty()) return OkStatus();
  std::string list;
  for (size_t i = 0; i < unknown.size() && i < 16; ++i) {
    list += (list.empty() ? "" : ", ") + std::to_string(unknown[i]);
  }
  if (unknown.size() > 16) list += fmt::format(" and {} more", unknown.size() - 16);
  const double window_s = (snap.freeze_time_ns - snap.window_start_ns) / 1e9;
  return NotFound(
      fmt::format("no process {} {}: {} not running and did not run in the last "
                  "{:.2f} s (nothing to dump)",
                  unknown.size() == 1 ? "with pid" : "with pids", list,
                  unknown.size() == 1 ? "it is" : "they are", window_s));
}

StatusOr<DumpResult> WriteDump(store::Store& store, const DumpRequest& req, Snapshot snap,
                               const attribution::SidebandHistory& history,
                               const attribution::KernelSymbols& ksyms,
                               const nlohmann::json& backend_description, int64_t started_ns) {
  std::set<uint32_t> want(req.pids.begin(), req.pids.end());
  uint64_t filtered = 0;
  if (!want.empty()) {
    auto keep = std::remove_if(snap.samples.begin(), snap.samples.end(),
                               [&](const Sample& s) { return want.count(s.pid) == 0; });
    filtered = static_cast<uint64_t>(snap.samples.end() - keep);
    snap.samples.erase(keep, snap.samples.end());
    auto& off = snap.off_cpu_intervals;
    off.erase(
        std::remove_if(off.begin(), off.end(),
                       [&](const OffCpuInterval& i) { return want.count(i.sample.pid) == 0; }),
        off.end());
  }
  // Replay merges by time. Backends hand over samples sorted (Snapshot's
  // SortSamples or MergeSampleRuns): checking costs one pass, sorting again
  // n log n moves of whole samples for the same order.
  SortByTimeIfNeeded(snap.samples);
  std::set<uint32_t> pids;
  std::vector<uint64_t> kaddrs;
  const bool redact = req.kernel_frames != KernelFrames::kAddresses;
  KernelRedactor redactor(ksyms, req.kernel_frames);
  uint32_t last_pid = UINT32_MAX;  // a set insert per run of one pid, not per sample
  for (auto& s : snap.samples) {
    if (s.pid != last_pid) pids.insert(last_pid = s.pid);
    // Before anything reads the samples (events, live attribution): what a
    // user's record holds must not depend on which section it is in.
    if (redact) redactor.Redact(&s);
  }
  // A blocked thread may have no on-CPU sample at all (a deadlock): its
  // process's sideband is needed all the same to name its off-CPU stacks.
  for (auto& iv : snap.off_cpu_intervals) {
    pids.insert(iv.sample.pid);
    if (redact) {
      redactor.Redact(&iv.sample);
    } else {
      kaddrs.insert(kaddrs.end(), iv.sample.kernel_chain.begin(), iv.sample.kernel_chain.end());
      if (iv.sample.mode == CpuMode::kKernel) kaddrs.push_back(iv.sample.ip);
    }
  }
  // The state of the sampled processes just before the window, then their
  // sideband events merged with the samples by time: replay applies each
  // mapping change (exec, dlopen, dlclose + dlopen, exit) at the instant it
  // happened, as the daemon saw them.
  uint64_t first = snap.window_start_ns;
  if (!snap.samples.empty()) first = std::min(first, snap.samples.front().time_ns);
  if (!snap.off_cpu_intervals.empty()) {
    first = std::min(first, snap.off_cpu_intervals.front().sample.time_ns);
  }
  std::vector<Event> side = history.EventsFor(std::vector<uint32_t>(pids.begin(), pids.end()),
                                              first, snap.freeze_time_ns);
  if (redact) {
    side.erase(std::remove_if(side.begin(), side.end(),
                              [](const Event& e) { return !KernelRedactor::Keep(e); }),
               side.end());
  }
  // The daemon's own attribution of the same stream (the "live" side of one
  // pipeline): the same Attributor that replay runs, fed from memory instead
  // of from the stored bytes.
  attribution::Attributor live;
  // Samples in the vDSO are named and unwound from its image, which no file
  // holds: the daemon's own is the one every process of this kernel maps (a
  // 32-bit process's differs; its build-id in `config` tells them apart).
  std::string vdso;
  for (const Event& e : side) {
    const auto* m = std::get_if<MmapEvent>(&e);
    if (m == nullptr || m->filename != "[vdso]") continue;
    if (auto image = attribution::ReadOwnVdso(); image.ok()) vdso = std::move(*image);
    break;
  }
  std::unique_ptr<unwind::DwarfUnwinder> unwinder;
  if (req.live_attribution) {
    unwinder = unwind::MakeDwarfUnwinder();
    unwinder->set_vdso(vdso);
    live.set_unwinder(unwinder.get());
  }
  nlohmann::json live_samples = nlohmann::json::array();
  // The events section is compressed while it is encoded: the store's zstd
  // runs its workers on each chunk handed over (RecordWriter::Write), so
  // they overlap the encoding instead of following it. With live
  // attribution the events follow its section, written after the loop
  // (the sections keep their order).
  const bool stream_events = !req.live_attribution;
  constexpr size_t kEventsChunk = 1 << 20;
  ASSIGN_OR_RETURN(auto rec, store.BeginRecord(RecordKindName(req.kind)));
  if (stream_events) RETURN_IF_ERROR(rec->writer().BeginSection(kSectionEvents));
  EventEncoder enc;
  size_t next_side = 0;
  auto emit_side = [&](uint64_t until) {
    for (; next_side < side.size() && EventTime(side[next_side]) <= until; ++next_side) {
      enc.Add(side[next_side]);
      live.Add(side[next_side]);
    }
  };
  for (const auto& s : snap.samples) {
    emit_side(s.time_ns);
    // The kernel addresses to name: those of each stack once (a stack is
    // its pid, mode, ip and chains, so a repeat adds none).
    if (enc.Add(s) && !redact) {
      kaddrs.insert(kaddrs.end(), s.kernel_chain.begin(), s.kernel_chain.end());
      if (s.kernel_chain.empty() && s.mode == CpuMode::kKernel) kaddrs.push_back(s.ip);
    }
    if (stream_events && enc.size() >= kEventsChunk) {
      RETURN_IF_ERROR(rec->writer().Write(enc.Take()));
    }
    if (!req.live_attribution) continue;
    // [time, cpu, pid, tid, period, comm, [[kernel, cookie, offset, special]...]]
    attribution::AttributedSample a =
        attribution::Attribute(s, live.table(), live.cookies(), unwinder.get(), nullptr);
    nlohmann::json frames = nlohmann::json::array();
    for (const auto& f : a.frames)
      frames.push_back({f.kernel ? 1 : 0, f.cookie, f.offset, f.special});
    live_samples.push_back({a.time_ns, a.cpu, a.pid, a.tid, a.period, a.comm, std::move(frames)});
  }
  emit_side(UINT64_MAX);
  if (stream_events) {
    RETURN_IF_ERROR(rec->writer().Write(enc.Take()));
    RETURN_IF_ERROR(rec->writer().EndSection());
  }
  nlohmann::json processes = nlohmann::json::array();
  for (uint32_t pid : pids) {
    const attribution::Process* p = live.table().Find(pid);
    nlohmann::json entry = {{"pid", pid},
                            {"comm", p ? p->comm : ""},
                            {"exe", p ? p->exe : ""},
                            {"exited", p ? p->exited : false}};
    if (req.labels) {
      if (auto l = req.labels(pid, p ? p->exited : false)) attribution::AddLabelsToJson(*l, &entry);
    }
    processes.push_back(std::move(entry));
  }
  const attribution::CookieTable& cookies = live.cookies();

  const int64_t to_wall = req.mono_to_wall_ns.value_or(MonotonicToWallOffset());
  snap.counters.Set(LossCounter::kFilteredPid, filtered);
  nlohmann::json loss = snap.counters.ToJson();
  if (snap.off_cpu) loss[kLossOffCpu] = snap.off_cpu_loss;
  loss["unaccounted"] = snap.unaccounted;
  loss["per_cpu"] = snap.per_cpu;
  // The loss inside the requested window when the backend measures it (the
  // perf backend); else its lifetime counters (flightrec.ko's).
  uint64_t lost = snap.counters.LostInWindow();
  const int64_t to_boot = req.mono_to_boot_ns.value_or(MonotonicToBoottimeOffset());
  nlohmann::json config = {{"backend", backend_description},
                           {"last_ns", req.last_ns},
                           {"pids", req.pids},
                           {"freeze_time_mono_ns", snap.freeze_time_ns},
                           {"window_start_mono_ns", snap.window_start_ns},
                           {"mono_to_wall_ns", to_wall},
                           {"mono_to_boot_ns", to_boot},
                           {"freeze_copy_ns", snap.copy_ns},
                           {"history_source", snap.source},
                           {"kernel_frames", KernelFramesName(req.kernel_frames)},
                           {"off_cpu", snap.off_cpu}};
  if (!vdso.empty()) config["vdso_build_id"] = attribution::VdsoBuildId(vdso);

  std::string live_text;
  if (req.live_attribution) {
    live_text =
        json::Dump(nlohmann::json{{"cookies", cookies.ToJson()}, {"samples", live_samples}});
  }

  if (!live_text.empty()) {
    RETURN_IF_ERROR(rec->writer().AddSection(kSectionLiveAttribution, live_text));
  }
  if (!stream_events) RETURN_IF_ERROR(rec->writer().AddSection(kSectionEvents, enc.buffer()));
  if (!redact) {
    RETURN_IF_ERROR(rec->writer().AddSection(kSectionKallsyms, ksyms.Subset(kaddrs)));
  } else if (req.kernel_frames == KernelFrames::kSymbolized) {
    RETURN_IF_ERROR(rec->writer().AddSection(kSectionKernelNames, redactor.NamesJson()));
  }
  if (!vdso.empty()) RETURN_IF_ERROR(rec->writer().AddSection(kSectionVdso, vdso));
  if (snap.off_cpu) {
    OffCpuSections off = EncodeOffCpu(snap.off_cpu_intervals, snap.off_cpu_threshold_ns);
    RETURN_IF_ERROR(rec->writer().AddSection(kSectionOffCpu, off.events));
    RETURN_IF_ERROR(rec->writer().AddSection(kSectionOffCpuInfo, off.info));
    RETURN_IF_ERROR(rec->writer().AddSection(kSectionLockWaits,
                                             json::Dump(LockWaitsOf(snap.lock_waits, pids))));
  }
  RETURN_IF_ERROR(rec->writer().AddSection(kSectionConfig, json::Dump(config)));
  RETURN_IF_ERROR(rec->writer().AddSection(kSectionLoss, loss.dump()));
  for (const auto& [name, bytes] : req.extra_sections) {
    RETURN_IF_ERROR(rec->writer().AddSection(name, bytes));
  }
  uint64_t start_mono = snap.oldest_sample_ns ? snap.oldest_sample_ns : snap.window_start_ns;
  nlohmann::json meta = {{"reason", req.reason},
                         {"start_ns", static_cast<int64_t>(start_mono) + to_wall},
                         {"end_ns", static_cast<int64_t>(snap.freeze_time_ns) + to_wall},
                         {"asked_ns", req.last_ns},
                         {"pids", std::vector<uint32_t>(pids.begin(), pids.end())},
                         {"processes", processes},
                         {"samples", snap.samples.size()},
                         {"off_cpu_intervals", snap.off_cpu_intervals.size()},
                         {"lost", lost},
                         {"backend", backend_description.value("backend", "")},
                         {"event", backend_description.value("event", "")},
                         {"history_source", snap.source.value("kind", "")},
                         {"cookies", cookies.ToJson()}};
  if (req.extra_meta.is_object()) {
    for (const auto& [key, value] : req.extra_meta.items()) meta[key] = value;
  }
  ASSIGN_OR_RETURN(store::RecordRow row,
                   store.Commit(std::move(rec), meta,
                                store::CommitOptions{.protect = {}, .owner_uid = req.owner_uid}));
  DumpResult r;
  r.row = row;
  r.samples = snap.samples.size();
  r.asked_s = req.last_ns / 1e9;
  r.covered_s = snap.oldest_sample_ns ? (snap.freeze_time_ns - snap.oldest_sample_ns) / 1e9 : 0;
  r.lost = lost;
  r.took_ns = MonotonicNs() - started_ns;
  return r;
}

}  // namespace flightrec::recorder
