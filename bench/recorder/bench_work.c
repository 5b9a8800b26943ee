/* bench_work ITERATIONS: a fixed amount of CPU-bound work (integer hashing);
 * prints the wall-clock seconds it took. Used to measure slowdown. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
  unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 400000000ul;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  unsigned long h = 1469598103934665603ul;
  for (unsigned long i = 0; i < n; i++) h = (h ^ i) * 1099511628211ul;
  clock_gettime(CLOCK_MONOTONIC, &b);
  printf("%.6f %lu\n", (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9, h & 1);
  return 0;
}
