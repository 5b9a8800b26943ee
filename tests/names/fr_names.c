/* fr_names SECONDS: three threads that name themselves with
 * pthread_setname_np and burn CPU for SECONDS of wall time each:
 * "worker-one" in hot_one, "worker-two" in hot_two, and "clock-spin" calling
 * clock_gettime(CLOCK_MONOTONIC_COARSE) through this program's PLT (for
 * SECONDS rounded up to the next whole second), so samples land
 * in the vDSO (and can land in the PLT stub). The main thread only waits for them. */
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

/* The coarse clock is the vDSO's cheapest path, so the PLT stub is as large
 * a share of each call as it can be. (Timer samples still rarely catch the
 * stub's one jmp: on the machines tried they charge its GOT load to the jump
 * target, libc's clock_gettime.) */
__attribute__((noinline)) void clock_spin(double end) {
  struct timespec ts;
  const time_t end_s = (time_t)end + 1;
  do {
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
