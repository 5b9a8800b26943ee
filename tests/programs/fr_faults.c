/* fr_faults PAGES ROUNDS [GAP_US]: touches PAGES fresh anonymous pages ROUNDS
 * times (mmap, touch, munmap), generating PAGES*ROUNDS page faults (plus the
 * few of process start-up). Between two faults it spins GAP_US microseconds
 * (default 20) so the fault rate stays below the kernel's sample throttle
 * (kernel.perf_event_max_sample_rate / HZ per tick, kernel/events/core.c
 * __perf_event_account_interrupt): a throttled period-1 event would drop
 * samples that no loss counter reports. GAP_US 0 = as fast as possible. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
  long pages = argc > 1 ? atol(argv[1]) : 1000;
  long rounds = argc > 2 ? atol(argv[2]) : 10;
  long gap_ns = (argc > 3 ? atol(argv[3]) : 20) * 1000;
  long psz = sysconf(_SC_PAGESIZE);
  for (long r = 0; r < rounds; r++) {
    char *p = mmap(NULL, pages * psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    for (long i = 0; i < pages; i++) {
      p[i * psz] = 1;
      if (gap_ns > 0) {
        long long until = now_ns() + gap_ns;
        while (now_ns() < until) {
        }
      }
    }
    munmap(p, pages * psz);
  }
  return 0;
}
