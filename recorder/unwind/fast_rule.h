// The compact form of a simple CFI row, applied by the unwinder itself
// (dwarf_unwinder.cc FastWalk), and its making from libunwind's register
// state record. Shared by dwarf_unwinder.cc and fast_rule.cc only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace flightrec::recorder::unwind {

// Most rows are simple — CFA = register + offset, the other registers
// unchanged, undefined or saved at CFA + offset — and for those the row is
// also kept in a compact form (FastRule) that Unwind() applies itself, in a
// few instructions instead of libunwind's apply_reg_state (which copies and
// visits all 17 register locations and calls back for every read: 3/4 of
// the unwinder's time before, docs/BENCHMARKS.md). The semantics are
// libunwind's (src/dwarf/Gparser.c apply_reg_state, src/x86_64/Gregs.c
// tdep_access_reg: rsp reads the CFA); any frame the fast walk cannot take
// makes the whole sample go through libunwind instead, so results, notes
// and statistics are the same either way.
// libunwind's (and DWARF's) register number of rip: the return address
// column of every row that is fast.
inline constexpr int kRipColumn = 16;

struct FastRule {
  bool ok = false;
  uint8_t cfa_reg = 0;  // libunwind register number; rsp = the previous CFA
  uint8_t count = 0;    // entries of `set`
  int64_t cfa_off = 0;
  struct Set {
    uint8_t reg;
    bool undefined;  // else saved at CFA + off
    int64_t off;
  };
  Set set[17];
};

// The fast form of the libunwind register state record (`data`, `size`
// bytes, as unw_reg_states_iterate hands it out); ok = false if the row is
// not simple or the record is not laid out as expected.
FastRule MakeFastRule(const void* data, size_t size);

}  // namespace flightrec::recorder::unwind
