/* bench_bigcore MIB: fills MIB MiB of heap with a core-like mix (text-like
 * records, small integers, zero pages), then dies from SIGSEGV so the kernel
 * writes a core of about that size. */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
  size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 2048;
  size_t size = mib << 20;
  unsigned char *p = malloc(size);
  if (!p) return 1;
  unsigned long x = 88172645463325252UL;
  for (size_t off = 0; off < size; off += 4096) {
    unsigned char *page = p + off;
    switch ((off >> 12) % 4) {
      case 0: /* zero page (touched, so it is in the core) */
        memset(page, 0, 4096);
        break;
      case 1: /* text-like */
        for (int i = 0; i < 4096; i += 64)
          snprintf((char *)page + i, 64, "request %lu user=%lu status=ok path=/api/v1/items\n",
                   (unsigned long)(off + i), (unsigned long)(x % 1000));
        break;
      default: /* small integers and pointers */
        for (int i = 0; i < 4096; i += 8) {
          x ^= x << 13, x ^= x >> 7, x ^= x << 17;
          unsigned long v = (x & 0xff) | ((unsigned long)(uintptr_t)page & ~0xfffUL);
          memcpy(page + i, &v, 8);
        }
    }
  }
  printf("%d\n", (int)getpid());
  fflush(stdout);
  *(volatile int *)0 = (int)p[size / 2];
  return 0;
}
