/* fr_faults PAGES ROUNDS: touches PAGES fresh anonymous pages ROUNDS times
 * (mmap, touch, munmap), generating a known stream of page faults. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv) {
  long pages = argc > 1 ? atol(argv[1]) : 1000;
  long rounds = argc > 2 ? atol(argv[2]) : 10;
  long psz = sysconf(_SC_PAGESIZE);
  for (long r = 0; r < rounds; r++) {
    char *p = mmap(NULL, pages * psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    for (long i = 0; i < pages; i++) p[i * psz] = 1;
    munmap(p, pages * psz);
  }
  return 0;
}
