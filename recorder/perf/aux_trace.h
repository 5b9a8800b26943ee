// Hardware branch trace in the perf backend (recorderd --aux-trace): a trace
// PMU (intel_pt, arm_spe, cs_etm) opened per CPU with an AUX area in snapshot
// (overwrite) mode beside a small DATA ring, and the snapshot a dump takes of
// it. Mainline lets only a user-space perf fd own an AUX area, so this is the
// daemon's, whatever the sampling backend.
//
// Snapshot mode: the AUX area is mapped without PROT_WRITE, which makes the
// ring "overwrite" (kernel/events/ring_buffer.c, rb_alloc_aux:
// rb->aux_overwrite = !(flags & RING_BUFFER_WRITABLE)), so the PMU keeps
// writing round the buffer and never stops for a reader. The kernel publishes
// aux_head only when the driver ends an output handle
// (perf_aux_output_end, called from the PMU's stop: sched-out, disable), so a
// snapshot disables the event, reads aux_head, copies, and enables it again.
// In overwrite mode Intel PT's aux_head is an offset within the area, not a
// running count (tools/perf/arch/x86/util/intel-pt.c, intel_pt_find_snapshot),
// so whether the area has wrapped is read from the bytes: the area starts
// zeroed, and a wrapped area has trace in its last 4 KiB (intel_pt_first_wrap).
//
// The crash cut: on 6.13+ kernels an event with attr aux_pause in the trace's
// group pauses the trace in the kernel when it fires (perf_event_aux_pause:
// the PMU's stop with PERF_EF_PAUSE), so the area ends at the crash however
// late the daemon reads it. On older kernels the daemon disables the event
// when it learns of the crash (the hook's request, a dump): the trace then
// also holds whatever the CPU ran between the crash and that disable.
//
// Thread: owned and used by the daemon's io thread.
#pragma once

#include <linux/perf_event.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/scoped_fd.h"
#include "common/status.h"
#include "recorder/model/events.h"
#include "recorder/record/aux_trace_section.h"

namespace flightrec::recorder::perf {

// `--aux-trace pt[,size=4M][,cyc][,mtc][,branch-only][,user|kernel]`.
struct AuxTraceSpec {
  std::string kind = "pt";           // pt, spe, etm
  uint64_t size_bytes = 4ull << 20;  // per CPU: a power of two, 64 KiB .. 1 GiB
  bool cyc = false, mtc = false, branch_only = false;
  bool user = true, kernel = false;
};
StatusOr<AuxTraceSpec> ParseAuxTraceSpec(const std::string& text);
// The PMU directory names a kind may have (arm_spe_0, cs_etm).
std::vector<std::string> PmuNamesFor(const std::string& kind);

// What /sys/bus/event_source/devices says about the trace PMU.
struct TracePmu {
  bool present = false;
  std::string name;                           // "intel_pt"
  uint32_t type = 0;                          // perf_event_attr.type
  std::string why;                            // when absent: what was looked for
  std::map<std::string, std::string> format;  // format/<term>: "config:13"
};
TracePmu ProbeTracePmu(const std::string& kind,
                       const std::string& sysfs = "/sys/bus/event_source/devices");

// Sets the bits of a format term ("config:13", "config:14-17", "config1:0")
// to `value` in attr; InvalidArgument for an unknown term or shape.
Status SetFormatTerm(const TracePmu& pmu, const std::string& term, uint64_t value,
                     perf_event_attr* attr);
// The trace event's attributes: type, the knobs the spec sets through the
// PMU's format terms, user/kernel filters, disabled until the AUX area exists.
StatusOr<perf_event_attr> BuildAuxTraceAttr(const TracePmu& pmu, const AuxTraceSpec& spec);
// perf_event_attr.aux_action (include/uapi/linux/perf_event.h, 6.13+): the
// u32 after aux_sample_size, which older headers call __reserved_3. Bit 0
// aux_start_paused, bit 1 aux_pause, bit 2 aux_resume. Older kernels refuse
// any of them with EINVAL (perf_copy_attr checks the reserved field).
inline constexpr uint32_t kAuxStartPaused = 1u << 0;
inline constexpr uint32_t kAuxPause = 1u << 1;
inline constexpr uint32_t kAuxResume = 1u << 2;
void SetAuxAction(perf_event_attr* attr, uint32_t bits);

// The 6.13+ crash cut, built but not yet opened by AuxTraceCapture: a
// kprobe on the core-dump entry (`func`, "vfs_coredump" on 6.13+, formerly
// "do_coredump"), sampling every hit, with aux_pause set, to be opened per
// CPU in the trace event's group (group_fd = the trace fd) so that a crash
// pauses that CPU's trace in the kernel. `kprobe_type` is
// /sys/bus/event_source/devices/kprobe/type. attr.kprobe_func points into
// `func`, which must outlive the perf_event_open call.
perf_event_attr BuildCrashPauseAttr(uint32_t kprobe_type, const std::string& func);

// The snapshot of an overwrite-mode area of `size` bytes whose aux_head is
// `head` (for PT an offset within the area; a running count also works):
// the bytes oldest first. `wrapped`: the PMU has gone round the area at
// least once (AreaWrapped, or head >= size).
std::string SnapshotBytes(const uint8_t* area, uint64_t size, uint64_t head, bool wrapped);
// intel_pt_first_wrap: trace (a non-zero byte) in the area's last 4 KiB.
bool AreaWrapped(const uint8_t* area, uint64_t size);

// One CPU's trace event and its mappings.
struct AuxCpu {
  int cpu = 0;
  ScopedFd fd;
  ScopedMmap base;  // control page + DATA ring (PERF_RECORD_AUX records)
  ScopedMmap aux;   // the AUX area, PROT_READ: overwrite mode
  uint64_t data_tail = 0;
};

class AuxTraceCapture {
 public:
  // Opens the PMU on every online CPU; Unavailable naming the PMU when it is
  // absent or refuses (the daemon records without trace and says why).
  static StatusOr<std::unique_ptr<AuxTraceCapture>> Open(const AuxTraceSpec& spec);
  // Disables each CPU's event, copies its area, enables it again. The
  // tasks to decode against are left 0 (AssignTracedTasks).
  AuxTrace Snapshot();
  nlohmann::json Describe() const;

 private:
  AuxTraceCapture() = default;
  uint64_t DrainAuxFlags(AuxCpu& c);
  TracePmu pmu_;
  AuxTraceSpec spec_;
  perf_event_attr attr_{};
  std::vector<AuxCpu> cpus_;
  uint64_t snapshots_ = 0;
};

// Names the task each CPU's trace is decoded against: the last sampled
// task on that CPU, and for a crash the crashing process on the CPU where it
// was last sampled. `samples` are in time order.
void AssignTracedTasks(const std::vector<Sample>& samples, uint32_t crash_pid, AuxTrace* t);

// `status`'s aux_trace object when no capture runs: whether the PMU exists
// and why trace is off.
nlohmann::json AuxTraceOffJson(const TracePmu& pmu, bool requested, const std::string& why);

}  // namespace flightrec::recorder::perf
