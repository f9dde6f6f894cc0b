/* bench_rule.c — step engine throughput: IterationOfPi steps per second on one core, no I/O.
 *
 *   bench_rule [RULE.json] [--steps N]
 *
 * Loads the rule (default: tests/rule/IterationOfPi.json under XGR_SRC or the current directory)
 * and chains N steps through xgr_step_run, each step's effective payload feeding the next, as a
 * session would. Prints steps/s and the final Iter/S so the work cannot be optimised away. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xgr/rule.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  const char *path = NULL;
  long steps = 1000000;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atol(argv[++i]);
    else path = argv[i];
  }
  char buf[1024];
  if (!path) {
    const char *src = getenv("XGR_SRC");
    snprintf(buf, sizeof buf, "%s/tests/rule/IterationOfPi.json", src ? src : ".");
    path = buf;
  }
  xgr_rule *r;
  xgr_error e;
  if (xgr_rule_load_file(path, &r, &e)) {
    fprintf(stderr, "bench_rule: %s: %s: %s\n", path, e.path, e.message);
    return 2;
  }
  xgr_step_ctx ctx = {.owner = "0x0000000000000000000000000000000000000001", .session_id = 1, .pid = "1:1",
                      .step_id = "PiIterationStep"};
  const char *init = "{\"Iter\":0,\"S\":0.0,\"Pi\":0.0}";
  xgr_value p;
  if (xgr_value_from_json_text(init, strlen(init), 0, &p, &e)) return 2;
  double t0 = now();
  for (long i = 0; i < steps; i++) {
    xgr_step_result res;
    if (xgr_step_run(r, p, &ctx, NULL, &res) || !res.valid) {
      fprintf(stderr, "bench_rule: step %ld failed: %s\n", i, res.error.message);
      return 1;
    }
    xgr_value_release(p);
    p = xgr_value_retain(res.effective);
    xgr_step_result_free(&res);
  }
  double dt = now() - t0;
  xgr_value it, s;
  xgr_map_get_str(p, "Iter", 4, &it);
  xgr_map_get_str(p, "S", 1, &s);
  printf("rule: IterationOfPi %ld chained steps in %.3f s: %.0f steps/s (%.0f ns/step), Iter=%lld, 4*S=%.9f\n", steps,
         dt, (double)steps / dt, dt * 1e9 / (double)steps, (long long)it.as.i, 4.0 * s.as.d);
  xgr_value_release(p);
  xgr_rule_free(r);
  return 0;
}
