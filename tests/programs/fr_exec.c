/* fr_exec SECONDS PROGRAM [ARGS...]: burns CPU in exec_spin for SECONDS of
 * thread CPU time, then execs PROGRAM — the same pid runs two images inside
 * one history window, so attribution must switch mappings at the exec. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "fr_cpu.h"

volatile unsigned long sink;

__attribute__((noinline)) void exec_spin(double seconds) {
  double end = cpu_now() + seconds;
  while (cpu_now() < end)
    for (int i = 0; i < 200000; i++) sink += i * 3;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: fr_exec SECONDS PROGRAM [ARGS...]\n");
    return 2;
  }
  exec_spin(atof(argv[1]));
  execv(argv[2], argv + 2);
  perror("fr_exec: execv");
  return 127;
}
