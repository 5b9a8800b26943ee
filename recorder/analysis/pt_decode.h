// Intel PT decoding at query time: a CPU's AUX bytes (recorder/record/
// aux_trace_section.h) through libipt's instruction-flow decoder (pt_insn_*),
// against the code of the traced process's executable mappings, read from
// the files the record's sideband names (build-ids checked by the caller).
// The result is the control flow a user reads: calls, returns, where tracing
// was enabled or disabled (the fault: PT ends a user-only trace with
// FUP + TIP.PGD at the faulting instruction), gaps where the decoder lost
// sync, and the last instructions before the end.
//
// The trace bytes are hostile input (a record file): libipt bounds-checks
// packets; here the work is bounded too (instructions, steps kept), since a
// packet-free loop (`jmp .`) decodes forever.
//
// Thread: any; a call owns everything it uses.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace flightrec::recorder::analysis {

// One file-backed executable mapping of the traced process.
struct PtImageFile {
  uint64_t start = 0, len = 0, pgoff = 0;
  std::string path;
};

struct PtStep {
  enum class Kind { kEnabled, kCall, kReturn, kDisabled, kOverflow, kGap };
  Kind kind = Kind::kGap;
  uint64_t ip = 0;      // the call/return instruction; where tracing started/stopped
  uint64_t target = 0;  // call/return: the next instruction decoded (0: the trace ended)
  uint64_t tsc = 0;     // time of the last timing packet before it (has_tsc)
  bool has_tsc = false;
  int depth = 0;     // calls minus returns since the first step kept
  std::string note;  // a gap's libipt error
};
const char* PtStepName(PtStep::Kind k);

struct PtInsn {
  uint64_t ip = 0;
  uint8_t size = 0;
  uint8_t raw[15] = {};
  int iclass = 0;  // enum pt_insn_class
  uint64_t tsc = 0;
  bool has_tsc = false;
};
const char* PtInsnClassName(int iclass);

struct PtDecodeOptions {
  size_t max_steps = 1u << 20;       // the oldest are dropped first
  size_t last_insns = 16;            // instructions kept before the end
  uint64_t max_insns = 500'000'000;  // decoding stops there
};

struct PtDecoded {
  uint64_t instructions = 0;
  uint64_t steps_dropped = 0;
  uint64_t gaps = 0;
  bool insn_limit_hit = false;
  std::deque<PtStep> steps;
  std::deque<PtInsn> last;               // oldest first
  std::vector<std::string> image_notes;  // files that could not be added
};

// `trace` is one CPU's PT bytes. Fails only when the decoder cannot be
// set up; trace errors become gaps in the result.
StatusOr<PtDecoded> DecodePt(std::string_view trace, const std::vector<PtImageFile>& image,
                             const PtDecodeOptions& opts = {});

// TSC ticks to perf clock ns, as perf_event_mmap_page documents
// (include/uapi/linux/perf_event.h, cap_user_time_zero).
uint64_t TscToPerfTime(uint64_t tsc, uint32_t mult, uint16_t shift, uint64_t zero);

}  // namespace flightrec::recorder::analysis
