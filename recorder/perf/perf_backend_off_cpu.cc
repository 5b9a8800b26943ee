// PerfBackend's off-CPU capture: per CPU, two sched:sched_switch events in
// overwrite rings of their own (so blocked threads never evict on-CPU
// samples, nor the reverse).
//
// * out: filtered in the kernel to switch-outs of blocked tasks ("prev_state
//   & 3": S or D; a preempted task is runnable, not blocked), with the
//   sampling event's call chain and, in DWARF mode, user registers and stack.
//   The tracepoint fires in the switching-out task's context, so the stack is
//   the blocked thread's.
// * in: every switch to a task other than idle, without a call chain: the
//   instant each blocked thread ran again (raw next_pid).
//
// Both count every record they produce (sample_period 1 of a tracepoint:
// perf_tp_event counts only records that pass the filter), so the loss
// accounting is exact: produced = in ring + paused + ring lost + overwritten.
#include <sys/ioctl.h>

#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "common/units.h"
#include "recorder/capture/off_cpu.h"
#include "recorder/perf/perf_backend.h"
#include "recorder/perf/perf_counts.h"
#include "recorder/perf/perf_event.h"
#include "recorder/perf/record_parser.h"

namespace flightrec::recorder::perf {
namespace {

constexpr uint64_t kInSampleType = kSampleTypeNoChain | PERF_SAMPLE_RAW;
// The log's records: also the blocking switch-outs, with the blocked task's
// first syscall argument (rdi; a futex wait's futex word) for lock owners.
constexpr uint64_t kLogSampleType = kInSampleType | PERF_SAMPLE_REGS_USER;
constexpr uint64_t kLogRegsMask = 1ull << PERF_REG_X86_DI;
constexpr const char* kLogFilter = "next_pid != 0 || prev_state & 3";
// Switch-in records are ~120 bytes: 2 MiB per CPU hold ~17 000, and the
// switch-in log tells about threads whose switch-in is older. The log's
// forward ring is as large: at 10 000 switches a second per CPU (seen on a
// loaded 2-vCPU VM) it holds ~1.7 s between drains (woken at a quarter
// full, else every 200 ms).
constexpr size_t kSwitchInPages = 512;

// Opens one sched_switch event on `cpu` with `filter`, maps its overwrite
// ring, then enables it (see OpenCpu: never enabled before its ring exists).
Status OpenSwitchEvent(perf_event_attr attr, int cpu, const char* filter, size_t pages,
                       const std::string& what, ScopedFd* fd, std::optional<PerfRingBuffer>* ring) {
  attr.disabled = 1;
  ASSIGN_OR_RETURN(*fd, OpenPerfEvent(attr, -1, cpu, -1, what));
  // kernel/trace/trace_events_filter.c: the filter runs before the sample is
  // built, so a filtered-out switch costs no call chain and no ring space.
  if (ioctl(fd->get(), PERF_EVENT_IOC_SET_FILTER, filter) != 0) {
    return ErrnoStatus(fmt::format("{}: setting filter '{}'", what, filter));
  }
  ASSIGN_OR_RETURN(auto r, PerfRingBuffer::Allocate(fd->get(), pages, true));
  ring->emplace(std::move(r));
  if (ioctl(fd->get(), PERF_EVENT_IOC_ENABLE, 0) != 0) return ErrnoStatus("enabling " + what);
  return OkStatus();
}

// One ring's records, parsed, and its exact accounting.
struct RingRead {
  uint64_t in_ring = 0, malformed = 0, ring_lost = 0, oldest_ns = 0;
  LossLedger ledger;
};

RingRead ReadSwitchRing(int fd, const PerfRingBuffer& ring, uint64_t sample_type, int cpu,
                        const std::function<void(Sample&&, std::string_view raw)>& on) {
  RingRead r;
  const Counts counts = StableCounts(fd, ring, true, 1);
  PerfRingBuffer::Copy copy = ring.CopyBackward();
  for (size_t k = copy.size(); k-- > 0;) {
    ParseResult p =
        ParsePerfRecord(copy.record(k), sample_type, static_cast<uint32_t>(cpu), kUserRegsMask);
    if (p.malformed) {
      ++r.malformed;
      continue;
    }
    if (!p.event) continue;
    if (auto* s = std::get_if<Sample>(&*p.event)) {
      ++r.in_ring;
      if (r.oldest_ns == 0 || s->time_ns < r.oldest_ns) r.oldest_ns = s->time_ns;
      on(std::move(*s), p.raw);
    } else if (auto* l = std::get_if<LostEvent>(&*p.event)) {
      r.ring_lost += l->count;
    }
  }
  const uint64_t kept = r.in_ring + r.malformed + counts.lost + r.ring_lost;
  r.ledger.Set(LossCounter::kProduced, counts.value);
  r.ledger.Set(LossCounter::kInRing, r.in_ring);
  r.ledger.Set(LossCounter::kPaused, counts.lost);
  r.ledger.Set(LossCounter::kRingLostRecords, r.ring_lost);
  r.ledger.Set(LossCounter::kMalformed, r.malformed);
  r.ledger.Set(LossCounter::kOverwritten, counts.value > kept ? counts.value - kept : 0);
  return r;
}

}  // namespace

Status PerfBackend::OpenOffCpu(int cpu, Cpu* c) {
  perf_event_attr a{};
  a.type = PERF_TYPE_TRACEPOINT;
  a.config = sched_switch_.id;
  a.sample_period = 1;
  a.sample_type = out_sample_type_;
  a.write_backward = 1;
  a.use_clockid = 1;
  a.clockid = CLOCK_MONOTONIC;
  a.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING | kFormatLost;
  if (config_.dwarf_stack_bytes > 0) {
    a.sample_regs_user = kUserRegsMask;
    a.sample_stack_user =
        config_.off_cpu_stack_bytes ? config_.off_cpu_stack_bytes : config_.dwarf_stack_bytes;
    a.exclude_callchain_user = 1;
  }
  RETURN_IF_ERROR(OpenSwitchEvent(a, cpu, "prev_state & 3", off_cpu_pages_,
                                  fmt::format("sched_switch (blocking) on cpu {}", cpu), &c->out_fd,
                                  &c->out_ring));
  perf_event_attr in = a;
  in.sample_type = kInSampleType;
  in.sample_regs_user = 0;
  in.sample_stack_user = 0;
  in.exclude_callchain_user = 0;
  RETURN_IF_ERROR(OpenSwitchEvent(in, cpu, "next_pid != 0", kSwitchInPages,
                                  fmt::format("sched_switch (switch-in) on cpu {}", cpu), &c->in_fd,
                                  &c->in_ring));
  // The log: forward, read as sideband (woken at a quarter full, else the
  // daemon's 200 ms timer), with sample_id_all so that a LOST record says when.
  // Blocking switch-outs too, with rdi: a wait's mutex is read while the
  // process lives (LockWaitTable), since a SIGKILL leaves no memory to read.
  // It also takes a blocking thread's switch to idle, so that every block
  // is seen as it begins (BlockedThreads, for hang triggers).
  perf_event_attr log = in;
  log.sample_type = kLogSampleType;
  log.sample_regs_user = kLogRegsMask;
  log.write_backward = 0;
  log.sample_id_all = 1;
  log.watermark = 1;
  log.wakeup_watermark = static_cast<uint32_t>(kSwitchInPages * sysconf(_SC_PAGESIZE) / 4);
  log.disabled = 1;
  const std::string what = fmt::format("sched_switch (switch-in log) on cpu {}", cpu);
  ASSIGN_OR_RETURN(c->log_fd, OpenPerfEvent(log, -1, cpu, -1, what));
  if (ioctl(c->log_fd.get(), PERF_EVENT_IOC_SET_FILTER, kLogFilter) != 0) {
    return ErrnoStatus(what + ": setting filter");
  }
  ASSIGN_OR_RETURN(auto r, PerfRingBuffer::Allocate(c->log_fd.get(), kSwitchInPages, false));
  c->log_ring.emplace(std::move(r));
  if (ioctl(c->log_fd.get(), PERF_EVENT_IOC_ENABLE, 0) != 0) return ErrnoStatus("enabling " + what);
  // Complete once every CPU's log is enabled (the last CPU opened sets it).
  last_switch_in_complete_since_ns_ = static_cast<uint64_t>(MonotonicNs());
  off_cpu_opened_ns_ = MonotonicNs();
  return OkStatus();
}

void PerfBackend::ApplySwitchIn(uint32_t tid, uint64_t time_ns) {
  // Bounded: past a million threads the log starts over (and is complete
  // only from now on).
  constexpr size_t kMaxThreads = 1u << 20;
  if (last_switch_in_.size() >= kMaxThreads && last_switch_in_.count(tid) == 0) {
    last_switch_in_.clear();
    last_switch_in_complete_since_ns_ = static_cast<uint64_t>(MonotonicNs());
  }
  uint64_t& t = last_switch_in_[tid];
  t = std::max(t, time_ns);
  lock_waits_.Ran(tid, time_ns);
}

void PerfBackend::DrainSwitchInLog(uint64_t until,
                                   std::vector<std::pair<uint32_t, uint64_t>>* later) {
  for (auto& c : cpus_) {
    if (!c.log_ring) continue;
    c.log_ring->ReadForward([&](std::string_view rec) {
      ParseResult p =
          ParsePerfRecord(rec, kLogSampleType, static_cast<uint32_t>(c.cpu), kLogRegsMask);
      if (!p.event) return;
      if (auto* l = std::get_if<LostEvent>(&*p.event)) {
        // Some switch-in before now is missing: the log is complete only
        // from here on.
        switch_in_log_lost_ += l->count;
        last_switch_in_complete_since_ns_ = static_cast<uint64_t>(MonotonicNs());
        blocked_.Reset();
        return;
      }
      auto* s = std::get_if<Sample>(&*p.event);
      SchedSwitchFormat::Values v;
      if (s == nullptr || !sched_switch_.Read(p.raw, &v)) return;
      if (BlockedState(v.prev_state) != 0 && s->user_stack.regs.size() == 1) {
        lock_waits_.Blocked(s->pid, s->tid, s->time_ns, s->user_stack.regs[0]);
      }
      blocked_.OnSwitch(s->time_ns, v.prev_pid, v.prev_state, v.next_pid);
      if (v.next_pid == 0) return;  // a switch to idle: only its switch-out counts
      if (s->time_ns <= until || later == nullptr) {
        ApplySwitchIn(v.next_pid, s->time_ns);
      } else {
        later->emplace_back(v.next_pid, s->time_ns);
      }
    });
  }
  lock_waits_.Resolve(static_cast<uint64_t>(MonotonicNs()), ReadProcMem, IsThreadOf);
  // Threads that ran and exited leave entries behind.
  blocked_.Prune(static_cast<uint64_t>(MonotonicNs()), 10'000'000'000);
}

void PerfBackend::PauseOffCpu(bool paused) {
  for (auto& c : cpus_) {
    if (!c.out_fd) continue;
    ioctl(c.out_fd.get(), PERF_EVENT_IOC_PAUSE_OUTPUT, paused ? 1 : 0);
    ioctl(c.in_fd.get(), PERF_EVENT_IOC_PAUSE_OUTPUT, paused ? 1 : 0);
  }
}

void PerfBackend::SnapshotOffCpu(Snapshot* snap) {
  if (!config_.off_cpu) return;
  std::vector<SwitchOut> outs;
  std::vector<SwitchIn> ins;
  LossLedger out_ledger, in_ledger;
  uint64_t ins_complete_since = 0, outs_complete_since = 0, not_blocked = 0;
  nlohmann::json per_cpu = nlohmann::json::array();
  for (auto& c : cpus_) {
    RingRead out = ReadSwitchRing(
        c.out_fd.get(), *c.out_ring, out_sample_type_, c.cpu,
        [&](Sample&& s, std::string_view raw) {
          SchedSwitchFormat::Values v;
          const char state = sched_switch_.Read(raw, &v) ? BlockedState(v.prev_state) : 0;
          if (state == 0) {
            ++not_blocked;
            return;
          }
          outs.push_back(SwitchOut{std::move(s), state});
        });
    RingRead in = ReadSwitchRing(c.in_fd.get(), *c.in_ring, kInSampleType, c.cpu,
                                 [&](Sample&& s, std::string_view raw) {
                                   SchedSwitchFormat::Values v;
                                   if (sched_switch_.Read(raw, &v)) {
                                     ins.push_back(SwitchIn{s.time_ns, v.next_pid});
                                   }
                                 });
    // A ring that overwrote records holds every record since its oldest one.
    if (out.ledger.Get(LossCounter::kOverwritten) > 0) {
      outs_complete_since = std::max(outs_complete_since, out.oldest_ns);
    }
    if (in.ledger.Get(LossCounter::kOverwritten) > 0) {
      ins_complete_since = std::max(ins_complete_since, in.oldest_ns);
    }
    per_cpu.push_back(
        {{"cpu", c.cpu}, {"switch_out", out.ledger.ToJson()}, {"switch_in", in.ledger.ToJson()}});
    out_ledger += out.ledger;
    in_ledger += in.ledger;
  }
  std::vector<std::pair<uint32_t, uint64_t>> later;
  DrainSwitchInLog(snap->freeze_time_ns, &later);
  LossLedger intervals;
  std::unordered_map<uint32_t, uint64_t> last_on_cpu;
  for (const Sample& s : snap->samples) last_on_cpu[s.tid] = s.time_ns;  // in time order
  OffCpuMatch m;
  m.threshold_ns = config_.off_cpu_threshold_ns;
  m.window_start_ns = snap->window_start_ns;
  m.freeze_ns = snap->freeze_time_ns;
  m.switch_ins_complete_since_ns = ins_complete_since;
  m.last_switch_in = &last_switch_in_;
  m.last_switch_in_complete_since_ns = last_switch_in_complete_since_ns_;
  m.last_on_cpu = &last_on_cpu;
  snap->off_cpu = true;
  snap->off_cpu_threshold_ns = config_.off_cpu_threshold_ns;
  snap->off_cpu_intervals = MatchOffCpu(std::move(outs), std::move(ins), m, &intervals);
  snap->lock_waits = lock_waits_.ToJson({}, snap->window_start_ns);
  snap->off_cpu_loss = {{"switch_out", out_ledger.ToJson()},
                        {"switch_in", in_ledger.ToJson()},
                        {"intervals", intervals.ToJson()},
                        {"not_blocked", not_blocked},
                        {"switch_outs_complete_since_mono_ns", outs_complete_since},
                        {"switch_ins_complete_since_mono_ns", ins_complete_since},
                        {"switch_in_log_complete_since_mono_ns", last_switch_in_complete_since_ns_},
                        {"switch_in_log_lost", switch_in_log_lost_},
                        {"per_cpu", std::move(per_cpu)}};
  for (const auto& [tid, t] : later) ApplySwitchIn(tid, t);
}

nlohmann::json PerfBackend::OffCpuCapacity() const {
  // Since the rings opened: blocking switch-outs per second per CPU, the
  // bytes each took (call chain and stack copy included), and so how many
  // seconds of them the ring holds at this rate.
  uint64_t produced = 0, bytes = 0;
  for (const auto& c : cpus_) {
    if (!c.out_fd) continue;
    produced += ReadCounts(c.out_fd.get(), true).value;
    bytes += c.out_ring->BytesWritten();
  }
  const double elapsed_s = static_cast<double>(MonotonicNs() - off_cpu_opened_ns_) / 1e9;
  if (cpus_.empty() || produced == 0 || elapsed_s <= 0) return nullptr;
  const double rate = static_cast<double>(produced) / elapsed_s / static_cast<double>(cpus_.size());
  const double per = static_cast<double>(bytes) / static_cast<double>(produced);
  const double ring = static_cast<double>(cpus_[0].out_ring->data_size());
  return {{"measured_over_s", elapsed_s},
          {"switch_outs_per_s_per_cpu", rate},
          {"bytes_per_switch_out", per},
          {"ring_holds_s", ring / per / rate}};
}

nlohmann::json PerfBackend::DescribeOffCpu() const {
  if (!config_.off_cpu) return {{"enabled", false}};
  return {{"enabled", true},
          {"capacity", OffCpuCapacity()},
          {"event", "sched:sched_switch"},
          {"threshold_ns", config_.off_cpu_threshold_ns},
          {"ring_bytes_per_cpu", cpus_.empty() ? 0 : cpus_[0].out_ring->data_size()},
          {"switch_in_ring_bytes_per_cpu", cpus_.empty() ? 0 : cpus_[0].in_ring->data_size()},
          {"lock_waits", lock_waits_.Stats()},
          {"user_stack_bytes", config_.dwarf_stack_bytes == 0 ? 0
                               : config_.off_cpu_stack_bytes  ? config_.off_cpu_stack_bytes
                                                              : config_.dwarf_stack_bytes}};
}

}  // namespace flightrec::recorder::perf
