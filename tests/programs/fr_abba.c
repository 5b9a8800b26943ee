/* fr_abba: an ABBA mutex deadlock, for off-CPU tests.
 *
 * Thread "xfer_a" runs transfer_a: locks a, then b. Thread "xfer_b" runs
 * transfer_b: locks b, then a. Each takes its first lock, waits at a barrier
 * until the other holds its own, then asks for the second: both block in
 * pthread_mutex_lock forever. Just before that call each thread prints
 *   blocked TID MONOTONIC_NS
 * (CLOCK_MONOTONIC, the recorder's clock) so a test knows when it blocked.
 * The main thread prints "pid PID" first and then waits in pthread_join.
 * Built with frame pointers: the user stack of a blocked thread is
 * pthread_mutex_lock <- transfer_a/b <- worker. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock_a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t lock_b = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t both_hold_one;
static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;

static void say_blocked(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  pthread_mutex_lock(&print_lock);
  printf("blocked %d %lld\n", gettid(), (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
  fflush(stdout);
  pthread_mutex_unlock(&print_lock);
}

__attribute__((noinline)) void transfer_a(void) {
  pthread_mutex_lock(&lock_a);
  pthread_barrier_wait(&both_hold_one);
  say_blocked();
  pthread_mutex_lock(&lock_b); /* never returns: xfer_b holds b */
  pthread_mutex_unlock(&lock_b);
  pthread_mutex_unlock(&lock_a);
}

__attribute__((noinline)) void transfer_b(void) {
  pthread_mutex_lock(&lock_b);
  pthread_barrier_wait(&both_hold_one);
  say_blocked();
  pthread_mutex_lock(&lock_a); /* never returns: xfer_a holds a */
  pthread_mutex_unlock(&lock_a);
  pthread_mutex_unlock(&lock_b);
}

static void* worker(void* arg) {
  pthread_setname_np(pthread_self(), arg ? "xfer_a" : "xfer_b");
  if (arg)
    transfer_a();
  else
    transfer_b();
  return NULL;
}

int main(void) {
  printf("pid %d\n", getpid());
  fflush(stdout);
  pthread_barrier_init(&both_hold_one, NULL, 2);
  pthread_t ta, tb;
  pthread_create(&ta, NULL, worker, (void*)1);
  pthread_create(&tb, NULL, worker, NULL);
  pthread_join(ta, NULL); /* forever: the watchdog (or the test) kills us */
  pthread_join(tb, NULL);
  return 0;
}
