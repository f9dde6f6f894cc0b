/* restore.c — recovery of the session core (declarations at the end of xgr/session.h, issue 8).
 *
 * Rebuilding a session from stored rows needs the core's private structures (the process table,
 * join scopes, promotion heaps), so this file is built as the core's translation unit: it
 * includes core.c and adds the recovery functions on top, without changing a line of it
 * (src/session/meson.build compiles restore.c in place of core.c). If core.c's internals change,
 * this file fails to compile rather than restore wrong state.
 *
 * What is restored, and from what (SEMANTICS §2–3):
 *   - counters: next_iter, next_group, the session-wide pause (xgr_session_state);
 *   - every live process with all its fields; a process that was running comes back waiting
 *     with the payload it had before its step ran (its result never committed);
 *   - join targets: the join state (decl, inbox, fail, closed, outcome) from its JSON;
 *   - scopes: rebuilt from the live members and targets; a scope whose target is no longer live
 *     has a closed join; a scope closed with policy kill comes from the stored killed scopes.
 * restore_end then settles, which takes any join decision that was still pending.
 */
#include "core.c"

#include <stdarg.h>

void xgr_session_state_get(const xgr_session *s, xgr_session_state *out) {
  out->next_iter = s->next_iter;
  out->next_group = s->next_group;
  out->paused = s->paused;
  out->killed = s->killed;
  out->killed_at = s->killed_at;
}

const xgr_proc *xgr_session_collector(const xgr_session *s, uint32_t group) {
  const scope *c = scope_find(s, group);
  return c && c->target ? proc_find(s, c->target) : NULL;
}

/* ---- join state as JSON ------------------------------------------------------------------------ */

typedef struct sbuf {
  char *p;
  size_t n, cap;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    while (b->n + n + 1 > b->cap) b->cap = b->cap ? b->cap * 2 : 256;
    b->p = xrealloc(b->p, b->cap);
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
}

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
  char tmp[128];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  sb_put(b, tmp, n > 0 ? (size_t)n : 0);
}

/* Which step and branch declared join d (pointer identity inside o); false if none. */
static bool decl_ref(const xgr_orch *o, const xgr_join *d, unsigned *step, unsigned *branch) {
  for (size_t i = 0; i < o->nsteps; i++)
    for (unsigned b = 0; b < 2; b++)
      if (o->steps[i].branch[b].join == d) {
        *step = (unsigned)i;
        *branch = b;
        return true;
      }
  return false;
}

char *xgr_session_join_to_json(const xgr_orch *o, const xgr_join_state *js) {
  unsigned step = 0, branch = 0;
  if (!js || !decl_ref(o, js->decl, &step, &branch)) return NULL;
  sbuf b = {0};
  sb_printf(&b, "{\"decl\":[%u,%u],\"closed\":%s,\"outcome\":%d,\"closedAt\":%lld,\"inbox\":[", step, branch,
            js->closed ? "true" : "false", (int)js->outcome, (long long)js->closed_at);
  for (unsigned i = 0; i < js->decl->n; i++) {
    if (i) sb_put(&b, ",", 1);
    if (js->inbox[i].kind == XGR_VNULL) {
      sb_put(&b, "null", 4);
    } else {
      size_t n;
      char *t = xgr_value_to_json_text(js->inbox[i], 0, &n);
      sb_put(&b, t, n);
      free(t);
    }
  }
  sb_put(&b, "],\"fail\":[", 10);
  for (unsigned i = 0; i < js->decl->n; i++) sb_printf(&b, "%s%s", i ? "," : "", js->fail[i] ? "true" : "false");
  sb_put(&b, "]}", 2);
  return b.p;
}

/* Integer field of a parsed map (int or uint that fits int64). */
static bool get_i64(xgr_value m, const char *key, int64_t *out) {
  xgr_value v;
  if (!xgr_map_get_str(m, key, strlen(key), &v)) return false;
  if (v.kind == XGR_VINT) *out = v.as.i;
  else if (v.kind == XGR_VUINT && v.as.u <= INT64_MAX) *out = (int64_t)v.as.u;
  else return false;
  return true;
}

/* Parse the JSON of xgr_session_join_to_json into a new join state for o. */
static int join_from_json(const xgr_orch *o, const char *text, xgr_join_state **out, xgr_error *err) {
  xgr_value m;
  if (xgr_value_from_json_text(text, strlen(text), 0, &m, err)) return XGR_EINVAL;
  int rc = XGR_EINVAL;
  xgr_join_state *js = NULL;
  xgr_value decl, closed, inbox, fail;
  if (m.kind != XGR_VMAP || !xgr_map_get_str(m, "decl", 4, &decl) || xgr_list_size(decl) != 2 ||
      !xgr_map_get_str(m, "closed", 6, &closed) || closed.kind != XGR_VBOOL || !xgr_map_get_str(m, "inbox", 5, &inbox) ||
      inbox.kind != XGR_VLIST || !xgr_map_get_str(m, "fail", 4, &fail) || fail.kind != XGR_VLIST) {
    xgr_error_set(err, XGR_EINVAL, "join", "a join state needs decl, closed, inbox and fail");
    goto done;
  }
  xgr_value ds = xgr_list_get(decl, 0), db = xgr_list_get(decl, 1);
  int64_t step = ds.kind == XGR_VINT ? ds.as.i : -1, branch = db.kind == XGR_VINT ? db.as.i : -1;
  if (step < 0 || (size_t)step >= o->nsteps || branch < 0 || branch > 1 || !o->steps[step].branch[branch].join) {
    xgr_error_set(err, XGR_EINVAL, "join.decl", "the declaring branch [%lld,%lld] has no join in this orchestration",
                  (long long)step, (long long)branch);
    goto done;
  }
  const xgr_join *d = o->steps[step].branch[branch].join;
  if (xgr_list_size(inbox) != d->n || xgr_list_size(fail) != d->n) {
    xgr_error_set(err, XGR_EINVAL, "join.inbox", "expected %u entries as the join declares", (unsigned)d->n);
    goto done;
  }
  int64_t outcome = 0, closed_at = 0;
  if (!get_i64(m, "outcome", &outcome) || outcome < 0 || outcome > 2 || !get_i64(m, "closedAt", &closed_at)) {
    xgr_error_set(err, XGR_EINVAL, "join.outcome", "expected an outcome 0..2 and closedAt");
    goto done;
  }
  js = xcalloc(1, sizeof *js);
  js->decl = d;
  js->closed = closed.as.b;
  js->outcome = (xgr_join_outcome)outcome;
  js->closed_at = closed_at;
  for (unsigned i = 0; i < d->n; i++) {
    xgr_value piece = xgr_list_get(inbox, i), f = xgr_list_get(fail, i);
    if (piece.kind != XGR_VNULL && piece.kind != XGR_VMAP) {
      xgr_error_set(err, XGR_EINVAL, "join.inbox", "a piece is an object or null");
      goto done;
    }
    js->inbox[i] = xgr_value_retain(piece);
    js->fail[i] = f.kind == XGR_VBOOL && f.as.b ? "aborted" : NULL;
  }
  *out = js;
  js = NULL;
  rc = 0;
done:
  if (js) {
    for (unsigned i = 0; i < XGR_MAX_JOIN_INPUTS; i++) xgr_value_release(js->inbox[i]);
    free(js);
  }
  xgr_value_release(m);
  return rc;
}

/* ---- restore ------------------------------------------------------------------------------------ */

xgr_session *xgr_session_restore_begin(const xgr_orch *o, const char *owner, uint64_t root_pid,
                                       const xgr_session_config *cfg, const xgr_session_state *st) {
  xgr_session *s = xgr_session_new(o, owner, root_pid, cfg);
  if (st) {
    s->next_iter = st->next_iter ? st->next_iter : 1;
    s->next_group = st->next_group ? st->next_group : 1;
    s->paused = st->paused;
    s->killed = st->killed;
    s->killed_at = st->killed_at;
  }
  return s;
}

int xgr_session_restore_proc(xgr_session *s, const xgr_proc *src, const char *join_json, xgr_error *err) {
  char pid[48];
  xgr_pid_format(s->root_pid, src->iter, pid, sizeof pid);
  if (src->status != XGR_PROC_WAITING && src->status != XGR_PROC_RUNNING)
    return xgr_error_set(err, XGR_EINVAL, pid, "process %s is %s; only live processes are restored", pid,
                         xgr_proc_status_name(src->status));
  if (src->iter == 0 || src->iter >= s->next_iter)
    return xgr_error_set(err, XGR_EINVAL, pid, "process %s is outside the session's iters (next %llu)", pid,
                         (unsigned long long)s->next_iter);
  if (src->step >= s->orch->nsteps)
    return xgr_error_set(err, XGR_EINVAL, pid, "process %s is at step index %u, the orchestration has %zu steps", pid,
                         (unsigned)src->step, s->orch->nsteps);
  if (proc_find(s, src->iter)) return xgr_error_set(err, XGR_EINVAL, pid, "process %s is there twice", pid);
  if (src->group >= s->next_group || src->from_group >= s->next_group)
    return xgr_error_set(err, XGR_EINVAL, pid, "process %s names join group %u, the session has %u", pid,
                         (unsigned)(src->group > src->from_group ? src->group : src->from_group), (unsigned)s->next_group);
  xgr_join_state *js = NULL;
  if (join_json && join_from_json(s->orch, join_json, &js, err)) return XGR_EINVAL;
  if (js && (js->decl->target != src->step || !src->from_group)) {
    for (unsigned i = 0; i < XGR_MAX_JOIN_INPUTS; i++) xgr_value_release(js->inbox[i]);
    free(js);
    return xgr_error_set(err, XGR_EINVAL, pid, "process %s has a join state but is not its target", pid);
  }
  xgr_proc *p = xcalloc(1, sizeof *p);
  p->iter = src->iter;
  p->parent_iter = src->parent_iter;
  p->step = src->step;
  p->status = XGR_PROC_WAITING;   /* a running step's result never committed: it runs again */
  p->paused = src->paused;
  p->valid = -1;
  p->group = src->group;
  p->from_group = src->from_group;
  p->next_wake_at = src->next_wake_at;
  p->created_at = src->created_at;
  p->started_at = -1;
  p->finished_at = -1;
  p->payload = xgr_value_kind(src->payload) == XGR_VMAP ? xgr_value_retain(src->payload) : xgr_map_new(0);
  p->join = js;
  p->heap_idx_ = HEAP_NONE;
  if (s->live + 1 > s->nbuckets) procs_grow(s);
  size_t h = hash64(p->iter) & (s->nbuckets - 1);
  p->hash_next_ = s->buckets[h];
  s->buckets[h] = p;
  s->live++;
  scope *c = scope_get(s, p->group);
  c->live++;
  if (c->step_count[p->step]++ == 0) xgr_stepset_add(&c->live_steps, p->step);
  p->scope_next_ = c->members;
  if (c->members) c->members->scope_prev_ = p;
  c->members = p;
  return 0;
}

void xgr_session_restore_scope_killed(xgr_session *s, uint32_t group) {
  if (group == 0) return;
  scope *c = scope_get(s, group);
  c->killed = true;
  c->closed = true;
}

int xgr_session_restore_end(xgr_session *s, int64_t now, xgr_effects *fx, xgr_error *err) {
  /* join targets: their scope collects into them */
  for (size_t i = 0; i < s->nbuckets; i++)
    for (xgr_proc *p = s->buckets[i]; p; p = p->hash_next_) {
      if (!p->join) continue;
      scope *c = scope_get(s, p->from_group);
      if (c->target && c->target != p->iter) {
        char pid[48];
        xgr_pid_format(s->root_pid, p->iter, pid, sizeof pid);
        return xgr_error_set(err, XGR_EINVAL, pid, "join group %u has two targets", (unsigned)p->from_group);
      }
      c->target = p->iter;
      if (p->join->closed) {
        c->closed = true;
        if (p->join->decl->policy == XGR_POLICY_KILL) c->killed = true;
      }
    }
  /* scopes whose target is gone (terminal) have a closed join */
  for (size_t i = 0; i < s->nsbuckets; i++)
    for (scope *c = s->sbuckets[i]; c; c = c->hash_next)
      if (c->id != 0 && !c->target) c->closed = true;
  for (size_t i = 0; i < s->nbuckets; i++)
    for (xgr_proc *p = s->buckets[i]; p; p = p->hash_next_) heap_sync(s, p);
  /* drop scopes with nothing left in them; queue open joins for a decision */
  size_t nsc = 0;
  for (size_t i = 0; i < s->nsbuckets; i++)
    for (scope *c = s->sbuckets[i]; c; c = c->hash_next) nsc++;
  scope **all = xmalloc((nsc ? nsc : 1) * sizeof *all);
  size_t k = 0;
  for (size_t i = 0; i < s->nsbuckets; i++)
    for (scope *c = s->sbuckets[i]; c; c = c->hash_next) all[k++] = c;
  for (size_t i = 0; i < k; i++) {
    if (all[i]->target && !all[i]->closed) mark_dirty(s, all[i]);
    else scope_free_if_done(s, all[i]);
  }
  free(all);
  settle(s, now, fx);
  return 0;
}
