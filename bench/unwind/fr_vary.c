// fr_vary: the varied-stack DWARF unwinding workload. Like
// tests/unwind/fr_deep (-O2 -fomit-frame-pointer, the hot function 20 frames
// below main, e-links here and l-links in libfr_vary_lib.so), but as real
// programs are: every link spills values of its arguments to its frame and
// the hot function writes a changing array on its stack, so no two samples
// carry the same stack bytes, and four forks make 16 distinct call paths of
// the same depth. An unwinder cannot reuse the result of an earlier sample
// by its bytes; it must unwind each one.
// Usage: fr_vary -n CALLS    run the chain exactly CALLS times (a fixed
//                            amount of CPU work), cycling through the paths
#include <stdlib.h>
#include <string.h>

#include "fr_vary.h"

FR_VARY_LINK(fr_vary_e01, fr_vary_e02)
FR_VARY_LINK(fr_vary_e02, fr_vary_e03)
FR_VARY_FORK(fr_vary_e03, fr_vary_e04a, fr_vary_e04b, 0)
FR_VARY_LINK(fr_vary_e04a, fr_vary_e05)
FR_VARY_LINK(fr_vary_e04b, fr_vary_e05)
FR_VARY_LINK(fr_vary_e05, fr_vary_e06)
FR_VARY_LINK(fr_vary_e06, fr_vary_e07)
FR_VARY_FORK(fr_vary_e07, fr_vary_e08a, fr_vary_e08b, 1)
FR_VARY_LINK(fr_vary_e08a, fr_vary_e09)
FR_VARY_LINK(fr_vary_e08b, fr_vary_e09)
FR_VARY_LINK(fr_vary_e09, fr_vary_e10)
FR_VARY_LINK(fr_vary_e10, fr_vary_l11)

int main(int argc, char** argv) {
  if (argc != 3 || strcmp(argv[1], "-n") != 0) return 2;
  long calls = atol(argv[2]);
  long acc = 0;
  for (long i = 0; i < calls; ++i) acc += fr_vary_e01(acc & 0xffff, (unsigned)i * 7u);
  return acc == 42 ? 1 : 0;
}
