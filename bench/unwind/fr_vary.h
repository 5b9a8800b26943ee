// fr_vary: a 20-deep call chain whose stack bytes differ in every sample
// (see fr_vary.c).
#pragma once

// noipa: each link stays a real frame under its own name (no inlining,
// cloning or tail calls through interprocedural analysis).
#define NOIPA __attribute__((noipa))

// One link: spills values derived from its arguments (different in every
// call) to its own frame, calls `next`, then uses the spill, so the call is
// not a tail call and the frame's bytes are live while `next` runs.
#define FR_VARY_LINK(name, next)                        \
  NOIPA long name(long n, unsigned path) {              \
    volatile long spill[4];                             \
    for (int i = 0; i < 4; ++i) spill[i] = n * (i + 3); \
    long r = next(n + 1, path);                         \
    return r * 3 + spill[n & 3];                        \
  }

// A fork: continues through `a` or `b` by one bit of `path`, so the program
// has 2^forks distinct call paths of the same depth.
#define FR_VARY_FORK(name, a, b, bit)                                 \
  NOIPA long name(long n, unsigned path) {                            \
    volatile long spill[4];                                           \
    for (int i = 0; i < 4; ++i) spill[i] = n ^ (i * 7919);            \
    long r = ((path >> (bit)) & 1) ? a(n + 1, path) : b(n + 1, path); \
    return r * 5 + spill[n & 3];                                      \
  }

long fr_vary_e01(long n, unsigned path);
long fr_vary_e02(long n, unsigned path);
long fr_vary_e03(long n, unsigned path);
long fr_vary_e04a(long n, unsigned path);
long fr_vary_e04b(long n, unsigned path);
long fr_vary_e05(long n, unsigned path);
long fr_vary_e06(long n, unsigned path);
long fr_vary_e07(long n, unsigned path);
long fr_vary_e08a(long n, unsigned path);
long fr_vary_e08b(long n, unsigned path);
long fr_vary_e09(long n, unsigned path);
long fr_vary_e10(long n, unsigned path);
long fr_vary_l11(long n, unsigned path);
long fr_vary_l12(long n, unsigned path);
long fr_vary_l13a(long n, unsigned path);
long fr_vary_l13b(long n, unsigned path);
long fr_vary_l14(long n, unsigned path);
long fr_vary_l15(long n, unsigned path);
long fr_vary_l16(long n, unsigned path);
long fr_vary_l17a(long n, unsigned path);
long fr_vary_l17b(long n, unsigned path);
long fr_vary_l18(long n, unsigned path);
long fr_vary_l19(long n, unsigned path);
long fr_vary_hot(long n, unsigned path);
