// Exports of a replayed record into other tools' formats. Each exporter is a
// consumer of analysis::Replay: Begin once, Add per sample in time order,
// Finish writes the rest. Output goes to a stream the caller commits
// atomically (the CLI through common/atomic_output_file.h).
//
//   folded    "comm;outer;...;inner count" lines, for flamegraph.pl & co.
//   chrome    Chrome trace-event JSON: per-thread stacks as nested B/E
//             slices, per-CPU lanes of what ran; opens in ui.perfetto.dev
//             and chrome://tracing.
//   perfetto  Perfetto's native protobuf trace: each sample a PerfSample
//             with an interned stack, a ClockSnapshot, named process/thread/
//             CPU tracks with one slice set per sample (never merged);
//             opens in ui.perfetto.dev and trace_processor.
//   pprof     profile.proto, gzip-compressed: one pprof sample per recorded
//             sample, with pid/tid/cpu/comm and timestamp_ns labels, inlined
//             frames as multiple lines of one location; `go tool pprof`.
//   perf      perf.data as `perf record` writes it (perf_data.cc), for perf
//             report/script, hotspot and stackcollapse-perf.
//   otlp      the OpenTelemetry profiles signal (otlp.cc): ProfilesData of
//             profiles/v1development, uncompressed protobuf; each recorded
//             sample an observation (timestamp, value) of a Sample keyed by
//             stack and thread/process/CPU attributes; build-ids on mappings.
//   svg       a self-contained interactive flame graph (recorder flamegraph).
//
// A user stack that DWARF unwinding could not finish (the stack copy was too
// short, a file is missing, no CFI covers a frame) gets a marker frame at its
// root end, between the process and the outermost frame that was found —
// "[truncated]", "[truncated:missing_file]", ... — so that no export shows
// such a stack as if it were whole. pprof samples also carry the reason and
// place as labels (unwind, unwind_where).
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "recorder/analysis/replay.h"

namespace flightrec::recorder::exporter {

class Exporter {
 public:
  virtual ~Exporter() = default;
  virtual void Begin(const analysis::RecordInfo& info, std::ostream* out) = 0;
  virtual void Add(const analysis::ResolvedSample& s) = 0;
  virtual Status Finish() = 0;
  // What the output leaves out or changes, for the user (stderr), after
  // Finish: e.g. frames a format cannot express.
  virtual std::vector<std::string> Notes() const { return {}; }
};

// The formats `recorder export --format` accepts.
const std::vector<std::string>& ExportFormats();

struct ExportOptions {
  std::string title;  // svg: the graph's title ("" = the record id)
};

// Unknown formats are an InvalidArgument that lists the valid ones.
StatusOr<std::unique_ptr<Exporter>> MakeExporter(std::string_view format,
                                                 const ExportOptions& opts = {});

// Small pieces with their own unit tests.
std::string XmlEscape(std::string_view s);
std::string JsonEscape(std::string_view s);
// "a;b c" → "a_b_c": a name inside a folded stack line.
std::string FoldedName(std::string_view s);
// The root-end marker frame of a sample whose user stack is incomplete, or
// "" for a complete (or not DWARF-unwound) one.
std::string IncompleteStackMarker(const attribution::AttributedSample& s);

// The name that names the sample's process in the trace exports: the
// sideband's (ResolvedSample::process_comm) when the replay knows it, else
// its main thread's own sample's; null for another thread's sample without
// it (pthread_setname_np's worker-one is not the process's name).
const std::string* ProcessName(const analysis::ResolvedSample& rs);

}  // namespace flightrec::recorder::exporter
