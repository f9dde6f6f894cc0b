/* console_view.c — the console's methods that show one thing in full (docs/CONSOLE.md):
 *  - xgr.console.session: one session drawn for the graph: per step the processes waiting,
 *    running, done, aborted and paused; each join node's latest instance (k of n, the pieces in its
 *    inbox, its fail records, whether it can still be satisfied, its outcome); the edges that fired;
 *    and a page of processes (filtered by step and status) and of the history (times, durations,
 *    errors, the session's refused internal wake-ups and its audit trail as rows of their own) and
 *    how many processes wake-ups woke at each step (from the stored audit trail);
 *  - xgr.console.process: one process in full (payload, join inbox, `__wakeUp` allow list, error,
 *    its history rows);
 *  - xgr.console.registry: an orchestration with its versions, the rules its steps use (versions,
 *    hashes, owners) and its `xgr check` findings.
 * Reading a session needs the caller to be its owner (xgr_rpc_authorize, READ), as for
 * xgr.listSessions; every page size the client controls is bounded.
 */
#include "rpc/console_impl.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/alloc.h"
#include "xgr/orch.h"
#include "xgr/session.h"

#define PAGE_MAX 500            /* processes / history rows per page */

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
  json_t *it = json_pack("{s:o, s:o, s:I, s:s, s:s, s:I, s:I, s:I, s:b}", "pid", xgr__rpc_pid_json(root, p->iter), "parentPid",
                         p->parent_iter ? xgr__rpc_pid_json(root, p->parent_iter) : json_null(), "iter", (json_int_t)p->iter,
                         "step", p->step_id ? p->step_id : "", "status", xgr__rpc_proc_status(p), "createdAt",
                         (json_int_t)p->created_at, "startedAt", (json_int_t)p->started_at, "finishedAt",
                         (json_int_t)p->finished_at, "join", p->join != NULL);
  xgr__rpc_proc_state(it, p);
  return it;
}

static json_t *hist_item(uint64_t root, const xgr_store_hist *h) {
  json_t *it = json_pack("{s:o, s:o, s:s, s:s, s:I, s:I}", "pid", xgr__rpc_pid_json(root, h->iter), "parentPid",
                         h->parent_iter ? xgr__rpc_pid_json(root, h->parent_iter) : json_null(), "step",
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

/* One row of a session's timeline: history row h, or the refusal w (sent by the process of
 * history row h; h SIZE_MAX when that row is not known), or audit entry a (h and w SIZE_MAX). */
typedef struct timeline_row {
  size_t h, w, a;
} timeline_row;

/* A refused wake-up's sender (its iter) and its index in the store's list, to find the refusals of
 * a process by binary search. */
typedef struct wake_key {
  uint64_t iter;
  size_t j;
} wake_key;

static int wake_key_cmp(const void *a, const void *b) {
  const wake_key *x = a, *y = b;
  if (x->iter != y->iter) return x->iter < y->iter ? -1 : 1;
  return (x->j > y->j) - (x->j < y->j);
}

/* The timeline, oldest first, in a malloc'd array of *n rows (caller frees): each history row,
 * followed by the refused wake-ups its process sent (after the first row of that process, in the
 * store's order), then the refusals whose sender has no row; the audit entries as[0..na) (in
 * session-clock order) each before the first history row that began at or after it, the rest at
 * the end. O((nh + nw) log nw + na). */
static timeline_row *timeline(const xgr_store_hist *hs, size_t nh, const xgr_store_wake *ws, size_t nw,
                              const xgr_store_audit *as, size_t na, size_t *n) {
  timeline_row *rows = xgr__xcalloc(nh + nw + na + 1, sizeof *rows);
  size_t ja = 0;
  wake_key *keys = xgr__xcalloc(nw + 1, sizeof *keys);
  bool *done = xgr__xcalloc(nw + 1, sizeof *done);
  for (size_t j = 0; j < nw; j++) keys[j] = (wake_key){ws[j].from_iter, j};
  qsort(keys, nw, sizeof *keys, wake_key_cmp);
  size_t k = 0;
  for (size_t i = 0; i < nh; i++) {
    for (; ja < na && as[ja].session_at <= hs[i].at; ja++) rows[k++] = (timeline_row){SIZE_MAX, SIZE_MAX, ja};
    rows[k++] = (timeline_row){i, SIZE_MAX, SIZE_MAX};
    size_t lo = 0, hi = nw;   /* the first key of this process */
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      if (keys[mid].iter < hs[i].iter) lo = mid + 1;
      else hi = mid;
    }
    for (; lo < nw && keys[lo].iter == hs[i].iter && !done[keys[lo].j]; lo++) {
      done[keys[lo].j] = true;
      rows[k++] = (timeline_row){i, keys[lo].j, SIZE_MAX};
    }
  }
  for (; ja < na; ja++) rows[k++] = (timeline_row){SIZE_MAX, SIZE_MAX, ja};
  for (size_t j = 0; j < nw; j++)
    if (!done[j]) rows[k++] = (timeline_row){SIZE_MAX, j, SIZE_MAX};
  free(keys);
  free(done);
  assert(k == nh + nw + na);
  *n = k;
  return rows;
}

static int session_row(xgr__console *c, const char *owner, uint64_t root, xgr_node_session *ns, json_t **out,
                       xgr_error *err) {
  int rc = xgr_node_session_get(c->n, owner, root, ns, err);
  if (rc) {
    if (rc == XGR_ENOTFOUND) xgr_error_set(err, rc, "rootPid", "no session %s/%" PRIu64, owner, root);
    return rc;
  }
  const xgr_store_session *s = &ns->row;
  const xgr_engine_session_info *info = &ns->info;
  bool live = ns->engine_live;   /* the console's "alive": the engine runs it here */
  *out = json_pack("{s:s, s:o, s:s, s:s, s:s, s:s, s:I, s:I, s:b, s:b}", "owner", s->owner, "rootPid",
                   xgr__rpc_u64_json(s->root_pid), "registry", s->registry ? s->registry : "", "ostcId",
                   s->ostc_id ? s->ostc_id : "", "ostcHash", s->ostc_hash ? s->ostc_hash : "", "status",
                   xgr__rpc_session_status(s), "createdAt", (json_int_t)s->created_at, "finishedAt",
                   (json_int_t)s->finished_at, "paused", s->paused, "alive", live);
  if (live) {
    json_object_set_new(*out, "steps", json_integer((json_int_t)info->steps));
    json_object_set_new(*out, "now", json_integer(info->now));
    json_object_set_new(*out, "idle", json_boolean(info->idle));
  }
  return 0;
}

/* A session's row (session_row), its orchestration from the cache (*ce: a reference, NULL when
 * not parsed; give it back with xgr__console_cache_put) and its processes (*ps[*n], sorted by
 * iter; free with xgr_node_procs_free). 0, or an error code with nothing held. */
static int load_session(xgr__console *c, const char *owner, uint64_t root, json_t **sess, xgr__console_orch **ce,
                        xgr_store_proc **ps, size_t *n, xgr_error *err) {
  xgr_node_session ns;
  int rc = session_row(c, owner, root, &ns, sess, err);
  if (rc) return rc;
  *ce = xgr__console_cache_get(c, ns.row.ostc_hash);
  if ((rc = xgr_node_procs(c->n, owner, root, ps, n, err))) {
    xgr_node_session_clear(&ns);
    xgr__console_cache_put(c, *ce);
    json_decref(*sess);
    return rc;
  }
  json_object_set_new(*sess, "nextWakeAt", xgr__rpc_next_wake_json(&ns.row, *ps, *n));
  if (ns.row.forked_from && ns.row.forked_from[0]) {   /* a fork: the recorded step it started from */
    json_t *ff = json_loads(ns.row.forked_from, 0, NULL);
    if (ff) json_object_set_new(*sess, "forkedFrom", ff);
  }
  xgr_node_session_clear(&ns);
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
  return xgr__console_bad(err, key, "is missing or malformed; expected %s", "a session id \"R\" or a pid \"R:I\"");
}

XGR__RPCD_METHOD(xgr__console_m_session) {
  xgr__console *c = ctx;
  static const char *const keys[] = {"owner", "permit", "rootPid", "pid", "procOffset", "procLimit", "histOffset",
                                     "histLimit", "procStep", "procStatus", "histOrder", NULL};
  const json_t *o;
  int rc = xgr__console_named(params, keys, &o, err);
  if (rc) return rc;
  char owner[64];
  uint64_t root, iter, poff, plim, hoff, hlim;
  const char *pstep, *pstatus, *horder;
  if ((rc = root_param(o, &root, &iter, err)) || (rc = xgr__console_read_owner(c, caller, o, root, owner, sizeof owner, NULL, err)) ||
      (rc = xgr__console_opt_uint(o, "procOffset", UINT32_MAX, 0, &poff, err)) ||
      (rc = xgr__console_opt_uint(o, "procLimit", PAGE_MAX, 100, &plim, err)) ||
      (rc = xgr__console_opt_uint(o, "histOffset", UINT32_MAX, 0, &hoff, err)) ||
      (rc = xgr__console_opt_uint(o, "histLimit", PAGE_MAX, 100, &hlim, err)) || (rc = xgr__console_opt_str(o, "procStep", 200, &pstep, err)) ||
      (rc = xgr__console_opt_str(o, "procStatus", 20, &pstatus, err)) || (rc = xgr__console_opt_str(o, "histOrder", 8, &horder, err)))
    return rc;
  if (horder && strcmp(horder, "asc") && strcmp(horder, "desc"))
    return xgr__console_bad(err, "histOrder", "is \"%.20s\"; expected asc or desc", horder);
  bool desc = !horder || !strcmp(horder, "desc");
  if (pstep && !*pstep) pstep = NULL;
  if (pstatus && !*pstatus) pstatus = NULL;
  json_t *sess;
  xgr__console_orch *ce;
  xgr_store_proc *ps;
  size_t n;
  if ((rc = load_session(c, owner, root, &sess, &ce, &ps, &n, err))) return rc;
  const xgr_orch *orch = ce ? ce->orch : NULL;
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
    const char *st = xgr__rpc_proc_status(p);
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
        json_object_set_new(js, "pid", xgr__rpc_pid_json(root, p->iter));
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
  xgr_node_procs_free(ps, n);
  json_t *running = json_array();
  const char *k;
  json_t *v;
  json_object_foreach(steps, k, v) if (json_integer_value(json_object_get(v, "running"))) json_array_append_new(running, json_string(k));

  xgr_store_hist *hs = NULL;
  size_t nh = 0;
  if (xgr_node_history(c->n, owner, root, &hs, &nh, err)) nh = 0;
  xgr_error_clear(err);
  /* the internal wake-ups this session sent that were refused: rows of the timeline too, each after
   * the first row of the process that sent it, as in xgr.getSession */
  xgr_store_wake *ws = NULL;
  size_t nw = 0;
  if (xgr_node_wakes_refused(c->n, owner, root, &ws, &nw, err)) nw = 0;
  xgr_error_clear(err);
  /* the audit trail: rows of the timeline (status "audit"), and the processes wake-ups woke at each
   * step (the graph's "woken xN": from the store, so it is there after a reload) */
  xgr_store_audit *as = NULL;
  size_t na = 0;
  if (xgr_node_audits(c->n, owner, root, &as, &na, err)) na = 0;
  xgr_error_clear(err);
  json_t *woken = json_object();
  for (size_t i = 0; i < na; i++) {
    if (strcmp(as[i].kind, "wake") && strcmp(as[i].kind, "wake-internal")) continue;
    json_t *d = as[i].detail ? json_loads(as[i].detail, 0, NULL) : NULL;
    const char *st = json_string_value(json_object_get(d, "step"));
    const json_t *w = json_object_get(d, "woken");
    json_int_t add = json_is_integer(w) ? json_integer_value(w) : 1;
    if (st && add > 0)
      json_object_set_new(woken, st, json_integer(json_integer_value(json_object_get(woken, st)) + add));
    json_decref(d);
  }
  size_t total = 0;
  timeline_row *rows = timeline(hs, nh, ws, nw, as, na, &total);
  json_t *hist = json_array();
  for (uint64_t i = hoff; i < total && json_array_size(hist) < hlim; i++) {
    const timeline_row *r = &rows[desc ? total - 1 - i : i];
    const xgr_store_hist *h = r->h == SIZE_MAX ? NULL : &hs[r->h];
    if (r->a != SIZE_MAX) {
      const xgr_store_audit *a = &as[r->a];
      json_array_append_new(hist, json_pack("{s:s, s:I, s:o}", "status", "audit", "at", (json_int_t)a->session_at,
                                            "audit", xgr_rpc_audit_json(a)));
    } else {
      json_array_append_new(hist, r->w == SIZE_MAX ? hist_item(root, h) : xgr__rpc_refused_row(root, h, &ws[r->w]));
    }
  }
  free(rows);
  xgr_node_audits_free(as, na);
  xgr_node_history_free(hs, nh);
  xgr_node_wakes_free(ws, nw);
  *result = json_pack("{s:o, s:o, s:o, s:o, s:o, s:{s:I, s:I, s:o}, s:{s:I, s:I, s:o}, s:I}", "session", sess, "steps",
                      steps, "running", running, "joins", joins, "fired", fired, "processes", "total",
                      (json_int_t)matched, "offset", (json_int_t)poff, "items", items, "history", "total",
                      (json_int_t)total, "offset", (json_int_t)hoff, "items", hist, "eventId",
                      (json_int_t)xgr__sse_last_id(c->hub));
  json_object_set_new(*result, "woken", woken);
  if (orch) {
    json_t *order = json_array();
    for (size_t i = 0; i < orch->nsteps; i++) json_array_append_new(order, json_string(orch->steps[i].id));
    json_object_set_new(*result, "stepOrder", order);
  }
  xgr__console_cache_put(c, ce);
  return 0;
}

/* ---- xgr.console.process ----------------------------------------------------------------------- */

XGR__RPCD_METHOD(xgr__console_m_process) {
  xgr__console *c = ctx;
  static const char *const keys[] = {"owner", "permit", "rootPid", "pid", NULL};
  const json_t *o;
  int rc = xgr__console_named(params, keys, &o, err);
  if (rc) return rc;
  char owner[64];
  uint64_t root, iter;
  if ((rc = root_param(o, &root, &iter, err)) || (rc = xgr__console_read_owner(c, caller, o, root, owner, sizeof owner, NULL, err)))
    return rc;
  if (!iter) return xgr__console_bad(err, "pid", "names a session; expected %s", "a process id \"R:I\"");
  json_t *sess;
  xgr__console_orch *ce;
  xgr_store_proc *ps;
  size_t n;
  if ((rc = load_session(c, owner, root, &sess, &ce, &ps, &n, err))) return rc;
  const xgr_store_proc *p = by_iter(ps, n, iter);
  if (!p) {
    xgr_node_procs_free(ps, n);
    xgr__console_cache_put(c, ce);
    json_decref(sess);
    xgr_error_set(err, XGR_ENOTFOUND, "pid", "no process %" PRIu64 ":%" PRIu64 " of %s", root, iter, owner);
    return XGR_ENOTFOUND;
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
    if (ps[i].parent_iter == iter) json_array_append_new(children, xgr__rpc_pid_json(root, ps[i].iter));
  json_object_set_new(it, "children", children);
  xgr_node_procs_free(ps, n);
  xgr__console_cache_put(c, ce);
  xgr_store_hist *hs = NULL;
  size_t nh = 0;
  json_t *hist = json_array();
  if (!xgr_node_history(c->n, owner, root, &hs, &nh, err)) {
    for (size_t i = 0; i < nh; i++) {
      if (hs[i].iter != iter) continue;
      json_t *h = hist_item(root, &hs[i]);
      json_t *pl = hs[i].payload ? json_loads(hs[i].payload, JSON_DECODE_ANY, NULL) : NULL;
      json_object_set_new(h, "payload", pl ? pl : json_null());
      json_array_append_new(hist, h);
    }
    xgr_node_history_free(hs, nh);
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
  if (xgr_node_doc(c->n, kind, id, 0, &d, &e)) return out;
  *latest = d.version;
  xgr_node_doc_clear(&d);
  uint32_t first = *latest > 100 ? *latest - 99 : 1;
  for (uint32_t v = first; v <= *latest; v++) {
    if (xgr_node_doc(c->n, kind, id, v, &d, &e)) continue;
    json_array_append_new(out, json_pack("{s:I, s:s, s:s, s:I}", "version", (json_int_t)d.version, "hash", d.hash,
                                         "owner", d.owner ? d.owner : "", "registeredAt", (json_int_t)d.registered_at));
    xgr_node_doc_clear(&d);
  }
  return out;
}

/* The registry key of a step's rule reference: "${addr:X}" -> X, an address lowercased, else as is. */
static void rule_key(const char *ref, char *out, size_t n) {
  size_t len = strlen(ref);
  if (len > 8 && !strncmp(ref, "${addr:", 7) && ref[len - 1] == '}') snprintf(out, n, "%.*s", (int)(len - 8), ref + 7);
  else snprintf(out, n, "%s", ref);
  if (xgr_rpc_is_address(out)) xgr__rpc_lower(out);
}

XGR__RPCD_METHOD(xgr__console_m_registry) {
  xgr__console *c = ctx;
  static const char *const keys[] = {"registry", "ostcId", "hash", "version", "owner", "permit", NULL};
  const json_t *o;
  int rc = xgr__console_named(params, keys, &o, err);
  if (rc) return rc;
  const char *reg, *ostc, *hash;
  uint64_t version;
  if ((rc = xgr__console_opt_str(o, "registry", 200, &reg, err)) || (rc = xgr__console_opt_str(o, "ostcId", 200, &ostc, err)) ||
      (rc = xgr__console_opt_str(o, "hash", 80, &hash, err)) || (rc = xgr__console_opt_uint(o, "version", UINT32_MAX, 0, &version, err)))
    return rc;
  char who[64];
  if ((rc = xgr_rpc_authorize(caller, o, XGR_RPC_ACT_READ, NULL, who, sizeof who, err))) return rc;
  /* the namespace (docs/SEMANTICS.md, "Names and pins"): `owner`'s, else the reader's, then the empty one */
  char ns[43];
  bool named;
  if ((rc = xgr__rpc_opt_address(o, "owner", ns, &named, err))) return rc;
  if (!named && xgr_rpc_is_address(who)) {
    snprintf(ns, sizeof ns, "%.42s", who);
    xgr__rpc_lower(ns);
  }
  xgr_store_doc d = {0};
  char id[420];
  if (hash && *hash) {
    rc = xgr_node_doc_by_hash(c->n, XGR_REG_ORCHESTRATION, hash, &d, err);
    if (!rc) snprintf(id, sizeof id, "%s", d.id);
  } else {
    if (!reg || !*reg) return xgr__console_bad(err, "registry", "missing; expected %s", "a registry (XRC-729 address or name) or a hash");
    char r[210];
    snprintf(r, sizeof r, "%s", reg);
    if (xgr_rpc_is_address(r)) xgr__rpc_lower(r);
    if (ostc && *ostc) snprintf(id, sizeof id, "%s/%s", r, ostc);
    else snprintf(id, sizeof id, "%s", r);
    rc = xgr_node_doc_in(c->n, XGR_REG_ORCHESTRATION, ns, !named, id, (uint32_t)version, &d, err);
  }
  if (rc) {
    if (rc == XGR_ENOTFOUND)
      xgr_error_set(err, rc, hash && *hash ? "hash" : "registry", "no orchestration is registered under \"%s\"",
                    hash && *hash ? hash : id);
    return rc;
  }
  char sid[XGR_NODE_KEY_MAX];   /* its stored key: in the namespace it was found in */
  xgr_node_ns_key(sid, sizeof sid, hash && *hash ? NULL : d.owner, id);
  uint32_t latest;
  json_t *vers = versions(c, XGR_REG_ORCHESTRATION, sid, &latest);
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
    char rk[XGR_NODE_KEY_MAX];   /* rules resolve in the orchestration's namespace */
    xgr_node_ns_key(rk, sizeof rk, d.owner, key);
    json_t *rv = versions(c, XGR_REG_RULE, rk, &rl);
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
  xgr_node_doc_clear(&d);
  xgr_orch_free(orch);
  return 0;
}
