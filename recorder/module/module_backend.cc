#include "recorder/module/module_backend.h"

#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <time.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "common/units.h"

namespace flightrec::recorder::module {
namespace {

// A load parameter of flightrec.ko from sysfs ("" if unreadable), at most
// 255 bytes, one line.
std::string ReadModuleParam(const char* name) {
  ScopedFd f(
      open(fmt::format("/sys/module/flightrec/parameters/{}", name).c_str(), O_RDONLY | O_CLOEXEC));
  if (!f) return "";
  char buf[256];
  ssize_t n = read(f.get(), buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  std::string v(buf, static_cast<size_t>(n));
  return v.substr(0, v.find('\n'));
}

Status Ioctl(int fd, unsigned long cmd, void* arg, const char* what) {
  if (ioctl(fd, cmd, arg) != 0) return ErrnoStatus(fmt::format("/dev/flightrec: {}", what));
  return OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<ModuleBackend>> ModuleBackend::Create(const std::string& device,
                                                               const ModuleConfig& config) {
  auto b = std::unique_ptr<ModuleBackend>(new ModuleBackend);
  b->config_ = config;
  // A marker must outlive the hook's request (seconds): a floor keeps a tiny
  // --history from freeing markers before anyone could ask.
  b->config_.marker_ttl_ns = std::max<int64_t>(config.marker_ttl_ns, 1'000'000'000);
  b->fd_ = ScopedFd(open(device.c_str(), O_RDWR | O_CLOEXEC));
  if (!b->fd_) {
    return ErrnoStatus(
        fmt::format("opening {} (is flightrec.ko loaded? root or CAP_PERFMON?)", device));
  }
  RETURN_IF_ERROR(Ioctl(b->fd_.get(), FLIGHTREC_IOC_INFO, &b->info_, "INFO"));
  if (b->info_.version != FLIGHTREC_VERSION || b->info_.sample_size != sizeof(flightrec_sample) ||
      b->info_.sideband_size != sizeof(flightrec_sideband)) {
    return Unsupported(fmt::format(
        "{}: module ABI version {} (sample {} B, sideband {} B) is not the one this recorderd "
        "was built for (version {}, {} B, {} B)",
        device, b->info_.version, b->info_.sample_size, b->info_.sideband_size, FLIGHTREC_VERSION,
        sizeof(flightrec_sample), sizeof(flightrec_sideband)));
  }
  ASSIGN_OR_RETURN(b->mode_, ResolveCallGraph(b->config_, b->info_.stack_bytes));
  return b;
}

uint64_t ModuleBackend::SamplePeriodNs() const {
  if (info_.period) return info_.period;
  return info_.freq ? 1'000'000'000ull / info_.freq : 0;
}

nlohmann::json ModuleBackend::Describe() const {
  uint64_t hz = info_.freq ? info_.freq : (info_.period ? 1'000'000'000ull / info_.period : 0);
  return {{"backend", "module"},
          {"event", info_.event == FLIGHTREC_EVENT_CYCLES ? "cycles" : "cpu-clock"},
          {"frequency_hz", hz},
          {"period", info_.period},
          {"cpus", info_.nr_cpus},
          {"data_ring_bytes", info_.data_ring_bytes},
          {"aux_ring_bytes", info_.aux_ring_bytes},
          {"stack_bytes", info_.stack_bytes},
          {"data_ring_bytes_per_cpu", info_.data_ring_bytes},  // named as perf's, for status
          {"callchain", mode_.dwarf_stack_bytes ? "dwarf"
                        : mode_.callchain       ? "fp"
                                                : "none"},
          {"call_graph", mode_.ToString()},
          {"max_markers", info_.max_markers},
          {"marker_ttl_s", config_.marker_ttl_ns / 1e9},
          {"kernel_samples", true}};
}

Status ModuleBackend::DrainSideband(const std::function<void(const Event&)>& sink) {
  std::vector<flightrec_sideband> buf(256);
  std::vector<flightrec_sideband> batch;
  for (;;) {
    flightrec_read rd{};
    rd.ring = FLIGHTREC_RING_SIDEBAND;
    rd.buf = reinterpret_cast<uint64_t>(buf.data());
    rd.buf_len = buf.size() * sizeof(flightrec_sideband);
    RETURN_IF_ERROR(Ioctl(fd_.get(), FLIGHTREC_IOC_READ_RING, &rd, "READ_RING sideband"));
    size_t n = rd.bytes / sizeof(flightrec_sideband);
    const auto* recs = reinterpret_cast<const flightrec_sideband*>(
        reinterpret_cast<const char*>(buf.data()) + rd.data_offset);
    batch.insert(batch.end(), recs, recs + n);
    for (size_t i = 0; i < n; ++i) {
      if (recs[i].type == FLIGHTREC_SB_LOST) {
        sideband_lost_ += recs[i].len;
        ++sideband_gaps_;
      }
    }
    if (n < buf.size()) break;
  }
  for (const auto& e : OrderSideband(std::move(batch))) sink(e);
  // The daemon drains on a timer: the place to free markers nobody claimed.
  ReleaseStaleMarkers();
  return OkStatus();
}

StatusOr<std::vector<flightrec_cpu_stats_ev>> ModuleBackend::ReadStats(flightrec_stats* global) {
  std::vector<flightrec_cpu_stats_ev> cpus(info_.nr_cpus);
  if (has_event_stats_) {
    *global = {};
    global->buf = reinterpret_cast<uint64_t>(cpus.data());
    global->count = static_cast<uint32_t>(cpus.size());
    global->flags = FLIGHTREC_STATS_EVENT;
    if (ioctl(fd_.get(), FLIGHTREC_IOC_STATS, global) == 0) {
      cpus.resize(std::min<size_t>(cpus.size(), global->count));
      return cpus;
    }
    if (errno != EINVAL) return ErrnoStatus("/dev/flightrec: STATS");
    has_event_stats_ = false;  // a module older than the flag: the plain counters
  }
  std::vector<flightrec_cpu_stats> plain(info_.nr_cpus);
  *global = {};
  global->buf = reinterpret_cast<uint64_t>(plain.data());
  global->count = static_cast<uint32_t>(plain.size());
  RETURN_IF_ERROR(Ioctl(fd_.get(), FLIGHTREC_IOC_STATS, global, "STATS"));
  cpus.resize(std::min<size_t>(cpus.size(), global->count));
  for (size_t i = 0; i < cpus.size(); ++i) cpus[i].s = plain[i];
  return cpus;
}

StatusOr<Snapshot> ModuleBackend::TakeSnapshot(int64_t last_ns) {
  ReleaseStaleMarkers();
  Snapshot snap;
  int64_t t0 = MonotonicNs();
  RETURN_IF_ERROR(Ioctl(fd_.get(), FLIGHTREC_IOC_FREEZE, nullptr, "FREEZE"));
  snap.SetWindow(static_cast<uint64_t>(MonotonicNs()), last_ns);
  struct Thaw {
    int fd;
    ~Thaw() { ioctl(fd, FLIGHTREC_IOC_THAW, nullptr); }
  } thaw{fd_.get()};
  flightrec_stats global{};
  ASSIGN_OR_RETURN(auto cpus, ReadStats(&global));
  const uint64_t period = SamplePeriodNs();
  LossLedger& total = snap.counters;
  for (LossCounter c : {LossCounter::kProduced, LossCounter::kInWindow, LossCounter::kOutsideWindow,
                        LossCounter::kOverwritten, LossCounter::kPaused, LossCounter::kSize,
                        LossCounter::kTornBytes, LossCounter::kMalformedBytes, LossCounter::kInRing,
                        LossCounter::kThrottled}) {
    total.Set(c, 0);
  }
  std::vector<uint8_t> data(info_.data_ring_bytes);
  std::vector<uint8_t> aux(info_.aux_ring_bytes + 4096);
  uint64_t not_active = 0;
  for (const auto& ce : cpus) {
    const flightrec_cpu_stats& c = ce.s;
    if (!c.online && c.data_head == 0) continue;
    // DATA: everything still in the ring (from its first whole chunk; the
    // module starts there when `from` is older), up to the head the
    // counters were read at (a sample that was being written when FREEZE
    // came is not in them, and not copied).
    flightrec_read rd{};
    rd.cpu = c.cpu;
    rd.ring = FLIGHTREC_RING_DATA;
    rd.from = 0;
    rd.to = c.data_head;
    rd.buf = reinterpret_cast<uint64_t>(data.data());
    rd.buf_len = data.size();
    if (ioctl(fd_.get(), FLIGHTREC_IOC_READ_RING, &rd) != 0) {
      if (errno == ENODEV) continue;  // possible, never online
      return ErrnoStatus(fmt::format("/dev/flightrec: READ_RING data cpu {}", c.cpu));
    }
    uint64_t bad = 0;
    std::vector<SampleRecord> recs =
        ParseDataRecords(data.data() + rd.data_offset, rd.bytes, rd.first, &bad);
    total.Add(LossCounter::kMalformedBytes, bad);
    size_t n = recs.size();
    // AUX: the whole ring once, sliced per sample.
    flightrec_read ra{};
    ra.cpu = c.cpu;
    ra.ring = FLIGHTREC_RING_AUX;
    ra.from = c.aux_head > info_.aux_ring_bytes ? c.aux_head - info_.aux_ring_bytes : 0;
    ra.to = c.aux_head;
    ra.buf = reinterpret_cast<uint64_t>(aux.data());
    ra.buf_len = aux.size();
    // fp and none records carry no stack bytes: the AUX ring is not read.
    bool have_aux = mode_.dwarf_stack_bytes > 0 && info_.aux_ring_bytes > 0 && c.aux_head > 0 &&
                    ioctl(fd_.get(), FLIGHTREC_IOC_READ_RING, &ra) == 0;
    CpuCopy copy;
    copy.records = recs.data();
    copy.count = n;
    if (have_aux) {
      copy.aux = aux.data() + ra.data_offset;
      copy.aux_first = ra.first;
      copy.aux_end = ra.next;
    }
    size_t before = snap.samples.size();
    uint64_t cpu_outside = AppendSamples(copy, snap.window_start_ns, period, mode_, &snap.samples);
    uint64_t cpu_kept = snap.samples.size() - before;
    total.Add(LossCounter::kProduced, c.produced);
    total.Add(LossCounter::kOverwritten, c.overwritten);
    total.Add(LossCounter::kPaused, c.dropped_frozen);
    total.Add(LossCounter::kSize, c.dropped_size);
    // Bytes this read lost to the writer (torn_on_read is the module's
    // lifetime count over every reader's copies). Their records are already
    // in `overwritten`: the writer counts a chunk's records when it starts
    // to reuse it.
    total.Add(LossCounter::kTornBytes, rd.data_offset);
    total.Add(LossCounter::kOutsideWindow, cpu_outside);
    total.Add(LossCounter::kInWindow, cpu_kept);
    total.Add(LossCounter::kInRing, cpu_kept + cpu_outside);
    total.Add(LossCounter::kThrottled, ce.throttled);
    // An online CPU whose counter is not counting (ERROR: a pinned event
    // that could not be scheduled) samples nothing, and no counter says so.
    if (c.online && has_event_stats_ && ce.event_state != FLIGHTREC_EVSTATE_ACTIVE) ++not_active;
    snap.per_cpu.push_back({{"cpu", c.cpu},
                            {"online", c.online != 0},
                            {"produced", c.produced},
                            {"written", c.written},
                            {"in_ring", n},
                            {"in_window", cpu_kept},
                            {"outside_window", cpu_outside},
                            {"overwritten", c.overwritten},
                            {"paused", c.dropped_frozen},
                            {"size", c.dropped_size},
                            {"torn_bytes", rd.data_offset},
                            {"torn_on_read_lifetime", c.torn_on_read},
                            {"aux_written", c.aux_written},
                            {"aux_overwritten", c.aux_overwritten}});
    if (has_event_stats_) {
      // Throttled periods produce no sample and are in no other counter;
      // time_running < time_enabled means the counter was not counting for
      // part of its life (multiplexed out or in ERROR state).
      auto& pc = snap.per_cpu.back();
      pc["throttled"] = ce.throttled;
      pc["event_state"] = EventStateName(ce.event_state);
      pc["time_enabled_ns"] = ce.time_enabled;
      pc["time_running_ns"] = ce.time_running;
    }
  }
  snap.SortSamples();
  total.Set(LossCounter::kCpusNotCounting, not_active);
  total.Set(LossCounter::kSidebandLost, sideband_lost_);
  // The module's counters are exact: produced == written + frozen + size,
  // and written == in ring + overwritten (frozen, read whole).
  using C = LossCounter;
  snap.unaccounted = static_cast<int64_t>(total.Get(C::kProduced)) -
                     static_cast<int64_t>(total.Get(C::kInRing) + total.Get(C::kOverwritten) +
                                          total.Get(C::kPaused) + total.Get(C::kSize));
  snap.copy_ns = MonotonicNs() - t0;
  return snap;
}

StatusOr<std::vector<flightrec_marker>> ModuleBackend::ListMarkers() {
  std::vector<flightrec_marker> m(std::max<uint32_t>(info_.max_markers, 1));
  for (;;) {
    flightrec_markers l{};
    l.buf = reinterpret_cast<uint64_t>(m.data());
    l.count = static_cast<uint32_t>(m.size());
    RETURN_IF_ERROR(Ioctl(fd_.get(), FLIGHTREC_IOC_LIST_MARKERS, &l, "LIST_MARKERS"));
    if (l.count <= m.size()) {
      m.resize(l.count);
      return m;
    }
    m.resize(l.count);  // more than max_markers: a newer module; list again
  }
}

void ModuleBackend::ReleaseStaleMarkers() {
  if (info_.max_markers == 0) return;
  auto markers = ListMarkers();
  if (!markers.ok()) {
    marker_error_ = markers.status().message();
    return;
  }
  for (const auto& m :
       StaleMarkers(*markers, static_cast<uint64_t>(MonotonicNs()), config_.marker_ttl_ns)) {
    if (ioctl(fd_.get(), FLIGHTREC_IOC_RELEASE_MARKER, static_cast<unsigned long>(m.slot)) == 0) {
      ++markers_released_unclaimed_;
    } else if (errno != ENOENT) {  // ENOENT: another reader freed it
      marker_error_ =
          ErrnoStatus(fmt::format("/dev/flightrec: RELEASE_MARKER {}", m.slot)).message();
    }
  }
}

StatusOr<Snapshot> ModuleBackend::TakeCrashSnapshot(uint32_t pid, int64_t last_ns,
                                                    int64_t wait_ns) {
  // The kernel claims the marker at the start of the core dump, before it
  // starts the core_pattern handler that asks for it, and copies the rings
  // into it right after (a kworker); the marker is listed once that copy is
  // done. poll() on the device sleeps until a marker becomes ready since
  // our last LIST_MARKERS, so this waits for the event, bounded by wait_ns.
  const int64_t t0 = MonotonicNs();
  const flightrec_marker* found = nullptr;
  std::vector<flightrec_marker> markers;
  for (;;) {
    ASSIGN_OR_RETURN(markers, ListMarkers());
    found = FindMarker(markers, pid, static_cast<uint64_t>(MonotonicNs()), config_.marker_ttl_ns);
    const int64_t left = wait_ns - (MonotonicNs() - t0);
    if (found != nullptr || left <= 0) break;
    pollfd pfd{fd_.get(), POLLIN, 0};
    const int ms = static_cast<int>(std::min<int64_t>((left + 999'999) / 1'000'000, 60'000));
    if (poll(&pfd, 1, ms) < 0 && errno != EINTR) return ErrnoStatus("/dev/flightrec: poll");
  }
  const int64_t waited = MonotonicNs() - t0;
  if (found == nullptr) {
    flightrec_stats global{};
    auto st = ReadStats(&global);
    return NotFound(fmt::format(
        "no crash marker for pid {} after {} ms ({} marker slots, {} in use; {} crashes "
        "found every slot in use)",
        pid, waited / 1'000'000, info_.max_markers, markers.size(),
        st.ok() ? global.markers_dropped : 0));
  }
  const flightrec_marker m = *found;
  auto snap = SnapshotFromMarker(m, last_ns);
  // Claimed, copied or not: the slot is freed for the next crash.
  if (ioctl(fd_.get(), FLIGHTREC_IOC_RELEASE_MARKER, static_cast<unsigned long>(m.slot)) == 0)
    ++markers_claimed_;
  if (!snap.ok()) return snap.status();
  snap->source["waited_ns"] = waited;
  return snap;
}

StatusOr<Snapshot> ModuleBackend::SnapshotFromMarker(const flightrec_marker& m, int64_t last_ns) {
  Snapshot snap;
  const int64_t t0 = MonotonicNs();
  snap.SetWindow(m.time_ns, last_ns);  // the history ends at the crash
  const uint64_t period = SamplePeriodNs();
  // At the crash instant the module keeps ring positions, not its drop
  // counters: samples dropped while frozen or for size before the crash are
  // not known here (they are in the module's live counters).
  LossLedger& total = snap.counters;
  for (LossCounter c : {LossCounter::kInRing, LossCounter::kInWindow, LossCounter::kOutsideWindow,
                        LossCounter::kOverwrittenBytes, LossCounter::kMalformedBytes}) {
    total.Set(c, 0);
  }
  uint64_t crasher_last = 0;
  uint32_t crasher_cpu = 0;
  bool crasher_last_on_cpu = false;
  std::vector<uint8_t> data, aux;
  for (uint32_t cpu = 0; cpu < m.nr_cpus && cpu < info_.nr_cpus; ++cpu) {
    // Two calls per ring: the preserved size, then the bytes.
    auto read = [&](uint32_t ring, std::vector<uint8_t>* buf,
                    flightrec_marker_read* r) -> StatusOr<bool> {
      *r = {};
      r->slot = m.slot;
      r->cpu = cpu;
      r->ring = ring;
      if (ioctl(fd_.get(), FLIGHTREC_IOC_READ_MARKER, r) != 0) {
        if (errno == ENODEV) return false;  // not a possible CPU
        return ErrnoStatus(fmt::format("/dev/flightrec: READ_MARKER slot {} cpu {}", m.slot, cpu));
      }
      buf->resize(r->total_bytes);
      r->buf = reinterpret_cast<uint64_t>(buf->data());
      r->buf_len = buf->size();
      if (ioctl(fd_.get(), FLIGHTREC_IOC_READ_MARKER, r) != 0) {
        return ErrnoStatus(fmt::format("/dev/flightrec: READ_MARKER slot {} cpu {}", m.slot, cpu));
      }
      buf->resize(r->bytes);
      return true;
    };
    flightrec_marker_read rd, ra;
    ASSIGN_OR_RETURN(bool possible, read(FLIGHTREC_RING_DATA, &data, &rd));
    if (!possible) continue;
    uint64_t bad = 0;
    std::vector<SampleRecord> recs = ParseDataRecords(data.data(), data.size(), rd.first, &bad);
    total.Add(LossCounter::kMalformedBytes, bad);
    CpuCopy copy;
    copy.records = recs.data();
    copy.count = recs.size();
    if (mode_.dwarf_stack_bytes > 0) {
      ASSIGN_OR_RETURN(bool aux_ok, read(FLIGHTREC_RING_AUX, &aux, &ra));
      if (aux_ok) {
        copy.aux = aux.data();
        copy.aux_first = ra.first;
        copy.aux_end = ra.first + aux.size();
      }
    }
    for (size_t i = 0; i < copy.count; ++i) {
      const auto& r = copy.records[i].h;
      if (r.tid == m.tid && r.time_ns >= crasher_last) {
        crasher_last = r.time_ns;
        crasher_cpu = cpu;
        crasher_last_on_cpu = i + 1 == copy.count;
      }
    }
    size_t before = snap.samples.size();
    uint64_t cpu_outside = AppendSamples(copy, snap.window_start_ns, period, mode_, &snap.samples);
    uint64_t cpu_kept = snap.samples.size() - before;
    // The marker keeps DATA positions (bytes), not record counts: what lies
    // below `first` was overwritten before the crash or while the kernel
    // copied the other CPUs' rings, a number of records it does not keep.
    total.Add(LossCounter::kInRing, copy.count);
    total.Add(LossCounter::kOverwrittenBytes, rd.first);
    total.Add(LossCounter::kOutsideWindow, cpu_outside);
    total.Add(LossCounter::kInWindow, cpu_kept);
    snap.per_cpu.push_back({{"cpu", cpu},
                            {"position_at_crash", rd.end},
                            {"in_marker", copy.count},
                            {"in_window", cpu_kept},
                            {"outside_window", cpu_outside},
                            {"overwritten_bytes", rd.first}});
  }
  snap.SortSamples();
  snap.unaccounted = 0;  // positions only: nothing to check the records against
  snap.copy_ns = MonotonicNs() - t0;
  snap.source = {{"kind", "crash_marker"},
                 {"marker_id", m.id},
                 {"slot", m.slot},
                 {"pid", m.pid},
                 {"tid", m.tid},
                 {"signal", m.signal},
                 {"marker_time_mono_ns", m.time_ns},
                 {"read_after_ns", static_cast<uint64_t>(MonotonicNs()) - m.time_ns}};
  if (crasher_last) {
    // How close to the crash the crashing thread's history ends, and whether
    // nothing else ran on its CPU between its last sample and the crash.
    snap.source["crashing_thread_last_sample_mono_ns"] = crasher_last;
    snap.source["crashing_thread_gap_ns"] = m.time_ns - crasher_last;
    snap.source["crashing_thread_cpu"] = crasher_cpu;
    snap.source["crashing_thread_last_on_its_cpu"] = crasher_last_on_cpu;
  }
  snap.source["sample_period_ns"] = period;
  return snap;
}

nlohmann::json ModuleBackend::Stats() {
  ReleaseStaleMarkers();
  flightrec_stats global{};
  auto cpus = ReadStats(&global);
  nlohmann::json j = Describe();
  if (!cpus.ok()) {
    j["error"] = cpus.status().message();
    return j;
  }
  uint64_t produced = 0, written = 0, handler_ns = 0;
  nlohmann::json per_cpu = nlohmann::json::array();
  for (const auto& c : *cpus) {
    produced += c.s.produced;
    written += c.s.written;
    handler_ns += c.s.handler_ns;
    // The module's own time in its sample handler (STATS handler_ns).
    per_cpu.push_back({{"cpu", c.s.cpu},
                       {"produced", c.s.produced},
                       {"handler_ns", c.s.handler_ns},
                       {"handler_ns_per_sample",
                        c.s.produced ? static_cast<double>(c.s.handler_ns) / c.s.produced : 0.0}});
  }
  j["produced"] = produced;
  j["written"] = written;
  j["handler_ns"] = handler_ns;
  j["handler_ns_per_sample"] = produced ? static_cast<double>(handler_ns) / produced : 0.0;
  j["per_cpu"] = std::move(per_cpu);
  j["sideband_written"] = global.sideband_written;
  j["sideband_dropped"] = global.sideband_dropped;
  j["markers_taken"] = global.markers_taken;
  j["markers_dropped"] = global.markers_dropped;
  j["markers_coalesced"] = global.markers_coalesced;
  j["markers_uid_limited"] = global.markers_uid_limited;
  j["markers_per_uid"] = info_.markers_per_uid;
  j["sideband_lost"] = sideband_lost_;
  j["sideband_gaps"] = sideband_gaps_;
  // Crash markers need a hook in the kernel's crash path; without one the
  // module still records, and status says why there are no markers.
  const bool hooked = global.crash_hook == FLIGHTREC_HOOK_TRACEPOINT ||
                      global.crash_hook == FLIGHTREC_HOOK_KPROBE ||
                      global.crash_hook == FLIGHTREC_HOOK_UNKNOWN;
  j["crash_markers_available"] = hooked && info_.max_markers > 0;
  j["crash_hook"] = global.crash_hook == FLIGHTREC_HOOK_TRACEPOINT ? "tracepoint signal_deliver"
                    : global.crash_hook == FLIGHTREC_HOOK_KPROBE   ? "kprobe"
                    : global.crash_hook == FLIGHTREC_HOOK_NONE     ? "none"
                                                                   : "unknown (older module)";
  if (!hooked) {
    j["crash_markers_unavailable"] =
        CrashHookReason(global, ReadModuleParam("crash_hook"), ReadModuleParam("coredump_symbol"));
    j["crash_hook_error"] = global.crash_hook_error;
  } else if (info_.max_markers == 0) {
    j["crash_markers_unavailable"] = "flightrec.ko was loaded with markers=0";
  }
  uint64_t throttled = 0, not_active = 0;
  for (const auto& c : *cpus) {
    throttled += c.throttled;
    if (c.s.online && has_event_stats_ && c.event_state != FLIGHTREC_EVSTATE_ACTIVE) ++not_active;
  }
  j["throttled"] = throttled;
  j["cpus_not_counting"] = not_active;
  auto markers = ListMarkers();
  j["markers_pending"] = markers.ok() ? markers->size() : 0;
  j["markers_claimed"] = markers_claimed_;
  j["markers_released_unclaimed"] = markers_released_unclaimed_;
  if (!marker_error_.empty()) j["marker_error"] = marker_error_;
  // Ring history at the observed mean record size (records are variable).
  uint64_t period = SamplePeriodNs();
  uint64_t heads = 0;
  for (const auto& c : *cpus) heads += c.s.data_head;
  if (period && written && heads) {
    double capacity = static_cast<double>(info_.data_ring_bytes) * written / heads;
    j["history_s"] = capacity * period / 1e9;
  }
  return j;
}

}  // namespace flightrec::recorder::module
