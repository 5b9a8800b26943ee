/* Clock checks are syscalls (thread CPU time has no vDSO path), so the
 * inner loops run ~100 us between checks to keep samples in user code.
 * fr_spin SECONDS: burns CPU in spin_a about 70% and spin_b about 30% of its
 * CPU time, interleaved in 7 ms / 3 ms slices of thread CPU time so that any
 * window of a few seconds has the same split. Prints its pid, then works.
 * fr_spin SECONDS work: the same 70/30 split by work done (7 and 3 blocks of
 * the inner loop per round) instead of by CPU time. For emulated guests
 * (QEMU TCG): there the guest's clock runs on while the host does not run
 * the vCPU, so a time slice may hold almost no work and one sample, and a
 * split by time drifts towards 50/50 in samples; a split by work does not.
 * fr_spin N rounds: exactly N rounds of that split by work (spin_a and
 * spin_b each called N times), however long they take on a loaded machine.
 * fr_spin SECONDS clock: reads CLOCK_MONOTONIC in a loop (spin_clock) for
 * SECONDS of wall time: nearly every sample is in the vDSO's clock_gettime. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fr_cpu.h"

volatile unsigned long sink;

/* Runs for `seconds` of thread CPU time, or `blocks` inner loops if > 0. */
__attribute__((noinline)) void spin_a(double seconds, int blocks) {
  double end = blocks ? 0 : cpu_now() + seconds;
  for (int b = 0; blocks ? b < blocks : cpu_now() < end; b++)
    for (int i = 0; i < 200000; i++) sink += i;
}

__attribute__((noinline)) void spin_b(double seconds, int blocks) {
  double end = blocks ? 0 : cpu_now() + seconds;
  for (int b = 0; blocks ? b < blocks : cpu_now() < end; b++)
    for (int i = 0; i < 200000; i++) sink ^= i;
}

/* The vDSO's clock, called as often as it returns. */
__attribute__((noinline)) void spin_clock(double seconds) {
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  do {
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while (now.tv_sec - start.tv_sec + (now.tv_nsec - start.tv_nsec) / 1e9 < seconds);
}

int main(int argc, char **argv) {
  double total = argc > 1 ? atof(argv[1]) : 5.0;
  if (argc > 2 && strcmp(argv[2], "clock") == 0) {
    printf("%d\n", getpid());
    fflush(stdout);
    spin_clock(total);
    return 0;
  }
  int rounds = argc > 2 && strcmp(argv[2], "rounds") == 0;
  int by_work = rounds || (argc > 2 && strcmp(argv[2], "work") == 0);
  printf("%d\n", getpid());
  fflush(stdout);
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (long round = 0;; round++) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (rounds ? round >= (long)total
               : now.tv_sec - start.tv_sec + (now.tv_nsec - start.tv_nsec) / 1e9 >= total)
      break;
    spin_a(0.007, by_work ? 7 : 0);
    spin_b(0.003, by_work ? 3 : 0);
  }
  return 0;
}
