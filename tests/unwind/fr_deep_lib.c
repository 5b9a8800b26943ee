// The shared-library half of fr_deep's 20-frame chain (see fr_deep.c).
#include "fr_deep.h"

#define NOIPA __attribute__((noipa))

volatile long fr_deep_sink;

// The hot function: ~10 ms of arithmetic per call, so nearly every sample of
// the program lands here, 20 frames below main.
NOIPA long fr_deep_hot(long n) {
  unsigned long x = (unsigned long)n;
  for (long i = 0; i < 4000000; ++i) x = x * 6364136223846793005UL + 1442695040888963407UL;
  fr_deep_sink = (long)x;
  return (long)(x & 0xff);
}

NOIPA long fr_deep_l11(long n) {
  long r = fr_deep_l12(n + 1);
  return r * 3 + n;
}

NOIPA long fr_deep_l12(long n) {
  long r = fr_deep_l13(n + 1);
  return r * 3 + n;
}

NOIPA long fr_deep_l13(long n) {
  long r = fr_deep_l14(n + 1);
  return r * 3 + n;
}

NOIPA long fr_deep_l14(long n) {
  long r = fr_deep_l15(n + 1);
  return r * 3 + n;
}

NOIPA long fr_deep_l15(long n) {
  long r = fr_deep_l16(n + 1);
  return r * 3 + n;
}

NOIPA long fr_deep_l16(long n) {
  long r = fr_deep_l17(n + 1);
  return r * 3 + n;
}

NOIPA long fr_deep_l17(long n) {
  long r = fr_deep_l18(n + 1);
  return r * 3 + n;
}

NOIPA long fr_deep_l18(long n) {
  long r = fr_deep_l19(n + 1);
  return r * 3 + n;
}

NOIPA long fr_deep_l19(long n) {
  long r = fr_deep_hot(n + 1);
  return r * 3 + n;
}
