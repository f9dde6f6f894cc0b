/* bench_session.c — throughput of the session core + step engine on the deterministic driver
 * (one thread, virtual clock, no I/O, no reports kept).
 *
 *   bench_session loop [--steps N]        an endless IterationOfPi loop (the public example's rule,
 *                                         waitSec 3600 on virtual time); prints steps/s and the
 *                                         resident memory after each tenth of the run
 *   bench_session fanout [--sessions N]   N sessions, one after another, of a 32-way fan-out with
 *                                         an `all` join (34 steps each); prints steps/s
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "workloads.h"
#include "xgr/driver.h"

#define OWNER BENCH_OWNER

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long rss_kb(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, res = 0;
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
    fclose(f);
  }
  return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static int loop(uint64_t steps) {
  xgr_bundle *b = bench_pi_loop_bundle();
  xgr_error e;
  xgr_value payload = bench_json(BENCH_PI_PAYLOAD);
  xgr_driver_config cfg = {0};
  xgr_driver *d = xgr_driver_new(&cfg);
  xgr_driver_add_session(d, b, OWNER, 1, "PiIterationStep", payload, &e);
  xgr_value_release(payload);
  double t0 = now_s();
  long rss[10];
  for (int tenth = 1; tenth <= 10; tenth++) {
    xgr_driver_set_max_steps(d, steps * (uint64_t)tenth / 10);
    xgr_driver_run(d);
    rss[tenth - 1] = rss_kb();
  }
  double dt = now_s() - t0;
  printf("session loop: %llu IterationOfPi steps in %.2f s = %.0f steps/s (1 core, deterministic driver)\n",
         (unsigned long long)xgr_driver_steps(d), dt, (double)xgr_driver_steps(d) / dt);
  printf("session loop: resident memory after 1/10 of the steps %ld KiB, after all %ld KiB (growth %ld KiB)\n",
         rss[0], rss[9], rss[9] - rss[0]);
  xgr_driver_free(d);
  xgr_bundle_free(b);
  return 0;
}

static int fanout(long sessions) {
  xgr_bundle *b = bench_fanout_bundle();
  xgr_value payload = bench_json(BENCH_FANOUT_PAYLOAD);
  uint64_t total = 0;
  double t0 = now_s();
  for (long s = 0; s < sessions; s++) {
    xgr_driver_config cfg = {0};
    xgr_driver *d = xgr_driver_new(&cfg);
    xgr_error e;
    xgr_driver_add_session(d, b, OWNER, (uint64_t)s + 1, "A", payload, &e);
    xgr_driver_run(d);
    if (xgr_driver_result(d, 0) != XGR_RESULT_COMPLETED) {
      fprintf(stderr, "bench_session: session %ld did not complete\n", s);
      return 1;
    }
    total += xgr_driver_steps(d);
    xgr_driver_free(d);
  }
  double dt = now_s() - t0;
  printf("session fanout: %ld sessions of a 32-way fan-out + all join, %llu steps in %.2f s = %.0f steps/s "
         "(1 core, deterministic driver)\n", sessions, (unsigned long long)total, dt, (double)total / dt);
  xgr_value_release(payload);
  xgr_bundle_free(b);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2 || (strcmp(argv[1], "loop") && strcmp(argv[1], "fanout"))) {
    fprintf(stderr, "usage: bench_session loop [--steps N] | fanout [--sessions N]\n");
    return 2;
  }
  long n = !strcmp(argv[1], "loop") ? 1000000 : 10000;
  if (argc >= 4) n = atol(argv[3]);
  if (n <= 0) {
    fprintf(stderr, "bench_session: the count must be positive\n");
    return 2;
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  int rc = !strcmp(argv[1], "loop") ? loop((uint64_t)n) : fanout(n);
  curl_global_cleanup();
  return rc;
}
