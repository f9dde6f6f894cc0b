/* analyze.c — static analysis of a parsed orchestration for `xgr check` (beyond load errors).
 *
 * For every join declaration on a branch B of step S, the producers are B's spawns (they form
 * the join's fresh scope). A `from` entry can ever deliver only if some spawn of B is at that
 * node or reaches it along scope-preserving edges. If fewer than k entries can deliver, the join
 * is unfulfillable whatever the steps decide — the pitfall of seed 003 §7.4 — and that is an
 * error. Entries that cannot deliver while k is still reachable are warnings, as are a missing
 * `waitonjoin`, a join target that the same branch also spawns, and steps that no start step
 * reaches. Start steps (no edge from another step leads to them) are listed as info.
 */
#include <stdio.h>
#include <string.h>

#include "xgr/orch.h"

static const char *const branch_names[2] = {"onValid", "onInvalid"};

/* Append ", name" lists to buf without overflowing. */
static void list_add(char *buf, size_t n, const char *name) {
  size_t len = strlen(buf);
  if (len + 4 >= n) return;
  snprintf(buf + len, n - len, "%s%s", len ? ", " : "", name);
}

static size_t check_join(const xgr_orch *o, size_t s, int b, xgr_diags *d) {
  const xgr_branch *br = &o->steps[s].branch[b];
  const xgr_join *j = br->join;
  char path[XGR_PATH_MAX];
  snprintf(path, sizeof path, "structure.%s.%s.join", o->steps[s].id, branch_names[b]);
  const char *target = o->steps[j->target].id;

  char spawns[256] = "", dead[256] = "";
  for (size_t i = 0; i < br->nspawns; i++) list_add(spawns, sizeof spawns, o->steps[br->spawns[i]].id);
  size_t deliverable = 0;
  bool can[XGR_MAX_JOIN_INPUTS] = {false};
  for (size_t f = 0; f < j->n; f++) {
    for (size_t i = 0; i < br->nspawns && !can[f]; i++)
      can[f] = xgr_orch_can_reach_in_scope(o, br->spawns[i], j->from[f].node);
    if (can[f]) deliverable++;
    else list_add(dead, sizeof dead, o->steps[j->from[f].node].id);
  }

  size_t errors = 0;
  if (deliverable < j->k) {
    if (br->nspawns == 0)
      xgr_diags_add(d, XGR_SEV_ERROR, "join_unfulfillable", path,
                    "join \"%s\" needs %u of %u pieces but this branch spawns nothing, so no producer "
                    "is in its scope: spawn %s in this branch (docs/SEMANTICS.md, \"Join scopes\")",
                    target, j->k, j->n, dead);
    else
      xgr_diags_add(d, XGR_SEV_ERROR, "join_unfulfillable", path,
                    "join \"%s\" needs %u of %u pieces but at most %zu can arrive: %s %s neither spawned "
                    "by this branch nor reachable in its scope from its spawns (%s); producers spawned "
                    "elsewhere belong to another join group — spawn them in this branch (docs/SEMANTICS.md, \"Join scopes\")",
                    target, j->k, j->n, deliverable, dead, strchr(dead, ',') ? "are" : "is", spawns);
    errors++;
  } else {
    for (size_t f = 0; f < j->n; f++) {
      if (can[f]) continue;
      char fp[XGR_PATH_MAX + 32];
      snprintf(fp, sizeof fp, "%s.from[%zu].node", path, f);
      xgr_diags_add(d, XGR_SEV_WARNING, "from_unreachable", fp,
                    "\"%s\" can never deliver to join \"%s\": no spawn of this branch (%s) reaches it in "
                    "scope; the join can still reach k=%u without it",
                    o->steps[j->from[f].node].id, target, spawns[0] ? spawns : "none", j->k);
    }
  }
  if (j->policy_defaulted)
    xgr_diags_add(d, XGR_SEV_WARNING, "waitonjoin_default", path,
                  "`waitonjoin` is missing and defaults to \"drain\"; write \"kill\" or \"drain\" to say which");
  for (size_t i = 0; i < br->nspawns; i++)
    if (br->spawns[i] == j->target) {
      char sp[XGR_PATH_MAX + 32];
      snprintf(sp, sizeof sp, "structure.%s.%s.spawns[%zu]", o->steps[s].id, branch_names[b], i);
      xgr_diags_add(d, XGR_SEV_WARNING, "join_target_spawned", sp,
                    "\"%s\" is this branch's join target and is spawned by it too: it will run once as a "
                    "producer right away and once more when the join closes",
                    target);
    }
  return errors;
}

size_t xgr_orch_analyze(const xgr_orch *o, xgr_diags *d) {
  size_t errors = 0;
  for (size_t s = 0; s < o->nsteps; s++)
    for (int b = 0; b < 2; b++)
      if (o->steps[s].branch[b].join) errors += check_join(o, s, b, d);

  /* start steps: no edge from another step leads to them */
  xgr_stepset has_in = {{0, 0}};
  for (size_t s = 0; s < o->nsteps; s++)
    for (size_t t = 0; t < o->nsteps; t++)
      if (t != s && xgr_stepset_has(&o->reach_all[t], (unsigned)s)) {
        xgr_stepset_add(&has_in, (unsigned)s);
        break;
      }
  char starts[512] = "";
  xgr_stepset from_start = {{0, 0}};
  size_t nstart = 0;
  for (size_t s = 0; s < o->nsteps; s++)
    if (!xgr_stepset_has(&has_in, (unsigned)s)) {
      list_add(starts, sizeof starts, o->steps[s].id);
      xgr_stepset_add(&from_start, (unsigned)s);
      from_start.w[0] |= o->reach_all[s].w[0];
      from_start.w[1] |= o->reach_all[s].w[1];
      nstart++;
    }
  if (nstart) {
    xgr_diags_add(d, XGR_SEV_INFO, "start_steps", "structure", "possible start step%s: %s",
                  nstart > 1 ? "s" : "", starts);
    for (size_t s = 0; s < o->nsteps; s++)
      if (!xgr_stepset_has(&from_start, (unsigned)s)) {
        char p[XGR_PATH_MAX];
        snprintf(p, sizeof p, "structure.%s", o->steps[s].id);
        xgr_diags_add(d, XGR_SEV_WARNING, "unreachable_step", p,
                      "step \"%s\" is not reachable from any start step (%s); it runs only if a session "
                      "starts there",
                      o->steps[s].id, starts);
      }
  } else {
    xgr_diags_add(d, XGR_SEV_INFO, "start_steps", "structure",
                  "every step is reached from another step (the graph is a cycle); a session may start at any step");
  }
  return errors;
}
