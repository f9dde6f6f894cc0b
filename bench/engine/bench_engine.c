/* bench_engine.c — throughput and step latency of the concurrent engine (no I/O, memory store).
 *
 *   bench_engine fanout [--sessions N] [--workers W] [--rate R]
 *       N sessions (default 10,000) of a 32-way fan-out + `all` join (34 steps each), all started
 *       at once (saturated); with --rate R they are started at R sessions/s instead (open loop,
 *       not saturated), which is what the latency goal is about.
 *   bench_engine loop [--sessions N] [--steps K] [--workers W]
 *       N concurrent IterationOfPi loops (the public example's rule, waitSec 3600) of K steps each
 *       (default 10,000 x 20) on a clock scaled by 10^7, so each 3600 s wait is 0.36 ms of real
 *       time and every step goes through the timer heap.
 *   --compare R (either workload): R rounds alternating 1 worker and W workers in this process,
 *       then the median steps/s of each and the scaling ratio (median of the round-by-round
 *       ratios: pairs taken back to back, so a machine that drifts affects both sides alike).
 *
 * Prints steps/s (steps applied / wall time from the first start to the last session's end) and
 * p50 / p99 / max step latency, ready (promoted) -> result applied, from the engine's histograms.
 */
#include <curl/curl.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "workloads.h"
#include "xgr/engine.h"

#define OWNER BENCH_OWNER

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_until(double t) {
  double d = t - now_s();
  if (d <= 0) return;
  struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
  nanosleep(&ts, NULL);
}

/* Each thread's time on a CPU and time waiting for one (run queue), from
 * /proc/self/task/<tid>/{comm,schedstat}: shows whether the workers were busy, waiting for a
 * core, or idle. */
static void print_threads(double wall) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return;
  struct dirent *de;
  printf("  threads (cpu ms / run-queue wait ms over %.0f ms):", wall * 1e3);
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.') continue;
    char path[300], name[32] = "?";
    unsigned long long run = 0, wait = 0;
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", de->d_name);
    FILE *f = fopen(path, "r");
    if (f) {
      if (fgets(name, sizeof name, f)) name[strcspn(name, "\n")] = 0;
      fclose(f);
    }
    snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", de->d_name);
    f = fopen(path, "r");
    if (f) {
      if (fscanf(f, "%llu %llu", &run, &wait) != 2) run = wait = 0;
      fclose(f);
    }
    printf(" %s %.0f/%.0f", name, (double)run / 1e6, (double)wait / 1e6);
  }
  closedir(d);
  printf("\n");
}

static int run(const char *what, long sessions, long steps, unsigned workers, double rate, double *steps_per_s) {
  bool loop = !strcmp(what, "loop");
  xgr_bundle *b = loop ? bench_pi_loop_bundle() : bench_fanout_bundle();
  /* each session parses its own start payload, as sessions arriving over JSON-RPC do (one value
   * shared by every session would make all of them count references on the same objects) */
  const char *payload_json = loop ? BENCH_PI_PAYLOAD : BENCH_FANOUT_PAYLOAD;
  xgr_engine_config cfg = {.workers = workers, .measure_latency = true,
                           .clock = loop ? (xgr_clock_config){.kind = XGR_CLOCK_SCALED, .scale = 1e7}
                                         : (xgr_clock_config){.kind = XGR_CLOCK_REAL}};
  xgr_error e;
  xgr_engine *eng = xgr_engine_new(&cfg, &e);
  if (!eng) {
    fprintf(stderr, "bench_engine: %s\n", e.message);
    return 1;
  }
  double t0 = now_s();
  for (long s = 0; s < sessions; s++) {
    if (rate > 0) sleep_until(t0 + (double)s / rate);
    xgr_value payload = bench_json(payload_json);
    xgr_engine_start req = {.bundle = b, .owner = OWNER, .root_pid = (uint64_t)s + 1,
                            .start = loop ? "PiIterationStep" : "A", .payload = payload,
                            .max_steps = loop ? (uint64_t)steps : 0};
    if (xgr_engine_start_session(eng, &req, &e)) {
      fprintf(stderr, "bench_engine: start: %s\n", e.message);
      return 1;
    }
    xgr_value_release(payload);
  }
  xgr_engine_stats st;
  for (;;) {   /* the end to within 1 ms (of 0.3 s or more), without stealing the workers' cores */
    xgr_engine_get_stats(eng, &st);
    if (st.sessions_finished == (uint64_t)sessions) break;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  double dt = now_s() - t0;
  xgr_engine_get_stats(eng, &st);
  char mode[64];
  if (rate > 0) snprintf(mode, sizeof mode, "started at %.0f/s", rate);
  else snprintf(mode, sizeof mode, "all at once");
  printf("engine %s: %ld sessions (%s), %llu steps in %.3f s = %.0f steps/s on %u worker%s; step latency "
         "p50 %.1f us, p99 %.1f us, max %.1f ms\n",
         loop ? "loop" : "fanout", sessions, mode, (unsigned long long)st.steps, dt, (double)st.steps / dt, workers,
         workers == 1 ? "" : "s", (double)st.lat_p50_ns / 1e3, (double)st.lat_p99_ns / 1e3, (double)st.lat_max_ns / 1e6);
  *steps_per_s = (double)st.steps / dt;
  const xgr_rt_counters *rc = &st.runtime;
  printf("  runtime: %llu actor turns, %llu events, %llu tasks, %llu steals (%llu items), %llu global takes, %llu spins, "
         "%llu parks, %llu wake-ups\n",
         (unsigned long long)rc->steps, (unsigned long long)rc->events, (unsigned long long)rc->tasks, (unsigned long long)rc->steals, (unsigned long long)rc->stolen,
         (unsigned long long)rc->global_batches, (unsigned long long)rc->spins, (unsigned long long)rc->parks,
         (unsigned long long)rc->wakeups);
  print_threads(dt);
  fflush(stdout);
  xgr_engine_free(eng);
  xgr_bundle_free(b);
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int usage(void) {
  fprintf(stderr, "usage: bench_engine fanout|loop [--sessions N] [--steps K] [--workers W] [--rate R] [--compare ROUNDS]\n");
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 2 || (strcmp(argv[1], "fanout") && strcmp(argv[1], "loop"))) return usage();
  long sessions = 10000, steps = 20;
  unsigned workers = 2;
  double rate = 0;
  int rounds = 0;
  for (int i = 2; i < argc; i += 2) {
    if (i + 1 >= argc) return usage();
    if (!strcmp(argv[i], "--sessions")) sessions = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--steps")) steps = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--workers")) workers = (unsigned)atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--rate")) rate = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--compare")) rounds = atoi(argv[i + 1]);
    else return usage();
  }
  if (sessions < 1 || steps < 1 || workers < 1 || rounds < 0 || rounds > 100) return usage();
  curl_global_init(CURL_GLOBAL_DEFAULT);
  int rc = 0;
  if (!rounds) {
    double r;
    rc = run(argv[1], sessions, steps, workers, rate, &r);
  } else {
    double one[100], many[100], ratio[100];
    for (int k = 0; k < rounds && !rc; k++) {
      rc = run(argv[1], sessions, steps, 1, rate, &one[k]);
      if (!rc) rc = run(argv[1], sessions, steps, workers, rate, &many[k]);
      ratio[k] = many[k] / one[k];
    }
    if (!rc) {
      printf("engine %s scaling over %d alternating rounds: pairwise ratios", argv[1], rounds);
      for (int k = 0; k < rounds; k++) printf(" %.2f", ratio[k]);
      double m1 = median(one, rounds), mw = median(many, rounds);
      printf("\nengine %s scaling: 1 worker %.0f steps/s, %u workers %.0f steps/s (medians); %u workers = %.2fx one "
             "(median of the pairwise ratios; ratio of the medians %.2fx)\n",
             argv[1], m1, workers, mw, workers, median(ratio, rounds), mw / m1);
    }
  }
  curl_global_cleanup();
  return rc;
}
