/* The calling thread's CPU time in seconds: what the test programs spin
 * against, so that a run does the same work however busy the machine is. */
#ifndef FR_CPU_H
#define FR_CPU_H

#include <time.h>

static inline double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

#endif
