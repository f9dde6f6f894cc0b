/* lease.c — xgrd as one node of a cluster on a shared PostgreSQL store (issue 18; docs/CLUSTER.md).
 *
 * The store does the SQL (src/store/pg_cluster.c: claims, heartbeats, fenced writes, command
 * rows); this file is the daemon's side of it:
 *
 *   the lease thread  waits on the node's NOTIFY channel and, between notifications, renews the
 *                     node's leases every lease/3 (a lost one drops its session from memory:
 *                     xgr_engine_drop), claims free, expired and orphaned sessions every
 *                     min(lease/5, 1 s) and starts them (the same loading as recovery), and
 *                     delivers internal wake-ups from the outbox to the sessions it holds every
 *                     50 ms. A "c" notification wakes the command thread, which runs the
 *                     commands other nodes send (they wait on the engine; heartbeats must not).
 *   hibernation       a node evicts waiting sessions and keeps their leases: claims hold the
 *                     ones that sleep beyond the loader's look-ahead without loading them, and
 *                     every load goes through xgr__node_lease_load (a claim of that one session under
 *                     this node's lease); the due poller reads only this node's rows (node.c).
 *   safety net        once a second, a held session whose due time passed 2 s (of wall time) ago
 *                     and that is not in memory is loaded (check_overdue; healthy: none).
 *   rebalancing       after each heartbeat a hibernating node above its share of the running
 *                     sessions gives up hibernated ones it does not have in memory, which the
 *                     nodes below their share claim (xgr_store_lease_balance; docs/CLUSTER.md).
 *   control calls     xgr_node_control: kill, pause, resume and the wakes run here when the session
 *                     is in this engine; a session leased to another live node gets a command row
 *                     and a NOTIFY, and the call waits (5 s at most) for the answer; a session
 *                     nobody holds is claimed here first. The asking node has checked the caller
 *                     (permits are used once, there); the owner node runs the engine call only.
 *                     A migration (xgr_node_migrate) is routed the same way, waiting up to 60 s
 *                     (the safe point and the check): the holder resolves NEW and moves the
 *                     session; its verdict comes back with the answer.
 *
 * Without a cluster store (SQLite, memory, PostgreSQL without a node id) the node's lease is NULL and
 * xgr_node_control calls the engine directly.
 */
#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "node/node_impl.h"
#include "util/alloc.h"
#include "util/clock.h"

#define FORWARD_WAIT_MS 5000   /* how long a forwarded control call waits for the owner's answer */
#define MIGRATE_MAX_MAP 128    /* step pairs of a forwarded migration's map (as xgr.migrateSessions takes) */
#define OUTBOX_POLL_MS 50

struct xgr__node_lease {
  xgr_node *d;
  pthread_t th, cth;            /* the lease thread; the command thread (runs other nodes' calls) */
  bool has_th, has_cth;
  atomic_bool stop;
  pthread_mutex_t cmu;          /* serve, wakes the command thread */
  pthread_cond_t ccv;
  bool serve;                   /* a "c" notification came: take commands */
  pthread_mutex_t mu;           /* answers */
  pthread_cond_t cv;
  uint64_t answers;             /* "r<id>" notifications seen */
  atomic_uint_fast64_t sent, served, timed_out, claimed_rounds, wakes_delivered;
  atomic_uint_fast64_t overdue_now;      /* held sessions found overdue and not in memory by the last check */
  atomic_uint_fast64_t overdue_loaded;   /* of those, loaded by the safety net since start */
  bool listen_failed;           /* logged once */
};

/* ---- running a control call here ------------------------------------------------------------------- */

/* A retry: the aborted process's last row, read here from the store (terminal rows never change),
 * goes with the call to the session's actor, where the core decides (xgr_session_retry). */
static int exec_retry(xgr_node *d, const xgr_node_ctl *r, const char *via, size_t *new_iter, xgr_error *err) {
  char pid[48];
  xgr_pid_format(r->root, r->iter, pid, sizeof pid);
  xgr_node_live(d, r->owner, r->root, true, NULL);   /* load a hibernated session first */
  xgr_store_session srow;
  xgr_error se;
  if (!xgr_store_session_get(d->st, r->owner, r->root, &srow, &se)) {   /* an ended session is no longer in memory */
    int st = srow.status;
    xgr_store_session_clear(&srow);
    if (st != XGR_RESULT_RUNNING)
      return xgr_error_set(err, XGR_ESTATE, "sessionId", "session %llu has ended (%s); only a live session's processes "
                           "can be retried (fork it to run a step again in a new session)", (unsigned long long)r->root,
                           xgr_session_result_name((xgr_session_result)st));
  }
  xgr_store_proc *ps = NULL;
  size_t n = 0;
  int rc = xgr_store_procs(d->st, r->owner, r->root, &ps, &n, err);
  if (rc) return rc;
  const xgr_store_proc *p = NULL;
  for (size_t i = 0; i < n && !p; i++)
    if (ps[i].iter == r->iter) p = &ps[i];
  if (!p) {
    xgr_store_procs_free(ps, n);
    return xgr_error_set(err, XGR_ENOTFOUND, "pid", "process %s has no stored row (unknown, or its row left with the "
                         "retention time)", pid);
  }
  xgr_retry_of ro = {.iter = p->iter, .step = p->step, .status = (xgr_proc_status)p->status,
                     .reason = (xgr_abort_reason)p->abort_reason, .group = p->group, .payload = xgr_value_null()};
  if (p->from_group) {   /* a join target: retried only when its own join closed satisfied */
    json_t *j = p->join ? json_loads(p->join, 0, NULL) : NULL;
    ro.join_unsatisfied = json_integer_value(json_object_get(j, "outcome")) != XGR_JOIN_SATISFIED;
    json_decref(j);
  }
  json_t *pj = p->payload ? json_loads(p->payload, 0, NULL) : NULL;
  if (pj) xgr_value_from_json(pj, 0, &ro.payload, NULL);
  json_decref(pj);
  xgr_store_procs_free(ps, n);
  xgr_engine_ctl c = {.kind = XGR_CTL_RETRY, .owner = r->owner, .root_pid = r->root, .iter = r->iter,
                      .payload = r->payload, .retry_of = &ro, .actor = r->actor, .permit = r->permit,
                      .node = via ? via : d->name};
  rc = xgr_engine_control_sync(d->e, &c, new_iter, err);
  xgr_value_release(ro.payload);
  return rc;
}

/* via: the node the call came through (NULL: this one), named in its audit entry */
static int exec_local(xgr_node *d, const xgr_node_ctl *r, const char *via, size_t *woken, xgr_error *err) {
  static const xgr_engine_ctl_kind kinds[] = {[XGR_NODE_CTL_KILL] = XGR_CTL_KILL, [XGR_NODE_CTL_PAUSE] = XGR_CTL_PAUSE,
                                              [XGR_NODE_CTL_RESUME] = XGR_CTL_RESUME,
                                              [XGR_NODE_CTL_WAKE_PID] = XGR_CTL_WAKE_PID,
                                              [XGR_NODE_CTL_WAKE_STEP] = XGR_CTL_WAKE_STEP,
                                              [XGR_NODE_CTL_RETRY] = XGR_CTL_RETRY};
  assert(r->op >= XGR_NODE_CTL_KILL && r->op <= XGR_NODE_CTL_RETRY);
  if (r->op == XGR_NODE_CTL_RETRY) return exec_retry(d, r, via, woken, err);
  bool wake = r->op == XGR_NODE_CTL_WAKE_PID || r->op == XGR_NODE_CTL_WAKE_STEP;
  if (r->op == XGR_NODE_CTL_PAUSE || r->op == XGR_NODE_CTL_RESUME)
    xgr_node_live(d, r->owner, r->root, true, NULL);   /* load a hibernated session before its flag is set */
  xgr_engine_ctl c = {.kind = kinds[r->op], .owner = r->owner, .root_pid = r->root, .iter = r->iter,
                      .step = r->op == XGR_NODE_CTL_WAKE_STEP ? r->step : NULL, .caller = wake ? r->caller : NULL,
                      .payload = wake ? r->payload : xgr_value_null(), .actor = r->actor, .permit = r->permit,
                      .node = via ? via : d->name, .batch = r->actor ? r->batch : NULL};
  return xgr_engine_control_sync(d->e, &c, woken, err);
}

/* One call routed to the node that runs the session: a control call (ctl, answering *woken) or a
 * migration (mig, answering *verdict). */
typedef struct routed {
  const char *owner;
  uint64_t root;
  const xgr_node_ctl *ctl;
  size_t *woken;
  const xgr_node_migrate_req *mig;
  json_t **verdict;
} routed;

#define CMD_MIGRATE 100          /* a command row's op for a migration (the others: xgr_node_ctl_op) */
#define MIGRATE_WAIT_MS 60000    /* a forwarded migration waits for the safe point and the check */

/* Run c here (via: the node it came through, NULL: this one). */
static int run_here(xgr_node *d, const routed *c, const char *via, xgr_error *err) {
  if (c->mig) return xgr__node_migrate_here(d, c->mig, via, c->verdict, err);
  return exec_local(d, c->ctl, via, c->woken, err);
}

/* The command row's body of c (a new reference). */
static json_t *cmd_body(xgr_node *d, const routed *c) {
  char root[24], iter[24];
  snprintf(root, sizeof root, "%" PRIu64, c->root);
  if (c->mig) {
    const xgr_node_migrate_req *m = c->mig;
    json_t *map = json_object();
    for (size_t i = 0; i < m->nmap; i++) json_object_set_new(map, m->map_from[i], json_string(m->map_to[i]));
    json_t *b = json_pack("{s:i, s:s, s:s, s:s, s:{s:s, s:o, s:b, s:b}}", "op", CMD_MIGRATE, "owner", c->owner, "root",
                          root, "via", d->name, "migrate", "to", m->to_key, "map", map, "force", m->force, "dryRun",
                          m->dry_run);
    json_t *mo = json_object_get(b, "migrate");
    if (m->actor) json_object_set_new(mo, "actor", json_string(m->actor));
    if (m->permit) json_object_set_new(mo, "permit", json_string(m->permit));
    return b;
  }
  const xgr_node_ctl *r = c->ctl;
  snprintf(iter, sizeof iter, "%" PRIu64, r->iter);
  json_t *b = json_pack("{s:i, s:s, s:s, s:s}", "op", r->op, "owner", r->owner, "root", root, "iter", iter);
  if (r->step) json_object_set_new(b, "step", json_string(r->step));
  if (r->caller) json_object_set_new(b, "caller", json_string(r->caller));
  if (r->actor) {   /* the audit entry the owner node writes: who, the permit's digest, this node */
    json_object_set_new(b, "actor", json_string(r->actor));
    if (r->permit) json_object_set_new(b, "permit", json_string(r->permit));
    if (r->batch) json_object_set_new(b, "batch", json_string(r->batch));
    json_object_set_new(b, "via", json_string(d->name));
  }
  if (r->payload_json) json_object_set(b, "payload", (json_t *)r->payload_json);
  return b;
}

/* ---- forwarding to the node that holds the session ---------------------------------------------- */

static int forward(xgr__node_lease *l, const char *node, const routed *c, xgr_error *err) {
  xgr_node *d = l->d;
  json_t *b = cmd_body(d, c);
  const int wait_ms = c->mig ? MIGRATE_WAIT_MS : FORWARD_WAIT_MS;
  char *body = json_dumps(b, JSON_COMPACT);
  json_decref(b);
  int64_t id = 0;
  int rc = xgr_store_cmd_send(d->st, node, c->owner, c->root, body, &id, err);
  free(body);
  if (rc) return rc;
  atomic_fetch_add(&l->sent, 1);
  int64_t deadline = xgr__mono_ms() + wait_ms, next_check = xgr__mono_ms() + 250;
  for (;;) {
    pthread_mutex_lock(&l->mu);
    uint64_t seen = l->answers;
    pthread_mutex_unlock(&l->mu);
    bool done = false;
    int arc = 0;
    char *res = NULL;
    if ((rc = xgr_store_cmd_result(d->st, id, &done, &arc, &res, err))) return rc;
    if (done) {
      json_t *j = json_loads(res, 0, NULL);
      free(res);
      const char *msg = json_string_value(json_object_get(j, "message"));
      if (c->woken) *c->woken = (size_t)json_integer_value(json_object_get(j, "woken"));
      json_t *v = json_object_get(j, "verdict");
      if (c->verdict && json_is_object(v)) *c->verdict = json_incref(v);
      if (arc) xgr_error_set(err, arc, NULL, "%s", msg ? msg : xgr_errcode_name(arc));
      json_decref(j);
      return arc;
    }
    int64_t left = deadline - xgr__mono_ms();
    if (left <= 0 || atomic_load(&l->stop)) break;
    if (xgr__mono_ms() >= next_check) {   /* a holder that stalls loses its lease: route again then */
      char now_node[256];
      bool valid = false, running = false;
      xgr_error he;
      bool withdrawn = false;
      /* only a command its target has not taken is withdrawn and routed again: one it took may be
       * carried out (a stalled holder resumes with its lease not yet claimed by anyone, and its
       * write passes the fence), and routing it again would answer from what it did — a kill
       * answered "no live session" (fault seed 1346). Its answer, or the deadline, decides */
      if (!xgr_store_lease_holder(d->st, c->owner, c->root, now_node, sizeof now_node, &valid, &running, &he) &&
          running && (!valid || strcmp(now_node, node)) && !xgr_store_cmd_withdraw(d->st, id, &withdrawn, &he) &&
          withdrawn)
        return xgr_error_set(err, XGR_ELEASE, NULL, "session %s/%" PRIu64 " left node %s", c->owner, c->root, node);
      next_check = xgr__mono_ms() + 250;
    }
    /* the lease thread bumps `answers` on every "r" notification; look again at least every 100 ms */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long wait = left < 100 ? (long)left : 100;
    ts.tv_nsec += wait * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&l->mu);
    while (l->answers == seen && !atomic_load(&l->stop))
      if (pthread_cond_timedwait(&l->cv, &l->mu, &ts)) break;
    pthread_mutex_unlock(&l->mu);
  }
  xgr_store_cmd_drop(d->st, id, &(xgr_error){0});
  atomic_fetch_add(&l->timed_out, 1);
  return xgr_error_set(err, XGR_ETIMEOUT, NULL, "node %s holds session %s/%" PRIu64 " and did not answer within %d ms",
                       node, c->owner, c->root, wait_ms);
}

/* A claimed session may still have an incarnation here: one whose lease this node lost (the drop
 * is asynchronous) or that stalled (SIGSTOP) and came back. It leaves before the store writes
 * under the new epoch, so that only the incarnation loaded now can pass the fence. */
static bool before_load(void *ctx, const char *owner, uint64_t root) {
  xgr_node *d = ctx;
  xgr_engine_session_info in;
  if (xgr_engine_session(d->e, owner, root, &in) || in.finished) return true;
  xgr_engine_drop(d->e, owner, root);
  for (int i = 0; i < 2000; i++) {
    if (xgr_engine_session(d->e, owner, root, &in) || in.finished) return true;
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  }
  xgr_node_log_session(d, "warn", "an older incarnation did not leave within 2 s; the claim is given up", owner, root,
                       NULL);
  return false;
}

static int load_cb(void *ctx, const xgr_store_live *l) {
  xgr_error err;
  xgr_error_clear(&err);
  xgr__node_load(ctx, l, &err);   /* logged there */
  return 0;
}

/* A hibernating node's claims load only what is awake or due within the loader's look-ahead
 * (read after the claim committed: the engine clock only moves on, so this is not below any
 * horizon a due poll published before); the rest is held in the store for the due poller. */
/* What a claim loads at once: what is due by the poller's horizon, which may be beyond now + lead
 * (it never goes back: after this node's clock stepped back, a session due before the horizon
 * but held without loading would lie behind the poller's cursor, never polled). */
static int64_t hib_bound(void *ctx) {
  xgr_node *d = ctx;
  return xgr_engine_hib_horizon(d->e);
}

/* xgr__node_lease_load's claim: before gets the daemon, fn the caller's context. */
typedef struct load_ctx {
  xgr_node *d;
  int (*fn)(void *ctx, const xgr_store_live *l);
  void *ctx;
} load_ctx;

static bool load_before(void *ctx, const char *owner, uint64_t root) { return before_load(((load_ctx *)ctx)->d, owner, root); }

static int load_fn(void *ctx, const xgr_store_live *l) {
  load_ctx *c = ctx;
  return c->fn(c->ctx, l);
}

int xgr__node_lease_load(xgr_node *d, const char *owner, uint64_t root, int (*fn)(void *ctx, const xgr_store_live *l),
                    void *ctx, xgr_error *err) {
  const char *me = xgr_store_node_id(d->st);
  load_ctx lc = {d, fn, ctx};
  /* the common case (the due poller's): a session this node evicted and still holds — its row
   * names this node at the remembered epoch — is read under that lease, without a write. Rows
   * read after the check can only be this node's (a claim elsewhere raises the epoch for good, and
   * then the fence refuses this incarnation's first write); and no other incarnation is here
   * (the engine loads only what its registry lacks, an evicted one committed everything) */
  if (xgr_store_lease_current(d->st, owner, root)) {
    xgr_store_load_filter f = {.owner = owner, .root_pid = root};
    return xgr_store_load_some(d->st, &f, fn, ctx, err);
  }
  /* else claim it: a row that names this node (not at the remembered epoch: the claim fences any
   * incarnation this node forgot) is claimed at once; for any other the row is looked at first —
   * a session another live node holds is not this node's to load, and the claim's search for
   * dead nodes is left out for it (an internal wake-up for a session on another node tries this
   * on the producing worker) */
  bool look = !xgr_store_lease_held(d->st, owner, root);
  for (int attempt = 0; attempt < 100; attempt++) {
    int rc;
    if (look) {
      char node[256];
      bool valid = false, running = false;
      if ((rc = xgr_store_lease_holder(d->st, owner, root, node, sizeof node, &valid, &running, err))) return rc;
      if (!running)
        return xgr_error_set(err, XGR_ENOTFOUND, NULL, "no live session %s/%" PRIu64, owner, root);
      if (node[0] && valid && strcmp(node, me))
        return xgr_error_set(err, XGR_ENOTFOUND, NULL, "session %s/%" PRIu64 " is held by node %s", owner, root, node);
    }
    size_t n = 0;
    /* own: this node's row (held or not), or a free one; never one another live node holds */
    if ((rc = xgr_store_lease_claim(d->st, owner, root, true, 1, load_before, load_fn, &lc, &n, err)) || n) return rc;
    if (look) nanosleep(&(struct timespec){0, 5000000}, NULL);   /* its row is locked by a claim right now: again */
    look = true;
  }
  /* not loaded: if this node held it, nobody else may claim it while the heartbeat renews the row
   * and the due poller has passed it — forgotten, the heartbeat gives the row up (an orphan) and a
   * claim round takes it again */
  xgr_store_lease_forget(d->st, owner, root);
  return xgr_error_set(err, XGR_ETIMEOUT, NULL, "session %s/%" PRIu64 " stayed locked; not loaded", owner, root);
}

/* The store's word, after this node found a session it thinks it holds missing from its engine
 * and not loadable: is the session running under another live node's valid lease? Then this
 * node's memory of holding it is stale (its heartbeat has not noticed the loss yet), and a call
 * for it must be routed again, not answered "no live session". */
static bool elsewhere(xgr_node *d, const char *owner, uint64_t root) {
  char node[256];
  bool valid = false, running = false;
  xgr_error err;
  return !xgr_store_lease_holder(d->st, owner, root, node, sizeof node, &valid, &running, &err) && running && valid &&
         node[0] && strcmp(node, xgr_store_node_id(d->st));
}

/* Run c where its session runs: here when this engine has it; else forwarded to the node that
 * holds its lease; a session nobody holds is claimed (or loaded) here first. */
static int route(xgr_node *d, const routed *c, xgr_error *err) {
  xgr__node_lease *l = d->lease;
  const char *me = xgr_store_node_id(d->st);
  for (int attempt = 0; attempt < 6; attempt++) {
    xgr_engine_session_info in;
    if (!xgr_engine_session(d->e, c->owner, c->root, &in) && !in.finished) {   /* here */
      xgr_error_clear(err);
      int rc = run_here(d, c, NULL, err);
      if (rc == XGR_ETIMEOUT || rc == XGR_EIO) {   /* evicted meanwhile and not loadable right now */
        nanosleep(&(struct timespec){0, 20000000}, NULL);
        continue;
      }
      if (rc != XGR_ENOTFOUND && rc != XGR_ELEASE) return rc;
      if (rc == XGR_ENOTFOUND && xgr_store_lease_held(d->st, c->owner, c->root) && !elsewhere(d, c->owner, c->root))
        return rc;
      continue;   /* it left for another node meanwhile */
    }
    char node[256];
    bool valid = false, running = false;
    int rc = xgr_store_lease_holder(d->st, c->owner, c->root, node, sizeof node, &valid, &running, err);
    if (rc == XGR_ENOTFOUND || (!rc && !running)) {   /* no such session, or it ended: the engine's answer */
      xgr_error_clear(err);
      return run_here(d, c, NULL, err);
    }
    if (rc) return rc;
    if (!node[0] || !valid || !strcmp(node, me)) {   /* nobody holds it (or this node, not loaded): claim it here */
      if (d->hib.load) {   /* hibernation: the engine's serialised load (xgr__node_lease_load) */
        xgr_error_clear(err);
        rc = xgr_engine_load(d->e, c->owner, c->root, err);
        if (rc == XGR_ETIMEOUT) nanosleep(&(struct timespec){0, 20000000}, NULL);
        else if (rc && rc != XGR_ENOTFOUND) return rc;   /* it cannot be loaded (logged there) */
        continue;   /* loaded, or it went elsewhere meanwhile: look again */
      }
      size_t n = 0;
      if ((rc = xgr_store_lease_claim(d->st, c->owner, c->root, !strcmp(node, me), 1, before_load, load_cb, d,
                                      &n, err))) return rc;
      if (!n) nanosleep(&(struct timespec){0, 20000000}, NULL);   /* locked by a claim or a write: look again */
      continue;
    }
    xgr_error_clear(err);
    rc = forward(l, node, c, err);
    if (rc != XGR_ELEASE) return rc;   /* XGR_ELEASE: it moved on the way; route again */
  }
  return xgr_error_set(err, XGR_ESTATE, NULL, "session %s/%" PRIu64 " changed nodes while the call was routed; try again",
                       c->owner, c->root);
}

int xgr_node_control(xgr_node *d, const xgr_node_ctl *r, size_t *woken, xgr_error *err) {
  if (!d->lease) return exec_local(d, r, NULL, woken, err);
  routed c = {.owner = r->owner, .root = r->root, .ctl = r, .woken = woken};
  return route(d, &c, err);
}

int xgr__node_lease_migrate(xgr_node *d, const xgr_node_migrate_req *r, json_t **verdict, xgr_error *err) {
  routed c = {.owner = r->owner, .root = r->root, .mig = r, .verdict = verdict};
  return route(d, &c, err);
}

bool xgr__node_lease_live(xgr_node *d, const char *owner, uint64_t root) {
  char node[256];
  bool valid = false, running = false;
  xgr_error err;
  return !xgr_store_lease_holder(d->st, owner, root, node, sizeof node, &valid, &running, &err) && running;
}

/* ---- the owner's side of a command ---------------------------------------------------------------- */

static char *run_cmd(void *ctx, int64_t id, const char *owner, uint64_t root, const char *body, int *rc) {
  (void)id;
  xgr__node_lease *l = ctx;
  xgr_node *d = l->d;
  atomic_fetch_add(&l->served, 1);
  xgr_error err;
  xgr_error_clear(&err);
  json_t *b = json_loads(body, 0, NULL);
  xgr_node_ctl r = {.owner = owner, .root = root};
  r.op = (int)json_integer_value(json_object_get(b, "op"));
  /* a migration: its request, read back (the map's ids borrowed from b) */
  const json_t *mo = json_object_get(b, "migrate");
  const char *mfrom[MIGRATE_MAX_MAP], *mto[MIGRATE_MAX_MAP];
  xgr_node_migrate_req mr = {.owner = owner, .root = root, .to_key = json_string_value(json_object_get(mo, "to")),
                             .map_from = mfrom, .map_to = mto, .force = json_is_true(json_object_get(mo, "force")),
                             .dry_run = json_is_true(json_object_get(mo, "dryRun")),
                             .actor = json_string_value(json_object_get(mo, "actor")),
                             .permit = json_string_value(json_object_get(mo, "permit"))};
  const char *mk;
  json_t *mv;
  json_object_foreach(json_object_get(mo, "map"), mk, mv) if (json_is_string(mv) && mr.nmap < MIGRATE_MAX_MAP) {
    mfrom[mr.nmap] = mk;
    mto[mr.nmap++] = json_string_value(mv);
  }
  json_t *verdict = NULL;
  routed c = {.owner = owner, .root = root, .ctl = &r, .woken = NULL, .mig = NULL, .verdict = &verdict};
  if (r.op == CMD_MIGRATE) c.mig = &mr;
  const char *it = json_string_value(json_object_get(b, "iter"));
  r.iter = it ? strtoull(it, NULL, 10) : 0;
  r.step = json_string_value(json_object_get(b, "step"));
  r.caller = json_string_value(json_object_get(b, "caller"));
  r.actor = json_string_value(json_object_get(b, "actor"));
  r.permit = json_string_value(json_object_get(b, "permit"));
  r.batch = json_string_value(json_object_get(b, "batch"));
  const char *via = json_string_value(json_object_get(b, "via"));
  const json_t *pj = json_object_get(b, "payload");
  r.payload = xgr_value_null();
  if (pj && json_is_object(pj)) xgr_value_from_json(pj, 0, &r.payload, &err);
  size_t woken = 0;
  c.woken = &woken;
  xgr_engine_session_info in;
  if (!b || ((r.op < XGR_NODE_CTL_KILL || r.op > XGR_NODE_CTL_RETRY) && (r.op != CMD_MIGRATE || !mr.to_key))) {
    *rc = xgr_error_set(&err, XGR_EINVAL, NULL, "malformed command");
  } else if (xgr_engine_session(d->e, owner, root, &in) || in.finished) {
    /* not in this engine: hibernated here (loaded), or it moved (the asker routes again) unless it
     * ended here. Held here but not loadable right now (its row locked by a claim or a stalled
     * writer): that error, which the caller may try again — not the engine's "no live session",
     * which is final */
    xgr_error lerr;
    int lrc = d->hib.load ? xgr_engine_load(d->e, owner, root, &lerr) : XGR_ENOTFOUND;
    if (!lrc) *rc = run_here(d, &c, via, &err);
    else if (!xgr_store_lease_held(d->st, owner, root) || elsewhere(d, owner, root))
      *rc = xgr_error_set(&err, XGR_ELEASE, NULL, "session %s/%" PRIu64 " is not held by node %s", owner, root,
                          xgr_store_node_id(d->st));
    else if (lrc != XGR_ENOTFOUND) {
      err = lerr;
      *rc = lrc;
    } else *rc = run_here(d, &c, via, &err);
  } else {
    *rc = run_here(d, &c, via, &err);
  }
  xgr_value_release(r.payload);
  json_decref(b);
  json_t *res = json_pack("{s:s, s:I}", "message", *rc ? err.message : "ok", "woken", (json_int_t)woken);
  if (verdict) json_object_set_new(res, "verdict", verdict);
  char *text = json_dumps(res, JSON_COMPACT);
  json_decref(res);
  return text;
}

/* ---- the lease thread ------------------------------------------------------------------------------ */

static void on_note(void *ctx, const char *payload) {
  xgr__node_lease *l = ctx;
  if (payload[0] == 'c') {
    pthread_mutex_lock(&l->cmu);
    l->serve = true;
    pthread_cond_signal(&l->ccv);
    pthread_mutex_unlock(&l->cmu);
  } else if (payload[0] == 'r') {
    pthread_mutex_lock(&l->mu);
    l->answers++;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
  }
}

static void on_lost(void *ctx, const char *owner, uint64_t root) {
  xgr_node *d = ctx;
  xgr_engine_drop(d->e, owner, root);
  xgr_node_log_session(d, "warn", "lease lost: the session left this node", owner, root, NULL);
}

/* Rebalancing: a session is busy here when this engine has it in memory. */
static bool in_memory(void *ctx, const char *owner, uint64_t root) {
  xgr_engine_session_info in;
  return xgr_engine_session(((xgr_node *)ctx)->e, owner, root, &in) == 0;
}

/* Claim what is free, 256 at a time; own: also the rows naming this node id (start-up). */
static size_t claim_all(xgr_node *d, bool own) {
  size_t total = 0, n = 0;
  xgr_error err;
  do {
    /* hibernation: sessions that sleep beyond the look-ahead are held, not loaded */
    if (xgr_store_lease_claim_lazy(d->st, NULL, 0, own, 256, d->hib.load ? hib_bound : NULL, before_load, load_cb, d,
                                   &n, NULL, &err)) {
      xgr_node_log_error(d, "error", "claim failed", err.message);
      break;
    }
    total += n;
  } while (n == 256);
  if (total) {
    xgr_logfmt lg;
    xgr_node_log_begin(d, &lg, "info", "sessions claimed");
    xgr_logfmt_u64(&lg, "sessions", total);
    xgr_logfmt_str(&lg, "node", xgr_store_node_id(d->st));
    xgr_node_log_end(d, &lg);
  }
  return total;
}

/* The row read a moment ago may have been applied since by an incarnation that is gone now
 * (hibernation: evicted after that commit): xgr_engine_redeliver_checked asks again. */
static bool still_pending(void *ctx, const char *id) { return xgr_store_outbox_pending(((xgr_node *)ctx)->st, id); }

static void deliver_outbox(xgr__node_lease *l) {
  xgr_node *d = l->d;
  xgr_store_wake *w = NULL;
  size_t n = 0;
  xgr_error err;
  if (xgr_store_outbox_held(d->st, 1000, &w, &n, &err)) {
    xgr_node_log_error(d, "error", "cannot read the outbox", err.message);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    xgr_value pl = xgr_value_null();
    if (w[i].payload && xgr_value_from_json_text(w[i].payload, strlen(w[i].payload), 0, &pl, &err)) pl = xgr_value_null();
    /* the target applies an id once and removes the row with its next batch; one not loaded yet
     * (being claimed), or that left before the send, is found again by the next poll */
    if (!xgr_engine_redeliver_checked(d->e, w[i].id, w[i].caller, w[i].from_root, w[i].to_owner, w[i].to_root,
                                      w[i].step, w[i].rule, pl, still_pending, d))
      atomic_fetch_add(&l->wakes_delivered, 1);
    xgr_value_release(pl);
  }
  xgr_store_wakes_free(w, n);
}

/* The safety net: a held session whose due time passed more than OVERDUE_WALL_MS (of wall time)
 * ago, and that is not in memory, was missed by the due poller (whatever the cause: nothing is
 * known to cause it). It is loaded through the engine like any call's load (xgr_engine_load:
 * serialised with every other load of it, never loaded twice, read under this node's lease), so
 * it cannot run a step or apply a wake-up twice; its timers then fire as usual. Counted
 * (xgr_cluster{kind="sessions_overdue"} is the last check's count: 0 in a healthy cluster) and
 * logged. */
#define OVERDUE_WALL_MS 2000
#define OVERDUE_EVERY_MS 1000
#define OVERDUE_PAGE 256

static void check_overdue(xgr__node_lease *l) {
  xgr_node *d = l->d;
  if (!d->hib.load) return;   /* without hibernation every held session is in memory */
  double scale = d->cfg.time_scale > 0 ? d->cfg.time_scale : 1;
  int64_t now = xgr_engine_now(d->e), upto = now - (int64_t)(OVERDUE_WALL_MS * scale);
  xgr_store_due_key *k = xgr__xmalloc(OVERDUE_PAGE * sizeof *k);
  size_t n = 0;
  xgr_error err;
  if (xgr_store_lease_due(d->st, NULL, upto, k, OVERDUE_PAGE, &n, &err)) {
    xgr_node_log_error(d, "error", "cannot read the overdue sessions", err.message);
    free(k);
    return;
  }
  uint64_t found = 0, loaded = 0;
  int64_t worst = 0;
  size_t first = n;
  for (size_t i = 0; i < n && !atomic_load(&l->stop); i++) {
    xgr_engine_session_info in;
    if (!xgr_engine_session(d->e, k[i].owner, k[i].root_pid, &in)) continue;   /* in memory: its timer is armed */
    found++;
    if (xgr_engine_load(d->e, k[i].owner, k[i].root_pid, &err)) {   /* tried again by the next check */
      xgr_node_log_error(d, "warn", "overdue session: cannot load it", err.message);
      continue;
    }
    loaded++;
    if (first == n) first = i;
    if (now - k[i].due > worst) worst = now - k[i].due;
  }
  if (loaded) {   /* one line a check, however many: an overloaded poller must not flood the log */
    atomic_fetch_add(&l->overdue_loaded, loaded);
    xgr_logfmt lg;
    xgr_node_log_begin(d, &lg, "warn", "overdue sessions loaded: the due poller missed them");
    xgr_logfmt_u64(&lg, "sessions", loaded);
    xgr_logfmt_str(&lg, "owner", k[first].owner);
    xgr_logfmt_u64(&lg, "rootPid", k[first].root_pid);
    xgr_logfmt_i64(&lg, "worst_overdue_ms", (int64_t)((double)worst / scale));
    xgr_node_log_end(d, &lg);
  }
  atomic_store(&l->overdue_now, found);
  free(k);
}

static void *lease_main(void *arg) {
  xgr__node_lease *l = arg;
  xgr_node *d = l->d;
  int64_t lease = xgr_store_lease_ms(d->st);
  int64_t beat = xgr_store_fenced_renew_ms(lease), every = lease / 5 < 1000 ? (lease / 5 > 0 ? lease / 5 : 1) : 1000;
  int64_t t = xgr__mono_ms(), next_beat = t + beat, next_claim = t + every, next_outbox = t,
          next_overdue = t + OVERDUE_EVERY_MS;
  while (!atomic_load(&l->stop)) {
    t = xgr__mono_ms();
    int64_t due = next_beat;
    if (next_claim < due) due = next_claim;
    if (next_outbox < due) due = next_outbox;
    if (next_overdue < due) due = next_overdue;
    int64_t wait = due - t;
    if (wait < 0) wait = 0;
    if (wait > 100) wait = 100;
    xgr_error err;
    if (xgr_store_cmd_listen(d->st, (int)wait, on_note, l, &err)) {
      if (!l->listen_failed) xgr_node_log_error(d, "error", "cluster: listening failed", err.message);
      l->listen_failed = true;
      nanosleep(&(struct timespec){0, 50000000}, NULL);
    } else if (l->listen_failed) {   /* made again: the next failure is logged too */
      l->listen_failed = false;
      xgr_logfmt lg;
      xgr_node_log_begin(d, &lg, "info", "cluster: listening again");
      xgr_node_log_end(d, &lg);
    }
    if (atomic_load(&l->stop)) break;
    t = xgr__mono_ms();
    if (t >= next_beat) {
      xgr_store_lease_stats s0, s1;
      xgr_store_lease_get_stats(d->st, &s0);
      if (xgr_store_lease_renew(d->st, on_lost, d, &err))
        xgr_node_log_error(d, "error", "cluster: heartbeat failed", err.message);
      xgr_store_lease_get_stats(d->st, &s1);
      if (s1.reconnects > s0.reconnects) {
        xgr_logfmt lg;
        xgr_node_log_begin(d, &lg, "warn", "cluster: the lease connection was lost and is made again");
        xgr_logfmt_u64(&lg, "reconnects", s1.reconnects);
        xgr_node_log_end(d, &lg);
      }
      if (s1.orphans_released > s0.orphans_released) {
        xgr_logfmt lg;
        xgr_node_log_begin(d, &lg, "warn", "leases given up: rows named this node, which held no such session");
        xgr_logfmt_u64(&lg, "sessions", s1.orphans_released - s0.orphans_released);
        xgr_node_log_end(d, &lg);
      }
      /* rebalancing: a node above its share hands hibernated sessions that sleep beyond the
       * loader's look-ahead (plus a lease) over to the nodes below theirs */
      size_t handed = 0;
      if (d->hib.load && xgr_store_lease_balance(d->st, hib_bound(d) + lease, 1024, in_memory, d, &handed, &err))
        xgr_node_log_error(d, "error", "cluster: rebalancing failed", err.message);
      else if (handed) {
        xgr_store_lease_get_stats(d->st, &s1);
        xgr_logfmt lg;
        xgr_node_log_begin(d, &lg, "info", "sessions handed over to balance the cluster");
        xgr_logfmt_u64(&lg, "sessions", handed);
        xgr_logfmt_u64(&lg, "nodes", s1.nodes);
        xgr_logfmt_u64(&lg, "share", s1.share);
        xgr_node_log_end(d, &lg);
      }
      next_beat = t + beat;
    }
    if (t >= next_claim) {
      if (claim_all(d, false)) atomic_fetch_add(&l->claimed_rounds, 1);
      next_claim = xgr__mono_ms() + every;
    }
    if (t >= next_outbox) {
      deliver_outbox(l);
      next_outbox = xgr__mono_ms() + OUTBOX_POLL_MS;
    }
    if (t >= next_overdue) {
      check_overdue(l);
      next_overdue = xgr__mono_ms() + OVERDUE_EVERY_MS;
    }
  }
  return NULL;
}

/* The command thread: other nodes' calls wait on this engine (a commit, a loaded session), so they
 * run here, not on the lease thread, whose heartbeats must not wait for them. Woken by a "c"
 * notification; looks once a second anyway. */
static void *cmd_main(void *arg) {
  xgr__node_lease *l = arg;
  xgr_node *d = l->d;
  pthread_mutex_lock(&l->cmu);
  while (!atomic_load(&l->stop)) {
    if (!l->serve) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_sec += 1;
      pthread_cond_timedwait(&l->ccv, &l->cmu, &ts);
    }
    if (atomic_load(&l->stop)) break;
    l->serve = false;
    pthread_mutex_unlock(&l->cmu);
    xgr_error err;
    if (xgr_store_cmd_serve(d->st, run_cmd, l, &err))
      xgr_node_log_error(d, "error", "cluster: commands failed", err.message);
    pthread_mutex_lock(&l->cmu);
  }
  pthread_mutex_unlock(&l->cmu);
  return NULL;
}

/* ---- life cycle and metrics --------------------------------------------------------------------- */

static void collect(void *ctx, xgr_metrics_out *out) {
  xgr_node *d = ctx;
  /* registered before the lease thread starts (xgr_node_recover): its counters read 0 until then */
  xgr__node_lease *l = __atomic_load_n(&d->lease, __ATOMIC_ACQUIRE), none = {0};
  if (!l) l = &none;
  xgr_store_lease_stats s;
  xgr_store_lease_get_stats(d->st, &s);
  /* counters since this node started, then the node's current state */
  struct { const char *k; uint64_t v; } events[] = {
      {"sessions_claimed", s.claimed},
      {"sessions_claimed_hibernated", s.claimed_hibernated},
      {"leases_lost", s.lost},
      {"claims_stale", s.stale_claims},
      {"orphans_released", s.orphans_released},
      {"sessions_handed_over", s.handed_over},
      {"late_writes_refused", s.refused_batches},
      {"heartbeats", s.renewals},
      {"reconnects", s.reconnects},
      {"commands_sent", atomic_load(&l->sent)},
      {"commands_served", atomic_load(&l->served)},
      {"commands_timed_out", atomic_load(&l->timed_out)},
      {"outbox_redelivered", atomic_load(&l->wakes_delivered)},
      {"overdue_loaded", atomic_load(&l->overdue_loaded)},
  }, state[] = {
      {"leases_held", s.held},
      {"nodes_live", s.nodes},
      {"sessions_share", s.share},
      {"sessions_overdue", atomic_load(&l->overdue_now)},
  };
  char lab[48];
  xgr_metrics_family(out, "xgr_cluster_events_total", "counter",
                     "Cluster events of this node by kind: claims, leases lost, late writes refused, commands");
  for (size_t i = 0; i < sizeof events / sizeof events[0]; i++) {
    snprintf(lab, sizeof lab, "kind=\"%s\"", events[i].k);
    xgr_metrics_line(out, "xgr_cluster_events_total", lab, (double)events[i].v);
  }
  xgr_metrics_family(out, "xgr_cluster", "gauge",
                     "Cluster state seen by this node by kind: leases held, live nodes, its share, overdue sessions");
  for (size_t i = 0; i < sizeof state / sizeof state[0]; i++) {
    snprintf(lab, sizeof lab, "kind=\"%s\"", state[i].k);
    xgr_metrics_line(out, "xgr_cluster", lab, (double)state[i].v);
  }
}

void xgr__node_lease_metrics(xgr_node *d, xgr_metrics *m) {
  if (xgr_store_node_id(d->st)) xgr_metrics_collector(m, "node.cluster", collect, d);
}

int xgr__node_lease_start(xgr_node *d, xgr_error *err) {
  xgr__node_lease *l = xgr__xcalloc(1, sizeof *l);
  l->d = d;
  pthread_mutex_init(&l->mu, NULL);
  pthread_cond_init(&l->cv, NULL);
  pthread_mutex_init(&l->cmu, NULL);
  pthread_cond_init(&l->ccv, NULL);
  __atomic_store_n(&d->lease, l, __ATOMIC_RELEASE);   /* the cluster gauge reads it (collect) */
  /* start-up: this node id's own sessions of an earlier life, then whatever is free */
  d->restored = claim_all(d, true);
  if (pthread_create(&l->th, NULL, lease_main, l))
    return xgr_error_set(err, XGR_EIO, NULL, "cannot start the lease thread");
  l->has_th = true;
  pthread_setname_np(l->th, "xgr-lease");
  if (pthread_create(&l->cth, NULL, cmd_main, l)) return xgr_error_set(err, XGR_EIO, NULL, "cannot start the command thread");
  l->has_cth = true;
  pthread_setname_np(l->cth, "xgr-lease-cmd");
  xgr_logfmt lg;
  xgr_node_log_begin(d, &lg, "info", "cluster node");
  xgr_logfmt_str(&lg, "node", xgr_store_node_id(d->st));
  xgr_logfmt_i64(&lg, "lease_ms", xgr_store_lease_ms(d->st));
  xgr_node_log_end(d, &lg);
  return 0;
}

void xgr__node_lease_stop(xgr_node *d, bool release) {
  xgr__node_lease *l = d->lease;
  if (!l) return;
  atomic_store(&l->stop, true);
  pthread_mutex_lock(&l->mu);
  pthread_cond_broadcast(&l->cv);
  pthread_mutex_unlock(&l->mu);
  pthread_mutex_lock(&l->cmu);
  pthread_cond_broadcast(&l->ccv);
  pthread_mutex_unlock(&l->cmu);
  if (l->has_th) pthread_join(l->th, NULL);
  if (l->has_cth) pthread_join(l->cth, NULL);
  l->has_th = l->has_cth = false;
  if (release) {
    xgr_error err;
    xgr_store_lease_stats s;
    xgr_store_lease_get_stats(d->st, &s);
    if (xgr_store_lease_release_all(d->st, &err))
      xgr_node_log_error(d, "error", "cannot release the leases", err.message);
    else {
      xgr_logfmt lg;
      xgr_node_log_begin(d, &lg, "info", "leases released");
      xgr_logfmt_u64(&lg, "sessions", s.held);
      xgr_node_log_end(d, &lg);
    }
  }
}

void xgr__node_lease_free(xgr_node *d) {
  xgr__node_lease *l = d->lease;
  if (!l) return;
  xgr__node_lease_stop(d, false);
  pthread_mutex_destroy(&l->mu);
  pthread_cond_destroy(&l->cv);
  pthread_mutex_destroy(&l->cmu);
  pthread_cond_destroy(&l->ccv);
  free(l);
  d->lease = NULL;
}
