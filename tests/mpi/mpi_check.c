/* SPDX-License-Identifier: MIT */
/* weft — the helpers of mpi_check.h. */
#define _GNU_SOURCE
#include "mpi_check.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int rank, nranks;

void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: rank %d: FAIL: ", program, rank);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  exit(1);
}

void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) fail("out of memory (%zu bytes)", n);
  return p;
}

double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void check_library(const char *component, const char *script) {
  const char *dir = getenv("WEFT_LIB_DIR");
  if (!dir || !*dir) fail("WEFT_LIB_DIR is not set (run through %s)", script);
  char want[PATH_MAX], path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/libfabric.so.1", dir);
  if (!realpath(path, want)) fail("%s does not exist", path);

  FILE *maps = fopen("/proc/self/maps", "r");
  if (!maps) fail("cannot open /proc/self/maps");
  char line[PATH_MAX + 256];
  char other[PATH_MAX] = "";
  int weft = 0, loaded = 0;
  while (fgets(line, sizeof line, maps)) {
    char *file = strchr(line, '/');
    if (!file) continue;
    file[strcspn(file, "\n")] = '\0';
    const char *base = strrchr(file, '/') + 1;
    if (strstr(base, component)) loaded = 1;
    if (strncmp(base, "libfabric.so", 12) != 0) continue;
    if (strcmp(file, want) == 0) {
      weft = 1;
    } else {
      snprintf(other, sizeof other, "%s", file);
    }
  }
  fclose(maps);
  if (*other) fail("%s is loaded, not weft's %s", other, want);
  if (!loaded) fail("Open MPI's %s.so is not loaded: the OFI component was not selected", component);
  if (!weft) fail("weft's %s is not mapped", want);
  if (rank == 0) printf("%s: every rank runs on %s\n", program, want);
}
