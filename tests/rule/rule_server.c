/* rule_server.c — the test server as a program, for the CLI shell test:
 *   rule_server ALPHA BETA GAMMA
 * prints "http://127.0.0.1:PORT" on stdout, then serves until stdin reaches end of file. */
#include <stdio.h>
#include <stdlib.h>

#include "server.h"

int main(int argc, char **argv) {
  test_server s = {0};
  s.alpha = argc > 1 ? atof(argv[1]) : 100;
  s.beta = argc > 2 ? atof(argv[2]) : 100;
  s.gamma = argc > 3 ? atof(argv[3]) : 100;
  if (test_server_start(&s)) {
    fprintf(stderr, "rule_server: cannot start\n");
    return 1;
  }
  printf("%s\n", s.base);
  fflush(stdout);
  while (getchar() != EOF) {
  }
  test_server_stop(&s);
  return 0;
}
