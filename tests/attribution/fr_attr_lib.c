// libfr_attr.so: an exported function whose hot loop is an always-inlined
// helper, so DWARF has a DW_TAG_inlined_subroutine for it.
#include "fr_attr_lib.h"

static inline __attribute__((always_inline)) unsigned long lib_inline_helper(unsigned long x,
                                                                             int n) {
  for (int i = 0; i < n; ++i) {
    x = x * 2862933555777941757UL + 3037000493UL;  // lib_inline_helper loop line
    __asm__ volatile("" : "+r"(x));
  }
  return x;
}

__attribute__((noinline)) unsigned long lib_hot(unsigned long seed, int iterations) {
  return lib_inline_helper(seed, iterations);
}
