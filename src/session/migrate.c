/* migrate.c — moving a session to another orchestration (issue 36; xgr/session.h "Migration"): the
 * one function the engine's actor (xgr.migrateSessions) and the explorer (`xgr migrate-check`) both
 * call, so they cannot disagree on what a migrated session is. The live processes, join states and
 * killed scopes of a settled session without running steps are rewritten onto NEW through a step
 * map and restored into a new core, which then decides its open joins again under NEW. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session/core_impl.h"
#include "util/alloc.h"

int xgr_migrate_map_build(const xgr_orch *old, const xgr_orch *nw, size_t npairs, const char *const *from,
                          const char *const *to, int *map, xgr_error *err) {
  for (size_t i = 0; i < old->nsteps; i++) map[i] = xgr_orch_find(nw, old->steps[i].id);
  for (size_t i = 0; i < npairs; i++) {
    char path[32];
    snprintf(path, sizeof path, "map[%zu]", i);
    int a = xgr_orch_find(old, from[i]), b = xgr_orch_find(nw, to[i]);
    if (a < 0) return xgr_error_set(err, XGR_EINVAL, path, "\"%s\" is not a step of the old orchestration", from[i]);
    if (b < 0) return xgr_error_set(err, XGR_EINVAL, path, "\"%s\" is not a step of the new orchestration", to[i]);
    map[a] = b;
  }
  return 0;
}


/* The live processes of s in iter order (borrowed; the caller frees the array). */
typedef struct plist {
  const xgr_proc **p;
  size_t n, cap;
} plist;

static void plist_add(void *ctx, const xgr_proc *p) {
  plist *l = ctx;
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 16;
    l->p = xgr__xrealloc(l->p, l->cap * sizeof *l->p);
  }
  l->p[l->n++] = p;
}

static int by_iter(const void *a, const void *b) {
  uint64_t x = (*(const xgr_proc *const *)a)->iter, y = (*(const xgr_proc *const *)b)->iter;
  return x < y ? -1 : x > y;
}

static plist live_sorted(const xgr_session *s) {
  plist l = {0};
  xgr_session_foreach(s, plist_add, &l);
  if (l.n) qsort(l.p, l.n, sizeof *l.p, by_iter);
  return l;
}

/* The steps at which live members of join group g are. */
static xgr_stepset group_steps(const plist *l, uint32_t g) {
  xgr_stepset st = {{0, 0}};
  for (size_t i = 0; i < l->n; i++)
    if (l->p[i]->group == g) xgr_stepset_add(&st, l->p[i]->step);
  return st;
}

/* The declaring step and branch of join d in o (pointer identity); false if none. */
static bool mig_decl_ref(const xgr_orch *o, const xgr_join *d, unsigned *step, unsigned *branch) {
  for (size_t i = 0; i < o->nsteps; i++)
    for (unsigned b = 0; b < 2; b++)
      if (o->steps[i].branch[b].join == d) {
        *step = (unsigned)i;
        *branch = b;
        return true;
      }
  return false;
}

/* How many more pieces the join of t can get: its open `from` entries that some live member of
 * scope c (at steps steps, in orchestration o) can still reach in scope. */
static unsigned mig_potential(const xgr_orch *o, const xgr_join *d, const xgr_value *inbox, const xgr_stepset *steps) {
  xgr_stepset reach = *steps;
  for (unsigned st = 0; st < o->nsteps; st++)
    if (xgr_stepset_has(steps, st)) {
      reach.w[0] |= o->reach_scope[st].w[0];
      reach.w[1] |= o->reach_scope[st].w[1];
    }
  unsigned n = 0;
  for (unsigned i = 0; i < d->n; i++)
    if (inbox[i].kind == XGR_VNULL && xgr_stepset_has(&reach, d->from[i].node)) n++;
  return n;
}

typedef struct mig_report {
  xgr_migrate_problem_fn fn;
  void *ctx;
  xgr_error *err;
  unsigned count;
} mig_report;

static void mig_problem(mig_report *r, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void mig_problem(mig_report *r, const char *path, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!r->count++) xgr_error_set(r->err, XGR_EINVAL, path, "%s", msg);
  if (r->fn) r->fn(r->ctx, path, msg);
}

/* The join state of OLD target p rewritten for NEW (NULL after a problem). */
static xgr_join_state *mig_join(const xgr_session *s, const plist *live, const xgr_orch *nw, const int *map,
                                const xgr_proc *p, const char *pid, mig_report *r) {
  const xgr_orch *o = xgr_session_orch(s);
  const xgr_join_state *js = p->join;
  const xgr_join *od = js->decl;
  unsigned tstep = (unsigned)map[p->step];
  char path[96];
  snprintf(path, sizeof path, "processes[\"%s\"].join", pid);
  const xgr_join *nd = NULL;
  unsigned dstep, dbranch;
  if (mig_decl_ref(o, od, &dstep, &dbranch) && map[dstep] >= 0) {
    const xgr_join *c = nw->steps[map[dstep]].branch[dbranch].join;
    if (c && c->target == tstep) nd = c;
  }
  for (size_t i = 0; !nd && i < nw->nsteps; i++)
    for (unsigned b = 0; b < 2 && !nd; b++)
      if (nw->steps[i].branch[b].join && nw->steps[i].branch[b].join->target == tstep) nd = nw->steps[i].branch[b].join;
  if (!nd) {
    mig_problem(r, path,
                "process %s is the target of join %s (%u of %u) but no step of the new orchestration declares a join into %s",
                pid, o->steps[p->step].id, od->k, od->n, nw->steps[tstep].id);
    return NULL;
  }
  xgr_join_state *ns = xgr__xcalloc(1, sizeof *ns);
  ns->decl = nd;
  ns->closed = js->closed;
  ns->outcome = js->outcome;
  ns->closed_at = js->closed_at;
  bool bad = false;
  for (unsigned i = 0; i < od->n; i++) {
    bool piece = js->inbox[i].kind != XGR_VNULL;
    if (!piece && !js->fail[i]) continue;
    const char *fid = o->steps[od->from[i].node].id;
    int to = map[od->from[i].node];
    int j = -1;
    for (unsigned q = 0; to >= 0 && q < nd->n; q++)
      if (nd->from[q].node == (unsigned)to) j = (int)q;
    if (j < 0) {
      if (js->closed) continue;   /* a decided join keeps its outcome; the record is history */
      mig_problem(r, path, "join %s of process %s holds %s from step %s, which the new join's `from` does not accept",
                  nw->steps[tstep].id, pid, piece ? "a piece" : "a fail record", fid);
      bad = true;
      continue;
    }
    if (piece && !js->closed && nd->from[j].when != XGR_WHEN_ANY && nd->from[j].when != od->from[i].when) {
      mig_problem(r, path, "join %s of process %s holds a piece from step %s taken under when=%s; the new join wants when=%s",
                  nw->steps[tstep].id, pid, fid, xgr_when_name(od->from[i].when), xgr_when_name(nd->from[j].when));
      bad = true;
      continue;
    }
    ns->inbox[j] = xgr_value_retain(js->inbox[i]);
    ns->fail[j] = js->fail[i];
  }
  if (!bad && js->closed && js->outcome == XGR_JOIN_SATISFIED) {
    /* decided: its target waits to run with the merged payload; NEW's join must agree it holds enough */
    unsigned ngot = 0;
    for (unsigned i = 0; i < nd->n; i++) ngot += ns->inbox[i].kind != XGR_VNULL;
    if (ngot < nd->k) {
      mig_problem(r, path, "join %s of process %s was satisfied with %u piece%s that the new join accepts; the new join needs %u",
                  nw->steps[tstep].id, pid, ngot, ngot == 1 ? "" : "s", nd->k);
      bad = true;
    }
  }
  if (!bad && !js->closed) {
    /* can it still be satisfied? Only a loss against OLD is a problem */
    xgr_stepset olds = group_steps(live, p->from_group), news = {{0, 0}};
    for (unsigned st = 0; st < o->nsteps; st++)
      if (xgr_stepset_has(&olds, st) && map[st] >= 0) xgr_stepset_add(&news, (unsigned)map[st]);
    unsigned ogot = 0, ngot = 0;
    for (unsigned i = 0; i < od->n; i++) ogot += js->inbox[i].kind != XGR_VNULL;
    for (unsigned i = 0; i < nd->n; i++) ngot += ns->inbox[i].kind != XGR_VNULL;
    bool old_can = ogot + mig_potential(o, od, js->inbox, &olds) >= od->k;
    bool new_can = ngot + mig_potential(nw, nd, ns->inbox, &news) >= nd->k;
    if (old_can && !new_can) {
      mig_problem(r, path, "join %s of process %s could be satisfied under the old orchestration but not under the new one: "
                  "it needs %u of %u, holds %u and its live producers can bring %u more",
                  nw->steps[tstep].id, pid, nd->k, nd->n, ngot, mig_potential(nw, nd, ns->inbox, &news));
      bad = true;
    }
  }
  if (bad) {
    xgr__join_state_free(ns);
    return NULL;
  }
  return ns;
}

int xgr_session_migrate(const xgr_session *s, const xgr_orch *nw, const int *map, int64_t now, xgr_effects *fx,
                        xgr_session **out, xgr_migrate_problem_fn problem, void *ctx, xgr_error *err) {
  *out = NULL;
  const xgr_orch *o = xgr_session_orch(s);
  uint64_t root = xgr_session_root_pid(s);
  if (xgr_session_running(s))
    return xgr_error_set(err, XGR_ESTATE, NULL, "session %llu has %zu running step%s; it migrates only when none runs",
                         (unsigned long long)root, xgr_session_running(s), xgr_session_running(s) == 1 ? "" : "s");
  mig_report r = {problem, ctx, err, 0};
  plist live = live_sorted(s);
  xgr_join_state **joins = xgr__xcalloc(live.n + 1, sizeof *joins);
  for (size_t i = 0; i < live.n; i++) {
    const xgr_proc *p = live.p[i];
    char pid[48], path[96];
    xgr_pid_format(root, p->iter, pid, sizeof pid);
    if (map[p->step] < 0) {
      snprintf(path, sizeof path, "processes[\"%s\"].step", pid);
      mig_problem(&r, path, "process %s is at step %s, which has no target in the new orchestration (no step %s and no mapping)",
                  pid, o->steps[p->step].id, o->steps[p->step].id);
      continue;
    }
    if (p->join) joins[i] = mig_join(s, &live, nw, map, p, pid, &r);
  }
  if (r.count) {
    for (size_t i = 0; i < live.n; i++) xgr__join_state_free(joins[i]);
    free(joins);
    free(live.p);
    return XGR_EINVAL;
  }
  xgr_session_config cfg = {.max_running = xgr__session_max_running(s)};
  xgr_session_state st;
  xgr_session_state_get(s, &st);
  xgr_session *t = xgr_session_restore_begin(nw, xgr_session_owner(s), root, &cfg, &st);
  for (uint32_t g = 1; g < st.next_group; g++)
    if (xgr_session_scope_killed(s, g)) xgr_session_restore_scope_killed(t, g);
  int rc = 0;
  for (size_t i = 0; i < live.n && !rc; i++) {
    xgr_proc q = *live.p[i];   /* fields only: restore copies them and retains the payload */
    q.step = (uint16_t)map[q.step];
    q.status = XGR_PROC_WAITING;
    rc = xgr__session_restore_proc_js(t, &q, joins[i], err);
    joins[i] = NULL;
  }
  for (size_t i = 0; i < live.n; i++) xgr__join_state_free(joins[i]);
  free(joins);
  free(live.p);
  if (!rc) rc = xgr_session_restore_end(t, now, fx, err);
  if (rc) {
    xgr_session_free(t);
    return rc;
  }
  xgr__session_emit_live(t, fx);   /* every live process changed (its step at least) */
  *out = t;
  return 0;
}
