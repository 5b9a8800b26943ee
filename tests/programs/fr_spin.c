/* Clock checks are syscalls (thread CPU time has no vDSO path), so the
 * inner loops run ~100 us between checks to keep samples in user code.
 * fr_spin SECONDS: burns CPU in spin_a about 70% and spin_b about 30% of its
 * CPU time, interleaved in 7 ms / 3 ms slices of thread CPU time so that any
 * window of a few seconds has the same split. Prints its pid, then works. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

volatile unsigned long sink;

__attribute__((noinline)) void spin_a(double seconds) {
  double end = cpu_now() + seconds;
  while (cpu_now() < end)
    for (int i = 0; i < 200000; i++) sink += i;
}

__attribute__((noinline)) void spin_b(double seconds) {
  double end = cpu_now() + seconds;
  while (cpu_now() < end)
    for (int i = 0; i < 200000; i++) sink ^= i;
}

int main(int argc, char **argv) {
  double total = argc > 1 ? atof(argv[1]) : 5.0;
  printf("%d\n", getpid());
  fflush(stdout);
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec + (now.tv_nsec - start.tv_nsec) / 1e9 >= total) break;
    spin_a(0.007);
    spin_b(0.003);
  }
  return 0;
}
