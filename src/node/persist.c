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
#include <stdio.h>
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

/* One owner's stored bytes (the quota per owner): the store's sum when read, plus what was
 * submitted since. */
typedef struct obytes {
  char owner[64];
  uint64_t bytes;
  uint64_t read_ns;             /* monotonic ns of the last read from the store (0: never) */
  uint64_t refused;             /* the size of the last batch refused for the owner quota (0: none) */
} obytes;

struct xgr_node_persist {
  xgr_store *st;
  uint64_t max_owner_bytes;     /* 0: none */
  pthread_mutex_t omu;          /* guards owners */
  xgr_hashmap owners;           /* obytes by a hash of the owner */
  xgr_counter *quota_refused;   /* batches refused for a quota (the session was aborted) */
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

/* ---- the owners' stored bytes ------------------------------------------------------------------------ */

static uint64_t owner_key(const char *owner) {
  uint64_t x = 0xcbf29ce484222325ull;
  for (const char *c = owner; *c; c++) x = (x ^ (unsigned char)*c) * 0x100000001b3ull;
  return x ? x : 1;
}

static bool obytes_match(const void *ctx, const void *val) { return !strcmp(ctx, ((const obytes *)val)->owner); }

/* owner's entry, created (count 0, never read) when create; under p->omu. */
static obytes *owner_entry(xgr_node_persist *p, const char *owner, bool create) {
  obytes *o = xgr__hashmap_find(&p->owners, owner_key(owner), obytes_match, owner);
  if (o || !create) return o;
  o = xgr__xcalloc(1, sizeof *o);
  xgr__str_copy(o->owner, sizeof o->owner, owner);
  xgr__hashmap_add(&p->owners, owner_key(owner), o);
  return o;
}

void xgr_node_persist_set_owner_quota(xgr_node_persist *p, uint64_t max_owner_bytes) { p->max_owner_bytes = max_owner_bytes; }

int xgr_node_persist_owner_bytes(xgr_node_persist *p, const char *owner, int64_t max_age_ms, uint64_t *bytes,
                                 uint64_t *refused, xgr_error *err) {
  uint64_t now = xgr__mono_ns(), dummy;
  if (!refused) refused = &dummy;
  pthread_mutex_lock(&p->omu);
  obytes *o = owner_entry(p, owner, false);
  bool fresh = o && o->read_ns && now - o->read_ns <= (uint64_t)max_age_ms * 1000000u;
  *bytes = o ? o->bytes : 0;
  *refused = o ? o->refused : 0;
  pthread_mutex_unlock(&p->omu);
  if (fresh) return 0;
  /* read the sum, then add what was submitted meanwhile: batches submitted while the read runs
   * may be counted twice for a moment (until the next read), never missed */
  pthread_mutex_lock(&p->omu);
  o = owner_entry(p, owner, true);
  uint64_t before = o->bytes;
  pthread_mutex_unlock(&p->omu);
  uint64_t stored = 0;
  int rc = xgr_store_owner_bytes(p->st, owner, &stored, err);
  if (rc) return rc;
  pthread_mutex_lock(&p->omu);
  o = owner_entry(p, owner, true);
  o->bytes = stored + (o->bytes > before ? o->bytes - before : 0);
  o->read_ns = now;
  *bytes = o->bytes;
  *refused = o->refused;
  pthread_mutex_unlock(&p->omu);
  return 0;
}

/* The quotas on batch b of c->bytes (xgr_store_quota): 0, or XGR_ELIMIT with the reason (nothing
 * is counted). Counts the batch for its owner when accepted. */
static int check_quota(xgr_node_persist *p, const xgr_store_batch *b) {
  xgr_store_quota *q = b->quota;
  uint64_t add = q->batch_bytes;
  if (!q->abort && q->max_bytes && q->stored_bytes + add > q->max_bytes) {
    snprintf(q->reason, sizeof q->reason, "session aborted: stored bytes %llu exceed the quota of %llu per session",
             (unsigned long long)(q->stored_bytes + add), (unsigned long long)q->max_bytes);
    return XGR_ELIMIT;
  }
  pthread_mutex_lock(&p->omu);
  obytes *o = owner_entry(p, b->owner, true);
  if (!q->abort && p->max_owner_bytes && o->bytes + add > p->max_owner_bytes) {
    snprintf(q->reason, sizeof q->reason, "session aborted: its owner's stored bytes %llu exceed the quota of %llu per owner",
             (unsigned long long)(o->bytes + add), (unsigned long long)p->max_owner_bytes);
    o->refused = add;
    pthread_mutex_unlock(&p->omu);
    return XGR_ELIMIT;
  }
  o->bytes += add;
  pthread_mutex_unlock(&p->omu);
  q->stored_bytes += add;
  return 0;
}

static int submit(void *ctx, const xgr_store_batch *b, xgr_store_done_fn done, void *token) {
  xgr_node_persist *p = ctx;
  xgr_store_changes *c = xgr_store_changes_new();
  if (!c) return XGR_ENOMEM;
  xgr_store_changes_add_batch(c, b);   /* the rows: the store's one translator */
  if (b->quota && check_quota(p, b)) {   /* over a quota: nothing is written, the engine aborts the session */
    xgr_store_changes_free(c);
    if (p->quota_refused) xgr_counter_add(p->quota_refused, 1);
    return XGR_ELIMIT;
  }
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
  pthread_mutex_init(&p->omu, NULL);
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
  p->quota_refused = xgr_metrics_counter(m, "xgr_quota_refusals_total",
                                         "Session batches and starts refused for a quota", "what=\"batch\"");
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
  size_t pos = 0;
  for (obytes *o; (o = xgr__hashmap_next(&p->owners, &pos, NULL));) free(o);
  xgr__hashmap_free(&p->owners);
  pthread_mutex_destroy(&p->omu);
  free(p);
}
