/* bench_runtime.c — throughput of the work-stealing runtime on two workloads.
 *
 *   bench_runtime spawn-tree --depth D [--workers N]
 *       A binary tree of processes: each process spawns two children and waits for their
 *       completion messages (carrying subtree sizes); leaves complete at once. 2^(D+1)-1 tasks.
 *   bench_runtime ping-pong --pairs P --msgs M [--workers N]
 *       P pairs of processes; in each pair one sends, the other replies, M messages each way.
 *
 * Prints one line: the workload, its size, the wall time from the first spawn to the last
 * completion, tasks or messages per second, the peak resident set size of the whole program, and
 * the runtime's counters. The result is checked (subtree sizes, message counts) before printing.
 * The same workloads in oneTBB and Go are in bench/peers/runtime/.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "xgr/runtime.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double peak_rss_mb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_maxrss / 1024.0; /* ru_maxrss is in KiB on Linux */
}

/* "done" signal from a process to the main thread */
typedef struct done_sig {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
  uint64_t value;
} done_sig;

static void signal_done(done_sig *d, uint64_t value) {
  pthread_mutex_lock(&d->mu);
  d->done = 1;
  d->value = value;
  pthread_cond_signal(&d->cv);
  pthread_mutex_unlock(&d->mu);
}

static void wait_done(done_sig *d) {
  pthread_mutex_lock(&d->mu);
  while (!d->done) pthread_cond_wait(&d->cv, &d->mu);
  pthread_mutex_unlock(&d->mu);
}

/* ---- spawn-tree ------------------------------------------------------------------------------ */
typedef struct tnode {
  xgr_pid parent;   /* 0 for the root */
  int depth, pending;
  uint64_t count;   /* tasks in the subtree seen so far */
  done_sig *root_done;
} tnode;

static const xgr_process_vt tnode_vt;

static int tnode_init(void *self, const xgr_ctx *ctx, const char *m, void *in, xgr_error *err) {
  tnode *t = self;
  const tnode *src = in;
  t->parent = src->parent;
  t->depth = src->depth;
  t->root_done = src->root_done;
  (void)ctx, (void)m, (void)err;
  return 0;
}

static int tnode_step(void *self, const xgr_ctx *ctx, const xgr_event *ev, size_t n, xgr_step_out *out) {
  tnode *t = self;
  if (t->count == 0) {
    t->count = 1;
    if (t->depth > 0) {
      tnode child = {ctx->self, t->depth - 1, 0, 0, t->root_done};
      for (int i = 0; i < 2; i++) {
        int rc = xgr_ctx_spawn(ctx, &tnode_vt, NULL, "node", &child, NULL, NULL);
        if (rc) return rc;
      }
      t->pending = 2;
    }
  }
  for (size_t i = 0; i < n; i++) {
    if (ev[i].type != XGR_EV_MESSAGE) continue;
    t->count += ev[i].tag;
    t->pending--;
  }
  if (t->pending > 0) {
    out->status = XGR_STEP_IDLE;
    return 0;
  }
  if (t->parent) xgr_ctx_send(ctx, t->parent, t->count, NULL);
  else signal_done(t->root_done, t->count);
  out->status = XGR_STEP_COMPLETE;
  return 0;
}

static const xgr_process_vt tnode_vt = {"tnode", sizeof(tnode), tnode_init, tnode_step, NULL, NULL};

/* ---- ping-pong --------------------------------------------------------------------------------- */
typedef struct pp {
  xgr_pid peer;     /* pinger: its ponger; ponger: 0 (replies to the sender) */
  long msgs, sent, got;
  _Atomic long *pairs_left;
  done_sig *all_done;
} pp;

static int pp_init(void *self, const xgr_ctx *ctx, const char *m, void *in, xgr_error *err) {
  *(pp *)self = *(const pp *)in;
  (void)ctx, (void)m, (void)err;
  return 0;
}

static int pinger_step(void *self, const xgr_ctx *ctx, const xgr_event *ev, size_t n, xgr_step_out *out) {
  pp *p = self;
  for (size_t i = 0; i < n; i++)
    if (ev[i].type == XGR_EV_MESSAGE) p->got++;
  if (p->sent == 0 || (n > 0 && p->sent < p->msgs)) {
    p->sent++;
    xgr_ctx_send(ctx, p->peer, (uint64_t)p->sent, NULL);
  }
  if (p->got == p->msgs) {
    if (atomic_fetch_sub(p->pairs_left, 1) == 1) signal_done(p->all_done, 0);
    out->status = XGR_STEP_COMPLETE;
  } else {
    out->status = XGR_STEP_IDLE;
  }
  return 0;
}

static int ponger_step(void *self, const xgr_ctx *ctx, const xgr_event *ev, size_t n, xgr_step_out *out) {
  pp *p = self;
  for (size_t i = 0; i < n; i++) {
    if (ev[i].type != XGR_EV_MESSAGE) continue;
    p->got++;
    xgr_ctx_send(ctx, ev[i].from, ev[i].tag, NULL);
  }
  out->status = p->got == p->msgs ? XGR_STEP_COMPLETE : XGR_STEP_IDLE;
  return 0;
}

static const xgr_process_vt pinger_vt = {"pinger", sizeof(pp), pp_init, pinger_step, NULL, NULL};
static const xgr_process_vt ponger_vt = {"ponger", sizeof(pp), pp_init, ponger_step, NULL, NULL};

/* ---- main ---------------------------------------------------------------------------------------- */
static void usage(void) {
  fprintf(stderr, "usage: bench_runtime spawn-tree --depth D [--workers N]\n"
                  "       bench_runtime ping-pong --pairs P --msgs M [--workers N]\n");
  exit(2);
}

static void print_counters(xgr_rt *rt) {
  xgr_rt_counters c;
  xgr_rt_get_counters(rt, &c);
  printf(" steps=%llu steals=%llu stolen=%llu global_batches=%llu spins=%llu yields=%llu parks=%llu "
         "wakeups=%llu\n",
         (unsigned long long)c.steps, (unsigned long long)c.steals, (unsigned long long)c.stolen,
         (unsigned long long)c.global_batches, (unsigned long long)c.spins,
         (unsigned long long)c.yields_os, (unsigned long long)c.parks, (unsigned long long)c.wakeups);
}

int main(int argc, char **argv) {
  if (argc < 2) usage();
  const char *what = argv[1];
  long depth = 20, pairs = 1000, msgs = 10000;
  unsigned workers = 0;
  for (int i = 2; i < argc; i++) {
    if (i + 1 >= argc) usage();
    if (!strcmp(argv[i], "--depth")) depth = atol(argv[++i]);
    else if (!strcmp(argv[i], "--pairs")) pairs = atol(argv[++i]);
    else if (!strcmp(argv[i], "--msgs")) msgs = atol(argv[++i]);
    else if (!strcmp(argv[i], "--workers")) workers = (unsigned)atol(argv[++i]);
    else usage();
  }
  xgr_rt_config cfg = {.workers = workers};
  xgr_rt *rt = xgr_rt_new(&cfg);
  xgr_error err;
  if (!rt || xgr_rt_start(rt, &err) != 0) {
    fprintf(stderr, "bench_runtime: cannot start the runtime\n");
    return 1;
  }
  done_sig done = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
  int rc = 0;
  if (!strcmp(what, "spawn-tree")) {
    if (depth < 0 || depth > 30) usage();
    uint64_t expect = (1ull << (depth + 1)) - 1;
    tnode root = {0, (int)depth, 0, 0, &done};
    double t0 = now_s();
    if (xgr_rt_spawn(rt, &tnode_vt, NULL, "node", &root, NULL, &err) != 0) return 1;
    wait_done(&done);
    double dt = now_s() - t0;
    xgr_rt_wait_idle(rt, -1);
    if (done.value != expect) {
      fprintf(stderr, "spawn-tree: counted %llu tasks, expected %llu\n",
              (unsigned long long)done.value, (unsigned long long)expect);
      rc = 1;
    }
    printf("xgr spawn-tree depth=%ld workers=%u tasks=%llu time=%.4fs rate=%.3fM tasks/s peak_rss=%.1fMB",
           depth, xgr_rt_workers(rt), (unsigned long long)expect, dt, (double)expect / dt / 1e6,
           peak_rss_mb());
  } else if (!strcmp(what, "ping-pong")) {
    if (pairs < 1 || msgs < 1) usage();
    _Atomic long left = pairs;
    double t0 = now_s();
    for (long i = 0; i < pairs; i++) {
      pp b = {0, msgs, 0, 0, &left, &done};
      xgr_pid bp;
      if (xgr_rt_spawn(rt, &ponger_vt, NULL, "pong", &b, &bp, &err) != 0) return 1;
      pp a = {bp, msgs, 0, 0, &left, &done};
      if (xgr_rt_spawn(rt, &pinger_vt, NULL, "ping", &a, NULL, &err) != 0) return 1;
    }
    wait_done(&done);
    double dt = now_s() - t0;
    xgr_rt_wait_idle(rt, -1);
    xgr_rt_counters c;
    xgr_rt_get_counters(rt, &c);
    uint64_t total = 2ull * (uint64_t)pairs * (uint64_t)msgs;
    if (c.messages != total) {
      fprintf(stderr, "ping-pong: %llu messages, expected %llu\n", (unsigned long long)c.messages,
              (unsigned long long)total);
      rc = 1;
    }
    printf("xgr ping-pong pairs=%ld msgs=%ld workers=%u messages=%llu time=%.4fs rate=%.3fM msgs/s "
           "peak_rss=%.1fMB",
           pairs, msgs, xgr_rt_workers(rt), (unsigned long long)total, dt, (double)total / dt / 1e6,
           peak_rss_mb());
  } else {
    usage();
  }
  print_counters(rt);
  xgr_rt_shutdown(rt, 1000);
  xgr_rt_free(rt);
  return rc;
}
