/* bench_sample_cost [-F HZ] [-r ROUNDS] [-n ITERATIONS]: where the CPU cost
 * of one cpu-clock sample goes (issue 17 item 4). Root needed.
 *
 * Runs the same CPU-bound job as bench_work (one worker per CPU, CPU time
 * from wait4: on a kernel without CONFIG_IRQ_TIME_ACCOUNTING the sampling
 * interrupt is charged to the task it interrupts) under system-wide
 * cpu-clock events configured as each variant below, the variants
 * interleaved round by round, and prints each variant's median extra CPU per
 * sample. Subtracting variants splits a sample's cost into the timer
 * interrupt, the call chain and the write into the ring, and shows what
 * recorderd's choices (ring size, clock, sample fields, sideband event) cost
 * against perf record's.
 *
 * The rate is nominal (period = 1 s / HZ of CPU time): a timer that fires
 * late skips the missed periods, for every variant alike. */
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct variant {
  const char* name;
  int sample;      /* 0: no event at all */
  int callchain;   /* PERF_SAMPLE_CALLCHAIN */
  int ring_pages;  /* 0: no ring mapped (the kernel prepares the sample, then drops it) */
  int mono_clock;  /* use_clockid CLOCK_MONOTONIC (recorderd) vs perf_clock (perf) */
  int perf_fields; /* perf record's sample_type (+ID) and frequency mode */
  int sideband;    /* a dummy mmap/comm/task event per CPU, as recorderd has */
};

/* recorderd -F 4999: fields IP|TID|TIME|CPU|PERIOD|CALLCHAIN, fixed period,
 * CLOCK_MONOTONIC, a 16 MiB backward ring per CPU (RingPagesFor's cap), and
 * a sideband dummy. perf record --overwrite -a -g -F 4999: the same fields
 * plus ID, frequency mode, perf_clock, a 512 KiB ring per CPU. */
static const struct variant kVariants[] = {
    {"nothing", 0, 0, 0, 0, 0, 0},
    {"timer only (no chain, no ring)", 1, 0, 0, 1, 0, 0},
    {"timer + call chain (no ring)", 1, 1, 0, 1, 0, 0},
    {"recorderd's attributes", 1, 1, 4096, 1, 0, 1},
    {"recorderd's, 512 KiB ring", 1, 1, 128, 1, 0, 1},
    {"recorderd's, perf_clock", 1, 1, 4096, 0, 0, 1},
    {"perf record's attributes", 1, 1, 128, 0, 1, 1},
};
enum { kNumVariants = sizeof(kVariants) / sizeof(kVariants[0]), kMaxCpus = 256, kMaxRounds = 64 };

static long sys_perf_event_open(struct perf_event_attr* a, int cpu) {
  a->size = sizeof(*a);
  return syscall(SYS_perf_event_open, a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

/* Opens the variant's events on every CPU (fds[] and maps[] to undo). */
static int open_variant(const struct variant* v, long hz, int ncpu, int* fds, int* nfds,
                        void** maps, size_t* lens, int* nmaps) {
  for (int cpu = 0; cpu < ncpu && v->sample; cpu++) {
    struct perf_event_attr a;
    memset(&a, 0, sizeof(a));
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_CPU_CLOCK;
    a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
                    PERF_SAMPLE_PERIOD | (v->callchain ? PERF_SAMPLE_CALLCHAIN : 0) |
                    (v->perf_fields ? PERF_SAMPLE_ID : 0);
    if (v->perf_fields) {
      a.freq = 1;
      a.sample_freq = (uint64_t)hz;
    } else {
      a.sample_period = 1000000000ull / (uint64_t)hz;
    }
    a.sample_id_all = 1;
    a.write_backward = 1;
    a.disabled = 1;
    a.use_clockid = v->mono_clock;
    a.clockid = CLOCK_MONOTONIC;
    long fd = sys_perf_event_open(&a, cpu);
    if (fd < 0) return perror("perf_event_open (root needed)"), -1;
    fds[(*nfds)++] = (int)fd;
    if (v->ring_pages) {
      size_t len = (size_t)(v->ring_pages + 1) * (size_t)sysconf(_SC_PAGESIZE);
      void* p = mmap(NULL, len, PROT_READ, MAP_SHARED, (int)fd, 0); /* read-only: overwrite */
      if (p == MAP_FAILED) return perror("mmap"), -1;
      maps[*nmaps] = p;
      lens[(*nmaps)++] = len;
    }
    if (v->sideband) {
      struct perf_event_attr s;
      memset(&s, 0, sizeof(s));
      s.type = PERF_TYPE_SOFTWARE;
      s.config = PERF_COUNT_SW_DUMMY;
      s.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU;
      s.sample_id_all = s.mmap = s.mmap2 = s.comm = s.comm_exec = s.task = 1;
      s.use_clockid = v->mono_clock;
      s.clockid = CLOCK_MONOTONIC;
      long sfd = sys_perf_event_open(&s, cpu);
      if (sfd < 0) return perror("perf_event_open (dummy)"), -1;
      fds[(*nfds)++] = (int)sfd;
      size_t len = 65 * (size_t)sysconf(_SC_PAGESIZE);
      void* p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, (int)sfd, 0);
      if (p == MAP_FAILED) return perror("mmap (dummy)"), -1;
      maps[*nmaps] = p;
      lens[(*nmaps)++] = len;
    }
  }
  for (int i = 0; i < *nfds; i++) ioctl(fds[i], PERF_EVENT_IOC_ENABLE, 0);
  return 0;
}

/* One worker per CPU, bench_work's loop; returns their CPU seconds. */
static double run_job(int ncpu, unsigned long iters) {
  for (int j = 0; j < ncpu; j++) {
    pid_t pid = fork();
    if (pid == 0) {
      volatile unsigned long sink;
      unsigned long h = 1469598103934665603ul;
      for (unsigned long i = 0; i < iters; i++) h = (h ^ i) * 1099511628211ul;
      sink = h;
      (void)sink;
      _exit(0);
    }
  }
  double cpu = 0;
  struct rusage ru;
  int status;
  while (wait4(-1, &status, 0, &ru) > 0) {
    cpu += (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
  }
  return cpu;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  long hz = 9999;
  int rounds = 5;
  unsigned long iters = 600000000ul;
  int opt;
  while ((opt = getopt(argc, argv, "F:r:n:")) != -1) {
    if (opt == 'F')
      hz = atol(optarg);
    else if (opt == 'r')
      rounds = atoi(optarg);
    else if (opt == 'n')
      iters = strtoul(optarg, NULL, 10);
    else
      return fprintf(stderr, "usage: %s [-F HZ] [-r ROUNDS] [-n ITERATIONS]\n", argv[0]), 2;
  }
  int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (hz < 1 || hz > 100000 || rounds < 1 || rounds > kMaxRounds || ncpu > kMaxCpus) {
    return fprintf(stderr, "out of range: -F 1..100000, -r 1..%d, at most %d CPUs\n", kMaxRounds,
                   kMaxCpus),
           2;
  }
  static double cpu[kNumVariants][kMaxRounds];
  printf(
      "== where a sample's CPU goes: %d x %lu hash steps, cpu-clock at %ld Hz per CPU, "
      "%d rounds, variants interleaved\n",
      ncpu, iters, hz, rounds);
  for (int r = 0; r < rounds; r++) {
    for (int k = 0; k < kNumVariants; k++) {
      int v = (k + r) % kNumVariants; /* rotate the order round by round */
      static int fds[2 * kMaxCpus];
      static void* maps[2 * kMaxCpus];
      static size_t lens[2 * kMaxCpus];
      int nfds = 0, nmaps = 0;
      if (open_variant(&kVariants[v], hz, ncpu, fds, &nfds, maps, lens, &nmaps) != 0) return 1;
      cpu[v][r] = run_job(ncpu, iters);
      for (int i = 0; i < nmaps; i++) munmap(maps[i], lens[i]);
      for (int i = 0; i < nfds; i++) close(fds[i]);
    }
  }
  double med[kNumVariants];
  for (int v = 0; v < kNumVariants; v++) {
    qsort(cpu[v], (size_t)rounds, sizeof(double), cmp_double);
    med[v] = rounds % 2 ? cpu[v][rounds / 2] : (cpu[v][rounds / 2 - 1] + cpu[v][rounds / 2]) / 2;
  }
  /* Samples the job took, nominally: its CPU seconds with nothing x rate. */
  double samples = med[0] * (double)hz;
  printf("  %-32s %10s %10s %8s %14s\n", "variant", "CPU s", "range", "extra", "µs per sample");
  for (int v = 0; v < kNumVariants; v++) {
    char range[32];
    snprintf(range, sizeof(range), "%.3f-%.3f", cpu[v][0], cpu[v][rounds - 1]);
    printf("  %-32s %10.3f %12s %+7.2f%% %12.2f\n", kVariants[v].name, med[v], range,
           (med[v] / med[0] - 1) * 100, v ? (med[v] - med[0]) / samples * 1e6 : 0.0);
  }
  return 0;
}
