// A record's hardware trace, decoded and named: each CPU's AUX bytes
// (section `aux_trace`) through DecodePt against the traced process's
// executable mappings as the record's sideband left them (the files found by
// path and accepted only when their build-id is the one the record names),
// each address named by the same Symbolizer the reports use. What `recorder
// trace` prints and the fuzz harness drives.
//
// Thread: one caller.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "recorder/analysis/pt_decode.h"
#include "recorder/record/aux_trace_section.h"
#include "store/record_file.h"

namespace flightrec::recorder::analysis {

struct NamedStep {
  PtStep step;
  std::string function;             // where ip is
  std::string target_function;      // where target is (calls, returns)
  std::optional<uint64_t> time_ns;  // perf clock, with TSC in the trace
};

struct NamedInsn {
  PtInsn insn;
  std::string function;
  std::optional<uint64_t> time_ns;
};

struct CpuFlow {
  AuxCpuTrace meta;  // data cleared: what the CPU entry says
  uint64_t bytes = 0;
  std::string comm;
  PtDecoded decoded;  // steps and last are moved into the named vectors
  std::vector<NamedStep> steps;
  std::vector<NamedInsn> last;
  uint64_t steps_before_window = 0;  // left out by `last_ns`
  std::vector<std::string> image_notes;
};

struct TraceQuery {
  std::optional<uint32_t> pid, cpu;
  int64_t last_ns = 0;  // > 0: only steps within this long of the CPU's last timed step
  PtDecodeOptions decode;
};

struct RecordTrace {
  std::string pmu;
  std::vector<CpuFlow> cpus;
};

// Errors: the record has no trace (NotFound), a corrupt section or events,
// --last on a trace without timing packets. A PMU other than intel_pt is
// reported, not decoded.
StatusOr<RecordTrace> DecodeRecordTrace(const store::RecordReader& reader, const TraceQuery& q);

}  // namespace flightrec::recorder::analysis
