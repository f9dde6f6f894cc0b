/* records.c — per-session records and the report JSON (see xgr/records.h). */
#include "xgr/records.h"

#include "util/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct hist_row {
  uint64_t iter;
  uint16_t step;
  uint8_t status;
  int8_t valid;
  int64_t at;
  char *error;                  /* the process's error text after the result (owned) or NULL */
  char *api;                    /* the step's API calls as JSON text (owned) or NULL */
} hist_row;

typedef struct rec {
  bool used;
  uint64_t parent;
  uint16_t step;
  uint8_t status, abort_reason;
  bool paused;
  int8_t valid;
  uint32_t group, from_group;
  json_t *join;
  xgr_value payload;
  char *error;
} rec;

struct xgr_records {
  rec *recs;                    /* indexed by iter - 1 */
  size_t nrecs, caprecs;
  hist_row *hist;
  size_t nhist, caphist;
  json_t *actions;
};

json_t *xgr_join_state_json(const xgr_orch *o, const xgr_join_state *js) {
  const xgr_join *d = js->decl;
  json_t *expect = json_array(), *inbox = json_object(), *failj = json_object();
  for (unsigned i = 0; i < d->n; i++) {
    const char *sid = o->steps[d->from[i].node].id;
    json_array_append_new(expect, json_string(sid));
    if (js->inbox[i].kind != XGR_VNULL) json_object_set_new(inbox, sid, xgr_value_to_json_exact(js->inbox[i]));
    if (js->fail[i]) json_object_set_new(failj, sid, json_string(js->fail[i]));
  }
  json_t *j = json_pack("{s:o, s:i, s:s, s:o, s:o, s:b, s:s}", "expect", expect, "k", (int)d->k, "policy",
                         xgr_policy_name(d->policy), "inbox", inbox, "fail", failj, "closed", js->closed, "outcome",
                         xgr_join_outcome_name(js->outcome));
  if (js->closed) json_object_set_new(j, "closedAt", json_integer(js->closed_at));   /* session clock, ms */
  return j;
}

xgr_records *xgr_records_new(void) {
  xgr_records *r = xgr__xcalloc(1, sizeof *r);
  r->actions = json_array();
  return r;
}

void xgr_records_free(xgr_records *r) {
  if (!r) return;
  for (size_t k = 0; k < r->nrecs; k++) {
    json_decref(r->recs[k].join);
    xgr_value_release(r->recs[k].payload);
    free(r->recs[k].error);
  }
  free(r->recs);
  for (size_t k = 0; k < r->nhist; k++) {
    free(r->hist[k].error);
    free(r->hist[k].api);
  }
  free(r->hist);
  json_decref(r->actions);
  free(r);
}

void xgr_records_proc(xgr_records *r, const xgr_orch *o, const xgr_proc *p) {
  if (p->iter > r->caprecs) {
    size_t nc = r->caprecs ? r->caprecs * 2 : 64;
    while (nc < p->iter) nc *= 2;
    r->recs = xgr__xrealloc(r->recs, nc * sizeof *r->recs);
    memset(r->recs + r->caprecs, 0, (nc - r->caprecs) * sizeof *r->recs);
    r->caprecs = nc;
  }
  if (p->iter > r->nrecs) r->nrecs = p->iter;
  rec *x = &r->recs[p->iter - 1];
  x->used = true;
  x->parent = p->parent_iter;
  x->step = p->step;
  x->status = p->status;
  x->abort_reason = p->abort_reason;
  x->paused = p->paused;
  x->valid = p->valid;
  x->group = p->group;
  x->from_group = p->from_group;
  xgr_value_release(x->payload);
  x->payload = xgr_value_retain(p->payload);
  if (p->error && (!x->error || strcmp(x->error, p->error))) {
    free(x->error);
    x->error = xgr__xstrdup(p->error);
  }
  if (p->join) {
    json_decref(x->join);
    x->join = xgr_join_state_json(o, p->join);
  }
}

bool xgr_records_retry_of(const xgr_records *r, uint64_t iter, xgr_retry_of *out) {
  if (!r || iter == 0 || iter > r->nrecs || !r->recs[iter - 1].used) return false;
  const rec *x = &r->recs[iter - 1];
  const char *outcome = json_string_value(json_object_get(x->join, "outcome"));
  *out = (xgr_retry_of){.iter = iter, .step = x->step, .status = (xgr_proc_status)x->status,
                        .reason = (xgr_abort_reason)x->abort_reason, .group = x->group,
                        .join_unsatisfied = x->from_group && !(outcome && !strcmp(outcome, "satisfied")),
                        .payload = x->payload};
  return true;
}

void xgr_records_action(xgr_records *r, int64_t at, const char *action, bool ok, const char *message) {
  json_array_append_new(r->actions, json_pack("{s:I, s:s, s:b, s:s}", "at", (json_int_t)at, "action", action, "ok", ok,
                                              "message", message ? message : ""));
}

void xgr_records_hist(xgr_records *r, const xgr_effect *e) {
  if (r->nhist == r->caphist) {
    r->caphist = r->caphist ? r->caphist * 2 : 64;
    r->hist = xgr__xrealloc(r->hist, r->caphist * sizeof *r->hist);
  }
  r->hist[r->nhist++] = (hist_row){e->proc->iter, e->proc->step, e->status, e->valid, e->at,
                                   e->proc->error ? xgr__xstrdup(e->proc->error) : NULL, xgr__xstrdup(e->api)};
}

static json_t *valid_json(int8_t v) { return v < 0 ? json_null() : json_boolean(v); }

static json_t *proc_json(const xgr_orch *o, uint64_t root, uint64_t iter, uint64_t parent, unsigned step, uint8_t status,
                         bool paused, int8_t valid, uint32_t group, uint32_t from_group, json_t *join, xgr_value payload,
                         const char *error, uint8_t abort_reason) {
  char pid[48], ppid[48];
  xgr_pid_format(root, iter, pid, sizeof pid);
  xgr_pid_format(root, parent, ppid, sizeof ppid);
  json_t *j = json_pack("{s:s, s:o, s:s, s:s, s:b, s:o, s:I, s:I, s:O*, s:o, s:o}", "pid", pid, "parentPid",
                        parent ? json_string(ppid) : json_null(), "step", o->steps[step].id, "status",
                        xgr_proc_status_name(status), "paused", paused, "valid", valid_json(valid), "joinGroupId",
                        (json_int_t)group, "joinFromGroupId", (json_int_t)from_group, "join", join, "payload",
                        xgr_value_to_json_exact(payload), "error", error ? json_string(error) : json_null());
  if (!join) json_object_set_new(j, "join", json_null());
  if (status == XGR_PROC_ABORTED && abort_reason)
    json_object_set_new(j, "abortReason", json_string(xgr_abort_reason_name(abort_reason)));
  return j;
}

typedef struct live_ctx {
  const xgr_session *s;
  json_t *arr;
} live_ctx;

static int cmp_iter(const void *a, const void *b) {
  uint64_t x = (*(const xgr_proc *const *)a)->iter, y = (*(const xgr_proc *const *)b)->iter;
  return x < y ? -1 : x > y;
}

typedef struct collect {
  const xgr_proc **v;
  size_t n, cap;
} collect;

static void collect_proc(void *ctx, const xgr_proc *p) {
  collect *c = ctx;
  if (c->n == c->cap) {
    c->cap = c->cap ? c->cap * 2 : 32;
    c->v = xgr__xrealloc(c->v, c->cap * sizeof *c->v);
  }
  c->v[c->n++] = p;
}

json_t *xgr_records_report(const xgr_records *r, const xgr_session *s, const char *result, uint64_t steps, int64_t now) {
  const xgr_orch *o = xgr_session_orch(s);
  uint64_t root = xgr_session_root_pid(s);
  json_t *procs = json_array(), *h = json_array();
  if (r) {
    for (size_t i = 0; i < r->nrecs; i++) {
      const rec *p = &r->recs[i];
      if (!p->used) continue;
      json_array_append_new(procs, proc_json(o, root, i + 1, p->parent, p->step, p->status, p->paused, p->valid, p->group,
                                             p->from_group, p->join, p->payload, p->error, p->abort_reason));
    }
    for (size_t i = 0; i < r->nhist; i++) {
      char pid[48];
      xgr_pid_format(root, r->hist[i].iter, pid, sizeof pid);
      const hist_row *hr = &r->hist[i];
      json_array_append_new(h, json_pack("{s:s, s:s, s:s, s:o, s:I, s:o}", "pid", pid, "step", o->steps[hr->step].id,
                                         "status", xgr_proc_status_name(hr->status), "valid", valid_json(hr->valid),
                                         "at", (json_int_t)hr->at, "error",
                                         hr->error ? json_string(hr->error) : json_null()));
      if (hr->api) {   /* what its API calls did: status, time, URL (credentials masked), error */
        json_t *calls = json_loads(hr->api, 0, NULL);
        if (calls) json_object_set_new(json_array_get(h, json_array_size(h) - 1), "apiCalls", calls);
      }
    }
  } else {
    collect c = {0};
    xgr_session_foreach(s, collect_proc, &c);
    if (c.n) qsort(c.v, c.n, sizeof *c.v, cmp_iter);
    for (size_t i = 0; i < c.n; i++) {
      const xgr_proc *p = c.v[i];
      json_t *join = p->join ? xgr_join_state_json(o, p->join) : NULL;
      json_array_append_new(procs, proc_json(o, root, p->iter, p->parent_iter, p->step, p->status, p->paused, p->valid,
                                             p->group, p->from_group, join, p->payload, p->error, p->abort_reason));
      json_decref(join);
    }
    free(c.v);
  }
  char rootbuf[24];
  snprintf(rootbuf, sizeof rootbuf, "%llu", (unsigned long long)root);
  json_t *acts = r ? json_deep_copy(r->actions) : json_array();
  json_t *rep = json_pack("{s:s, s:{s:s, s:s, s:s, s:s}, s:o, s:o, s:o, s:I, s:I}", "result", result, "session", "owner",
                          xgr_session_owner(s), "rootPid", rootbuf, "ostcId", o->id, "ostcHash", o->hash, "processes",
                          procs, "history", h, "actions", acts, "steps", (json_int_t)steps, "clockMs", (json_int_t)now);
  xgr_session_state st;
  xgr_session_state_get(s, &st);
  if (st.killed) json_object_set_new(rep, "killedAt", json_integer(st.killed_at));   /* session clock, ms */
  return rep;
}
