// Replay of a stored record through the one attribution pipeline: decode the
// record's events, feed them in time order to an Attributor (the same code the
// daemon runs live), optionally unwind DWARF user stacks, symbolize each frame
// once per (cookie, offset) and hand every sample to the caller.
//
// Every query command (report, script, timeline, export, flamegraph, crash
// info) is a consumer of Replay(); none of them re-implements attribution.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "recorder/attribution/attribution.h"
#include "recorder/attribution/process_labels.h"
#include "recorder/capture/off_cpu.h"
#include "recorder/unwind/unwind_stats.h"
#include "store/record_file.h"

namespace flightrec::recorder::analysis {

// What the record says about itself, handed to consumers before any sample.
struct RecordInfo {
  std::string id;
  std::string kind;       // dump | record | crash
  std::string host;       // the record header's host and kernel release
  std::string kernel;     // ("" if unknown)
  std::string boot_id;    // the record header's boot_id ("" if unknown)
  nlohmann::json config;  // the record's `config` section
  nlohmann::json loss;    // the record's `loss` section
  // Where each process ran (meta.processes; empty in older records).
  std::unordered_map<uint32_t, attribution::ProcessLabels> labels;
  int64_t mono_to_wall_ns = 0;   // add to a sample's time_ns for wall-clock ns
  uint64_t window_start_ns = 0;  // CLOCK_MONOTONIC, 0 if unknown
  uint64_t window_end_ns = 0;    // freeze time, 0 if unknown
  // Add to a sample's time_ns for CLOCK_BOOTTIME ns; absent in records made
  // before records kept it.
  std::optional<int64_t> mono_to_boot_ns;
  // The GNU build-id (hex) of the vDSO image the record keeps ("" if none):
  // exports that name [vdso] frames elsewhere than here (perf.data) say
  // which image they are in.
  std::string vdso_build_id;
  // The record was written with off-CPU capture on (recorderd --off-cpu),
  // and the threshold below which blocked intervals were left out.
  bool off_cpu = false;
  int64_t off_cpu_threshold_ns = 0;
};

// One attributed, symbolized sample. `stack` is innermost first and may be
// longer than sample.frames: a frame whose address lies in inlined code
// expands to the inlined functions first (Symbol::inlined = true), then the
// function they were inlined into. Pointers stay valid for the whole replay
// (symbols are cached), so consumers may keep them.
struct ResolvedSample {
  const attribution::AttributedSample* sample = nullptr;
  std::span<const attribution::Symbol* const> stack;
  // Samples with the same non-zero stack_id have the same pid and stack (not
  // the same tid or comm: threads share code): consumers may memoize
  // per-stack work under it. 0 = not shared.
  uint64_t stack_id = 0;
  // The files the frames' cookies name (build-ids), as known at this sample;
  // null when the caller has none. Valid only during the callback.
  const attribution::CookieTable* cookies = nullptr;
  // The process's name at this sample: its main thread's, as the sideband
  // (fork, exec, prctl comm events) left it, whichever thread was sampled;
  // null when unknown (a live-attribution record carries no sideband).
  // Valid only during the callback.
  const std::string* process_comm = nullptr;
  // The path of the process's executable (its first executable mapping since
  // its exec), null when unknown, as process_comm.
  const std::string* process_exe = nullptr;
  // Set for an off-CPU interval (ReplayOptions::off_cpu): its state and
  // whether the thread was still blocked at the freeze. sample->time_ns is
  // then its switch-out and sample->period the nanoseconds it was off CPU.
  const OffCpuInterval* off_cpu = nullptr;
  // Set for a sampled memory growth (ReplayOptions::mem_growth): a page
  // fault sample of section `mem_growth`, sample->period faults.
  bool mem_growth = false;
};

struct ReplayOptions {
  std::optional<uint32_t> pid;
  // Only these processes (what --cgroup, --unit, --container select).
  std::optional<std::unordered_set<uint32_t>> pids;
  std::optional<uint32_t> tid;
  // Offsets from the window start (ns); samples outside are skipped.
  std::optional<int64_t> since_ns;
  std::optional<int64_t> until_ns;
  bool unwind = true;  // use DWARF user stacks when the record has them
  // Use the frames the daemon attributed at capture time (section
  // `live_attribution`, written by `recorder dump --live-attribution`)
  // instead of re-attributing the events. Same symbolization either way.
  bool live = false;
  bool progress = true;  // show progress on a terminal for work over a second
  // Source file:line on frames (DWARF line tables); off for consumers that
  // show only functions, which then replay faster.
  bool source_lines = true;
  // Each sample's thread and process names (AttributedSample::tid resolved
  // and ::comm, ResolvedSample::process_comm and ::process_exe); off for
  // consumers that key by function, DSO or process only, which then skip a
  // thread lookup per sample (comm and the process names are then left as
  // the first sample of the stack had them, and the two pointers null).
  bool thread_names = true;
  // Also hand over the record's off-CPU intervals (section `off_cpu`), in
  // time order with the samples, each with ResolvedSample::off_cpu set. A
  // time filter keeps the intervals that overlap it.
  bool off_cpu = false;
  // Also hand over the record's memory growth samples (section
  // `mem_growth`, records of kind oom), each with ResolvedSample::mem_growth.
  bool mem_growth = false;
};

struct ReplayStats {
  uint64_t events = 0;
  uint64_t samples = 0;               // samples handed to the consumer
  uint64_t off_cpu_intervals = 0;     // off-CPU intervals handed to the consumer
  uint64_t filtered = 0;              // samples skipped by pid/tid/time filters
  uint64_t no_mapping = 0;            // user IPs with no known mapping
  uint64_t files_opened = 0;          // distinct files the symbolizer read
  std::unordered_set<uint32_t> pids;  // processes of the samples handed over
  // Processes of the samples the filters skipped: what to name when a filter
  // matched nothing.
  std::unordered_set<uint32_t> filtered_pids;
  // DWARF unwinding of the samples handed to the consumer (all zero when the
  // record has no stack copies or opts.unwind is off): how many user stacks
  // were complete, and where and why the others stopped. The samples
  // themselves say it too (AttributedSample::unwind).
  unwind::UnwindStats unwind;
};

using InfoFn = std::function<void(const RecordInfo&)>;
using SampleFn = std::function<void(const ResolvedSample&)>;

// Replays `reader`'s record. Errors name the record and what is wrong with it
// (corrupt section, foreign file, unsupported version).
StatusOr<ReplayStats> Replay(const store::RecordReader& reader, const ReplayOptions& opts,
                             const InfoFn& on_info, const SampleFn& on_sample);

}  // namespace flightrec::recorder::analysis
