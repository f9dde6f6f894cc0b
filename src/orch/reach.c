/* reach.c — reachability between steps, computed once per orchestration.
 *
 * Two relations over at most 128 steps, each a bitset per step:
 *   all:   an edge s -> t for every spawn t and every join target t of either branch of s;
 *   scope: the edges a process can follow without leaving its join scope (SEMANTICS §3.3):
 *          spawns of branches without a join, and the `joinid` of branches with one (the join
 *          target stays in the parent's scope; the spawns of a join branch open a new scope).
 * The transitive closure (paths of one or more edges) is Warshall's algorithm on bitsets:
 * for every k, every row that has k absorbs row k — O(n^2) word operations.
 */
#include "orch/orch_impl.h"

static void closure(xgr_stepset *r, size_t n) {
  for (size_t k = 0; k < n; k++)
    for (size_t i = 0; i < n; i++)
      if (xgr_stepset_has(&r[i], (unsigned)k)) {
        r[i].w[0] |= r[k].w[0];
        r[i].w[1] |= r[k].w[1];
      }
}

int xgr__orch_compute_reach(xgr_orch *o, orch_impl *im) {
  size_t n = o->nsteps;
  o->reach_all = xgr_arena_alloc(&im->arena, n * sizeof *o->reach_all);
  o->reach_scope = xgr_arena_alloc(&im->arena, n * sizeof *o->reach_scope);
  if (!o->reach_all || !o->reach_scope) return XGR_ENOMEM;
  for (size_t s = 0; s < n; s++) {
    for (int b = 0; b < 2; b++) {
      const xgr_branch *br = &o->steps[s].branch[b];
      for (size_t i = 0; i < br->nspawns; i++) {
        xgr_stepset_add(&o->reach_all[s], br->spawns[i]);
        if (!br->join) xgr_stepset_add(&o->reach_scope[s], br->spawns[i]);
      }
      if (br->join) {
        xgr_stepset_add(&o->reach_all[s], br->join->target);
        xgr_stepset_add(&o->reach_scope[s], br->join->target);
      }
    }
  }
  closure(o->reach_all, n);
  closure(o->reach_scope, n);
  return 0;
}
