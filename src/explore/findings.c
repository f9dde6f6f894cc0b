/* findings.c — what `xgr explore` reads off a finished state graph (explore.c built it): the
 * traces that lead to a state (along the BFS tree, completed by re-running a cycle on a concrete
 * session), the findings (stalls and dead ends are reported by the entry point; loops without a
 * clock advance through Tarjan's strongly connected components, joins that can no longer be
 * decided through backward reachability), the distinct results of the final states, and timing:
 * finals whose per-step outcomes agree while their results differ. The model is explore_impl.h. */
#include "explore/explore_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/hash.h"

/* ---- traces --------------------------------------------------------------------------------------- */

static json_t *act_json(const ex *x, act a, unsigned step, const xgr_step_outcome *o) {
  char pid[48];
  xgr_pid_format(x->root_pid, a.iter, pid, sizeof pid);
  if (a.kind == ACT_ADVANCE) return json_pack("{s:I}", "advance", (json_int_t)a.at);
  if (a.kind == ACT_PROMOTE) return json_pack("{s:s, s:s}", "promote", pid, "step", step_id(x, step));
  const char *oc = o->kind == XGR_OUTCOME_VALID ? "valid" : o->kind == XGR_OUTCOME_INVALID ? "invalid"
                 : o->kind == XGR_OUTCOME_HARD_ERROR ? "error" : o->kind == XGR_OUTCOME_ABORT_STEP ? "abortStep" : "cancelSession";
  return json_pack("{s:s, s:s, s:s, s:s}", "finish", pid, "step", step_id(x, step), "outcome", oc, "by",
                   a.outcome == 3 ? "rule" : "forced");
}

/* A fresh root session (the start state). */

/* Run path (node indices, path[0] the root) on a concrete session and describe each action.
 * Consecutive nodes must be joined by an edge; the action is found by matching hashes and, where
 * labels (may be NULL) gives one for the transition into path[i] (step << 8 | outcome bit), the
 * step outcome it must take. */
static json_t *realize(ex *x, const uint32_t *path, const uint32_t *labels, size_t n) {
  json_t *tr = json_array();
  node cur;
  memset(&cur, 0, sizeof cur);
  cur.now = x->init ? x->init_now : 0;
  xgr_session *s = xgr__explore_root_session(x);
  acts l = {0};
  for (size_t i = 1; i < n && s; i++) {
    const node *want = &x->nodes[path[i]];
    xgr__explore_actions(x, s, cur.now, true, &l);
    bool found = false;
    for (size_t j = 0; j < l.n && !found; j++) {
      xgr_session *c = xgr_session_clone(s);
      const xgr_proc *p = l.a[j].kind == ACT_ADVANCE ? NULL : xgr_session_find(c, l.a[j].iter);
      unsigned step = p ? p->step : 0;
      json_t *desc = NULL;
      if (l.a[j].kind == ACT_FINISH) {
        xgr_step_outcome o;
        xgr_step_result res;
        xgr_outcome_buf ob;
        if (l.a[j].outcome == 3) xgr__explore_rule_outcome(x->b, c, p, &res, &ob, &o);
        else xgr__explore_forced_outcome(x->b, p, l.a[j].outcome, &o);
        desc = act_json(x, l.a[j], step, &o);
        if (l.a[j].outcome == 3) xgr_step_result_free(&res);
      } else {
        desc = act_json(x, l.a[j], step, NULL);
      }
      step_out so;
      xgr__explore_apply_act(x, &cur, c, l.a[j], &so);
      uint64_t h1, h2;
      xgr__explore_canon_hash(x, so.s, so.now, so.marks, so.nmarks, &h1, &h2);
      bool label_ok = !labels || !labels[i] || (so.obit == (labels[i] & 0xff) && so.ostep == labels[i] >> 8);
      if (h1 == want->h1 && h2 == want->h2 && label_ok) {
        found = true;
        json_array_append_new(tr, desc);
        xgr_session_free(s);
        s = so.s;
        free(cur.marks);
        cur.marks = so.marks;
        cur.nmarks = so.nmarks;
        cur.now = so.now;
      } else {
        json_decref(desc);
        xgr_session_free(so.s);
        free(so.marks);
      }
    }
    if (!found) break;   /* cannot happen: every edge was produced by one of these actions */
  }
  xgr_session_free(s);
  free(cur.marks);
  free(l.a);
  return tr;
}

static size_t tree_path(const ex *x, uint32_t v, uint32_t **out) {
  size_t n = 0;
  for (uint32_t u = v; u != NONE32; u = x->nodes[u].parent) n++;
  uint32_t *p = xgr__xmalloc(n * sizeof *p);
  size_t i = n;
  for (uint32_t u = v; u != NONE32; u = x->nodes[u].parent) p[--i] = u;
  *out = p;
  return n;
}

json_t *xgr__explore_trace_to(ex *x, uint32_t v) {
  uint32_t *p;
  size_t n = tree_path(x, v, &p);
  json_t *t = realize(x, p, NULL, n);
  free(p);
  return t;
}

/* ---- findings -------------------------------------------------------------------------------------- */

void xgr__explore_finding(json_t *list, const char *kind, bool error, const char *step, const char *join, json_t *trace,
                          const char *fmt, ...) __attribute__((format(printf, 7, 8)));
void xgr__explore_finding(json_t *list, const char *kind, bool error, const char *step, const char *join, json_t *trace,
                          const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  json_t *f = json_pack("{s:s, s:s}", "kind", kind, "severity", error ? "error" : "warning");
  if (step) json_object_set_new(f, "step", json_string(step));
  if (join) json_object_set_new(f, "join", json_string(join));
  json_object_set_new(f, "message", json_string(msg));
  json_object_set_new(f, "trace", trace ? trace : json_array());
  json_array_append_new(list, f);
}

/* CSR adjacency over edges (optionally without clock advances). */
typedef struct csr {
  uint32_t *off, *dst;
} csr;

static void csr_build(const ex *x, bool skip_advance, bool reverse, csr *g) {
  g->off = xgr__xcalloc(x->nnodes + 1, sizeof *g->off);
  for (size_t i = 0; i < x->nedges; i++)
    if (!(skip_advance && x->edges[i].advance)) g->off[(reverse ? x->edges[i].to : x->edges[i].from) + 1]++;
  for (size_t i = 0; i < x->nnodes; i++) g->off[i + 1] += g->off[i];
  g->dst = xgr__xmalloc((g->off[x->nnodes] + 1) * sizeof *g->dst);
  uint32_t *fill = xgr__xmalloc((x->nnodes + 1) * sizeof *fill);
  memcpy(fill, g->off, (x->nnodes + 1) * sizeof *fill);
  for (size_t i = 0; i < x->nedges; i++) {
    if (skip_advance && x->edges[i].advance) continue;
    uint32_t a = reverse ? x->edges[i].to : x->edges[i].from, b = reverse ? x->edges[i].from : x->edges[i].to;
    g->dst[fill[a]++] = b;
  }
  free(fill);
}

static void csr_free(csr *g) {
  free(g->off);
  free(g->dst);
}

/* Tarjan's SCCs, iteratively. comp[v] = component id; returns for each component whether it has
 * a cycle (size > 1 or a self-loop) through *cyclic (caller frees). */
static uint32_t scc(const ex *x, const csr *g, uint32_t **comp_out, bool **cyclic_out) {
  size_t n = x->nnodes;
  uint32_t *idx = xgr__xmalloc(n * sizeof *idx), *low = xgr__xmalloc(n * sizeof *low);
  uint32_t *comp = xgr__xmalloc(n * sizeof *comp), *stack = xgr__xmalloc(n * sizeof *stack);
  uint32_t *cs = xgr__xmalloc(n * sizeof *cs), *ci = xgr__xmalloc(n * sizeof *ci);
  bool *on = xgr__xcalloc(n, sizeof *on);
  bool *cyc = NULL;
  for (size_t i = 0; i < n; i++) idx[i] = comp[i] = NONE32;
  uint32_t counter = 0, ncomp = 0;
  size_t sp = 0;
  for (size_t r = 0; r < n; r++) {
    if (idx[r] != NONE32) continue;
    size_t csp = 0;
    cs[csp] = (uint32_t)r;
    ci[csp++] = g->off[r];
    idx[r] = low[r] = counter++;
    stack[sp++] = (uint32_t)r;
    on[r] = true;
    while (csp) {
      uint32_t v = cs[csp - 1];
      if (ci[csp - 1] < g->off[v + 1]) {
        uint32_t w = g->dst[ci[csp - 1]++];
        if (idx[w] == NONE32) {
          idx[w] = low[w] = counter++;
          stack[sp++] = w;
          on[w] = true;
          cs[csp] = w;
          ci[csp++] = g->off[w];
        } else if (on[w] && idx[w] < low[v]) {
          low[v] = idx[w];
        }
        continue;
      }
      if (low[v] == idx[v]) {
        cyc = xgr__xrealloc(cyc, (ncomp + 1) * sizeof *cyc);
        uint32_t w, size = 0;
        do {
          w = stack[--sp];
          on[w] = false;
          comp[w] = ncomp;
          size++;
        } while (w != v);
        bool self = false;
        for (uint32_t e = g->off[v]; e < g->off[v + 1]; e++) self |= g->dst[e] == v;
        cyc[ncomp++] = size > 1 || self;
      }
      csp--;
      if (csp) {
        uint32_t u = cs[csp - 1];
        if (low[v] < low[u]) low[u] = low[v];
      }
    }
  }
  free(idx);
  free(low);
  free(stack);
  free(cs);
  free(ci);
  free(on);
  *comp_out = comp;
  *cyclic_out = cyc;
  return ncomp;
}

/* Shortest cycle from v back to v inside component c (BFS); returns the node list v..v. */
static size_t cycle_path(const ex *x, const csr *g, const uint32_t *comp, uint32_t v, uint32_t **out) {
  size_t n = x->nnodes;
  uint32_t *prev = xgr__xmalloc(n * sizeof *prev), *q = xgr__xmalloc(n * sizeof *q);
  for (size_t i = 0; i < n; i++) prev[i] = NONE32;
  size_t qh = 0, qt = 0;
  uint32_t last = NONE32;
  for (uint32_t e = g->off[v]; e < g->off[v + 1] && last == NONE32; e++) {
    uint32_t w = g->dst[e];
    if (comp[w] != comp[v] || prev[w] != NONE32) continue;
    prev[w] = v;
    if (w == v) last = v;
    else q[qt++] = w;
  }
  while (qh < qt && last == NONE32) {
    uint32_t u = q[qh++];
    for (uint32_t e = g->off[u]; e < g->off[u + 1]; e++) {
      uint32_t w = g->dst[e];
      if (comp[w] != comp[v]) continue;
      if (w == v) {
        last = u;
        break;
      }
      if (prev[w] != NONE32) continue;
      prev[w] = u;
      q[qt++] = w;
    }
  }
  size_t len = 0;
  uint32_t *p = NULL;
  if (last != NONE32) {
    /* v -> ... -> last -> v */
    size_t m = 1;
    for (uint32_t u = last; u != v; u = prev[u]) m++;
    p = xgr__xmalloc((m + 1) * sizeof *p);
    len = m + 1;
    p[m] = v;
    size_t i = m;
    for (uint32_t u = last; u != v; u = prev[u]) p[--i] = u;
    p[0] = v;
  }
  free(prev);
  free(q);
  *out = p;
  return len;
}

/* Cycles without a clock advance: each component with one gives a finding whose trace reaches
 * the component's first state (BFS order) and runs the shortest cycle through it twice. */
void xgr__explore_loop_findings(ex *x, json_t *list, bool any_final) {
  csr g;
  csr_build(x, true, false, &g);
  uint32_t *comp;
  bool *cyc;
  uint32_t nc = scc(x, &g, &comp, &cyc);
  uint32_t *entry = xgr__xmalloc((nc + 1) * sizeof *entry);
  for (uint32_t c = 0; c < nc; c++) entry[c] = NONE32;
  for (size_t v = 0; v < x->nnodes; v++)
    if (cyc[comp[v]] && entry[comp[v]] == NONE32) entry[comp[v]] = (uint32_t)v;   /* smallest BFS index */
  int reported = 0;
  xgr_stepset seen = {{0, 0}};
  /* components in order of their entry (shortest first) */
  for (size_t v = 0; v < x->nnodes && reported < 8; v++) {
    uint32_t c = comp[v];
    if (!cyc[c] || entry[c] != v) continue;
    uint32_t *tp, *cp;
    size_t tn = tree_path(x, (uint32_t)v, &tp);
    size_t cn = cycle_path(x, &g, comp, (uint32_t)v, &cp);
    if (!cn) {
      free(tp);
      continue;
    }
    /* the way in, then the cycle twice: the second round shows the state coming back */
    uint32_t *all = xgr__xmalloc((tn + 2 * cn) * sizeof *all);
    memcpy(all, tp, tn * sizeof *all);
    memcpy(all + tn, cp + 1, (cn - 1) * sizeof *all);
    memcpy(all + tn + cn - 1, cp + 1, (cn - 1) * sizeof *all);
    json_t *trace = realize(x, all, NULL, tn + 2 * (cn - 1));
    /* the steps that finish along the cycle */
    xgr_buf steps = {0};
    const char *first = NULL;
    size_t i;
    json_t *a;
    bool fresh = false;
    json_t *cycle = json_array();   /* the steps that finish along the cycle, once each */
    json_array_foreach(trace, i, a) {
      if (i < tn - 1 || i >= tn - 1 + cn - 1 || !json_object_get(a, "finish")) continue;   /* first round */
      const char *sid = json_string_value(json_object_get(a, "step"));
      int st = xgr_orch_find(x->o, sid);
      if (st >= 0 && !xgr_stepset_has(&seen, (unsigned)st)) {
        xgr_stepset_add(&seen, (unsigned)st);
        fresh = true;
      }
      bool listed = false;
      for (size_t k = 0; k < json_array_size(cycle) && !listed; k++)
        listed = !strcmp(json_string_value(json_array_get(cycle, k)), sid);
      if (!listed) json_array_append_new(cycle, json_string(sid));
      if (!first) first = sid;
      xgr__buf_printf(&steps, "%s%s", steps.len ? " → " : "", sid);
    }
    char *steps_txt = xgr__buf_finish(&steps, NULL);
    if (fresh && first) {
      xgr__explore_finding(list, "unbounded_loop", !any_final && x->complete, first, NULL, trace,
                           "a loop can run forever without a waitSec: %s repeats with no timer between its runs%s",
                           steps_txt[0] ? steps_txt : first, any_final ? "" : " (no path ends)");
      json_object_set_new(json_array_get(list, json_array_size(list) - 1), "steps", cycle);
      cycle = NULL;
      reported++;
    } else {
      json_decref(trace);
    }
    json_decref(cycle);
    free(steps_txt);
    free(all);
    free(tp);
    free(cp);
  }
  free(entry);
  free(comp);
  free(cyc);
  csr_free(&g);
}

/* Joins open at a state from which no decision of that join can be reached. */
void xgr__explore_undecided_findings(ex *x, json_t *list) {
  csr rg;
  csr_build(x, false, true, &rg);
  bool *can = xgr__xmalloc(x->nnodes * sizeof *can);
  uint32_t *q = xgr__xmalloc((x->nnodes + 1) * sizeof *q);
  for (unsigned d = 0; d < x->ndecls && d < 64; d++) {
    if (!x->opened[d]) continue;
    size_t qt = 0, qh = 0;
    memset(can, 0, x->nnodes * sizeof *can);
    for (size_t i = 0; i < x->nedges; i++)
      if ((x->edges[i].decided >> d & 1) && !can[x->edges[i].from]) {
        can[x->edges[i].from] = true;
        q[qt++] = x->edges[i].from;
      }
    for (size_t i = 0; i < x->nnodes; i++)   /* cut or unexpanded states might still decide it */
      if ((x->nodes[i].kind == N_CUT || x->nodes[i].kind == N_OPEN) && !can[i]) {
        can[i] = true;
        q[qt++] = (uint32_t)i;
      }
    while (qh < qt) {
      uint32_t v = q[qh++];
      for (uint32_t e = rg.off[v]; e < rg.off[v + 1]; e++)
        if (!can[rg.dst[e]]) {
          can[rg.dst[e]] = true;
          q[qt++] = rg.dst[e];
        }
    }
    bool decided_anywhere = false;
    for (size_t i = 0; i < x->nedges; i++) decided_anywhere |= x->edges[i].decided >> d & 1;
    /* the first state (BFS order) where an instance of d is open and can never be decided */
    for (size_t v = 0; v < x->nnodes; v++) {
      if (can[v] || !(x->nodes[v].open >> d & 1)) continue;
      json_t *trace = xgr__explore_trace_to(x, (uint32_t)v);
      const xgr_join *dj = x->decls[d];
      xgr__explore_finding(list, "join_undecided", !decided_anywhere && x->complete, step_id(x, dj->target), step_id(x, dj->target),
                           trace, "join %s (k=%u of %u) can stay open forever: from this state no path decides it%s",
                           step_id(x, dj->target), dj->k, dj->n, decided_anywhere ? "" : " (it is never decided)");
      break;
    }
  }
  free(can);
  free(q);
  csr_free(&rg);
}

/* ---- results and timing ------------------------------------------------------------------------------ */

static json_t *marks_joins(const ex *x, const node *n) {
  json_t *a = json_array();
  for (uint32_t i = 0; i < n->nmarks; i++) {
    uint64_t m = n->marks[i];
    if ((m & (3ULL << 62)) != MARK_JOIN) continue;
    const xgr_join *d = x->decls[(m >> 40) & 0x3fffff];
    json_t *pieces = json_array();
    for (unsigned k = 0; k < d->n; k++)
      if (m >> k & 1) json_array_append_new(pieces, json_string(step_id(x, d->from[k].node)));
    json_array_append_new(a, json_pack("{s:s, s:s, s:o}", "join", step_id(x, d->target), "outcome",
                                       xgr_join_outcome_name((xgr_join_outcome)((m >> 32) & 0xff)), "pieces", pieces));
  }
  return a;
}

static bool same_marks(const node *a, const node *b) {
  return a->result == b->result && a->nmarks == b->nmarks && (!a->nmarks || !memcmp(a->marks, b->marks, a->nmarks * sizeof *a->marks));
}

/* Same session result and the same join decisions (leaf marks aside): one line of "results". */
static bool same_result(const node *a, const node *b) {
  if (a->result != b->result) return false;
  uint32_t i = 0, j = 0;
  for (;;) {
    while (i < a->nmarks && (a->marks[i] & (3ULL << 62)) != MARK_JOIN) i++;
    while (j < b->nmarks && (b->marks[j] & (3ULL << 62)) != MARK_JOIN) j++;
    if (i == a->nmarks || j == b->nmarks) return i == a->nmarks && j == b->nmarks;
    if (a->marks[i++] != b->marks[j++]) return false;
  }
}

static char *result_text(const ex *x, const node *n) {
  xgr_buf b = {0};
  xgr__buf_printf(&b, "%s", xgr_session_result_name((xgr_session_result)n->result));
  json_t *j = marks_joins(x, n);
  size_t i;
  json_t *e;
  json_array_foreach(j, i, e) {
    xgr__buf_printf(&b, "%s %s %s", i ? "," : ";", json_string_value(json_object_get(e, "join")),
                    json_string_value(json_object_get(e, "outcome")));
    size_t k;
    json_t *p;
    json_array_foreach(json_object_get(e, "pieces"), k, p) xgr__buf_printf(&b, "%s%s", k ? "+" : " from ", json_string_value(p));
  }
  json_decref(j);
  return xgr__buf_finish(&b, NULL);
}

/* ---- timing: the same outcomes, different results ----------------------------------------------------
 * A product search over (state, outcome assignment): from the root, follow edges whose finished
 * step either has no outcome yet in the assignment (it gets the edge's) or took the same one, so
 * every path is a run in which each step always takes one outcome. Final states reached this way
 * are compared pairwise: two assignments that agree on every step both assign, and results that
 * differ, mean the result depends on timing. Bounded (the pairs are exponential in the worst case);
 * the findings it gives are real either way. */

typedef struct tpair {
  uint32_t node, parent, edge;
} tpair;

typedef struct tsearch {
  tpair *p;
  size_t n, cap;
  uint8_t *asg;           /* n * nsteps outcome bits */
  uint32_t *table;
  size_t tcap;
} tsearch;

static uint64_t tp_hash(const ex *x, uint32_t nd, const uint8_t *a) {
  uint64_t h1, h2;
  xgr__explore_hash_bytes(a, x->o->nsteps, &h1, &h2);
  return xgr__mix64(h1 ^ xgr__mix64(nd + 0x9e37ULL));
}

static uint32_t tp_find_or_add(const ex *x, tsearch *t, uint32_t nd, const uint8_t *a, uint32_t parent, uint32_t via,
                               bool *added) {
  size_t ns = x->o->nsteps;
  *added = false;
  if ((t->n + 1) * 2 > t->tcap) {
    size_t nc = t->tcap ? t->tcap * 2 : 4096;
    uint32_t *tb = xgr__xcalloc(nc, sizeof *tb);
    for (size_t i = 0; i < t->n; i++) {
      size_t j = tp_hash(x, t->p[i].node, t->asg + i * ns) & (nc - 1);
      while (tb[j]) j = (j + 1) & (nc - 1);
      tb[j] = (uint32_t)i + 1;
    }
    free(t->table);
    t->table = tb;
    t->tcap = nc;
  }
  size_t j = tp_hash(x, nd, a) & (t->tcap - 1);
  while (t->table[j]) {
    uint32_t q = t->table[j] - 1;
    if (t->p[q].node == nd && !memcmp(t->asg + (size_t)q * ns, a, ns)) return q;
    j = (j + 1) & (t->tcap - 1);
  }
  if (t->n == t->cap) {
    t->cap = t->cap ? t->cap * 2 : 4096;
    t->p = xgr__xrealloc(t->p, t->cap * sizeof *t->p);
    t->asg = xgr__xrealloc(t->asg, t->cap * ns);
  }
  uint32_t idx = (uint32_t)t->n++;
  t->p[idx] = (tpair){nd, parent, via};
  memcpy(t->asg + (size_t)idx * ns, a, ns);
  t->table[j] = idx + 1;
  *added = true;
  return idx;
}

/* The payloads of a final state's leaf processes (those that ended a branch without spawning), as
 * a sorted set of hashes: which step produced them does not matter, only what the session left. */
static size_t leaf_payloads(const node *n, uint64_t *out) {
  size_t k = 0;
  for (uint32_t i = 0; i < n->nmarks; i++)
    if ((n->marks[i] & (3ULL << 62)) == MARK_LEAF) {
      uint64_t h = n->marks[i] & ((1ULL << 39) - 1);
      size_t j = 0;
      while (j < k && out[j] < h) j++;
      if (j < k && out[j] == h) continue;
      memmove(out + j + 1, out + j, (k - j) * sizeof *out);
      out[j] = h;
      k++;
    }
  return k;
}

/* Whether two final states differ in what a user sees: the session result, a join's decision or
 * pieces, or the payloads left behind. (Which producer ran before a kill is timing by design and
 * only counts through these.) *payloads_only tells that only the payloads differ. */
static bool results_differ(const node *a, const node *b, bool *payloads_only) {
  *payloads_only = false;
  if (!same_result(a, b)) return true;
  uint64_t *pa = xgr__xmalloc((a->nmarks + 1) * sizeof *pa), *pb = xgr__xmalloc((b->nmarks + 1) * sizeof *pb);
  size_t na = leaf_payloads(a, pa), nb = leaf_payloads(b, pb);
  bool differ = na != nb || (na && memcmp(pa, pb, na * sizeof *pa));
  free(pa);
  free(pb);
  *payloads_only = differ;
  return differ;
}

/* Whether two final states have the same session result and every join the same outcome, so
 * that they differ only in which producers' pieces a join took (and what payloads that left): the
 * race a join with k < n or with policy kill declares. False when neither decided a join. */
static bool same_outcomes(const node *a, const node *b) {
  if (a->result != b->result) return false;
  bool joins = false;   /* without a join decision there is no declared race */
  for (uint32_t i = 0; i < a->nmarks; i++) joins |= (a->marks[i] & (3ULL << 62)) == MARK_JOIN;
  if (!joins) return false;
  /* the join marks without their pieces, as sets (marks are sorted, pieces are the low bits) */
  const uint64_t keep = ~((1ULL << 32) - 1);
  for (int side = 0; side < 2; side++) {
    const node *p = side ? b : a, *q = side ? a : b;
    for (uint32_t i = 0; i < p->nmarks; i++) {
      if ((p->marks[i] & (3ULL << 62)) != MARK_JOIN) continue;
      bool found = false;
      for (uint32_t j = 0; j < q->nmarks && !found; j++)
        found = (q->marks[j] & (3ULL << 62)) == MARK_JOIN && (q->marks[j] & keep) == (p->marks[i] & keep);
      if (!found) return false;
    }
  }
  return true;
}

static bool agree(const uint8_t *a, const uint8_t *b, size_t n) {
  for (size_t s = 0; s < n; s++)
    if (a[s] && b[s] && a[s] != b[s]) return false;
  return true;
}

static json_t *pair_trace(ex *x, const tsearch *t, uint32_t q) {
  size_t n = 0;
  for (uint32_t u = q; u != NONE32; u = t->p[u].parent) n++;
  uint32_t *path = xgr__xmalloc(n * sizeof *path), *lab = xgr__xcalloc(n, sizeof *lab);
  size_t i = n;
  for (uint32_t u = q; u != NONE32; u = t->p[u].parent) {
    --i;
    path[i] = t->p[u].node;
    if (t->p[u].edge != NONE32) {
      const edge *e = &x->edges[t->p[u].edge];
      if (e->obit) lab[i] = (uint32_t)e->ostep << 8 | e->obit;
    }
  }
  json_t *tr = realize(x, path, lab, n);
  free(path);
  free(lab);
  return tr;
}

static void timing(ex *x, json_t *findings) {
  size_t ns = x->o->nsteps, limit = 4 * x->nnodes + 100000;
  if (limit > 3000000) limit = 3000000;
  /* out-edges by source, as edge indices */
  uint32_t *off = xgr__xcalloc(x->nnodes + 1, sizeof *off), *eix = xgr__xmalloc((x->nedges + 1) * sizeof *eix);
  for (size_t i = 0; i < x->nedges; i++) off[x->edges[i].from + 1]++;
  for (size_t i = 0; i < x->nnodes; i++) off[i + 1] += off[i];
  uint32_t *fill = xgr__xmalloc((x->nnodes + 1) * sizeof *fill);
  memcpy(fill, off, (x->nnodes + 1) * sizeof *fill);
  for (size_t i = 0; i < x->nedges; i++) eix[fill[x->edges[i].from]++] = (uint32_t)i;
  free(fill);
  tsearch t = {0};
  uint8_t *a = xgr__xcalloc(ns + 1, 1);
  bool added;
  tp_find_or_add(x, &t, 0, a, NONE32, NONE32, &added);
  uint32_t *fin = NULL;
  size_t nfin = 0;
  for (size_t h = 0; h < t.n && t.n < limit; h++) {
    uint32_t v = t.p[h].node;
    if (x->nodes[v].kind == N_FINAL || x->nodes[v].kind == N_STALL) {
      if (nfin < 4000) {
        fin = xgr__xrealloc(fin, (nfin + 1) * sizeof *fin);
        fin[nfin++] = (uint32_t)h;
      }
      continue;
    }
    for (uint32_t k = off[v]; k < off[v + 1]; k++) {
      const edge *e = &x->edges[eix[k]];
      memcpy(a, t.asg + h * ns, ns);
      if (e->obit) {
        if (a[e->ostep] && a[e->ostep] != e->obit) continue;
        a[e->ostep] = e->obit;
      }
      tp_find_or_add(x, &t, e->to, a, (uint32_t)h, eix[k], &added);
    }
  }
  /* the first pair whose join outcomes or session result differ (a warning); failing that, the
   * first pair that differs only in pieces or payloads (info: the race the joins declare) */
  size_t race_i = SIZE_MAX, race_j = 0, real_i = SIZE_MAX, real_j = 0;
  bool race_payloads_only = false;
  for (size_t i = 0; i < nfin && real_i == SIZE_MAX; i++)
    for (size_t j = i + 1; j < nfin && real_i == SIZE_MAX; j++) {
      const node *na = &x->nodes[t.p[fin[i]].node], *nb = &x->nodes[t.p[fin[j]].node];
      if (same_marks(na, nb) || !agree(t.asg + (size_t)fin[i] * ns, t.asg + (size_t)fin[j] * ns, ns)) continue;
      if (!same_outcomes(na, nb)) {
        real_i = i, real_j = j;
      } else if (race_i == SIZE_MAX) {
        bool payloads_only;
        if (!results_differ(na, nb, &payloads_only)) continue;
        race_i = i, race_j = j, race_payloads_only = payloads_only;
      }
    }
  bool real = real_i != SIZE_MAX;
  if (real || race_i != SIZE_MAX) {
    size_t i = real ? real_i : race_i, j = real ? real_j : race_j;
    const node *na = &x->nodes[t.p[fin[i]].node], *nb = &x->nodes[t.p[fin[j]].node];
    char *ta = result_text(x, na), *tb = result_text(x, nb);
    xgr__explore_finding(findings, "timing_dependent", false, NULL, NULL, pair_trace(x, &t, fin[i]),
                         "the same step outcomes end differently depending on timing: \"%s\" (trace) or \"%s\" (otherTrace)%s", ta,
                         tb, real ? "" : race_payloads_only ? " (the same join results; which processes finish and what payloads they "
                         "leave differ, a race the joins' policy declares)"
                         : " (the same join results from other pieces: which producers a join takes "
                         "is a race its k of n declares)");
    json_t *f = json_array_get(findings, json_array_size(findings) - 1);
    json_object_set_new(f, "otherTrace", pair_trace(x, &t, fin[j]));
    if (!real) json_object_set_new(f, "severity", json_string("info"));
    free(ta);
    free(tb);
  }
  free(fin);
  free(a);
  free(off);
  free(eix);
  free(t.p);
  free(t.asg);
  free(t.table);
}

json_t *xgr__explore_results_and_timing(ex *x, json_t *findings) {
  json_t *results = json_array();
  uint32_t *fin = NULL;
  size_t nfin = 0;
  for (size_t v = 0; v < x->nnodes; v++)
    if (x->nodes[v].kind == N_FINAL || x->nodes[v].kind == N_STALL) {
      fin = xgr__xrealloc(fin, (nfin + 1) * sizeof *fin);
      fin[nfin++] = (uint32_t)v;
    }
  /* group finals by result and marks */
  bool *done = xgr__xcalloc(nfin + 1, sizeof *done);
  for (size_t i = 0; i < nfin; i++) {
    if (done[i]) continue;
    size_t count = 0;
    for (size_t j = i; j < nfin; j++)
      if (!done[j] && same_result(&x->nodes[fin[i]], &x->nodes[fin[j]])) {
        done[j] = true;
        count++;
      }
    const node *n = &x->nodes[fin[i]];
    json_array_append_new(results, json_pack("{s:s, s:I, s:o}", "result", xgr_session_result_name((xgr_session_result)n->result),
                                             "count", (json_int_t)count, "joins", marks_joins(x, n)));
  }
  free(done);
  timing(x, findings);
  free(fin);
  return results;
}
