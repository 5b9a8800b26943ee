/* fr_dhang: a thread blocked in uninterruptible sleep (D, not killable), for
 * hang-trigger tests.  Usage: fr_dhang HANGS HOLD_MS
 *
 * Each hang: thread "holder" writes to a pipe from a page registered with
 * userfaultfd; its write takes the pipe's mutex and faults in the copy,
 * where it waits for this program to fill the page (fs/pipe.c copies under
 * pipe->mutex). Thread "victim" then writes to the same pipe and sleeps in
 * mutex_lock, in TASK_UNINTERRUPTIBLE, until the main thread fills the page
 * HOLD_MS later. Prints "hang N TID MONOTONIC_NS" (the victim, just before
 * it blocks), "released N MONOTONIC_NS" after, "done" at the end. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int pipe_fds[2];
static char* page;
static long page_size;

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char* what) {
  perror(what);
  exit(2);
}

static void* holder(void* arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "holder");
  if (write(pipe_fds[1], page, (size_t)page_size) < 0) die("holder write");
  return NULL;
}

static void* victim(void* arg) {
  pthread_setname_np(pthread_self(), "victim");
  printf("hang %d %d %lld\n", (int)(intptr_t)arg, gettid(), now_ns());
  fflush(stdout);
  if (write(pipe_fds[1], "x", 1) != 1) die("victim write"); /* D until released */
  return NULL;
}

static void hang_once(int uffd, int n, long hold_ms) {
  pthread_t h, v;
  pthread_create(&h, NULL, holder, NULL);
  struct pollfd p = {.fd = uffd, .events = POLLIN};
  if (poll(&p, 1, 10000) != 1) die("no fault");
  struct uffd_msg msg;
  if (read(uffd, &msg, sizeof(msg)) != sizeof(msg) || msg.event != UFFD_EVENT_PAGEFAULT) {
    die("fault message");
  }
  /* The holder now waits in the fault with the pipe's mutex held. */
  pthread_create(&v, NULL, victim, (void*)(intptr_t)n);
  struct timespec hold = {hold_ms / 1000, (hold_ms % 1000) * 1000000L};
  nanosleep(&hold, NULL); /* the hang's length: the scenario, not a wait */
  static char zeros[1 << 16];
  struct uffdio_copy copy = {.dst = (uintptr_t)page, .src = (uintptr_t)zeros,
                             .len = (uint64_t)page_size};
  if (ioctl(uffd, UFFDIO_COPY, &copy) != 0) die("UFFDIO_COPY");
  pthread_join(h, NULL);
  pthread_join(v, NULL);
  printf("released %d %lld\n", n, now_ns());
  fflush(stdout);
  char buf[1 << 16];
  if (read(pipe_fds[0], buf, sizeof(buf)) < 0) die("drain");
  if (madvise(page, (size_t)page_size, MADV_DONTNEED) != 0) die("madvise"); /* missing again */
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: fr_dhang HANGS HOLD_MS\n");
    return 2;
  }
  const int hangs = atoi(argv[1]);
  const long hold_ms = atol(argv[2]);
  page_size = sysconf(_SC_PAGESIZE);
  if (pipe(pipe_fds) != 0) die("pipe");
  int uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
  if (uffd < 0) die("userfaultfd");
  struct uffdio_api api = {.api = UFFD_API};
  if (ioctl(uffd, UFFDIO_API, &api) != 0) die("UFFDIO_API");
  page = mmap(NULL, (size_t)page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) die("mmap");
  struct uffdio_register reg = {.range = {.start = (uintptr_t)page, .len = (uint64_t)page_size},
                                .mode = UFFDIO_REGISTER_MODE_MISSING};
  if (ioctl(uffd, UFFDIO_REGISTER, &reg) != 0) die("UFFDIO_REGISTER");
  printf("pid %d\n", getpid());
  fflush(stdout);
  for (int n = 1; n <= hangs; ++n) hang_once(uffd, n, hold_ms);
  printf("done\n");
  fflush(stdout);
  return 0;
}
