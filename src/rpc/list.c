/* list.c — reading sessions: xgr.listSessions (the join view of seed 001 §2.2), xgr_listSessions
 * (the raw rows of the public reference §13, and its allow-list mode for a caller that is not the
 * owner), sorting and paging, and xgr.getSession (one session with its processes, history and
 * engine state).
 *
 * Listing reads what is committed through the node's queries (xgr/node.h): a session's processes
 * with their join state (xgr_node_procs). Without a rootPid the owner's newest sessions come from
 * the store's sessions table (xgr_node_sessions), so sessions of earlier xgrd processes are listed
 * too; whether a session is live or hibernated is the node's answer (xgr_node_session_get).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rpc/rpc_impl.h"
#include "xgr/json.h"
#include "xgr/auth.h"
#include "util/alloc.h"
#include "xgr/xrc_types.h"

#define LIST_MAX 10000
#define LIST_SCAN_SESSIONS 1000

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

/* One process in the join view (seed 001 §2.2). */
static json_t *item_join(const xgr_store_session *s, const xgr_orch *o, const xgr_store_proc *p) {
  bool terminal = p->status == XGR_PROC_DONE || p->status == XGR_PROC_ABORTED;
  json_t *it = json_pack(
      "{s:o, s:o, s:I, s:s, s:s, s:o, s:o, s:I}", "pid", xgr__rpc_pid_json(s->root_pid, p->iter), "parentPid",
      p->parent_iter ? xgr__rpc_pid_json(s->root_pid, p->parent_iter) : json_null(), "iter", (json_int_t)p->iter,
      "status", xgr__rpc_proc_status(p), "owner", s->owner, "resumeStep", terminal ? json_null() : json_string(p->step_id),
      "lastStep", terminal ? json_string(p->step_id) : json_null(), "updatedAt", (json_int_t)updated_ms(p));
  json_object_set_new(it, "rootPid", xgr__rpc_u64_json(s->root_pid));
  xgr__rpc_proc_state(it, p);
  json_object_set_new(it, "join", p->join ? join_view(o, p->join) : json_null());
  return it;
}

/* One process in the raw view of the public reference (§13). Its one time, `updated`, is in Unix
 * seconds as the reference defines it (every other answer of xgrd gives times in ms). */
static json_t *item_raw(const xgr_store_session *s, const xgr_store_proc *p, bool allow_mode) {
  char gid[16] = "", fgid[16] = "";
  if (p->group) snprintf(gid, sizeof gid, "%u", p->group);
  if (p->from_group) snprintf(fgid, sizeof fgid, "%u", p->from_group);
  json_t *it =
      json_pack("{s:s, s:o, s:o, s:s, s:s, s:I, s:I, s:s, s:s, s:s, s:s}", "owner", s->owner, "sessionId",
                xgr__rpc_u64_json(s->root_pid), "pid", xgr__rpc_pid_json(s->root_pid, p->iter), "step", p->step_id,
                "status", allow_mode ? "waiting" : xgr__rpc_proc_status(p), "updated", (json_int_t)(updated_ms(p) / 1000),
                "iterationStep", (json_int_t)p->iter, "xrc729", s->registry ? s->registry : "", "ostcId",
                s->ostc_id ? s->ostc_id : "", "joinGroupId", gid, "joinFromGroupId", fgid);
  if (!allow_mode)
    json_object_set_new(
        it, "parentPid",
        p->parent_iter ? xgr__rpc_pid_json(s->root_pid, p->parent_iter) : xgr__rpc_u64_json(s->root_pid));
  return it;
}

/* May `who` wake the stored waiting process p in step mode over RPC? The session core's own
 * __wakeUp check (xgr_session_wake_allowed) on the stored payload, so the listing shows exactly
 * what a wake-up would be allowed to reach. */
static bool allowed_rpc(const xgr_store_proc *p, const char *who) {
  if (!p->payload) return false;
  xgr_value pl = xgr_value_null();
  xgr_error e;
  bool ok = !xgr_value_from_json_text(p->payload, strlen(p->payload), 0, &pl, &e) &&
            xgr_session_wake_allowed(pl, p->step_id, who, XGR_WAKE_RPC, NULL);
  xgr_value_release(pl);
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
  static const char *const keys[] = {"by", NULL};
  int rc = xgr__rpc_keys(s, "sort", keys, err);
  if (rc) return rc;
  by = json_is_object(s) ? json_object_get(s, "by") : s;
  json_t *one = NULL;
  if (json_is_string(by)) {
    one = json_array();
    json_array_append(one, (json_t *)by);
    by = one;
  }
  if (!json_is_array(by)) {
    json_decref(one);
    return xgr__rpc_fail(err, XGR_ESCHEMA, "sort.by",
                         "expected [\"rootPid:desc\", \"iter:asc\", ...] (keys rootPid, " "iter, updatedAt)");
  }
  size_t i;
  const json_t *v;
  json_array_foreach(by, i, v) {
    char path[32];
    snprintf(path, sizeof path, "sort.by[%zu]", i);
    const char *t = xgr_json_text(v);
    char key[32] = "", dir[8] = "asc";
    if (t) sscanf(t, "%31[^:]:%7s", key, dir);
    int k = !strcmp(key, "rootPid") ? 0 : !strcmp(key, "iter") ? 1 : !strcmp(key, "updatedAt") ? 2 : -1;
    int dr = !strcmp(dir, "asc") ? 1 : !strcmp(dir, "desc") ? -1 : 0;
    if (!t || k < 0 || !dr || rs->nkeys == 4) {
      char prev[48];
      xgr_json_preview(v, prev, sizeof prev);
      json_decref(one);
      return xgr__rpc_fail(err, XGR_ESCHEMA, path,
                           "is %s; expected \"<rootPid|iter|updatedAt>:<asc|desc>\" (at most 4 keys)", prev);
    }
    rs->keys[rs->nkeys++] = (sortkey){k, dr};
  }
  json_decref(one);
  return 0;
}

/* One row of the sessions view: the session's row and a summary of its processes —
 * {"rootPid","owner","status","paused","registry","ostcId","ostcHash","createdAt","finishedAt",
 *  "killedAt"?,"storedBytes","live","waiting","running","nextWakeAt" (xgr__rpc_next_wake_json),"abortReason"? (why a
 *  killed session ended: "killed" or "cancelSession")}. */
static json_t *session_row(xgr_rpcd *d, const xgr_store_session *s) {
  xgr_store_proc *ps = NULL;
  size_t n = 0, waiting = 0, running = 0;
  json_t *next = json_null();
  const char *why = NULL;
  xgr_error e;
  if (!xgr_node_procs(d->n, s->owner, s->root_pid, &ps, &n, &e)) {
    json_decref(next);
    next = xgr__rpc_next_wake_json(s, ps, n);
    for (size_t i = 0; i < n; i++) {
      const xgr_store_proc *p = &ps[i];
      if (p->status == XGR_PROC_WAITING) {
        waiting++;
      } else if (p->status == XGR_PROC_RUNNING) {
        running++;
      } else if (p->status == XGR_PROC_ABORTED && p->abort_reason == XGR_ABORT_CANCEL) {
        why = "cancelSession";
      }
    }
    xgr_node_procs_free(ps, n);
  }
  json_t *j = json_pack("{s:o, s:s, s:s, s:b, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "rootPid",
                        xgr__rpc_u64_json(s->root_pid), "owner", s->owner,
                        "status", xgr_session_result_name((xgr_session_result)s->status), "paused", s->paused,
                        "registry", s->registry ? s->registry : "", "ostcId", s->ostc_id ? s->ostc_id : "",
                        "ostcHash", s->ostc_hash ? s->ostc_hash : "", "createdAt", (json_int_t)s->created_at,
                        "finishedAt", (json_int_t)s->finished_at, "live", (json_int_t)(waiting + running),
                        "waiting", (json_int_t)waiting, "running", (json_int_t)running);
  json_object_set_new(j, "nextWakeAt", next);
  json_object_set_new(j, "bundleHash", json_string(s->bundle_hash ? s->bundle_hash : ""));
  if (s->killed_at) json_object_set_new(j, "killedAt", json_integer(s->killed_at));
  json_object_set_new(j, "storedBytes", json_integer((json_int_t)(s->stored_bytes & INT64_MAX)));   /* the quota's count */
  if (s->status == XGR_RESULT_KILLED) json_object_set_new(j, "abortReason", json_string(why ? why : "killed"));
  return j;
}

/* Whose sessions a listing shows (list_sessions). */
enum { LS_OWNER, LS_MINE, LS_ALL };

static int by_root_desc(const void *a, const void *b) {
  const xgr_node_session *x = a, *y = b;
  return x->row.root_pid < y->row.root_pid ? 1 : x->row.root_pid > y->row.root_pid ? -1 : strcmp(x->row.owner, y->row.owner);
}

/* The sessions of a listing's page below `before` (0: no bound): LS_OWNER who's (= the owner's),
 * LS_ALL every owner's, LS_MINE who's own (unless only_owner names another) and those of unexpired
 * grants to who (only only_owner's when set), newest first. *ss is freed with xgr_node_sessions_free. */
static int list_scope(xgr_rpcd *d, int scope, const char *who, const char *only_owner, uint64_t before,
                      xgr_node_session **ss, size_t *nss, xgr_error *err) {
  if (scope != LS_MINE) return xgr_node_sessions(d->n, scope == LS_ALL ? NULL : who, before, LIST_SCAN_SESSIONS, ss, nss, err);
  int rc = 0;
  if (!only_owner || !strcmp(only_owner, who)) rc = xgr_node_sessions(d->n, who, before, LIST_SCAN_SESSIONS, ss, nss, err);
  else *ss = xgr__xcalloc(1, sizeof **ss), *nss = 0;
  if (rc) return rc;
  xgr_store_grant_filter f = {.grantee = who, .owner = only_owner, .expires_after = xgr_node_now(d->n),
                              .limit = LIST_SCAN_SESSIONS};
  xgr_store_grant *g = NULL;
  size_t ng = 0;
  if ((rc = xgr_node_grants(d->n, &f, &g, &ng, err))) {
    xgr_node_sessions_free(*ss, *nss);
    *ss = NULL, *nss = 0;
    return rc;
  }
  *ss = xgr__xrealloc(*ss, (*nss + ng + 1) * sizeof **ss);
  for (size_t i = 0; i < ng; i++) {
    if (!(g[i].rights & XGR_NODE_READ) || (before && g[i].root_pid >= before) || !strcmp(g[i].owner, who)) continue;
    xgr_error ge;
    if (!xgr_node_session_get(d->n, g[i].owner, g[i].root_pid, &(*ss)[*nss], &ge)) (*nss)++;
  }
  xgr_node_grants_free(g, ng);
  qsort(*ss, *nss, sizeof **ss, by_root_desc);
  return 0;
}

static int list_sessions(xgr_rpcd *d, const xgr_rpc_caller *caller, const json_t *params, bool raw_default,
                         json_t **result, xgr_error *err) {
  static const char *const keys[] = {"owner", "runner", "permit", "controlPermit", "view", "parentPid", "limit", "last",
                                     "sort", "rootPid", "rootId", "beforeRootPid", "status", NULL};
  const json_t *o;
  int rc = xgr__rpc_named(params, keys, &o, err);
  if (rc) return rc;
  char who[64] = "", owner[64];
  const char *opath, *view = NULL, *parent = NULL, *only_step = NULL;
  uint64_t bound_root = 0;
  xgr_permit cp;
  if (xgr__rpc_permits(caller) && json_object_get(o, "controlPermit") && !json_object_get(o, "permit")) {
    /* the public reference's allow mode: a ControlPermitV2 (action wake) for `runner`'s session
     * sessionId lists the waiting steps the signer may wake there (its stepId, if set, only) */
    if ((rc = xgr_auth_verify(caller->auth, o, "controlPermit", XGR_PERMIT_CONTROL_V2, &cp, err))) return rc;
    const char *runner = xgr_json_text(json_object_get(o, "runner"));
    if (strcmp(cp.action, "wake"))
      return xgr__rpc_fail(err, XGR_EPERM, "controlPermit.message.action",
                           "is \"%s\"; listing in allow mode takes a wake permit", cp.action);
    if (!runner || strcasecmp(runner, cp.runner))
      return xgr__rpc_fail(err, XGR_EPERM, "runner", "must be the permit's runner %s",
                           cp.runner);
    snprintf(who, sizeof who, "%s", cp.from);
    bound_root = cp.session_id;
    if (cp.step_id[0]) only_step = cp.step_id;
  } else if ((rc = xgr_rpc_authorize(caller, o, XGR_RPC_ACT_READ, NULL, who, sizeof who, err))) {
    return rc;
  }
  /* whose sessions (docs/RPC.md "Who sees what"): the named owner's (the caller's own; an
   * operator's any owner's; "runner": allow-list mode); without a name, the caller's own and those
   * granted to it (permits), or every owner's (an operator; --auth none without "from") */
  const json_t *ov = json_object_get(o, "owner"), *rnv = json_object_get(o, "runner");
  bool runner_named = rnv && !json_is_null(rnv), named = (ov && !json_is_null(ov)) || runner_named;
  bool permits = xgr__rpc_permits(caller), is_op = permits && who[0] && xgr_node_is_operator(d->n, who);
  bool allow_mode = false;
  int scope = LS_OWNER;
  const char *only_owner = NULL;   /* LS_MINE: only sessions of this owner */
  owner[0] = '\0';
  opath = "owner";
  if (!bound_root && !named && (!who[0] || is_op)) {
    scope = LS_ALL;
  } else if (!bound_root && !named && permits) {
    scope = LS_MINE;
  } else {
    if ((rc = xgr__rpc_owner(o, who, owner, sizeof owner, &opath, err))) return rc;
    if (who[0] && strcmp(who, owner)) {
      if (bound_root || runner_named) allow_mode = true;
      else if (is_op) scope = LS_OWNER;
      else if (permits) scope = LS_MINE, only_owner = owner;
      else
        return xgr__rpc_fail(err, XGR_EPERM, "from",
                             "%s may not list the sessions of %s (allow-list mode needs \"runner\")", who, owner);
    }
  }
  const char *status = NULL;
  if ((rc = xgr__rpc_opt_str(o, "view", &view, err)) || (rc = xgr__rpc_opt_str(o, "parentPid", &parent, err)) ||
      (rc = xgr__rpc_opt_str(o, "status", &status, err)))
    return rc;
  bool raw = view ? !strcmp(view, "raw") : raw_default;
  bool per_session = view && !strcmp(view, "sessions");   /* one row per session (xgr sessions) */
  /* the sessions view filters sessions by their status, the others processes by theirs */
  if ((rc = xgr__rpc_status_check(status, "status", per_session, err))) return rc;
  if (view && strcmp(view, "raw") && strcmp(view, "join") && !per_session)
    return xgr__rpc_fail(err, XGR_ESCHEMA, "view",
                         "is \"%.20s\"; expected \"raw\", \"join\" or \"sessions\"", view);
  if (per_session && allow_mode)
    return xgr__rpc_fail(err, XGR_EPERM, "view",
                         "the sessions view is for the owner; allow-list mode lists waiting processes");
  uint64_t limit = 100;
  static const char *const lim_keys[] = {"limit", "last", NULL};
  const char *lk = xgr__rpc_first_key(o, lim_keys);
  if ((rc = xgr_rpc_param_uint(o, lk, false, &limit, err))) return rc;
  if (limit > LIST_MAX)
    return xgr__rpc_fail(err, XGR_ELIMIT, lk, "is %llu; at most %d items are listed at once",
                         (unsigned long long)limit, LIST_MAX);
  rows rs = {0};
  if ((rc = parse_sort(o, &rs, err))) return rc;
  static const char *const root_keys[] = {"rootPid", "rootId", NULL};
  const char *rk = xgr__rpc_first_key(o, root_keys);
  const json_t *rv = json_object_get(o, rk);
  /* the sessions to look at: one by rootPid, else the owner's newest (the store's sessions table) */
  uint64_t one_root = 0, before = 0;
  const json_t *bv = json_object_get(o, "beforeRootPid");   /* paging: only sessions below it */
  if (bv && !json_is_null(bv) && (rc = xgr__rpc_uint(bv, "beforeRootPid", &before, err))) return rc;
  xgr_node_session *ss = NULL;
  xgr_node_access_info *acc = NULL;   /* per session: how the caller reaches it */
  size_t nss = 0;
  if (bound_root && rv && !json_is_null(rv) && (xgr__rpc_uint(rv, rk, &one_root, err) || one_root != bound_root))
    return xgr__rpc_fail(err, XGR_EPERM, rk, "must equal the permit's sessionId %llu",
                         (unsigned long long)bound_root);
  if (bound_root) {   /* the permit's session only */
    one_root = bound_root;
    ss = xgr__xcalloc(1, sizeof *ss);
    if (!xgr_node_session_get(d->n, owner, one_root, ss, err)) nss = 1;
  } else if (rv && !json_is_null(rv)) {
    if ((rc = xgr__rpc_uint(rv, rk, &one_root, err))) return rc;
    const char *whose = scope == LS_MINE ? only_owner ? only_owner : who : owner;
    if (scope == LS_ALL)
      return xgr__rpc_fail(err, XGR_ESCHEMA, "owner", "missing; a listing by %s needs the owner it is of", rk);
    if (!allow_mode &&
        (rc = xgr_rpc_access(d->n, caller, who, whose, one_root, XGR_NODE_READ, "permit.message.from", NULL, err)))
      return rc;
    if (whose != owner) snprintf(owner, sizeof owner, "%s", whose);
    ss = xgr__xcalloc(1, sizeof *ss);
    if (!xgr_node_session_get(d->n, owner, one_root, ss, err)) nss = 1;
  } else if ((rc = list_scope(d, scope, scope == LS_MINE ? who : owner, only_owner, before, &ss, &nss, err))) {
    return xgr__rpc_code(rc, err);
  }
  if (scope == LS_MINE && only_owner && !nss && !one_root && !before) {   /* another owner's, nothing granted: as before grants */
    xgr_node_sessions_free(ss, nss);
    return xgr__rpc_fail(err, XGR_EPERM, "from",
                         "%s may not list the sessions of %s (it holds no grant on any of them; allow-list mode "
                         "needs \"runner\")", who, owner);
  }
  /* a full scan window may have older sessions below it: the cursor for the next page */
  uint64_t next_before = nss >= LIST_SCAN_SESSIONS ? ss[nss - 1].row.root_pid : 0;
  if (next_before && scope == LS_ALL) {   /* every owner's: the last rootPid goes whole to the next page */
    size_t keep = xgr_node_sessions_whole(ss, nss);
    if (keep < nss) {
      for (size_t r = keep; r < nss; r++) xgr_node_session_clear(&ss[r]);
      nss = keep;
      next_before++;
    }
  }
  acc = xgr__xcalloc(nss + 1, sizeof *acc);
  for (size_t r = 0; r < nss && !allow_mode; r++) {
    xgr_error ae;
    if (xgr_rpc_access(d->n, caller, who, ss[r].row.owner, ss[r].row.root_pid, XGR_NODE_READ, "permit.message.from",
                       &acc[r], &ae))
      memset(&acc[r], 0, sizeof acc[r]);   /* not readable (a grant expired meanwhile): dropped below */
  }
  if (permits && !allow_mode) {   /* what the caller may not read is not listed */
    size_t k = 0;
    for (size_t r = 0; r < nss; r++) {
      if (acc[r].via == XGR_NODE_VIA_NONE) {
        xgr_node_session_clear(&ss[r]);
        continue;
      }
      ss[k] = ss[r];
      acc[k++] = acc[r];
    }
    nss = k;
  }
  if (per_session) {
    json_t *rows_ = json_array();
    size_t matched = 0;
    for (size_t r = 0; r < nss; r++) {
      if (status && !xgr__rpc_session_status_is(&ss[r], status)) continue;
      if (matched++ >= limit) continue;
      json_t *row_ = session_row(d, &ss[r].row);
      if (!allow_mode) xgr__rpc_access_mark(row_, &acc[r]);
      json_array_append_new(rows_, row_);
    }
    xgr_node_sessions_free(ss, nss);
    free(acc);
    xgr_error_clear(err);
    *result = json_pack("{s:o, s:I}", "sessions", rows_, "total", (json_int_t)matched);
    if (next_before) json_object_set_new(*result, "nextBeforeRootPid", xgr__rpc_u64_json(next_before));
    return 0;
  }
  for (size_t r = 0; r < nss; r++) {
    const xgr_store_session s = ss[r].row;
    const xgr_bundle *b = NULL;
    xgr_error be;
    if (!raw) xgr_node_session_bundle(d->n, &s, &b, &be);   /* the bundle it pinned */
    xgr_store_proc *ps = NULL;
    size_t n = 0;
    if (!xgr_node_procs(d->n, s.owner, s.root_pid, &ps, &n, err)) {
      for (size_t i = 0; i < n; i++) {
        if (allow_mode && (ps[i].status != XGR_PROC_WAITING || !allowed_rpc(&ps[i], who))) continue;
        if (only_step && (ps[i].status != XGR_PROC_WAITING || strcmp(ps[i].step_id, only_step))) continue;
        if (status && strcmp(xgr__rpc_proc_status(&ps[i]), status)) continue;
        if (parent) {
          char pp[48];
          xgr_pid_format(s.root_pid, ps[i].parent_iter, pp, sizeof pp);
          if (strcmp(pp, parent)) continue;
        }
        if (rs.n == rs.cap) {
          rs.cap = rs.cap ? rs.cap * 2 : 64;
          rs.v = xgr__xrealloc(rs.v, rs.cap * sizeof *rs.v);
        }
        rs.v[rs.n++] = (row){s.root_pid, ps[i].iter, updated_ms(&ps[i]),
                             raw ? item_raw(&s, &ps[i], allow_mode) : item_join(&s, b ? b->orch : NULL, &ps[i])};
        if (!allow_mode) xgr__rpc_access_mark(rs.v[rs.n - 1].item, &acc[r]);
      }
      xgr_node_procs_free(ps, n);
    }
    xgr_node_bundle_put(d->n, b);
  }
  xgr_node_sessions_free(ss, nss);
  free(acc);
  xgr_error_clear(err);
  row *tmp = xgr__xmalloc(rs.n * sizeof *tmp);
  sort_rows(rs.v, rs.n, tmp, rs.keys, rs.nkeys);
  free(tmp);
  json_t *items = json_array();
  for (size_t i = 0; i < rs.n; i++) {
    if (i < limit) json_array_append_new(items, rs.v[i].item);
    else json_decref(rs.v[i].item);
  }
  free(rs.v);
  *result = json_pack("{s:o, s:I}", raw ? "sessions" : "items", items, "total", (json_int_t)rs.n);
  if (next_before) json_object_set_new(*result, "nextBeforeRootPid", xgr__rpc_u64_json(next_before));
  return 0;
}

XGR__RPCD_METHOD(xgr__rpcd_m_list_join) { return list_sessions(ctx, caller, params, false, result, err); }
XGR__RPCD_METHOD(xgr__rpcd_m_list_raw) { return list_sessions(ctx, caller, params, true, result, err); }

/* A refused internal wake-up as getSession shows it (wakeUpsRefused, a history row's wakeUp). */
static json_t *refused_json(const xgr_store_wake *w) {
  return json_pack("{s:s, s:s, s:o, s:s, s:s, s:I}", "id", w->id, "runner", w->to_owner, "sessionId",
                   xgr__rpc_u64_json(w->to_root), "stepId", w->step, "reason", w->refused, "refusedAt",
                   (json_int_t)w->refused_at);
}

json_t *xgr_rpc_audit_json(const xgr_store_audit *a) {
  json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:I}", "kind", a->kind ? a->kind : "", "actor", a->actor ? a->actor : "",
                        "node", a->node ? a->node : "", "at", (json_int_t)a->at, "sessionAt", (json_int_t)a->session_at);
  if (a->permit) json_object_set_new(j, "permitDigest", json_string(a->permit));
  json_t *d = a->detail ? json_loads(a->detail, 0, NULL) : NULL;
  if (json_is_object(d)) json_object_set_new(j, "detail", d);
  else json_decref(d);
  return j;
}

json_t *xgr__rpc_refused_row(uint64_t root, const xgr_store_hist *h, const xgr_store_wake *w) {
  return json_pack("{s:o, s:o, s:s, s:n, s:I, s:I, s:o}", "pid",
                   w->from_iter ? xgr__rpc_pid_json(root, w->from_iter) : xgr__rpc_u64_json(root), "step",
                   w->from_step ? json_string(w->from_step) : json_null(), "status", "wake_refused", "valid", "at",
                   (json_int_t)(h ? h->at : 0), "finishedAt", (json_int_t)(h ? h->finished_at : 0), "wakeUp",
                   refused_json(w));
}

/* Append to hist the history rows of the refused wake-ups in ws that process `iter` sent (0: those
 * whose sender is not recorded), each once (done[]): the sending process and step, when that step
 * ran (its row h, if known), status "wake_refused" and the refusal (docs/RPC.md). */
static void refused_rows(json_t *hist, uint64_t root, uint64_t iter, const xgr_store_hist *h,
                         const xgr_store_wake *ws, size_t nw, bool *done) {
  for (size_t k = 0; k < nw; k++) {
    if (done[k] || ws[k].from_iter != iter) continue;
    done[k] = true;
    json_array_append_new(hist, xgr__rpc_refused_row(root, h, &ws[k]));
  }
}

/* xgr.getSession: one session with its processes (join view), history and engine state. */
XGR__RPCD_METHOD(xgr__rpcd_m_get_session) {
  xgr_rpcd *d = ctx;
  static const char *const keys[] = {"owner", "runner", "pid", "processId", "rootPid", "sessionId", "permit", NULL};
  const json_t *o;
  int rc = xgr__rpc_named(params, keys, &o, err);
  if (rc) return rc;
  char who[64] = "", owner[64];
  const char *opath, *tpath;
  if ((rc = xgr_rpc_authorize(caller, o, XGR_RPC_ACT_READ, NULL, who, sizeof who, err))) return rc;
  if ((rc = xgr__rpc_owner(o, who, owner, sizeof owner, &opath, err))) return rc;
  uint64_t root, iter;
  if ((rc = xgr__rpc_target(o, &root, &iter, &tpath, err))) return rc;
  /* the owner, an operator or a READ grantee (the node decides; --auth none: open) */
  xgr_node_access_info acc;
  if ((rc = xgr_rpc_access(d->n, caller, who, owner, root, XGR_NODE_READ, "permit.message.from", &acc, err))) return rc;
  xgr_node_session ns;
  if ((rc = xgr_node_session_get(d->n, owner, root, &ns, err))) {
    if (rc == XGR_ENOTFOUND)
      xgr_error_set(err, rc, tpath, "no session %s/%llu", owner, (unsigned long long)root);
    return xgr__rpc_code(rc, err);
  }
  const xgr_store_session s = ns.row;
  const xgr_bundle *b = NULL;
  xgr_error be;
  xgr_node_session_bundle(d->n, &s, &b, &be);   /* the bundle it pinned */
  json_t *procs = json_array(), *hist = json_array();
  xgr_store_proc *ps = NULL;
  size_t n = 0;
  json_t *next_wake = json_null();
  if (!xgr_node_procs(d->n, owner, root, &ps, &n, err)) {
    for (size_t i = 0; i < n; i++)
      if (!iter || ps[i].iter == iter) json_array_append_new(procs, item_join(&s, b ? b->orch : NULL, &ps[i]));
    json_decref(next_wake);
    next_wake = xgr__rpc_next_wake_json(&s, ps, n);
    xgr_node_procs_free(ps, n);
  }
  xgr_node_bundle_put(d->n, b);
  /* internal wake-ups this session sent that were refused (issue 14): to whom, why, when; each is
   * also a history row, after the row of the step that sent it */
  xgr_store_wake *ws = NULL;
  size_t nw = 0;
  if (xgr_node_wakes_refused(d->n, owner, root, &ws, &nw, err)) nw = 0;
  bool *wdone = xgr__xcalloc(nw + 1, sizeof *wdone);
  xgr_store_hist *hs = NULL;
  if (!xgr_node_history(d->n, owner, root, &hs, &n, err)) {
    for (size_t i = 0; i < n; i++) {
      if (iter && hs[i].iter != iter) continue;
      json_t *h = json_pack("{s:o, s:s, s:s, s:o, s:I, s:I}", "pid", xgr__rpc_pid_json(root, hs[i].iter), "step",
                            hs[i].step_id, "status", xgr_proc_status_name((xgr_proc_status)hs[i].status), "valid",
                            hs[i].valid < 0 ? json_null() : json_boolean(hs[i].valid), "at", (json_int_t)hs[i].at,
                            "finishedAt", (json_int_t)hs[i].finished_at);
      if (hs[i].error) json_object_set_new(h, "error", json_string(hs[i].error));
      /* its parent, when its result was recorded and why it aborted (as `xgr history` shows them) */
      json_object_set_new(h, "parentPid", hs[i].parent_iter ? xgr__rpc_pid_json(root, hs[i].parent_iter) : json_null());
      json_object_set_new(h, "recordedAt", json_integer((json_int_t)hs[i].recorded_at));
      if (hs[i].abort_reason)
        json_object_set_new(h, "abortReason", json_string(xgr_abort_reason_name(hs[i].abort_reason)));
      json_t *api = hs[i].api ? json_loads(hs[i].api, 0, NULL) : NULL;   /* what its API calls did */
      if (api) json_object_set_new(h, "apiCalls", api);
      json_t *pl = NULL;   /* exact: payload integers beyond int64 stay numbers */
      if (hs[i].payload && xgr_json_parse_exact(hs[i].payload, strlen(hs[i].payload), &pl, NULL)) pl = NULL;
      if (pl) json_object_set_new(h, "payload", pl);
      /* the step's execution (docs/CHAIN.md): its transaction and receipt, from the executor's journal */
      json_t *ex = d->nc->executor ? xgr_chain_executor_record(d->nc->executor, owner, root, hs[i].iter) : NULL;
      if (ex) json_object_set_new(h, "execution", ex);
      json_array_append_new(hist, h);
      refused_rows(hist, root, hs[i].iter, &hs[i], ws, nw, wdone);
    }
    xgr_node_history_free(hs, n);
  }
  for (size_t k = 0; k < nw; k++)   /* senders without a history row (not recorded, or gone) */
    if (!iter || ws[k].from_iter == iter) refused_rows(hist, root, ws[k].from_iter, NULL, ws, nw, wdone);
  free(wdone);
  xgr_error_clear(err);
  /* live by the row and the engine (a hibernated session is live without being in the engine;
   * the engine marks a session finished just after its end is committed: either one ends it) */
  bool in_engine = ns.in_engine, live = ns.live;
  json_t *sess = json_pack("{s:s, s:o, s:s, s:s, s:s, s:s, s:I, s:I, s:b, s:b}", "owner", s.owner, "rootPid",
                           xgr__rpc_u64_json(s.root_pid), "registry", s.registry ? s.registry : "", "ostcId",
                           s.ostc_id ? s.ostc_id : "", "ostcHash", s.ostc_hash ? s.ostc_hash : "", "status",
                           xgr_session_result_name((xgr_session_result)s.status), "createdAt", (json_int_t)s.created_at,
                           "finishedAt", (json_int_t)s.finished_at, "paused", s.paused, "alive", live);
  json_object_set_new(sess, "nextWakeAt", next_wake);   /* the session's, whichever process was asked */
  json_object_set_new(sess, "killedAt", json_integer((json_int_t)s.killed_at));
  json_object_set_new(sess, "bundleHash", json_string(s.bundle_hash ? s.bundle_hash : ""));
  json_object_set_new(sess, "storedBytes", json_integer((json_int_t)(s.stored_bytes & INT64_MAX)));   /* the quota's count */
  if (live && in_engine) json_object_set_new(sess, "steps", json_integer((json_int_t)ns.info.steps));
  if (live && !in_engine) json_object_set_new(sess, "hibernated", json_true());   /* evicted; the store holds it */
  /* a fork: the recorded step it was forked from (docs/SEMANTICS.md "Retry and fork"), else null */
  json_t *ff = s.forked_from && s.forked_from[0] ? json_loads(s.forked_from, 0, NULL) : NULL;
  json_object_set_new(sess, "forkedFrom", ff ? ff : json_null());
  if (s.max_total_gas && s.max_total_gas[0])   /* the starting SessionPermit's budget */
    json_object_set_new(sess, "maxTotalGas", json_string(s.max_total_gas));
  xgr__rpc_access_mark(sess, &acc);   /* how the caller reaches it */
  xgr_node_session_clear(&ns);
  *result = json_pack("{s:o, s:o, s:o}", "session", sess, "processes", procs, "history", hist);
  /* the audit trail: every control action and wake-up applied to the session, in session-clock
   * order (each entry's sessionAt places it among the history rows' `at`) */
  json_t *audit = json_array();
  xgr_store_audit *as = NULL;
  size_t na = 0;
  if (!xgr_node_audits(d->n, owner, root, &as, &na, err))
    for (size_t i = 0; i < na; i++) json_array_append_new(audit, xgr_rpc_audit_json(&as[i]));
  xgr_node_audits_free(as, na);
  json_object_set_new(*result, "audit", audit);
  if (nw) {
    json_t *arr = json_array();
    for (size_t i = 0; i < nw; i++) json_array_append_new(arr, refused_json(&ws[i]));
    json_object_set_new(*result, "wakeUpsRefused", arr);
  }
  xgr_node_wakes_free(ws, nw);
  xgr_error_clear(err);
  return 0;
}

