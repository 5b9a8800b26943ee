/* fr_big_map FILE SECONDS: makes FILE a sparse 5 GiB file, maps all of it
 * executable and spins for SECONDS of CPU time in code written 4 GiB + 4 KiB
 * into it: samples whose frames lie past the 4 GiB a perf.data window spans.
 * Sparse, so one page of disk and of memory is used. x86-64 only. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fr_cpu.h"

#define CODE_AT ((4ull << 30) + 4096)
#define FILE_SIZE (5ull << 30)

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  /* loop: dec %rdi; jnz loop; ret */
  static const unsigned char code[] = {0x48, 0xff, 0xcf, 0x75, 0xfb, 0xc3};
  int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || ftruncate(fd, FILE_SIZE) != 0 ||
      pwrite(fd, code, sizeof(code), CODE_AT) != sizeof(code)) {
    perror(argv[1]);
    return 1;
  }
  unsigned char *map = mmap(NULL, FILE_SIZE, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  void (*spin)(unsigned long) = (void (*)(unsigned long))(map + CODE_AT);
  double end = cpu_now() + atof(argv[2]);
  while (cpu_now() < end) spin(10000000);
  return 0;
}
