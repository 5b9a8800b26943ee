// ParsePerfRecord: one perf ring record → one model event.
//
// Layouts from include/uapi/linux/perf_event.h (enum perf_event_type). Every
// length is checked against the record's size: a record is parsed from the
// kernel's ring, but a dump may hold a torn record and we must never read
// past it.
#pragma once

#include <asm/perf_regs.h>
#include <linux/perf_event.h>

#include <cstdint>
#include <optional>
#include <string_view>

#include "recorder/model/events.h"

namespace flightrec::recorder::perf {

// The sample_type every flightrec sampling event uses; sideband events use
// kSampleIdType for their sample_id_all trailer (and so do sampling events,
// since the trailer holds only TID, TIME and CPU bits in that order).
inline constexpr uint64_t kSampleType = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                                        PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD |
                                        PERF_SAMPLE_CALLCHAIN;
inline constexpr uint64_t kSampleTypeNoChain = kSampleType & ~uint64_t{PERF_SAMPLE_CALLCHAIN};

// The user registers a --call-graph dwarf sample carries. perf itself takes
// every register (tools/perf/arch/x86/include/perf_regs.h PERF_REGS_MASK =
// all of PERF_REG_X86_64_MAX but DS/ES/FS/GS, 160 bytes a sample); unwinding
// only ever needs the ip, the stack pointer and the callee-saved registers
// (System V x86-64 ABI 3.2.1: rbx, rbp, r12-r15), because compiler CFI
// computes the CFA from rsp or rbp and restores only callee-saved registers
// from the stack: 8 registers, 64 bytes.
// The bit numbers are <asm/perf_regs.h>'s (enum perf_event_x86_regs): the
// bit a register has in sample_regs_user.
inline constexpr uint64_t kUserRegsMask = (1ull << PERF_REG_X86_BX) | (1ull << PERF_REG_X86_BP) |
                                          (1ull << PERF_REG_X86_SP) | (1ull << PERF_REG_X86_IP) |
                                          (1ull << PERF_REG_X86_R12) | (1ull << PERF_REG_X86_R13) |
                                          (1ull << PERF_REG_X86_R14) | (1ull << PERF_REG_X86_R15);

// --call-graph dwarf: the kernel part of the callchain (attr.exclude_callchain_user,
// as perf record --call-graph dwarf does), user registers and a copy of the
// user stack from the stack pointer up.
inline constexpr uint64_t kSampleTypeDwarf =
    kSampleType | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;

// attr.sample_stack_user limits (kernel/events/core.c perf_copy_attr: below
// USHRT_MAX and a multiple of 8, since the whole record's size is a u16).
inline constexpr uint32_t kMaxStackUserBytes = 65528;
inline constexpr uint64_t kSideSampleType = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU;

struct ParseResult {
  std::optional<Event> event;  // empty for record types we do not use
  bool malformed = false;
  uint32_t type = 0;
  // PERF_SAMPLE_RAW's data (a tracepoint's record), a view into the record
  // passed in; empty unless sample_type has the bit.
  std::string_view raw;
};

// sample_type must be kSampleType, kSampleTypeNoChain, kSampleTypeDwarf or
// kSideSampleType, optionally with PERF_SAMPLE_RAW (off-CPU capture) or
// without PERF_SAMPLE_PERIOD (period 0: a fixed-period software event,
// recorder/daemon/mem_growth.cc); regs_mask is the event's
// attr.sample_regs_user.
ParseResult ParsePerfRecord(std::string_view rec, uint64_t sample_type, uint32_t cpu_hint,
                            uint64_t regs_mask = kUserRegsMask);

}  // namespace flightrec::recorder::perf
