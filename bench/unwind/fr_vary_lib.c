// The shared-library half of fr_vary's 20-frame chain (see fr_vary.c).
#include "fr_vary.h"

volatile long fr_vary_sink;

// The hot function: ~5 ms of arithmetic per call that keeps writing its
// results into an array on its stack, so every sample's copy differs.
NOIPA long fr_vary_hot(long n, unsigned path) {
  volatile unsigned long spill[64];
  unsigned long x = (unsigned long)n + path;
  for (long i = 0; i < 2000000; ++i) {
    x = x * 6364136223846793005UL + 1442695040888963407UL;
    spill[i & 63] = x;
  }
  fr_vary_sink = (long)spill[n & 63];
  return (long)(x & 0xff);
}

FR_VARY_LINK(fr_vary_l11, fr_vary_l12)
FR_VARY_FORK(fr_vary_l12, fr_vary_l13a, fr_vary_l13b, 2)
FR_VARY_LINK(fr_vary_l13a, fr_vary_l14)
FR_VARY_LINK(fr_vary_l13b, fr_vary_l14)
FR_VARY_LINK(fr_vary_l14, fr_vary_l15)
FR_VARY_LINK(fr_vary_l15, fr_vary_l16)
FR_VARY_FORK(fr_vary_l16, fr_vary_l17a, fr_vary_l17b, 3)
FR_VARY_LINK(fr_vary_l17a, fr_vary_l18)
FR_VARY_LINK(fr_vary_l17b, fr_vary_l18)
FR_VARY_LINK(fr_vary_l18, fr_vary_l19)
FR_VARY_LINK(fr_vary_l19, fr_vary_hot)
