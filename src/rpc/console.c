/* console.c — the xgr console's server side (see console.h and docs/CONSOLE.md).
 *
 * GET /ui/...: the embedded pages and assets (web/, generated into console_assets.c at build
 * time; nothing is fetched from elsewhere), /ui/events (server-sent events, sse.c) and
 * /ui/graph.svg?hash=0x... (an orchestration laid out by Graphviz, xgr/svg.h, cached per hash:
 * registered bytes never change).
 *
 * Read-only JSON-RPC methods for what the pages show beyond the API's own methods. Each reads the
 * store (what is committed) and the engine (what is live), bounds every size the client controls,
 * and answers in time independent of the store's size where it can:
 *  - xgr.console.sessions: a page of one owner's sessions, newest first, filtered by registry,
 *    status, creation time range and step, scanning at most 20,000 rows or 40 ms per call (a cursor goes
 *    on where the scan stopped), plus live counts from the engine;
 *  - xgr.console.session: one session drawn for the graph: per step the processes waiting,
 *    running, done, aborted and paused; each join node's latest instance (k of n, the pieces in its
 *    inbox, its fail records, whether it can still be satisfied, its outcome); the edges that fired;
 *    and a page of processes (filtered by step and status) and of the history (times, durations,
 *    errors);
 *  - xgr.console.process: one process in full (payload, join inbox, `__wakeUp` allow list, error,
 *    its history rows);
 *  - xgr.console.registry: an orchestration with its versions, the rules its steps use (versions,
 *    hashes, owners) and its `xgr check` findings.
 * Reading needs the caller to be the owner (xgr_rpc_authorize, READ), as for xgr.listSessions.
 */
#include "rpc/console.h"

#include <assert.h>
#include <inttypes.h>
#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "util/alloc.h"
#include "xgr/orch.h"
#include "xgr/session.h"
#include "xgr/svg.h"

#define CACHE_MAX 64            /* orchestrations kept parsed (and drawn) per console */
#define SCAN_MAX 20000          /* session rows one xgr.console.sessions call looks at */
#define SCAN_MS 40              /* ... and for at most this long (checked per 1,000 rows) */
#define STEP_PROBE_MAX 200      /* sessions whose processes a step filter reads per call */
#define PAGE_MAX 500            /* processes / history rows per page */
#define LIVE_MAX 100000         /* live sessions counted for the live counts */

typedef struct centry {
  char hash[80];
  xgr_orch *orch;
  char *svg;                    /* drawn on first request, NULL until then */
  size_t svg_len;
  unsigned refs;
  uint64_t used;
} centry;

struct xgr__console {
  xgr_store *st;
  xgr_engine *e;
  xgr__sse_hub *hub;
  pthread_mutex_t mu;           /* the cache */
  centry cache[CACHE_MAX];
  uint64_t tick;
};

/* ---- parsed orchestrations by hash -------------------------------------------------------------- */

/* The entry for hash, parsed from the registry on first use, with a reference taken (release with
 * cache_put). NULL when nothing is registered under hash or it does not parse. */
static centry *cache_get(xgr__console *c, const char *hash) {
  if (!hash || !*hash || strlen(hash) >= sizeof c->cache[0].hash) return NULL;
  pthread_mutex_lock(&c->mu);
  for (size_t i = 0; i < CACHE_MAX; i++)
    if (c->cache[i].orch && !strcasecmp(c->cache[i].hash, hash)) {
      c->cache[i].refs++;
      c->cache[i].used = ++c->tick;
      pthread_mutex_unlock(&c->mu);
      return &c->cache[i];
    }
  pthread_mutex_unlock(&c->mu);
  xgr_store_doc doc = {0};
  xgr_error err;
  xgr_error_clear(&err);
  if (xgr_store_doc_by_hash(c->st, XGR_REG_ORCHESTRATION, hash, &doc, &err)) return NULL;
  xgr_orch *o = NULL;
  int rc = xgr_orch_parse(doc.content, doc.len, &o, &err, NULL);
  xgr_store_doc_clear(&doc);
  if (rc || !o) return NULL;
  pthread_mutex_lock(&c->mu);
  centry *slot = NULL;
  for (size_t i = 0; i < CACHE_MAX; i++) {
    centry *ce = &c->cache[i];
    if (ce->orch && !strcasecmp(ce->hash, hash)) {   /* another thread was faster */
      ce->refs++;
      pthread_mutex_unlock(&c->mu);
      xgr_orch_free(o);
      return ce;
    }
    if (ce->refs) continue;
    if (!slot || !ce->orch || (slot->orch && ce->used < slot->used)) slot = ce;
  }
  if (!slot) {   /* every entry is in use: answer this one uncached */
    pthread_mutex_unlock(&c->mu);
    centry *tmp = xgr__xcalloc(1, sizeof *tmp);
    snprintf(tmp->hash, sizeof tmp->hash, "%s", hash);
    tmp->orch = o;
    tmp->refs = 1;
    tmp->used = UINT64_MAX;   /* marks a private entry */
    return tmp;
  }
  xgr_orch_free(slot->orch);
  free(slot->svg);
  *slot = (centry){.orch = o, .refs = 1, .used = ++c->tick};
  snprintf(slot->hash, sizeof slot->hash, "%s", hash);
  pthread_mutex_unlock(&c->mu);
  return slot;
}

static void cache_put(xgr__console *c, centry *ce) {
  if (!ce) return;
  if (ce->used == UINT64_MAX) {
    xgr_orch_free(ce->orch);
    free(ce->svg);
    free(ce);
    return;
  }
  pthread_mutex_lock(&c->mu);
  assert(ce->refs > 0);
  ce->refs--;
  pthread_mutex_unlock(&c->mu);
}

/* ---- small helpers ------------------------------------------------------------------------------ */

static json_t *u64_str(uint64_t v) {
  char b[24];
  snprintf(b, sizeof b, "%" PRIu64, v);
  return json_string(b);
}

static json_t *pid_str(uint64_t root, uint64_t iter) {
  char b[48];
  snprintf(b, sizeof b, "%" PRIu64 ":%" PRIu64, root, iter);
  return json_string(b);
}

static void lower(char *s) {
  for (; *s; s++)
    if (*s >= 'A' && *s <= 'Z') *s = (char)(*s - 'A' + 'a');
}

static int bad(xgr_error *err, const char *path, const char *fmt, const char *v) {
  xgr_error_set(err, XGR_ESCHEMA, path, fmt, v);
  return XGR_RPC_INVALID_PARAMS;
}

/* Optional string parameter of at most max bytes. */
static int opt_str(const json_t *o, const char *key, size_t max, const char **out, xgr_error *err) {
  *out = NULL;
  const json_t *v = json_object_get(o, key);
  if (!v || json_is_null(v)) return 0;
  if (!json_is_string(v)) return bad(err, key, "is not a string; expected %s", "a string");
  if (json_string_length(v) > max) {
    xgr_error_set(err, XGR_ELIMIT, key, "is %zu bytes long; expected at most %zu", json_string_length(v), max);
    return XGR_RPC_LIMITS_EXCEEDED;
  }
  *out = json_string_value(v);
  return 0;
}

/* Optional unsigned parameter (a number or its decimal string) in [0, max]. */
static int opt_uint(const json_t *o, const char *key, uint64_t max, uint64_t dflt, uint64_t *out, xgr_error *err) {
  *out = dflt;
  const json_t *v = json_object_get(o, key);
  if (!v || json_is_null(v)) return 0;
  uint64_t u = 0;
  bool ok = false;
  if (json_is_integer(v) && json_integer_value(v) >= 0) {
    u = (uint64_t)json_integer_value(v);
    ok = true;
  } else if (json_is_string(v)) {
    const char *s = json_string_value(v);
    char *end;
    if (*s >= '0' && *s <= '9') {
      u = strtoull(s, &end, 10);
      ok = !*end;
    }
  }
  if (!ok) {
    char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    xgr_error_set(err, XGR_ESCHEMA, key, "is %.60s; expected a non-negative integer", t ? t : "?");
    free(t);
    return XGR_RPC_INVALID_PARAMS;
  }
  if (u > max) {
    xgr_error_set(err, XGR_ELIMIT, key, "is %" PRIu64 "; expected at most %" PRIu64, u, max);
    return XGR_RPC_LIMITS_EXCEEDED;
  }
  *out = u;
  return 0;
}

/* The owner the call reads: `owner` (or `from`), authorized for READ. */
static int read_owner(const xgr_rpc_caller *caller, const json_t *o, char *owner, size_t n, xgr_error *err) {
  const char *v;
  int rc = opt_str(o, "owner", 64, &v, err);
  if (rc) return rc;
  if (!v && (rc = opt_str(o, "from", 64, &v, err))) return rc;
  if (!v) return bad(err, "owner", "missing; expected %s", "the owner's address (0x + 40 hex)");
  if (!xgr_rpc_is_address(v)) return bad(err, "owner", "is \"%.80s\"; expected an address (0x + 40 hex)", v);
  snprintf(owner, n, "%s", v);
  lower(owner);
  char who[64];
  rc = xgr_rpc_authorize(caller, o, XGR_RPC_ACT_READ, owner, who, sizeof who, err);
  if (rc) return rc;
  if (who[0] && strcasecmp(who, owner)) {   /* one reads one's own sessions (as xgr.listSessions) */
    xgr_error_set(err, XGR_EPERM, "from", "%s may not read the sessions of %s (only the owner may)", who, owner);
    return XGR_RPC_NOT_PERMITTED;
  }
  return 0;
}

static int named(const json_t *params, const json_t **o, xgr_error *err) {
  int rc = xgr_rpc_params_object(params, o, err);
  if (rc) return rc;
  if (!*o) return bad(err, "", "%s", "params are missing; expected an object");
  return 0;
}

static const char *proc_status(const xgr_store_proc *p) {
  if (p->status == XGR_PROC_WAITING && p->paused) return "paused";
  return xgr_proc_status_name((xgr_proc_status)p->status);
}

/* ---- events ------------------------------------------------------------------------------------ */

static const char *const kind_names[] = {"proc", "join", "action", "wake", "finished", "idle", "store_error", "step"};

void xgr__console_on_event(void *ctx, const xgr_engine_event *ev) {
  xgr__console *c = ctx;
  json_t *j = json_object();
  json_object_set_new(j, "kind", json_string(ev->kind < sizeof kind_names / sizeof *kind_names ? kind_names[ev->kind] : "other"));
  json_object_set_new(j, "owner", json_string(ev->owner ? ev->owner : ""));
  json_object_set_new(j, "rootPid", u64_str(ev->root_pid));
  json_object_set_new(j, "now", json_integer(ev->now));
  if (ev->proc && (ev->kind == XGR_EEV_PROC || ev->kind == XGR_EEV_JOIN)) {
    const xgr_engine_proc *p = ev->proc;
    json_object_set_new(j, "pid", pid_str(ev->root_pid, p->iter));
    json_object_set_new(j, "step", json_string(p->step_id ? p->step_id : ""));
    json_object_set_new(j, "status", json_string(p->status == XGR_PROC_WAITING && p->paused
                                                     ? "paused"
                                                     : xgr_proc_status_name((xgr_proc_status)p->status)));
    if (p->valid >= 0) json_object_set_new(j, "valid", json_boolean(p->valid));
    if (p->error) json_object_set_new(j, "error", json_string(p->error));
    if (ev->kind == XGR_EEV_JOIN && p->join) json_object_set(j, "outcome", json_object_get(p->join, "outcome"));
  }
  if (ev->kind == XGR_EEV_STEP) {
    json_object_set_new(j, "pid", pid_str(ev->root_pid, ev->iter));
    json_object_set_new(j, "ok", json_boolean(ev->ok));
  }
  if (ev->message && ev->kind != XGR_EEV_STEP) json_object_set_new(j, "message", json_string(ev->message));
  if (ev->kind == XGR_EEV_ACTION || ev->kind == XGR_EEV_WAKE) json_object_set_new(j, "ok", json_boolean(ev->ok));
  if (ev->kind == XGR_EEV_FINISHED) json_object_set_new(j, "result", json_string(xgr_session_result_name(ev->result)));
  char *s = json_dumps(j, JSON_COMPACT);
  json_decref(j);
  if (s) xgr__sse_publish(c->hub, ev->owner, ev->root_pid, s);
  free(s);
}

/* ---- xgr.console.sessions -------------------------------------------------------------------- */

static const char *session_status(const xgr_store_session *s) {
  if (s->status == XGR_RESULT_RUNNING && s->paused) return "paused";
  return xgr_session_result_name((xgr_session_result)s->status);
}

/* Does a live process of session (owner, root) wait or run at step? */
static bool has_step(xgr__console *c, const char *owner, uint64_t root, const char *step) {
  xgr_store_proc *ps = NULL;
  size_t n = 0;
  xgr_error e;
  if (xgr_store_procs(c->st, owner, root, &ps, &n, &e)) return false;
  bool found = false;
  for (size_t i = 0; i < n && !found; i++)
    found = (ps[i].status == XGR_PROC_WAITING || ps[i].status == XGR_PROC_RUNNING) && ps[i].step_id &&
            !strcmp(ps[i].step_id, step);
  xgr_store_procs_free(ps, n);
  return found;
}

static int m_sessions(void *ctx, const xgr_rpc_caller *caller, const json_t *params, json_t **result, xgr_error *err) {
  xgr__console *c = ctx;
  const json_t *o;
  int rc = named(params, &o, err);
  if (rc) return rc;
  char owner[64];
  if ((rc = read_owner(caller, o, owner, sizeof owner, err))) return rc;
  const char *registry, *status, *step;
  uint64_t limit, before, since, until;
  if ((rc = opt_str(o, "registry", 200, &registry, err)) || (rc = opt_str(o, "status", 20, &status, err)) ||
      (rc = opt_str(o, "step", 200, &step, err)) || (rc = opt_uint(o, "limit", 200, 50, &limit, err)) ||
      (rc = opt_uint(o, "beforeRootPid", UINT64_MAX, 0, &before, err)) ||
      (rc = opt_uint(o, "since", INT64_MAX, 0, &since, err)) || (rc = opt_uint(o, "until", INT64_MAX, 0, &until, err)))
    return rc;
  if (status && strcmp(status, "running") && strcmp(status, "paused") && strcmp(status, "completed") &&
      strcmp(status, "killed") && strcmp(status, "live") && strcmp(status, "finished"))
    return bad(err, "status", "is \"%.20s\"; expected running, paused, live, completed, killed or finished", status);
  if (!limit) limit = 50;
  if (registry && !*registry) registry = NULL;
  if (step && !*step) step = NULL;
  json_t *items = json_array();
  size_t scanned = 0, probes = 0;
  uint64_t cursor = before, next = 0;
  bool more = true;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (more && json_array_size(items) < limit && scanned < SCAN_MAX) {
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (scanned && (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 >= SCAN_MS) break;
    xgr_store_session *ss = NULL;
    size_t n = 0;
    if ((rc = xgr_store_sessions(c->st, owner, cursor, 1000, &ss, &n, err))) {
      json_decref(items);
      return xgr_rpc_code_for(rc);
    }
    more = n == 1000;
    size_t i = 0;
    for (; i < n && json_array_size(items) < limit && scanned < SCAN_MAX; i++) {
      const xgr_store_session *s = &ss[i];
      scanned++;
      cursor = s->root_pid;
      if (registry && (!s->registry || strcmp(s->registry, registry))) continue;
      const char *st = session_status(s);
      bool live = s->status == XGR_RESULT_RUNNING;
      if (status && !(!strcmp(status, st) || (!strcmp(status, "live") && live) ||
                      (!strcmp(status, "finished") && !live) || (!strcmp(status, "running") && live && !s->paused)))
        continue;
      if (since && s->created_at < (int64_t)since) continue;
      if (until && s->created_at > (int64_t)until) continue;
      if (step) {
        if (!live) continue;
        if (probes++ >= STEP_PROBE_MAX) { /* bounded: the cursor resumes here */
          cursor = s->root_pid + 1;
          scanned = SCAN_MAX;
          break;
        }
        if (!has_step(c, owner, s->root_pid, step)) continue;
      }
      json_t *it = json_pack("{s:s, s:o, s:s, s:s, s:s, s:s, s:I, s:I, s:b}", "owner", s->owner, "rootPid",
                             u64_str(s->root_pid), "registry", s->registry ? s->registry : "", "ostcId",
                             s->ostc_id ? s->ostc_id : "", "ostcHash", s->ostc_hash ? s->ostc_hash : "", "status", st,
                             "createdAt", (json_int_t)s->created_at, "finishedAt", (json_int_t)s->finished_at,
                             "paused", s->paused);
      xgr_engine_session_info info;
      if (live && !xgr_engine_session(c->e, owner, s->root_pid, &info) && !info.finished) {
        json_object_set_new(it, "live", json_integer((json_int_t)info.live));
        json_object_set_new(it, "running", json_integer((json_int_t)info.running));
        json_object_set_new(it, "steps", json_integer((json_int_t)info.steps));
      }
      json_array_append_new(items, it);
    }
    if (i < n || scanned >= SCAN_MAX) more = true;
    xgr_store_sessions_free(ss, n);
    if (!n) more = false;
  }
  if (more && cursor > 1) next = cursor;
  /* live counts: the engine's sessions (live ones) of this owner */
  size_t cap = 4096;
  xgr_engine_session_info *all = xgr__xmalloc(cap * sizeof *all);
  size_t total = xgr_engine_list(c->e, all, cap);
  if (total > cap) {
    cap = total < LIVE_MAX ? total + 256 : LIVE_MAX;
    all = xgr__xrealloc(all, cap * sizeof *all);
    total = xgr_engine_list(c->e, all, cap);
  }
  size_t got = total < cap ? total : cap;
  uint64_t live_sessions = 0, running_sessions = 0, procs = 0, running = 0, idle = 0;
  for (size_t i = 0; i < got; i++) {
    if (all[i].finished || strcasecmp(all[i].owner, owner)) continue;
    live_sessions++;
    procs += all[i].live;
    running += all[i].running;
    if (all[i].running) running_sessions++;
    if (all[i].idle) idle++;
  }
  free(all);
  json_t *counts = json_pack("{s:I, s:I, s:I, s:I, s:I, s:b, s:I}", "liveSessions", (json_int_t)live_sessions,
                             "runningSessions", (json_int_t)running_sessions, "idleSessions", (json_int_t)idle,
                             "liveProcesses", (json_int_t)procs, "runningProcesses", (json_int_t)running, "partial",
                             total > got, "engineSessions", (json_int_t)total);
  *result = json_pack("{s:o, s:I, s:o, s:I}", "items", items, "scanned", (json_int_t)scanned, "counts", counts,
                      "eventId", (json_int_t)xgr__sse_last_id(c->hub));
  if (next) json_object_set_new(*result, "nextBeforeRootPid", u64_str(next));
  return 0;
}

/* ---- xgr.console.session ----------------------------------------------------------------------- */

/* A join node's state from a process's join (the core's restore form): the node id, k of n,
 * which `from` pieces arrived or failed, whether it can still be satisfied. NULL if unreadable. */
static json_t *join_state(const xgr_orch *o, const char *text, char *node, size_t nn, int *decl_step, int *decl_branch) {
  json_t *j = text ? json_loads(text, 0, NULL) : NULL;
  if (!j) return NULL;
  json_t *decl = json_object_get(j, "decl");
  json_int_t si = json_integer_value(json_array_get(decl, 0)), bi = json_integer_value(json_array_get(decl, 1));
  if (!o || si < 0 || (size_t)si >= o->nsteps || bi < 0 || bi > 1 || !o->steps[si].branch[bi].join) {
    json_decref(j);
    return NULL;
  }
  const xgr_join *dj = o->steps[si].branch[bi].join;
  snprintf(node, nn, "join-%s-%s", o->steps[si].id, bi == XGR_ON_VALID ? "valid" : "invalid");
  *decl_step = (int)si;
  *decl_branch = (int)bi;
  json_t *arrived = json_array(), *failed = json_array(), *pending = json_array(), *inbox = json_object(),
         *from = json_array();
  json_t *in = json_object_get(j, "inbox"), *fl = json_object_get(j, "fail");
  unsigned have = 0, lost = 0;
  for (unsigned k = 0; k < dj->n; k++) {
    const char *sid = o->steps[dj->from[k].node].id;
    json_array_append_new(from, json_pack("{s:s, s:s}", "step", sid, "when", xgr_when_name(dj->from[k].when)));
    json_t *piece = json_array_get(in, k);
    if (piece && !json_is_null(piece)) {
      json_array_append_new(arrived, json_string(sid));
      json_object_set(inbox, sid, piece);
      have++;
    } else if (json_is_true(json_array_get(fl, k))) {
      json_array_append_new(failed, json_string(sid));
      lost++;
    } else {
      json_array_append_new(pending, json_string(sid));
    }
  }
  bool closed = json_is_true(json_object_get(j, "closed"));
  json_int_t oc = json_integer_value(json_object_get(j, "outcome"));
  const char *outcome = xgr_join_outcome_name((xgr_join_outcome)oc);
  bool satisfiable = closed ? !strcmp(outcome, "satisfied") : have + (dj->n - have - lost) >= dj->k;
  json_t *v = json_pack("{s:s, s:s, s:s, s:i, s:i, s:s, s:o, s:o, s:o, s:o, s:o, s:b, s:s, s:b, s:i}", "node", node,
                        "declaredBy", o->steps[si].id, "target", o->steps[dj->target].id, "k", (int)dj->k, "n",
                        (int)dj->n, "policy", xgr_policy_name(dj->policy), "from", from, "arrived", arrived, "failed",
                        failed, "pending", pending, "inbox", inbox, "closed", closed, "outcome", outcome,
                        "satisfiable", satisfiable, "have", (int)have);
  if (closed) json_object_set_new(v, "closedAt", json_integer(json_integer_value(json_object_get(j, "closedAt"))));
  json_decref(j);
  return v;
}

/* The process at iter in ps (sorted by iter), or NULL. */
static const xgr_store_proc *by_iter(const xgr_store_proc *ps, size_t n, uint64_t iter) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (ps[mid].iter < iter) lo = mid + 1;
    else hi = mid;
  }
  return lo < n && ps[lo].iter == iter ? &ps[lo] : NULL;
}

static json_t *proc_item(uint64_t root, const xgr_store_proc *p) {
  json_t *it = json_pack("{s:o, s:o, s:I, s:s, s:s, s:I, s:I, s:I, s:b}", "pid", pid_str(root, p->iter), "parentPid",
                         p->parent_iter ? pid_str(root, p->parent_iter) : json_null(), "iter", (json_int_t)p->iter,
                         "step", p->step_id ? p->step_id : "", "status", proc_status(p), "createdAt",
                         (json_int_t)p->created_at, "startedAt", (json_int_t)p->started_at, "finishedAt",
                         (json_int_t)p->finished_at, "join", p->join != NULL);
  json_object_set_new(it, "valid", p->valid < 0 ? json_null() : json_boolean(p->valid));
  if (p->status == XGR_PROC_WAITING)
    json_object_set_new(it, "nextWakeAt", p->next_wake_at == XGR_NEVER ? json_null() : json_integer(p->next_wake_at));
  if (p->status == XGR_PROC_ABORTED)
    json_object_set_new(it, "abortReason", json_string(xgr_abort_reason_name(p->abort_reason)));
  if (p->error) json_object_set_new(it, "error", json_string(p->error));
  return it;
}

static json_t *hist_item(uint64_t root, const xgr_store_hist *h) {
  json_t *it = json_pack("{s:o, s:o, s:s, s:s, s:I, s:I}", "pid", pid_str(root, h->iter), "parentPid",
                         h->parent_iter ? pid_str(root, h->parent_iter) : json_null(), "step",
                         h->step_id ? h->step_id : "", "status", xgr_proc_status_name((xgr_proc_status)h->status),
                         "at", (json_int_t)h->at, "finishedAt", (json_int_t)h->finished_at);
  json_object_set_new(it, "valid", h->valid < 0 ? json_null() : json_boolean(h->valid));
  json_object_set_new(it, "durationMs", json_integer(h->finished_at >= h->at ? h->finished_at - h->at : 0));
  if (h->error) json_object_set_new(it, "error", json_string(h->error));
  if (h->status == XGR_PROC_ABORTED) json_object_set_new(it, "abortReason", json_string(xgr_abort_reason_name(h->abort_reason)));
  json_t *api = h->api ? json_loads(h->api, 0, NULL) : NULL;   /* [{"name","status","ms","url","error"}] */
  if (json_is_array(api)) json_object_set_new(it, "apiCalls", api);
  else json_decref(api);
  return it;
}

static int session_row(xgr__console *c, const char *owner, uint64_t root, xgr_store_session *s, json_t **out,
                       xgr_error *err) {
  int rc = xgr_store_session_get(c->st, owner, root, s, err);
  if (rc) {
    if (rc == XGR_ENOTFOUND) xgr_error_set(err, rc, "rootPid", "no session %s/%" PRIu64, owner, root);
    return xgr_rpc_code_for(rc);
  }
  xgr_engine_session_info info;
  bool live = !xgr_engine_session(c->e, owner, root, &info) && !info.finished;
  *out = json_pack("{s:s, s:o, s:s, s:s, s:s, s:s, s:I, s:I, s:b, s:b}", "owner", s->owner, "rootPid",
                   u64_str(s->root_pid), "registry", s->registry ? s->registry : "", "ostcId",
                   s->ostc_id ? s->ostc_id : "", "ostcHash", s->ostc_hash ? s->ostc_hash : "", "status",
                   session_status(s), "createdAt", (json_int_t)s->created_at, "finishedAt",
                   (json_int_t)s->finished_at, "paused", s->paused, "alive", live);
  if (live) {
    json_object_set_new(*out, "steps", json_integer((json_int_t)info.steps));
    json_object_set_new(*out, "now", json_integer(info.now));
    json_object_set_new(*out, "idle", json_boolean(info.idle));
  }
  return 0;
}

static int root_param(const json_t *o, uint64_t *root, uint64_t *iter, xgr_error *err) {
  *iter = 0;
  const json_t *v = json_object_get(o, "rootPid");
  const char *key = "rootPid";
  if (!v) {
    v = json_object_get(o, "pid");
    key = "pid";
  }
  if (json_is_integer(v) && json_integer_value(v) > 0) {
    *root = (uint64_t)json_integer_value(v);
    return 0;
  }
  if (json_is_string(v)) {
    const char *s = json_string_value(v);
    char *end;
    if (*s >= '1' && *s <= '9') {
      *root = strtoull(s, &end, 10);
      if (!*end) return 0;
      if (*end == ':' && end[1] >= '1' && end[1] <= '9') {
        char *e2;
        *iter = strtoull(end + 1, &e2, 10);
        if (!*e2) return 0;
      }
    }
  }
  return bad(err, key, "is missing or malformed; expected %s", "a session id \"R\" or a pid \"R:I\"");
}

static int m_session(void *ctx, const xgr_rpc_caller *caller, const json_t *params, json_t **result, xgr_error *err) {
  xgr__console *c = ctx;
  const json_t *o;
  int rc = named(params, &o, err);
  if (rc) return rc;
  char owner[64];
  uint64_t root, iter, poff, plim, hoff, hlim;
  const char *pstep, *pstatus, *horder;
  if ((rc = read_owner(caller, o, owner, sizeof owner, err)) || (rc = root_param(o, &root, &iter, err)) ||
      (rc = opt_uint(o, "procOffset", UINT32_MAX, 0, &poff, err)) ||
      (rc = opt_uint(o, "procLimit", PAGE_MAX, 100, &plim, err)) ||
      (rc = opt_uint(o, "histOffset", UINT32_MAX, 0, &hoff, err)) ||
      (rc = opt_uint(o, "histLimit", PAGE_MAX, 100, &hlim, err)) || (rc = opt_str(o, "procStep", 200, &pstep, err)) ||
      (rc = opt_str(o, "procStatus", 20, &pstatus, err)) || (rc = opt_str(o, "histOrder", 8, &horder, err)))
    return rc;
  if (horder && strcmp(horder, "asc") && strcmp(horder, "desc"))
    return bad(err, "histOrder", "is \"%.20s\"; expected asc or desc", horder);
  bool desc = !horder || !strcmp(horder, "desc");
  if (pstep && !*pstep) pstep = NULL;
  if (pstatus && !*pstatus) pstatus = NULL;
  xgr_store_session s = {0};
  json_t *sess;
  if ((rc = session_row(c, owner, root, &s, &sess, err))) return rc;
  centry *ce = cache_get(c, s.ostc_hash);
  const xgr_orch *orch = ce ? ce->orch : NULL;
  xgr_store_session_clear(&s);

  xgr_store_proc *ps = NULL;
  size_t n = 0;
  if ((rc = xgr_store_procs(c->st, owner, root, &ps, &n, err))) {
    cache_put(c, ce);
    json_decref(sess);
    return xgr_rpc_code_for(rc);
  }
  /* per step counts; the step order of the orchestration, then steps it does not know */
  json_t *steps = json_object(), *joins = json_object(), *fired = json_object(), *items = json_array();
  if (orch)
    for (size_t i = 0; i < orch->nsteps; i++)
      json_object_set_new(steps, orch->steps[i].id,
                          json_pack("{s:i, s:i, s:i, s:i, s:i}", "waiting", 0, "running", 0, "done", 0, "aborted", 0,
                                    "paused", 0));
  size_t matched = 0;
  for (size_t i = 0; i < n; i++) {
    const xgr_store_proc *p = &ps[i];
    const char *sid = p->step_id ? p->step_id : "?";
    json_t *cnt = json_object_get(steps, sid);
    if (!cnt) {
      cnt = json_pack("{s:i, s:i, s:i, s:i, s:i}", "waiting", 0, "running", 0, "done", 0, "aborted", 0, "paused", 0);
      json_object_set_new(steps, sid, cnt);
    }
    const char *st = proc_status(p);
    json_object_set_new(cnt, st, json_integer(json_integer_value(json_object_get(cnt, st)) + 1));
    /* edges that fired */
    char eid[600];
    if (p->join && orch) {
      char node[300];
      int ds = 0, db = 0;
      json_t *js = join_state(orch, p->join, node, sizeof node, &ds, &db);
      if (js) {
        const char *bn = db == XGR_ON_VALID ? "valid" : "invalid";
        snprintf(eid, sizeof eid, "open-%s-%s", orch->steps[ds].id, bn);
        json_object_set_new(fired, eid, json_true());
        size_t k;
        json_t *a;
        json_array_foreach(json_object_get(js, "arrived"), k, a) {
          snprintf(eid, sizeof eid, "from-%s-%s-%s", json_string_value(a), orch->steps[ds].id, bn);
          json_object_set_new(fired, eid, json_true());
        }
        if (!strcmp(json_string_value(json_object_get(js, "outcome")), "satisfied")) {
          snprintf(eid, sizeof eid, "target-%s-%s", orch->steps[ds].id, bn);
          json_object_set_new(fired, eid, json_true());
        }
        json_object_set_new(js, "pid", pid_str(root, p->iter));
        json_object_set_new(js, "targetStatus", json_string(st));
        json_t *prev = json_object_get(joins, node);
        json_int_t inst = prev ? json_integer_value(json_object_get(prev, "instances")) + 1 : 1;
        json_object_set_new(js, "instances", json_integer(inst));
        json_object_set_new(joins, node, js);   /* the latest instance (highest iter) wins */
      }
    } else if (p->parent_iter) {
      const xgr_store_proc *par = by_iter(ps, n, p->parent_iter);
      if (par && par->step_id && p->step_id) {
        snprintf(eid, sizeof eid, "spawn-%s-%s-%s", par->step_id, p->step_id, par->valid == 0 ? "invalid" : "valid");
        json_object_set_new(fired, eid, json_true());
      }
    }
    if (pstep && strcmp(pstep, sid)) continue;
    if (pstatus && strcmp(pstatus, st)) continue;
    if (matched++ < poff || json_array_size(items) >= plim) continue;
    json_array_append_new(items, proc_item(root, p));
  }
  xgr_store_procs_free(ps, n);
  json_t *running = json_array();
  const char *k;
  json_t *v;
  json_object_foreach(steps, k, v) if (json_integer_value(json_object_get(v, "running"))) json_array_append_new(running, json_string(k));

  xgr_store_hist *hs = NULL;
  size_t nh = 0;
  json_t *hist = json_array();
  if (!xgr_store_history(c->st, owner, root, &hs, &nh, err)) {
    for (uint64_t i = hoff; i < nh && json_array_size(hist) < hlim; i++)
      json_array_append_new(hist, hist_item(root, &hs[desc ? nh - 1 - i : i]));
    xgr_store_hists_free(hs, nh);
  }
  xgr_error_clear(err);
  *result = json_pack("{s:o, s:o, s:o, s:o, s:o, s:{s:I, s:I, s:o}, s:{s:I, s:I, s:o}, s:I}", "session", sess, "steps",
                      steps, "running", running, "joins", joins, "fired", fired, "processes", "total",
                      (json_int_t)matched, "offset", (json_int_t)poff, "items", items, "history", "total",
                      (json_int_t)nh, "offset", (json_int_t)hoff, "items", hist, "eventId",
                      (json_int_t)xgr__sse_last_id(c->hub));
  if (orch) {
    json_t *order = json_array();
    for (size_t i = 0; i < orch->nsteps; i++) json_array_append_new(order, json_string(orch->steps[i].id));
    json_object_set_new(*result, "stepOrder", order);
  }
  cache_put(c, ce);
  return 0;
}

/* ---- xgr.console.process ----------------------------------------------------------------------- */

static int m_process(void *ctx, const xgr_rpc_caller *caller, const json_t *params, json_t **result, xgr_error *err) {
  xgr__console *c = ctx;
  const json_t *o;
  int rc = named(params, &o, err);
  if (rc) return rc;
  char owner[64];
  uint64_t root, iter;
  if ((rc = read_owner(caller, o, owner, sizeof owner, err)) || (rc = root_param(o, &root, &iter, err))) return rc;
  if (!iter) return bad(err, "pid", "names a session; expected %s", "a process id \"R:I\"");
  xgr_store_session s = {0};
  json_t *sess;
  if ((rc = session_row(c, owner, root, &s, &sess, err))) return rc;
  centry *ce = cache_get(c, s.ostc_hash);
  xgr_store_session_clear(&s);
  xgr_store_proc *ps = NULL;
  size_t n = 0;
  if ((rc = xgr_store_procs(c->st, owner, root, &ps, &n, err))) {
    cache_put(c, ce);
    json_decref(sess);
    return xgr_rpc_code_for(rc);
  }
  const xgr_store_proc *p = by_iter(ps, n, iter);
  if (!p) {
    xgr_store_procs_free(ps, n);
    cache_put(c, ce);
    json_decref(sess);
    xgr_error_set(err, XGR_ENOTFOUND, "pid", "no process %" PRIu64 ":%" PRIu64 " of %s", root, iter, owner);
    return XGR_RPC_NOT_FOUND;
  }
  json_t *it = proc_item(root, p);
  json_t *payload = p->payload ? json_loads(p->payload, JSON_DECODE_ANY, NULL) : NULL;
  json_object_set_new(it, "payload", payload ? payload : json_null());
  json_t *wake = json_is_object(payload) ? json_object_get(payload, "__wakeUp") : NULL;
  json_object_set(it, "wakeUp", wake ? wake : json_null());
  char node[300];
  int ds, db;
  json_t *js = p->join && ce ? join_state(ce->orch, p->join, node, sizeof node, &ds, &db) : NULL;
  json_object_set_new(it, "joinState", js ? js : json_null());
  json_t *children = json_array();
  for (size_t i = 0; i < n && json_array_size(children) < PAGE_MAX; i++)
    if (ps[i].parent_iter == iter) json_array_append_new(children, pid_str(root, ps[i].iter));
  json_object_set_new(it, "children", children);
  xgr_store_procs_free(ps, n);
  cache_put(c, ce);
  xgr_store_hist *hs = NULL;
  size_t nh = 0;
  json_t *hist = json_array();
  if (!xgr_store_history(c->st, owner, root, &hs, &nh, err)) {
    for (size_t i = 0; i < nh; i++) {
      if (hs[i].iter != iter) continue;
      json_t *h = hist_item(root, &hs[i]);
      json_t *pl = hs[i].payload ? json_loads(hs[i].payload, JSON_DECODE_ANY, NULL) : NULL;
      json_object_set_new(h, "payload", pl ? pl : json_null());
      json_array_append_new(hist, h);
    }
    xgr_store_hists_free(hs, nh);
  }
  xgr_error_clear(err);
  json_object_set_new(it, "history", hist);
  *result = json_pack("{s:o, s:o}", "session", sess, "process", it);
  return 0;
}

/* ---- xgr.console.registry ---------------------------------------------------------------------- */

/* Every version of (kind, id), oldest first (at most 100 listed). */
static json_t *versions(xgr__console *c, xgr_registry_kind kind, const char *id, uint32_t *latest) {
  json_t *out = json_array();
  xgr_store_doc d = {0};
  xgr_error e;
  *latest = 0;
  if (xgr_store_doc_get(c->st, kind, id, 0, &d, &e)) return out;
  *latest = d.version;
  xgr_store_doc_clear(&d);
  uint32_t first = *latest > 100 ? *latest - 99 : 1;
  for (uint32_t v = first; v <= *latest; v++) {
    if (xgr_store_doc_get(c->st, kind, id, v, &d, &e)) continue;
    json_array_append_new(out, json_pack("{s:I, s:s, s:s, s:I}", "version", (json_int_t)d.version, "hash", d.hash,
                                         "owner", d.owner ? d.owner : "", "registeredAt", (json_int_t)d.registered_at));
    xgr_store_doc_clear(&d);
  }
  return out;
}

/* The registry key of a step's rule reference: "${addr:X}" -> X, an address lowercased, else as is. */
static void rule_key(const char *ref, char *out, size_t n) {
  size_t len = strlen(ref);
  if (len > 8 && !strncmp(ref, "${addr:", 7) && ref[len - 1] == '}') snprintf(out, n, "%.*s", (int)(len - 8), ref + 7);
  else snprintf(out, n, "%s", ref);
  if (xgr_rpc_is_address(out)) lower(out);
}

static int m_registry(void *ctx, const xgr_rpc_caller *caller, const json_t *params, json_t **result, xgr_error *err) {
  xgr__console *c = ctx;
  const json_t *o;
  int rc = named(params, &o, err);
  if (rc) return rc;
  const char *reg, *ostc, *hash;
  uint64_t version;
  if ((rc = opt_str(o, "registry", 200, &reg, err)) || (rc = opt_str(o, "ostcId", 200, &ostc, err)) ||
      (rc = opt_str(o, "hash", 80, &hash, err)) || (rc = opt_uint(o, "version", UINT32_MAX, 0, &version, err)))
    return rc;
  char who[64];
  if ((rc = xgr_rpc_authorize(caller, o, XGR_RPC_ACT_READ, NULL, who, sizeof who, err))) return rc;
  xgr_store_doc d = {0};
  char id[420];
  if (hash && *hash) {
    rc = xgr_store_doc_by_hash(c->st, XGR_REG_ORCHESTRATION, hash, &d, err);
    if (!rc) snprintf(id, sizeof id, "%s", d.id);
  } else {
    if (!reg || !*reg) return bad(err, "registry", "missing; expected %s", "a registry (XRC-729 address or name) or a hash");
    char r[210];
    snprintf(r, sizeof r, "%s", reg);
    if (xgr_rpc_is_address(r)) lower(r);
    if (ostc && *ostc) snprintf(id, sizeof id, "%s/%s", r, ostc);
    else snprintf(id, sizeof id, "%s", r);
    rc = xgr_store_doc_get(c->st, XGR_REG_ORCHESTRATION, id, (uint32_t)version, &d, err);
  }
  if (rc) {
    if (rc == XGR_ENOTFOUND)
      xgr_error_set(err, rc, hash && *hash ? "hash" : "registry", "no orchestration is registered under \"%s\"",
                    hash && *hash ? hash : id);
    return xgr_rpc_code_for(rc);
  }
  uint32_t latest;
  json_t *vers = versions(c, XGR_REG_ORCHESTRATION, id, &latest);
  xgr_diags diags;
  xgr_diags_init(&diags);
  xgr_orch *orch = NULL;
  xgr_error pe;
  xgr_error_clear(&pe);
  if (!xgr_orch_parse(d.content, d.len, &orch, &pe, &diags) && orch) xgr_orch_analyze(orch, &diags);
  json_t *findings = json_array();
  for (size_t i = 0; i < diags.n; i++)
    json_array_append_new(findings, json_pack("{s:s, s:s, s:s, s:s}", "severity",
                                              diags.items[i].severity == XGR_SEV_ERROR     ? "error"
                                              : diags.items[i].severity == XGR_SEV_WARNING ? "warning"
                                                                                           : "info",
                                              "code", diags.items[i].code ? diags.items[i].code : "", "path",
                                              diags.items[i].path ? diags.items[i].path : "", "message",
                                              diags.items[i].message ? diags.items[i].message : ""));
  xgr_diags_free(&diags);
  json_t *steps = json_array();
  for (size_t i = 0; orch && i < orch->nsteps; i++) {
    char key[300];
    rule_key(orch->steps[i].rule, key, sizeof key);
    uint32_t rl;
    json_t *rv = versions(c, XGR_REG_RULE, key, &rl);
    json_array_append_new(steps, json_pack("{s:s, s:s, s:s, s:o}", "step", orch->steps[i].id, "rule",
                                           orch->steps[i].rule, "ruleKey", key, "ruleVersions", rv));
  }
  json_t *doc = json_loadb(d.content, d.len, 0, NULL);
  *result = json_pack("{s:s, s:I, s:I, s:s, s:s, s:I, s:o, s:o, s:o, s:o, s:s}", "id", id, "version",
                      (json_int_t)d.version, "latest", (json_int_t)latest, "hash", d.hash, "owner",
                      d.owner ? d.owner : "", "registeredAt", (json_int_t)d.registered_at, "versions", vers,
                      "steps", steps, "findings", findings, "orchestration", doc ? doc : json_null(), "graph",
                      "/ui/graph.svg");
  char url[120];
  snprintf(url, sizeof url, "/ui/graph.svg?hash=%s", d.hash);
  json_object_set_new(*result, "graph", json_string(url));
  xgr_store_doc_clear(&d);
  xgr_orch_free(orch);
  return 0;
}

/* ---- xgr.console.owners ----------------------------------------------------------------------- */

typedef struct owner_count {
  char owner[64];
  size_t n;
} owner_count;

static int by_owner(const void *a, const void *b) {
  return strcasecmp(((const xgr_engine_session_info *)a)->owner, ((const xgr_engine_session_info *)b)->owner);
}

static int by_count_desc(const void *a, const void *b) {
  size_t x = ((const owner_count *)a)->n, y = ((const owner_count *)b)->n;
  return x < y ? 1 : x > y ? -1 : strcmp(((const owner_count *)a)->owner, ((const owner_count *)b)->owner);
}

/* The owners with live sessions in the engine (at most 100, most live sessions first), so the page
 * has somewhere to start. Only under --auth none: with permits one reads one's own sessions. */
static int m_owners(void *ctx, const xgr_rpc_caller *caller, const json_t *params, json_t **result, xgr_error *err) {
  xgr__console *c = ctx;
  (void)params;
  if (!caller || !caller->auth_none) {
    xgr_error_set(err, XGR_EPERM, "from", "listing every owner needs --auth none; with permits one reads one's own sessions");
    return XGR_RPC_NOT_PERMITTED;
  }
  size_t cap = 4096;
  xgr_engine_session_info *all = xgr__xmalloc(cap * sizeof *all);
  size_t total = xgr_engine_list(c->e, all, cap);
  if (total > cap) {
    cap = total < LIVE_MAX ? total + 256 : LIVE_MAX;
    all = xgr__xrealloc(all, cap * sizeof *all);
    total = xgr_engine_list(c->e, all, cap);
  }
  size_t got = total < cap ? total : cap, k = 0;
  qsort(all, got, sizeof *all, by_owner);
  owner_count *oc = xgr__xcalloc(got ? got : 1, sizeof *oc);
  for (size_t i = 0; i < got; i++) {
    if (all[i].finished) continue;
    if (!k || strcasecmp(oc[k - 1].owner, all[i].owner)) {
      snprintf(oc[k].owner, sizeof oc[k].owner, "%s", all[i].owner);
      lower(oc[k].owner);
      k++;
    }
    oc[k - 1].n++;
  }
  free(all);
  qsort(oc, k, sizeof *oc, by_count_desc);
  json_t *items = json_array();
  for (size_t i = 0; i < k && i < 100; i++)
    json_array_append_new(items, json_pack("{s:s, s:I}", "owner", oc[i].owner, "liveSessions", (json_int_t)oc[i].n));
  free(oc);
  *result = json_pack("{s:o, s:b}", "items", items, "partial", total > got);
  return 0;
}

/* ---- xgr.console.info ---------------------------------------------------------------------------- */

/* What the pages need to know first: how actions are authorized, and the event stream's position. */
static int m_info(void *ctx, const xgr_rpc_caller *caller, const json_t *params, json_t **result, xgr_error *err) {
  xgr__console *c = ctx;
  (void)params;
  (void)err;
  *result = json_pack("{s:s, s:I}", "auth", caller && caller->auth_none ? "none" : "permit", "eventId",
                      (json_int_t)xgr__sse_last_id(c->hub));
  return 0;
}

/* ---- GET /ui ------------------------------------------------------------------------------------- */

static int send_buf(struct MHD_Connection *c, unsigned status, const char *type, const void *data, size_t len,
                    enum MHD_ResponseMemoryMode mode, const char *cache) {
  struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)data, mode);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, "Content-Type", type);
  MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
  MHD_add_response_header(r, "Content-Security-Policy",
                          "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:");
  if (cache) MHD_add_response_header(r, "Cache-Control", cache);
  enum MHD_Result ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ret;
}

static int send_text(struct MHD_Connection *c, unsigned status, const char *msg) {
  return send_buf(c, status, "text/plain; charset=utf-8", msg, strlen(msg), MHD_RESPMEM_MUST_COPY, "no-store");
}

static int graph_svg(xgr__console *c, struct MHD_Connection *conn) {
  const char *hash = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "hash");
  if (!hash || strlen(hash) != 66) return send_text(conn, MHD_HTTP_BAD_REQUEST, "hash: expected 0x + 64 hex\n");
  centry *ce = cache_get(c, hash);
  if (!ce) return send_text(conn, MHD_HTTP_NOT_FOUND, "no orchestration is registered under that hash\n");
  pthread_mutex_lock(&c->mu);
  char *svg = ce->svg ? xgr__xstrdup(ce->svg) : NULL;
  size_t len = ce->svg_len;
  pthread_mutex_unlock(&c->mu);
  if (!svg) {
    xgr_error e;
    xgr_error_clear(&e);
    char *drawn = NULL;
    if (xgr_orch_svg(ce->orch, &drawn, &len, &e)) {
      cache_put(c, ce);
      char msg[XGR_MSG_MAX + 2];
      snprintf(msg, sizeof msg, "%s\n", e.message);
      return send_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, msg);
    }
    svg = xgr__xstrdup(drawn);
    pthread_mutex_lock(&c->mu);
    if (!ce->svg) {
      ce->svg = drawn;
      ce->svg_len = len;
      drawn = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    free(drawn);
  }
  cache_put(c, ce);
  return send_buf(conn, MHD_HTTP_OK, "image/svg+xml", svg, len, MHD_RESPMEM_MUST_FREE, "public, max-age=86400");
}

/* GET /ui/events: a stream of one owner's events (or, under --auth none, of everyone's). In permit
 * mode an EventSource cannot send headers, so the reader's xdalaPermit comes as the query argument
 * `permit` (its JSON text) and must be the owner's, as for xgr.console.sessions. */
static int serve_events(xgr__console *c, const xgr_rpc_caller *caller, struct MHD_Connection *conn) {
  const char *owner = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "owner");
  const char *root = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "rootPid");
  const char *last = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Last-Event-ID");
  const char *permit = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "permit");
  if (!last) last = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "after");
  if (owner && *owner && !xgr_rpc_is_address(owner))
    return send_text(conn, MHD_HTTP_BAD_REQUEST, "owner: expected an address (0x + 40 hex)\n");
  if (!caller->auth_none) {
    if (!owner || !*owner) return send_text(conn, MHD_HTTP_FORBIDDEN, "owner: required (whose events)\n");
    if (permit && strlen(permit) > 16384) return send_text(conn, MHD_HTTP_FORBIDDEN, "permit: too long\n");
    json_t *p = permit ? json_loads(permit, 0, NULL) : NULL;
    json_t *params = json_pack("{s:s}", "owner", owner);
    if (p) json_object_set_new(params, "permit", p);
    char o[64];
    xgr_error err;
    xgr_error_clear(&err);
    int rc = read_owner(caller, params, o, sizeof o, &err);
    json_decref(params);
    if (rc) {
      char msg[XGR_MSG_MAX + 300];
      snprintf(msg, sizeof msg, "%s: %s\n", err.path[0] ? err.path : "permit", err.message);
      return send_text(conn, MHD_HTTP_FORBIDDEN, msg);
    }
  }
  return xgr__sse_serve(c->hub, conn, owner, root ? strtoull(root, NULL, 10) : 0, last ? strtoull(last, NULL, 10) : 0);
}

static int serve_ui(void *ctx, const xgr_rpc_caller *caller, struct MHD_Connection *conn, const char *url) {
  xgr__console *c = ctx;
  if (!strcmp(url, "/ui")) {
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Location", "/ui/");
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_MOVED_PERMANENTLY, r);
    MHD_destroy_response(r);
    return ret;
  }
  if (!strcmp(url, "/ui/events")) return serve_events(c, caller, conn);
  if (!strcmp(url, "/ui/graph.svg")) return graph_svg(c, conn);
  const char *path = !strcmp(url, "/ui/") ? "/ui/index.html" : url;
  for (size_t i = 0; i < xgr__console_nassets; i++)
    if (!strcmp(xgr__console_assets[i].path, path))
      return send_buf(conn, MHD_HTTP_OK, xgr__console_assets[i].type, xgr__console_assets[i].data,
                      xgr__console_assets[i].len, MHD_RESPMEM_PERSISTENT, "no-cache");
  return send_text(conn, MHD_HTTP_NOT_FOUND, "no such page\n");
}

static void on_stop(void *ctx) {
  xgr__console *c = ctx;
  xgr__sse_close(c->hub);
}

/* ---- life ------------------------------------------------------------------------------------------ */

xgr__console *xgr__console_new(xgr_store *st, xgr_engine *e) {
  xgr__console *c = xgr__xcalloc(1, sizeof *c);
  c->st = st;
  c->e = e;
  c->hub = xgr__sse_hub_new(0);
  pthread_mutex_init(&c->mu, NULL);
  return c;
}

void xgr__console_free(xgr__console *c) {
  if (!c) return;
  xgr__sse_hub_free(c->hub);
  for (size_t i = 0; i < CACHE_MAX; i++) {
    xgr_orch_free(c->cache[i].orch);
    free(c->cache[i].svg);
  }
  pthread_mutex_destroy(&c->mu);
  free(c);
}

int xgr__console_register(xgr__console *c, xgr_rpc_server *s) {
  int rc = xgr_rpc_register(s, "xgr.console.info", m_info, c);
  if (!rc) rc = xgr_rpc_register(s, "xgr.console.sessions", m_sessions, c);
  if (!rc) rc = xgr_rpc_register(s, "xgr.console.owners", m_owners, c);
  if (!rc) rc = xgr_rpc_register(s, "xgr.console.session", m_session, c);
  if (!rc) rc = xgr_rpc_register(s, "xgr.console.process", m_process, c);
  if (!rc) rc = xgr_rpc_register(s, "xgr.console.registry", m_registry, c);
  if (!rc) rc = xgr__rpc_register_get(s, "/ui", serve_ui, c);
  if (!rc) xgr__rpc_on_stop(s, on_stop, c);
  return rc;
}
