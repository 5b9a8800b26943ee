// The attribution test program: known functions in the executable (a C++
// member function, so names must be demangled, with an always-inlined helper)
// and in a shared library. Runs for argv[1] seconds, half the time in each.
// Built twice: VARIANT 1 and VARIANT 2 differ in code, hence in build-id.
#include <stdlib.h>
#include <time.h>

#include "fr_attr_lib.h"

#ifndef VARIANT
#define VARIANT 1
#endif

namespace attr {

static inline __attribute__((always_inline)) unsigned long main_inline_helper(unsigned long x,
                                                                              int n) {
  for (int i = 0; i < n; ++i) {
    x = x * 6364136223846793005UL + 1442695040888963407UL * VARIANT;  // main_inline_helper line
    __asm__ volatile("" : "+r"(x));
  }
  return x;
}

class Worker {
 public:
  __attribute__((noinline)) unsigned long Spin(unsigned long x, int n) {
    return main_inline_helper(x, n);
  }
};

}  // namespace attr

#if VARIANT == 2
__attribute__((noinline)) unsigned long variant_two_only(unsigned long x) { return x ^ 0x5a5a; }
#endif

static double Now() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

volatile unsigned long sink;

int main(int argc, char** argv) {
  double secs = argc > 1 ? atof(argv[1]) : 2.0;
  double end = Now() + secs;
  attr::Worker w;
  unsigned long x = 1;
  while (Now() < end) {
    x = w.Spin(x, 200000);
    x = lib_hot(x, 200000);
#if VARIANT == 2
    x = variant_two_only(x);
#endif
  }
  sink = x;
  return 0;
}
