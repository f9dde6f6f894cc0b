/* persist.c — the engine's store hook on top of the store's group commit (xgr/node.h, "the persistence adapter").
 *
 * The engine hands over one batch per session actor turn: the snapshots of the processes that
 * changed and the history rows of the steps whose results were applied. submit() has the store
 * turn it into rows (xgr_store_changes_add_batch, the store's one translator: proc_rt upserts,
 * proc_steps rows, killed scopes, outbox rows, the session's state row) and submits them; the
 * SQLite store's writer thread commits every queued batch in one
 * transaction and calls back, and the callback calls the engine's done(), which releases the
 * session's visible effects (next steps, wake-ups, control replies).
 *
 * Kept here: the step count of a session that may be evicted (a batch with a due time), one entry
 * per such session in 64 shards (each a util/hashmap keyed by rootPid, owners compared exactly,
 * under its own mutex), handed back when it is loaded (xgr_node_persist_steps).
 * Metrics: steps by outcome, step latency (ready to applied, session clock), commit latency
 * (submit to durable), processes that ended by status, batches in flight.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "node/node_impl.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/hashmap.h"

#define NSHARDS 64

typedef struct track {
  char owner[64];
  uint64_t root;
  uint64_t steps;               /* xgr_store_batch.steps of the last batch (kept while hibernated) */
} track;

typedef struct tshard {
  pthread_mutex_t mu;
  xgr_hashmap tab;              /* track by rootPid (hashed mode: owner told apart by match) */
} tshard;

struct xgr_node_persist {
  xgr_store *st;
  xgr_store_hook hook;
  tshard sh[NSHARDS];
  atomic_uint_fast64_t inflight;
  /* metrics (NULL until xgr_node_persist_metrics) */
  xgr_counter *steps[6];
  xgr_counter *ended[2];
  xgr_histogram *step_lat, *commit_lat;
  xgr_counter *batches, *failed;
};

enum { OUT_VALID, OUT_INVALID, OUT_ERROR, OUT_ABORT, OUT_CANCEL, OUT_OTHER };
static const char *const out_names[] = {"valid", "invalid", "error", "abort_step", "cancel", "other"};

typedef struct pending {
  xgr_node_persist *p;
  xgr_store_done_fn done;
  void *token;
  double t0;
} pending;

typedef struct track_key {
  const char *owner;
  uint64_t root;
} track_key;

static bool track_match(const void *ctx, const void *val) {
  const track_key *k = ctx;
  const track *t = val;
  return t->root == k->root && !strcmp(t->owner, k->owner);
}

static tshard *shard_of(xgr_node_persist *p, uint64_t root) { return &p->sh[(root * 0x9E3779B97F4A7C15ull) >> 58]; }

/* The entry of (owner, root), created when create is set; the shard's mutex is held on return
 * (*shp). */
static track *lookup(xgr_node_persist *p, const char *owner, uint64_t root, bool create, tshard **shp) {
  tshard *sh = shard_of(p, root);
  pthread_mutex_lock(&sh->mu);
  *shp = sh;
  track_key k = {owner, root};
  track *t = xgr__hashmap_find(&sh->tab, root, track_match, &k);
  if (t || !create) return t;
  t = xgr__xcalloc(1, sizeof *t);
  xgr__str_copy(t->owner, sizeof t->owner, owner);
  t->root = root;
  xgr__hashmap_add(&sh->tab, root, t);
  return t;
}

static void forget(xgr_node_persist *p, const char *owner, uint64_t root) {
  tshard *sh;
  track *t = lookup(p, owner, root, false, &sh);
  if (t) {
    xgr__hashmap_remove(&sh->tab, root, t);
    free(t);
  }
  pthread_mutex_unlock(&sh->mu);
}

uint64_t xgr_node_persist_steps(xgr_node_persist *p, const char *owner, uint64_t root_pid) {
  tshard *sh;
  track *t = lookup(p, owner, root_pid, false, &sh);
  uint64_t n = t ? t->steps : 0;
  pthread_mutex_unlock(&sh->mu);
  return n;
}

uint64_t xgr_node_persist_inflight(xgr_node_persist *p) { return atomic_load(&p->inflight); }

/* ---- the hook -------------------------------------------------------------------------------------- */

static void committed(void *ctx, int rc, const xgr_error *err) {
  (void)err;
  pending *pd = ctx;
  xgr_node_persist *p = pd->p;
  if (p->commit_lat) xgr_histogram_observe(p->commit_lat, xgr__mono_s() - pd->t0);
  if (rc && p->failed) xgr_counter_add(p->failed, 1);
  atomic_fetch_sub(&p->inflight, 1);
  pd->done(pd->token, rc);
  free(pd);
}

static int outcome_of(const xgr_engine_hist *h, const xgr_engine_proc *pr) {
  if (h->valid == 1) return OUT_VALID;
  if (h->valid == 0) return OUT_INVALID;
  if (!pr) return OUT_OTHER;
  switch (pr->abort_reason) {
    case XGR_ABORT_ERROR: return OUT_ERROR;
    case XGR_ABORT_STEP: return OUT_ABORT;
    case XGR_ABORT_CANCEL: return OUT_CANCEL;
    default: return OUT_OTHER;
  }
}

static int submit(void *ctx, const xgr_store_batch *b, xgr_store_done_fn done, void *token) {
  xgr_node_persist *p = ctx;
  xgr_store_changes *c = xgr_store_changes_new();
  if (!c) return XGR_ENOMEM;
  xgr_store_changes_add_batch(c, b);   /* the rows: the store's one translator */
  if (p->ended[0])
    for (size_t i = 0; i < b->nprocs; i++) {   /* the last snapshot of each process counts */
      const xgr_engine_proc *e = &b->procs[i];
      bool later = false;
      for (size_t j = i + 1; j < b->nprocs && !later; j++) later = b->procs[j].iter == e->iter;
      if (!later && (e->status == XGR_PROC_DONE || e->status == XGR_PROC_ABORTED))
        xgr_counter_add(p->ended[e->status == XGR_PROC_DONE ? 0 : 1], 1);
    }
  if (p->steps[0])
    for (size_t i = 0; i < b->nhist; i++) {
      const xgr_engine_hist *h = &b->hist[i];
      const xgr_engine_proc *pr = NULL;
      for (size_t j = b->nprocs; j-- > 0 && !pr;)
        if (b->procs[j].iter == h->iter) pr = &b->procs[j];
      int64_t fin = pr && pr->finished_at ? pr->finished_at : h->at;
      xgr_counter_add(p->steps[outcome_of(h, pr)], 1);
      if (fin >= h->at) xgr_histogram_observe(p->step_lat, (double)(fin - h->at) / 1e3);
    }
  if (b->nprocs || b->nhist || b->finished || b->due > 0) {   /* a batch that changes the session */
    bool ended = b->finished && (b->result == XGR_RESULT_COMPLETED || b->result == XGR_RESULT_KILLED);
    if (b->steps && b->due > 0) {   /* it may be evicted: keep its step count for its next load */
      tshard *sh;
      track *t = lookup(p, b->owner, b->root_pid, true, &sh);
      if (b->steps > t->steps) t->steps = b->steps;
      pthread_mutex_unlock(&sh->mu);
    }
    if (ended && b->steps) forget(p, b->owner, b->root_pid);
  }
  pending *pd = xgr__xmalloc(sizeof *pd);
  *pd = (pending){.p = p, .done = done, .token = token, .t0 = xgr__mono_s()};
  atomic_fetch_add(&p->inflight, 1);
  if (p->batches) xgr_counter_add(p->batches, 1);
  xgr_store_submit(p->st, c, committed, pd);   /* committed() runs exactly once, maybe already */
  return 0;
}

xgr_node_persist *xgr_node_persist_new(xgr_store *st) {
  xgr_node_persist *p = xgr__xcalloc(1, sizeof *p);
  p->st = st;
  p->hook.submit = submit;
  p->hook.ctx = p;
  for (size_t i = 0; i < NSHARDS; i++) pthread_mutex_init(&p->sh[i].mu, NULL);
  return p;
}

void xgr_node_persist_metrics(xgr_node_persist *p, xgr_metrics *m) {
  for (int i = 0; i < 6; i++) {
    char l[48];
    snprintf(l, sizeof l, "outcome=\"%s\"", out_names[i]);
    p->steps[i] = xgr_metrics_counter(m, "xgr_steps_total", "Steps whose result was applied, by outcome", l);
  }
  p->ended[0] = xgr_metrics_counter(m, "xgr_processes_ended_total", "Processes that ended, by status", "status=\"done\"");
  p->ended[1] = xgr_metrics_counter(m, "xgr_processes_ended_total", "Processes that ended, by status", "status=\"aborted\"");
  p->step_lat = xgr_metrics_histogram(m, "xgr_step_seconds", "Step latency: began to run until its result was applied",
                                      "", xgr_metrics_latency_buckets, xgr_metrics_latency_nbuckets);
  p->commit_lat = xgr_metrics_histogram(m, "xgr_store_commit_seconds", "Store batch latency: submitted until durable", "",
                                        xgr_metrics_latency_buckets, xgr_metrics_latency_nbuckets);
  p->batches = xgr_metrics_counter(m, "xgr_store_batches_total", "Engine batches submitted to the store", "");
  p->failed = xgr_metrics_counter(m, "xgr_store_batches_failed_total", "Engine batches the store refused", "");
}

const xgr_store_hook *xgr_node_persist_hook(xgr_node_persist *p) { return &p->hook; }

void xgr_node_persist_free(xgr_node_persist *p) {
  if (!p) return;
  for (size_t i = 0; i < NSHARDS; i++) {
    tshard *sh = &p->sh[i];
    size_t pos = 0;
    for (track *t; (t = xgr__hashmap_next(&sh->tab, &pos, NULL));) free(t);
    xgr__hashmap_free(&sh->tab);
    pthread_mutex_destroy(&sh->mu);
  }
  free(p);
}
