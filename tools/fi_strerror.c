/* SPDX-License-Identifier: MIT */
/* weft — fi_strerror: print the text of a libfabric error code. */
#include <rdma/fi_errno.h>

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "Usage: %s FI_ERROR_CODE\n", argv[0]);
    return EXIT_FAILURE;
  }
  char *end = NULL;
  long code = strtol(argv[1], &end, 0);
  if (!end || *end) {
    fprintf(stderr, "%s: not a number: %s\n", argv[0], argv[1]);
    return EXIT_FAILURE;
  }
  printf("%s\n", fi_strerror((int)code));
  return EXIT_SUCCESS;
}
