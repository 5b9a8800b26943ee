// ModuleBackend: the capture backend over flightrec.ko (/dev/flightrec).
//
// The module samples every CPU from boot into its own overwrite rings (DATA:
// variable-length sample records; AUX: registers + user stack bytes; SIDEBAND:
// mmap/exec/fork/exit in a ring that does not overwrite). This backend drains
// SIDEBAND into the daemon's process table like the perf backend's sideband,
// and a dump freezes the module (FREEZE), copies each CPU's DATA and AUX
// ranges out (READ_RING), thaws, and converts the records into the same
// `Sample` events the perf backend produces — so records from either backend
// replay through the same attribution pipeline. Loss comes from the module's
// exact per-CPU counters (module/uapi/flightrec.h).
//
// Crash markers: at the start of every core dump the module preserves every
// CPU's rings in one of its few marker slots. A dump that names a crashed pid
// (the coredump hook's) is built from that pid's marker, so the history ends
// at the crash even though it is read later, and the slot is freed. Markers
// nobody claims within `marker_ttl_ns` are freed too, or a few crashes
// without a hook would fill every slot and later crashes would be dropped.
#pragma once

#include <linux/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/scoped_fd.h"
#include "module/uapi/flightrec.h"
#include "recorder/capture/capture_backend.h"

namespace flightrec::recorder::module {

// What a sample keeps of the module's record (--call-graph): the module
// always records the kernel chain, the user frame-pointer chain and (AUX)
// registers + stack bytes; the daemon keeps what was asked for.
struct CallGraphMode {
  bool callchain = true;           // false (none): only the sampled ip
  uint32_t dwarf_stack_bytes = 0;  // > 0 (dwarf): registers + at most this many stack bytes
  std::string ToString() const;    // fp, none, dwarf,N: as perf's --call-graph
};

struct ModuleConfig {
  bool callchain = true;
  // --call-graph dwarf: use the module's stack_bytes (dwarf_stack_bytes == 0)
  // or at most dwarf_stack_bytes of it; --call-graph fp/none: no stack bytes.
  bool dwarf = false;
  uint32_t dwarf_stack_bytes = 0;
  // Unclaimed crash markers are freed once this old (recorderd: --history;
  // at least 1 s).
  int64_t marker_ttl_ns = 30'000'000'000;
};

// The mode these options give with a module that copies `module_stack_bytes`
// bytes of user stack per sample, or an error that says what to change.
StatusOr<CallGraphMode> ResolveCallGraph(const ModuleConfig& config, uint32_t module_stack_bytes);

// Pure conversions, exposed for unit tests.
std::optional<Event> SidebandEvent(const flightrec_sideband& r);
// A drained batch of sideband records as events, execs moved before the
// mappings of the image they loaded (see the .cc).
std::vector<Event> OrderSideband(std::vector<flightrec_sideband> batch);
// One DATA record decoded: its header and its frames, split.
struct SampleRecord {
  flightrec_sample h{};
  uint64_t kframes[FLIGHTREC_MAX_KFRAMES]{};
  uint64_t uframes[FLIGHTREC_MAX_UFRAMES]{};
};
// Walks the variable-length DATA records in [p, p + len), the first at ring
// position `first` (a record boundary), skipping PAD records. A record whose
// size, type, position or frame counts do not add up ends the walk: it and
// what follows are counted in *malformed (bytes), never read.
std::vector<SampleRecord> ParseDataRecords(const uint8_t* p, size_t len, uint64_t first,
                                           uint64_t* malformed);
// aux: the AUX blob of this sample (header + stack), or nullptr.
Sample SampleFromRecord(const SampleRecord& r, uint64_t period_ns, const flightrec_aux* aux,
                        const uint8_t* stack, size_t stack_len, const CallGraphMode& mode = {});

// One CPU's copy of its DATA records and AUX bytes [aux_first, aux_end) (from
// the live rings or a crash marker).
struct CpuCopy {
  const SampleRecord* records = nullptr;
  size_t count = 0;
  const uint8_t* aux = nullptr;
  uint64_t aux_first = 0;
  uint64_t aux_end = 0;
};
// Appends the CPU's samples taken at or after window_start_ns to *out, each
// with its AUX blob when the blob is still whole in the copy and belongs to it
// (its seq matches); returns how many were older than the window.
uint64_t AppendSamples(const CpuCopy& cpu, uint64_t window_start_ns, uint64_t period_ns,
                       const CallGraphMode& mode, std::vector<Sample>* out);

// "active", "error", ...: enum flightrec_event_state as status and loss summaries name it.
std::string EventStateName(int32_t state);
// Why the module takes no crash markers, from STATS (crash_hook NONE and its
// errno) and its crash_hook/coredump_symbol load parameters; "" if it does.
std::string CrashHookReason(const flightrec_stats& s, const std::string& hook_param,
                            const std::string& symbol_param);

// The newest marker of `pid` taken within ttl_ns before now_ns, or nullptr.
const flightrec_marker* FindMarker(const std::vector<flightrec_marker>& markers, uint32_t pid,
                                   uint64_t now_ns, int64_t ttl_ns);
// Markers older than ttl_ns at now_ns: nobody asked for them in time.
std::vector<flightrec_marker> StaleMarkers(const std::vector<flightrec_marker>& markers,
                                           uint64_t now_ns, int64_t ttl_ns);

class ModuleBackend : public CaptureBackend {
 public:
  static StatusOr<std::unique_ptr<ModuleBackend>> Create(
      const std::string& device = FLIGHTREC_DEVICE, const ModuleConfig& config = {});

  std::string name() const override { return "module"; }
  nlohmann::json Describe() const override;
  std::vector<int> SidebandFds() const override { return {}; }  // drained on the daemon's timer
  Status DrainSideband(const std::function<void(const Event&)>& sink) override;
  StatusOr<Snapshot> TakeSnapshot(int64_t last_ns) override;
  StatusOr<Snapshot> TakeCrashSnapshot(uint32_t pid, int64_t last_ns, int64_t wait_ns) override;
  nlohmann::json Stats() override;

 private:
  ModuleBackend() = default;
  // STATS with the counters' event state, throttling and times
  // (FLIGHTREC_STATS_EVENT), or only the plain counters from an older module.
  StatusOr<std::vector<flightrec_cpu_stats_ev>> ReadStats(flightrec_stats* global);
  StatusOr<std::vector<flightrec_marker>> ListMarkers();
  // Frees the markers nobody claimed within the TTL; a failure is kept in
  // marker_error_ for status.
  void ReleaseStaleMarkers();
  StatusOr<Snapshot> SnapshotFromMarker(const flightrec_marker& m, int64_t last_ns);
  uint64_t SamplePeriodNs() const;

  ScopedFd fd_;
  flightrec_info info_{};
  ModuleConfig config_;
  CallGraphMode mode_;
  uint64_t markers_claimed_ = 0;
  uint64_t markers_released_unclaimed_ = 0;
  std::string marker_error_;     // last LIST/RELEASE failure, for status
  bool has_event_stats_ = true;  // false once STATS refused FLIGHTREC_STATS_EVENT
  uint64_t sideband_lost_ = 0;   // records the module announced lost (SB_LOST)
  uint64_t sideband_gaps_ = 0;   // SB_LOST records seen
};

}  // namespace flightrec::recorder::module
