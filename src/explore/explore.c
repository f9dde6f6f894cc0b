/* explore.c — `xgr explore`: breadth-first exhaustive exploration of one session over the real
 * session core (see xgr/explore.h for the model and the JSON it produces).
 *
 * A state is a settled core (cloned at every branch with xgr_session_clone), the virtual clock,
 * and what the path so far accumulated: per step the set of outcomes it took, and a sorted set of
 * "marks" — join decisions (declaration, outcome, pieces present) and the payloads of leaf
 * processes — which make up a final result. The canonical form of a state lists the live
 * processes sorted by content (step, status, timer relative to now, payload, join state), numbers
 * join groups in order of first appearance in that list, and appends the accumulated sets; it is
 * hashed twice (two independent 64-bit hashes) for deduplication. Process ids and group numbers
 * therefore do not distinguish states: finishing A then B and B then A meet again.
 *
 * Actions at a state: promote a due process (any one, within the cap), finish a running process
 * with one of its possible outcomes, or advance the clock to the next timer. Reduction
 * (persistent sets): a due process whose scope has no open join with policy kill is promoted at
 * once and alone (nothing can observe whether it waited); without timers in the bundle and without
 * rules, a running process whose scope has no open join is finished alone (its outcomes are the
 * only branches), because its result touches nothing another process can see.
 *
 * Findings come from the explored graph: join decisions seen on edges, steps that ran, dead ends
 * (finals and stalls), cycles without a clock advance (Tarjan's SCCs), states from which a join
 * that is open can no longer be decided (backward reachability), and finals whose per-step
 * outcomes agree but whose results differ (timing). Traces follow the BFS tree; a loop's trace is
 * completed by re-running its cycle on a concrete session and matching canonical hashes. Those
 * findings, traces and results are read off the graph in findings.c; the model both share is
 * explore_impl.h.
 */
#include "explore/explore_impl.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/alloc.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/hash.h"

/* ---- outcomes --------------------------------------------------------------------------------- */

static const char *const outcome_names[] = {"valid", "invalid", "error"};

int xgr_explore_parse_outcomes(const char *text, unsigned *mask, xgr_error *err) {
  unsigned m = 0;
  const char *p = text;
  while (p && *p) {
    const char *e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    unsigned bit = 0;
    for (unsigned i = 0; i < 3; i++)
      if (n == strlen(outcome_names[i]) && !strncmp(p, outcome_names[i], n)) bit = 1u << i;
    if (!bit)
      return xgr_error_set(err, XGR_EINVAL, "outcomes", "--outcomes has '%.*s'; expected a comma-separated list of "
                           "valid, invalid, error", (int)n, p);
    m |= bit;
    p = e ? e + 1 : NULL;
  }
  if (!m) return xgr_error_set(err, XGR_EINVAL, "outcomes", "--outcomes is empty; expected valid, invalid and/or error");
  *mask = m;
  return 0;
}

/* ---- hashing ----------------------------------------------------------------------------------- */


/* Two independent 64-bit hashes of n bytes, a word at a time (the canonical form of every new
 * state goes through here: it was half of the search's time byte by byte). */
void xgr__explore_hash_bytes(const void *data, size_t n, uint64_t *h1, uint64_t *h2) {
  const unsigned char *p = data;
  uint64_t a = 0x243f6a8885a308d3ULL ^ n, b = 0x13198a2e03707344ULL;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    a = xgr__mix64(a ^ w);
    b = (b ^ w) * 0x9fb21c651e98df25ULL;
    b ^= b >> 29;
  }
  uint64_t w = 0;
  if (i < n) memcpy(&w, p + i, n - i);
  *h1 = xgr__mix64(a ^ w ^ ((uint64_t)(n - i) << 56));
  *h2 = xgr__mix64(b ^ w ^ 0xa4093822299f31d0ULL);
}

static uint64_t value_hash_text(xgr_value v) {
  if (xgr_value_kind(v) == XGR_VNULL) return 0;
  size_t len;
  char *txt = xgr_value_to_json_text(v, 0, &len);
  uint64_t h1 = 0, h2 = 0;
  if (txt) xgr__explore_hash_bytes(txt, len, &h1, &h2);
  free(txt);
  return h1 | 1;
}

/* Payload hashes cached by the map's address: values are immutable once shared, and the cache
 * holds a reference, so an address cannot be reused for another map while it is cached. */
struct vcache {
  xgr_value *vals;
  uint64_t *hashes;
  size_t n, cap;
};

static uint64_t value_hash(vcache *c, xgr_value v) {
  if (xgr_value_kind(v) != XGR_VMAP || !c) return value_hash_text(v);
  uintptr_t key = (uintptr_t)v.as.m;
  if (c->n * 2 >= c->cap) {
    size_t nc = c->cap ? c->cap * 2 : 1024;
    xgr_value *nv = xgr__xcalloc(nc, sizeof *nv);
    uint64_t *nh = xgr__xcalloc(nc, sizeof *nh);
    for (size_t i = 0; i < c->cap; i++)
      if (c->hashes[i]) {
        size_t j = xgr__mix64((uintptr_t)c->vals[i].as.m) & (nc - 1);
        while (nh[j]) j = (j + 1) & (nc - 1);
        nv[j] = c->vals[i];
        nh[j] = c->hashes[i];
      }
    free(c->vals);
    free(c->hashes);
    c->vals = nv;
    c->hashes = nh;
    c->cap = nc;
  }
  size_t j = xgr__mix64(key) & (c->cap - 1);
  while (c->hashes[j]) {
    if ((uintptr_t)c->vals[j].as.m == key) return c->hashes[j];
    j = (j + 1) & (c->cap - 1);
  }
  c->vals[j] = xgr_value_retain(v);
  c->hashes[j] = value_hash_text(v);
  c->n++;
  return c->hashes[j];
}

static void vcache_free(vcache *c) {
  for (size_t i = 0; i < c->cap; i++)
    if (c->hashes[i]) xgr_value_release(c->vals[i]);
  free(c->vals);
  free(c->hashes);
}


/* ---- building outcomes -------------------------------------------------------------------------- */

/* Static waitSec of a step's branch (forced outcomes take the branch's literal waitSec). */
int64_t xgr__explore_branch_wait(const xgr_bundle *b, unsigned step, bool valid) {
  if (!b || !b->step_rule || !b->step_rule[step]) return 0;
  return (int64_t)xgr_rule_branch_wait(b->step_rule[step], valid);
}

static bool rule_decides(const xgr_bundle *b, bool rules, unsigned step) {
  return rules && b && b->step_rule && b->step_rule[step] && xgr_rule_napi_calls(b->step_rule[step]) == 0;
}

/* The outcome of a forced kind for p (payload passes through unchanged). */
void xgr__explore_forced_outcome(const xgr_bundle *b, const xgr_proc *p, unsigned kind, xgr_step_outcome *o) {
  memset(o, 0, sizeof *o);
  o->effective = p->payload;
  o->outcome_payload = xgr_value_null();
  if (kind == 2) {
    o->kind = XGR_OUTCOME_HARD_ERROR;
    o->error = "explore: forced hard error";
    return;
  }
  o->kind = kind == 0 ? XGR_OUTCOME_VALID : XGR_OUTCOME_INVALID;
  o->wait_sec = xgr__explore_branch_wait(b, p->step, kind == 0);
}

/* Run the step's rule on p's payload (no HTTP). res must be freed by the caller after use. */
void xgr__explore_rule_outcome(const xgr_bundle *b, const xgr_session *s, const xgr_proc *p, xgr_step_result *res,
                               xgr_outcome_buf *ob, xgr_step_outcome *o) {
  char pid[48];
  xgr_pid_format(xgr_session_root_pid(s), p->iter, pid, sizeof pid);
  xgr_step_ctx ctx = {.owner = xgr_session_owner(s), .session_id = xgr_session_root_pid(s), .pid = pid,
                      .step_id = b->orch->steps[p->step].id};
  memset(res, 0, sizeof *res);
  xgr_step_run(b->step_rule[p->step], p->payload, &ctx, NULL, res);
  xgr_outcome_from_result(res, b->step_rule_address[p->step], ob, o);
  o->nwakeups = 0;   /* internal wake-ups leave the explored session */
}

/* ---- marks and canonical form ------------------------------------------------------------------ */

static void marks_add(uint64_t **m, uint32_t *n, uint64_t v) {
  uint32_t i = 0;
  while (i < *n && (*m)[i] < v) i++;
  if (i < *n && (*m)[i] == v) return;
  *m = xgr__xrealloc(*m, (*n + 1) * sizeof **m);
  memmove(*m + i + 1, *m + i, (*n - i) * sizeof **m);
  (*m)[i] = v;
  (*n)++;
}

typedef struct pkey {
  uint16_t step;
  uint8_t status;
  uint8_t killed;
  int64_t wake;
  uint64_t payload;
  uint64_t join;
  uint32_t group, from_group;
  uint64_t iter;
} pkey;

typedef struct collect {
  const ex *x;
  int64_t now;
  pkey *k;
  size_t n, cap;
  const xgr_session *s;
} collect;

static uint64_t join_hash(const ex *x, const xgr_join_state *js) {
  uint64_t h = xgr__mix64(decl_index(x, js->decl) + 1) ^ xgr__mix64(((uint64_t)js->closed << 8) | js->outcome);
  for (unsigned i = 0; i < js->decl->n; i++) {
    h = xgr__mix64(h ^ value_hash(x->vc, js->inbox[i]));
    h = xgr__mix64(h ^ (js->fail[i] ? 0x55 : 0xaa));
  }
  return h | 1;
}

static void collect_proc(void *ctx, const xgr_proc *p) {
  collect *c = ctx;
  if (c->n == c->cap) {
    c->cap = c->cap ? c->cap * 2 : 16;
    c->k = xgr__xrealloc(c->k, c->cap * sizeof *c->k);
  }
  pkey *k = &c->k[c->n++];
  memset(k, 0, sizeof *k);
  k->step = p->step;
  k->status = p->status;
  k->killed = xgr_session_scope_killed(c->s, p->group);
  k->wake = p->next_wake_at == XGR_NEVER ? INT64_MAX : p->next_wake_at <= c->now ? 0 : p->next_wake_at - c->now;
  k->payload = value_hash(c->x->vc, p->payload);
  k->join = p->join ? join_hash(c->x, p->join) : 0;
  k->group = p->group;
  k->from_group = p->from_group;
  k->iter = p->iter;
}

static int pkey_cmp(const void *a, const void *b) {
  const pkey *x = a, *y = b;
#define CMP(f) if (x->f != y->f) return x->f < y->f ? -1 : 1
  CMP(step); CMP(status); CMP(wake); CMP(payload); CMP(join); CMP(killed); CMP(iter);
#undef CMP
  return 0;
}

static int iter_cmp(const void *a, const void *b) {
  const pkey *x = a, *y = b;
  return x->iter < y->iter ? -1 : x->iter > y->iter;
}

/* Live processes of s sorted by iter (for action enumeration). Caller frees. */
static pkey *live_sorted(const ex *x, const xgr_session *s, int64_t now, size_t *n) {
  collect c = {.x = x, .now = now, .s = s};
  xgr_session_foreach(s, collect_proc, &c);
  if (c.n) qsort(c.k, c.n, sizeof *c.k, iter_cmp);
  *n = c.n;
  return c.k;
}

void xgr__explore_canon_hash(ex *x, const xgr_session *s, int64_t now, const uint64_t *marks,
                             uint32_t nmarks, uint64_t *h1, uint64_t *h2) {
  collect c = {.x = x, .now = now, .s = s};
  xgr_session_foreach(s, collect_proc, &c);
  if (c.n) qsort(c.k, c.n, sizeof *c.k, pkey_cmp);
  /* groups numbered by first appearance */
  uint32_t *ids = xgr__xmalloc((2 * c.n + 1) * sizeof *ids);
  size_t nids = 0;
  xgr_buf *b = &x->canon;
  b->len = 0;
  for (size_t i = 0; i < c.n; i++) {
    uint32_t g[2] = {c.k[i].group, c.k[i].from_group}, r[2];
    for (int j = 0; j < 2; j++) {
      if (g[j] == 0) { r[j] = 0; continue; }
      size_t q = 0;
      while (q < nids && ids[q] != g[j]) q++;
      if (q == nids) ids[nids++] = g[j];
      r[j] = (uint32_t)q + 1;
    }
    uint64_t rec[5] = {(uint64_t)c.k[i].step | (uint64_t)c.k[i].status << 16 | (uint64_t)c.k[i].killed << 24,
                       (uint64_t)r[0] | (uint64_t)r[1] << 32, (uint64_t)c.k[i].wake, c.k[i].payload, c.k[i].join};
    xgr__buf_put(b, rec, sizeof rec);
  }
  xgr_session_state st;
  xgr_session_state_get(s, &st);
  uint8_t tail[2] = {st.killed, (uint8_t)xgr_session_result_of(s)};
  xgr__buf_put(b, tail, sizeof tail);
  if (nmarks) xgr__buf_put(b, marks, nmarks * sizeof *marks);
  xgr__explore_hash_bytes(b->p, b->len, h1, h2);
  free(ids);
  free(c.k);
}

void xgr__explore_state_key(const xgr_session *s, int64_t now, uint64_t *h1, uint64_t *h2) {
  const xgr_orch *o = xgr_session_orch(s);
  ex x;
  memset(&x, 0, sizeof x);
  x.o = o;
  vcache vc = {0};
  x.vc = &vc;
  x.decls = xgr__xcalloc(2 * o->nsteps + 1, sizeof *x.decls);
  for (size_t i = 0; i < o->nsteps; i++)
    for (int br = 0; br < 2; br++)
      if (o->steps[i].branch[br].join) x.decls[x.ndecls++] = o->steps[i].branch[br].join;
  xgr__explore_canon_hash(&x, s, now, NULL, 0, h1, h2);
  free(x.decls);
  free(x.canon.p);
  vcache_free(&vc);
}

/* ---- graph storage ------------------------------------------------------------------------------- */

static uint32_t table_find(const ex *x, uint64_t h1, uint64_t h2) {
  size_t i = h1 & (x->tcap - 1);
  for (;;) {
    uint32_t v = x->table[i];
    if (!v) return NONE32;
    const node *n = &x->nodes[v - 1];
    if (n->h1 == h1 && n->h2 == h2) return v - 1;
    i = (i + 1) & (x->tcap - 1);
  }
}

static void table_put(ex *x, uint32_t idx) {
  if ((x->nnodes + 1) * 2 > x->tcap) {
    size_t nc = x->tcap ? x->tcap * 2 : 1024;
    uint32_t *t = xgr__xcalloc(nc, sizeof *t);
    for (size_t i = 0; i < x->tcap; i++)
      if (x->table[i]) {
        size_t j = x->nodes[x->table[i] - 1].h1 & (nc - 1);
        while (t[j]) j = (j + 1) & (nc - 1);
        t[j] = x->table[i];
      }
    free(x->table);
    x->table = t;
    x->tcap = nc;
  }
  size_t j = x->nodes[idx].h1 & (x->tcap - 1);
  while (x->table[j]) j = (j + 1) & (x->tcap - 1);
  x->table[j] = idx + 1;
}

static void edge_add(ex *x, uint32_t from, uint32_t to, bool advance, uint8_t obit, uint16_t ostep, uint64_t decided) {
  if (x->nedges == x->capedges) {
    x->capedges = x->capedges ? x->capedges * 2 : 1024;
    x->edges = xgr__xrealloc(x->edges, x->capedges * sizeof *x->edges);
  }
  x->edges[x->nedges++] = (edge){from, to, advance, obit, ostep, decided};
}

/* ---- applying an action -------------------------------------------------------------------------- */

/* Apply a to session s (consumed: owned by out->s afterwards) with the accumulators of n. */
void xgr__explore_apply_act(ex *x, const node *n, xgr_session *s, act a, step_out *out) {
  out->s = s;
  out->now = n->now;
  out->obit = 0;
  out->ostep = 0;
  out->marks = n->nmarks ? xgr__xmalloc(n->nmarks * sizeof *out->marks) : NULL;
  if (n->nmarks) memcpy(out->marks, n->marks, n->nmarks * sizeof *out->marks);
  out->nmarks = n->nmarks;
  out->decided = 0;
  out->njoins = 0;
  out->advance = a.kind == ACT_ADVANCE;
  out->ok = true;
  xgr_effects_reset(&x->fx);
  xgr_error err;
  if (a.kind == ACT_ADVANCE) {
    out->now = a.at;
  } else if (a.kind == ACT_PROMOTE) {
    out->ok = xgr_session_promote_iter(s, a.iter, n->now, &x->fx, &err) >= 0;
  } else {
    const xgr_proc *p = xgr_session_find(s, a.iter);
    if (!p || p->status != XGR_PROC_RUNNING) {
      out->ok = false;
      return;
    }
    unsigned step = p->step;
    xgr_step_outcome o;
    xgr_step_result res;
    xgr_outcome_buf ob;
    bool ruled = a.outcome == 3;
    if (ruled) xgr__explore_rule_outcome(x->b, s, p, &res, &ob, &o);
    else xgr__explore_forced_outcome(x->b, p, a.outcome, &o);
    unsigned bit = o.kind == XGR_OUTCOME_VALID ? 1 : o.kind == XGR_OUTCOME_INVALID ? 2 : o.kind == XGR_OUTCOME_HARD_ERROR ? 4 : 8;
    out->obit = (uint8_t)bit;
    out->ostep = (uint16_t)step;
    out->ok = xgr_session_step_result(s, a.iter, &o, n->now, &x->fx, &err) == 0;
    if (ruled) xgr_step_result_free(&res);
  }
  for (size_t i = 0; i < x->fx.n; i++) {
    const xgr_effect *e = &x->fx.items[i];
    if (e->kind == XGR_FX_RUN_STEP) {
      x->ran[e->proc->step] = true;
    } else if (e->kind == XGR_FX_JOIN) {
      const xgr_join_state *js = e->proc->join;
      unsigned d = decl_index(x, js->decl);
      uint64_t mask = 0;
      for (unsigned k = 0; k < js->decl->n; k++)
        if (js->inbox[k].kind != XGR_VNULL) mask |= 1ULL << k;
      marks_add(&out->marks, &out->nmarks, MARK_JOIN | ((uint64_t)d << 40) | ((uint64_t)js->outcome << 32) | mask);
      if (d < 64) out->decided |= 1ULL << d;
      if (out->njoins < 16) out->joins[out->njoins++] = d << 2 | (unsigned)js->outcome;
    } else if (e->kind == XGR_FX_PROC && e->status == XGR_PROC_DONE) {
      const xgr_branch *br = &x->o->steps[e->proc->step].branch[e->valid ? XGR_ON_VALID : XGR_ON_INVALID];
      if (!br->nspawns && !br->join)
        marks_add(&out->marks, &out->nmarks, MARK_LEAF | ((uint64_t)e->proc->step << 40) |
                  ((uint64_t)(e->valid == 1) << 39) | (value_hash(x->vc, e->proc->payload) & ((1ULL << 39) - 1)));
    } else if (e->kind == XGR_FX_PROC && e->proc->join && !e->proc->join->closed) {
      x->opened[decl_index(x, e->proc->join->decl)] = true;
    }
  }
}

/* ---- actions at a state -------------------------------------------------------------------------- */

static void acts_push(acts *l, act a) {
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 16;
    l->a = xgr__xrealloc(l->a, l->cap * sizeof *l->a);
  }
  l->a[l->n++] = a;
}

/* Whether the join collecting from group g is open with policy kill (a race for its waiters). */
static bool open_kill_join(const xgr_session *s, uint32_t g) {
  if (g == 0) return false;
  const xgr_proc *t = xgr_session_collector(s, g);
  return t && t->join && !t->join->closed && t->join->decl->policy == XGR_POLICY_KILL;
}

static bool open_join(const xgr_session *s, uint32_t g) {
  if (g == 0) return false;
  const xgr_proc *t = xgr_session_collector(s, g);
  return t && t->join && !t->join->closed;
}

static void push_finishes(const ex *x, const pkey *p, acts *l) {
  if (rule_decides(x->b, x->cfg.rules, p->step)) {
    acts_push(l, (act){.kind = ACT_FINISH, .outcome = 3, .iter = p->iter});
    return;
  }
  for (unsigned o = 0; o < 3; o++)
    if (x->cfg.outcomes & (1u << o)) acts_push(l, (act){.kind = ACT_FINISH, .outcome = (uint8_t)o, .iter = p->iter});
}

/* The actions to explore at state (s, now); `full` disables the reduction (trace matching). */
void xgr__explore_actions(const ex *x, const xgr_session *s, int64_t now, bool full, acts *l) {
  l->n = 0;
  size_t n;
  pkey *k = live_sorted(x, s, now, &n);
  size_t running = xgr_session_running(s), cap = x->cfg.max_running ? x->cfg.max_running : 32;
  size_t due_normal = 0;
  int64_t next = INT64_MAX;
  for (size_t i = 0; i < n; i++) {
    const xgr_proc *p = xgr_session_find(s, k[i].iter);
    bool promotable = p->status == XGR_PROC_WAITING && !p->paused && p->next_wake_at != XGR_NEVER &&
                      !(p->join && !p->join->closed);
    if (!promotable) continue;
    if (p->next_wake_at > now) {
      if (p->next_wake_at < next) next = p->next_wake_at;
    } else if (!xgr_session_join_steps_has(s, p->step)) {
      due_normal++;
    }
  }
  /* reduction 1: a promotion nothing can observe */
  if (!full) {
    for (size_t i = 0; i < n; i++) {
      const xgr_proc *p = xgr_session_find(s, k[i].iter);
      if (p->status != XGR_PROC_WAITING || p->paused || p->next_wake_at > now || (p->join && !p->join->closed)) continue;
      bool bypass = xgr_session_join_steps_has(s, p->step);
      if (!bypass && running + due_normal > cap) continue;
      if (open_kill_join(s, p->group)) continue;
      acts_push(l, (act){.kind = ACT_PROMOTE, .iter = p->iter});
      free(k);
      return;
    }
  }
  /* reduction 2: a result nobody else can see */
  if (!full && x->reduce_finish) {
    for (size_t i = 0; i < n; i++) {
      if (k[i].status != XGR_PROC_RUNNING || open_join(s, k[i].group)) continue;
      push_finishes(x, &k[i], l);
      free(k);
      return;
    }
  }
  for (size_t i = 0; i < n; i++) {
    const xgr_proc *p = xgr_session_find(s, k[i].iter);
    if (p->status == XGR_PROC_RUNNING) {
      push_finishes(x, &k[i], l);
    } else if (p->status == XGR_PROC_WAITING && !p->paused && p->next_wake_at <= now && !(p->join && !p->join->closed)) {
      if (xgr_session_join_steps_has(s, p->step) || running < cap) acts_push(l, (act){.kind = ACT_PROMOTE, .iter = p->iter});
    }
  }
  if (next != INT64_MAX) acts_push(l, (act){.kind = ACT_ADVANCE, .at = next});
  free(k);
}

/* ---- the search ----------------------------------------------------------------------------------- */

typedef struct open_ctx {
  const ex *x;
  uint64_t *mask;
} open_ctx;

static void open_decls(void *ctx, const xgr_proc *p) {
  open_ctx *c = ctx;
  if (!p->join || p->join->closed) return;
  unsigned d = decl_index(c->x, p->join->decl);
  if (d < 64) *c->mask |= 1ULL << d;
}

static uint32_t node_add(ex *x, uint32_t parent, act a, step_out *so, uint64_t h1, uint64_t h2) {
  if (x->nnodes == x->capnodes) {
    x->capnodes = x->capnodes ? x->capnodes * 2 : 1024;
    x->nodes = xgr__xrealloc(x->nodes, x->capnodes * sizeof *x->nodes);
  }
  uint32_t idx = (uint32_t)x->nnodes++;
  node *n = &x->nodes[idx];
  memset(n, 0, sizeof *n);
  n->h1 = h1;
  n->h2 = h2;
  n->parent = parent;
  n->a = a;
  n->now = so->now;
  n->s = so->s;
  n->marks = so->marks;
  n->nmarks = so->nmarks;
  n->live = (uint32_t)xgr_session_live(so->s);
  xgr_session_foreach(so->s, open_decls, &(open_ctx){x, &n->open});
  if (parent != NONE32) {
    n->depth = x->nodes[parent].depth + (a.kind == ACT_FINISH);
    n->level = x->nodes[parent].level + 1;
  }
  table_put(x, idx);
  x->pending += n->live + 1;
  if (n->live > x->max_live) {
    x->max_live = n->live;
    x->max_live_node = idx;
  }
  return idx;
}

static void search(ex *x, double t0) {
  acts l = {0};
  size_t max_states = x->cfg.max_states ? x->cfg.max_states : 200000;
  uint64_t max_steps = x->cfg.max_steps ? x->cfg.max_steps : 200;
  for (size_t i = 0; i < x->nnodes; i++) {
    if (x->cfg.time_budget > 0 && (i & 63) == 0 && xgr__mono_s() - t0 > x->cfg.time_budget) {
      x->complete = false;
      break;
    }
    node *n = &x->nodes[i];
    xgr_session *s = n->s;
    if (x->visit) x->visit(x->visit_ctx, s, n->now);
    x->pending -= n->live + 1;   /* this state's session leaves the frontier */
    xgr__explore_actions(x, s, n->now, false, &l);
    if (!l.n) {
      n->kind = n->live ? N_STALL : N_FINAL;
      n->result = (uint8_t)(n->live ? XGR_RESULT_STALLED : xgr_session_result_of(s));
      xgr_session_free(s);
      x->nodes[i].s = NULL;
      continue;
    }
    if (n->depth >= max_steps) {
      n->kind = N_CUT;
      x->complete = false;
      xgr_session_free(s);
      x->nodes[i].s = NULL;
      continue;
    }
    n->kind = N_INNER;
    x->nodes[i].s = NULL;
    for (size_t j = 0; j < l.n; j++) {
      xgr_session *c = j + 1 < l.n ? xgr_session_clone(s) : s;
      step_out so;
      xgr__explore_apply_act(x, &x->nodes[i], c, l.a[j], &so);
      uint64_t h1, h2;
      xgr__explore_canon_hash(x, so.s, so.now, so.marks, so.nmarks, &h1, &h2);
      uint32_t to = table_find(x, h1, h2);
      if (to == NONE32) {
        if (x->nnodes >= max_states || x->pending > PENDING_MAX) {
          x->complete = false;
          to = NONE32;
        } else {
          to = node_add(x, (uint32_t)i, l.a[j], &so, h1, h2);
          so.s = NULL;
          so.marks = NULL;
        }
      }
      if (to != NONE32) {
        edge_add(x, (uint32_t)i, to, so.advance, so.obit, so.ostep, so.decided);
        /* first unfulfillable decision of each declaration (BFS: the shortest trace) */
        for (unsigned q = 0; q < so.njoins; q++) {
          unsigned d = so.joins[q] >> 2, outc = so.joins[q] & 3;
          if (outc == XGR_JOIN_SATISFIED) x->satisfied[d] = true;
          if (outc == XGR_JOIN_UNFULFILLABLE && x->unf_node[d] == NONE32) x->unf_node[d] = to;
        }
      }
      if (so.s) xgr_session_free(so.s);
      free(so.marks);
    }
  }
  /* anything left unexpanded was cut by the bounds */
  for (size_t i = 0; i < x->nnodes; i++)
    if (x->nodes[i].s) {
      xgr_session_free(x->nodes[i].s);
      x->nodes[i].s = NULL;
      x->complete = false;
    }
  free(l.a);
}

xgr_session *xgr__explore_root_session(ex *x) {
  if (x->init) return xgr_session_clone(x->init);
  xgr_session_config sc = {.max_running = x->cfg.max_running};
  xgr_session *s = xgr_session_new(x->o, OWNER, ROOT_PID, &sc);
  xgr_effects_reset(&x->fx);
  xgr_session_start(s, x->start, x->payload, 0, &x->fx, NULL);
  xgr_effects_reset(&x->fx);
  return s;
}

/* ---- entry point ---------------------------------------------------------------------------------------- */

bool xgr_explore_has_error(const json_t *r) {
  size_t i;
  json_t *f;
  json_array_foreach(json_object_get(r, "findings"), i, f)
    if (!strcmp(json_string_value(json_object_get(f, "severity")) ?: "", "error")) return true;
  return false;
}

/* Where an exploration begins: a new session at step st with payload, or (init set) a copy of a
 * settled session at clock now; visit (may be NULL) sees every state as it is expanded. */
typedef struct root_spec {
  unsigned st;
  const char *start;
  xgr_value payload;
  const xgr_session *init;
  int64_t now;
  void (*visit)(void *ctx, const xgr_session *s, int64_t now);
  void *visit_ctx;
} root_spec;

/* One exploration of o from rs with cfg (outcomes set): the result JSON of xgr/explore.h. */
static json_t *explore_once(const xgr_orch *o, const xgr_bundle *b, const root_spec *rs, const xgr_explore_config *cfg) {
  unsigned st = rs->st;
  const char *start = rs->start;
  xgr_value payload = rs->payload;
  double t0 = xgr__mono_s();
  ex x;
  memset(&x, 0, sizeof x);
  x.o = o;
  x.b = b;
  x.cfg = *cfg;
  assert(x.cfg.outcomes);
  x.start = st;
  x.init = rs->init;
  x.init_now = rs->init ? rs->now : 0;
  x.root_pid = rs->init ? xgr_session_root_pid(rs->init) : ROOT_PID;
  x.visit = rs->visit;
  x.visit_ctx = rs->visit_ctx;
  x.payload = xgr_value_kind(payload) == XGR_VMAP ? xgr_value_retain(payload) : xgr_map_new(0);
  x.complete = true;
  xgr_effects_init(&x.fx);
  vcache vc = {0};
  x.vc = &vc;
  x.decls = xgr__xcalloc(2 * o->nsteps + 1, sizeof *x.decls);
  for (size_t i = 0; i < o->nsteps; i++)
    for (int br = 0; br < 2; br++)
      if (o->steps[i].branch[br].join) x.decls[x.ndecls++] = o->steps[i].branch[br].join;
  x.ran = xgr__xcalloc(o->nsteps, sizeof *x.ran);
  x.unf_node = xgr__xmalloc((x.ndecls + 1) * sizeof *x.unf_node);
  for (unsigned d = 0; d < x.ndecls; d++) x.unf_node[d] = NONE32;
  x.satisfied = xgr__xcalloc(x.ndecls + 1, sizeof *x.satisfied);
  x.opened = xgr__xcalloc(x.ndecls + 1, sizeof *x.opened);
  /* finishing a scope-free process first is exact only without timers and rules */
  /* finishing a process whose scope has no open join first is exact without timers (a result
   * before or after a clock jump gives its children other deadlines) and without cancelSession
   * (it aborts processes everywhere) */
  x.reduce_finish = true;
  for (size_t i = 0; b && b->step_rule && i < o->nsteps; i++) {
    const xgr_rule *rl = b->step_rule[i];
    if (!rl) continue;
    if (xgr__explore_branch_wait(b, (unsigned)i, true) || xgr__explore_branch_wait(b, (unsigned)i, false)) x.reduce_finish = false;
    if (x.cfg.rules && xgr_rule_has_action(rl, XGR_ACTION_CANCEL_SESSION)) x.reduce_finish = false;
  }

  /* root */
  step_out so = {.now = x.init_now};
  so.s = xgr__explore_root_session(&x);
  uint64_t h1, h2;
  xgr__explore_canon_hash(&x, so.s, so.now, NULL, 0, &h1, &h2);
  node_add(&x, NONE32, (act){0}, &so, h1, h2);
  search(&x, t0);

  json_t *findings = json_array();
  bool any_final = false;
  for (size_t v = 0; v < x.nnodes; v++) any_final |= x.nodes[v].kind == N_FINAL;
  /* join_unfulfillable */
  for (unsigned d = 0; d < x.ndecls; d++) {
    if (x.unf_node[d] == NONE32) continue;
    const xgr_join *dj = x.decls[d];
    bool never = !x.satisfied[d] && x.complete;
    xgr__explore_finding(findings, "join_unfulfillable", never, step_id(&x, dj->target), step_id(&x, dj->target), xgr__explore_trace_to(&x, x.unf_node[d]),
                         "join %s (k=%u of %u, %s) %s unfulfillable%s", step_id(&x, dj->target), dj->k, dj->n,
                         xgr_policy_name(dj->policy), never ? "always ends" : "can end",
                         never ? ": it is never satisfied, so its target never runs" : "");
  }
  /* step_unreachable */
  for (size_t i = 0; i < o->nsteps; i++)
    if (!x.ran[i])
      xgr__explore_finding(findings, "step_unreachable", x.complete, step_id(&x, (unsigned)i), NULL, NULL,
                           x.complete ? "step %s never runs on any path from %s" : "step %s did not run on any explored path from %s "
                           "(the exploration was cut)", step_id(&x, (unsigned)i), start);
  /* stall */
  for (size_t v = 0; v < x.nnodes; v++)
    if (x.nodes[v].kind == N_STALL) {
      xgr__explore_finding(findings, "stall", !any_final && x.complete, NULL, NULL, xgr__explore_trace_to(&x, (uint32_t)v),
                           "the session can stall: %u process%s wait%s with nothing left to wake %s", x.nodes[v].live,
                           x.nodes[v].live == 1 ? "" : "es", x.nodes[v].live == 1 ? "s" : "", x.nodes[v].live == 1 ? "it" : "them");
      break;
    }
  xgr__explore_undecided_findings(&x, findings);
  xgr__explore_loop_findings(&x, findings, any_final);
  json_t *results = xgr__explore_results_and_timing(&x, findings);

  json_t *r = json_object();
  json_object_set_new(r, "states", json_integer((json_int_t)x.nnodes));
  json_object_set_new(r, "transitions", json_integer((json_int_t)x.nedges));
  json_object_set_new(r, "complete", json_boolean(x.complete));
  json_object_set_new(r, "results", results);
  json_object_set_new(r, "findings", findings);
  json_object_set_new(r, "maxLive", json_pack("{s:I, s:o}", "count", (json_int_t)x.max_live, "trace", xgr__explore_trace_to(&x, x.max_live_node)));
  json_t *oc = json_array();
  for (unsigned i = 0; i < 3; i++)
    if (x.cfg.outcomes & (1u << i)) json_array_append_new(oc, json_string(outcome_names[i]));
  if (x.init)
    json_object_set_new(r, "replay", json_pack("{s:s, s:o, s:b}", "from", start, "outcomes", oc, "rules", x.cfg.rules));
  else
    json_object_set_new(r, "replay", json_pack("{s:s, s:o, s:o, s:b}", "start", start, "payload", xgr_value_to_json(x.payload),
                                               "outcomes", oc, "rules", x.cfg.rules));
  json_object_set_new(r, "seconds", json_real(xgr__mono_s() - t0));

  for (size_t v = 0; v < x.nnodes; v++) {
    free(x.nodes[v].marks);
  }
  free(x.nodes);
  free(x.edges);
  free(x.table);
  free(x.decls);
  free(x.ran);
  free(x.unf_node);
  free(x.satisfied);
  free(x.opened);
  free(x.canon.p);
  xgr_effects_free(&x.fx);
  vcache_free(&vc);
  xgr_value_release(x.payload);
  return r;
}

/* ---- findings that need a forced outcome other than valid -------------------------------------------
 * A finding that shows only when some step is forced to end invalid or to fail (a hard error) is
 * not a property of the orchestration's normal runs: it is reported as info that names the steps
 * (".. only if step X fails"), with the trace of the lowest outcome set that still shows it. The
 * test is exact: the same complete exploration with outcomes {valid} does not show the finding
 * ({valid, invalid}, when errors are explored too, gives the witness). A cut exploration, full or
 * valid-only, decides nothing. */

static const char *fstr(const json_t *f, const char *key) { return json_string_value(json_object_get(f, key)); }

static bool str_eq(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

/* Does result r show finding f (same kind, step and join; a loop through one of f's steps; a
 * timing difference of the same weight)? Returns r's finding or NULL. */
static const json_t *shown_in(const json_t *r, const json_t *f) {
  size_t i;
  const json_t *g;
  const char *kind = fstr(f, "kind");
  json_array_foreach(json_object_get(r, "findings"), i, g) {
    if (!str_eq(fstr(g, "kind"), kind)) continue;
    if (!strcmp(kind, "unbounded_loop")) {
      size_t a, c;
      const json_t *sa, *sc;
      json_array_foreach(json_object_get(f, "steps"), a, sa)
        json_array_foreach(json_object_get(g, "steps"), c, sc)
          if (json_equal(sa, sc)) return g;
      continue;
    }
    if (!strcmp(kind, "timing_dependent") && str_eq(fstr(g, "severity"), "info") != str_eq(fstr(f, "severity"), "info"))
      continue;
    if (str_eq(fstr(g, "step"), fstr(f, "step")) && str_eq(fstr(g, "join"), fstr(f, "join"))) return g;
  }
  return NULL;
}

/* Mark f (a finding of the full result) as needing the forced outcomes of witness w's trace:
 * severity info, "onlyIf":[{"step","outcome"}], the message says so, w's trace replaces f's.
 * False (f unchanged) when w's trace forces no step to anything but valid. */
static bool mark_only_if(json_t *f, const json_t *w) {
  json_t *only = json_array();
  size_t i;
  const json_t *a;
  json_array_foreach(json_object_get(w, "trace"), i, a) {
    const char *oc = fstr(a, "outcome");
    if (!json_object_get(a, "finish") || !str_eq(fstr(a, "by"), "forced") || !oc || !strcmp(oc, "valid")) continue;
    json_t *e = json_pack("{s:s, s:s}", "step", fstr(a, "step"), "outcome", oc);
    bool dup = false;
    for (size_t k = 0; k < json_array_size(only) && !dup; k++) dup = json_equal(json_array_get(only, k), e);
    if (dup) json_decref(e);
    else json_array_append_new(only, e);
  }
  size_t n = json_array_size(only);
  if (!n) {
    json_decref(only);
    return false;
  }
  /* "only if step B fails", "only if steps B and C end invalid", "only if step B ends invalid and step C fails" */
  xgr_buf m = {0};
  xgr__buf_printf(&m, "%s, only if ", fstr(f, "message"));
  for (int pass = 0; pass < 2; pass++) {   /* the invalid ones, then the failing ones */
    const char *want = pass ? "error" : "invalid";
    size_t cnt = 0, done = 0;
    for (size_t k = 0; k < n; k++) cnt += !strcmp(fstr(json_array_get(only, k), "outcome"), want);
    if (!cnt) continue;
    if (pass && m.p[m.len - 1] != ' ') xgr__buf_printf(&m, " and ");
    xgr__buf_printf(&m, "%s ", cnt == 1 ? "step" : "steps");
    for (size_t k = 0; k < n; k++) {
      const json_t *e = json_array_get(only, k);
      if (strcmp(fstr(e, "outcome"), want)) continue;
      done++;
      xgr__buf_printf(&m, "%s%s", fstr(e, "step"), done == cnt ? "" : done + 1 == cnt ? " and " : ", ");
    }
    xgr__buf_printf(&m, " %s", pass ? (cnt == 1 ? "fails (a hard error)" : "fail (hard errors)")
                                    : (cnt == 1 ? "ends invalid" : "end invalid"));
  }
  char *msg = xgr__buf_finish(&m, NULL);
  json_object_set_new(f, "message", json_string(msg));
  free(msg);
  json_object_set_new(f, "severity", json_string("info"));
  json_object_set_new(f, "onlyIf", only);
  if (w != f) {
    json_object_set(f, "trace", json_object_get(w, "trace"));
    if (json_object_get(w, "otherTrace")) json_object_set(f, "otherTrace", json_object_get(w, "otherTrace"));
  }
  return true;
}

static void qualify(const xgr_orch *o, const xgr_bundle *b, const root_spec *rs0, const xgr_explore_config *cfg, json_t *r) {
  root_spec rs = *rs0;
  rs.visit = NULL;   /* the re-checks are no new states */
  unsigned all = cfg->outcomes;
  if (!(all & XGR_EXPLORE_VALID) || all == XGR_EXPLORE_VALID) return;
  size_t i;
  json_t *f;
  bool any = false;
  json_array_foreach(json_object_get(r, "findings"), i, f) any |= str_eq(fstr(f, "severity"), "warning");
  if (!any || !json_is_true(json_object_get(r, "complete"))) return;
  /* Fewer outcomes explore a part of the same graph: never more states than the full search had
   * (a search that needs more is cut, and then decides nothing). */
  xgr_explore_config c = *cfg;
  c.max_states = (size_t)json_integer_value(json_object_get(r, "states"));
  c.time_budget = cfg->time_budget / 2;   /* the two re-checks together: at most the budget again */
  c.outcomes = XGR_EXPLORE_VALID;
  json_t *valid = explore_once(o, b, &rs, &c), *vi = NULL;
  if (json_is_true(json_object_get(valid, "complete"))) {
    json_array_foreach(json_object_get(r, "findings"), i, f) {
      if (!str_eq(fstr(f, "severity"), "warning") || shown_in(valid, f)) continue;
      /* with errors explored too, a run with valid and invalid outcomes only is the better witness */
      if (all == XGR_EXPLORE_ALL && !vi) {
        c.outcomes = XGR_EXPLORE_VALID | XGR_EXPLORE_INVALID;
        vi = explore_once(o, b, &rs, &c);
      }
      const json_t *w = vi ? shown_in(vi, f) : NULL;
      mark_only_if(f, w ? w : f);
    }
  }
  json_decref(valid);
  json_decref(vi);
}

int xgr_explore_run(const xgr_orch *o, const xgr_bundle *b, const char *start, xgr_value payload,
                    const xgr_explore_config *cfg, json_t **out, xgr_error *err) {
  int st = xgr_orch_find(o, start);
  if (st < 0) return xgr_error_set(err, XGR_ENOTFOUND, "start", "start step \"%s\" is not a step of the orchestration", start);
  if (cfg && cfg->rules && (!b || !b->step_rule))
    return xgr_error_set(err, XGR_EINVAL, "rules", "--rules needs a bundle (an orchestration with its rules)");
  xgr_explore_config c = {0};
  if (cfg) c = *cfg;
  if (!c.outcomes) c.outcomes = XGR_EXPLORE_ALL;
  double t0 = xgr__mono_s();
  root_spec rs = {.st = (unsigned)st, .start = start, .payload = payload};
  json_t *r = explore_once(o, b, &rs, &c);
  qualify(o, b, &rs, &c, r);
  json_object_set_new(r, "seconds", json_real(xgr__mono_s() - t0));
  *out = r;
  return 0;
}

int xgr_explore_from(const xgr_session *s, int64_t now, const xgr_bundle *b, const char *label,
                     const xgr_explore_config *cfg, json_t **out, xgr_error *err) {
  if (cfg && cfg->rules && (!b || !b->step_rule))
    return xgr_error_set(err, XGR_EINVAL, "rules", "--rules needs a bundle (an orchestration with its rules)");
  xgr_explore_config c = {0};
  if (cfg) c = *cfg;
  if (!c.outcomes) c.outcomes = XGR_EXPLORE_ALL;
  double t0 = xgr__mono_s();
  root_spec rs = {.start = label ? label : "the given state", .payload = xgr_value_null(), .init = s, .now = now};
  json_t *r = explore_once(xgr_session_orch(s), b, &rs, &c);
  qualify(xgr_session_orch(s), b, &rs, &c, r);
  json_object_set_new(r, "seconds", json_real(xgr__mono_s() - t0));
  *out = r;
  return 0;
}

int xgr_explore_states(const xgr_orch *o, const xgr_bundle *b, const char *start, xgr_value payload,
                       const xgr_explore_config *cfg, void (*visit)(void *ctx, const xgr_session *s, int64_t now),
                       void *ctx, bool *complete, xgr_error *err) {
  int st = xgr_orch_find(o, start);
  if (st < 0) return xgr_error_set(err, XGR_ENOTFOUND, "start", "start step \"%s\" is not a step of the orchestration", start);
  xgr_explore_config c = {0};
  if (cfg) c = *cfg;
  if (!c.outcomes) c.outcomes = XGR_EXPLORE_ALL;
  root_spec rs = {.st = (unsigned)st, .start = start, .payload = payload, .visit = visit, .visit_ctx = ctx};
  json_t *r = explore_once(o, b, &rs, &c);
  if (complete) *complete = json_is_true(json_object_get(r, "complete"));
  json_decref(r);
  return 0;
}
