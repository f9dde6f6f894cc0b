/* bench_store.c — durable steps per second on a store (SQLite, or PostgreSQL with --file URL): the fan-out workload (a 32-way
 * fan-out with an `all` join, 34 steps per session) run by many sessions at once over the session
 * core and the step engine, every step's changes group-committed before the session goes on.
 *
 *   bench_store [--sync full|normal] [--sessions N] [--live L] [--file PATH|URL] [--writers N]
 *
 * --file takes any store URL: a SQLite path (default: a temporary file) or postgresql://...
 * (bench/run.sh runs it on a throwaway cluster from tests/pg/pg_cluster.sh, fsync on). --writers:
 * PostgreSQL's writer connections (xgr_store_config.pg_writers; 0, the default: the store's default).
 *
 * One producer thread keeps L sessions live: a session whose last batch is committed takes a turn
 * (promote every due process up to the per-session cap, run their steps, apply the results: one
 * batch), submits it and waits for its commit before its next turn, as a driver must (effects only
 * after commit). The store's writer thread commits whatever is queued in one transaction. A step
 * counts as durable when its batch's commit returned. Prints steps/s and the commit batch sizes.
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "workloads.h"
#include "xgr/bundle.h"
#include "xgr/outcome.h"
#include "xgr/store.h"

#define OWNER BENCH_OWNER

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct bsess {
  xgr_session *s;
  int pending;                  /* a batch is in flight (atomic) */
  uint64_t steps_in_flight;
} bsess;

static uint64_t durable_steps;   /* atomic */

/* Commits that came back, so the producer sleeps until one does when no session can take a turn
 * (a sched_yield loop here took half of the process's CPU from the database server it waits on). */
static pthread_mutex_t done_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
static uint64_t done_count;

typedef struct ticket {
  bsess *x;
  uint64_t steps;
} ticket;

static void on_commit(void *ctx, int rc, const xgr_error *err) {
  bsess *x = ctx;
  if (rc) {
    fprintf(stderr, "bench_store: commit failed: %s\n", err ? err->message : "?");
    exit(1);
  }
  __atomic_add_fetch(&durable_steps, x->steps_in_flight, __ATOMIC_SEQ_CST);
  __atomic_store_n(&x->pending, 0, __ATOMIC_RELEASE);
  pthread_mutex_lock(&done_mu);
  done_count++;
  pthread_cond_signal(&done_cv);
  pthread_mutex_unlock(&done_mu);
}

/* One turn of x: run every due process (up to the cap) and apply the results; one batch. */
static uint64_t turn(const xgr_bundle *b, bsess *x, xgr_effects *fx, xgr_store_changes *c) {
  xgr_session_promote(x->s, 0, 64, fx);
  uint64_t iters[64];
  size_t n = 0;
  for (size_t k = 0; k < fx->n && n < 64; k++)
    if (fx->items[k].kind == XGR_FX_RUN_STEP) iters[n++] = fx->items[k].proc->iter;
  xgr_store_changes_add_effects(c, x->s, fx);
  xgr_effects_reset(fx);
  for (size_t i = 0; i < n; i++) {
    const xgr_proc *p = xgr_session_find(x->s, iters[i]);
    char pid[48];
    xgr_pid_format(xgr_session_root_pid(x->s), p->iter, pid, sizeof pid);
    xgr_step_ctx ctx = {.owner = OWNER, .session_id = xgr_session_root_pid(x->s), .pid = pid,
                        .step_id = b->orch->steps[p->step].id};
    xgr_step_result res;
    memset(&res, 0, sizeof res);
    unsigned step = p->step;
    xgr_value payload = xgr_value_retain(p->payload);
    xgr_step_run(b->step_rule[step], payload, &ctx, NULL, &res);
    xgr_value_release(payload);
    xgr_outcome_buf ob;
    xgr_step_outcome o;
    xgr_outcome_from_result(&res, b->step_rule_address[step], &ob, &o);
    xgr_session_step_result(x->s, iters[i], &o, 0, fx, NULL);
    xgr_step_result_free(&res);
    xgr_store_changes_add_effects(c, x->s, fx);
    xgr_effects_reset(fx);
  }
  return n;
}

int main(int argc, char **argv) {
  const char *sync = "full", *file = NULL;
  long total = 3000, live = 256, writers = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--sync")) sync = argv[i + 1];
    else if (!strcmp(argv[i], "--sessions")) total = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--live")) live = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--file")) file = argv[i + 1];
    else if (!strcmp(argv[i], "--writers")) writers = atol(argv[i + 1]);
    else {
      fprintf(stderr, "usage: bench_store [--sync full|normal] [--sessions N] [--live L] [--file PATH|URL] [--writers N]\n");
      return 2;
    }
  }
  if (total <= 0 || live <= 0) return 2;
  curl_global_init(CURL_GLOBAL_DEFAULT);
  char path[256], dir[] = "/tmp/xgr-bench-store-XXXXXX";
  if (!file) {
    if (!mkdtemp(dir)) return 1;
    snprintf(path, sizeof path, "%s/bench.db", dir);
    file = path;
  }
  xgr_store_config cfg = {.sync = strcmp(sync, "normal") ? XGR_STORE_SYNC_FULL : XGR_STORE_SYNC_NORMAL,
                          .gc_interval_ms = -1, .pg_writers = (int)writers};
  xgr_error e;
  xgr_store *st = xgr_store_open(file, &cfg, &e);
  if (!st) {
    fprintf(stderr, "bench_store: %s\n", e.message);
    return 1;
  }
  xgr_bundle *b = bench_fanout_bundle();
  xgr_value payload = xgr_map_new(1);
  xgr_map_set_str(payload, "N", 1, xgr_value_int(0));
  bsess *ss = calloc((size_t)live, sizeof *ss);
  xgr_effects fx;
  xgr_effects_init(&fx);
  long started = 0, finished = 0;
  uint64_t steps = 0;
  double t0 = now_s();
  uint64_t seen = 0;
  while (finished < total) {
    int progressed = 0;
    pthread_mutex_lock(&done_mu);
    seen = done_count;
    pthread_mutex_unlock(&done_mu);
    for (long i = 0; i < live; i++) {
      bsess *x = &ss[i];
      if (__atomic_load_n(&x->pending, __ATOMIC_ACQUIRE)) continue;
      if (x->s && xgr_session_result_of(x->s) != XGR_RESULT_RUNNING) {
        xgr_session_free(x->s);
        x->s = NULL;
        finished++;
      }
      xgr_store_changes *c = xgr_store_changes_new();
      xgr_store_changes_defer_live(c);   /* a turn per batch, submitted at its end (as xgrd's engine does) */
      if (!x->s) {
        if (started >= total) {
          xgr_store_changes_free(c);
          continue;
        }
        x->s = xgr_session_new(b->orch, OWNER, (uint64_t)++started, NULL);
        xgr_session_start(x->s, 0, payload, 0, &fx, NULL);
        xgr_store_changes_add_session_start(c, x->s, "bench");
        xgr_store_changes_add_effects(c, x->s, &fx);
        xgr_effects_reset(&fx);
      }
      x->steps_in_flight = turn(b, x, &fx, c);
      steps += x->steps_in_flight;
      x->pending = 1;
      xgr_store_submit(st, c, on_commit, x);
      progressed = 1;
    }
    if (!progressed && finished < total) { /* a batch is in flight: wait for a commit to come back */
      pthread_mutex_lock(&done_mu);
      while (done_count == seen) pthread_cond_wait(&done_cv, &done_mu);
      pthread_mutex_unlock(&done_mu);
    }
  }
  xgr_store_flush(st);
  double dt = now_s() - t0;
  xgr_store_stats s;
  xgr_store_get_stats(st, &s);
  uint64_t durable = __atomic_load_n(&durable_steps, __ATOMIC_SEQ_CST);
  printf("store fanout (%s, synchronous=%s): %ld sessions of a 32-way fan-out + all join, %llu durable steps in %.2f s = "
         "%.0f durable steps/s; %llu commits, %.1f batches (%.0f steps, %.0f rows) per commit, largest %llu batches\n",
         xgr_store_backend(st), strcmp(sync, "normal") ? "FULL" : "NORMAL", total, (unsigned long long)durable, dt, (double)durable / dt,
         (unsigned long long)s.transactions, (double)s.batches / (double)s.transactions,
         (double)durable / (double)s.transactions, (double)s.entries / (double)s.transactions,
         (unsigned long long)s.max_batches_per_tx);
  if (durable != steps) {
    fprintf(stderr, "bench_store: %llu steps run but %llu durable\n", (unsigned long long)steps, (unsigned long long)durable);
    return 1;
  }
  xgr_store_close(st);
  xgr_effects_free(&fx);
  free(ss);
  xgr_value_release(payload);
  xgr_bundle_free(b);
  if (file == path) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) { /* best effort */ }
  }
  curl_global_cleanup();
  return 0;
}
