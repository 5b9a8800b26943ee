/* fr_odd_names SECONDS: spins for SECONDS of CPU time in a function whose
 * symbol name is not valid UTF-8 and holds a bidi override, on a thread whose
 * name (comm) is not UTF-8 and holds ESC: names a user's program can give
 * itself, which every export must still write as valid XML, JSON and UTF-8
 * text. */
#include <stdlib.h>
#include <sys/prctl.h>

#include "fr_cpu.h"

volatile unsigned long sink;

__attribute__((noinline)) void odd_spin(double seconds) __asm__(
    "fr_odd_\xff\xfe_\xe2\x80\xae_\xc3");
__attribute__((noinline)) void odd_spin(double seconds) {
  double end = cpu_now() + seconds;
  while (cpu_now() < end)
    for (int i = 0; i < 200000; i++) sink += i;
}

int main(int argc, char **argv) {
  prctl(PR_SET_NAME, "odd\xff\xfe\x1b", 0, 0, 0);
  odd_spin(argc > 1 ? atof(argv[1]) : 1.0);
  return 0;
}
