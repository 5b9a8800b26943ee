#include "recorder/perf/perf_backend.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>

#include "common/units.h"
#include "recorder/model/perf_sideband.h"
#include "recorder/perf/perf_counts.h"
#include "recorder/perf/perf_event.h"
#include "recorder/perf/record_parser.h"

namespace flightrec::recorder::perf {
namespace {

// A frame-pointer callchain of ~16 frames plus the fixed sample fields.
constexpr size_t kBytesPerSampleEstimate = 56 + 8 + 8 * 18;

}  // namespace

Counts ReadCounts(int fd, bool with_lost) {
  uint64_t buf[4] = {};
  Counts c;
  ssize_t want = with_lost ? 32 : 24;
  if (read(fd, buf, sizeof(buf)) >= want) {
    c.value = buf[0];
    c.enabled = buf[1];
    c.running = buf[2];
    c.lost = with_lost ? buf[3] : 0;
  }
  return c;
}

Counts StableCounts(int fd, const PerfRingBuffer& ring, bool with_lost, uint64_t period) {
  Counts counts = ReadCounts(fd, with_lost);
  auto unexplained = [period](const Counts& k) { return k.value / period - k.lost; };
  uint64_t head = ring.BytesWritten();
  int64_t stable_since = MonotonicNs();
  const int64_t give_up = stable_since + 300'000'000;
  while (MonotonicNs() - stable_since < 10'000'000 && MonotonicNs() < give_up) {
    usleep(100);
    Counts again = ReadCounts(fd, with_lost);
    uint64_t head_again = ring.BytesWritten();
    if (unexplained(again) != unexplained(counts) || head_again != head) {
      stable_since = MonotonicNs();
    }
    counts = again;
    head = head_again;
  }
  return counts;
}

size_t RingPagesFor(int64_t history_ns, uint32_t frequency_hz, size_t bytes_per_sample,
                    size_t page_size, size_t max_pages) {
  double bytes = static_cast<double>(history_ns) / 1e9 * frequency_hz * bytes_per_sample;
  size_t pages = 8;
  while (pages < max_pages && static_cast<double>(pages * page_size) < bytes) pages *= 2;
  return pages;
}

size_t BytesPerSample(const PerfConfig& config) {
  if (config.dwarf_stack_bytes == 0) return config.callchain ? kBytesPerSampleEstimate : 56;
  // Fixed fields, a kernel chain of ~8 frames with its context markers, the
  // regs (abi + one u64 each), and the stack copy: the kernel reserves all
  // `size` bytes whatever it manages to copy (perf_output_sample_ustack
  // skips the rest), plus size and dyn_size.
  size_t regs = static_cast<size_t>(__builtin_popcountll(kUserRegsMask));
  return 56 + (config.callchain ? 8 + 8 * 10 : 0) + 8 + 8 * regs + 16 + config.dwarf_stack_bytes;
}

HistoryPlan PlanHistory(const PerfConfig& config, size_t ring_bytes) {
  HistoryPlan p;
  p.asked_s = static_cast<double>(config.history_ns) / 1e9;
  p.held_s = static_cast<double>(ring_bytes) / (static_cast<double>(config.frequency_hz) *
                                                static_cast<double>(BytesPerSample(config)));
  const bool whole = config.history_ns % 1'000'000'000 == 0;
  std::string asked = whole ? fmt::format("{}s", config.history_ns / 1'000'000'000)
                            : FormatDurationNs(config.history_ns);
  std::string what = config.dwarf_stack_bytes > 0
                         ? fmt::format("{} stacks", FormatBytes(config.dwarf_stack_bytes))
                     : config.callchain ? "frame-pointer call chains"
                                        : "no call chains";
  p.text = fmt::format("--history {} asked; at {} Hz with {} the rings hold ~{:.1f} s", asked,
                       config.frequency_hz, what, p.held_s);
  if (p.held_s >= p.asked_s) return p;
  // Why less: the user's own --ring-pages, or the largest ring given.
  if (config.data_pages != 0) {
    p.text +=
        fmt::format(" (--ring-pages {}: {} per CPU)", config.data_pages, FormatBytes(ring_bytes));
  } else {
    p.text += fmt::format(" ({} per CPU, the largest {}ring; a lower -F{} holds more)",
                          FormatBytes(ring_bytes), config.dwarf_stack_bytes > 0 ? "DWARF " : "",
                          config.dwarf_stack_bytes > 0 ? " or a smaller dwarf,STACK_BYTES" : "");
  }
  return p;
}

std::string CallGraph::ToString() const {
  if (dwarf_stack_bytes > 0) return fmt::format("dwarf,{}", dwarf_stack_bytes);
  return callchain ? "fp" : "none";
}

StatusOr<CallGraph> ParseCallGraph(const std::string& text) {
  CallGraph g;
  if (text == "fp") return g;
  if (text == "none") {
    g.callchain = false;
    return g;
  }
  if (text == "dwarf") {
    g.dwarf_stack_bytes = kDefaultDwarfStackBytes;
    return g;
  }
  if (text.rfind("dwarf,", 0) == 0) {
    std::string n = text.substr(6);
    char* end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(n.c_str(), &end, 10);
    if (n.empty() || *end != '\0' || errno != 0 || v == 0 || v > kMaxStackUserBytes) {
      return InvalidArgument(
          fmt::format("--call-graph {}: the stack size must be a number of bytes from 8 to {}",
                      text, kMaxStackUserBytes));
    }
    // Like perf: rounded up to a multiple of 8, which the kernel requires.
    g.dwarf_stack_bytes = static_cast<uint32_t>((v + 7) & ~7ull);
    if (g.dwarf_stack_bytes > kMaxStackUserBytes) g.dwarf_stack_bytes = kMaxStackUserBytes;
    return g;
  }
  return InvalidArgument(
      fmt::format("--call-graph {}: expected fp, dwarf, dwarf,STACK_BYTES or none", text));
}

StatusOr<std::unique_ptr<PerfBackend>> PerfBackend::Create(const PerfConfig& config) {
  std::unique_ptr<PerfBackend> b(new PerfBackend());
  b->config_ = config;
  b->start_ns_ = MonotonicNs();
  if (config.frequency_hz == 0 || config.frequency_hz > 100000) {
    return InvalidArgument(
        fmt::format("sampling rate {} Hz is out of range (1..100000)", config.frequency_hz));
  }
  const bool root = geteuid() == 0;
  // Unprivileged per-process capture at perf_event_paranoid 2 may not sample
  // the kernel.
  b->exclude_kernel_ = !root && PerfEventParanoid() >= 2;
  b->sample_type_ = config.callchain ? kSampleType : kSampleTypeNoChain;
  if (config.dwarf_stack_bytes > kMaxStackUserBytes || config.dwarf_stack_bytes % 8 != 0) {
    return InvalidArgument(fmt::format("DWARF stack size {} must be a multiple of 8 up to {}",
                                       config.dwarf_stack_bytes, kMaxStackUserBytes));
  }

  perf_event_attr attr{};
  attr.sample_type = b->sample_type_;
  attr.sample_id_all = 1;
  attr.write_backward = 1;
  attr.use_clockid = 1;
  attr.clockid = CLOCK_MONOTONIC;
  attr.exclude_kernel = b->exclude_kernel_;
  attr.exclude_callchain_kernel = b->exclude_kernel_;
  attr.inherit = config.target_pid >= 0;
  attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
  if (config.dwarf_stack_bytes > 0) {
    // As perf record --call-graph dwarf: registers and a stack copy for the
    // user part, the kernel callchain (if any) for the kernel part.
    b->sample_type_ |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
    attr.sample_regs_user = kUserRegsMask;
    attr.sample_stack_user = config.dwarf_stack_bytes;
    attr.exclude_callchain_user = 1;
  }
  attr.sample_type = b->sample_type_;
  const int probe_pid = config.target_pid >= 0 ? config.target_pid : -1;
  const int probe_cpu = OnlineCpus().front();

  if (config.event_type) {
    attr.type = *config.event_type;
    attr.config = config.event_config;
    attr.sample_period = config.event_period ? config.event_period : 1;
    b->period_ = attr.sample_period;
    b->event_name_ =
        fmt::format("type {} config {} period {}", attr.type, attr.config, attr.sample_period);
  } else {
    // Hardware cycles first: where the CPU has a PMU this samples by cycles
    // (like perf's default); these VMs have none and get ENOENT/EOPNOTSUPP.
    perf_event_attr hw = attr;
    hw.type = PERF_TYPE_HARDWARE;
    hw.config = PERF_COUNT_HW_CPU_CYCLES;
    hw.freq = 1;
    hw.sample_freq = config.frequency_hz;
    auto fd = OpenPerfEvent(hw, probe_pid, probe_cpu, -1, "cycles");
    if (fd.ok()) {
      attr = hw;
      b->event_name_ = "cycles";
      b->period_ = 0;  // frequency mode: the kernel adjusts the period
    } else {
      b->fallback_reason_ = fd.status().message();
      attr.type = PERF_TYPE_SOFTWARE;
      attr.config = PERF_COUNT_SW_CPU_CLOCK;
      // A fixed period (ns of CPU time) rather than frequency mode, so that
      // "produced" is exactly the kernel's count / period (seed 003).
      attr.sample_period = 1'000'000'000ull / config.frequency_hz;
      b->period_ = attr.sample_period;
      b->event_name_ = "cpu-clock";
    }
  }
  // A fixed period of a counted (not timed) event: count/period is exact.
  b->discrete_ = b->period_ != 0 &&
                 !(attr.type == PERF_TYPE_SOFTWARE && (attr.config == PERF_COUNT_SW_CPU_CLOCK ||
                                                       attr.config == PERF_COUNT_SW_TASK_CLOCK));
  // PERF_FORMAT_LOST is refused with EINVAL by kernels before 6.0.
  {
    perf_event_attr probe = attr;
    probe.read_format |= kFormatLost;
    probe.disabled = 1;
    auto fd = OpenPerfEvent(probe, probe_pid, probe_cpu, -1, b->event_name_);
    if (fd.ok()) {
      attr.read_format |= kFormatLost;
      b->has_lost_format_ = true;
    } else if (fd.status().err() != EINVAL) {
      return fd.status();  // a real problem (permissions, no such event): say so now
    }
  }
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // DWARF samples are ~50x larger: their rings may grow larger.
  b->data_pages_ =
      config.data_pages
          ? config.data_pages
          : RingPagesFor(config.history_ns, config.frequency_hz, BytesPerSample(config), page,
                         config.dwarf_stack_bytes > 0 ? kMaxDwarfRingPages : kMaxRingPages);
  b->has_build_id_ = true;
  if (config.off_cpu) {
    if (config.target_pid >= 0) {
      return InvalidArgument(
          "off-CPU capture is system-wide only: a thread's switch-in is seen on the CPU of the "
          "thread it replaces, whichever process that is");
    }
    if (config.off_cpu_stack_bytes > kMaxStackUserBytes || config.off_cpu_stack_bytes % 8 != 0) {
      return InvalidArgument(fmt::format("off-CPU stack size {} must be a multiple of 8 up to {}",
                                         config.off_cpu_stack_bytes, kMaxStackUserBytes));
    }
    ASSIGN_OR_RETURN(b->sched_switch_, LoadSchedSwitchFormat());
    b->out_sample_type_ = b->sample_type_ | PERF_SAMPLE_RAW;
    b->off_cpu_pages_ = config.off_cpu_pages       ? config.off_cpu_pages
                        : config.dwarf_stack_bytes ? 2048
                                                   : 512;
  }
  for (int cpu : OnlineCpus()) {
    Cpu c;
    c.cpu = cpu;
    Status st = b->OpenCpu(cpu, attr, &c);
    if (!st.ok()) return st;
    if (config.off_cpu) RETURN_IF_ERROR(b->OpenOffCpu(cpu, &c));
    b->cpus_.push_back(std::move(c));
  }
  return b;
}

PerfBackend::~PerfBackend() = default;

Status PerfBackend::OpenCpu(int cpu, const perf_event_attr& sample_attr, Cpu* c) {
  const int pid = config_.target_pid >= 0 ? config_.target_pid : -1;
  perf_event_attr a = sample_attr;
  // Opened disabled and enabled only once the ring is mapped: an event that
  // overflows before mmap() has no ring buffer, and __perf_output_begin
  // (kernel/events/ring_buffer.c) then drops the sample without counting it
  // in lost_samples (`if (unlikely(!rb)) goto out;`), which would leave
  // count/period greater than every loss cause can explain.
  a.disabled = 1;
  ASSIGN_OR_RETURN(
      c->sample_fd,
      OpenPerfEvent(a, pid, cpu, -1, fmt::format("{} sampling on cpu {}", event_name_, cpu)));
  ASSIGN_OR_RETURN(auto ring, PerfRingBuffer::Allocate(c->sample_fd.get(), data_pages_, true));
  c->sample_ring.emplace(std::move(ring));
  if (ioctl(c->sample_fd.get(), PERF_EVENT_IOC_ENABLE, 0) != 0) {
    return ErrnoStatus(fmt::format("enabling {} sampling on cpu {}", event_name_, cpu));
  }

  perf_event_attr s{};
  s.type = PERF_TYPE_SOFTWARE;
  s.config = PERF_COUNT_SW_DUMMY;
  s.sample_type = kSideSampleType;
  SetSidebandRecordBits(&s);
  s.use_clockid = 1;
  s.clockid = CLOCK_MONOTONIC;
  s.inherit = config_.target_pid >= 0;
  s.exclude_kernel = exclude_kernel_;
  // Wake the daemon when a quarter of the ring is used; a 200 ms timer drains
  // the rest.
  s.watermark = 1;
  s.wakeup_watermark = static_cast<uint32_t>(config_.sideband_pages * sysconf(_SC_PAGESIZE) / 4);
  s.build_id = has_build_id_;
  auto fd = OpenPerfEvent(s, pid, cpu, -1, fmt::format("sideband on cpu {}", cpu));
  if (!fd.ok() && has_build_id_ && fd.status().err() == EINVAL) {
    // attr.build_id needs kernel >= 5.12; build-ids are then read from files.
    has_build_id_ = false;
    s.build_id = 0;
    fd = OpenPerfEvent(s, pid, cpu, -1, fmt::format("sideband on cpu {}", cpu));
  }
  if (!fd.ok()) return fd.status();
  c->side_fd = std::move(*fd);
  ASSIGN_OR_RETURN(auto side,
                   PerfRingBuffer::Allocate(c->side_fd.get(), config_.sideband_pages, false));
  c->side_ring.emplace(std::move(side));
  return OkStatus();
}

nlohmann::json PerfBackend::Describe() const {
  nlohmann::json j = {
      {"backend", "perf"},
      {"event", event_name_},
      {"frequency_hz", config_.frequency_hz},
      {"period", period_},
      {"cpus", cpus_.size()},
      {"data_ring_bytes_per_cpu", cpus_.empty() ? 0 : cpus_[0].sample_ring->data_size()},
      {"sideband_ring_bytes_per_cpu", cpus_.empty() ? 0 : cpus_[0].side_ring->data_size()},
      {"callchain", config_.dwarf_stack_bytes > 0 ? "dwarf"
                    : config_.callchain           ? "fp"
                                                  : "none"},
      {"call_graph", CallGraph{config_.callchain, config_.dwarf_stack_bytes}.ToString()},
      {"kernel_samples", !exclude_kernel_},
      {"build_id_in_mmap2", has_build_id_},
      {"exact_paused_loss", has_lost_format_},
      {"target_pid", config_.target_pid},
      {"off_cpu", DescribeOffCpu()}};
  if (!fallback_reason_.empty()) {
    j["fallback"] = "hardware cycles unavailable, using cpu-clock: " + fallback_reason_;
  }
  return j;
}

std::vector<int> PerfBackend::SidebandFds() const {
  std::vector<int> fds;
  for (const auto& c : cpus_) {
    fds.push_back(c.side_fd.get());
    if (c.log_fd) fds.push_back(c.log_fd.get());
  }
  return fds;
}

Status PerfBackend::DrainSideband(const std::function<void(const Event&)>& sink) {
  // Each CPU's ring is in time order, but a process migrates: its exec may
  // sit in CPU 1's ring and its next mmap in CPU 0's. Applying ring by ring
  // would let that exec wipe the newer mmap, so merge all CPUs by timestamp
  // (stable: equal times keep ring order) before handing events on.
  DrainSwitchInLog(UINT64_MAX, nullptr);
  std::vector<Event> events;
  for (auto& c : cpus_) {
    c.side_ring->ReadForward([&](std::string_view rec) {
      ParseResult r = ParsePerfRecord(rec, kSideSampleType, static_cast<uint32_t>(c.cpu));
      if (!r.event) return;
      if (auto* l = std::get_if<LostEvent>(&*r.event)) c.sideband_lost += l->count;
      events.push_back(std::move(*r.event));
    });
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const Event& a, const Event& b) { return EventTime(a) < EventTime(b); });
  for (const auto& e : events) sink(e);
  return OkStatus();
}

StatusOr<Snapshot> PerfBackend::TakeSnapshot(int64_t last_ns) {
  Snapshot snap;
  int64_t t0 = MonotonicNs();
  // Freeze every CPU first, then copy: the window ends at one instant on all
  // CPUs. PAUSE_OUTPUT stops ring output only; the counter keeps counting and
  // samples that cannot be written are counted as lost by the kernel
  // (perf_output_begin: `if (unlikely(rb->paused)) { local_inc(&rb->lost) ...}`).
  for (auto& c : cpus_) ioctl(c.sample_fd.get(), PERF_EVENT_IOC_PAUSE_OUTPUT, 1);
  PauseOffCpu(true);
  snap.SetWindow(static_cast<uint64_t>(MonotonicNs()), last_ns);
  struct PerCpu {
    int cpu;
    Counts counts;
    PerfRingBuffer::Copy copy;
  };
  std::vector<PerCpu> copies;
  std::vector<uint64_t> paused_in_window;
  for (const auto& c : cpus_) paused_in_window.push_back(PausedSince(c, snap.window_start_ns));
  for (auto& c : cpus_) {
    // In frequency mode and for the clocks (count grows by the ns between
    // samples) there is no exact count to protect, and no wait: only
    // discrete events (exact counts) pay it.
    const Counts counts = discrete_ && has_lost_format_
                              ? StableCounts(c.sample_fd.get(), *c.sample_ring, true, period_)
                              : ReadCounts(c.sample_fd.get(), has_lost_format_);
    PerCpu p{c.cpu, counts, c.sample_ring->CopyBackward()};
    copies.push_back(std::move(p));
  }
  if (!paused_) {
    for (auto& c : cpus_) ioctl(c.sample_fd.get(), PERF_EVENT_IOC_PAUSE_OUTPUT, 0);
    for (auto& c : cpus_) RecordPause(&c, snap.freeze_time_ns);
  }
  snap.copy_ns = MonotonicNs() - t0;

  int64_t tot_unaccounted = 0;
  // Each CPU's samples in its ring's order, oldest first, merged below.
  std::vector<std::vector<Sample>> runs(copies.size());
  for (size_t i = 0; i < copies.size(); ++i) {
    auto& p = copies[i];
    uint64_t in_ring = 0, outside = 0, ring_lost = 0, malformed = 0, sample_bytes = 0,
             throttles = 0, ring_lost_window = 0, oldest_in_window = 0;
    runs[i].reserve(p.copy.size());
    // The copy is newest first: walked backwards, the samples come out in
    // time order.
    for (size_t k = p.copy.size(); k-- > 0;) {
      const std::string_view rec = p.copy.record(k);
      ParseResult r =
          ParsePerfRecord(rec, sample_type_, static_cast<uint32_t>(p.cpu), kUserRegsMask);
      if (r.malformed) {
        ++malformed;
        continue;
      }
      if (r.type == PERF_RECORD_THROTTLE) ++throttles;
      if (!r.event) continue;
      if (auto* s = std::get_if<Sample>(&*r.event)) {
        ++in_ring;
        sample_bytes += rec.size();
        if (s->time_ns < snap.window_start_ns) {
          ++outside;
          continue;
        }
        if (oldest_in_window == 0 || s->time_ns < oldest_in_window) oldest_in_window = s->time_ns;
        runs[i].push_back(std::move(*s));
      } else if (auto* l = std::get_if<LostEvent>(&*r.event)) {
        ring_lost += l->count;
        // A record without a time cannot be placed: counted as in the window.
        if (l->time_ns == 0 || l->time_ns >= snap.window_start_ns) ring_lost_window += l->count;
      }
    }
    // produced: the kernel's own count / period (fixed-period events only).
    uint64_t produced = period_ ? p.counts.value / period_ : in_ring + p.counts.lost;
    // overwritten: measured from the ring itself, not inferred — the bytes the
    // kernel wrote that are no longer intact, in records of the size present.
    uint64_t overwritten_bytes = p.copy.total_written - p.copy.bytes_present;
    uint64_t overwritten = 0;
    if (overwritten_bytes > 0 && in_ring > 0) {
      overwritten = (overwritten_bytes * in_ring + sample_bytes / 2) / sample_bytes;
    }
    // What the kernel counted but no cause explains. Exactly 0 for discrete
    // events; for cpu-clock it is hrtimer periods that elapsed without a
    // sample (a late timer on a busy VM forwards over missed periods).
    int64_t unaccounted = static_cast<int64_t>(produced) -
                          static_cast<int64_t>(in_ring + p.counts.lost + overwritten);
    // The window's share of the overwritten samples: none while the ring
    // still holds a sample from before the window (it reaches back past the
    // window's start); otherwise the samples of the part of the window the
    // ring lost, at the rate of the part it kept (an estimate, at most all
    // that was overwritten).
    uint64_t over_window = 0;
    if (overwritten > 0 && outside == 0) {
      const uint64_t kept_ns =
          oldest_in_window ? snap.freeze_time_ns - oldest_in_window : uint64_t{0};
      const uint64_t gone_ns =
          oldest_in_window ? oldest_in_window - snap.window_start_ns : uint64_t{0};
      over_window =
          kept_ns > 0
              ? static_cast<uint64_t>(static_cast<double>(in_ring - outside) * gone_ns / kept_ns)
              : overwritten;
      over_window = std::min(over_window, overwritten);
    }
    // An explicit pause still in progress (PauseOutput) has dropped samples
    // up to now that no ended pause accounts for: inside the window.
    if (paused_) {
      const auto& log = cpus_[i].pauses;
      const uint64_t ended = log.empty() ? 0 : log.back().second;
      if (p.counts.lost > ended) paused_in_window[i] += p.counts.lost - ended;
    }
    const uint64_t lost_window = over_window + paused_in_window[i] + ring_lost_window;
    LossLedger cpu;
    cpu.Set(LossCounter::kProduced, produced);
    cpu.Set(LossCounter::kInRing, in_ring);
    cpu.Set(LossCounter::kInWindow, in_ring - outside);
    cpu.Set(LossCounter::kOutsideWindow, outside);
    cpu.Set(LossCounter::kPaused, p.counts.lost);
    cpu.Set(LossCounter::kOverwritten, overwritten);
    cpu.Set(LossCounter::kRingLostRecords, ring_lost);
    cpu.Set(LossCounter::kMalformed, malformed);
    cpu.Set(LossCounter::kLostInWindow, lost_window);
    cpu.Set(LossCounter::kOverwrittenInWindow, over_window);
    cpu.Set(LossCounter::kPausedInWindow, paused_in_window[i]);
    cpu.Set(LossCounter::kRingLostInWindow, ring_lost_window);
    snap.counters += cpu;
    tot_unaccounted += unaccounted;
    nlohmann::json pc = cpu.ToJson();
    pc.update({{"cpu", p.cpu},
               {"count", p.counts.value},
               {"unaccounted", unaccounted},
               {"throttle_records", throttles},
               {"bytes_written", p.copy.total_written},
               {"bytes_present", p.copy.bytes_present},
               {"overwritten_bytes", overwritten_bytes},
               {"sample_bytes_present", sample_bytes},
               {"time_enabled_ns", p.counts.enabled},
               {"time_running_ns", p.counts.running}});
    snap.per_cpu.push_back(std::move(pc));
  }
  uint64_t side_lost = 0;
  for (const auto& c : cpus_) side_lost += c.sideband_lost;
  snap.MergeSampleRuns(std::move(runs));
  // After the samples: they tell which blocked threads ran again.
  SnapshotOffCpu(&snap);
  PauseOffCpu(false);
  snap.unaccounted = tot_unaccounted;
  snap.counters.Set(LossCounter::kSidebandLost, side_lost);
  return snap;
}

Status PerfBackend::PauseOutput(bool paused) {
  for (auto& c : cpus_) {
    // kernel/events/core.c _perf_ioctl: PERF_EVENT_IOC_PAUSE_OUTPUT sets
    // rb->paused, which __perf_output_begin checks for every record.
    if (ioctl(c.sample_fd.get(), PERF_EVENT_IOC_PAUSE_OUTPUT, paused ? 1 : 0) != 0) {
      return ErrnoStatus(
          fmt::format("{} ring output on cpu {}", paused ? "pausing" : "resuming", c.cpu));
    }
  }
  if (paused) {
    paused_since_ns_ = static_cast<uint64_t>(MonotonicNs());
  } else if (paused_) {
    for (auto& c : cpus_) RecordPause(&c, paused_since_ns_);
  }
  paused_ = paused;
  return OkStatus();
}

void PerfBackend::RecordPause(Cpu* c, uint64_t paused_at_ns) {
  constexpr size_t kMaxPauses = 4096;  // ~ an hour of dumps at the default rate limit
  c->pauses.emplace_back(paused_at_ns, ReadCounts(c->sample_fd.get(), has_lost_format_).lost);
  if (c->pauses.size() > kMaxPauses) c->pauses.pop_front();
}

uint64_t PerfBackend::PausedSince(const Cpu& c, uint64_t window_start_ns) {
  if (c.pauses.empty()) return 0;
  // The total just before the window: after the last pause that began
  // before it (0 if none: the counter starts at 0).
  uint64_t before = 0;
  for (const auto& [at, total] : c.pauses) {
    if (at >= window_start_ns) break;
    before = total;
  }
  const uint64_t now = c.pauses.back().second;
  return now > before ? now - before : 0;
}

std::optional<HistoryPlan> PerfBackend::PlannedHistory() const {
  // A fixed period of a counted event: the rate is the workload's.
  if (discrete_ || cpus_.empty()) return std::nullopt;
  return PlanHistory(config_, cpus_[0].sample_ring->data_size());
}

nlohmann::json PerfBackend::Stats() {
  int64_t now = MonotonicNs();
  double elapsed = (now - start_ns_) / 1e9;
  nlohmann::json cpus = nlohmann::json::array();
  double min_held = -1;
  uint64_t side_lost = 0;
  for (auto& c : cpus_) {
    uint64_t written = c.sample_ring->BytesWritten();
    double rate = elapsed > 0 ? written / elapsed : 0;
    double held = rate > 0 ? std::min(elapsed, c.sample_ring->data_size() / rate) : elapsed;
    if (min_held < 0 || held < min_held) min_held = held;
    side_lost += c.sideband_lost;
    Counts counts = ReadCounts(c.sample_fd.get(), has_lost_format_);
    cpus.push_back({{"cpu", c.cpu},
                    {"bytes_written", written},
                    {"byte_rate", rate},
                    {"history_held_s", held},
                    {"count", counts.value},
                    {"paused_lost", counts.lost}});
  }
  // How long the blocking switch-outs' rings hold at their rates so far.
  double off_cpu_held = -1;
  for (auto& c : cpus_) {
    if (!c.out_ring) break;
    double rate = elapsed > 0 ? c.out_ring->BytesWritten() / elapsed : 0;
    double held = rate > 0 ? std::min(elapsed, c.out_ring->data_size() / rate) : elapsed;
    if (off_cpu_held < 0 || held < off_cpu_held) off_cpu_held = held;
  }
  nlohmann::json off_cpu = nullptr;
  if (off_cpu_held >= 0) off_cpu = {{"history_held_s", off_cpu_held}};
  return {{"uptime_s", elapsed},
          {"off_cpu", off_cpu},
          {"history_held_s", min_held < 0 ? 0 : min_held},
          {"sideband_lost", side_lost},
          {"cpus", cpus}};
}

}  // namespace flightrec::recorder::perf
