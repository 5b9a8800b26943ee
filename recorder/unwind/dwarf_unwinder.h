// DWARF unwinding of sampled user stacks (--call-graph dwarf), offline, at
// replay time: the registers and stack bytes a sample carries
// (Sample::user_stack, from PERF_SAMPLE_REGS_USER + PERF_SAMPLE_STACK_USER or
// the module's AUX ring) are unwound with libunwind's remote API against the
// CFI of the files the record's cookie table names, each verified by
// build-id, and of the vDSO image the record carries (set_vdso): .eh_frame through its
// .eh_frame_hdr search table, .eh_frame without one (a table is built), and .debug_frame (converted
// to .eh_frame form: cfi_scan.cc reads the CFI, overlay.cc says why and how it is converted;
// dwarf_unwinder.cc holds the libunwind accessors).
//
// Why libunwind remote rather than libdw's dwfl_frame: the remote API lets
// every memory access be answered from the sample's copy or from an mmap of
// the file without a Dwfl per process, and its register-state API
// (unw_reg_states_iterate / unw_apply_reg_state) lets the rows of each FDE be
// read once and kept, so a repeated frame costs one hash lookup
// (docs/BENCHMARKS.md, "DWARF unwinding").
//
// A stack that cannot be unwound completely is never guessed: libunwind's
// frame-pointer fallback is disabled (find_proc_info reports a hard error
// instead of UNW_ENOINFO), the frames unwound so far are returned and
// UnwindNote says why it stopped and where.
//
// Thread: used by the one thread that drives the Attributor.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "recorder/attribution/attribution.h"
#include "recorder/unwind/unwind_stats.h"

namespace flightrec::recorder::unwind {

class DwarfUnwinder : public attribution::UserUnwinder {
 public:
  // Frames beyond this are cut (perf's default kernel.perf_event_max_stack is
  // 127; a DWARF copy of 64 KiB rarely holds more).
  static constexpr size_t kMaxFrames = 256;

  // Unwind() with the sample's stack copy given apart (`stack`, in place of
  // s.user_stack.stack): for a replay that leaves the copies in the decoded
  // bytes rather than copying each into its Sample.
  virtual std::vector<uint64_t> UnwindCopy(const Sample& s, std::span<const uint8_t> stack,
                                           const attribution::ProcessTable& table,
                                           const attribution::CookieTable& cookies,
                                           attribution::UnwindNote* note) = 0;

  // Counters over every Unwind() call, for reports and benchmarks.
  virtual const UnwindStats& stats() const = 0;

  // The vDSO image (recorder/attribution/vdso.h: the record's, or this
  // kernel's) whose .eh_frame unwinds frames in "[vdso]" mappings, which no
  // file holds. Without one (or with one that is not an x86-64 ELF image
  // with CFI) such frames stop the walk as missing_file / no_unwind_info.
  virtual void set_vdso(const std::string& image) = 0;
};

std::unique_ptr<DwarfUnwinder> MakeDwarfUnwinder();

}  // namespace flightrec::recorder::unwind
