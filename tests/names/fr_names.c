/* fr_names SECONDS: three threads that name themselves with
 * pthread_setname_np and burn CPU for SECONDS of wall time each:
 * "worker-one" in hot_one, "worker-two" in hot_two, and "clock-spin" calling
 * clock_gettime(CLOCK_MONOTONIC_COARSE) through this program's PLT (for
 * SECONDS rounded up to the next whole second), so samples land
 * in the PLT stub and in the vDSO. The main thread only waits for them. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

volatile unsigned long sink;
static double seconds;

static double wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void hot_one(double end) {
  while (wall_now() < end)
    for (int i = 0; i < 200000; i++) sink += i;
}

__attribute__((noinline)) void hot_two(double end) {
  while (wall_now() < end)
    for (int i = 0; i < 200000; i++) sink ^= i;
}

#if defined(__x86_64__)
#include <immintrin.h>
/* .got.plt, which the linker names: the PLT stubs jump through its slots. */
extern char _GLOBAL_OFFSET_TABLE_[];
#endif

/* A PLT stub is one well-predicted jmp that timer samples almost never catch
 * as the oldest instruction in flight. Flushing the GOT slots it reads makes
 * the jmp wait for memory, so samples land in the stub (clock_gettime@plt);
 * the coarse clock then keeps the vDSO's share large but short of all. */
__attribute__((noinline)) void clock_spin(double end) {
  struct timespec ts;
  const time_t end_s = (time_t)end + 1;
  do {
#if defined(__x86_64__)
    _mm_clflush(_GLOBAL_OFFSET_TABLE_);
    _mm_clflush(_GLOBAL_OFFSET_TABLE_ + 64);
#endif
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts); /* through clock_gettime@plt */
  } while (ts.tv_sec < end_s);
}

static void* run(void* arg) {
  const char* name = arg;
  pthread_setname_np(pthread_self(), name);
  double end = wall_now() + seconds;
  if (name[0] == 'c')
    clock_spin(end);
  else if (name[7] == 'o')
    hot_one(end);
  else
    hot_two(end);
  return NULL;
}

int main(int argc, char** argv) {
  seconds = argc > 1 ? atof(argv[1]) : 2;
  static char* names[] = {"worker-one", "worker-two", "clock-spin"};
  pthread_t t[3];
  for (int i = 0; i < 3; i++)
    if (pthread_create(&t[i], NULL, run, names[i]) != 0) return 1;
  for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
  return 0;
}
