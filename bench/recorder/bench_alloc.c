/* bench_alloc MODE ROUNDS: a fixed amount of allocation-heavy work; prints
 * the wall-clock seconds it took, the page faults it made and the CPU
 * seconds (user + system) it used: on a loaded machine its CPU time is what
 * a recorder's cost adds to (the fault path runs in its context), wall time
 * also holds the waits for a CPU.
 *   faults: each round maps 64 MiB, touches every page (one fault each, huge
 *           pages off) and unmaps it: every instruction is fault path, the
 *           worst case for page-fault sampling.
 *   malloc: each round makes 200 000 malloc/free of 16 B..64 KiB (random,
 *           a live set of 4 096 blocks) and writes each block: a program
 *           that allocates a lot, as servers do (few faults once warm). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static void faults(long rounds) {
  const size_t len = 64ul << 20;
  long psz = sysconf(_SC_PAGESIZE);
  for (long r = 0; r < rounds; r++) {
    char* p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) exit(1);
    madvise(p, len, MADV_NOHUGEPAGE);
    for (size_t i = 0; i < len; i += (size_t)psz) p[i] = 1;
    munmap(p, len);
  }
}

static void mallocs(long rounds) {
  static void* live[4096];
  unsigned long x = 88172645463325252ul;
  for (long r = 0; r < rounds; r++) {
    for (int i = 0; i < 200000; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      int slot = (int)(x % 4096);
      size_t size = 16 + (x >> 20) % (64 << 10);
      free(live[slot]);
      live[slot] = malloc(size);
      if (live[slot] == NULL) exit(1);
      memset(live[slot], (int)i, size < 256 ? size : 256);
    }
  }
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "faults";
  long rounds = argc > 2 ? atol(argv[2]) : 20;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  if (strcmp(mode, "malloc") == 0)
    mallocs(rounds);
  else
    faults(rounds);
  clock_gettime(CLOCK_MONOTONIC, &b);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
               ru.ru_stime.tv_usec / 1e6;
  printf("%.6f %ld %.6f\n", (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9, ru.ru_minflt,
         cpu);
  return 0;
}
