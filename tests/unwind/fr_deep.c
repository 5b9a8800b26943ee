// fr_deep: a hot function 20 calls deep, built -O2 -fomit-frame-pointer:
// fr_deep_e01..e10 here, fr_deep_l11..l19 and fr_deep_hot in libfr_deep_lib.so.
// A frame-pointer walk cannot see past the first frame or two; DWARF
// unwinding must find all 20, in order.
// Usage: fr_deep SECONDS     run the chain for SECONDS of wall-clock time
//        fr_deep -n CALLS    run it exactly CALLS times: a fixed amount of CPU
//                            work, so the sample count at a given rate does
//                            not depend on how busy the machine is
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fr_deep.h"

// Ten links of the chain, each its own noipa function and frame.
FR_DEEP_LINK(fr_deep_e01, fr_deep_e02)
FR_DEEP_LINK(fr_deep_e02, fr_deep_e03)
FR_DEEP_LINK(fr_deep_e03, fr_deep_e04)
FR_DEEP_LINK(fr_deep_e04, fr_deep_e05)
FR_DEEP_LINK(fr_deep_e05, fr_deep_e06)
FR_DEEP_LINK(fr_deep_e06, fr_deep_e07)
FR_DEEP_LINK(fr_deep_e07, fr_deep_e08)
FR_DEEP_LINK(fr_deep_e08, fr_deep_e09)
FR_DEEP_LINK(fr_deep_e09, fr_deep_e10)
FR_DEEP_LINK(fr_deep_e10, fr_deep_l11)

int main(int argc, char** argv) {
  if (argc > 2 && strcmp(argv[1], "-n") == 0) {
    long calls = atol(argv[2]);
    long acc = 0;
    for (long i = 0; i < calls; ++i) acc += fr_deep_e01(acc & 7);
    return acc == 42 ? 1 : 0;
  }
  double seconds = argc > 1 ? atof(argv[1]) : 1.0;
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  long acc = 0;
  do {
    acc += fr_deep_e01(acc & 7);
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while ((double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
  return acc == 42 ? 1 : 0;
}
