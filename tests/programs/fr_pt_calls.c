// A program whose control flow is known branch by branch, for the hardware
// trace tests: main calls a(), a calls b(), b calls c(), each returns, then
// main calls crash(), which faults at the global label fr_pt_fault (a store
// to address 0). No conditional or indirect branch on that path, so its Intel
// PT trace is: the calls (direct: no packets), three compressed returns (one
// TNT bit each), then FUP at fr_pt_fault and TIP.PGD as the fault leaves user
// space. tests/trace encodes that trace with libipt; scripts/check_pt.sh
// records the real one on PT hardware.
volatile int fr_pt_sink;

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
