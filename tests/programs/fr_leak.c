/* fr_leak MIB_PER_STEP STEP_MS: leaks memory from one known function,
 * leak_here, until the memory cgroup it runs in (or RLIMIT_AS) stops it:
 * every STEP_MS milliseconds it maps MIB_PER_STEP MiB more and touches each
 * page (one page fault each), never freeing. The mapping is marked
 * MADV_NOHUGEPAGE so that each 4 KiB page is its own fault, as the page
 * fault sampling counts them. A malloc failure (RLIMIT_AS) exits 3. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static volatile char* keep[4096];

__attribute__((noinline)) static int leak_here(size_t bytes, int slot) {
  long psz = sysconf(_SC_PAGESIZE);
  char* p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return -1;
  madvise(p, bytes, MADV_NOHUGEPAGE);
  for (size_t i = 0; i < bytes; i += (size_t)psz) p[i] = (char)i;
  keep[slot % 4096] = p;
  return 0;
}

int main(int argc, char** argv) {
  long mib = argc > 1 ? atol(argv[1]) : 4;
  long step_ms = argc > 2 ? atol(argv[2]) : 50;
  printf("leaking %ld MiB every %ld ms\n", mib, step_ms);
  fflush(stdout);
  for (int slot = 0;; slot++) {
    if (leak_here((size_t)mib << 20, slot) != 0) return 3;
    struct timespec ts = {step_ms / 1000, (step_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
}
