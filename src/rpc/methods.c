/* methods.c — xgrd's service: the JSON-RPC methods of docs/RPC.md on top of the engine and the
 * store (xgr/rpc.h, "xgrd" section).
 *
 * Both naming styles reach the same code: the seed-001 names (`xgr.enqueue`, `xgr.listSessions`,
 * ...) and the public reference's (`xgr_validateDataTransfer`, `xgr_listSessions`, ...); every
 * method is registered under `xgr.<name>` and `xgr_<name>`. Named parameters come as an object
 * or as a one-element array holding it (`params[0]`); `xgr_stepExecuted` and `xgr_sessionAlive`
 * also take their positional arrays.
 *
 * Registries. Orchestrations are stored under "<registry>/<ostcId>" and, as the registry's
 * current orchestration, under "<registry>" (registry = the XRC-729 address given as `xrc729`,
 * `registry` or `orchestration`, lowercased; "local" when none). Their exact bytes are what is
 * hashed. Rules are stored under their address (lowercased) or alias. A session runs a bundle
 * assembled from the orchestration's bytes and the registered rules (xgr_bundle_assemble); bundles
 * are cached per registry key and rules generation and live as long as the service (the engine
 * borrows them).
 *
 * Starting a session (enqueue, validateDataTransfer) is durable before it is answered: the
 * session row and its start process are committed (group commit with every other writer) and
 * only then is the session handed to the engine, whose batches carry it on. A pinned `ostcHash`
 * that differs from the registered content is refused before anything is written. Starts of one
 * (owner, rootPid) are serialised by a striped lock, so a second enqueue sees the first.
 *
 * Listing reads the store (what is committed): a session's processes from proc_rt with their join
 * state, in the join view of seed 001 §2.2 or the raw rows of the public reference. Without a
 * rootPid the owner's newest sessions come from the store's sessions table (xgr_store_sessions),
 * so sessions of earlier xgrd processes are listed too.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "rpc/rpcd.h"
#include "xgr/bundle.h"
#include "xgr/engine.h"
#include "xgr/rpc.h"
#include "xgr/store.h"
#include "xgr/xrc_types.h"

#define STRIPES 64
#define LIST_MAX 10000
#define LIST_SCAN_SESSIONS 1000

/* A cached bundle of a registry key. */
typedef struct regent {
  struct regent *next;
  char *key;
  uint64_t gen;
  const xgr_bundle *b;
} regent;

/* Every bundle ever assembled (the engine borrows them until it is freed). */
typedef struct bnode {
  struct bnode *next;
  xgr_bundle *b;
} bnode;

/* validateDataTransfer waiting for the first step of a session. */
typedef struct waiter {
  struct waiter *next;
  char owner[64];
  uint64_t root;
  bool done;
  uint8_t status;
  int8_t valid;
  json_t *payload;
  json_t *output;              /* the first step's outcome payload (XGR_EEV_STEP), or NULL */
  uint8_t action;              /* its rule action */
  char *error;
} waiter;

/* A writing method and its service (the guard's context). */
typedef struct guard {
  struct xgr_rpcd *d;
  xgr_rpc_method_fn fn;
} guard;

struct xgr_rpcd {
  xgr_rpcd_config cfg;
  xgr_store *st;
  xgr_persist *p;
  xgr_engine *e;
  atomic_bool ready, stopping;
  atomic_bool store_down;      /* the store failed (logged once) */
  pthread_mutex_t reg_mu;
  regent *regs;
  bnode *bundles;
  atomic_uint_fast64_t rules_gen;
  pthread_mutex_t stripe[STRIPES];
  pthread_mutex_t w_mu;
  pthread_cond_t w_cv;
  waiter *waiters;
  atomic_int nwaiters;
  size_t restored, failed;
  xgr_counter *c_enq[4];
  char names[48][40];          /* method names registered on the server (borrowed by it) */
  guard guards[24];            /* contexts of the guarded (writing) methods */
};

static const char *const ack_names[] = {"queued", "already_queued", "paused", "scheduled"};

/* ---- small helpers -------------------------------------------------------------------------- */

static void logf_(xgr_rpcd *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(xgr_rpcd *d, const char *fmt, ...) {
  if (!d->cfg.log) return;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char t[32];
  strftime(t, sizeof t, "%Y-%m-%dT%H:%M:%S", &tm);
  va_list ap;
  va_start(ap, fmt);
  flockfile(d->cfg.log);
  fprintf(d->cfg.log, "ts=%s.%03ldZ ", t, ts.tv_nsec / 1000000);
  vfprintf(d->cfg.log, fmt, ap);
  fputc('\n', d->cfg.log);
  fflush(d->cfg.log);
  funlockfile(d->cfg.log);
  va_end(ap);
}

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void lower(char *s) {
  for (; *s; s++) *s = (char)tolower((unsigned char)*s);
}

static uint64_t hash_str(const char *s, uint64_t h) {
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static json_t *pid_json(uint64_t root, uint64_t iter) {
  char b[48];
  xgr_pid_format(root, iter, b, sizeof b);
  return json_string(b);
}

static json_t *u64_str(uint64_t v) {
  char b[24];
  snprintf(b, sizeof b, "%llu", (unsigned long long)v);
  return json_string(b);
}

/* A uint64 from an integer or a decimal string (rootPid, sessionId, iteration). */
static int get_u64(const json_t *v, const char *path, uint64_t *out, xgr_error *err) {
  if (json_is_integer(v) && json_integer_value(v) >= 0) {
    *out = (uint64_t)json_integer_value(v);
    return 0;
  }
  if (json_is_string(v)) {
    const char *s = json_string_value(v);
    char *end;
    if (*s >= '0' && *s <= '9') {
      unsigned long long u = strtoull(s, &end, 10);
      if (!*end) {
        *out = u;
        return 0;
      }
    }
  }
  char *t = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
  xgr_error_set(err, XGR_ESCHEMA, path, "is %.60s; expected a non-negative integer or its decimal string",
                t ? t : "missing");
  free(t);
  return XGR_RPC_INVALID_PARAMS;
}

/* Optional string field (null counts as absent). */
static int opt_str(const json_t *o, const char *key, const char **out, xgr_error *err) {
  return xgr_rpc_param_string(o, key, false, out, err);
}

/* The first of several alias keys that is present. */
static const char *first_key(const json_t *o, const char *const *keys) {
  for (; *keys; keys++) {
    const json_t *v = json_object_get(o, *keys);
    if (v && !json_is_null(v)) return *keys;
  }
  return keys[-1];
}

static int rpc_err(int rc, xgr_error *err) {
  if (!err->message[0]) xgr_error_set(err, rc, err->path, "%s", xgr_errcode_name(rc));
  return xgr_rpc_code_for(rc);
}

/* ---- registries and bundles ---------------------------------------------------------------- */

static int rule_lookup(void *ctx, const char *key, char **bytes, size_t *len, xgr_error *err) {
  xgr_rpcd *d = ctx;
  xgr_store_doc doc = {0};
  int rc = xgr_store_doc_get(d->st, XGR_REG_RULE, key, 0, &doc, err);
  if (rc) return rc;
  *bytes = doc.content;
  *len = doc.len;
  doc.content = NULL;
  xgr_store_doc_clear(&doc);
  return 0;
}

/* Assemble (or take from the cache) the bundle of registry key `key` ("<reg>/<ostcId>", "<reg>"
 * or "#<hash>"). *hash gets the orchestration's hash. */
static int bundle_for(xgr_rpcd *d, const char *key, const xgr_bundle **out, const char *path, xgr_error *err) {
  uint64_t gen = atomic_load(&d->rules_gen);
  pthread_mutex_lock(&d->reg_mu);
  for (regent *r = d->regs; r; r = r->next)
    if (r->gen == gen && !strcmp(r->key, key)) {
      *out = r->b;
      pthread_mutex_unlock(&d->reg_mu);
      return 0;
    }
  pthread_mutex_unlock(&d->reg_mu);
  xgr_store_doc doc = {0};
  int rc = key[0] == '#' ? xgr_store_doc_by_hash(d->st, XGR_REG_ORCHESTRATION, key + 1, &doc, err)
                         : xgr_store_doc_get(d->st, XGR_REG_ORCHESTRATION, key, 0, &doc, err);
  if (rc) {
    if (rc == XGR_ENOTFOUND)
      xgr_error_set(err, rc, path, "no orchestration is registered under \"%s\" (register it with xgr.putOrchestration)",
                    key[0] == '#' ? key + 1 : key);
    return rc;
  }
  xgr_bundle *b = NULL;
  rc = xgr_bundle_assemble(doc.content, doc.len, rule_lookup, d, &b, err);
  xgr_store_doc_clear(&doc);
  if (rc) return rc;
  regent *r = calloc(1, sizeof *r);
  bnode *bn = calloc(1, sizeof *bn);
  if (!r || !bn) abort();
  r->key = strdup(key);
  r->gen = gen;
  r->b = b;
  bn->b = b;
  pthread_mutex_lock(&d->reg_mu);
  bn->next = d->bundles;
  d->bundles = bn;
  /* replace an older entry of the same key */
  for (regent **pp = &d->regs; *pp; pp = &(*pp)->next)
    if (!strcmp((*pp)->key, key)) {
      regent *old = *pp;
      *pp = old->next;
      free(old->key);
      free(old);
      break;
    }
  r->next = d->regs;
  d->regs = r;
  pthread_mutex_unlock(&d->reg_mu);
  *out = b;
  return 0;
}

static void invalidate(xgr_rpcd *d, const char *key) {
  pthread_mutex_lock(&d->reg_mu);
  for (regent **pp = &d->regs; *pp; pp = &(*pp)->next)
    if (!strcmp((*pp)->key, key)) {
      regent *old = *pp;
      *pp = old->next;
      free(old->key);
      free(old);
      break;
    }
  pthread_mutex_unlock(&d->reg_mu);
}

/* The registry name of a request (lowercased) into reg, and the path it came from. */
static int registry_of(const json_t *o, char *reg, size_t n, const char **path, xgr_error *err) {
  static const char *const keys[] = {"xrc729", "registry", NULL};
  const char *k = first_key(o, keys);
  const char *v;
  int rc = opt_str(o, k, &v, err);
  if (rc) return rc;
  *path = k;
  if (!v || !*v) v = "local";
  if (strlen(v) >= n || strchr(v, '/') || strchr(v, '#'))
    return xgr_error_set(err, XGR_ESCHEMA, k, "is \"%.80s\"; expected an XRC-729 address (0x + 40 hex) or a name "
                         "without '/' or '#' (at most %zu bytes)", v, n - 1), XGR_RPC_INVALID_PARAMS;
  snprintf(reg, n, "%s", v);
  lower(reg);
  return 0;
}

/* ---- waiting for a first step (validateDataTransfer) ------------------------------------------- */

/* The store refused a batch: log it once and wake every validateDataTransfer waiting for a first
 * step (they answer "unavailable"). Writing methods are refused from now on (guarded()). */
static void on_store_error(xgr_rpcd *d, const xgr_engine_event *ev) {
  if (atomic_exchange(&d->store_down, true)) return;
  xgr_error e;
  xgr_error_clear(&e);
  if (!xgr_store_failed(d->st, &e)) snprintf(e.message, sizeof e.message, "%s", ev->message ? ev->message : "?");
  logf_(d, "level=error msg=\"the store failed: xgrd refuses every write from now on and keeps what was committed; "
           "fix the store and restart xgrd\" owner=%s rootPid=%llu error=\"%s\"", ev->owner,
        (unsigned long long)ev->root_pid, e.message);
  pthread_mutex_lock(&d->w_mu);
  pthread_cond_broadcast(&d->w_cv);
  pthread_mutex_unlock(&d->w_mu);
}

static void on_event(void *ctx, const xgr_engine_event *ev) {
  xgr_rpcd *d = ctx;
  if (ev->kind == XGR_EEV_STORE_ERROR) {
    on_store_error(d, ev);
    return;
  }
  if (ev->kind == XGR_EEV_STEP) {   /* the first step's outcome payload, before its PROC event */
    if (ev->iter != 1 || !atomic_load(&d->nwaiters)) return;
    pthread_mutex_lock(&d->w_mu);
    for (waiter *w = d->waiters; w; w = w->next)
      if (!w->done && !w->output && w->root == ev->root_pid && !strcmp(w->owner, ev->owner)) {
        w->output = xgr_value_to_json(ev->output);
        w->action = ev->rule_action;
      }
    pthread_mutex_unlock(&d->w_mu);
    return;
  }
  if (ev->kind != XGR_EEV_PROC || !ev->proc || ev->proc->iter != 1 || !atomic_load(&d->nwaiters)) return;
  if (ev->proc->status != XGR_PROC_DONE && ev->proc->status != XGR_PROC_ABORTED) return;
  pthread_mutex_lock(&d->w_mu);
  for (waiter *w = d->waiters; w; w = w->next)
    if (!w->done && w->root == ev->root_pid && !strcmp(w->owner, ev->owner)) {
      w->done = true;
      w->status = ev->proc->status;
      w->valid = ev->proc->valid;
      w->payload = xgr_value_to_json(ev->proc->payload);
      w->error = ev->proc->error ? strdup(ev->proc->error) : NULL;
      pthread_cond_broadcast(&d->w_cv);
    }
  pthread_mutex_unlock(&d->w_mu);
}

/* ---- starting sessions --------------------------------------------------------------------------- */

typedef struct start_req {
  const char *owner;           /* lowercased address */
  uint64_t root;               /* 0: allocate */
  const char *reg_key;         /* registry key */
  const char *registry;        /* the registry name recorded on the session */
  const char *reg_path;        /* parameter path of the registry */
  const char *ostc_hash;       /* pin or NULL */
  const char *step;            /* start step or NULL (the orchestration's first step) */
  const char *step_path, *payload_path;
  const json_t *payload;       /* object or NULL */
  waiter *w;                   /* validateDataTransfer */
} start_req;

typedef enum ack { ACK_QUEUED = 0, ACK_ALREADY, ACK_PAUSED, ACK_SCHEDULED } ack;

/* The ack for a session that exists already. */
static ack existing_ack(xgr_rpcd *d, const char *owner, uint64_t root, bool paused) {
  if (paused) return ACK_PAUSED;
  xgr_store_proc *ps = NULL;
  size_t n = 0;
  xgr_error e;
  ack a = ACK_ALREADY;
  if (!xgr_store_procs(d->st, owner, root, &ps, &n, &e)) {
    bool live = false, running = false, all_paused = true;
    int64_t now = xgr_engine_now(d->e), due = INT64_MAX;
    for (size_t i = 0; i < n; i++) {
      if (ps[i].status == XGR_PROC_RUNNING) running = true;
      if (ps[i].status == XGR_PROC_WAITING || ps[i].status == XGR_PROC_RUNNING) {
        live = true;
        if (!ps[i].paused) all_paused = false;
        if (ps[i].status == XGR_PROC_WAITING && ps[i].next_wake_at < due) due = ps[i].next_wake_at;
      }
    }
    if (live && all_paused) a = ACK_PAUSED;
    else if (live && !running && due != INT64_MAX && due > now) a = ACK_SCHEDULED;
    xgr_store_procs_free(ps, n);
  }
  return a;
}

/* The answer for a session the store has already: its ack while it runs, else a conflict (a
 * rootPid is used once). */
static int stored_ack(xgr_rpcd *d, const char *owner, uint64_t root, ack *out_ack, xgr_error *err) {
  xgr_store_session row = {0};
  int rc = xgr_store_session_get(d->st, owner, root, &row, err);
  if (rc && rc != XGR_ENOTFOUND) return rpc_err(rc, err);
  bool running = !rc && row.status == XGR_RESULT_RUNNING, paused = !rc && row.paused;
  const char *st = rc ? "gone" : xgr_session_result_name((xgr_session_result)row.status);
  xgr_store_session_clear(&row);
  xgr_error_clear(err);
  if (running) {
    *out_ack = existing_ack(d, owner, root, paused);
    return 0;
  }
  return xgr_error_set(err, XGR_ECONFLICT, "rootPid", "session %s/%llu exists and is %s; a rootPid is used once", owner,
                       (unsigned long long)root, st),
         XGR_RPC_CONFLICT;
}

static int start_session(xgr_rpcd *d, start_req *rq, ack *out_ack, uint64_t *out_root, const xgr_bundle **out_b,
                         xgr_error *err) {
  if (atomic_load(&d->stopping))
    return xgr_error_set(err, XGR_EIO, NULL, "xgrd is shutting down"), XGR_RPC_UNAVAILABLE;
  const xgr_bundle *b = NULL;
  int rc = bundle_for(d, rq->reg_key, &b, rq->reg_path, err);
  if (rc) return rpc_err(rc, err);
  *out_b = b;
  if (rq->ostc_hash && strcasecmp(rq->ostc_hash, b->orch->hash))
    return xgr_error_set(err, XGR_EMISMATCH, "ostcHash",
                         "registry mismatch: ostcHash is %.80s but the orchestration registered under \"%s\" hashes to %s",
                         rq->ostc_hash, rq->reg_key, b->orch->hash),
           XGR_RPC_REGISTRY_MISMATCH;
  const char *step = rq->step ? rq->step : b->orch->nsteps ? b->orch->steps[0].id : "";
  int si = xgr_orch_find(b->orch, step);
  if (si < 0)
    return xgr_error_set(err, XGR_ENOTFOUND, rq->step_path, "step \"%.80s\" is not a step of orchestration \"%s\"", step,
                         b->orch->id),
           XGR_RPC_INVALID_PARAMS;
  xgr_value payload = xgr_value_null();
  if (rq->payload) {
    if (!json_is_object(rq->payload))
      return xgr_error_set(err, XGR_ESCHEMA, rq->payload_path, "is not an object; expected the step's input payload {...}"),
             XGR_RPC_INVALID_PARAMS;
    xgr_value_from_json(rq->payload, 0, &payload, err);
    if (xgr_value_check_list_cap(payload, 64, err)) {
      xgr_value_release(payload);
      snprintf(err->path, sizeof err->path, "%s", rq->payload_path);
      return XGR_RPC_LIMITS_EXCEEDED;
    }
  }
  uint64_t root = rq->root;
  if (!root && (rc = xgr_store_next_process_id(d->st, rq->owner, &root, err))) {
    xgr_value_release(payload);
    return rpc_err(rc, err);
  }
  *out_root = root;
  pthread_mutex_t *mu = &d->stripe[hash_str(rq->owner, root * 0x9E3779B97F4A7C15ull) % STRIPES];
  pthread_mutex_lock(mu);
  /* a live session? (one the store has but the engine does not run is found by the commit) */
  xgr_engine_session_info info;
  if (!xgr_engine_session(d->e, rq->owner, root, &info) && !info.finished) {
    pthread_mutex_unlock(mu);
    xgr_value_release(payload);
    *out_ack = existing_ack(d, rq->owner, root, false);
    return 0;
  }
  /* durable first: the session row and its start process, in one batch; the row is inserted only
   * if the store has none, so the existence check costs no read of its own */
  int64_t now = xgr_engine_now(d->e);
  xgr_session *core = xgr_session_new(b->orch, rq->owner, root, NULL);
  xgr_effects fx;
  xgr_effects_init(&fx);
  rc = xgr_session_start(core, (unsigned)si, payload, now, &fx, err);
  if (rc) {
    xgr_effects_free(&fx);
    xgr_session_free(core);
    pthread_mutex_unlock(mu);
    xgr_value_release(payload);
    if (!err->path[0]) snprintf(err->path, sizeof err->path, "%s", rq->payload_path);
    return rpc_err(rc, err);
  }
  xgr_store_changes *c = xgr_store_changes_new();
  xgr_store_changes_add_session_new(c, core, rq->registry);
  xgr_store_changes_add_effects(c, core, &fx);
  xgr_session_state ss;
  xgr_session_state_get(core, &ss);
  xgr_effects_free(&fx);
  xgr_session_free(core);
  rc = xgr_store_commit(d->st, c, err);
  if (rc == XGR_ECONFLICT) {   /* the store has this session: nothing was written */
    pthread_mutex_unlock(mu);
    xgr_value_release(payload);
    xgr_error_clear(err);
    return stored_ack(d, rq->owner, root, out_ack, err);
  }
  if (rc) {
    pthread_mutex_unlock(mu);
    xgr_value_release(payload);
    return rpc_err(rc, err);
  }
  xgr_persist_track(d->p, rq->owner, root, ss.next_iter, ss.next_group, ss.paused);
  if (rq->w) {
    snprintf(rq->w->owner, sizeof rq->w->owner, "%s", rq->owner);
    rq->w->root = root;
    pthread_mutex_lock(&d->w_mu);
    rq->w->next = d->waiters;
    d->waiters = rq->w;
    atomic_fetch_add(&d->nwaiters, 1);
    pthread_mutex_unlock(&d->w_mu);
  }
  xgr_engine_start sr = {.bundle = b, .owner = rq->owner, .root_pid = root, .start = step, .payload = payload,
                         .start_committed = true};   /* the batch above holds the start process */
  rc = xgr_engine_start_session(d->e, &sr, err);
  pthread_mutex_unlock(mu);
  xgr_value_release(payload);
  if (rc) {
    /* committed but not running: recovery picks it up at the next start */
    logf_(d, "level=warn msg=\"session committed but not started\" owner=%s rootPid=%llu error=\"%s\"", rq->owner,
          (unsigned long long)root, err->message);
    return rpc_err(rc == XGR_ESTATE ? XGR_EIO : rc, err);
  }
  *out_ack = ACK_QUEUED;
  return 0;
}

static void waiter_remove(xgr_rpcd *d, waiter *w) {
  pthread_mutex_lock(&d->w_mu);
  for (waiter **pp = &d->waiters; *pp; pp = &(*pp)->next)
    if (*pp == w) {
      *pp = w->next;
      atomic_fetch_sub(&d->nwaiters, 1);
      break;
    }
  pthread_mutex_unlock(&d->w_mu);
}

/* ---- methods ------------------------------------------------------------------------------------ */

#define METHOD(name) static int name(void *ctx, const xgr_rpc_caller *caller, const json_t *params, json_t **result, xgr_error *err)

/* Named parameters (object or [object]); *o is an empty object's stand-in when absent. */
static int named(const json_t *params, const json_t **o, xgr_error *err) {
  return xgr_rpc_params_object(params, o, err);
}

/* owner of the request: "owner" (or "runner"), else the caller's identity. */
static int owner_param(const json_t *o, const char *who, char *owner, size_t n, const char **path, xgr_error *err) {
  static const char *const keys[] = {"owner", "runner", NULL};
  const char *k = first_key(o, keys), *v;
  int rc = opt_str(o, k, &v, err);
  if (rc) return rc;
  *path = k;
  if (!v) v = who;
  if (!v || !*v)
    return xgr_error_set(err, XGR_ESCHEMA, "owner", "missing; expected the owner's address (0x + 40 hex)"),
           XGR_RPC_INVALID_PARAMS;
  if (!xgr_rpc_is_address(v))
    return xgr_error_set(err, XGR_ESCHEMA, k, "is \"%.80s\"; expected an address (0x + 40 hex)", v), XGR_RPC_INVALID_PARAMS;
  snprintf(owner, n, "%s", v);
  lower(owner);
  return 0;
}

METHOD(m_enqueue) {
  xgr_rpcd *d = ctx;
  const json_t *o;
  int rc = named(params, &o, err);
  if (rc) return rc;
  char who[64] = "", owner[64], reg[96], key[200];
  const char *opath, *rpath, *ostc_id = NULL, *hash = NULL, *step = NULL;
  if ((rc = owner_param(o, json_string_value(json_object_get(o, "from")), owner, sizeof owner, &opath, err))) return rc;
  if ((rc = xgr_rpc_authorize(caller, o, XGR_RPC_ACT_START, owner, who, sizeof who, err))) return rc;
  if ((rc = registry_of(o, reg, sizeof reg, &rpath, err))) return rc;
  if ((rc = opt_str(o, "ostcId", &ostc_id, err)) || (rc = opt_str(o, "ostcHash", &hash, err))) return rc;
  uint64_t root = 0;
  const json_t *rv = json_object_get(o, "rootPid");
  if (rv && !json_is_null(rv) && (rc = get_u64(rv, "rootPid", &root, err))) return rc;
  const json_t *init = NULL, *payload = NULL;
  if ((rc = xgr_rpc_param_object(o, "init", false, &init, err))) return rc;
  if (init) {
    const json_t *sv = json_object_get(init, "stepId");
    if (sv && !json_is_string(sv))
      return xgr_error_set(err, XGR_ESCHEMA, "init.stepId", "is not a string; expected a step id"), XGR_RPC_INVALID_PARAMS;
    step = json_string_value(sv);
    payload = json_object_get(init, "payload");
    if (json_is_null(payload)) payload = NULL;
  }
  if (ostc_id && (strchr(ostc_id, '/') || strlen(ostc_id) > 96))
    return xgr_error_set(err, XGR_ESCHEMA, "ostcId", "is \"%.60s\"; expected an id without '/' (at most 96 bytes)", ostc_id),
           XGR_RPC_INVALID_PARAMS;
  if (ostc_id) snprintf(key, sizeof key, "%s/%s", reg, ostc_id);
  else snprintf(key, sizeof key, "%s", reg);
  start_req rq = {.owner = owner, .root = root, .reg_key = key, .registry = reg, .reg_path = ostc_id ? "ostcId" : rpath,
                  .ostc_hash = hash, .step = step, .step_path = "init.stepId", .payload_path = "init.payload",
                  .payload = payload};
  ack a;
  const xgr_bundle *b = NULL;
  if ((rc = start_session(d, &rq, &a, &root, &b, err))) return rc;
  xgr_counter_add(d->c_enq[a], 1);
  *result = json_pack("{s:s, s:s, s:o, s:o, s:s}", "ack", ack_names[a], "owner", owner, "rootPid", u64_str(root), "pid",
                      pid_json(root, 1), "ostcHash", b->orch->hash);
  return 0;
}

METHOD(m_validate) {
  xgr_rpcd *d = ctx;
  const json_t *o;
  int rc = named(params, &o, err);
  if (rc) return rc;
  char who[64] = "", owner[64], reg[96], key[200];
  const char *opath, *step = NULL, *ostc_id = NULL, *hash = NULL;
  static const char *const from_keys[] = {"from", "owner", NULL};
  const char *fk = first_key(o, from_keys);
  if ((rc = owner_param(o, json_string_value(json_object_get(o, fk)), owner, sizeof owner, &opath, err))) return rc;
  if ((rc = xgr_rpc_authorize(caller, o, XGR_RPC_ACT_START, owner, who, sizeof who, err))) return rc;
  if ((rc = xgr_rpc_param_string(o, "stepId", true, &step, err))) return rc;
  const char *orch;
  if ((rc = xgr_rpc_param_string(o, "orchestration", true, &orch, err))) return rc;
  if (!*orch || strlen(orch) >= sizeof reg || strchr(orch, '/') || strchr(orch, '#'))
    return xgr_error_set(err, XGR_ESCHEMA, "orchestration", "is \"%.80s\"; expected the XRC-729 address", orch),
           XGR_RPC_INVALID_PARAMS;
  snprintf(reg, sizeof reg, "%s", orch);
  lower(reg);
  if ((rc = opt_str(o, "ostcId", &ostc_id, err)) || (rc = opt_str(o, "ostcHash", &hash, err))) return rc;
  if (ostc_id) snprintf(key, sizeof key, "%s/%.96s", reg, ostc_id);
  else snprintf(key, sizeof key, "%s", reg);
  uint64_t root = 0;
  static const char *const sid_keys[] = {"sessionId", "rootPid", NULL};
  const char *sk = first_key(o, sid_keys);
  const json_t *rv = json_object_get(o, sk);
  if (rv && !json_is_null(rv) && (rc = get_u64(rv, sk, &root, err))) return rc;
  const json_t *payload = json_object_get(o, "payload");
  if (json_is_null(payload)) payload = NULL;
  waiter *w = calloc(1, sizeof *w);
  if (!w) abort();
  start_req rq = {.owner = owner, .root = root, .reg_key = key, .registry = reg, .reg_path = "orchestration",
                  .ostc_hash = hash, .step = step, .step_path = "stepId", .payload_path = "payload", .payload = payload,
                  .w = w};
  ack a = ACK_QUEUED;
  const xgr_bundle *b = NULL;
  rc = start_session(d, &rq, &a, &root, &b, err);
  if (rc || a != ACK_QUEUED) {
    if (w->root) waiter_remove(d, w);   /* registered (also when the engine refused the start) */
    json_decref(w->output);
    free(w->error);
    json_decref(w->payload);
    free(w);
    if (rc) return rc;
    return xgr_error_set(err, XGR_ECONFLICT, sk, "session %s/%llu exists already (%s)", owner, (unsigned long long)root,
                         ack_names[a]),
           XGR_RPC_CONFLICT;
  }
  xgr_counter_add(d->c_enq[ACK_QUEUED], 1);
  long tmo = d->cfg.first_step_timeout_ms > 0 ? d->cfg.first_step_timeout_ms : 10000;
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl);
  dl.tv_sec += tmo / 1000;
  dl.tv_nsec += (tmo % 1000) * 1000000L;
  if (dl.tv_nsec >= 1000000000L) {
    dl.tv_sec++;
    dl.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&d->w_mu);
  while (!w->done && !atomic_load(&d->stopping) && !atomic_load(&d->store_down))
    if (pthread_cond_timedwait(&d->w_cv, &d->w_mu, &dl)) break;
  pthread_mutex_unlock(&d->w_mu);
  waiter_remove(d, w);
  if (!w->done && atomic_load(&d->store_down)) {
    json_decref(w->output);
    free(w);
    xgr_error se;
    xgr_store_failed(d->st, &se);
    return xgr_error_set(err, XGR_EIO, NULL, "the store failed before the first step was committed: %s", se.message),
           XGR_RPC_UNAVAILABLE;
  }
  json_t *r = json_pack("{s:o, s:o, s:s, s:s}", "processId", pid_json(root, 1), "sessionId", u64_str(root), "ruleAction",
                        w->done && w->action ? xgr_rule_action_name((xgr_rule_action)w->action) : "", "ostcHash",
                        b->orch->hash);
  if (w->done) {
    json_object_set_new(r, "status", json_string(xgr_proc_status_name((xgr_proc_status)w->status)));
    json_object_set_new(r, "finalResult", w->valid < 0 ? json_null() : json_boolean(w->valid));
    json_object_set_new(r, "payload", w->payload ? w->payload : json_null());
    json_object_set_new(r, "outputPayload", w->output ? w->output : json_null());
    w->output = NULL;
    if (w->error) json_object_set_new(r, "error", json_string(w->error));
    json_object_set_new(r, "executedSteps",
                        json_pack("[{s:o, s:s, s:o, s:s}]", "pid", pid_json(root, 1), "stepId", step, "valid",
                                  w->valid < 0 ? json_null() : json_boolean(w->valid), "status",
                                  xgr_proc_status_name((xgr_proc_status)w->status)));
  } else {
    json_object_set_new(r, "status", json_string("running"));
    json_object_set_new(r, "finalResult", json_null());
    json_object_set_new(r, "payload", json_null());
    json_object_set_new(r, "outputPayload", json_null());
    json_object_set_new(r, "executedSteps", json_array());
  }
  json_decref(w->output);
  free(w->error);
  free(w);
  *result = r;
  return 0;
}

METHOD(m_next_pid) {
  xgr_rpcd *d = ctx;
  const json_t *o;
  int rc = named(params, &o, err);
  if (rc) return rc;
  char who[64] = "";
  if ((rc = xgr_rpc_authorize(caller, o, XGR_RPC_ACT_READ, NULL, who, sizeof who, err))) return rc;
  if (!who[0]) return xgr_error_set(err, XGR_ESCHEMA, "from", "missing; expected the sender's address (0x + 40 hex)"),
                      XGR_RPC_INVALID_PARAMS;
  uint64_t root;   /* the next expected rootPid (public reference §6): read, not taken */
  if ((rc = xgr_store_peek_process_id(d->st, who, &root, err))) return rpc_err(rc, err);
  *result = json_pack("{s:o}", "nextProcessId", u64_str(root));
  return 0;
}

/* Parse a target: "pid" ("R:I" or "R") or "rootPid"/"sessionId". */
static int target(const json_t *o, uint64_t *root, uint64_t *iter, const char **path, xgr_error *err) {
  static const char *const keys[] = {"pid", "processId", "rootPid", "sessionId", NULL};
  const char *k = first_key(o, keys);
  const json_t *v = json_object_get(o, k);
  *path = k;
  *iter = 0;
  if (!v || json_is_null(v))
    return xgr_error_set(err, XGR_ESCHEMA, "pid", "missing; expected \"pid\" (\"<rootPid>:<iter>\" or \"<rootPid>\") or "
                         "\"rootPid\""),
           XGR_RPC_INVALID_PARAMS;
  if (!strcmp(k, "pid") || !strcmp(k, "processId")) {
    if (json_is_integer(v)) return get_u64(v, k, root, err);
    if (!json_is_string(v) || xgr_pid_parse(json_string_value(v), root, iter) || !*root) {
      char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
      xgr_error_set(err, XGR_ESCHEMA, k, "is %.60s; expected \"<rootPid>:<iter>\" or \"<rootPid>\"", t ? t : "?");
      free(t);
      return XGR_RPC_INVALID_PARAMS;
    }
    return 0;
  }
  return get_u64(v, k, root, err);
}

typedef enum ctl_kind { C_KILL, C_PAUSE, C_RESUME } ctl_kind;

static int control(xgr_rpcd *d, const xgr_rpc_caller *caller, const json_t *params, ctl_kind kind, json_t **result,
                   xgr_error *err) {
  const json_t *o;
  int rc = named(params, &o, err);
  if (rc) return rc;
  char who[64] = "", owner[64];
  const char *opath, *tpath;
  if ((rc = owner_param(o, json_string_value(json_object_get(o, "from")), owner, sizeof owner, &opath, err))) return rc;
  if ((rc = xgr_rpc_authorize(caller, o, XGR_RPC_ACT_CONTROL, owner, who, sizeof who, err))) return rc;
  uint64_t root, iter;
  if ((rc = target(o, &root, &iter, &tpath, err))) return rc;
  if (kind == C_KILL) {
    rc = xgr_engine_kill(d->e, owner, root, iter, err);
  } else {
    if (!iter) xgr_persist_set_paused(d->p, owner, root, kind == C_PAUSE);
    rc = xgr_engine_pause(d->e, owner, root, iter, kind == C_PAUSE, err);
  }
  if (rc) {
    if (rc == XGR_ENOTFOUND && !err->path[0]) snprintf(err->path, sizeof err->path, "%s", tpath);
    return rpc_err(rc, err);
  }
  *result = json_pack("{s:b, s:s, s:o}", "ok", 1, "owner", owner, "pid", pid_json(root, iter));
  return 0;
}

METHOD(m_kill) { return control(ctx, caller, params, C_KILL, result, err); }
METHOD(m_pause) { return control(ctx, caller, params, C_PAUSE, result, err); }
METHOD(m_resume) { return control(ctx, caller, params, C_RESUME, result, err); }

METHOD(m_control) {
  xgr_rpcd *d = ctx;
  const json_t *o;
  int rc = named(params, &o, err);
  if (rc) return rc;
  const char *action = NULL;
  if ((rc = opt_str(o, "action", &action, err))) return rc;
  if (action && strcmp(action, "kill"))
    return xgr_error_set(err, XGR_EUNSUPPORTED, "action", "is \"%.40s\"; only \"kill\" is supported (pause and resume "
                         "are xgr.pause / xgr.resume)", action),
           XGR_RPC_INVALID_PARAMS;
  char who[64] = "", owner[64];
  const char *opath, *tpath;
  if ((rc = owner_param(o, json_string_value(json_object_get(o, "from")), owner, sizeof owner, &opath, err))) return rc;
  if ((rc = xgr_rpc_authorize(caller, o, XGR_RPC_ACT_CONTROL, owner, who, sizeof who, err))) return rc;
  uint64_t root, iter;
  if ((rc = target(o, &root, &iter, &tpath, err))) return rc;
  xgr_engine_session_info info = {0};
  size_t affected = 0;
  if (!xgr_engine_session(d->e, owner, root, &info)) affected = info.live;
  if ((rc = xgr_engine_kill(d->e, owner, root, 0, err))) {
    if (rc == XGR_ENOTFOUND && !err->path[0]) snprintf(err->path, sizeof err->path, "%s", tpath);
    return rpc_err(rc, err);
  }
  *result = json_pack("{s:b, s:s, s:I, s:s, s:s, s:I}", "ok", 1, "owner", owner, "processId", (json_int_t)root, "action",
                      "kill", "status", "killed", "affected", (json_int_t)affected);
  return 0;
}

METHOD(m_wake) {
  xgr_rpcd *d = ctx;
  const json_t *o;
  int rc = named(params, &o, err);
  if (rc) return rc;
  char who[64] = "", owner[64];
  const char *opath, *step = NULL;
  if ((rc = xgr_rpc_authorize(caller, o, XGR_RPC_ACT_WAKE, NULL, who, sizeof who, err))) return rc;
  if ((rc = owner_param(o, who, owner, sizeof owner, &opath, err))) return rc;
  if ((rc = opt_str(o, "stepId", &step, err))) return rc;
  const json_t *payload = json_object_get(o, "payload");
  if (payload && !json_is_null(payload) && !json_is_object(payload))
    return xgr_error_set(err, XGR_ESCHEMA, "payload", "is not an object; expected {...} merged into the resume payload"),
           XGR_RPC_INVALID_PARAMS;
  const json_t *pidv = json_object_get(o, "processId");
  if (!pidv || json_is_null(pidv)) pidv = json_object_get(o, "pid");
  bool pid_mode = pidv && !json_is_null(pidv);
  if (pid_mode == (step != NULL))
    return xgr_error_set(err, XGR_ESCHEMA, pid_mode ? "stepId" : "processId",
                         pid_mode ? "is set together with processId; PID mode and step mode exclude each other"
                                  : "missing; expected \"processId\" (PID mode) or \"stepId\" with \"sessionId\" (step mode)"),
           XGR_RPC_INVALID_PARAMS;
  uint64_t root = 0, iter = 0;
  if (pid_mode) {
    if (!json_is_string(pidv) || xgr_pid_parse(json_string_value(pidv), &root, &iter) || !root || !iter)
      return xgr_error_set(err, XGR_ESCHEMA, "processId", "is not \"<rootPid>:<iter>\"; PID mode wakes one process"),
             XGR_RPC_INVALID_PARAMS;
  } else {
    static const char *const keys[] = {"sessionId", "rootPid", NULL};
    const char *k = first_key(o, keys);
    const json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v))
      return xgr_error_set(err, XGR_ESCHEMA, "sessionId", "missing; step mode needs the root session id"),
             XGR_RPC_INVALID_PARAMS;
    if ((rc = get_u64(v, k, &root, err))) return rc;
  }
  xgr_value pv = xgr_value_null();
  if (payload && json_is_object(payload)) {
    xgr_value_from_json(payload, 0, &pv, err);
    if (xgr_value_check_list_cap(pv, 64, err)) {
      xgr_value_release(pv);
      snprintf(err->path, sizeof err->path, "payload");
      return XGR_RPC_LIMITS_EXCEEDED;
    }
  }
  const char *callr = who[0] ? who : owner;
  size_t woken = 0;
  if (pid_mode) {
    rc = xgr_engine_wake_pid(d->e, owner, root, iter, callr, pv, err);
    woken = rc ? 0 : 1;
  } else {
    rc = xgr_engine_wake_step(d->e, owner, root, step, callr, pv, &woken, err);
  }
  xgr_value_release(pv);
  if (rc) {
    if (!err->path[0]) snprintf(err->path, sizeof err->path, "%s", pid_mode ? "processId" : "stepId");
    return rpc_err(rc, err);
  }
  *result = json_pack("{s:b, s:s, s:I, s:o, s:s, s:I}", "ok", 1, "owner", owner, "sessionId", (json_int_t)root, "rootPid",
                      u64_str(root), "mode", pid_mode ? "pid" : "step", "woken", (json_int_t)woken);
  return 0;
}

/* owner, sessionId[, iteration] from a positional array or an object. */
static int positional(const json_t *params, bool with_iter, char *owner, size_t n, uint64_t *root, uint64_t *iter,
                      xgr_error *err) {
  const json_t *ov, *sv, *iv = NULL;
  const char *op = "[0]", *sp = "[1]", *ip = "[2]";
  if (json_is_array(params) && !(json_array_size(params) == 1 && json_is_object(json_array_get(params, 0)))) {
    size_t want = with_iter ? 3 : 2;
    if (json_array_size(params) != want)
      return xgr_error_set(err, XGR_ESCHEMA, "", "has %zu elements; expected [owner, sessionId%s]", json_array_size(params),
                           with_iter ? ", iteration" : ""),
             XGR_RPC_INVALID_PARAMS;
    ov = json_array_get(params, 0);
    sv = json_array_get(params, 1);
    if (with_iter) iv = json_array_get(params, 2);
  } else {
    const json_t *o;
    int rc = xgr_rpc_params_object(params, &o, err);
    if (rc) return rc;
    ov = json_object_get(o, "owner");
    sv = json_object_get(o, "sessionId");
    if (!sv) sv = json_object_get(o, "rootPid");
    if (with_iter) iv = json_object_get(o, "iteration");
    op = "owner", sp = "sessionId", ip = "iteration";
  }
  if (!json_is_string(ov) || !xgr_rpc_is_address(json_string_value(ov))) {
    char *t = ov ? json_dumps(ov, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    xgr_error_set(err, XGR_ESCHEMA, op, "is %.60s; expected the owner's address (0x + 40 hex)", t ? t : "missing");
    free(t);
    return XGR_RPC_INVALID_PARAMS;
  }
  snprintf(owner, n, "%s", json_string_value(ov));
  lower(owner);
  int rc = get_u64(sv, sp, root, err);
  if (!rc && with_iter) rc = get_u64(iv, ip, iter, err);
  return rc;
}

METHOD(m_alive) {
  xgr_rpcd *d = ctx;
  char owner[64];
  uint64_t root, iter;
  int rc = positional(params, false, owner, sizeof owner, &root, &iter, err);
  if (rc) return rc;
  xgr_engine_session_info info;
  bool alive = !xgr_engine_session(d->e, owner, root, &info) && !info.finished;
  *result = json_boolean(alive);
  return 0;
}

METHOD(m_step_executed) {
  xgr_rpcd *d = ctx;
  char owner[64];
  uint64_t root, iter;
  int rc = positional(params, true, owner, sizeof owner, &root, &iter, err);
  if (rc) return rc;
  xgr_store_proc *ps = NULL;
  size_t n = 0;
  if ((rc = xgr_store_procs(d->st, owner, root, &ps, &n, err))) return rpc_err(rc, err);
  json_t *r = NULL;
  for (size_t i = 0; i < n && !r; i++)
    if (ps[i].iter == iter) r = json_boolean(ps[i].status == XGR_PROC_DONE || ps[i].status == XGR_PROC_ABORTED);
  xgr_store_procs_free(ps, n);
  if (!r) {   /* the process row may have left with the TTL; its history row says it ran */
    xgr_store_hist *hs = NULL;
    if (!xgr_store_history(d->st, owner, root, &hs, &n, err)) {
      for (size_t i = 0; i < n && !r; i++)
        if (hs[i].iter == iter) r = json_true();
      xgr_store_hists_free(hs, n);
    }
  }
  *result = r ? r : json_null();
  return 0;
}

/* ---- listing ---------------------------------------------------------------------------------- */

/* The join state of a stored process (restore form) in the view of seed 001 §2.2. */
static json_t *join_view(const xgr_orch *o, const char *text) {
  json_t *j = text ? json_loads(text, 0, NULL) : NULL;
  if (!j) return json_null();
  json_t *decl = json_object_get(j, "decl");
  json_int_t si = json_integer_value(json_array_get(decl, 0)), bi = json_integer_value(json_array_get(decl, 1));
  json_t *v = json_null();
  if (o && si >= 0 && (size_t)si < o->nsteps && bi >= 0 && bi < 2 && o->steps[si].branch[bi].join) {
    const xgr_join *dj = o->steps[si].branch[bi].join;
    json_t *expect = json_array(), *inbox = json_object(), *fail = json_array();
    json_t *in = json_object_get(j, "inbox"), *fl = json_object_get(j, "fail");
    for (unsigned k = 0; k < dj->n; k++) {
      const char *sid = o->steps[dj->from[k].node].id;
      json_array_append_new(expect, json_string(sid));
      json_t *piece = json_array_get(in, k);
      if (piece && !json_is_null(piece)) json_object_set(inbox, sid, piece);
      if (json_is_true(json_array_get(fl, k))) json_array_append_new(fail, json_string(sid));
    }
    json_int_t oc = json_integer_value(json_object_get(j, "outcome"));
    v = json_pack("{s:o, s:s, s:i, s:o, s:o, s:b, s:s}", "expect", expect, "policy", xgr_policy_name(dj->policy), "k",
                  (int)dj->k, "inbox", inbox, "failed", fail, "closed", json_is_true(json_object_get(j, "closed")),
                  "outcome", xgr_join_outcome_name((xgr_join_outcome)oc));
    if (json_is_true(json_object_get(j, "closed")))   /* session clock (ms) when it closed */
      json_object_set_new(v, "closedAt", json_integer(json_integer_value(json_object_get(j, "closedAt"))));
  }
  json_decref(j);
  return v;
}

static int64_t updated_ms(const xgr_store_proc *p) {
  int64_t u = p->created_at;
  if (p->started_at > u) u = p->started_at;
  if (p->finished_at > u) u = p->finished_at;
  return u;
}

static const char *status_view(const xgr_store_proc *p) {
  if (p->status == XGR_PROC_WAITING && p->paused) return "paused";
  return xgr_proc_status_name((xgr_proc_status)p->status);
}

/* One process in the join view (seed 001 §2.2). */
static json_t *item_join(const xgr_store_session *s, const xgr_orch *o, const xgr_store_proc *p) {
  bool terminal = p->status == XGR_PROC_DONE || p->status == XGR_PROC_ABORTED;
  json_t *it = json_pack("{s:o, s:o, s:I, s:s, s:s, s:o, s:o, s:I}", "pid", pid_json(s->root_pid, p->iter), "parentPid",
                         p->parent_iter ? pid_json(s->root_pid, p->parent_iter) : json_null(), "iter",
                         (json_int_t)p->iter, "status", status_view(p), "owner", s->owner, "resumeStep",
                         terminal ? json_null() : json_string(p->step_id), "lastStep",
                         terminal ? json_string(p->step_id) : json_null(), "updatedAt",
                         (json_int_t)(updated_ms(p) / 1000));
  json_object_set_new(it, "rootPid", u64_str(s->root_pid));
  json_object_set_new(it, "valid", p->valid < 0 ? json_null() : json_boolean(p->valid));
  if (p->status == XGR_PROC_WAITING)
    json_object_set_new(it, "nextWakeAt", p->next_wake_at == XGR_NEVER ? json_null() : json_integer(p->next_wake_at));
  if (p->status == XGR_PROC_ABORTED) json_object_set_new(it, "abortReason", json_string(xgr_abort_reason_name(p->abort_reason)));
  if (p->error) json_object_set_new(it, "error", json_string(p->error));
  json_object_set_new(it, "join", p->join ? join_view(o, p->join) : json_null());
  return it;
}

/* One process in the raw view of the public reference (§13). */
static json_t *item_raw(const xgr_store_session *s, const xgr_store_proc *p, bool allow_mode) {
  char gid[16] = "", fgid[16] = "";
  if (p->group) snprintf(gid, sizeof gid, "%u", p->group);
  if (p->from_group) snprintf(fgid, sizeof fgid, "%u", p->from_group);
  json_t *it = json_pack("{s:s, s:o, s:o, s:s, s:s, s:I, s:I, s:s, s:s, s:s, s:s}", "owner", s->owner, "sessionId",
                         u64_str(s->root_pid), "pid", pid_json(s->root_pid, p->iter), "step", p->step_id, "status",
                         allow_mode ? "waiting" : status_view(p), "updated", (json_int_t)(updated_ms(p) / 1000),
                         "iterationStep", (json_int_t)p->iter, "xrc729", s->registry ? s->registry : "", "ostcId",
                         s->ostc_id ? s->ostc_id : "", "joinGroupId", gid, "joinFromGroupId", fgid);
  if (!allow_mode)
    json_object_set_new(it, "parentPid", p->parent_iter ? pid_json(s->root_pid, p->parent_iter) : u64_str(s->root_pid));
  return it;
}

/* Is `who` on the rpc allow list of the waiting process p (its __wakeUp)? */
static bool allowed_rpc(const xgr_store_proc *p, const char *who) {
  json_t *pl = p->payload ? json_loads(p->payload, 0, NULL) : NULL;
  json_t *wu = json_object_get(pl, "__wakeUp");
  json_t *ent = json_object_get(json_object_get(wu, "steps"), p->step_id);
  if (!ent) ent = json_object_get(wu, "default");
  json_t *list = json_object_get(ent, "rpc");
  bool ok = false;
  size_t i;
  json_t *v;
  json_array_foreach(list, i, v) if (json_is_string(v) && !strcasecmp(json_string_value(v), who)) ok = true;
  json_decref(pl);
  return ok;
}

typedef struct sortkey {
  int key;   /* 0 rootPid, 1 iter, 2 updatedAt */
  int dir;   /* 1 asc, -1 desc */
} sortkey;

typedef struct row {
  uint64_t root, iter;
  int64_t updated;
  json_t *item;
} row;

typedef struct rows {
  row *v;
  size_t n, cap;
  sortkey keys[4];
  size_t nkeys;
} rows;

static int cmp_rows_keys(const row *a, const row *b, const sortkey *keys, size_t nkeys) {
  for (size_t i = 0; i < nkeys; i++) {
    int64_t x, y;
    switch (keys[i].key) {
      case 0: x = (int64_t)a->root, y = (int64_t)b->root; break;
      case 1: x = (int64_t)a->iter, y = (int64_t)b->iter; break;
      default: x = a->updated, y = b->updated; break;
    }
    if (x != y) return (x < y ? -1 : 1) * keys[i].dir;
  }
  return 0;
}

/* A merge sort with the keys passed along (qsort_r is not C17). */
static void sort_rows(row *v, size_t n, row *tmp, const sortkey *keys, size_t nkeys) {
  if (n < 2) return;
  size_t m = n / 2;
  sort_rows(v, m, tmp, keys, nkeys);
  sort_rows(v + m, n - m, tmp, keys, nkeys);
  size_t i = 0, j = m, k = 0;
  while (i < m && j < n) tmp[k++] = cmp_rows_keys(&v[j], &v[i], keys, nkeys) < 0 ? v[j++] : v[i++];
  while (i < m) tmp[k++] = v[i++];
  while (j < n) tmp[k++] = v[j++];
  memcpy(v, tmp, n * sizeof *v);
}

static int parse_sort(const json_t *o, rows *rs, xgr_error *err) {
  rs->nkeys = 0;
  const json_t *s = json_object_get(o, "sort"), *by = NULL;
  if (!s || json_is_null(s)) {
    rs->keys[0] = (sortkey){0, -1};
    rs->keys[1] = (sortkey){1, 1};
    rs->nkeys = 2;
    return 0;
  }
  by = json_is_object(s) ? json_object_get(s, "by") : s;
  json_t *one = NULL;
  if (json_is_string(by)) {
    one = json_array();
    json_array_append(one, (json_t *)by);
    by = one;
  }
  if (!json_is_array(by)) {
    json_decref(one);
    return xgr_error_set(err, XGR_ESCHEMA, "sort.by", "expected [\"rootPid:desc\", \"iter:asc\", ...] (keys rootPid, "
                         "iter, updatedAt)"),
           XGR_RPC_INVALID_PARAMS;
  }
  size_t i;
  const json_t *v;
  json_array_foreach(by, i, v) {
    char path[32];
    snprintf(path, sizeof path, "sort.by[%zu]", i);
    const char *t = json_string_value(v);
    char key[32] = "", dir[8] = "asc";
    if (t) sscanf(t, "%31[^:]:%7s", key, dir);
    int k = !strcmp(key, "rootPid") ? 0 : !strcmp(key, "iter") ? 1 : !strcmp(key, "updatedAt") ? 2 : -1;
    int dr = !strcmp(dir, "asc") ? 1 : !strcmp(dir, "desc") ? -1 : 0;
    if (!t || k < 0 || !dr || rs->nkeys == 4) {
      json_decref(one);
      return xgr_error_set(err, XGR_ESCHEMA, path, "is \"%.40s\"; expected \"<rootPid|iter|updatedAt>:<asc|desc>\" "
                           "(at most 4 keys)", t ? t : "?"),
             XGR_RPC_INVALID_PARAMS;
    }
    rs->keys[rs->nkeys++] = (sortkey){k, dr};
  }
  json_decref(one);
  return 0;
}

static int list_sessions(xgr_rpcd *d, const xgr_rpc_caller *caller, const json_t *params, bool raw_default,
                         json_t **result, xgr_error *err) {
  const json_t *o;
  int rc = named(params, &o, err);
  if (rc) return rc;
  char who[64] = "", owner[64];
  const char *opath, *view = NULL, *parent = NULL;
  if ((rc = xgr_rpc_authorize(caller, o, XGR_RPC_ACT_READ, NULL, who, sizeof who, err))) return rc;
  if ((rc = owner_param(o, who, owner, sizeof owner, &opath, err))) return rc;
  bool allow_mode = who[0] && strcmp(who, owner);
  if (allow_mode && !json_object_get(o, "runner"))
    return xgr_error_set(err, XGR_EPERM, "from", "%s may not list the sessions of %s (allow-list mode needs \"runner\")",
                         who, owner),
           XGR_RPC_NOT_PERMITTED;
  if ((rc = opt_str(o, "view", &view, err)) || (rc = opt_str(o, "parentPid", &parent, err))) return rc;
  bool raw = view ? !strcmp(view, "raw") : raw_default;
  if (view && strcmp(view, "raw") && strcmp(view, "join"))
    return xgr_error_set(err, XGR_ESCHEMA, "view", "is \"%.20s\"; expected \"raw\" or \"join\"", view), XGR_RPC_INVALID_PARAMS;
  uint64_t limit = 100;
  static const char *const lim_keys[] = {"limit", "last", NULL};
  const char *lk = first_key(o, lim_keys);
  if ((rc = xgr_rpc_param_uint(o, lk, false, &limit, err))) return rc;
  if (limit > LIST_MAX)
    return xgr_error_set(err, XGR_ELIMIT, lk, "is %llu; at most %d items are listed at once", (unsigned long long)limit,
                         LIST_MAX),
           XGR_RPC_LIMITS_EXCEEDED;
  rows rs = {0};
  if ((rc = parse_sort(o, &rs, err))) return rc;
  static const char *const root_keys[] = {"rootPid", "rootId", NULL};
  const char *rk = first_key(o, root_keys);
  const json_t *rv = json_object_get(o, rk);
  /* the sessions to look at: one by rootPid, else the owner's newest (the store's sessions table) */
  uint64_t one_root = 0, before = 0;
  const json_t *bv = json_object_get(o, "beforeRootPid");   /* paging: only sessions below it */
  if (bv && !json_is_null(bv) && (rc = get_u64(bv, "beforeRootPid", &before, err))) return rc;
  xgr_store_session *ss = NULL;
  size_t nss = 0;
  if (rv && !json_is_null(rv)) {
    if ((rc = get_u64(rv, rk, &one_root, err))) return rc;
    ss = calloc(1, sizeof *ss);
    if (!ss) abort();
    if (!xgr_store_session_get(d->st, owner, one_root, ss, err)) nss = 1;
  } else if ((rc = xgr_store_sessions(d->st, owner, before, LIST_SCAN_SESSIONS, &ss, &nss, err))) {
    return rpc_err(rc, err);
  }
  /* a full scan window may have older sessions below it: the cursor for the next page */
  uint64_t next_before = nss == LIST_SCAN_SESSIONS ? ss[nss - 1].root_pid : 0;
  for (size_t r = 0; r < nss; r++) {
    const xgr_store_session s = ss[r];
    const xgr_bundle *b = NULL;
    char hk[80];
    snprintf(hk, sizeof hk, "#%s", s.ostc_hash ? s.ostc_hash : "");
    xgr_error be;
    if (!raw) bundle_for(d, hk, &b, "ostcHash", &be);
    xgr_store_proc *ps = NULL;
    size_t n = 0;
    if (!xgr_store_procs(d->st, owner, s.root_pid, &ps, &n, err)) {
      for (size_t i = 0; i < n; i++) {
        if (allow_mode && (ps[i].status != XGR_PROC_WAITING || !allowed_rpc(&ps[i], who))) continue;
        if (parent) {
          char pp[48];
          xgr_pid_format(s.root_pid, ps[i].parent_iter, pp, sizeof pp);
          if (strcmp(pp, parent)) continue;
        }
        if (rs.n == rs.cap) {
          rs.cap = rs.cap ? rs.cap * 2 : 64;
          rs.v = realloc(rs.v, rs.cap * sizeof *rs.v);
          if (!rs.v) abort();
        }
        rs.v[rs.n++] = (row){s.root_pid, ps[i].iter, updated_ms(&ps[i]),
                             raw ? item_raw(&s, &ps[i], allow_mode) : item_join(&s, b ? b->orch : NULL, &ps[i])};
      }
      xgr_store_procs_free(ps, n);
    }
  }
  xgr_store_sessions_free(ss, nss);
  xgr_error_clear(err);
  row *tmp = malloc((rs.n ? rs.n : 1) * sizeof *tmp);
  if (!tmp) abort();
  sort_rows(rs.v, rs.n, tmp, rs.keys, rs.nkeys);
  free(tmp);
  json_t *items = json_array();
  for (size_t i = 0; i < rs.n; i++) {
    if (i < limit) json_array_append_new(items, rs.v[i].item);
    else json_decref(rs.v[i].item);
  }
  free(rs.v);
  *result = json_pack("{s:o, s:I}", raw ? "sessions" : "items", items, "total", (json_int_t)rs.n);
  if (next_before) json_object_set_new(*result, "nextBeforeRootPid", u64_str(next_before));
  return 0;
}

METHOD(m_list_join) { return list_sessions(ctx, caller, params, false, result, err); }
METHOD(m_list_raw) { return list_sessions(ctx, caller, params, true, result, err); }

/* xgr.getSession: one session with its processes (join view), history and engine state. */
METHOD(m_get_session) {
  xgr_rpcd *d = ctx;
  const json_t *o;
  int rc = named(params, &o, err);
  if (rc) return rc;
  char who[64] = "", owner[64];
  const char *opath, *tpath;
  if ((rc = xgr_rpc_authorize(caller, o, XGR_RPC_ACT_READ, NULL, who, sizeof who, err))) return rc;
  if ((rc = owner_param(o, who, owner, sizeof owner, &opath, err))) return rc;
  uint64_t root, iter;
  if ((rc = target(o, &root, &iter, &tpath, err))) return rc;
  xgr_store_session s = {0};
  if ((rc = xgr_store_session_get(d->st, owner, root, &s, err))) {
    if (rc == XGR_ENOTFOUND)
      xgr_error_set(err, rc, tpath, "no session %s/%llu", owner, (unsigned long long)root);
    return rpc_err(rc, err);
  }
  const xgr_bundle *b = NULL;
  char hk[80];
  snprintf(hk, sizeof hk, "#%s", s.ostc_hash ? s.ostc_hash : "");
  xgr_error be;
  bundle_for(d, hk, &b, "ostcHash", &be);
  json_t *procs = json_array(), *hist = json_array();
  xgr_store_proc *ps = NULL;
  size_t n = 0;
  if (!xgr_store_procs(d->st, owner, root, &ps, &n, err)) {
    for (size_t i = 0; i < n; i++)
      if (!iter || ps[i].iter == iter) json_array_append_new(procs, item_join(&s, b ? b->orch : NULL, &ps[i]));
    xgr_store_procs_free(ps, n);
  }
  xgr_store_hist *hs = NULL;
  if (!xgr_store_history(d->st, owner, root, &hs, &n, err)) {
    for (size_t i = 0; i < n; i++) {
      if (iter && hs[i].iter != iter) continue;
      json_t *h = json_pack("{s:o, s:s, s:s, s:o, s:I, s:I}", "pid", pid_json(root, hs[i].iter), "step", hs[i].step_id,
                            "status", xgr_proc_status_name((xgr_proc_status)hs[i].status), "valid",
                            hs[i].valid < 0 ? json_null() : json_boolean(hs[i].valid), "at", (json_int_t)hs[i].at,
                            "finishedAt", (json_int_t)hs[i].finished_at);
      if (hs[i].error) json_object_set_new(h, "error", json_string(hs[i].error));
      json_t *pl = hs[i].payload ? json_loads(hs[i].payload, JSON_DECODE_ANY, NULL) : NULL;
      if (pl) json_object_set_new(h, "payload", pl);
      json_array_append_new(hist, h);
    }
    xgr_store_hists_free(hs, n);
  }
  xgr_error_clear(err);
  xgr_engine_session_info info;
  bool live = !xgr_engine_session(d->e, owner, root, &info) && !info.finished;
  json_t *sess = json_pack("{s:s, s:o, s:s, s:s, s:s, s:s, s:I, s:I, s:b, s:b}", "owner", s.owner, "rootPid",
                           u64_str(s.root_pid), "registry", s.registry ? s.registry : "", "ostcId",
                           s.ostc_id ? s.ostc_id : "", "ostcHash", s.ostc_hash ? s.ostc_hash : "", "status",
                           xgr_session_result_name((xgr_session_result)s.status), "createdAt", (json_int_t)s.created_at,
                           "finishedAt", (json_int_t)s.finished_at, "paused", s.paused, "alive", live);
  if (live) json_object_set_new(sess, "steps", json_integer((json_int_t)info.steps));
  xgr_store_session_clear(&s);
  *result = json_pack("{s:o, s:o, s:o}", "session", sess, "processes", procs, "history", hist);
  return 0;
}

/* ---- registries --------------------------------------------------------------------------------- */

/* The exact bytes of a document parameter: a string as given, an object as jansson's compact
 * serialization in key order. *owned tells whether to free. */
static int doc_bytes(const json_t *o, const char *key, char **bytes, size_t *len, xgr_error *err) {
  const json_t *v = json_object_get(o, key);
  if (!v || json_is_null(v))
    return xgr_error_set(err, XGR_ESCHEMA, key, "missing; expected the document as an object or its JSON text"),
           XGR_RPC_INVALID_PARAMS;
  if (json_is_string(v)) {
    *len = json_string_length(v);
    *bytes = malloc(*len + 1);
    if (!*bytes) abort();
    memcpy(*bytes, json_string_value(v), *len + 1);
    return 0;
  }
  if (!json_is_object(v))
    return xgr_error_set(err, XGR_ESCHEMA, key, "is not an object; expected the document as an object or its JSON text"),
           XGR_RPC_INVALID_PARAMS;
  *bytes = json_dumps(v, JSON_COMPACT);
  if (!*bytes) abort();
  *len = strlen(*bytes);
  return 0;
}

static int prefixed(int rc, xgr_error *err, const char *pre, const xgr_error *e) {
  xgr_error_set(err, e->code ? e->code : rc, NULL, "%s", e->message);
  snprintf(err->path, sizeof err->path, "%s%s%.200s", pre, e->path[0] && e->path[0] != '[' ? "." : "", e->path);
  return xgr_rpc_code_for(e->code ? e->code : rc);
}

static json_t *doc_json(const xgr_store_doc *doc) {
  return json_pack("{s:s, s:I, s:s, s:I}", "hash", doc->hash, "version", (json_int_t)doc->version, "owner",
                   doc->owner ? doc->owner : "", "registeredAt", (json_int_t)doc->registered_at);
}

METHOD(m_put_orch) {
  xgr_rpcd *d = ctx;
  const json_t *o;
  int rc = named(params, &o, err);
  if (rc) return rc;
  char who[64] = "", reg[96], key[200];
  const char *rpath, *ostc_id = NULL;
  if ((rc = xgr_rpc_authorize(caller, o, XGR_RPC_ACT_REGISTER, NULL, who, sizeof who, err))) return rc;
  if ((rc = registry_of(o, reg, sizeof reg, &rpath, err)) || (rc = opt_str(o, "ostcId", &ostc_id, err))) return rc;
  char *bytes;
  size_t len;
  if ((rc = doc_bytes(o, "orchestration", &bytes, &len, err))) return rc;
  if (len > XGR_MAX_OSTC_BYTES) {
    free(bytes);
    return xgr_error_set(err, XGR_ELIMIT, "orchestration", "is %zu bytes; MaxOSTCBytes is %d", len, XGR_MAX_OSTC_BYTES),
           XGR_RPC_LIMITS_EXCEEDED;
  }
  xgr_orch *orch = NULL;
  xgr_error e;
  if ((rc = xgr_orch_parse(bytes, len, &orch, &e, NULL))) {
    free(bytes);
    return prefixed(rc, err, "orchestration", &e);
  }
  const char *id = ostc_id ? ostc_id : orch->id;
  if (!*id || strchr(id, '/') || strlen(id) > 96) {
    xgr_orch_free(orch);
    free(bytes);
    return xgr_error_set(err, XGR_ESCHEMA, ostc_id ? "ostcId" : "orchestration.id",
                         "is \"%.60s\"; expected a non-empty id without '/' (at most 96 bytes)", id),
           XGR_RPC_INVALID_PARAMS;
  }
  snprintf(key, sizeof key, "%s/%s", reg, id);
  xgr_store_doc doc = {0}, doc2 = {0};
  rc = xgr_store_register(d->st, XGR_REG_ORCHESTRATION, key, who, bytes, len, &doc, err);
  if (!rc) rc = xgr_store_register(d->st, XGR_REG_ORCHESTRATION, reg, who, bytes, len, &doc2, err);
  free(bytes);
  if (rc) {
    xgr_orch_free(orch);
    return rpc_err(rc, err);
  }
  invalidate(d, key);
  invalidate(d, reg);
  json_t *r = doc_json(&doc);
  json_object_set_new(r, "registry", json_string(reg));
  json_object_set_new(r, "ostcId", json_string(id));
  json_object_set_new(r, "steps", json_integer((json_int_t)orch->nsteps));
  logf_(d, "level=info msg=\"orchestration registered\" registry=%s ostcId=%s version=%u hash=%s", reg, id, doc.version,
        doc.hash);
  xgr_store_doc_clear(&doc);
  xgr_store_doc_clear(&doc2);
  xgr_orch_free(orch);
  *result = r;
  return 0;
}

METHOD(m_get_orch) {
  xgr_rpcd *d = ctx;
  const json_t *o;
  int rc = named(params, &o, err);
  if (rc) return rc;
  char reg[96], key[200];
  const char *rpath, *ostc_id = NULL;
  if ((rc = registry_of(o, reg, sizeof reg, &rpath, err)) || (rc = opt_str(o, "ostcId", &ostc_id, err))) return rc;
  uint64_t version = 0;
  if ((rc = xgr_rpc_param_uint(o, "version", false, &version, err))) return rc;
  if (ostc_id) snprintf(key, sizeof key, "%s/%.96s", reg, ostc_id);
  else snprintf(key, sizeof key, "%s", reg);
  xgr_store_doc doc = {0};
  if ((rc = xgr_store_doc_get(d->st, XGR_REG_ORCHESTRATION, key, (uint32_t)version, &doc, err))) {
    if (rc == XGR_ENOTFOUND) xgr_error_set(err, rc, ostc_id ? "ostcId" : rpath, "no orchestration \"%s\"%s", key,
                                           version ? " in that version" : "");
    return rpc_err(rc, err);
  }
  json_t *r = doc_json(&doc);
  json_object_set_new(r, "registry", json_string(reg));
  json_t *oj = json_loadb(doc.content, doc.len, 0, NULL);
  json_object_set_new(r, "ostcId", json_string(ostc_id ? ostc_id : json_string_value(json_object_get(oj, "id")) ? json_string_value(json_object_get(oj, "id")) : ""));
  json_object_set_new(r, "orchestration", oj ? oj : json_null());
  json_object_set_new(r, "content", json_stringn(doc.content, doc.len));
  xgr_store_doc_clear(&doc);
  *result = r;
  return 0;
}

static int rule_key(const json_t *o, char *key, size_t n, const char **path, xgr_error *err) {
  static const char *const keys[] = {"address", "key", "alias", NULL};
  const char *k = first_key(o, keys), *v;
  int rc = xgr_rpc_param_string(o, k, true, &v, err);
  if (rc) {
    if (!json_object_get(o, k)) snprintf(err->path, sizeof err->path, "address");
    return rc;
  }
  *path = k;
  if (!*v || strlen(v) >= n || strchr(v, '/') || strchr(v, '#'))
    return xgr_error_set(err, XGR_ESCHEMA, k, "is \"%.60s\"; expected a rule address (0x + 40 hex) or an alias", v),
           XGR_RPC_INVALID_PARAMS;
  snprintf(key, n, "%s", v);
  if (xgr_rpc_is_address(key)) lower(key);
  return 0;
}

METHOD(m_put_rule) {
  xgr_rpcd *d = ctx;
  const json_t *o;
  int rc = named(params, &o, err);
  if (rc) return rc;
  char who[64] = "", key[128];
  const char *kpath;
  if ((rc = xgr_rpc_authorize(caller, o, XGR_RPC_ACT_REGISTER, NULL, who, sizeof who, err))) return rc;
  if ((rc = rule_key(o, key, sizeof key, &kpath, err))) return rc;
  char *bytes;
  size_t len;
  if ((rc = doc_bytes(o, "rule", &bytes, &len, err))) return rc;
  if (len > 131072) {
    free(bytes);
    return xgr_error_set(err, XGR_ELIMIT, "rule", "is %zu bytes; MaxXRC137Bytes is 131072", len), XGR_RPC_LIMITS_EXCEEDED;
  }
  xgr_rule *rule = NULL;
  xgr_error e;
  if ((rc = xgr_rule_parse(bytes, len, &rule, &e))) {
    free(bytes);
    return prefixed(rc, err, "rule", &e);
  }
  xgr_rule_free(rule);
  xgr_store_doc doc = {0};
  rc = xgr_store_register(d->st, XGR_REG_RULE, key, who, bytes, len, &doc, err);
  free(bytes);
  if (rc) return rpc_err(rc, err);
  atomic_fetch_add(&d->rules_gen, 1);
  json_t *r = doc_json(&doc);
  json_object_set_new(r, "address", json_string(key));
  logf_(d, "level=info msg=\"rule registered\" key=%s version=%u hash=%s", key, doc.version, doc.hash);
  xgr_store_doc_clear(&doc);
  *result = r;
  return 0;
}

METHOD(m_get_rule) {
  xgr_rpcd *d = ctx;
  const json_t *o;
  int rc = named(params, &o, err);
  if (rc) return rc;
  char key[128];
  const char *kpath;
  if ((rc = rule_key(o, key, sizeof key, &kpath, err))) return rc;
  uint64_t version = 0;
  if ((rc = xgr_rpc_param_uint(o, "version", false, &version, err))) return rc;
  xgr_store_doc doc = {0};
  if ((rc = xgr_store_doc_get(d->st, XGR_REG_RULE, key, (uint32_t)version, &doc, err))) {
    if (rc == XGR_ENOTFOUND) xgr_error_set(err, rc, kpath, "no rule is registered under \"%s\"", key);
    return rpc_err(rc, err);
  }
  json_t *r = doc_json(&doc);
  json_object_set_new(r, "address", json_string(key));
  json_t *rj = json_loadb(doc.content, doc.len, 0, NULL);
  json_object_set_new(r, "rule", rj ? rj : json_null());
  json_object_set_new(r, "content", json_stringn(doc.content, doc.len));
  xgr_store_doc_clear(&doc);
  *result = r;
  return 0;
}

/* ---- metrics ------------------------------------------------------------------------------------- */

static void collect_sessions(void *ctx, xgr_metrics_out *out) {
  xgr_rpcd *d = ctx;
  size_t n = xgr_engine_list(d->e, NULL, 0);
  xgr_engine_session_info *v = malloc((n ? n : 1) * sizeof *v);
  if (!v) return;
  n = xgr_engine_list(d->e, v, n);
  size_t live = 0, idle = 0;
  for (size_t i = 0; i < n; i++) {
    if (v[i].finished) continue;
    live++;
    idle += v[i].idle;
  }
  free(v);
  xgr_metrics_line(out, "xgr_sessions_live", "", (double)live);
  xgr_metrics_line(out, "xgr_sessions_idle", "", (double)idle);
}

static void collect_procs(void *ctx, xgr_metrics_out *out) {
  xgr_rpcd *d = ctx;
  size_t n = xgr_engine_list(d->e, NULL, 0);
  xgr_engine_session_info *v = malloc((n ? n : 1) * sizeof *v);
  if (!v) return;
  n = xgr_engine_list(d->e, v, n);
  size_t running = 0, live = 0;
  for (size_t i = 0; i < n; i++)
    if (!v[i].finished) {
      running += v[i].running;
      live += v[i].live;
    }
  free(v);
  xgr_metrics_line(out, "xgr_processes", "status=\"running\"", (double)running);
  xgr_metrics_line(out, "xgr_processes", "status=\"waiting\"", (double)(live > running ? live - running : 0));
}

static void collect_queues(void *ctx, xgr_metrics_out *out) {
  xgr_rpcd *d = ctx;
  xgr_metrics_line(out, "xgr_queue_depth", "queue=\"store_batches\"", (double)xgr_persist_inflight(d->p));
  xgr_metrics_line(out, "xgr_queue_depth", "queue=\"first_step_waiters\"", (double)atomic_load(&d->nwaiters));
}

/* The work-stealing runtime: how work moved between the workers and how often they slept. */
static void collect_runtime(void *ctx, xgr_metrics_out *out) {
  xgr_rpcd *d = ctx;
  xgr_engine_stats s;
  xgr_engine_get_stats(d->e, &s);
  const xgr_rt_counters *rc = &s.runtime;
  static const char *const kinds[] = {"actor_turns", "tasks", "steals", "stolen_items", "global_takes", "parks",
                                      "wakeups"};
  const uint64_t vals[] = {rc->steps, rc->tasks, rc->steals, rc->stolen, rc->global_batches, rc->parks, rc->wakeups};
  for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
    char label[48];
    snprintf(label, sizeof label, "kind=\"%s\"", kinds[i]);
    xgr_metrics_line(out, "xgr_runtime_events", label, (double)vals[i]);
  }
}

static void collect_engine(void *ctx, xgr_metrics_out *out) {
  xgr_rpcd *d = ctx;
  xgr_engine_stats s;
  xgr_engine_get_stats(d->e, &s);
  xgr_metrics_line(out, "xgr_engine_events", "kind=\"sessions_started\"", (double)s.sessions_started);
  xgr_metrics_line(out, "xgr_engine_events", "kind=\"sessions_finished\"", (double)s.sessions_finished);
  xgr_metrics_line(out, "xgr_engine_events", "kind=\"steps\"", (double)s.steps);
  xgr_metrics_line(out, "xgr_engine_events", "kind=\"api_http_requests\"", (double)s.http_requests);
  xgr_metrics_line(out, "xgr_engine_events", "kind=\"timers_fired\"", (double)s.timers_fired);
  xgr_metrics_line(out, "xgr_engine_events", "kind=\"store_batches\"", (double)s.store_batches);
  xgr_store_stats ss;
  xgr_store_get_stats(d->st, &ss);
  xgr_metrics_line(out, "xgr_store_transactions", "", (double)ss.transactions);
  xgr_metrics_line(out, "xgr_store_max_batches_per_tx", "", (double)ss.max_batches_per_tx);
}

/* ---- registration ----------------------------------------------------------------------------- */

typedef struct mdef {
  const char *name;   /* without prefix: registered as xgr.<name> and xgr_<name> */
  xgr_rpc_method_fn fn;
  bool writes;        /* refused with -32009 once the store has failed */
} mdef;

/* A writing method behind the store-failure guard: once the store has failed, nothing more is
 * accepted that would have to be written (reads of what was committed still work). */
static int guarded(void *ctx, const xgr_rpc_caller *caller, const json_t *params, json_t **result, xgr_error *err) {
  const guard *g = ctx;
  xgr_error se;
  if (xgr_store_failed(g->d->st, &se))
    return xgr_error_set(err, XGR_EIO, NULL, "the store failed, so xgrd takes no more work: %s", se.message),
           XGR_RPC_UNAVAILABLE;
  return g->fn(g->d, caller, params, result, err);
}

int xgr_rpcd_store_failed(xgr_rpcd *d, xgr_error *err) { return xgr_store_failed(d->st, err); }

int xgr_rpcd_register(xgr_rpcd *d, xgr_rpc_server *s) {
  static const mdef defs[] = {
    {"enqueue", m_enqueue, true}, {"validateDataTransfer", m_validate, true}, {"getNextProcessId", m_next_pid, false},
    {"kill", m_kill, true}, {"pause", m_pause, true}, {"resume", m_resume, true}, {"control", m_control, true},
    {"wakeUpProcess", m_wake, true}, {"wake", m_wake, true}, {"sessionAlive", m_alive, false},
    {"stepExecuted", m_step_executed, false}, {"getSession", m_get_session, false},
    {"putOrchestration", m_put_orch, true}, {"getOrchestration", m_get_orch, false}, {"putRule", m_put_rule, true},
    {"getRule", m_get_rule, false},
  };
  _Static_assert(sizeof defs / sizeof defs[0] <= sizeof d->guards / sizeof d->guards[0], "guards");
  size_t k = 0;
  char (*names)[40] = d->names;
  for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
    d->guards[i] = (guard){d, defs[i].fn};
    for (int style = 0; style < 2; style++) {
      snprintf(names[k], sizeof names[k], "xgr%c%s", style ? '_' : '.', defs[i].name);
      int rc = defs[i].writes ? xgr_rpc_register(s, names[k++], guarded, &d->guards[i])
                              : xgr_rpc_register(s, names[k++], defs[i].fn, d);
      if (rc) return rc;
    }
  }
  /* listSessions: the seed's join view under xgr.listSessions, the public raw rows under
   * xgr_listSessions; the same code, `view` picks either */
  int rc = xgr_rpc_register(s, "xgr.listSessions", m_list_join, d);
  if (!rc) rc = xgr_rpc_register(s, "xgr_listSessions", m_list_raw, d);
  if (rc) return rc;
  xgr_metrics *m = xgr_rpc_metrics(s);
  xgr_persist_metrics(d->p, m);
  for (int a = 0; a < 4; a++) {
    char l[40];
    snprintf(l, sizeof l, "ack=\"%s\"", ack_names[a]);
    d->c_enq[a] = xgr_metrics_counter(m, "xgr_enqueue_total", "Session starts by answer", l);
  }
  xgr_metrics_gauge(m, "xgr_sessions_live", "Sessions with live processes in the engine", collect_sessions, d);
  xgr_metrics_gauge(m, "xgr_processes", "Live processes by status", collect_procs, d);
  xgr_metrics_gauge(m, "xgr_queue_depth", "Work queued inside xgrd", collect_queues, d);
  xgr_metrics_gauge(m, "xgr_engine_events", "Engine counters", collect_engine, d);
  xgr_metrics_gauge(m, "xgr_runtime_events", "Work-stealing runtime counters", collect_runtime, d);
  return 0;
}

/* ---- life cycle and recovery -------------------------------------------------------------------- */

static int recover_one(void *ctx, const xgr_store_live *l) {
  xgr_rpcd *d = ctx;
  const xgr_store_session *ss = l->session;
  xgr_error err;
  xgr_error_clear(&err);
  const xgr_bundle *b = NULL;
  char hk[80];
  snprintf(hk, sizeof hk, "#%s", ss->ostc_hash ? ss->ostc_hash : "");
  int rc = bundle_for(d, hk, &b, "ostcHash", &err);
  if (rc) {
    d->failed++;
    logf_(d, "level=error msg=\"cannot recover session\" owner=%s rootPid=%llu error=\"%s\"", ss->owner,
          (unsigned long long)ss->root_pid, err.message);
    return 0;
  }
  xgr_persist_track(d->p, ss->owner, ss->root_pid, ss->next_iter, ss->next_group, ss->paused);
  xgr_effects fx;
  xgr_effects_init(&fx);
  xgr_session_config sc = {.max_running = d->cfg.max_running};
  xgr_session *s = xgr_store_restore_session(b->orch, l, &sc, xgr_engine_now(d->e), &fx, &err);
  if (!s) {
    xgr_effects_free(&fx);
    d->failed++;
    logf_(d, "level=error msg=\"cannot recover session\" owner=%s rootPid=%llu error=\"%s\"", ss->owner,
          (unsigned long long)ss->root_pid, err.message);
    return 0;
  }
  xgr_engine_start sr = {.bundle = b, .owner = ss->owner, .root_pid = ss->root_pid, .restore = s, .restore_fx = &fx};
  rc = xgr_engine_start_session(d->e, &sr, &err);
  xgr_effects_free(&fx);
  if (rc) {
    d->failed++;
    logf_(d, "level=error msg=\"cannot restart session\" owner=%s rootPid=%llu error=\"%s\"", ss->owner,
          (unsigned long long)ss->root_pid, err.message);
    return 0;
  }
  d->restored++;
  return 0;
}

xgr_rpcd *xgr_rpcd_new(const xgr_rpcd_config *cfg, xgr_error *err) {
  xgr_rpcd *d = calloc(1, sizeof *d);
  if (!d) return NULL;
  d->cfg = *cfg;
  pthread_mutex_init(&d->reg_mu, NULL);
  pthread_mutex_init(&d->w_mu, NULL);
  pthread_cond_init(&d->w_cv, NULL);
  for (int i = 0; i < STRIPES; i++) pthread_mutex_init(&d->stripe[i], NULL);
  xgr_store_config sc = {.sync = cfg->store_sync ? XGR_STORE_SYNC_NORMAL : XGR_STORE_SYNC_FULL,
                         .max_page_count = cfg->store_max_pages};
  d->st = xgr_store_open(cfg->store ? cfg->store : "memory:", &sc, err);
  if (!d->st) goto fail;
  d->p = xgr_persist_new(d->st);
  if (!d->p) goto fail;
  xgr_engine_config ec = {.workers = cfg->workers,
                          .max_running = cfg->max_running,
                          .store = xgr_persist_hook(d->p),
                          .clock = {.kind = XGR_CLOCK_REAL, .origin_ms = wall_ms()}};
  if (cfg->time_scale > 0 && cfg->time_scale != 1) {   /* scaled: Unix ms x scale, continuous across restarts */
    ec.clock.kind = XGR_CLOCK_SCALED;
    ec.clock.scale = cfg->time_scale;
    ec.clock.origin_ms = (int64_t)((double)wall_ms() * cfg->time_scale);
  }
  d->e = xgr_engine_new(&ec, err);
  if (!d->e) goto fail;
  if (xgr_engine_subscribe(d->e, on_event, d)) {
    xgr_error_set(err, XGR_ESTATE, NULL, "cannot subscribe to the engine's events");
    goto fail;
  }
  xgr_error le;
  if (xgr_store_load_live(d->st, recover_one, d, &le))
    logf_(d, "level=error msg=\"recovery stopped\" error=\"%s\"", le.message);
  logf_(d, "level=info msg=recovered store=%s sessions=%zu failed=%zu", xgr_store_backend(d->st), d->restored, d->failed);
  atomic_store(&d->ready, true);
  return d;
fail:
  xgr_rpcd_free(d);
  return NULL;
}

bool xgr_rpcd_ready(void *ctx) {
  xgr_rpcd *d = ctx;
  return atomic_load(&d->ready) && !atomic_load(&d->stopping) && !xgr_store_failed(d->st, NULL);
}

void xgr_rpcd_recovered(const xgr_rpcd *d, size_t *restored, size_t *failed) {
  *restored = d->restored;
  *failed = d->failed;
}

int xgr_rpcd_shutdown(xgr_rpcd *d, long timeout_ms) {
  atomic_store(&d->stopping, true);
  pthread_mutex_lock(&d->w_mu);
  pthread_cond_broadcast(&d->w_cv);
  pthread_mutex_unlock(&d->w_mu);
  int rc = d->e ? xgr_engine_shutdown(d->e, timeout_ms) : 0;
  if (d->st) xgr_store_flush(d->st);
  return rc;
}

void xgr_rpcd_free(xgr_rpcd *d) {
  if (!d) return;
  atomic_store(&d->stopping, true);
  xgr_engine_free(d->e);     /* shuts down: steps finish, batches are submitted */
  xgr_store_close(d->st);    /* commits what is queued */
  xgr_persist_free(d->p);
  for (regent *r = d->regs, *nx; r; r = nx) {
    nx = r->next;
    free(r->key);
    free(r);
  }
  for (bnode *b = d->bundles, *nx; b; b = nx) {
    nx = b->next;
    xgr_bundle_free(b->b);
    free(b);
  }
  for (int i = 0; i < STRIPES; i++) pthread_mutex_destroy(&d->stripe[i]);
  pthread_mutex_destroy(&d->reg_mu);
  pthread_mutex_destroy(&d->w_mu);
  pthread_cond_destroy(&d->w_cv);
  free(d);
}
