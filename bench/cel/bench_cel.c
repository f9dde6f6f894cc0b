/* bench_cel.c — benchmark of the expression engine: compile time and evaluations per second on
 * one core for the expressions of issue 3 (a price guardrail rule, `[Iter] + 1`, a consensus over
 * three values and a 32-element filter/all), evaluated against a bound payload map the way the
 * step engine does it. Usage: bench_cel [SECONDS_PER_CASE] (default 1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xgr/cel.h"
#include "xgr/value.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct bcase {
  const char *name, *expr;
  xgr_cel_mode mode;
} bcase;

int main(int argc, char **argv) {
  double secs = argc > 1 ? atof(argv[1]) : 1.0;
  const bcase cases[] = {
    {"guardrail", "([PrevPrice] == 0.0) || (abs([FetchedPrice] - [PrevPrice]) / [PrevPrice] <= [MaxDeltaPct])", XGR_CEL_MODE_RULE},
    {"iter+1", "[Iter] + 1", XGR_CEL_MODE_VALUE},
    {"consensus3", "consensus([[FetchedCoinbase], [FetchedBitstamp], [FetchedGecko]], \"rel\", \"medoid\", 0.01, 2)", XGR_CEL_MODE_VALUE},
    {"quorum3", "quorum([FetchedCoinbase, FetchedBitstamp, FetchedGecko], \"rel\", 0.01, 2)", XGR_CEL_MODE_RULE},
    {"filter_all32", "[Prices].filter(p, p > 100.0).all(p, p < 200.0)", XGR_CEL_MODE_RULE},
  };
  const char *payload =
      "{\"PrevPrice\": 100.25, \"FetchedPrice\": 101.5, \"MaxDeltaPct\": 0.02, \"Iter\": 41,"
      " \"FetchedCoinbase\": 100.0, \"FetchedBitstamp\": 100.4, \"FetchedGecko\": 97.0,"
      " \"Owner\": \"0x1234\", \"Note\": \"benchmark payload\", \"Prices\": [";
  char buf[2048];
  size_t k = (size_t)snprintf(buf, sizeof buf, "%s", payload);
  for (int i = 0; i < 32; i++) k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%d.5", i ? "," : "", 90 + i * 3);
  snprintf(buf + k, sizeof buf - k, "]}");
  xgr_value vars;
  xgr_error e;
  if (xgr_value_from_json_text(buf, strlen(buf), 0, &vars, &e)) {
    fprintf(stderr, "bench_cel: %s\n", e.message);
    return 1;
  }
  printf("%-13s %12s %14s %10s  %s\n", "case", "compile_us", "evals_per_s", "ns_per_eval", "result");
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    xgr_cel_options o = xgr_cel_options_default(cases[c].mode);
    xgr_cel_program *p = NULL;
    int ncomp = 2000;
    double t0 = now();
    for (int i = 0; i < ncomp; i++) {
      if (p) xgr_cel_program_free(p);
      if (xgr_cel_compile(cases[c].expr, (size_t)-1, &o, &p, &e)) {
        fprintf(stderr, "bench_cel: %s: %s\n", cases[c].name, e.message);
        return 1;
      }
    }
    double compile_us = (now() - t0) / ncomp * 1e6;
    xgr_cel_vars lv = xgr_cel_vars_map(vars, NULL);
    xgr_value r;
    if (xgr_cel_eval(p, &lv, &r, &e) != XGR_CEL_OK) {
      fprintf(stderr, "bench_cel: %s: %s\n", cases[c].name, e.message);
      return 1;
    }
    char *shown = xgr_value_to_json_text(r, 0, NULL);
    xgr_value_release(r);
    long n = 0, batch = 10000;
    t0 = now();
    double t1;
    do {
      for (long i = 0; i < batch; i++) {
        xgr_cel_eval(p, &lv, &r, NULL);
        xgr_value_release(r);
      }
      n += batch;
      t1 = now();
    } while (t1 - t0 < secs);
    double rate = (double)n / (t1 - t0);
    printf("%-13s %12.2f %14.0f %10.1f  %s\n", cases[c].name, compile_us, rate, 1e9 / rate, shown);
    free(shown);
    xgr_cel_program_free(p);
  }
  xgr_value_release(vars);
  return 0;
}
