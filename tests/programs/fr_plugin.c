/* libfr_plugin.so: a library that fr_dlopen loads, burns CPU in, and unloads. */
#include <time.h>

volatile unsigned long plugin_sink;

__attribute__((noinline)) void plugin_burn(double seconds) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  double end = ts.tv_sec + ts.tv_nsec / 1e9 + seconds;
  for (;;) {
    for (int i = 0; i < 200000; i++) plugin_sink += i * 3;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    if (ts.tv_sec + ts.tv_nsec / 1e9 >= end) break;
  }
}
