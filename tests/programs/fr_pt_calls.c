// A program whose control flow is known branch by branch, for the hardware
// trace tests: main calls a(), a calls b(), b calls c(), each returns, then
// main calls crash(), which faults at the global label fr_pt_fault (a store
// to address 0). No conditional or indirect branch on that path, so its Intel
// PT trace is: the calls (direct: no packets), three compressed returns (one
// TNT bit each), then FUP at fr_pt_fault and TIP.PGD as the fault leaves user
// space. tests/trace encodes that trace with libipt; scripts/check_pt.sh
// records the real one on PT hardware, with FR_PT_SPIN_MS set so that the
// process is sampled on its CPU before main (a constructor: main's code, and
// so the encoded trace, stay the same).
#include <stdlib.h>
#include <time.h>

volatile int fr_pt_sink;

__attribute__((constructor)) static void spin_first(void) {
  const char* ms = getenv("FR_PT_SPIN_MS");
  if (ms == NULL) return;
  const long want = atol(ms);
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < want);
}

__attribute__((noinline)) void c(void) { fr_pt_sink++; }
__attribute__((noinline)) void b(void) {
  c();
  fr_pt_sink++;
}
__attribute__((noinline)) void a(void) {
  b();
  fr_pt_sink++;
}
__attribute__((noinline)) void crash(void) {
  __asm__ volatile(".globl fr_pt_fault\nfr_pt_fault:\n\tmovl $1, 0\n" ::: "memory");
}

int main(void) {
  a();
  crash();
  return 0;
}
