// Intel PT packet streams for tests, written with libipt's own encoder
// (pt_alloc_encoder / pt_enc_next: Debian ships libipt but not its pttc
// tool), and the record around them: the traced program's mapping as
// sideband, the stream as a CPU's AUX bytes. What a trace PMU would have
// written for a known control flow, so `recorder trace` can be checked
// against it without the hardware.
#pragma once

#include <intel-pt.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "recorder/record/aux_trace_section.h"

namespace flightrec::testing {

pt_packet PtPsb();
pt_packet PtPsbEnd();
pt_packet PtMode64();
pt_packet PtTsc(uint64_t tsc);
pt_packet PtFup(uint64_t ip);
pt_packet PtTipPge(uint64_t ip);
pt_packet PtTipPgdSuppressed();
// `bits` taken/not-taken outcomes, oldest first.
pt_packet PtTnt(const std::vector<bool>& bits);
// The packets' encoding (aborts the test binary on an encoder error: the
// packets are the test's own).
std::string EncodePt(const std::vector<pt_packet>& packets);

// tests/programs/fr_pt_calls as loaded at kBase: its symbols' run-time
// addresses (functions and the fr_pt_fault / fr_pt_spin labels, read with
// nm) and its build-id.
struct PtProgram {
  static constexpr uint64_t kBase = 0x555555554000;
  std::string path;
  std::string build_id;  // raw
  std::map<std::string, uint64_t> addr;
  uint64_t text_start = 0, text_len = 0, text_pgoff = 0;  // its executable mapping
};
PtProgram LoadPtProgram();

// fr_pt_calls' known run: PSB+ (64-bit mode, TSC tsc0, FUP main), three
// compressed returns, TSC tsc1, FUP fr_pt_fault + TIP.PGD.
std::string CallsTrace(const PtProgram& p, uint64_t tsc0, uint64_t tsc1);

// A record (events: the program's exec and text mapping as pid `pid`;
// aux_trace: `trace` as CPU 1's bytes) committed to the store in
// `store_dir`; returns its id. `build_id` overrides the mapping's build-id.
std::string WritePtRecord(const std::string& store_dir, const PtProgram& p, uint32_t pid,
                          const std::string& trace, const std::string& build_id = "",
                          const std::string& pmu = "intel_pt");

}  // namespace flightrec::testing
