/* fr_crash MODE [MS]: runs spin_a for MS ms of CPU time, then dies:
 * segv (NULL dereference), abort, fpe (integer division by zero),
 * threads (a second thread dereferences NULL while the main one spins), or
 * bigmap (segv with a 3 GiB anonymous mapping of which one page was touched:
 * a 3 GiB core, nearly all zeros, at no memory cost), noise (segv with
 * 8 MiB of pseudo-random bytes in memory: a core that does not compress),
 * comm=NAME (sets its comm to NAME, which exec never gives a program
 * with a '/' in it, then segv), or names (two threads named with
 * pthread_setname_np, "worker-one" spinning in spin_a for ever and
 * "worker-two" spinning in spin_b for MS ms of CPU time before it
 * dereferences NULL; the main thread waits in pthread_join). */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "fr_cpu.h"

volatile unsigned long sink;
volatile int zero = 0;
volatile int one = 1;

__attribute__((noinline)) void spin_a(double seconds) {
  double end = cpu_now() + seconds;
  while (cpu_now() < end)
    for (int i = 0; i < 200000; i++) sink += i;
}

__attribute__((noinline)) void crash_here(const char* mode) {
  if (strcmp(mode, "abort") == 0) abort();
  /* Both operands volatile: GCC turns 1 / x into a compare, not an idiv. */
  if (strcmp(mode, "fpe") == 0) sink = one / zero;
  *(volatile int*)0 = 1;
}

/* worker-two's own loop: its history and backtrace are told apart from
 * worker-one's by function as well as by name. */
__attribute__((noinline)) void spin_b(double seconds) {
  double end = cpu_now() + seconds;
  while (cpu_now() < end)
    for (int i = 0; i < 200000; i++) sink ^= i;
}

static double g_ms;
static void* named_main(void* arg) {
  const char* name = arg;
  pthread_setname_np(pthread_self(), name);
  if (strcmp(name, "worker-one") == 0)
    for (;;) spin_a(0.01);
  spin_b(g_ms / 1000.0);
  crash_here("segv");
  return NULL;
}

static void* thread_main(void* arg) {
  (void)arg;
  spin_a(g_ms / 1000.0);
  crash_here("segv");
  return NULL;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "segv";
  g_ms = argc > 2 ? atof(argv[2]) : 500;
  printf("%d\n", getpid());
  fflush(stdout);
  if (strcmp(mode, "threads") == 0) {
    pthread_t t;
    pthread_create(&t, NULL, thread_main, NULL);
    for (;;) spin_a(0.01);
  }
  if (strcmp(mode, "names") == 0) {
    static char* names[] = {"worker-one", "worker-two"};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
      if (pthread_create(&t[i], NULL, named_main, names[i]) != 0) return 1;
    pthread_join(t[1], NULL); /* never returns: worker-two crashes */
    return 1;
  }
  if (strcmp(mode, "bigmap") == 0) {
    size_t len = (size_t)3 << 30;
    char* big =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (big == MAP_FAILED) return 2;
    /* A written anonymous mapping is dumped whole (the untouched pages as
     * zeros); an untouched one not at all (vma_dump_size). */
    big[len / 2] = 1;
    mode = "segv";
  }
  if (strcmp(mode, "noise") == 0) {
    size_t len = (size_t)8 << 20;
    unsigned long* noise = malloc(len);
    if (noise == NULL) return 2;
    unsigned long x = 88172645463325252ul;
    for (size_t i = 0; i < len / sizeof(*noise); i++) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      noise[i] = x;
    }
    sink = noise[len / sizeof(*noise) / 2];
    mode = "segv";
  }
  if (strncmp(mode, "comm=", 5) == 0) {
    prctl(PR_SET_NAME, mode + 5);
    mode = "segv";
  }
  spin_a(g_ms / 1000.0);
  crash_here(mode);
  return 0;
}
