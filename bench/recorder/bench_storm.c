// A fork-exit storm at a fixed rate: RATE children a second for SECONDS,
// each execs /bin/true (mode exec: what a shell script or a supervisor
// restarting a crashing service does) or exits at once (mode exit), and a
// tenth of them (mode kill) die by SIGKILL instead: the deaths recorderd's
// death watch stores. Prints "children achieved_rate_per_s cpu_s": cpu_s is
// the storm's own and its children's CPU time, where a tracer's kernel-side
// cost (writing each event into its ring) is charged.
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s RATE SECONDS exec|exit|kill\n", argv[0]);
    return 2;
  }
  const double rate = atof(argv[1]), seconds = atof(argv[2]);
  const char* mode = argv[3];
  const double start = now_s();
  long n = 0;
  while (now_s() - start < seconds) {
    // Paced by the clock, not by sleeps adding up: behind schedule, catch up.
    const double due = start + (double)n / rate;
    const double wait = due - now_s();
    if (wait > 0) {
      struct timespec ts = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
      nanosleep(&ts, NULL);
    }
    const int killed = strcmp(mode, "kill") == 0 && n % 10 == 0;
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      return 1;
    }
    if (pid == 0) {
      if (killed) raise(SIGKILL);
      if (strcmp(mode, "exit") == 0) _exit(0);
      execl("/bin/true", "true", (char*)NULL);
      _exit(127);
    }
    ++n;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
  }
  while (wait(NULL) > 0) {
  }
  struct rusage self, children;
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &children);
  const double cpu = (double)(self.ru_utime.tv_sec + self.ru_stime.tv_sec + children.ru_utime.tv_sec +
                              children.ru_stime.tv_sec) +
                     (double)(self.ru_utime.tv_usec + self.ru_stime.tv_usec +
                              children.ru_utime.tv_usec + children.ru_stime.tv_usec) /
                         1e6;
  printf("%ld %.1f %.4f\n", n, (double)n / (now_s() - start), cpu);
  return 0;
}
