/* migrate.c — `xgr migrate-check` and the check xgr.migrateSessions runs before it moves a
 * session (xgr/migrate.h). A state of OLD is migrated with the core's own xgr_session_migrate (the
 * function the engine applies), then NEW is explored from the migrated state and OLD from the
 * original one, and NEW's findings that OLD does not have are what the migration adds. Findings
 * are matched through the step map: same kind, the mapped step and join, a loop sharing a mapped
 * step, no worse severity. A step that OLD never runs from the state may well never run under NEW
 * (a session past the start step never runs it again): only a step OLD reaches and NEW does not is
 * added. Verdicts are cached by the explorer's canonical state key; a cached verdict given for
 * another session names that session's processes (its problems found again, its traces' pids
 * renamed), so an answer does not depend on the order sessions are checked in. */
#include <stdlib.h>
#include <string.h>

#include "explore/explore_impl.h"
#include "util/alloc.h"
#include "xgr/json.h"
#include "xgr/migrate.h"

typedef struct centry {
  uint64_t h1, h2;
  uint64_t root;          /* the session the verdict was made for (its pids are in it) */
  json_t *verdict;
} centry;

struct xgr_migrate_checker {
  const xgr_orch *oo, *no;
  const xgr_bundle *ob, *nb;
  int *map;
  xgr_explore_config cfg;
  centry *cache;
  size_t ncache, capcache;
  size_t hits, explored;
};

xgr_migrate_checker *xgr_migrate_checker_new(const xgr_orch *oo, const xgr_bundle *ob, const xgr_orch *no,
                                             const xgr_bundle *nb, size_t npairs, const char *const *from,
                                             const char *const *to, const xgr_explore_config *cfg, xgr_error *err) {
  xgr_migrate_checker *c = xgr__xcalloc(1, sizeof *c);
  c->oo = oo;
  c->no = no;
  c->ob = ob;
  c->nb = nb;
  c->map = xgr__xcalloc(oo->nsteps + 1, sizeof *c->map);
  if (xgr_migrate_map_build(oo, no, npairs, from, to, c->map, err)) {
    xgr_migrate_checker_free(c);
    return NULL;
  }
  if (cfg) c->cfg = *cfg;
  if (!c->cfg.max_states) c->cfg.max_states = 20000;
  return c;
}

void xgr_migrate_checker_free(xgr_migrate_checker *c) {
  if (!c) return;
  for (size_t i = 0; i < c->ncache; i++) json_decref(c->cache[i].verdict);
  free(c->cache);
  free(c->map);
  free(c);
}

const int *xgr_migrate_checker_map(const xgr_migrate_checker *c) { return c->map; }

void xgr_migrate_checker_stats(const xgr_migrate_checker *c, size_t *cached, size_t *explored) {
  if (cached) *cached = c->hits;
  if (explored) *explored = c->explored;
}

json_t *xgr_migrate_check_findings(const xgr_migrate_checker *c) {
  xgr_diags od, nd;
  xgr_diags_init(&od);
  xgr_diags_init(&nd);
  xgr_orch_analyze(c->oo, &od);
  xgr_orch_analyze(c->no, &nd);
  json_t *out = json_array();
  for (size_t i = 0; i < nd.n; i++) {
    const xgr_diag *d = &nd.items[i];
    if (d->severity == XGR_SEV_INFO) continue;
    bool had = false;
    for (size_t j = 0; j < od.n && !had; j++)
      had = !strcmp(od.items[j].code, d->code) && !strcmp(od.items[j].path ?: "", d->path ?: "");
    if (had) continue;
    json_array_append_new(out, json_pack("{s:s, s:s, s:s, s:s}", "severity", d->severity == XGR_SEV_ERROR ? "error" : "warning",
                                         "code", d->code, "path", d->path ?: "", "message", d->message ?: ""));
  }
  xgr_diags_free(&od);
  xgr_diags_free(&nd);
  return out;
}

/* ---- comparing findings ----------------------------------------------------------------------------- */

static const char *fs(const json_t *f, const char *k) { return json_string_value(json_object_get(f, k)); }

static int sev_rank(const char *s) { return !s ? 0 : !strcmp(s, "error") ? 2 : !strcmp(s, "warning") ? 1 : 0; }

/* NEW's id of OLD step id (NULL: none). */
static const char *mapped(const xgr_migrate_checker *c, const char *old_id) {
  if (!old_id) return NULL;
  int i = xgr_orch_find(c->oo, old_id);
  return i < 0 || c->map[i] < 0 ? NULL : c->no->steps[c->map[i]].id;
}

static bool id_eq(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

/* Does OLD's result have a finding that matches NEW's finding f? */
static bool old_has(const xgr_migrate_checker *c, const json_t *old, const json_t *f) {
  size_t i;
  const json_t *g;
  const char *kind = fs(f, "kind");
  json_array_foreach(json_object_get(old, "findings"), i, g) {
    if (!id_eq(fs(g, "kind"), kind) || sev_rank(fs(g, "severity")) < sev_rank(fs(f, "severity"))) continue;
    if (!strcmp(kind, "unbounded_loop")) {
      size_t a, b;
      const json_t *sa, *sb;
      json_array_foreach(json_object_get(f, "steps"), a, sa)
        json_array_foreach(json_object_get(g, "steps"), b, sb)
          if (id_eq(json_string_value(sa), mapped(c, json_string_value(sb)))) return true;
      continue;
    }
    if (!strcmp(kind, "stall") || !strcmp(kind, "timing_dependent")) return true;
    if (id_eq(mapped(c, fs(g, "step")), fs(f, "step")) && id_eq(mapped(c, fs(g, "join")), fs(f, "join"))) return true;
  }
  return false;
}

/* Did OLD's exploration run a step that maps to NEW step id? */
static bool old_runs(const xgr_migrate_checker *c, const json_t *old, const char *new_id) {
  for (size_t st = 0; st < c->oo->nsteps; st++) {
    if (c->map[st] < 0 || strcmp(c->no->steps[c->map[st]].id, new_id)) continue;
    bool never = false;
    size_t i;
    const json_t *g;
    json_array_foreach(json_object_get(old, "findings"), i, g)
      never |= id_eq(fs(g, "kind"), "step_unreachable") && id_eq(fs(g, "step"), c->oo->steps[st].id);
    if (!never) return true;
  }
  return false;
}

static json_t *summary(const json_t *r) {
  json_t *f = json_array();
  size_t i;
  const json_t *g;
  json_array_foreach(json_object_get(r, "findings"), i, g)
    json_array_append_new(f, json_pack("{s:O, s:O, s:O}", "kind", json_object_get(g, "kind"), "severity",
                                       json_object_get(g, "severity"), "message", json_object_get(g, "message")));
  return json_pack("{s:O, s:O, s:o}", "states", json_object_get(r, "states"), "complete", json_object_get(r, "complete"),
                   "findings", f);
}

static void on_problem(void *ctx, const char *path, const char *message) {
  json_array_append_new((json_t *)ctx, json_pack("{s:s, s:s}", "path", path, "message", message));
}

/* Migrate s to NEW (the session core's xgr_session_migrate): 0 with *m the migrated state (the
 * caller's; NULL to free it here), or its refusal; every problem it names goes into *problems (a new
 * array, the caller's), a refusal of the state as a whole (XGR_ESTATE) among them with path "". */
static int migrate_problems(const xgr_migrate_checker *c, const xgr_session *s, int64_t now, xgr_session **m,
                            json_t **problems) {
  *problems = json_array();
  xgr_effects fx;
  xgr_effects_init(&fx);
  xgr_session *out = NULL;
  xgr_error e;
  xgr_error_clear(&e);
  int rc = xgr_session_migrate(s, c->no, c->map, now, &fx, &out, on_problem, *problems, &e);
  xgr_effects_free(&fx);
  if (rc == XGR_ESTATE) json_array_append_new(*problems, json_pack("{s:s, s:s}", "path", "", "message", e.message));
  if (m) *m = out;
  else xgr_session_free(out);
  return rc;
}

static json_t *check_uncached(xgr_migrate_checker *c, const xgr_session *s, int64_t now) {
  json_t *problems;
  xgr_session *m = NULL;
  xgr_error e;
  xgr_effects fx;
  int rc = migrate_problems(c, s, now, &m, &problems);
  json_t *v = json_pack("{s:b, s:o, s:[]}", "safe", false, "problems", problems, "added");
  if (rc) return v;
  c->explored++;
  json_t *ro = NULL, *rn = NULL;
  xgr_explore_from(s, now, c->ob, "the session's state under the old orchestration", &c->cfg, &ro, &e);
  xgr_explore_from(m, now, c->nb, "the migrated state", &c->cfg, &rn, &e);
  xgr_session_free(m);
  json_t *added = json_object_get(v, "added");
  size_t i;
  json_t *f;
  json_array_foreach(json_object_get(rn, "findings"), i, f) {
    const char *kind = fs(f, "kind");
    if (!sev_rank(fs(f, "severity"))) continue;   /* info: no defect of the normal runs */
    if (!strcmp(kind, "step_unreachable") ? !old_runs(c, ro, fs(f, "step")) : old_has(c, ro, f)) continue;
    json_array_append(added, f);
  }
  /* A finding OLD has only as info (it needs a step forced to fail) that NEW has as a warning
   * shows on a normal run under NEW: its trace from an exploration with valid outcomes only is
   * the one that tells what goes wrong (the full one's shortest may use a failure). */
  json_t *rv = NULL;
  json_array_foreach(added, i, f) {
    if (strcmp(fs(f, "severity"), "warning") || !strcmp(fs(f, "kind"), "step_unreachable") || json_object_get(f, "onlyIf"))
      continue;
    if (!rv) {
      xgr_explore_config vc = c->cfg;
      vc.outcomes = XGR_EXPLORE_VALID;
      xgr_session *m2 = NULL;
      xgr_effects_init(&fx);
      if (!xgr_session_migrate(s, c->no, c->map, now, &fx, &m2, NULL, NULL, &e)) {
        xgr_explore_from(m2, now, c->nb, "the migrated state", &vc, &rv, &e);
        xgr_session_free(m2);
      }
      xgr_effects_free(&fx);
      if (!rv) break;
    }
    size_t k;
    json_t *g;
    json_array_foreach(json_object_get(rv, "findings"), k, g)
      if (id_eq(fs(g, "kind"), fs(f, "kind")) && id_eq(fs(g, "step"), fs(f, "step")) && id_eq(fs(g, "join"), fs(f, "join"))) {
        json_t *tr = json_object_get(g, "trace");
        if (json_array_size(tr)) json_object_set(f, "trace", tr);
        json_object_set_new(f, "normalRun", json_true());
        break;
      }
  }
  json_decref(rv);
  bool complete = json_is_true(json_object_get(ro, "complete")) && json_is_true(json_object_get(rn, "complete"));
  json_object_set_new(v, "complete", json_boolean(complete));
  json_object_set_new(v, "safe", json_boolean(complete && !json_array_size(added)));
  json_object_set_new(v, "old", summary(ro));
  json_object_set_new(v, "new", summary(rn));
  json_decref(ro);
  json_decref(rn);
  return v;
}

/* The pids of session `from` in the strings of v ("R" or "R:I", as traces name processes) renamed
 * to session `to`'s, in place. */
static void rename_pids(json_t *v, uint64_t from, uint64_t to) {
  char fp[24];
  int fl = snprintf(fp, sizeof fp, "%llu", (unsigned long long)from);
  size_t i;
  const char *k;
  json_t *x;
  if (json_is_array(v)) {
    json_array_foreach(v, i, x) rename_pids(x, from, to);
  } else if (json_is_object(v)) {
    json_object_foreach(v, k, x) {
      const char *t = xgr_json_text(x);
      if (t && !strncmp(t, fp, (size_t)fl) && (!t[fl] || (t[fl] == ':' && strspn(t + fl + 1, "0123456789") == strlen(t + fl + 1)))) {
        char np[64];
        snprintf(np, sizeof np, "%llu%s", (unsigned long long)to, t + fl);
        json_object_set_new(v, k, json_string(np));
      } else {
        rename_pids(x, from, to);
      }
    }
  }
}

/* A cached verdict made for another session of an equal state, told for session s: its problems
 * found again on s (the static part: cheap, and its messages name s's processes) and the pids of
 * its traces renamed to s's. */
static json_t *retell(const xgr_migrate_checker *c, const centry *ce, const xgr_session *s, int64_t now) {
  uint64_t root = xgr_session_root_pid(s);
  if (root == ce->root) return json_incref(ce->verdict);
  json_t *v = json_deep_copy(ce->verdict), *problems;
  migrate_problems(c, s, now, NULL, &problems);
  json_object_set_new(v, "problems", problems);
  rename_pids(json_object_get(v, "added"), ce->root, root);
  return v;
}

json_t *xgr_migrate_check_session(xgr_migrate_checker *c, const xgr_session *s, int64_t now) {
  uint64_t h1, h2;
  xgr__explore_state_key(s, now, &h1, &h2);
  for (size_t i = 0; i < c->ncache; i++)
    if (c->cache[i].h1 == h1 && c->cache[i].h2 == h2) {
      c->hits++;
      return retell(c, &c->cache[i], s, now);
    }
  json_t *v = check_uncached(c, s, now);
  if (c->ncache == c->capcache) {
    c->capcache = c->capcache ? 2 * c->capcache : 16;
    c->cache = xgr__xrealloc(c->cache, c->capcache * sizeof *c->cache);
  }
  c->cache[c->ncache++] = (centry){h1, h2, xgr_session_root_pid(s), json_incref(v)};
  return v;
}
