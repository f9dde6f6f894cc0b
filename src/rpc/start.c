/* start.c — starting sessions: xgr.enqueue, xgr_validateDataTransfer (which waits for the
 * session's first step), xgr_getNextProcessId, and the engine event callback that wakes the
 * first-step waiters and latches a store failure.
 *
 * Starting a session is durable before it is answered: the start is a command to the session's
 * own actor (xgr_node_start), whose first batch carries the session row and its start process
 * (group commit with every other writer); its commit answers. A pinned `ostcHash` that differs
 * from the registered content is refused before anything is written. Two starts of one (owner,
 * rootPid) need no lock: the session row is inserted only if absent, in the commit, so the second
 * one's batch fails as a conflict and it answers from the stored row (its ack while the session
 * runs); a session the store holds but the engine does not is answered from the store at once. A single
 * xgr.enqueue defers its answer until its commit is done (xgr_rpc_defer_begin) instead of holding a
 * server thread; enqueues in a batch wait for the commit on their thread.
 *
 * validateDataTransfer commits its start on its thread too (a short wait), then waits for the first
 * step's result. A single request does that without a thread: its waiter takes the deferred answer
 * and goes on a deadline list, and exactly one of four things fires it under w_mu — the first step's
 * PROC event, the store's failure, its deadline (--first-step-timeout; one timer thread per service
 * sleeps towards the earliest deadline) or the server's stop — and calls xgr_rpc_defer_ready; the
 * finish then builds the same answer the waiting call builds. A batch's validates defer the same way
 * (each member of a batch has its own deferred answer; the batch is answered when the last is
 * ready, jsonrpc.c): no HTTP thread waits for a first step. Only a caller that cannot defer (none
 * of the server's requests) waits on its thread.
 *
 * A client address has at most --max-validates-per-client validates in flight (d->validates,
 * counted from the call until its answer is built); the next one is refused with -32005 naming
 * the cap, and nobody else notices.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "rpc/rpc_impl.h"
#include "xgr/json.h"
#include "xgr/auth.h"
#include "util/alloc.h"
#include "xgr/xrc_types.h"
#include "util/clock.h"

const char *const xgr__rpcd_ack_names[XGR_NODE_ACK_N] = {"queued", "already_queued", "paused", "scheduled"};

/* ---- waiting for a first step (validateDataTransfer) ------------------------------------------- */

/* The deadline list (under w_mu): earliest first. Deadlines are now + one timeout, so a new one
 * almost always goes last: the search starts at the tail. */
static void dl_insert(xgr_rpcd *d, xgr__waiter *w) {
  xgr__waiter *p = d->dtail;
  while (p && p->due_ns > w->due_ns) p = p->dprev;
  w->dprev = p;
  w->dnext = p ? p->dnext : d->dhead;
  if (w->dnext) w->dnext->dprev = w;
  else d->dtail = w;
  if (p) p->dnext = w;
  else {
    d->dhead = w;
    pthread_cond_signal(&d->t_cv);   /* an earlier deadline than the timer sleeps towards */
  }
}

static void dl_unlink(xgr_rpcd *d, xgr__waiter *w) {
  if (w->dprev) w->dprev->dnext = w->dnext;
  else d->dhead = w->dnext;
  if (w->dnext) w->dnext->dprev = w->dprev;
  else d->dtail = w->dprev;
  w->dprev = w->dnext = NULL;
}

/* Fire a deferred waiter (under w_mu, once): off the deadline list, onto *list for ready_all. */
static void fire_locked(xgr_rpcd *d, xgr__waiter *w, xgr__waiter **list) {
  assert(w->df && !w->fired);
  w->fired = true;
  dl_unlink(d, w);
  w->fnext = *list;
  *list = w;
}

/* Wake the answers of fired waiters (without w_mu). A waiter may be freed by its finish as soon as
 * its answer is woken: read what is needed first. */
static void ready_all(xgr__waiter *list) {
  while (list) {
    xgr__waiter *next = list->fnext;
    xgr_rpc_defer_ready(list->df);
    list = next;
  }
}

/* Fire every deferred waiter (the store failed, or the server stops). */
static void fire_every(xgr_rpcd *d) {
  xgr__waiter *fire = NULL;
  pthread_mutex_lock(&d->w_mu);
  while (d->dhead) fire_locked(d, d->dhead, &fire);
  pthread_mutex_unlock(&d->w_mu);
  ready_all(fire);
}

/* The timer thread: fires the waiters whose deadline passed, sleeps towards the earliest. */
static void *timer_main(void *arg) {
  xgr_rpcd *d = arg;
  pthread_mutex_lock(&d->w_mu);
  while (!d->t_stop) {
    xgr__waiter *fire = NULL;
    int64_t now = (int64_t)xgr__mono_ns();
    while (d->dhead && d->dhead->due_ns <= now) fire_locked(d, d->dhead, &fire);
    if (fire) {
      pthread_mutex_unlock(&d->w_mu);
      ready_all(fire);
      pthread_mutex_lock(&d->w_mu);
      continue;
    }
    if (!d->dhead) {
      pthread_cond_wait(&d->t_cv, &d->w_mu);
    } else {
      struct timespec ts = {.tv_sec = (time_t)(d->dhead->due_ns / 1000000000),
                            .tv_nsec = (long)(d->dhead->due_ns % 1000000000)};
      pthread_cond_timedwait(&d->t_cv, &d->w_mu, &ts);
    }
  }
  pthread_mutex_unlock(&d->w_mu);
  return NULL;
}

/* Start the timer thread if it does not run yet (under w_mu). False when it cannot be started:
 * the caller then waits on its own thread. */
static bool timer_ensure(xgr_rpcd *d) {
  if (!d->t_on && !d->t_stop && !pthread_create(&d->t_th, NULL, timer_main, d)) d->t_on = true;
  return d->t_on;
}

void xgr__rpcd_waiters_init(xgr_rpcd *d) {
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(&d->t_cv, &a);
  pthread_condattr_destroy(&a);
}

void xgr__rpcd_waiters_stop(void *ctx) {
  xgr_rpcd *d = ctx;
  pthread_mutex_lock(&d->w_mu);
  d->v_stop = true;
  pthread_cond_broadcast(&d->w_cv);   /* validates of batches stop waiting too */
  pthread_mutex_unlock(&d->w_mu);
  fire_every(d);
}

void xgr__rpcd_waiters_free(xgr_rpcd *d) {
  pthread_mutex_lock(&d->w_mu);
  assert(!d->dhead);   /* the server stopped first: every deferred answer was sent */
  d->t_stop = true;
  pthread_cond_signal(&d->t_cv);
  pthread_mutex_unlock(&d->w_mu);
  if (d->t_on) pthread_join(d->t_th, NULL);
  d->t_on = false;
  pthread_cond_destroy(&d->t_cv);
}

/* The store refused a batch: log it once and wake every validateDataTransfer waiting for a first
 * step (they answer "unavailable"). Writing methods are refused from now on (rpcd.c's guard). */
static void on_store_error(xgr_rpcd *d, const xgr_engine_event *ev) {
  if (atomic_exchange(&d->store_down, true)) return;
  xgr_error e;
  xgr_error_clear(&e);
  if (!xgr_node_store_failed(d->n, &e)) snprintf(e.message, sizeof e.message, "%s", ev->message ? ev->message : "?");
  xgr_node_log_session(d->n, "error",
                       "the store failed: xgrd refuses every write from now on and keeps what was committed; fix the "
                       "store and restart xgrd",
                       ev->owner, ev->root_pid, e.message);
  pthread_mutex_lock(&d->w_mu);
  pthread_cond_broadcast(&d->w_cv);
  pthread_mutex_unlock(&d->w_mu);
  fire_every(d);
}

unsigned xgr__rpcd_interest(void *ctx) {
  xgr_rpcd *d = ctx;
  unsigned want = XGR_EEV_WANT(XGR_EEV_STORE_ERROR) | XGR_EEV_WANT(XGR_EEV_WAKE) | XGR_EEV_WANT(XGR_EEV_ACTION);
  if (atomic_load(&d->nwaiters)) want |= XGR_EEV_WANT(XGR_EEV_STEP) | XGR_EEV_WANT(XGR_EEV_PROC);
  return want;
}

void xgr__rpcd_on_event(void *ctx, const xgr_engine_event *ev) {
  xgr_rpcd *d = ctx;
  if (ev->kind == XGR_EEV_STORE_ERROR) {
    on_store_error(d, ev);
    return;
  }
  if (ev->kind == XGR_EEV_WAKE && !ev->ok && ev->message && !strncmp(ev->message, "wake-up refused:", 16)) {
    xgr_logfmt l;   /* the message names the producing session */
    xgr_node_log_begin(d->n, &l, "warn", ev->message);
    xgr_node_log_end(d->n, &l);
    return;
  }
  if (ev->kind == XGR_EEV_ACTION && !ev->ok && ev->message && !strncmp(ev->message, "session aborted:", 16)) {
    /* a per-session cap killed it */
    xgr_node_log_session(d->n, "warn", ev->message, ev->owner, ev->root_pid, NULL);
    return;
  }
  if (ev->kind == XGR_EEV_STEP) {   /* the first step's outcome payload, before its PROC event */
    if (ev->iter != 1 || !atomic_load(&d->nwaiters)) return;
    pthread_mutex_lock(&d->w_mu);
    for (xgr__waiter *w = d->waiters; w; w = w->next)
      if (!w->done && !w->stepped && w->root == ev->root_pid && !strcmp(w->owner, ev->owner)) {
        w->stepped = true;
        w->output = xgr_value_to_json_exact(ev->output);
        if (xgr_value_kind(ev->input) == XGR_VMAP) w->payload = xgr_value_to_json_exact(ev->input);
        w->action = ev->rule_action;
      }
    pthread_mutex_unlock(&d->w_mu);
    return;
  }
  if (ev->kind != XGR_EEV_PROC || !ev->proc || ev->proc->iter != 1 || !atomic_load(&d->nwaiters)) return;
  if (ev->proc->status != XGR_PROC_DONE && ev->proc->status != XGR_PROC_ABORTED) return;
  xgr__waiter *fire = NULL;
  pthread_mutex_lock(&d->w_mu);
  for (xgr__waiter *w = d->waiters; w; w = w->next)
    if (!w->done && w->root == ev->root_pid && !strcmp(w->owner, ev->owner)) {
      w->done = true;
      w->status = ev->proc->status;
      w->valid = ev->proc->valid;
      if (!w->payload) w->payload = xgr_value_to_json_exact(ev->proc->payload);   /* no input was read */
      w->error = ev->proc->error ? xgr__xstrdup(ev->proc->error) : NULL;
      if (w->df && !w->fired) fire_locked(d, w, &fire);
      else pthread_cond_broadcast(&d->w_cv);
    }
  pthread_mutex_unlock(&d->w_mu);
  ready_all(fire);
}

/* ---- starting sessions --------------------------------------------------------------------------- */

/* A start on its way, on the front end's side: what answers it once the node says its outcome is
 * ready — the thread that waits for it, or (a deferred enqueue) the server thread its commit
 * resumes (enqueue_finish, which frees it). */
typedef struct start_call {
  xgr_rpcd *d;
  xgr__waiter *w;              /* validateDataTransfer's, or NULL */
  xgr_rpc_defer *df;           /* the deferred answer (enqueue), or NULL */
  xgr_rpc_finish_fn finish;
  char owner[64];
  uint64_t root;
  char hash[67], bundle_hash[67];
  xgr_node_enqueued *p;        /* set by done */
  pthread_mutex_t mu;          /* without df: the waiting thread sleeps on cv until p is set */
  pthread_cond_t cv;
} start_call;

/* The node is about to start the session (xgr_node_enqueue_req.before): a validateDataTransfer's
 * waiter goes on the list before the session can make its first event, and a deferred answer is
 * handed over before done can come. */
static void start_before(void *ctx, uint64_t root) {
  start_call *c = ctx;
  c->root = root;
  if (c->w) {
    snprintf(c->w->owner, sizeof c->w->owner, "%s", c->owner);
    c->w->root = root;
    pthread_mutex_lock(&c->d->w_mu);
    c->w->next = c->d->waiters;
    c->d->waiters = c->w;
    atomic_fetch_add(&c->d->nwaiters, 1);
    pthread_mutex_unlock(&c->d->w_mu);
  }
  if (c->df) xgr_rpc_defer_begin(c->df, c->finish, c);
}

/* The start's outcome is ready (xgr_node_enqueue_req.done; must not block). */
static void start_done(void *ctx, xgr_node_enqueued *p) {
  start_call *c = ctx;
  if (c->df) {
    c->p = p;
    xgr_rpc_defer_ready(c->df);
    return;
  }
  pthread_mutex_lock(&c->mu);
  c->p = p;
  pthread_cond_signal(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

/* xgr.enqueue's answer (counted by ack). */
static json_t *enqueue_answer(xgr_rpcd *d, xgr_node_ack a, const char *owner, uint64_t root, const char *hash,
                              const char *bundle_hash) {
  xgr_counter_add(d->c_enq[a], 1);
  return json_pack("{s:s, s:s, s:o, s:o, s:s, s:s}", "ack", xgr__rpcd_ack_names[a], "owner", owner, "rootPid",
                   xgr__rpc_u64_json(root), "pid", xgr__rpc_pid_json(root, 1), "ostcHash", hash, "bundleHash",
                   bundle_hash);
}

/* A deferred enqueue's answer, on a server thread once its start is done (xgr_rpc_finish_fn). */
static int enqueue_finish(void *ctx, json_t **result, xgr_error *err) {
  start_call *c = ctx;
  xgr_node_ack a;
  int rc = xgr_node_enqueued_answer(c->p, &a, err);
  if (!rc) *result = enqueue_answer(c->d, a, c->owner, c->root, c->hash, c->bundle_hash);
  else xgr__rpc_code(rc, err);
  free(c);
  return rc;
}

/* Start a session (the node decides; r's before, done and ctx are set here). With df NULL the
 * outcome is waited for on this thread; with df (a single request that may defer its answer) the
 * start is handed over and XGR_RPC_DEFERRED returned, finish answering it. *out_root gets the
 * rootPid, hash and bundle_hash (67 bytes each) the orchestration's and the bundle's hash ("" when no
 * bundle was found). A
 * validateDataTransfer's waiter (w) is registered before the session can make its first event. */
static int start_session(xgr_rpcd *d, xgr_node_enqueue_req *r, xgr__waiter *w, xgr_rpc_defer *df,
                         xgr_rpc_finish_fn finish, xgr_node_ack *out_ack, uint64_t *out_root, char *hash,
                         char *bundle_hash, xgr_error *err) {
  if (atomic_load(&d->stopping)) return xgr__rpc_fail(err, XGR_EIO, NULL, "xgrd is shutting down");
  start_call *c = xgr__xcalloc(1, sizeof *c);
  c->d = d;
  c->w = w;
  c->df = df;
  c->finish = finish;
  snprintf(c->owner, sizeof c->owner, "%s", r->owner);
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, NULL);
  r->before = start_before;
  r->done = start_done;
  r->ctx = c;
  xgr_node_ack a = XGR_NODE_ACK_QUEUED;
  bool pending = false;
  int rc = xgr_node_enqueue(d->n, r, out_root, hash, bundle_hash, &a, &pending, err);
  if (rc || !pending) {
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
    if (rc) return xgr__rpc_code(rc, err);
    *out_ack = a;
    return 0;
  }
  snprintf(c->hash, sizeof c->hash, "%s", hash);
  snprintf(c->bundle_hash, sizeof c->bundle_hash, "%s", bundle_hash);
  if (df) return XGR_RPC_DEFERRED;   /* enqueue_finish answers and frees c */
  pthread_mutex_lock(&c->mu);
  while (!c->p) pthread_cond_wait(&c->cv, &c->mu);
  pthread_mutex_unlock(&c->mu);
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->cv);
  xgr_node_enqueued *p = c->p;
  free(c);
  rc = xgr_node_enqueued_answer(p, &a, err);
  if (rc) return xgr__rpc_code(rc, err);
  *out_ack = a;
  return 0;
}

static void waiter_remove(xgr_rpcd *d, xgr__waiter *w) {
  pthread_mutex_lock(&d->w_mu);
  for (xgr__waiter **pp = &d->waiters; *pp; pp = &(*pp)->next)
    if (*pp == w) {
      *pp = w->next;
      atomic_fetch_sub(&d->nwaiters, 1);
      break;
    }
  pthread_mutex_unlock(&d->w_mu);
}

static void waiter_free(xgr__waiter *w) {
  json_decref(w->output);
  json_decref(w->payload);
  free(w->error);
  free(w->step);
  free(w);
}

/* validateDataTransfer's answer once its waiter is off the list (done, timed out, or the store
 * failed first); frees w. */
static int validate_answer(xgr__waiter *w, json_t **result, xgr_error *err) {
  xgr_rpcd *d = w->d;
  uint64_t root = w->root;
  xgr__tally_give(&d->validates, w->client);   /* answered: no longer in flight */
  if (!w->done && atomic_load(&d->store_down)) {
    waiter_free(w);
    xgr_error se;
    xgr_node_store_failed(d->n, &se);
    return xgr__rpc_fail(err, XGR_EIO, NULL,
                         "the store failed before the first step was committed: %s", se.message);
  }
  json_t *r =
      json_pack("{s:o, s:o, s:s, s:s}", "processId", xgr__rpc_pid_json(root, 1), "sessionId", xgr__rpc_u64_json(root),
                "ruleAction", w->done && w->action ? xgr_rule_action_name((xgr_rule_action)w->action) : "", "ostcHash",
                w->hash);
  if (w->done) {
    json_object_set_new(r, "status", json_string(xgr_proc_status_name((xgr_proc_status)w->status)));
    json_object_set_new(r, "finalResult", w->valid < 0 ? json_null() : json_boolean(w->valid));
    json_object_set_new(r, "payload", w->payload ? w->payload : json_null());
    json_object_set_new(r, "outputPayload", w->output ? w->output : json_null());
    w->payload = w->output = NULL;
    if (w->error) json_object_set_new(r, "error", json_string(w->error));
    json_object_set_new(r, "executedSteps",
                        json_pack("[{s:o, s:s, s:o, s:s}]", "pid", xgr__rpc_pid_json(root, 1), "stepId", w->step,
                                  "valid", w->valid < 0 ? json_null() : json_boolean(w->valid), "status",
                                  xgr_proc_status_name((xgr_proc_status)w->status)));
  } else {
    json_object_set_new(r, "status", json_string("running"));
    json_object_set_new(r, "finalResult", json_null());
    json_object_set_new(r, "payload", json_null());
    json_object_set_new(r, "outputPayload", json_null());
    json_object_set_new(r, "executedSteps", json_array());
  }
  waiter_free(w);
  *result = r;
  return 0;
}

/* A deferred validateDataTransfer's answer, on a server thread once its waiter fired
 * (xgr_rpc_finish_fn; owns w). */
static int validate_finish(void *ctx, json_t **result, xgr_error *err) {
  xgr__waiter *w = ctx;
  waiter_remove(w->d, w);   /* from now on the event callback leaves it alone */
  return validate_answer(w, result, err);
}

/* engineEOA and ethRPCURL of seed 001 §2.1: xgrd signs with one engine key and talks to one
 * chain, both set when it starts (--engine-key, --chain), so a request may name them only as they
 * are; anything else is refused rather than ignored. */
static int daemon_fields(xgr_rpcd *d, const json_t *o, xgr_error *err) {
  const char *eoa = NULL, *url = NULL;
  int rc = xgr__rpc_opt_str(o, "engineEOA", &eoa, err);
  if (rc || (rc = xgr__rpc_opt_str(o, "ethRPCURL", &url, err))) return rc;
  const char *have = d->nc->executor ? xgr_chain_executor_address(d->nc->executor) : NULL;
  if (eoa && !have)
    return xgr__rpc_fail(err, XGR_ESCHEMA, "engineEOA",
                         "is \"%.60s\"; the engine address is set when xgrd starts (--engine-key) and this xgrd has "
                         "none: leave engineEOA out", eoa);
  if (eoa && strcasecmp(eoa, have))
    return xgr__rpc_fail(err, XGR_ESCHEMA, "engineEOA",
                         "is \"%.60s\"; the engine address is set when xgrd starts (--engine-key) and is %s: give "
                         "that or leave engineEOA out", eoa, have);
  const char *chain = d->nc->chain ? xgr_chain_url(d->nc->chain, NULL) : NULL;
  if (url && !chain)
    return xgr__rpc_fail(err, XGR_ESCHEMA, "ethRPCURL",
                         "is \"%.100s\"; the chain is set when xgrd starts (--chain) and this xgrd has none: leave "
                         "ethRPCURL out", url);
  size_t ul = url ? strlen(url) : 0, cl = chain ? strlen(chain) : 0;
  if (ul && url[ul - 1] == '/') ul--;   /* one trailing slash names the same endpoint */
  if (cl && chain[cl - 1] == '/') cl--;
  if (url && (ul != cl || strncmp(url, chain, ul)))
    return xgr__rpc_fail(err, XGR_ESCHEMA, "ethRPCURL",
                         "is \"%.100s\"; the chain is set when xgrd starts (--chain) and is %s: give that or leave "
                         "ethRPCURL out", url, chain);
  return 0;
}

/* The parameter keys each method reads (xgr__rpc_named; "from" is always known). */
static const char *const enqueue_keys[] = {"owner", "runner", "rootPid", "xrc729", "registry", "registryOwner", "ostcId",
                                           "ostcHash", "init", "permit", "engineEOA", "ethRPCURL", NULL};
static const char *const init_keys[] = {"stepId", "payload", "waitMs", NULL};
static const char *const validate_keys[] = {"owner", "runner", "orchestration", "registryOwner", "stepId", "payload",
                                            "ostcId", "ostcHash", "sessionId", "rootPid", "permit", NULL};
static const char *const next_pid_keys[] = {"owner", NULL};

XGR__RPCD_METHOD(xgr__rpcd_m_enqueue) {
  xgr_rpcd *d = ctx;
  const json_t *o;
  int rc = xgr__rpc_named(params, enqueue_keys, &o, err);
  if (rc) return rc;
  char who[64] = "", owner[64], reg[XGR__RPC_MAX_REGISTRY + 1], key[XGR__RPC_KEY_SIZE];
  const char *opath, *rpath, *ostc_id = NULL, *hash = NULL, *step = NULL;
  if ((rc = xgr__rpc_owner(o, xgr_rpc_claimed(caller, o), owner, sizeof owner, &opath, err))) return rc;
  if ((rc = xgr__rpc_registry(o, NULL, false, reg, sizeof reg, &rpath, err))) return rc;
  if ((rc = xgr__rpc_ostc_id(o, &ostc_id, err)) || (rc = xgr__rpc_opt_str(o, "ostcHash", &hash, err))) return rc;
  char reg_ns[43];
  bool has_ns;
  if ((rc = xgr__rpc_opt_address(o, "registryOwner", reg_ns, &has_ns, err))) return rc;
  uint64_t root = 0;
  const json_t *rv = json_object_get(o, "rootPid");
  if (rv && !json_is_null(rv) && (rc = xgr__rpc_uint(rv, "rootPid", &root, err))) return rc;
  const json_t *init = NULL, *payload = NULL;
  uint64_t wait_ms = 0;
  if ((rc = xgr_rpc_param_object(o, "init", false, &init, err)) || (rc = xgr__rpc_keys(init, "init", init_keys, err)))
    return rc;
  if (init) {
    const json_t *sv = json_object_get(init, "stepId");
    if (sv && !json_is_null(sv) && !xgr_json_text(sv)) {
      char prev[72];
      xgr_json_preview(sv, prev, sizeof prev);
      return xgr__rpc_fail(err, XGR_ESCHEMA, "init.stepId", "is %s %s; expected a step id (a string)",
                           xgr_json_type_name(sv), prev);
    }
    step = xgr_json_text(sv);
    payload = json_object_get(init, "payload");
    if (json_is_null(payload)) payload = NULL;
    const json_t *wv = json_object_get(init, "waitMs");
    if (wv && !json_is_null(wv) && (rc = xgr__rpc_uint(wv, "init.waitMs", &wait_ms, err))) return rc;
    if (wait_ms > (uint64_t)XGR_MAX_WAIT_MS)
      return xgr__rpc_fail(err, XGR_ESCHEMA, "init.waitMs",
                           "is %llu; expected at most %lld (the longest waitSec, in ms)", (unsigned long long)wait_ms,
                           (long long)XGR_MAX_WAIT_MS);
  }
  if ((rc = daemon_fields(d, o, err))) return rc;
  xgr_permit permit;   /* who may: checked once the request is well-formed */
  if ((rc = xgr_rpc_authorize_permit(caller, o, XGR_RPC_ACT_START, owner, who, sizeof who, &permit, err))) return rc;
  xgr__rpc_registry_key(key, reg, ostc_id);
  xgr_node_enqueue_req rq = {.owner = owner, .root = root, .reg_key = key, .reg_ns = has_ns ? reg_ns : NULL,
                             .registry = reg, .reg_path = ostc_id ? "ostcId" : rpath, .ostc_hash = hash, .step = step,
                             .step_path = "init.stepId", .payload_path = "init.payload", .payload = payload,
                             .wait_ms = (int64_t)wait_ms, .permit = &permit, .ostc_id = ostc_id, .who = who,
                             .traceparent = caller->traceparent};
  xgr_node_ack a;
  char hash_of[67], bundle_of[67];
  /* a single request is answered once its commit is done, without holding a thread */
  const char *actor = xgr_rpc_actor(caller, permit.kind ? permit.from : who[0] ? who : owner);
  xgr_rpc_log_subject(caller, actor, owner, root);
  rc = start_session(d, &rq, NULL, caller->defer, enqueue_finish, &a, &root, hash_of, bundle_of, err);
  if (rc) return rc;
  xgr_rpc_log_subject(caller, actor, owner, root);   /* the rootPid taken */
  *result = enqueue_answer(d, a, owner, root, hash_of, bundle_of);
  return 0;
}

XGR__RPCD_METHOD(xgr__rpcd_m_validate) {
  xgr_rpcd *d = ctx;
  const json_t *o;
  int rc = xgr__rpc_named(params, validate_keys, &o, err);
  if (rc) return rc;
  char who[64] = "", owner[64], reg[XGR__RPC_MAX_REGISTRY + 1], key[XGR__RPC_KEY_SIZE];
  const char *opath, *step = NULL, *ostc_id = NULL, *hash = NULL;
  static const char *const from_keys[] = {"from", "owner", NULL};
  const char *fk = xgr__rpc_first_key(o, from_keys);
  const char *claimed = xgr_json_text(json_object_get(o, fk));
  if ((rc = xgr__rpc_owner(o, claimed ? claimed : xgr_rpc_claimed(caller, o), owner, sizeof owner, &opath, err)))
    return rc;
  xgr_permit permit;
  if ((rc = xgr_rpc_authorize_permit(caller, o, XGR_RPC_ACT_START, owner, who, sizeof who, &permit, err))) return rc;
  if ((rc = xgr_rpc_param_string(o, "stepId", true, &step, err))) return rc;
  static const char *const reg_keys[] = {"orchestration", NULL};
  const char *rpath;
  if ((rc = xgr__rpc_registry(o, reg_keys, true, reg, sizeof reg, &rpath, err))) return rc;
  if ((rc = xgr__rpc_ostc_id(o, &ostc_id, err)) || (rc = xgr__rpc_opt_str(o, "ostcHash", &hash, err))) return rc;
  char reg_ns[43];
  bool has_ns;
  if ((rc = xgr__rpc_opt_address(o, "registryOwner", reg_ns, &has_ns, err))) return rc;
  xgr__rpc_registry_key(key, reg, ostc_id);
  uint64_t root = 0;
  static const char *const sid_keys[] = {"sessionId", "rootPid", NULL};
  const char *sk = xgr__rpc_first_key(o, sid_keys);
  const json_t *rv = json_object_get(o, sk);
  if (rv && !json_is_null(rv) && (rc = xgr__rpc_uint(rv, sk, &root, err))) return rc;
  const json_t *payload = json_object_get(o, "payload");
  if (json_is_null(payload)) payload = NULL;
  char client[64];
  unsigned held;
  xgr__rpc_client_addr(caller, client, sizeof client);
  if (!xgr__tally_take(&d->validates, client, d->cfg.max_validates_per_client, 0, &held)) {
    xgr_counter_add(d->c_validates_refused, 1);
    return xgr__rpc_fail(err, XGR_ELIMIT, NULL,
                         "too many xgr_validateDataTransfer calls in flight from this client address (%s): %u; the cap "
                         "--max-validates-per-client is %u. Wait for an answer before sending more",
                         client, held, d->cfg.max_validates_per_client);
  }
  xgr__waiter *w = xgr__xcalloc(1, sizeof *w);
  snprintf(w->client, sizeof w->client, "%s", client);
  xgr_node_enqueue_req rq = {.owner = owner, .root = root, .reg_key = key, .reg_ns = has_ns ? reg_ns : NULL,
                             .registry = reg, .reg_path = "orchestration",
                             .ostc_hash = hash, .step = step, .step_path = "stepId", .payload_path = "payload",
                             .payload = payload, .permit = &permit, .ostc_id = ostc_id, .who = who,
                             .traceparent = caller->traceparent};
  xgr_node_ack a = XGR_NODE_ACK_QUEUED;
  char bundle_of[67];
  rc = start_session(d, &rq, w, NULL, NULL, &a, &root, w->hash, bundle_of, err);
  if (rc || a != XGR_NODE_ACK_QUEUED) {
    if (w->root) waiter_remove(d, w);   /* registered (also when the engine refused the start) */
    xgr__tally_give(&d->validates, w->client);
    waiter_free(w);
    if (rc) return rc;
    return xgr__rpc_fail(err, XGR_ECONFLICT, sk, "session %s/%llu exists already (%s)", owner,
                         (unsigned long long)root, xgr__rpcd_ack_names[a]);
  }
  xgr_counter_add(d->c_enq[XGR_NODE_ACK_QUEUED], 1);
  long tmo = d->cfg.first_step_timeout_ms > 0 ? d->cfg.first_step_timeout_ms : 10000;
  w->d = d;
  w->step = xgr__xstrdup(step);
  pthread_mutex_lock(&d->w_mu);
  /* a request waits without a thread, alone or in a batch (unless its answer is there already, or
   * xgrd stops) */
  bool defer = caller->defer && !w->done && !atomic_load(&d->stopping) && !atomic_load(&d->store_down) &&
               !d->v_stop && timer_ensure(d);
  if (defer) {
    w->due_ns = (int64_t)xgr__mono_ns() + (int64_t)tmo * 1000000;
    w->df = caller->defer;
    xgr_rpc_defer_begin(w->df, validate_finish, w);   /* before anyone can fire it: they need w_mu */
    dl_insert(d, w);
  }
  pthread_mutex_unlock(&d->w_mu);
  if (defer) return XGR_RPC_DEFERRED;
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl);
  dl.tv_sec += tmo / 1000;
  dl.tv_nsec += (tmo % 1000) * 1000000L;
  if (dl.tv_nsec >= 1000000000L) {
    dl.tv_sec++;
    dl.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&d->w_mu);
  while (!w->done && !atomic_load(&d->stopping) && !atomic_load(&d->store_down) && !d->v_stop)
    if (pthread_cond_timedwait(&d->w_cv, &d->w_mu, &dl)) break;
  pthread_mutex_unlock(&d->w_mu);
  waiter_remove(d, w);
  return validate_answer(w, result, err);
}

XGR__RPCD_METHOD(xgr__rpcd_m_next_pid) {
  xgr_rpcd *d = ctx;
  const json_t *o;
  int rc = xgr__rpc_named(params, next_pid_keys, &o, err);
  if (rc) return rc;
  char who[64] = "";
  if (xgr__rpc_permits(caller)) {   /* public, as on a chain: `from` names whose counter to read */
    const json_t *f = json_object_get(o, "from");
    if (f && (!json_is_string(f) || !xgr_rpc_is_address(json_string_value(f))))
      return xgr__rpc_fail(err, XGR_ESCHEMA, "from", "is not an address (0x + 40 hex)");
    if (f) {
      snprintf(who, sizeof who, "%s", json_string_value(f));
      xgr__rpc_lower(who);
    }
  } else if ((rc = xgr_rpc_authorize(caller, o, XGR_RPC_ACT_READ, NULL, who, sizeof who, err))) {
    return rc;
  }
  if (!who[0]) return xgr__rpc_fail(err, XGR_ESCHEMA, "from",
                                    "missing; expected the sender's address (0x + 40 hex)");
  uint64_t root;   /* the next expected rootPid (public reference §6): read, not taken */
  if ((rc = xgr_node_next_root(d->n, who, &root, err))) return xgr__rpc_code(rc, err);
  *result = json_pack("{s:o}", "nextProcessId", xgr__rpc_u64_json(root));
  return 0;
}


/* xgr.fork (issue 36; docs/SEMANTICS.md "Retry and fork"): a new session of the same owner started
 * from a recorded step of session `sessionId` (ended or live) — `pid` ("R:I") or the latest run of
 * `stepId` — with that step's input payload or `payload`, on the source's bundle, or a newer one:
 * `ostcHash` (an orchestration or bundle hash) or `version` (of the source's orchestration). The
 * node says what it starts from and records the fork (forked_from, audit entries on both) in the
 * commit of the new session's row. Who may: as for kill, the owner and xgrd's operators (the new
 * session is the owner's; the audit entries name the operator); a ControlPermit's action is "fork",
 * its sessionId the source. */
static const char *const fork_keys[] = {"owner", "runner", "sessionId", "pid", "stepId", "payload", "ostcHash",
                                        "version", "registryOwner", "newRootPid", "permit", NULL};

XGR__RPCD_METHOD(xgr__rpcd_m_fork) {
  xgr_rpcd *d = ctx;
  const json_t *o;
  int rc = xgr__rpc_named(params, fork_keys, &o, err);
  if (rc) return rc;
  char who[64] = "", owner[64];
  const char *opath, *step = NULL, *hash = NULL;
  if ((rc = xgr__rpc_owner(o, xgr_rpc_claimed(caller, o), owner, sizeof owner, &opath, err))) return rc;
  uint64_t root = 0, iter = 0, new_root = 0;
  const json_t *pv = json_object_get(o, "pid"), *sv = json_object_get(o, "sessionId");
  if (pv && !json_is_null(pv)) {
    uint64_t r2;
    if (!json_is_string(pv) || xgr_pid_parse(json_string_value(pv), &r2, &iter) || !iter)
      return xgr__rpc_fail(err, XGR_ESCHEMA, "pid", "is not \"<rootPid>:<iter>\"; a fork names the recorded step's process");
    root = r2;
  }
  if ((rc = xgr__rpc_opt_str(o, "stepId", &step, err))) return rc;
  if (iter && step)
    return xgr__rpc_fail(err, XGR_ESCHEMA, "stepId", "is set together with pid; name the recorded step by one of them");
  if (!iter && !step)
    return xgr__rpc_fail(err, XGR_ESCHEMA, "pid", "missing; expected \"pid\" (\"<rootPid>:<iter>\") or \"stepId\" "
                         "with \"sessionId\": the recorded step to fork from");
  if (sv && !json_is_null(sv)) {
    uint64_t r3;
    if ((rc = xgr__rpc_uint(sv, "sessionId", &r3, err))) return rc;
    if (root && r3 != root)
      return xgr__rpc_fail(err, XGR_ESCHEMA, "sessionId", "is %llu, the pid names session %llu",
                           (unsigned long long)r3, (unsigned long long)root);
    root = r3;
  }
  if (!root) return xgr__rpc_fail(err, XGR_ESCHEMA, "sessionId", "missing; expected the session to fork from");
  const json_t *payload = json_object_get(o, "payload");
  if (json_is_null(payload)) payload = NULL;
  if (payload && !json_is_object(payload))
    return xgr__rpc_fail(err, XGR_ESCHEMA, "payload", "is not an object; expected {...}, the payload the forked step "
                         "starts with (none: its recorded input payload)");
  if ((rc = xgr__rpc_opt_str(o, "ostcHash", &hash, err))) return rc;
  uint32_t version = 0;
  if ((rc = xgr__rpc_version(o, &version, err))) return rc;
  if (hash && version)
    return xgr__rpc_fail(err, XGR_ESCHEMA, "version", "is set together with ostcHash; name the bundle by one of them");
  const json_t *nr = json_object_get(o, "newRootPid");
  if (nr && !json_is_null(nr) && (rc = xgr__rpc_uint(nr, "newRootPid", &new_root, err))) return rc;
  char reg_ns[43];
  bool has_ns;
  if ((rc = xgr__rpc_opt_address(o, "registryOwner", reg_ns, &has_ns, err))) return rc;
  xgr_permit permit;
  if ((rc = xgr__rpc_control_caller(caller, o, owner, who, sizeof who, &permit, err))) return rc;
  const char *actor = xgr_rpc_actor(caller, permit.kind ? permit.from : who[0] ? who : owner);
  xgr_rpc_log_subject(caller, actor, owner, root);
  bool delegated;   /* an operator's fork (xgr_node_access CONTROL, as for kill) */
  if ((rc = xgr__rpc_control_access(d, caller, &permit, owner, root, &delegated, err))) return rc;
  if (permit.kind && (rc = xgr__rpc_check_control(&permit, "fork", root, NULL, owner, delegated, err))) return rc;
  xgr_node_fork_src src;
  if ((rc = xgr_node_fork_source(d->n, owner, root, iter, step, !payload, &src, err))) return xgr__rpc_code(rc, err);
  char key[XGR__RPC_KEY_SIZE], pin[67] = "";
  if (strlen(src.registry) > XGR__RPC_MAX_REGISTRY || strlen(src.ostc_id) > XGR__RPC_MAX_OSTC_ID) {
    xgr_node_fork_src_clear(&src);
    return xgr__rpc_fail(err, XGR_EINVAL, "sessionId", "the session's registry name is too long to start from");
  }
  xgr__rpc_registry_key(key, src.registry, src.ostc_id[0] ? src.ostc_id : NULL);
  if (version) {   /* a version of the source's orchestration: its hash is the pin */
    xgr_store_doc doc;
    if ((rc = xgr_node_doc_in(d->n, XGR_REG_ORCHESTRATION, has_ns ? reg_ns : owner, true, key, version, &doc, err))) {
      xgr_node_fork_src_clear(&src);
      if (rc == XGR_ENOTFOUND) xgr_error_set(err, rc, "version", "orchestration %s has no version %u", key, version);
      return xgr__rpc_code(rc, err);
    }
    snprintf(pin, sizeof pin, "%s", doc.hash);
    xgr_node_doc_clear(&doc);
  } else {
    snprintf(pin, sizeof pin, "%s", hash ? hash : src.bundle_hash);
  }
  if (permit.kind && (rc = xgr_auth_consume(caller->auth, &permit, err))) {   /* used up once the request holds */
    xgr_node_fork_src_clear(&src);
    return rc;
  }
  char digest[67] = "";
  if (permit.kind) xgr_hex_encode(permit.digest, 32, digest);
  /* the record (forked_from, both audit entries) goes out with the new session's row, in one commit */
  xgr_node_fork_rec fr = {.owner = owner, .root = root, .src = &src, .payload_given = payload != NULL, .actor = actor,
                          .permit = digest[0] ? digest : NULL};
  xgr_node_enqueue_req rq = {.owner = owner, .root = new_root, .reg_key = key, .reg_ns = has_ns ? reg_ns : NULL,
                             .registry = src.registry, .reg_path = "sessionId", .ostc_hash = pin[0] ? pin : NULL,
                             .step = src.step_id, .step_path = iter ? "pid" : "stepId",
                             .payload_path = "payload", .payload = payload ? payload : src.payload,
                             .ostc_id = src.ostc_id[0] ? src.ostc_id : NULL, .who = who,
                             .traceparent = caller->traceparent, .fork = &fr};
  xgr_node_ack a;
  char hash_of[67], bundle_of[67];
  rc = start_session(d, &rq, NULL, NULL, NULL, &a, &new_root, hash_of, bundle_of, err);
  if (rc) {
    xgr_node_fork_src_clear(&src);
    return rc;
  }
  json_t *from = json_pack("{s:s, s:o, s:o, s:s, s:s}", "owner", owner, "rootPid", xgr__rpc_u64_json(root), "pid",
                           xgr__rpc_pid_json(root, src.iter), "step", src.step_id, "bundleHash", src.bundle_hash);
  xgr_node_fork_src_clear(&src);
  *result = enqueue_answer(d, a, owner, new_root, hash_of, bundle_of);
  json_object_set_new(*result, "forkedFrom", from);
  return 0;
}
