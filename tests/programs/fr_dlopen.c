/* fr_dlopen LIB SECONDS: dlopen()s LIB, burns CPU in its plugin_burn for
 * SECONDS of CPU time, dlclose()s it and exits — all inside a recorder's
 * window, so attribution must survive both the unmap and the exit. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: fr_dlopen LIB SECONDS\n");
    return 2;
  }
  void *h = dlopen(argv[1], RTLD_NOW);
  if (!h) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  void (*burn)(double) = (void (*)(double))dlsym(h, "plugin_burn");
  if (!burn) return 1;
  printf("%d\n", getpid());
  fflush(stdout);
  burn(atof(argv[2]));
  dlclose(h);
  return 0;
}
