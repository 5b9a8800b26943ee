// fr_deep: the chain of 20 functions (see fr_deep.c).
#pragma once

// noipa: no inlining, cloning or interprocedural shortcuts, so each link of
// the chain stays a real frame under its own name for the unwinder to find.
#define NOIPA __attribute__((noipa))

// One link of the chain: calls `next`, then works on its result, so the call
// is not a tail call and `name` keeps its frame while `next` runs.
#define FR_DEEP_LINK(name, next) \
  NOIPA long name(long n) {      \
    long r = next(n + 1);        \
    return r * 3 + n;            \
  }

long fr_deep_e01(long n);
long fr_deep_e02(long n);
long fr_deep_e03(long n);
long fr_deep_e04(long n);
long fr_deep_e05(long n);
long fr_deep_e06(long n);
long fr_deep_e07(long n);
long fr_deep_e08(long n);
long fr_deep_e09(long n);
long fr_deep_e10(long n);
long fr_deep_l11(long n);
long fr_deep_l12(long n);
long fr_deep_l13(long n);
long fr_deep_l14(long n);
long fr_deep_l15(long n);
long fr_deep_l16(long n);
long fr_deep_l17(long n);
long fr_deep_l18(long n);
long fr_deep_l19(long n);
long fr_deep_hot(long n);
