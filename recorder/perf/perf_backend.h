// PerfBackend: the perf_event capture backend (no kernel module needed).
//
// Per online CPU: one sampling event (hardware cycles where the CPU has a
// PMU, else cpu-clock) whose ring is in overwrite mode (write_backward,
// mapped read-only) and is read only when a dump freezes it; and one dummy
// event carrying mmap/mmap2(+build-id)/comm/exec/fork/exit sideband into a
// normal ring that the daemon drains continuously, so the information needed
// to attribute samples is never lost to overwriting.
//
// Thread: the daemon's io thread calls every method.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/scoped_fd.h"
#include "recorder/capture/capture_backend.h"
#include "recorder/capture/lock_waits.h"
#include "recorder/perf/ring_buffer.h"
#include "recorder/perf/sched_switch.h"

namespace flightrec::recorder::perf {

struct PerfConfig {
  uint32_t frequency_hz = 99;  // samples per second per CPU (docs/BENCHMARKS.md)
  int64_t history_ns = 30'000'000'000;
  size_t data_pages = 0;       // per CPU; 0 = sized from history x rate
  size_t sideband_pages = 64;  // per CPU
  bool callchain = true;
  // --call-graph dwarf,N: N > 0 samples the user registers and N bytes of the
  // user stack (unwound at replay time by recorder/unwind) instead of the
  // frame-pointer user chain; the kernel chain stays when callchain is set.
  uint32_t dwarf_stack_bytes = 0;
  // Test/expert override of the sampling event: type, config and a fixed
  // period in event units. Unset = cycles, else cpu-clock at frequency_hz.
  std::optional<uint32_t> event_type;
  uint64_t event_config = 0;
  uint64_t event_period = 0;
  // -1 = every process (system-wide, needs root/CAP_PERFMON); else sample
  // only this process and the children it forks (inherit).
  int target_pid = -1;
  // Off-CPU capture (sched:sched_switch, system-wide only): blocked threads'
  // switch-outs with their stacks in an overwrite ring of off_cpu_pages pages
  // per CPU (0 = 512, or 2048 in DWARF mode), every switch-in in one of
  // kSwitchInPages. Blocked intervals shorter than the threshold are dropped
  // from records. off_cpu_stack_bytes: the user stack a DWARF-mode switch-out
  // copies (0 = dwarf_stack_bytes); every switch-out of the machine costs it
  // in the ring, so a smaller copy holds longer.
  bool off_cpu = false;
  int64_t off_cpu_threshold_ns = 1'000'000;
  size_t off_cpu_pages = 0;
  uint32_t off_cpu_stack_bytes = 0;
};

// The largest rings sized from --history (pages per CPU): 16 MiB, and 32 MiB
// for DWARF samples (8 KiB stacks at 99 Hz for 30 s need 24 MiB).
inline constexpr size_t kMaxRingPages = 4096;
inline constexpr size_t kMaxDwarfRingPages = 8192;

// Pages of data ring (power of two, 8..max_pages) that hold history_ns at
// frequency_hz with bytes_per_sample each.
size_t RingPagesFor(int64_t history_ns, uint32_t frequency_hz, size_t bytes_per_sample,
                    size_t page_size, size_t max_pages = kMaxRingPages);

// Ring bytes one sample takes with this configuration (an estimate for
// frame-pointer chains, exact for the fixed part of a DWARF sample).
size_t BytesPerSample(const PerfConfig& config);

// What a sample ring of `ring_bytes` holds with `config` on a busy CPU
// (frequency_hz samples a second of BytesPerSample each), and the sentence
// that says it against config.history_ns.
HistoryPlan PlanHistory(const PerfConfig& config, size_t ring_bytes);

// The value of --call-graph: "fp", "none", "dwarf" or "dwarf,STACK_BYTES".
struct CallGraph {
  bool callchain = true;           // kernel (+ frame-pointer user) chain
  uint32_t dwarf_stack_bytes = 0;  // > 0: DWARF mode
  std::string ToString() const;
};
// perf's default dump size for --call-graph dwarf (tools/perf/util/callchain.h
// default_stack_dump_size = 8192).
inline constexpr uint32_t kDefaultDwarfStackBytes = 8192;
StatusOr<CallGraph> ParseCallGraph(const std::string& text);

class PerfBackend : public CaptureBackend {
 public:
  static StatusOr<std::unique_ptr<PerfBackend>> Create(const PerfConfig& config);
  ~PerfBackend() override;

  std::string name() const override { return "perf"; }
  nlohmann::json Describe() const override;
  std::vector<int> SidebandFds() const override;
  Status DrainSideband(const std::function<void(const Event&)>& sink) override;
  StatusOr<Snapshot> TakeSnapshot(int64_t last_ns) override;
  nlohmann::json Stats() override;
  std::optional<HistoryPlan> PlannedHistory() const override;
  const BlockedThreads* blocked_threads() const override {
    return config_.off_cpu ? &blocked_ : nullptr;
  }

  // PERF_EVENT_IOC_PAUSE_OUTPUT on every CPU's sampling event: while paused
  // the counter keeps counting and every sample it cannot write is counted in
  // lost_samples (PERF_FORMAT_LOST) — the "paused" loss cause. TakeSnapshot
  // pauses by itself and leaves the rings paused if they were paused before.
  Status PauseOutput(bool paused);
  bool paused() const { return paused_; }

  const std::string& event_name() const { return event_name_; }
  uint64_t period() const { return period_; }

 private:
  struct Cpu {
    int cpu = -1;
    ScopedFd sample_fd;
    std::optional<PerfRingBuffer> sample_ring;
    ScopedFd side_fd;
    std::optional<PerfRingBuffer> side_ring;
    uint64_t sideband_lost = 0;
    // Each past pause of the output (a dump's freeze, PauseOutput): when it
    // began and the lost_samples total once it ended. Pauses are the only
    // cause of lost_samples in an overwrite ring, and a dump's "lost" is what
    // pauses inside its window dropped, not the lifetime total. Bounded.
    std::deque<std::pair<uint64_t, uint64_t>> pauses;
    // Off-CPU capture: sched_switch filtered to blocking switch-outs (with
    // call chains), and unfiltered but chain-less for switch-ins.
    ScopedFd out_fd;
    std::optional<PerfRingBuffer> out_ring;
    ScopedFd in_fd;
    std::optional<PerfRingBuffer> in_ring;
    // ... and the same switch-ins into a normal ring drained as sideband:
    // each thread's last switch-in, however long ago (last_switch_in_).
    ScopedFd log_fd;
    std::optional<PerfRingBuffer> log_ring;
  };
  // Off-CPU capture (perf_backend_off_cpu.cc).
  Status OpenOffCpu(int cpu, Cpu* c);
  void PauseOffCpu(bool paused);
  // Copies the paused off-CPU rings into snap's intervals and accounting.
  void SnapshotOffCpu(Snapshot* snap);
  nlohmann::json DescribeOffCpu() const;
  nlohmann::json OffCpuCapacity() const;  // null until a switch-out was seen
  int64_t off_cpu_opened_ns_ = 0;
  // Applies the switch-in log's records up to `until` to last_switch_in_;
  // later ones go to *later (applied once the snapshot is matched).
  void DrainSwitchInLog(uint64_t until, std::vector<std::pair<uint32_t, uint64_t>>* later);
  void ApplySwitchIn(uint32_t tid, uint64_t time_ns);
  std::unordered_map<uint32_t, uint64_t> last_switch_in_;
  LockWaitTable lock_waits_;
  // Who is blocked now, from the same log (its records also carry the
  // switch-out of a blocking thread to idle: see OpenOffCpu).
  BlockedThreads blocked_;
  uint64_t last_switch_in_complete_since_ns_ = UINT64_MAX;
  uint64_t switch_in_log_lost_ = 0;
  SchedSwitchFormat sched_switch_;
  uint64_t out_sample_type_ = 0;
  size_t off_cpu_pages_ = 0;
  // The lost_samples a CPU's pauses since window_start dropped (those of the
  // freeze in progress excluded: they fall after the window).
  static uint64_t PausedSince(const Cpu& c, uint64_t window_start_ns);
  void RecordPause(Cpu* c, uint64_t paused_at_ns);
  uint64_t paused_since_ns_ = 0;
  PerfBackend() = default;
  Status OpenCpu(int cpu, const perf_event_attr& sample_attr, Cpu* out);

  PerfConfig config_;
  std::string event_name_;
  std::string fallback_reason_;
  uint64_t period_ = 0;
  bool has_lost_format_ = false;
  bool has_build_id_ = false;
  bool exclude_kernel_ = false;
  size_t data_pages_ = 0;
  std::vector<Cpu> cpus_;
  int64_t start_ns_ = 0;
  uint64_t sample_type_ = 0;
  bool paused_ = false;
  bool discrete_ = false;  // fixed period of a counted event: exact accounting
};

}  // namespace flightrec::recorder::perf
