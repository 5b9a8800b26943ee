// The shared-library half of fr_deep's 20-frame chain (see fr_deep.c).
#include "fr_deep.h"

volatile long fr_deep_sink;

// The hot function: ~10 ms of arithmetic per call, so nearly every sample of
// the program lands here, 20 frames below main.
NOIPA long fr_deep_hot(long n) {
  unsigned long x = (unsigned long)n;
  for (long i = 0; i < 4000000; ++i) x = x * 6364136223846793005UL + 1442695040888963407UL;
  fr_deep_sink = (long)x;
  return (long)(x & 0xff);
}

// The nine links between fr_deep_e10 and the hot function.
FR_DEEP_LINK(fr_deep_l11, fr_deep_l12)
FR_DEEP_LINK(fr_deep_l12, fr_deep_l13)
FR_DEEP_LINK(fr_deep_l13, fr_deep_l14)
FR_DEEP_LINK(fr_deep_l14, fr_deep_l15)
FR_DEEP_LINK(fr_deep_l15, fr_deep_l16)
FR_DEEP_LINK(fr_deep_l16, fr_deep_l17)
FR_DEEP_LINK(fr_deep_l17, fr_deep_l18)
FR_DEEP_LINK(fr_deep_l18, fr_deep_l19)
FR_DEEP_LINK(fr_deep_l19, fr_deep_hot)
