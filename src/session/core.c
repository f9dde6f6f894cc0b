/* core.c — the session manager core: SEMANTICS.md as a pure state machine (see xgr/session.h).
 *
 * Data structures, all per session:
 *   - procs:  live processes by iter (util/hashmap.h; terminal ones leave at once; they sit on
 *             a "grave" list until the next call so that effect pointers stay valid meanwhile);
 *   - scopes: join scopes by group id (util/hashmap.h). A scope knows its live members (an
 *             intrusive list plus a per-step count and the set of steps they are at), the join
 *             target that collects from it (if any), and whether its join closed with `kill`.
 *             Scope 0 is the session's root scope; a live process points at its own scope
 *             (scope_), so the per-step path looks up no scope;
 *   - two min-heaps of promotable waiting processes keyed by (nextWakeAt, iter): one for steps
 *             that declare a join (they bypass the per-session cap) and one for the rest.
 * A join decision needs only its scope: `potential` is the union, over the distinct steps live
 * members are at, of "that step or anything reachable from it in scope" (precomputed bitsets),
 * intersected with the missing expected steps — O(live steps in scope) 128-bit operations.
 *
 * Every mutating entry point ends with settle(): it drains a queue of scopes whose join must be
 * killed (policy kill) and a queue of "dirty" scopes whose join must be decided (a member became
 * terminal or a new join was opened), iteratively, so cascades (an inner join that becomes
 * unfulfillable aborts its target, which fails the outer join, ...) need no recursion.
 */
#include "util/alloc.h"
#include "util/buf.h"
#include "util/hashmap.h"
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "session/core_impl.h"
#include "xgr/session.h"

/* ---- small utilities ------------------------------------------------------------------------ */

/* ---- scopes --------------------------------------------------------------------------------- */

typedef struct scope {
  uint32_t id;
  uint32_t live;                /* waiting + running members */
  uint64_t target;              /* iter of the join target collecting from this scope, or 0 */
  bool killed;                  /* its join closed with policy kill: spawn + dispatch gates */
  bool closed;                  /* its join closed (either way) */
  bool dirty;                   /* queued for a decision */
  xgr_stepset live_steps;       /* steps at which live members are */
  uint32_t *step_count;         /* live members per step (nsteps entries) */
  xgr_proc *members;            /* intrusive list of live members */
} scope;

/* ---- heap of promotable processes ------------------------------------------------------------ */

typedef struct heap {
  xgr_proc **a;
  size_t n, cap;
} heap;

#define HEAP_NONE ((size_t)-1)
#define HEAP_BIT ((size_t)1 << (sizeof(size_t) * 8 - 1))   /* which heap: stored in heap_idx_ */

static bool before(const xgr_proc *a, const xgr_proc *b) {
  return a->next_wake_at < b->next_wake_at || (a->next_wake_at == b->next_wake_at && a->iter < b->iter);
}

static void heap_set(heap *h, size_t i, xgr_proc *p, size_t tag) {
  h->a[i] = p;
  p->heap_idx_ = i | tag;
}

static void heap_up(heap *h, size_t i, size_t tag) {
  xgr_proc *p = h->a[i];
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!before(p, h->a[parent])) break;
    heap_set(h, i, h->a[parent], tag);
    i = parent;
  }
  heap_set(h, i, p, tag);
}

static void heap_down(heap *h, size_t i, size_t tag) {
  xgr_proc *p = h->a[i];
  for (;;) {
    size_t l = 2 * i + 1, m = i;
    const xgr_proc *best = p;
    if (l < h->n && before(h->a[l], best)) { m = l; best = h->a[l]; }
    if (l + 1 < h->n && before(h->a[l + 1], best)) m = l + 1;
    if (m == i) break;
    heap_set(h, i, h->a[m], tag);
    i = m;
  }
  heap_set(h, i, p, tag);
}

static void heap_push(heap *h, xgr_proc *p, size_t tag) {
  if (h->n == h->cap) {
    h->cap = h->cap ? h->cap * 2 : 16;
    h->a = xgr__xrealloc(h->a, h->cap * sizeof *h->a);
  }
  h->a[h->n] = p;
  heap_up(h, h->n++, tag);
}

static void heap_remove(heap *h, size_t i, size_t tag) {
  xgr_proc *p = h->a[i];
  p->heap_idx_ = HEAP_NONE;
  h->n--;
  if (i == h->n) return;
  heap_set(h, i, h->a[h->n], tag);
  heap_up(h, i, tag);
  heap_down(h, h->a[i]->heap_idx_ & ~HEAP_BIT, tag);
}

/* ---- the session ------------------------------------------------------------------------------ */

struct xgr_session {
  const xgr_orch *orch;
  char *owner;
  uint64_t root_pid;
  uint32_t max_running;
  uint64_t next_iter;
  uint32_t next_group;
  size_t live, running;
  bool killed, paused;
  xgr_session_result result;
  int64_t killed_at;
  xgr_stepset join_steps;       /* steps with a branch that declares a join (cap bypass) */

  xgr_hashmap procs;            /* live xgr_proc by iter */
  xgr_hashmap scopes;           /* scope by id */

  heap normal, bypass;          /* promotable waiting processes */
  xgr_proc *grave;              /* terminal processes to free at the next call */

  scope **dirty;                /* scopes awaiting a join decision */
  size_t ndirty, capdirty;
  uint32_t *killq;              /* scopes whose waiting members must be aborted */
  size_t nkill, capkill;
#ifndef NDEBUG
  size_t check_credit;          /* table entries check_invariants() may walk (see there) */
#endif
};

/* ---- effects ---------------------------------------------------------------------------------- */

void xgr_effects_init(xgr_effects *fx) { memset(fx, 0, sizeof *fx); }

void xgr_effects_reset(xgr_effects *fx) {
  for (size_t i = 0; i < fx->n; i++) {
    xgr_effect *e = &fx->items[i];
    if (e->kind == XGR_FX_WAKE) {
      free(e->runner);
      free(e->step_id);
      free(e->rule_address);
      xgr_value_release(e->payload);
    } else if (e->kind == XGR_FX_HISTORY) {
      free(e->api);
    }
  }
  fx->n = 0;
}

void xgr_effects_free(xgr_effects *fx) {
  xgr_effects_reset(fx);
  free(fx->items);
  memset(fx, 0, sizeof *fx);
}

static xgr_effect *fx_push(xgr_effects *fx, xgr_effect_kind kind, const xgr_proc *p) {
  if (!fx) return NULL;
  if (fx->n == fx->cap) {
    fx->cap = fx->cap ? fx->cap * 2 : 8;   /* 8 x 96 bytes: within malloc's per-thread cache */
    fx->items = xgr__xrealloc(fx->items, fx->cap * sizeof *fx->items);
  }
  xgr_effect *e = &fx->items[fx->n++];
  memset(e, 0, sizeof *e);
  e->kind = kind;
  e->proc = p;
  if (p) {
    e->status = p->status;
    e->valid = p->valid;
  }
  return e;
}

static void fx_proc(xgr_effects *fx, const xgr_proc *p) { fx_push(fx, XGR_FX_PROC, p); }

/* ---- names ------------------------------------------------------------------------------------ */

const char *xgr_proc_status_name(xgr_proc_status st) {
  static const char *const n[] = {"waiting", "running", "done", "aborted"};
  return (unsigned)st < 4 ? n[st] : "unknown";
}
const char *xgr_join_outcome_name(xgr_join_outcome o) {
  static const char *const n[] = {"open", "satisfied", "unfulfillable"};
  return (unsigned)o < 3 ? n[o] : "unknown";
}
const char *xgr_abort_reason_name(xgr_abort_reason r) {
  static const char *const n[] = {"", "error", "abortStep", "cancelSession", "killed", "join kill", "join unfulfillable"};
  return (unsigned)r < 7 ? n[r] : "unknown";
}
const char *xgr_session_result_name(xgr_session_result r) {
  static const char *const n[] = {"running", "completed", "killed", "stalled", "limit"};
  return (unsigned)r < 5 ? n[r] : "unknown";
}

void xgr_pid_format(uint64_t root_pid, uint64_t iter, char *buf, size_t n) {
  char t[42];   /* 20 digits, ':', 20 digits, NUL; no printf: this runs for every step */
  size_t k = xgr__u64_dec(t, root_pid);
  t[k++] = ':';
  k += xgr__u64_dec(t + k, iter);
  t[k] = '\0';
  if (n) xgr__str_copy(buf, n, t);
}

int xgr_pid_parse(const char *s, uint64_t *root_pid, uint64_t *iter) {
  char *end;
  if (!s || !(*s >= '0' && *s <= '9')) return XGR_EINVAL;
  errno = 0;
  unsigned long long r = strtoull(s, &end, 10);
  if (end == s || r == 0 || errno == ERANGE) return XGR_EINVAL;   /* beyond 2^64-1: refused, not clamped */
  unsigned long long it = 0;
  if (*end == ':') {
    const char *q = end + 1;
    if (!(*q >= '0' && *q <= '9')) return XGR_EINVAL;
    it = strtoull(q, &end, 10);
    if (end == q || it == 0 || errno == ERANGE) return XGR_EINVAL;
  }
  if (*end) return XGR_EINVAL;
  *root_pid = r;
  *iter = it;
  return 0;
}

/* ---- process and scope tables ----------------------------------------------------------------- */

static xgr_proc *proc_find(const xgr_session *s, uint64_t iter) { return xgr__hashmap_get(&s->procs, iter); }

static scope *scope_find(const xgr_session *s, uint32_t id) { return xgr__hashmap_get(&s->scopes, id); }

static scope *scope_get(xgr_session *s, uint32_t id) {
  scope *c = scope_find(s, id);
  if (c) return c;
  c = xgr__xcalloc(1, sizeof *c);
  c->id = id;
  c->step_count = xgr__xcalloc(s->orch->nsteps, sizeof *c->step_count);
  xgr__hashmap_put(&s->scopes, id, c);
  return c;
}

static void scope_free_if_done(xgr_session *s, scope *c) {
  if (c->id == 0 || c->live || c->dirty || !(c->closed || !c->target)) return;
  xgr__hashmap_del(&s->scopes, c->id);
  free(c->step_count);
  free(c);
}

static void mark_dirty(xgr_session *s, scope *c) {
  if (c->dirty || !c->target || c->closed) return;
  c->dirty = true;
  if (s->ndirty == s->capdirty) {
    s->capdirty = s->capdirty ? s->capdirty * 2 : 16;
    s->dirty = xgr__xrealloc(s->dirty, s->capdirty * sizeof *s->dirty);
  }
  s->dirty[s->ndirty++] = c;
}

static void queue_kill(xgr_session *s, uint32_t id) {
  if (s->nkill == s->capkill) {
    s->capkill = s->capkill ? s->capkill * 2 : 8;
    s->killq = xgr__xrealloc(s->killq, s->capkill * sizeof *s->killq);
  }
  s->killq[s->nkill++] = id;
}

/* ---- promotability ---------------------------------------------------------------------------- */

static bool promotable(const xgr_proc *p) {
  return p->status == XGR_PROC_WAITING && !p->paused && p->next_wake_at != XGR_NEVER &&
         !(p->join && !p->join->closed);
}

/* Put p into, out of, or back in order in its heap, after any change of the fields that
 * promotable() and the heap order read. */
static void heap_sync(xgr_session *s, xgr_proc *p) {
  bool want = promotable(p);
  bool bypass = xgr_stepset_has(&s->join_steps, p->step);
  heap *h = bypass ? &s->bypass : &s->normal;
  size_t tag = bypass ? HEAP_BIT : 0;
  if (p->heap_idx_ != HEAP_NONE) {
    size_t i = p->heap_idx_ & ~HEAP_BIT;
    heap_remove(h, i, tag);
  }
  if (want) heap_push(h, p, tag);
}

/* ---- creating and ending processes ------------------------------------------------------------- */

/* Enter a new live process into the process table and its scope (not into a heap). */
static void proc_insert(xgr_session *s, xgr_proc *p) {
  p->heap_idx_ = HEAP_NONE;
  xgr__hashmap_put(&s->procs, p->iter, p);
  s->live++;
  scope *c = scope_get(s, p->group);
  p->scope_ = c;
  c->live++;
  if (c->step_count[p->step]++ == 0) xgr_stepset_add(&c->live_steps, p->step);
  p->scope_next_ = c->members;
  if (c->members) c->members->scope_prev_ = p;
  c->members = p;
}

static xgr_proc *proc_new(xgr_session *s, unsigned step, uint64_t parent, uint32_t group, xgr_value payload,
                          int64_t wake_at, int64_t now, xgr_effects *fx) {
  xgr_proc *p = xgr__xcalloc(1, sizeof *p);
  p->iter = s->next_iter++;
  p->parent_iter = parent;
  p->step = (uint16_t)step;
  p->status = XGR_PROC_WAITING;
  p->paused = s->paused;
  p->valid = -1;
  p->group = group;
  p->next_wake_at = wake_at;
  p->created_at = now;
  p->started_at = p->finished_at = -1;
  p->payload = xgr_value_retain(payload);
  proc_insert(s, p);
  heap_sync(s, p);
  fx_proc(fx, p);
  return p;
}

/* Delivery of a terminal process p into the open join collecting from its scope (§3.2). A
 * change of the target's inbox or fail records is a change of the target: it gets a PROC effect
 * so that stores and reports see open joins as they are. */
static void deliver(xgr_session *s, xgr_proc *p, scope *c, xgr_effects *fx) {
  if (!c->target || c->closed) return;
  xgr_proc *t = proc_find(s, c->target);
  if (!t || !t->join || t->join->closed) return;
  xgr_join_state *js = t->join;
  const xgr_join *d = js->decl;
  for (unsigned i = 0; i < d->n; i++) {
    if (d->from[i].node != p->step) continue;
    if (p->status == XGR_PROC_ABORTED) {
      if (js->inbox[i].kind == XGR_VNULL && !js->fail[i]) {
        js->fail[i] = "aborted";
        fx_proc(fx, t);
      }
    } else if (d->from[i].when == XGR_WHEN_ANY || (d->from[i].when == XGR_WHEN_VALID && p->valid == 1) ||
               (d->from[i].when == XGR_WHEN_INVALID && p->valid == 0)) {
      if (js->inbox[i].kind == XGR_VNULL) {
        xgr_value piece = xgr_value_kind(p->payload) == XGR_VMAP ? xgr_map_copy(p->payload) : xgr_map_new(2);
        const char *sid = s->orch->steps[p->step].id;
        xgr_map_set_str(piece, "_from", 5, xgr_value_cstring(sid));
        xgr_map_set_str(piece, "_when", 5, xgr_value_cstring(p->valid ? "valid" : "invalid"));
        js->inbox[i] = piece;
        js->fail[i] = NULL;
        fx_proc(fx, t);
      }
    }
    break;   /* `from` nodes are unique */
  }
}

/* Make p terminal: leave heap, scope and table; deliver; queue its scope for a decision. The
 * process is freed at the start of the next call (effects still point at it). */
static void proc_finish(xgr_session *s, xgr_proc *p, xgr_proc_status st, xgr_abort_reason why, int64_t now,
                        xgr_effects *fx) {
  assert(p->status == XGR_PROC_WAITING || p->status == XGR_PROC_RUNNING);
  if (p->status == XGR_PROC_RUNNING) s->running--;
  p->status = (uint8_t)st;
  p->abort_reason = (uint8_t)why;
  p->finished_at = now;
  heap_sync(s, p);
  scope *c = p->scope_;
  c->live--;
  if (--c->step_count[p->step] == 0) {
    c->live_steps.w[p->step >> 6] &= ~((uint64_t)1 << (p->step & 63));
  }
  if (p->scope_prev_) p->scope_prev_->scope_next_ = p->scope_next_;
  else c->members = p->scope_next_;
  if (p->scope_next_) p->scope_next_->scope_prev_ = p->scope_prev_;
  p->scope_prev_ = p->scope_next_ = NULL;
  xgr__hashmap_del(&s->procs, p->iter);
  s->live--;
  fx_proc(fx, p);
  deliver(s, p, c, fx);
  mark_dirty(s, c);
  scope_free_if_done(s, c);    /* the last member of a scope whose join closed already */
  p->scope_next_ = s->grave;   /* the grave list reuses the scope link */
  s->grave = p;
}

static void free_proc(xgr_proc *p) {
  xgr_value_release(p->payload);
  xgr__join_state_free(p->join);
  free(p->error);
  free(p);
}

static void bury(xgr_session *s) {
  while (s->grave) {
    xgr_proc *p = s->grave;
    s->grave = p->scope_next_;
    free_proc(p);
  }
}

/* Close an open join (either outcome) and apply its policy to its scope. */
static void join_close(xgr_session *s, xgr_proc *t, xgr_join_outcome out, int64_t now, xgr_effects *fx) {
  xgr_join_state *js = t->join;
  js->closed = true;
  js->outcome = out;
  js->closed_at = now;
  scope *c = scope_get(s, t->from_group);
  c->closed = true;
  if (js->decl->policy == XGR_POLICY_KILL) {
    c->killed = true;
    queue_kill(s, c->id);
  }
  fx_push(fx, XGR_FX_JOIN, t);
}

/* Abort a live process for `why`. An open join target closes its join as unfulfillable. */
static void abort_proc(xgr_session *s, xgr_proc *p, xgr_abort_reason why, int64_t now, xgr_effects *fx) {
  if (p->join && !p->join->closed) join_close(s, p, XGR_JOIN_UNFULFILLABLE, now, fx);
  proc_finish(s, p, XGR_PROC_ABORTED, why, now, fx);
}

/* The join decision of §3.3 for the open join collecting from scope c. */
static void decide(xgr_session *s, scope *c, int64_t now, xgr_effects *fx) {
  xgr_proc *t = proc_find(s, c->target);
  if (!t || !t->join || t->join->closed) return;
  xgr_join_state *js = t->join;
  const xgr_join *d = js->decl;
  unsigned got = 0;
  for (unsigned i = 0; i < d->n; i++) got += js->inbox[i].kind != XGR_VNULL;
  if (got >= d->k) {
    /* satisfied: merge the first k pieces in `from` order over the target's payload */
    xgr_value merged = xgr_value_kind(t->payload) == XGR_VMAP ? xgr_map_copy(t->payload) : xgr_map_new(8);
    unsigned taken = 0;
    for (unsigned i = 0; i < d->n && taken < d->k; i++) {
      xgr_value piece = js->inbox[i];
      if (piece.kind == XGR_VNULL) continue;
      taken++;
      size_t n = xgr_map_size(piece);
      for (size_t e = 0; e < n; e++) {
        xgr_value k, v;
        xgr_map_entry(piece, e, &k, &v);
        size_t kl;
        const char *ks = xgr_value_str(k, &kl);
        if (ks && ((kl == 5 && !memcmp(ks, "_from", 5)) || (kl == 5 && !memcmp(ks, "_when", 5)))) continue;
        xgr_map_set(merged, xgr_value_retain(k), xgr_value_retain(v));
      }
    }
    xgr_value_release(t->payload);
    t->payload = merged;
    join_close(s, t, XGR_JOIN_SATISFIED, now, fx);
    heap_sync(s, t);
    fx_proc(fx, t);
    return;
  }
  /* potential: missing expected steps some live member can still reach in scope */
  xgr_stepset reach = c->live_steps;
  for (unsigned w = 0; w < 2; w++) {
    uint64_t bits = c->live_steps.w[w];
    while (bits) {
      unsigned st = w * 64 + (unsigned)__builtin_ctzll(bits);
      bits &= bits - 1;
      reach.w[0] |= s->orch->reach_scope[st].w[0];
      reach.w[1] |= s->orch->reach_scope[st].w[1];
    }
  }
  unsigned potential = 0;
  for (unsigned i = 0; i < d->n; i++)
    if (js->inbox[i].kind == XGR_VNULL && xgr_stepset_has(&reach, d->from[i].node)) potential++;
  if (got + potential < d->k) {
    join_close(s, t, XGR_JOIN_UNFULFILLABLE, now, fx);
    proc_finish(s, t, XGR_PROC_ABORTED, XGR_ABORT_UNFULFILLABLE, now, fx);
  }
}

/* Abort the waiting members of a scope whose join closed with kill (§3.4). */
static void kill_scope(xgr_session *s, uint32_t id, int64_t now, xgr_effects *fx) {
  scope *c = scope_find(s, id);
  if (!c) return;
  size_t n = 0;
  for (xgr_proc *p = c->members; p; p = p->scope_next_) n += p->status == XGR_PROC_WAITING;
  if (!n) return;
  uint64_t *iters = xgr__xmalloc(n * sizeof *iters);
  size_t k = 0;
  for (xgr_proc *p = c->members; p; p = p->scope_next_)
    if (p->status == XGR_PROC_WAITING) iters[k++] = p->iter;
  for (size_t i = 0; i < k; i++) {
    xgr_proc *p = proc_find(s, iters[i]);
    if (p && p->status == XGR_PROC_WAITING) abort_proc(s, p, XGR_ABORT_JOIN_KILL, now, fx);
  }
  free(iters);
}

static void check_finished(xgr_session *s, xgr_effects *fx) {
  if (s->live || s->result != XGR_RESULT_RUNNING) return;
  s->result = s->killed ? XGR_RESULT_KILLED : XGR_RESULT_COMPLETED;
  /* an ended session is not paused: a pause that came while its last steps ran (it holds back
   * waiting processes only, and none was left) ends with the session */
  s->paused = false;
  xgr_effect *e = fx_push(fx, XGR_FX_FINISHED, NULL);
  if (e) e->result = s->result;
}

/* Drain kill and decision queues until nothing is left; then free empty scopes. */
static void settle(xgr_session *s, int64_t now, xgr_effects *fx) {
  for (;;) {
    if (s->nkill) {
      uint32_t id = s->killq[--s->nkill];
      kill_scope(s, id, now, fx);
    } else if (s->ndirty) {
      /* FIFO over the dirty list keeps decisions in the order their causes happened */
      scope *c = s->dirty[0];
      memmove(s->dirty, s->dirty + 1, --s->ndirty * sizeof *s->dirty);
      c->dirty = false;
      decide(s, c, now, fx);
      scope_free_if_done(s, c);
    } else {
      break;
    }
  }
  check_finished(s, fx);
}

/* ---- invariants (debug and sanitizer builds) ---------------------------------------------------
 * check_invariants() runs at the end of every public entry point that changes a session, in every
 * build without NDEBUG (meson's b_ndebug=if-release keeps assert() in debug, debugoptimized and
 * the sanitizer builds; only release drops it). What it asserts:
 *   - the queues are drained and no scope is dirty (so a closed scope is never dirty);
 *   - the process table holds `live` processes, each waiting or running, each on the member
 *     list of its own scope, and a scope's `live` count, per-step counts and live step set equal
 *     its member list;
 *   - `running` equals the processes in RUNNING;
 *   - a process is in a promotion heap exactly when it is promotable, in the heap its heap tag
 *     names (the bypass heap for steps that declare a join) at the index it records, and the
 *     heaps are ordered by (nextWakeAt, iter);
 *   - a scope's join target is the live process that collects from it while the join is open,
 *     and a scope other than the root one is kept only while it has live members or an open
 *     join (memory follows the live processes);
 *   - a join holds at most one piece per expected step, each from that step, never beside a fail
 *     record; an open join has fewer than k pieces and can still get k (its producers are live);
 *     a satisfied one has at least k.
 * A full check walks every process and scope. To keep big sessions linear, each call earns
 * CHECK_CREDIT entries of checking and a full check runs once the credit covers the session's
 * size: small sessions (the property test's) are checked after every call, a session of n
 * processes about every n / CHECK_CREDIT calls. The O(1) parts run on every call. */
#ifndef NDEBUG
#define CHECK_CREDIT 512

static void check_join(const xgr_session *s, const xgr_proc *t) {
  const xgr_join_state *js = t->join;
  const xgr_join *d = js->decl;
  assert(t->from_group != 0 && d->target == t->step && d->n <= XGR_MAX_JOIN_INPUTS && d->k <= d->n);
  for (unsigned i = 0; i < d->n; i++)
    for (unsigned j = i + 1; j < d->n; j++) assert(d->from[i].node != d->from[j].node);   /* one slot per step */
  unsigned got = 0;
  for (unsigned i = 0; i < d->n; i++) {
    if (js->inbox[i].kind == XGR_VNULL) continue;
    got++;
    assert(!js->fail[i]);                                   /* a piece or a fail record, not both */
    xgr_value from;
    assert(xgr_value_kind(js->inbox[i]) == XGR_VMAP && xgr_map_get_str(js->inbox[i], "_from", 5, &from));
    const char *sid = xgr_value_str(from, NULL);
    assert(sid && !strcmp(sid, s->orch->steps[d->from[i].node].id));   /* the piece of that step */
    (void)sid;
  }
  if (js->closed) {
    assert(js->outcome != XGR_JOIN_OPEN);
    assert(js->outcome != XGR_JOIN_SATISFIED || got >= d->k);
    return;
  }
  assert(js->outcome == XGR_JOIN_OPEN && got < d->k && t->status == XGR_PROC_WAITING);
  const scope *c = scope_find(s, t->from_group);
  assert(c && c->target == t->iter && !c->closed && !c->killed);
  xgr_stepset reach = c->live_steps;
  for (unsigned st = 0; st < s->orch->nsteps; st++)
    if (xgr_stepset_has(&c->live_steps, st)) {
      reach.w[0] |= s->orch->reach_scope[st].w[0];
      reach.w[1] |= s->orch->reach_scope[st].w[1];
    }
  unsigned potential = 0;
  for (unsigned i = 0; i < d->n; i++)
    potential += js->inbox[i].kind == XGR_VNULL && xgr_stepset_has(&reach, d->from[i].node);
  assert(got + potential >= d->k);                          /* still fulfillable */
  (void)potential;
}

static void check_heap(const xgr_session *s, const heap *h, size_t tag) {
  for (size_t i = 0; i < h->n; i++) {
    const xgr_proc *p = h->a[i];
    assert(p->heap_idx_ == (i | tag) && proc_find(s, p->iter) == p);
    assert(i == 0 || !before(p, h->a[(i - 1) / 2]));
    (void)p;
  }
}

static void check_scope(const xgr_session *s, const scope *c) {
  uint32_t count[XGR_MAX_STEPS] = {0};
  size_t n = 0;
  for (const xgr_proc *p = c->members; p; p = p->scope_next_) {
    assert(p->group == c->id && p->scope_ == c && proc_find(s, p->iter) == p);
    assert(p->scope_next_ == NULL || p->scope_next_->scope_prev_ == p);
    assert((p->scope_prev_ == NULL) == (p == c->members));
    count[p->step]++;
    n++;
  }
  assert(n == c->live);                                     /* live count = member list */
  for (unsigned st = 0; st < s->orch->nsteps; st++) {
    assert(c->step_count[st] == count[st]);
    assert(xgr_stepset_has(&c->live_steps, st) == (count[st] != 0));
  }
  assert(!c->dirty);                                        /* so never closed and dirty */
  assert(!c->killed || c->closed);
  assert(c->id == 0 || c->live || (c->target && !c->closed));   /* no empty scope is kept */
  if (c->target) {
    const xgr_proc *t = proc_find(s, c->target);
    assert(c->closed || (t && t->join && !t->join->closed && t->from_group == c->id));
    assert(!t || !t->join || t->from_group != c->id || t->join->closed == c->closed);
    (void)t;
  }
  (void)s;
}

static void check_invariants(xgr_session *s) {
  assert(s->ndirty == 0 && s->nkill == 0);
  assert(xgr__hashmap_size(&s->procs) == s->live && s->running <= s->live);
  assert(s->orch->nsteps <= XGR_MAX_STEPS);
  size_t cost = s->live + xgr__hashmap_size(&s->scopes) + s->normal.n + s->bypass.n;
  s->check_credit += CHECK_CREDIT;
  if (s->check_credit < cost) return;
  s->check_credit = 0;
  size_t pos = 0, in_scopes = 0;
  for (const scope *c; (c = xgr__hashmap_next(&s->scopes, &pos, NULL));) {
    check_scope(s, c);
    in_scopes += c->live;
  }
  assert(in_scopes == s->live);   /* with the member checks: every process is in its scope's list */
  size_t running = 0, in_heaps = 0;
  pos = 0;
  for (const xgr_proc *p; (p = xgr__hashmap_next(&s->procs, &pos, NULL));) {
    assert(p->status == XGR_PROC_WAITING || p->status == XGR_PROC_RUNNING);
    running += p->status == XGR_PROC_RUNNING;
    if (p->heap_idx_ == HEAP_NONE) {
      assert(!promotable(p));
    } else {
      assert(promotable(p));
      bool bypass = (p->heap_idx_ & HEAP_BIT) != 0;         /* the heap tag */
      const heap *h = bypass ? &s->bypass : &s->normal;
      assert(bypass == xgr_stepset_has(&s->join_steps, p->step));
      assert((p->heap_idx_ & ~HEAP_BIT) < h->n && h->a[p->heap_idx_ & ~HEAP_BIT] == p);
      (void)h;
      in_heaps++;
    }
    if (p->join) check_join(s, p);
  }
  assert(running == s->running);                            /* running = processes in RUNNING */
  assert(in_heaps == s->normal.n + s->bypass.n);
  check_heap(s, &s->normal, 0);
  check_heap(s, &s->bypass, HEAP_BIT);
  (void)running;
  (void)in_heaps;
}
#else
#define check_invariants(s) ((void)0)
#endif

/* ---- public API ------------------------------------------------------------------------------- */

xgr_session *xgr_session_new(const xgr_orch *o, const char *owner, uint64_t root_pid,
                             const xgr_session_config *cfg) {
  xgr_session *s = xgr__xcalloc(1, sizeof *s);
  s->orch = o;
  s->owner = xgr__xstrdup(owner ? owner : "");
  s->root_pid = root_pid;
  s->max_running = cfg && cfg->max_running ? cfg->max_running : 32;
  s->next_iter = 1;
  s->next_group = 1;
  for (size_t i = 0; i < o->nsteps; i++)
    if (o->steps[i].branch[0].join || o->steps[i].branch[1].join) xgr_stepset_add(&s->join_steps, (unsigned)i);
  return s;
}

void xgr_session_free(xgr_session *s) {
  if (!s) return;
  bury(s);
  size_t pos = 0;
  for (xgr_proc *p; (p = xgr__hashmap_next(&s->procs, &pos, NULL));) free_proc(p);
  pos = 0;
  for (scope *c; (c = xgr__hashmap_next(&s->scopes, &pos, NULL));) {
    free(c->step_count);
    free(c);
  }
  xgr__hashmap_free(&s->procs);
  xgr__hashmap_free(&s->scopes);
  free(s->normal.a);
  free(s->bypass.a);
  free(s->dirty);
  free(s->killq);
  free(s->owner);
  free(s);
}

const char *xgr_session_owner(const xgr_session *s) { return s->owner; }
uint64_t xgr_session_root_pid(const xgr_session *s) { return s->root_pid; }
const xgr_orch *xgr_session_orch(const xgr_session *s) { return s->orch; }
xgr_session_result xgr_session_result_of(const xgr_session *s) { return s->result; }
size_t xgr_session_live(const xgr_session *s) { return s->live; }
size_t xgr_session_running(const xgr_session *s) { return s->running; }
uint64_t xgr_session_next_iter(const xgr_session *s) { return s->next_iter; }
const xgr_proc *xgr_session_find(const xgr_session *s, uint64_t iter) { return proc_find(s, iter); }

void xgr_session_foreach(const xgr_session *s, void (*fn)(void *ctx, const xgr_proc *p), void *ctx) {
  size_t pos = 0;
  for (const xgr_proc *p; (p = xgr__hashmap_next(&s->procs, &pos, NULL));) fn(ctx, p);
}

int xgr_session_start(xgr_session *s, unsigned step, xgr_value payload, int64_t now, xgr_effects *fx,
                      xgr_error *err) {
  return xgr_session_start_at(s, step, payload, now, now, fx, err);
}

int xgr_session_start_at(xgr_session *s, unsigned step, xgr_value payload, int64_t now, int64_t wake_at,
                         xgr_effects *fx, xgr_error *err) {
  assert(wake_at >= now);
  bury(s);
  if (step >= s->orch->nsteps) return xgr_error_set(err, XGR_EINVAL, NULL, "start step index %u out of range", step);
  if (s->next_iter != 1) return xgr_error_set(err, XGR_ESTATE, NULL, "session already started");
  xgr_value pl = xgr_value_kind(payload) == XGR_VMAP ? xgr_value_retain(payload) : xgr_map_new(0);
  proc_new(s, step, 0, 0, pl, wake_at, now, fx);
  xgr_value_release(pl);
  check_invariants(s);
  return 0;
}

int64_t xgr_session_next_due(const xgr_session *s) {
  int64_t due = XGR_NEVER;
  if (s->bypass.n) due = s->bypass.a[0]->next_wake_at;
  if (s->normal.n && s->running < s->max_running && s->normal.a[0]->next_wake_at < due)
    due = s->normal.a[0]->next_wake_at;
  return due;
}

size_t xgr_session_promote(xgr_session *s, int64_t now, size_t max, xgr_effects *fx) {
  bury(s);
  size_t promoted = 0;
  while (promoted < max) {
    xgr_proc *nb = s->normal.n && s->running < s->max_running ? s->normal.a[0] : NULL;
    xgr_proc *bp = s->bypass.n ? s->bypass.a[0] : NULL;
    xgr_proc *p = !nb ? bp : !bp ? nb : before(bp, nb) ? bp : nb;
    if (!p || p->next_wake_at > now) break;
    scope *c = p->scope_;
    if (c->killed) {   /* dispatch gate */
      abort_proc(s, p, XGR_ABORT_JOIN_KILL, now, fx);
      settle(s, now, fx);
      continue;
    }
    p->status = XGR_PROC_RUNNING;
    p->started_at = now;
    s->running++;
    heap_sync(s, p);
    fx_push(fx, XGR_FX_RUN_STEP, p);
    fx_proc(fx, p);
    promoted++;
  }
  check_invariants(s);
  return promoted;
}

/* Shallow merge of src's keys (except those starting with `_`) over dst, which must be an
 * unshared map. */
static void merge_public(xgr_value dst, xgr_value src) {
  size_t n = xgr_map_size(src);
  for (size_t i = 0; i < n; i++) {
    xgr_value k, v;
    xgr_map_entry(src, i, &k, &v);
    size_t kl;
    const char *ks = xgr_value_str(k, &kl);
    if (ks && kl && ks[0] == '_') continue;
    xgr_map_set(dst, xgr_value_retain(k), xgr_value_retain(v));
  }
}

static void kill_all(xgr_session *s, xgr_abort_reason why, int64_t now, xgr_effects *fx);

static void history(xgr_effects *fx, const xgr_proc *p, const xgr_step_outcome *o) {
  xgr_effect *e = fx_push(fx, XGR_FX_HISTORY, p);
  if (!e) return;
  e->at = p->started_at;
  if (o->api_json) e->api = xgr__xstrdup(o->api_json);   /* the step's API calls, for its history row */
}

static void run_branch(xgr_session *s, xgr_proc *p, const xgr_step_outcome *o, int64_t now, xgr_effects *fx) {
  scope *own = p->scope_;
  if (own->killed) return;   /* spawn gate: nothing is created into a killed scope */
  const xgr_branch *b = &s->orch->steps[p->step].branch[p->valid ? XGR_ON_VALID : XGR_ON_INVALID];
  int64_t wake = o->wait_sec < 0 ? XGR_NEVER : now + o->wait_sec * 1000;
  uint32_t group = p->group;
  if (b->join) {
    group = s->next_group++;
    xgr_proc *t = proc_new(s, b->join->target, p->iter, p->group, p->payload, wake, now, NULL);
    t->from_group = group;
    t->join = xgr__xcalloc(1, sizeof *t->join);
    t->join->decl = b->join;
    heap_sync(s, t);   /* an open join target is not promotable */
    scope *c = scope_get(s, group);
    c->target = t->iter;
    fx_proc(fx, t);
  }
  for (unsigned i = 0; i < b->nspawns; i++) proc_new(s, b->spawns[i], p->iter, group, p->payload, wake, now, fx);
  if (b->join) mark_dirty(s, scope_get(s, group));   /* decidable at once (e.g. no producers) */
}

static void emit_wakeups(xgr_session *s, const xgr_proc *p, const xgr_step_outcome *o, xgr_effects *fx) {
  for (size_t i = 0; fx && i < o->nwakeups; i++) {
    const xgr_wakeup_req *w = &o->wakeups[i];
    xgr_value pl = xgr_map_new(8);
    if (xgr_value_kind(o->outcome_payload) == XGR_VMAP) merge_public(pl, o->outcome_payload);
    if (xgr_value_kind(w->payload) == XGR_VMAP) merge_public(pl, w->payload);
    xgr_effect *e = fx_push(fx, XGR_FX_WAKE, p);   /* p: the sender, for the record of a refusal */
    e->runner = xgr__xstrdup(w->runner ? w->runner : "");
    e->session_id = w->session_id;
    e->step_id = xgr__xstrdup(w->step_id ? w->step_id : "");
    e->rule_address = o->rule_address ? xgr__xstrdup(o->rule_address) : NULL;
    e->payload = pl;
  }
  (void)s;   /* the caller of an internal wake-up is this session's owner: the driver knows it */
}

/* Once its step ran, a process's payload is the step's effective payload (SEMANTICS §7), also
 * when its rule said abortStep or cancelSession; a hard error leaves the resume payload. */
static void set_effective(xgr_proc *p, const xgr_step_outcome *o) {
  if (xgr_value_kind(o->effective) != XGR_VMAP) return;
  xgr_value_release(p->payload);
  p->payload = xgr_value_retain(o->effective);
}

int xgr_session_step_result(xgr_session *s, uint64_t iter, const xgr_step_outcome *o, int64_t now,
                            xgr_effects *fx, xgr_error *err) {
  bury(s);
  xgr_proc *p = proc_find(s, iter);
  if (!p || p->status != XGR_PROC_RUNNING) {
    char pid[48];
    xgr_pid_format(s->root_pid, iter, pid, sizeof pid);
    return xgr_error_set(err, XGR_ESTATE, NULL, "process %s is not running (result ignored)", pid);
  }
  switch (o->kind) {
    case XGR_OUTCOME_HARD_ERROR:
      p->error = xgr__xstrdup(o->error ? o->error : "hard error");
      proc_finish(s, p, XGR_PROC_ABORTED, XGR_ABORT_ERROR, now, fx);
      history(fx, p, o);
      break;
    case XGR_OUTCOME_ABORT_STEP:
      set_effective(p, o);
      if (o->error) p->error = xgr__xstrdup(o->error);
      proc_finish(s, p, XGR_PROC_ABORTED, XGR_ABORT_STEP, now, fx);
      history(fx, p, o);
      break;
    case XGR_OUTCOME_CANCEL_SESSION: {
      set_effective(p, o);
      if (o->error) p->error = xgr__xstrdup(o->error);
      proc_finish(s, p, XGR_PROC_ABORTED, XGR_ABORT_CANCEL, now, fx);
      history(fx, p, o);
      kill_all(s, XGR_ABORT_CANCEL, now, fx);   /* every other live process */
      break;
    }
    case XGR_OUTCOME_VALID:
    case XGR_OUTCOME_INVALID: {
      p->valid = o->kind == XGR_OUTCOME_VALID;
      set_effective(p, o);
      run_branch(s, p, o, now, fx);
      emit_wakeups(s, p, o, fx);
      proc_finish(s, p, XGR_PROC_DONE, XGR_ABORT_NONE, now, fx);
      history(fx, p, o);
      break;
    }
    default:
      return xgr_error_set(err, XGR_EINVAL, NULL, "unknown outcome kind %d", (int)o->kind);
  }
  settle(s, now, fx);
  check_invariants(s);
  return 0;
}

static uint64_t *live_iters(const xgr_session *s, size_t *n);

/* Abort every live process (kill of the root, cancelSession): the session ends as killed. */
static void kill_all(xgr_session *s, xgr_abort_reason why, int64_t now, xgr_effects *fx) {
  s->killed = true;
  if (!s->killed_at) s->killed_at = now;
  size_t n;
  uint64_t *its = live_iters(s, &n);
  for (size_t i = 0; i < n; i++) {
    xgr_proc *p = proc_find(s, its[i]);
    if (p) abort_proc(s, p, why, now, fx);
  }
  free(its);
  s->nkill = 0;   /* nothing is left to kill */
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Live processes sorted by iter (for deterministic bulk operations). Caller frees. */
static uint64_t *live_iters(const xgr_session *s, size_t *n) {
  uint64_t *a = xgr__xmalloc((s->live ? s->live : 1) * sizeof *a);
  size_t k = 0, pos = 0;
  uint64_t iter;
  while (xgr__hashmap_next(&s->procs, &pos, &iter)) a[k++] = iter;
  assert(k == s->live);
  qsort(a, k, sizeof *a, cmp_u64);
  *n = k;
  return a;
}

int xgr_session_kill(xgr_session *s, uint64_t iter, int64_t now, xgr_effects *fx, xgr_error *err) {
  bury(s);
  if (iter == 0) {
    kill_all(s, XGR_ABORT_KILL, now, fx);
    settle(s, now, fx);
    check_invariants(s);
    return 0;
  }
  xgr_proc *p = proc_find(s, iter);
  if (!p) {
    char pid[48];
    xgr_pid_format(s->root_pid, iter, pid, sizeof pid);
    return xgr_error_set(err, XGR_ENOTFOUND, NULL, "process %s is not live (unknown, done or aborted)", pid);
  }
  abort_proc(s, p, XGR_ABORT_KILL, now, fx);
  settle(s, now, fx);
  check_invariants(s);
  return 0;
}

int xgr_session_pause(xgr_session *s, uint64_t iter, bool pause, int64_t now, xgr_effects *fx, xgr_error *err) {
  bury(s);
  (void)now;
  if (iter == 0) {
    s->paused = pause;
    /* in iter order, so that the PROC effects come out the same on every run */
    size_t n;
    uint64_t *its = live_iters(s, &n);
    for (size_t i = 0; i < n; i++) {
      xgr_proc *p = proc_find(s, its[i]);
      if (p->status == XGR_PROC_WAITING && p->paused != pause) {
        p->paused = pause;
        heap_sync(s, p);
        fx_proc(fx, p);
      }
    }
    free(its);
    check_invariants(s);
    return 0;
  }
  xgr_proc *p = proc_find(s, iter);
  char pid[48];
  xgr_pid_format(s->root_pid, iter, pid, sizeof pid);
  if (!p) return xgr_error_set(err, XGR_ENOTFOUND, NULL, "process %s is not live", pid);
  if (p->status != XGR_PROC_WAITING)
    return xgr_error_set(err, XGR_ESTATE, NULL, "process %s is %s; only waiting processes can be %s", pid,
                         xgr_proc_status_name(p->status), pause ? "paused" : "resumed");
  p->paused = pause;
  heap_sync(s, p);
  fx_proc(fx, p);
  check_invariants(s);
  return 0;
}

/* Wake p: merge payload, nextWakeAt = now. */
static void wake(xgr_session *s, xgr_proc *p, xgr_value payload, int64_t now, xgr_effects *fx) {
  if (xgr_value_kind(payload) == XGR_VMAP && xgr_map_size(payload)) {
    xgr_value m = xgr_value_kind(p->payload) == XGR_VMAP ? xgr_map_copy(p->payload) : xgr_map_new(8);
    merge_public(m, payload);
    xgr_value_release(p->payload);
    p->payload = m;
  }
  p->next_wake_at = now;
  heap_sync(s, p);
  fx_proc(fx, p);
}

static bool addr_eq(const char *a, const char *b) { return a && b && strcasecmp(a, b) == 0; }

static bool is_owner(const xgr_session *s, const char *caller) { return !caller || addr_eq(caller, s->owner); }

/* Is `who` in a JSON-ish list value of addresses? Wildcards only where allowed. */
static bool list_has(xgr_value list, const char *who, bool wildcards) {
  if (xgr_value_kind(list) != XGR_VLIST) return false;
  for (size_t i = 0; i < xgr_list_size(list); i++) {
    const char *a = xgr_value_str(xgr_list_get(list, i), NULL);
    if (!a) continue;
    if (addr_eq(a, who)) return true;
    if (wildcards && (!strcmp(a, "*") || addr_eq(a, "0x0000000000000000000000000000000000000000"))) return true;
  }
  return false;
}

/* The `__wakeUp` allow list of a waiting process (§5; endpoint reference §12); see xgr/session.h. */
bool xgr_session_wake_allowed(xgr_value payload, const char *step_id, const char *caller, xgr_wake_scope scope_kind,
                              const char *rule_address) {
  xgr_value wu, entry = xgr_value_null(), steps, lst;
  if (!xgr_map_get_str(payload, "__wakeUp", 8, &wu) || xgr_value_kind(wu) != XGR_VMAP) return false;
  if (xgr_map_get_str(wu, "steps", 5, &steps) && xgr_value_kind(steps) == XGR_VMAP &&
      xgr_map_get_str(steps, step_id, strlen(step_id), &entry) && xgr_value_kind(entry) == XGR_VMAP) {
    /* steps[stepId] replaces default as a whole */
  } else if (!xgr_map_get_str(wu, "default", 7, &entry) || xgr_value_kind(entry) != XGR_VMAP) {
    return false;
  }
  if (scope_kind == XGR_WAKE_RPC)
    return xgr_map_get_str(entry, "rpc", 3, &lst) && list_has(lst, caller, false);
  if (!xgr_map_get_str(entry, "internal", 8, &lst)) return false;
  if (xgr_value_kind(lst) == XGR_VLIST) return list_has(lst, caller, true);
  if (xgr_value_kind(lst) != XGR_VMAP) return false;
  xgr_value allow, from;
  if (!xgr_map_get_str(lst, "allow", 5, &allow) || !list_has(allow, caller, true)) return false;
  if (!xgr_map_get_str(lst, "fromXRC137", 10, &from)) return true;
  if (xgr_value_kind(from) != XGR_VLIST || xgr_list_size(from) == 0) return false;   /* misconfigured */
  return rule_address && list_has(from, rule_address, false);
}

int xgr_session_wake_pid(xgr_session *s, uint64_t iter, const char *caller, xgr_value payload, int64_t now,
                         xgr_effects *fx, xgr_error *err) {
  bury(s);
  char pid[48];
  xgr_pid_format(s->root_pid, iter, pid, sizeof pid);
  if (!is_owner(s, caller))
    return xgr_error_set(err, XGR_EPERM, NULL, "only the session owner %s may wake a process by pid; %s may not "
                         "(delegation through __wakeUp works in step mode only)", s->owner, caller);
  xgr_proc *p = proc_find(s, iter);
  if (!p || p->status != XGR_PROC_WAITING)
    return xgr_error_set(err, XGR_ESTATE, NULL, "process %s is %s; only waiting processes can be woken", pid,
                         p ? xgr_proc_status_name(p->status) : "not live");
  if (p->join && !p->join->closed)
    return xgr_error_set(err, XGR_ESTATE, NULL, "process %s is an open join target; it runs when its join closes", pid);
  wake(s, p, payload, now, fx);
  check_invariants(s);
  return 0;
}

int xgr_session_wake_step(xgr_session *s, unsigned step, const char *caller, xgr_wake_scope scope_kind,
                          const char *rule_address, xgr_value payload, int64_t now, xgr_effects *fx,
                          size_t *woken, xgr_error *err) {
  bury(s);
  *woken = 0;
  if (step >= s->orch->nsteps) return xgr_error_set(err, XGR_EINVAL, NULL, "step index %u out of range", step);
  const char *sid = s->orch->steps[step].id;
  size_t n, waiting = 0, join_open = 0, denied = 0;
  uint64_t *its = live_iters(s, &n);
  for (size_t i = 0; i < n; i++) {
    xgr_proc *p = proc_find(s, its[i]);
    if (!p || p->step != step || p->status != XGR_PROC_WAITING) continue;
    waiting++;
    if (p->join && !p->join->closed) { join_open++; continue; }
    if (!is_owner(s, caller) && !xgr_session_wake_allowed(p->payload, sid, caller, scope_kind, rule_address)) { denied++; continue; }
    wake(s, p, payload, now, fx);
    (*woken)++;
  }
  free(its);
  check_invariants(s);
  if (*woken) return 0;
  if (!waiting) return xgr_error_set(err, XGR_ENOTFOUND, NULL, "no process is waiting on step \"%s\"; nothing was woken", sid);
  if (denied)
    return xgr_error_set(err, XGR_EPERM, NULL, "%s is not on the %s allow list (__wakeUp) of the %zu process%s "
                         "waiting on step \"%s\"; nothing was woken", caller, scope_kind == XGR_WAKE_RPC ? "rpc" : "internal",
                         denied, denied == 1 ? "" : "es", sid);
  return xgr_error_set(err, XGR_ESTATE, NULL, "the %zu process%s waiting on step \"%s\" %s open join target%s; nothing was woken",
                       join_open, join_open == 1 ? "" : "es", sid, join_open == 1 ? "is an" : "are", join_open == 1 ? "" : "s");
}

/* ==== retry (issue 36): run an aborted process's step again; see xgr/session.h ================== */

int xgr_session_retry(xgr_session *s, const xgr_retry_of *r, xgr_value payload, int64_t now, xgr_effects *fx,
                      uint64_t *iter_out, xgr_error *err) {
  bury(s);
  char pid[48];
  xgr_pid_format(s->root_pid, r->iter, pid, sizeof pid);
  if (s->result != XGR_RESULT_RUNNING || s->killed)
    return xgr_error_set(err, XGR_ESTATE, "sessionId", "session %llu has ended (%s); only a live session's processes "
                         "can be retried (fork it to run a step again in a new session)", (unsigned long long)s->root_pid,
                         s->killed ? "killed" : xgr_session_result_name(s->result));
  if (r->iter == 0 || r->iter >= s->next_iter || r->step >= s->orch->nsteps)
    return xgr_error_set(err, XGR_ENOTFOUND, "pid", "process %s is not a process of session %llu", pid,
                         (unsigned long long)s->root_pid);
  const xgr_proc *live = proc_find(s, r->iter);
  if (live || r->status != XGR_PROC_ABORTED)
    return xgr_error_set(err, XGR_ESTATE, "pid", "process %s is %s; only an aborted process can be retried", pid,
                         xgr_proc_status_name(live ? (xgr_proc_status)live->status : r->status));
  if (r->reason != XGR_ABORT_ERROR && r->reason != XGR_ABORT_KILL)
    return xgr_error_set(err, XGR_ESTATE, "pid", "process %s aborted by %s; only a process aborted by a hard error or "
                         "a kill can be retried", pid, xgr_abort_reason_name(r->reason));
  if (r->join_unsatisfied)
    return xgr_error_set(err, XGR_ESTATE, "pid", "process %s was the target of a join that was not satisfied; "
                         "it would run without the pieces its step waits for", pid);
  if (r->group) {
    const scope *c = scope_find(s, r->group);
    if (!c || c->closed) {
      const xgr_proc *t = c && c->target ? proc_find(s, c->target) : NULL;
      char tp[48] = "";
      if (t) xgr_pid_format(s->root_pid, t->iter, tp, sizeof tp);
      return xgr_error_set(err, XGR_ESTATE, "pid", "the join process %s fed (join group %u%s%s) has closed%s%s; "
                           "a retried process could no longer be delivered", pid, (unsigned)r->group,
                           t ? ", target " : "", tp, t ? " as " : "",
                           t ? xgr_join_outcome_name(t->join->outcome) : "");
    }
  }
  xgr_value pl = xgr_value_kind(payload) == XGR_VNULL ? r->payload : payload;
  if (xgr_value_kind(pl) != XGR_VMAP)
    return xgr_error_set(err, XGR_EINVAL, "payload", "the payload to retry %s with is not an object", pid);
  xgr_proc *p = proc_new(s, r->step, r->iter, r->group, pl, now, now, fx);
  if (iter_out) *iter_out = p->iter;
  check_invariants(s);
  return 0;
}

/* ==== recovery (issue 8): rebuild a core from stored rows; see xgr/session.h ==================
 * What is restored, and from what (SEMANTICS §2–3): the counters (next_iter, next_group, the
 * session-wide pause, killed); every live process with all its fields — one that was running
 * comes back waiting with the payload it had before its step ran (its result never committed);
 * join targets with their join state; scopes rebuilt from live members and targets (a scope whose
 * target is no longer live has a closed join; scopes closed with policy kill come from the stored
 * killed scopes). restore_end settles, which takes any join decision that was still pending. */

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
  if (join_json && xgr__session_join_from_json(s->orch, join_json, &js, err)) return XGR_EINVAL;
  return xgr__session_restore_proc_js(s, src, js, err);
}

int xgr__session_restore_proc_js(xgr_session *s, const xgr_proc *src, xgr_join_state *js, xgr_error *err) {
  char pid[48];
  xgr_pid_format(s->root_pid, src->iter, pid, sizeof pid);
  if (js && (js->decl->target != src->step || !src->from_group)) {
    xgr__join_state_free(js);
    return xgr_error_set(err, XGR_EINVAL, pid, "process %s has a join state but is not its target", pid);
  }
  xgr_proc *p = xgr__xcalloc(1, sizeof *p);
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
  proc_insert(s, p);
  return 0;
}

void xgr_session_restore_scope_killed(xgr_session *s, uint32_t group) {
  if (group == 0) return;
  scope *c = scope_get(s, group);
  c->killed = true;
  c->closed = true;
}

static int cmp_scope_id(const void *a, const void *b) {
  uint32_t x = (*(scope *const *)a)->id, y = (*(scope *const *)b)->id;
  return x < y ? -1 : x > y;
}

int xgr_session_restore_end(xgr_session *s, int64_t now, xgr_effects *fx, xgr_error *err) {
  /* everything in iter / scope id order, so that a restore's effects do not depend on the
   * tables' layout */
  size_t n;
  uint64_t *its = live_iters(s, &n);
  /* join targets: their scope collects into them */
  for (size_t i = 0; i < n; i++) {
    xgr_proc *p = proc_find(s, its[i]);
    if (!p->join) continue;
    scope *c = scope_get(s, p->from_group);
    if (c->target && c->target != p->iter) {
      char pid[48];
      xgr_pid_format(s->root_pid, p->iter, pid, sizeof pid);
      free(its);
      return xgr_error_set(err, XGR_EINVAL, pid, "join group %u has two targets", (unsigned)p->from_group);
    }
    c->target = p->iter;
    if (p->join->closed) {
      c->closed = true;
      if (p->join->decl->policy == XGR_POLICY_KILL) c->killed = true;
    }
  }
  for (size_t i = 0; i < n; i++) heap_sync(s, proc_find(s, its[i]));
  free(its);
  /* scopes whose target is gone (terminal) have a closed join; drop scopes with nothing left in
   * them; queue open joins for a decision */
  size_t k = 0, pos = 0;
  scope **all = xgr__xmalloc((xgr__hashmap_size(&s->scopes) + 1) * sizeof *all);
  for (scope *c; (c = xgr__hashmap_next(&s->scopes, &pos, NULL));) all[k++] = c;
  qsort(all, k, sizeof *all, cmp_scope_id);
  for (size_t i = 0; i < k; i++) {
    if (all[i]->id != 0 && !all[i]->target) all[i]->closed = true;
    if (all[i]->target && !all[i]->closed) mark_dirty(s, all[i]);
    else scope_free_if_done(s, all[i]);
  }
  free(all);
  settle(s, now, fx);
  check_invariants(s);
  return 0;
}

/* ==== exploration support (issue 21, xgr explore) ===============================================
 * A deep copy of a settled session, promotion of one named process, and the kill flag of a
 * scope: what the explorer (src/explore) needs to branch the real core at every choice. */

xgr_session *xgr_session_clone(const xgr_session *s) {
  assert(s->ndirty == 0 && s->nkill == 0);   /* only settled sessions are cloned */
  xgr_session_config cfg = {.max_running = s->max_running};
  xgr_session *t = xgr_session_new(s->orch, s->owner, s->root_pid, &cfg);
  t->next_iter = s->next_iter;
  t->next_group = s->next_group;
  t->killed = s->killed;
  t->paused = s->paused;
  t->result = s->result;
  t->killed_at = s->killed_at;
  size_t pos = 0;
  for (const scope *c; (c = xgr__hashmap_next(&s->scopes, &pos, NULL));) {
    scope *d = scope_get(t, c->id);
    d->target = c->target;
    d->killed = c->killed;
    d->closed = c->closed;
  }
  size_t n;
  uint64_t *its = live_iters(s, &n);
  for (size_t i = 0; i < n; i++) {
    const xgr_proc *p = proc_find(s, its[i]);
    xgr_proc *q = xgr__xmalloc(sizeof *q);
    *q = *p;
    q->scope_prev_ = q->scope_next_ = NULL;
    q->scope_ = NULL;
    q->payload = xgr_value_retain(p->payload);
    q->error = p->error ? xgr__xstrdup(p->error) : NULL;
    if (p->join) {
      q->join = xgr__xmalloc(sizeof *q->join);
      *q->join = *p->join;
      for (unsigned k = 0; k < XGR_MAX_JOIN_INPUTS; k++) {
        q->join->inbox[k] = xgr_value_retain(p->join->inbox[k]);
        q->join->inbox_text[k] = NULL;   /* the copy writes its own texts */
      }
    }
    proc_insert(t, q);
    if (q->status == XGR_PROC_RUNNING) t->running++;
    heap_sync(t, q);
  }
  free(its);
  check_invariants(t);
  return t;
}

int xgr_session_promote_iter(xgr_session *s, uint64_t iter, int64_t now, xgr_effects *fx, xgr_error *err) {
  bury(s);
  xgr_proc *p = proc_find(s, iter);
  char pid[48];
  xgr_pid_format(s->root_pid, iter, pid, sizeof pid);
  if (!p || !promotable(p) || p->next_wake_at > now)
    return xgr_error_set(err, XGR_ESTATE, NULL, "process %s is not due for promotion", pid);
  if (!xgr_stepset_has(&s->join_steps, p->step) && s->running >= s->max_running)
    return xgr_error_set(err, XGR_ESTATE, NULL, "process %s: the session runs %zu processes, its cap", pid, s->running);
  scope *c = p->scope_;
  if (c->killed) {   /* dispatch gate */
    abort_proc(s, p, XGR_ABORT_JOIN_KILL, now, fx);
    settle(s, now, fx);
    check_invariants(s);
    return 0;
  }
  p->status = XGR_PROC_RUNNING;
  p->started_at = now;
  s->running++;
  heap_sync(s, p);
  fx_push(fx, XGR_FX_RUN_STEP, p);
  fx_proc(fx, p);
  check_invariants(s);
  return 1;
}

bool xgr_session_scope_killed(const xgr_session *s, uint32_t group) {
  const scope *c = scope_find(s, group);
  return c && c->killed;
}

bool xgr_session_join_steps_has(const xgr_session *s, unsigned step) {
  return xgr_stepset_has(&s->join_steps, step);
}

void xgr__session_emit_live(xgr_session *s, xgr_effects *fx) {
  size_t n;
  uint64_t *its = live_iters(s, &n);
  for (size_t i = 0; i < n; i++) fx_proc(fx, proc_find(s, its[i]));
  free(its);
}

uint32_t xgr__session_max_running(const xgr_session *s) { return s->max_running; }
