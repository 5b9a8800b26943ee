// Writing a dump into a record, and reading it back for replay. Both sides of
// "one pipeline": what WriteDump stores is exactly what the Attributor needs
// (the processes' mappings as events, then the samples), and LoadDump hands
// the same events back to the same Attributor.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "recorder/attribution/attribution.h"
#include "recorder/attribution/process_labels.h"
#include "recorder/capture/capture_backend.h"
#include "recorder/record/sections.h"
#include "store/store.h"

namespace flightrec::recorder {

// What a record keeps of kernel frames. Root's records keep the addresses
// (and the kallsyms lines that name them); records for a user hold none
// (recorderd --kernel-frames-for-users): /proc/kallsyms hides them from
// users, and one kernel address defeats KASLR.
enum class KernelFrames {
  kAddresses,   // raw addresses + section `kallsyms`
  kSymbolized,  // name references + section `kernel_names`, resolved at write time
  kNone,        // no kernel frames; a sample in the kernel keeps one unnamed frame
};
const char* KernelFramesName(KernelFrames k);
StatusOr<KernelFrames> ParseKernelFrames(const std::string& name);

struct DumpRequest {
  int64_t last_ns = 5'000'000'000;
  std::vector<uint32_t> pids;  // empty = every process
  std::string reason = "manual";
  RecordKind kind = RecordKind::kDump;
  // The coredump hook's request: the history of this crashed process, from
  // its crash marker when the backend keeps them (0: none).
  uint32_t crash_pid = 0;
  // Also store each sample as the daemon attributes it now, from its live
  // process table (section `live_attribution`): `recorder script --live`
  // shows it, and a test checks it equals the replay of the record.
  bool live_attribution = false;
  KernelFrames kernel_frames = KernelFrames::kAddresses;
  // Whose space the record uses for retention (the crashed uid for the hook's
  // history, the requester otherwise): one user's dumps never evict another's.
  uint32_t owner_uid = 0;
  // A record of another boot (a kernel panic's, recorder/module/panic_ingest.h):
  // its samples' clock is that boot's, so are these offsets (default: now).
  std::optional<int64_t> mono_to_wall_ns;
  std::optional<int64_t> mono_to_boot_ns;
  // Where each recorded process runs (cgroup, unit, container, pod,
  // namespaces), asked once per process of the record with whether the
  // sideband saw it exit; unset or nullopt: the record names none.
  std::function<std::optional<attribution::ProcessLabels>(uint32_t pid, bool exited)> labels;
  // Kind-specific sections and index metadata keys (a panic's `panic`).
  std::vector<std::pair<std::string, std::string>> extra_sections;
  nlohmann::json extra_meta = nlohmann::json::object();
};

struct DumpResult {
  store::RecordRow row;
  uint64_t samples = 0;
  double covered_s = 0;
  double asked_s = 0;
  uint64_t lost = 0;
  int64_t took_ns = 0;
  nlohmann::json ToJson() const;
  std::string Summary() const;
};

// A dump of given pids must name processes: every pid in req.pids must be
// alive now, have a sample in the snapshot, or a sideband event (fork, exec,
// mmap, exit) inside its window. Otherwise NotFound naming the pids: a typo'd
// pid is an error, not an empty record.
Status CheckRequestedPids(const DumpRequest& req, const Snapshot& snap,
                          const attribution::SidebandHistory& history);

// Filters the snapshot, writes sections `events`, `kallsyms` (or
// `kernel_names`, per req.kernel_frames), `config`, `loss`, `vdso` (when a
// sampled process maps one) and commits the
// record with its index metadata.
StatusOr<DumpResult> WriteDump(store::Store& store, const DumpRequest& req, Snapshot snap,
                               const attribution::SidebandHistory& history,
                               const attribution::KernelSymbols& ksyms,
                               const nlohmann::json& backend_description, int64_t started_ns);

struct LoadedDump {
  std::vector<Event> events;
  std::string events_raw;  // the encoded events, when not decoded (decode_events = false)
  std::string kallsyms;
  std::string kernel_names;  // records without kernel addresses
  std::string vdso;          // the writer's vDSO image ("" in older records)
  nlohmann::json config;
  nlohmann::json loss;
  // The table that names the record's kernel frames, whichever form it has.
  StatusOr<attribution::KernelSymbols> Kernel() const;
};

// Decodes a record's dump sections; errors name the record and section.
// With decode_events = false the events stay encoded in events_raw, for
// callers that stream them through an EventDecoder (replay of big records).
// read_events = false skips the events section entirely (the caller streams it).
StatusOr<LoadedDump> LoadDump(const store::RecordReader& reader, bool decode_events = true,
                              bool read_events = true);

// Offset to add to CLOCK_MONOTONIC ns to get wall-clock ns, now.
int64_t MonotonicToWallOffset();

}  // namespace flightrec::recorder
