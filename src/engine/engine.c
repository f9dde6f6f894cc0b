/* engine.c — the public face of the concurrent engine (xgr/engine.h): creation and shutdown of
 * the runtime, the HTTP loop and the timer thread; bundles; the session registry; control calls
 * turned into messages to session actors; waiting; counters.
 *
 * The session registry maps (owner, rootPid) to the actor's runtime pid. It is split into 64
 * shards, each a util/hashmap under its own mutex, keyed by rootPid (owners compared without
 * case by the lookup's match, so that a lookup without an owner finds any), so
 * control calls, wake-up routing and the actors' end-of-turn bookkeeping of different sessions
 * rarely meet on a lock. Entries are only read under their shard's lock; nothing outside the lock
 * keeps a pointer to one except the session's own actor.
 */
#include <assert.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "engine/engine_impl.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/hashmap.h"

/* ---- registry ---------------------------------------------------------------------------------- */

static uint64_t hash_root(uint64_t root) { return root * 0x9E3779B97F4A7C15ull; }

shard *xgr_eng_shard(xgr_engine *e, uint64_t root) { return &e->shards[hash_root(root) >> 58]; }

typedef struct reg_key {
  const char *owner;            /* NULL: any owner */
  uint64_t root;
} reg_key;

static bool reg_match(const void *ctx, const void *val) {
  const reg_key *k = ctx;
  const sess_entry *x = val;
  return x->root == k->root && (!k->owner || !strcasecmp(k->owner, x->owner));
}

sess_entry *xgr_eng_lookup_locked(xgr_engine *e, const char *owner, uint64_t root, shard **out) {
  shard *sh = xgr_eng_shard(e, root);
  *out = sh;
  pthread_mutex_lock(&sh->mu);
  reg_key k = {owner, root};
  return xgr__hashmap_find(&sh->tab, root, reg_match, &k);
}

/* ---- per-owner live processes --------------------------------------------------------------------- */

static uint64_t owner_hash(const char *owner) {   /* case-insensitive, as owners compare */
  uint64_t x = 0xcbf29ce484222325ull;
  for (const char *c = owner; *c; c++) x = (x ^ (unsigned char)(*c >= 'A' && *c <= 'Z' ? *c | 32 : *c)) * 0x100000001b3ull;
  return x ? x : 1;
}

static bool owner_match(const void *ctx, const void *val) { return !strcasecmp(ctx, ((const owner_live *)val)->owner); }

static owner_live *owner_find_locked(xgr_engine *e, const char *owner, shard **out) {
  uint64_t h = owner_hash(owner);
  shard *sh = &e->owners[h >> 58];
  *out = sh;
  pthread_mutex_lock(&sh->mu);
  return xgr__hashmap_find(&sh->tab, h, owner_match, owner);
}

owner_live *xgr_eng_owner_ref(xgr_engine *e, const char *owner) {
  shard *sh;
  owner_live *o = owner_find_locked(e, owner, &sh);
  if (!o) {
    o = xgr__xcalloc(1, sizeof *o);
    xgr__str_copy(o->owner, sizeof o->owner, owner);
    xgr__hashmap_add(&sh->tab, owner_hash(owner), o);
  }
  o->refs++;
  pthread_mutex_unlock(&sh->mu);
  return o;
}

void xgr_eng_owner_unref(xgr_engine *e, owner_live *o, int64_t counted) {
  if (!o) return;
  shard *sh = &e->owners[owner_hash(o->owner) >> 58];
  pthread_mutex_lock(&sh->mu);
  atomic_fetch_sub(&o->live, counted);
  if (--o->refs == 0) {
    assert(atomic_load(&o->live) == 0);
    xgr__hashmap_remove(&sh->tab, owner_hash(o->owner), o);
    free(o);
  }
  pthread_mutex_unlock(&sh->mu);
}

uint64_t xgr_engine_owner_live(xgr_engine *e, const char *owner) {
  shard *sh;
  owner_live *o = owner_find_locked(e, owner ? owner : "", &sh);
  int64_t n = o ? atomic_load(&o->live) : 0;
  pthread_mutex_unlock(&sh->mu);
  return n > 0 ? (uint64_t)n : 0;
}

static void insert_locked(shard *sh, sess_entry *ent) { xgr__hashmap_add(&sh->tab, ent->root, ent); }

void xgr_eng_unlink_locked(shard *sh, sess_entry *ent) { xgr__hashmap_remove(&sh->tab, ent->root, ent); }

void xgr_eng_notify_waiters(xgr_engine *e) {
  if (!atomic_load(&e->waiters)) return;
  pthread_mutex_lock(&e->wait_mu);
  pthread_cond_broadcast(&e->wait_cv);
  pthread_mutex_unlock(&e->wait_mu);
}

int xgr_eng_send(xgr_engine *e, const xgr_ctx *ctx, xgr_pid pid, uint64_t tag, void *data) {
  xgr_eng_busy_add(e, 1);
  int rc = ctx && ctx->worker ? xgr_ctx_send(ctx, pid, tag, data) : xgr_rt_send(e->rt, pid, tag, data);
  if (rc) xgr_eng_busy_add(e, -1);
  return rc;
}

/* ---- lifecycle ----------------------------------------------------------------------------------- */

xgr_engine *xgr_engine_new(const xgr_engine_config *cfg, xgr_error *err) {
  xgr_engine *e = xgr__xcalloc(1, sizeof *e);
  if (cfg) e->cfg = *cfg;
  e->cfg.node_name = xgr__xstrdup(e->cfg.node_name ? e->cfg.node_name : "");   /* owned (freed with e) */
  if (e->cfg.clock.kind == XGR_CLOCK_SCALED && !(e->cfg.clock.scale > 0)) e->cfg.clock.scale = 1;
  if (e->cfg.store && e->cfg.store->submit) {
    e->store = *e->cfg.store;
    e->has_store = true;
  }
  e->cfg.store = NULL;
  e->stepped = e->cfg.clock.kind == XGR_CLOCK_STEPPED;
  xgr_eng_hib_init(e);
  e->t0_ns = xgr__mono_ns();
  atomic_init(&e->vnow, e->cfg.clock.origin_ms);
  atomic_init(&e->recovering, e->cfg.recovering);
  pthread_mutex_init(&e->reg_mu, NULL);
  pthread_mutex_init(&e->wait_mu, NULL);
  pthread_mutex_init(&e->lat_mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&e->wait_cv, &ca);
  pthread_condattr_destroy(&ca);
  for (int i = 0; i < NSHARDS; i++) {
    pthread_mutex_init(&e->shards[i].mu, NULL);
    pthread_mutex_init(&e->owners[i].mu, NULL);
  }
  /* idle workers fire due timers before they spin, and hand their heap to the timer thread when
   * they park (timer.c) */
  xgr_rt_config rc = {.workers = e->cfg.workers, .fair = true, .idle = xgr_eng_timers_idle, .idle_ctx = e};
  e->rt = xgr_rt_new(&rc);
  e->http = xgr_eng_http_new(e);
  if (!e->rt || !e->http) {
    xgr_error_set(err, XGR_ENOMEM, NULL, "cannot create the runtime or the HTTP loop (is curl initialised?)");
    xgr_engine_free(e);
    return NULL;
  }
  xgr_handler h = {.name = "step", .mode = XGR_HANDLER_TASK, .run = xgr_eng_step_task, .drop = xgr_eng_step_drop, .hctx = e};
  /* the timer heaps exist before the workers start (their idle hook uses them) */
  if (xgr_rt_register_handler(e->rt, CMD_STEP, &h) || xgr_eng_timers_start(e, err) || xgr_rt_start(e->rt, err) ||
      xgr_eng_http_start(e->http, err)) {
    xgr_engine_free(e);
    return NULL;
  }
  return e;
}

int xgr_engine_shutdown(xgr_engine *e, long timeout_ms) {
  if (e->shut) return 0;
  e->shut = true;
  atomic_store(&e->stopping, true);
  xgr_eng_hib_stop(e);
  int rc = e->rt ? xgr_rt_shutdown(e->rt, timeout_ms) : 0;
  xgr_eng_timers_stop(e);
  xgr_eng_http_free(e->http);
  e->http = NULL;
  return rc;
}

void xgr_engine_free(xgr_engine *e) {
  if (!e) return;
  xgr_engine_shutdown(e, -1);
  xgr_rt_free(e->rt);
  for (int i = 0; i < NSHARDS; i++) {
    shard *sh = &e->shards[i];
    size_t pos = 0;
    for (sess_entry *x; (x = xgr__hashmap_next(&sh->tab, &pos, NULL));) {
      json_decref(x->report);
      xgr_eng_entry_free(x);
    }
    xgr__hashmap_free(&sh->tab);
    pthread_mutex_destroy(&sh->mu);
    shard *os = &e->owners[i];   /* every actor released its entry when it was freed */
    size_t opos = 0;
    for (owner_live *o; (o = xgr__hashmap_next(&os->tab, &opos, NULL));) free(o);
    xgr__hashmap_free(&os->tab);
    pthread_mutex_destroy(&os->mu);
  }
  for (size_t i = 0; i < e->nbundles; i++) free(e->bundles[i].name);
  free(e->bundles);
  free(e->tm.w);
  free(e->tm.owners);
  xgr_eng_hib_destroy(e);
  pthread_mutex_destroy(&e->reg_mu);
  pthread_mutex_destroy(&e->wait_mu);
  pthread_mutex_destroy(&e->lat_mu);
  pthread_cond_destroy(&e->wait_cv);
  free((char *)e->cfg.node_name);
  free(e);
}

int xgr_engine_subscribe_interest(xgr_engine *e, xgr_engine_event_fn fn, void *ctx, xgr_engine_interest_fn interest) {
  if (!fn) return XGR_EINVAL;
  if (atomic_load(&e->started_any) || e->nsubs == 8) return XGR_ESTATE;
  e->subs_ctx[e->nsubs] = ctx;
  e->subs_want[e->nsubs] = interest;
  e->subs[e->nsubs++] = fn;
  return 0;
}

int xgr_engine_subscribe(xgr_engine *e, xgr_engine_event_fn fn, void *ctx) {
  return xgr_engine_subscribe_interest(e, fn, ctx, NULL);
}

int64_t xgr_engine_now(xgr_engine *e) { return xgr_eng_now(e); }

void xgr_engine_hold_clock(xgr_engine *e, bool hold) { xgr_eng_busy_add(e, hold ? 1 : -1); }

/* ---- bundles ------------------------------------------------------------------------------------- */

int xgr_engine_register(xgr_engine *e, const char *name, const xgr_bundle *b, xgr_error *err) {
  if (!b) return xgr_error_set(err, XGR_EINVAL, NULL, "no bundle");
  if (!name) name = b->orch->id;
  pthread_mutex_lock(&e->reg_mu);
  for (size_t i = 0; i < e->nbundles; i++)
    if (!strcmp(e->bundles[i].name, name)) {
      pthread_mutex_unlock(&e->reg_mu);
      return xgr_error_set(err, XGR_ECONFLICT, NULL, "a bundle named \"%s\" is registered already", name);
    }
  e->bundles = xgr__xrealloc(e->bundles, (e->nbundles + 1) * sizeof *e->bundles);
  e->bundles[e->nbundles].name = xgr__xstrdup(name);
  e->bundles[e->nbundles++].b = b;
  pthread_mutex_unlock(&e->reg_mu);
  return 0;
}

const xgr_bundle *xgr_engine_bundle(xgr_engine *e, const char *name) {
  const xgr_bundle *b = NULL;
  pthread_mutex_lock(&e->reg_mu);
  for (size_t i = 0; i < e->nbundles && !b; i++)
    if (!strcmp(e->bundles[i].name, name)) b = e->bundles[i].b;
  pthread_mutex_unlock(&e->reg_mu);
  return b;
}

/* ---- sessions ------------------------------------------------------------------------------------- */

static int start_session(xgr_engine *e, const xgr_engine_start *req, bool *taken, xgr_error *err);

int xgr_engine_start_session(xgr_engine *e, const xgr_engine_start *req, xgr_error *err) {
  bool taken = false;   /* the actor holds the bundle: its free calls bundle_done */
  int rc = start_session(e, req, &taken, err);
  if (!taken && req->bundle && e->cfg.bundle_done) e->cfg.bundle_done(e->cfg.bundle_ctx, req->bundle);
  return rc;
}

static int start_session(xgr_engine *e, const xgr_engine_start *req, bool *taken, xgr_error *err) {
  if (atomic_load(&e->stopping)) {   /* the core is ours from the call on, also when it fails */
    xgr_session_free(req->restore);
    return xgr_error_set(err, XGR_EIO, NULL, "the engine is shutting down");
  }
  const xgr_bundle *b = req->bundle ? req->bundle : req->bundle_name ? xgr_engine_bundle(e, req->bundle_name) : NULL;
  if (!b) {
    xgr_session_free(req->restore);
    return xgr_error_set(err, XGR_ENOTFOUND, "bundle", "no bundle \"%s\" is registered", req->bundle_name ? req->bundle_name : "");
  }
  if (!req->owner || strlen(req->owner) >= sizeof ((sess_entry *)0)->owner || !req->root_pid ||
      (!req->start && !req->restore)) {
    xgr_session_free(req->restore);
    return xgr_error_set(err, XGR_EINVAL, NULL, "a session needs an owner (at most 63 bytes), a rootPid > 0 and a start step");
  }
  atomic_store(&e->started_any, true);
  sess_entry *ent = xgr__xcalloc(1, sizeof *ent);
  pthread_mutex_init(&ent->mu, NULL);
  xgr__str_copy(ent->owner, sizeof ent->owner, req->owner);
  ent->root = req->root_pid;
  xgr__str_copy(ent->info.owner, sizeof ent->info.owner, req->owner);
  ent->info.root_pid = req->root_pid;
  shard *sh;
  sess_entry *old = xgr_eng_lookup_locked(e, req->owner, req->root_pid, &sh);
  if (old) {
    pthread_mutex_unlock(&sh->mu);
    xgr_session_free(req->restore);
    xgr_eng_entry_free(ent);
    return xgr_error_set(err, XGR_ECONFLICT, NULL, "session %s/%llu exists already", req->owner,
                         (unsigned long long)req->root_pid);
  }
  insert_locked(sh, ent);
  pthread_mutex_unlock(&sh->mu);
  actor *a = xgr_eng_actor_new(e, ent, b, req, err);
  int rc = a ? 0 : err->code ? err->code : XGR_EINVAL;
  if (a) {
    *taken = true;   /* from here on the actor's free reports the bundle (xgr_eng_actor_new) */
    atomic_fetch_add(&e->live_actors, 1);
    atomic_fetch_add(&e->st_started, 1);
    xgr_eng_busy_add(e, 1);
    rc = xgr_rt_spawn(e->rt, &xgr_eng_actor_vt, a, "session", NULL, NULL, err);
    if (rc) {     /* close() freed the actor */
      xgr_eng_busy_add(e, -1);
      atomic_fetch_sub(&e->live_actors, 1);
    }
  }
  if (rc) {
    pthread_mutex_lock(&sh->mu);
    xgr_eng_unlink_locked(sh, ent);
    pthread_mutex_unlock(&sh->mu);
    xgr_eng_entry_free(ent);
  }
  return rc;
}

/* ---- control ---------------------------------------------------------------------------------------- */

int xgr_engine_control(xgr_engine *e, const xgr_engine_ctl *c, xgr_engine_ctl_done_fn done, void *ctx) {
  if (c->kind == XGR_CTL_WAKE_STEP && !c->step) {
    if (done) done(ctx, XGR_EINVAL, "a step-mode wake needs a step");
    return XGR_EINVAL;
  }
  ctl_msg *m = xgr__xcalloc(1, sizeof *m);
  snprintf(m->owner, sizeof m->owner, "%s", c->owner ? c->owner : "");
  m->root = c->root_pid;
  m->kind = c->kind;
  m->iter = c->iter;
  m->step = c->step ? xgr__xstrdup(c->step) : NULL;
  m->caller = c->caller ? xgr__xstrdup(c->caller) : NULL;
  m->label = c->label ? xgr__xstrdup(c->label) : NULL;
  if (c->actor) {
    m->actor = xgr__xstrdup(c->actor);
    m->permit = c->permit ? xgr__xstrdup(c->permit) : NULL;
    m->batch = c->batch ? xgr__xstrdup(c->batch) : NULL;
    m->node = c->node ? xgr__xstrdup(c->node) : NULL;
  }
  m->payload = xgr_value_retain(c->payload);
  if (c->kind == XGR_CTL_RETRY && c->retry_of) {
    m->has_retry = true;
    m->retry = *c->retry_of;
    m->retry.payload = xgr_value_retain(c->retry_of->payload);
  }
  if (c->kind == XGR_CTL_MIGRATE) {
    m->bundle = c->bundle;
    m->bundle_hash = xgr__xstrdup(c->bundle_hash ? c->bundle_hash : "");
    m->from_bundle_hash = xgr__xstrdup(c->from_bundle_hash ? c->from_bundle_hash : "");
    m->nmap = c->nmap;
    m->map_from = xgr__xcalloc(c->nmap + 1, sizeof *m->map_from);
    m->map_to = xgr__xcalloc(c->nmap + 1, sizeof *m->map_to);
    for (size_t i = 0; i < c->nmap; i++) {
      m->map_from[i] = xgr__xstrdup(c->map_from[i]);
      m->map_to[i] = xgr__xstrdup(c->map_to[i]);
    }
    m->force = c->force;
    m->dry = c->dry;
    m->verdict = c->verdict;
  }
  m->done = done;
  m->done_ctx = ctx;
  return xgr_eng_route_ctl(e, m);
}

int xgr_eng_route_ctl(xgr_engine *e, ctl_msg *m) {
  const char *owner = m->owner[0] ? m->owner : NULL;
  xgr_error lerr;
  xgr_error_clear(&lerr);
  /* a hibernated session is loaded first; one that is being evicted right now is looked up again */
  for (int k = 0; k < 8; k++) {
    shard *sh;
    sess_entry *ent = xgr_eng_lookup_locked(e, owner, m->root, &sh);
    xgr_pid pid = ent ? ent->pid : 0;
    bool gone = ent && ent->gone;
    pthread_mutex_unlock(&sh->mu);
    if (pid) {
      atomic_fetch_add(&e->ctl_inflight, 1);
      if (xgr_eng_send(e, NULL, pid, MSG_CTL, m) == 0) return 0;
      atomic_fetch_sub(&e->ctl_inflight, 1);
    }
    if (gone || !atomic_load(&e->hib.on) || m->kind == XGR_CTL_DROP) break;   /* a drop loads nothing */
    if (!ent && !pid && (lerr.code = xgr_eng_hib_load(e, owner, m->root, &lerr))) break;
    if (ent) sched_yield();
  }
  /* a load that failed for a passing reason (the store unreachable, the row locked by a claim:
   * XGR_EIO, XGR_ETIMEOUT) says so, and the caller may try again; "no live session" is final */
  int rc = lerr.code && lerr.code != XGR_ENOTFOUND ? lerr.code : XGR_ENOTFOUND;
  char msg[XGR_MSG_MAX];
  if (rc != XGR_ENOTFOUND) snprintf(msg, sizeof msg, "session %llu cannot be loaded now: %.400s", (unsigned long long)m->root,
                                    lerr.message);
  else snprintf(msg, sizeof msg, "no live session with rootPid %llu", (unsigned long long)m->root);
  if (m->done) m->done(m->done_ctx, rc, msg);
  m->done = NULL;
  xgr_eng_ctl_free(m);
  return rc;
}

typedef struct sync_reply {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
  int rc;
  char msg[XGR_MSG_MAX];
} sync_reply;

static void sync_done(void *ctx, int rc, const char *message) {
  sync_reply *r = ctx;
  pthread_mutex_lock(&r->mu);
  r->rc = rc;
  snprintf(r->msg, sizeof r->msg, "%s", message ? message : "");
  r->done = true;
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

int xgr_engine_control_sync(xgr_engine *e, const xgr_engine_ctl *c, size_t *woken, xgr_error *err) {
  sync_reply r = {.done = false};
  pthread_mutex_init(&r.mu, NULL);
  pthread_cond_init(&r.cv, NULL);
  xgr_engine_control(e, c, sync_done, &r);
  pthread_mutex_lock(&r.mu);
  while (!r.done) pthread_cond_wait(&r.cv, &r.mu);
  pthread_mutex_unlock(&r.mu);
  pthread_mutex_destroy(&r.mu);
  pthread_cond_destroy(&r.cv);
  if (woken) *woken = 0;
  if (r.rc) return xgr_error_set(err, r.rc, NULL, "%s", r.msg);
  if (woken && c->kind == XGR_CTL_WAKE_PID) *woken = 1;
  else if (woken && c->kind == XGR_CTL_RETRY) sscanf(r.msg, "retried %*[0-9]:%*[0-9] as %*[0-9]:%zu", woken);
  else if (woken) sscanf(r.msg, "woke %zu", woken);
  return 0;
}

int xgr_engine_migrate(xgr_engine *e, const xgr_engine_ctl *c, xgr_error *err) {
  if (c->kind != XGR_CTL_MIGRATE || !c->bundle)
    return xgr_error_set(err, XGR_EINVAL, "bundle", "a migration needs the bundle to move to");
  if (c->verdict) *c->verdict = NULL;
  return xgr_engine_control_sync(e, c, NULL, err);
}

int xgr_engine_kill(xgr_engine *e, const char *owner, uint64_t root_pid, uint64_t iter, xgr_error *err) {
  xgr_engine_ctl c = {.kind = XGR_CTL_KILL, .owner = owner, .root_pid = root_pid, .iter = iter};
  return xgr_engine_control_sync(e, &c, NULL, err);
}

int xgr_engine_pause(xgr_engine *e, const char *owner, uint64_t root_pid, uint64_t iter, bool pause, xgr_error *err) {
  xgr_engine_ctl c = {.kind = pause ? XGR_CTL_PAUSE : XGR_CTL_RESUME, .owner = owner, .root_pid = root_pid, .iter = iter};
  return xgr_engine_control_sync(e, &c, NULL, err);
}

int xgr_engine_wake_pid(xgr_engine *e, const char *owner, uint64_t root_pid, uint64_t iter, const char *caller,
                        xgr_value payload, xgr_error *err) {
  xgr_engine_ctl c = {.kind = XGR_CTL_WAKE_PID, .owner = owner, .root_pid = root_pid, .iter = iter, .caller = caller,
                      .payload = payload};
  return xgr_engine_control_sync(e, &c, NULL, err);
}

int xgr_engine_wake_step(xgr_engine *e, const char *owner, uint64_t root_pid, const char *step, const char *caller,
                         xgr_value payload, size_t *woken, xgr_error *err) {
  xgr_engine_ctl c = {.kind = XGR_CTL_WAKE_STEP, .owner = owner, .root_pid = root_pid, .step = step, .caller = caller,
                      .payload = payload};
  return xgr_engine_control_sync(e, &c, woken, err);
}

int xgr_engine_drop(xgr_engine *e, const char *owner, uint64_t root_pid) {
  xgr_engine_ctl c = {.kind = XGR_CTL_DROP, .owner = owner, .root_pid = root_pid};
  return xgr_engine_control(e, &c, NULL, NULL);
}

void xgr_engine_recovered(xgr_engine *e) { atomic_store(&e->recovering, false); }

/* Send outbox row id as an internal wake-up to the actor pid (that incarnation only): 0 or an error. */
static int send_outbox_wake(xgr_engine *e, xgr_pid pid, const char *id, const char *from_owner, uint64_t from_root,
                            const char *step, const char *rule, xgr_value payload) {
  iwake_msg *m = xgr__xcalloc(1, sizeof *m);
  m->id = xgr__xstrdup(id);
  m->caller = xgr__xstrdup(from_owner);
  m->from_root = from_root;
  m->step_id = xgr__xstrdup(step);
  m->rule_address = rule ? xgr__xstrdup(rule) : NULL;
  m->payload = xgr_value_retain(payload);
  if (xgr_eng_send(e, NULL, pid, MSG_IWAKE, m) == 0) return 0;
  xgr_eng_iwake_free(m);
  return XGR_ENOTFOUND;
}

/* The actor of (owner, root) in the registry, loading a hibernated session first; 0 when none. */
static xgr_pid target_pid(xgr_engine *e, const char *owner, uint64_t root) {
  if (atomic_load(&e->hib.on)) xgr_eng_hib_load(e, owner, root, NULL);   /* a hibernated target */
  shard *sh;
  sess_entry *ent = xgr_eng_lookup_locked(e, owner, root, &sh);
  xgr_pid pid = ent ? ent->pid : 0;
  pthread_mutex_unlock(&sh->mu);
  return pid;
}

int xgr_engine_redeliver(xgr_engine *e, const char *id, const char *from_owner, uint64_t from_root,
                         const char *to_owner, uint64_t to_root, const char *step, const char *rule,
                         xgr_value payload) {
  xgr_pid pid = target_pid(e, to_owner, to_root);
  if (pid && !send_outbox_wake(e, pid, id, from_owner, from_root, step, rule, payload)) return 0;
  atomic_fetch_add(&e->st_wake_refused, 1);
  return XGR_ENOTFOUND;
}

int xgr_engine_redeliver_checked(xgr_engine *e, const char *id, const char *from_owner, uint64_t from_root,
                                 const char *to_owner, uint64_t to_root, const char *step, const char *rule,
                                 xgr_value payload, bool (*pending)(void *ctx, const char *id), void *ctx) {
  /* the incarnation found (or loaded) here lives from before the check to the send (a send to a
   * pid of a gone incarnation fails): an earlier incarnation that applied the row committed its
   * removal before it left, so the check sees it gone; this one remembers what it applied */
  xgr_pid pid = target_pid(e, to_owner, to_root);
  if (!pid) return XGR_ENOTFOUND;
  if (!pending(ctx, id)) return 0;
  return send_outbox_wake(e, pid, id, from_owner, from_root, step, rule, payload);
}

int xgr_engine_at(xgr_engine *e, int64_t at_ms, void (*fn)(void *ctx, int64_t now), void *ctx) {
  if (!fn) return XGR_EINVAL;
  if (atomic_load(&e->stopping)) return XGR_ESTATE;
  at_cb *cb = xgr__xmalloc(sizeof *cb);
  cb->fn = fn;
  cb->ctx = ctx;
  return xgr_eng_timer_add_cb(e, at_ms, cb);
}

/* ---- inspection ------------------------------------------------------------------------------------ */

xgr_engine_session_info xgr_eng_info(sess_entry *ent) {
  pthread_mutex_lock(&ent->mu);
  xgr_engine_session_info in = ent->info;
  pthread_mutex_unlock(&ent->mu);
  return in;
}

void xgr_eng_entry_free(sess_entry *ent) {
  if (!ent) return;
  pthread_mutex_destroy(&ent->mu);
  free(ent);
}

size_t xgr_engine_list(xgr_engine *e, xgr_engine_session_info *out, size_t max) {
  size_t n = 0;
  for (int i = 0; i < NSHARDS; i++) {
    shard *sh = &e->shards[i];
    pthread_mutex_lock(&sh->mu);
    size_t pos = 0;
    for (sess_entry *x; (x = xgr__hashmap_next(&sh->tab, &pos, NULL));) {
      if (n < max) out[n] = xgr_eng_info(x);
      n++;
    }
    pthread_mutex_unlock(&sh->mu);
  }
  return n;
}

int xgr_engine_session(xgr_engine *e, const char *owner, uint64_t root_pid, xgr_engine_session_info *out) {
  shard *sh;
  sess_entry *x = xgr_eng_lookup_locked(e, owner, root_pid, &sh);
  if (x) *out = xgr_eng_info(x);
  pthread_mutex_unlock(&sh->mu);
  return x ? 0 : XGR_ENOTFOUND;
}

json_t *xgr_engine_report(xgr_engine *e, const char *owner, uint64_t root_pid, xgr_error *err) {
  shard *sh;
  sess_entry *x = xgr_eng_lookup_locked(e, owner, root_pid, &sh);
  xgr_pid pid = x ? x->pid : 0;
  json_t *rep = x && x->report ? json_deep_copy(x->report) : NULL;
  pthread_mutex_unlock(&sh->mu);
  if (rep) return rep;
  if (pid) {
    report_msg m = {.done = false};
    pthread_mutex_init(&m.mu, NULL);
    pthread_cond_init(&m.cv, NULL);
    if (xgr_eng_send(e, NULL, pid, MSG_REPORT, &m) == 0) {
      pthread_mutex_lock(&m.mu);
      while (!m.done) pthread_cond_wait(&m.cv, &m.mu);
      pthread_mutex_unlock(&m.mu);
      rep = m.report;
    }
    pthread_mutex_destroy(&m.mu);
    pthread_cond_destroy(&m.cv);
    if (rep) return rep;
  }
  xgr_error_set(err, XGR_ENOTFOUND, NULL, "no session with rootPid %llu%s", (unsigned long long)root_pid,
                x ? " with a report (start it with record and keep_finished)" : "");
  return NULL;
}

static void wait_a_bit(xgr_engine *e, long ms) {
  struct timespec ts = xgr__mono_deadline(ms);
  atomic_fetch_add(&e->waiters, 1);
  pthread_mutex_lock(&e->wait_mu);
  pthread_cond_timedwait(&e->wait_cv, &e->wait_mu, &ts);
  pthread_mutex_unlock(&e->wait_mu);
  atomic_fetch_sub(&e->waiters, 1);
}

/* Nothing that could still change an idle session is on its way. */
static bool settled(xgr_engine *e) {
  return atomic_load(&e->pending_at) == 0 && atomic_load(&e->ctl_inflight) == 0 &&
         (!e->stepped || atomic_load(&e->busy) == 0);
}

int xgr_engine_wait(xgr_engine *e, const char *owner, uint64_t root_pid, long timeout_ms) {
  uint64_t t0 = xgr__mono_ns();
  for (;;) {
    shard *sh;
    sess_entry *x = xgr_eng_lookup_locked(e, owner, root_pid, &sh);
    xgr_engine_session_info in = x ? xgr_eng_info(x) : (xgr_engine_session_info){0};
    int st = !x ? XGR_ENOTFOUND : in.finished ? 0 : (in.idle || x->gone) ? 1 : 2;
    pthread_mutex_unlock(&sh->mu);
    if (st <= 0) return st;
    if (st == 1 && settled(e)) {
      /* re-check: the settled counters were read after the idle flag */
      x = xgr_eng_lookup_locked(e, owner, root_pid, &sh);
      in = x ? xgr_eng_info(x) : (xgr_engine_session_info){0};
      int again = !x ? XGR_ENOTFOUND : in.finished ? 0 : (in.idle || x->gone) ? 1 : 2;
      pthread_mutex_unlock(&sh->mu);
      if (again <= 1) return again;
    }
    long left = timeout_ms < 0 ? 10 : timeout_ms - (long)((xgr__mono_ns() - t0) / 1000000u);
    if (left <= 0) return XGR_ETIMEOUT;
    wait_a_bit(e, left < 10 ? left : 10);
  }
}

int xgr_engine_wait_all(xgr_engine *e, long timeout_ms) {
  uint64_t t0 = xgr__mono_ns();
  for (;;) {
    bool all = settled(e);
    for (int i = 0; i < NSHARDS && all; i++) {
      shard *sh = &e->shards[i];
      pthread_mutex_lock(&sh->mu);
      size_t pos = 0;
      for (sess_entry *x; all && (x = xgr__hashmap_next(&sh->tab, &pos, NULL));) {
        xgr_engine_session_info in = xgr_eng_info(x);
        if (!in.finished && !in.idle && !x->gone) all = false;
      }
      pthread_mutex_unlock(&sh->mu);
    }
    if (all && settled(e)) return 0;
    long left = timeout_ms < 0 ? 10 : timeout_ms - (long)((xgr__mono_ns() - t0) / 1000000u);
    if (left <= 0) return XGR_ETIMEOUT;
    wait_a_bit(e, left < 10 ? left : 10);
  }
}

/* ---- counters -------------------------------------------------------------------------------------- */

void xgr_engine_get_stats(xgr_engine *e, xgr_engine_stats *out) {
  memset(out, 0, sizeof *out);
  out->sessions_started = atomic_load(&e->st_started);
  out->sessions_capped = atomic_load(&e->st_capped);
  out->sessions_over_quota = atomic_load(&e->st_quota);
  out->wakeups_refused = atomic_load(&e->st_wake_refused);
  out->sessions_finished = atomic_load(&e->st_finished);
  out->steps = xgr_eng_steps(e);
  out->http_requests = atomic_load(&e->st_http);
  out->outbound_refused = atomic_load(&e->st_out_refused);
  out->outbound_in_flight = atomic_load(&e->st_out_active);
  out->outbound_waiting = atomic_load(&e->st_out_waiting);
  out->timers_fired = xgr_eng_timers_fired(e);
  out->store_batches = atomic_load(&e->st_batches);
  xgr_rt_get_counters(e->rt, &out->runtime);
  pthread_mutex_lock(&e->lat_mu);
  out->lat_count = e->lat.count;
  out->lat_p50_ns = xgr_eng_lat_quantile(&e->lat, 0.50);
  out->lat_p99_ns = xgr_eng_lat_quantile(&e->lat, 0.99);
  out->lat_max_ns = e->lat.max;
  pthread_mutex_unlock(&e->lat_mu);
}

void xgr_engine_reset_latency(xgr_engine *e) {
  pthread_mutex_lock(&e->lat_mu);
  memset(&e->lat, 0, sizeof e->lat);
  pthread_mutex_unlock(&e->lat_mu);
}
