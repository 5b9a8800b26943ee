/* fr_names SECONDS: three threads that name themselves with
 * pthread_setname_np and burn CPU for SECONDS of wall time each:
 * "worker-one" in hot_one, "worker-two" in hot_two, and "clock-spin" calling
 * clock_gettime(CLOCK_MONOTONIC) through this program's PLT stub, so its
 * samples land in the stub (clock_gettime@plt) and in the vDSO
 * (__vdso_clock_gettime). The main thread only sets up and waits: it is
 * seldom sampled after its exec, so the exports must name the process from
 * the exec (the sideband), not from the main thread's samples.
 *
 * A timer sample almost never catches a PLT stub's one well-predicted jmp
 * (on the machines tried, the GOT load is charged to the jump target), so
 * for the first half of the run the stub's GOT slot points at the stub
 * itself: clock-spin spins inside clock_gettime@plt until the main thread
 * restores the slot, then calls the vDSO for the second half. The workers
 * read the time by syscall, not through that stub. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

volatile unsigned long sink;
static double seconds;

static double wall_now(void) {
  struct timespec ts;
  syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
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

__attribute__((noinline)) void clock_spin(double end) {
  struct timespec ts;
  do {
    clock_gettime(CLOCK_MONOTONIC, &ts); /* through clock_gettime@plt */
  } while (ts.tv_sec + ts.tv_nsec / 1e9 < end);
}

/* One call of clock_gettime, to find its PLT stub from the call site. */
__attribute__((noinline)) int call_clock(struct timespec* ts) {
  int r = clock_gettime(CLOCK_MONOTONIC, ts);
  __asm__ volatile("" ::: "memory"); /* keep the call a call, not a tail jump */
  return r;
}

/* The x86-64 PLT stub the first call/jmp rel32 in call_clock targets, and
 * the GOT slot its `jmp *disp(%rip)` reads (after an optional endbr64 and
 * bnd prefix). 0 if the code is not shaped like that. */
static int find_stub(uintptr_t* stub, uintptr_t* slot) {
  const uint8_t* p = (const uint8_t*)&call_clock;
  for (int i = 0; i < 64; i++) {
    if (p[i] != 0xe8 && p[i] != 0xe9) continue;
    int32_t rel;
    memcpy(&rel, p + i + 1, 4);
    const uint8_t* s = p + i + 5 + rel;
    int n = 0;
    if (memcmp(s, "\xf3\x0f\x1e\xfa", 4) == 0) n += 4; /* endbr64 */
    if (s[n] == 0xf2) n++;                             /* bnd */
    if (s[n] != 0xff || s[n + 1] != 0x25) continue;
    int32_t disp;
    memcpy(&disp, s + n + 2, 4);
    *stub = (uintptr_t)s;
    *slot = (uintptr_t)(s + n + 6 + disp);
    return 1;
  }
  return 0;
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
  struct timespec ts;
  call_clock(&ts); /* binds the slot (lazy binding) */
  uintptr_t stub = 0, slot = 0;
  if (!find_stub(&stub, &slot)) {
    fprintf(stderr, "fr_names: no clock_gettime PLT stub found\n");
    return 2;
  }
  /* The slot may be read-only after relocation (RELRO with -z now). */
  const uintptr_t page = slot & ~(uintptr_t)4095;
  if (mprotect((void*)page, 4096, PROT_READ | PROT_WRITE) != 0) {
    perror("fr_names: mprotect");
    return 3;
  }
  uintptr_t* got = (uintptr_t*)slot;
  const uintptr_t target = __atomic_load_n(got, __ATOMIC_SEQ_CST);
  __atomic_store_n(got, stub, __ATOMIC_SEQ_CST); /* the stub jumps to itself */
  static char* names[] = {"worker-one", "worker-two", "clock-spin"};
  pthread_t t[3];
  for (int i = 0; i < 3; i++)
    if (pthread_create(&t[i], NULL, run, names[i]) != 0) return 1;
  struct timespec half = {(time_t)(seconds / 2),
                          (long)((seconds / 2 - (time_t)(seconds / 2)) * 1e9)};
  nanosleep(&half, NULL);
  __atomic_store_n(got, target, __ATOMIC_SEQ_CST);
  for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
  return 0;
}
