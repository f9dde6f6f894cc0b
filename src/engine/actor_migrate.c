/* actor_migrate.c — a session actor's part of a migration (issue 36; xgr_engine_migrate in
 * xgr/engine.h): the migrate call waits in the actor (which dispatches nothing meanwhile) until no
 * step of the session runs; then the migration is checked on that state (xgr/migrate.h) and, when
 * safe or forced, the core is rewritten with xgr_session_migrate and its processes, the row's new
 * pin and the audit entry go out in the turn's one batch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/actor_impl.h"
#include "util/alloc.h"
#include "xgr/migrate.h"

/* The audit detail of a migration: old and new orchestration and bundle hashes, the map, forced, safe. */
static char *migrate_detail(const actor *a, const ctl_msg *m, bool safe) {
  json_t *map = json_object();
  for (size_t i = 0; i < m->nmap; i++) json_object_set_new(map, m->map_from[i], json_string(m->map_to[i]));
  const char *old_bundle = a->bundle_hash && a->bundle_hash[0] ? a->bundle_hash
                           : m->from_bundle_hash                ? m->from_bundle_hash
                                                                : "";
  json_t *d = json_pack("{s:s, s:s, s:s, s:s, s:o, s:b, s:b}", "old", a->b->orch->hash, "new", m->bundle->orch->hash,
                        "oldBundle", old_bundle, "newBundle", m->bundle_hash, "map", map, "forced", m->force && !safe,
                        "safe", safe);
  char *t = json_dumps(d, JSON_COMPACT);
  json_decref(d);
  return t;
}

/* The waiting migration, once the session is at its safe point (no step running, no result
 * pending): check on the state it has now, then move it (or refuse) and answer. */
void xgr_eng_migrate_try(actor *a) {
  ctl_msg *m = a->mig;
  if (!m) return;
  if (a->finished || a->stopping || a->limit || !xgr_session_live(a->s)) {   /* it ended while held */
    a->mig = NULL;
    xgr_eng_ctl_reply(a, m, XGR_ENOTFOUND, "the session ended before its safe point: not migrated");
    return;
  }
  if (xgr_session_running(a->s) || a->inflight) return;
  a->mig = NULL;
  xgr_error err;
  xgr_error_clear(&err);
  int rc = 0;
  json_t *v = NULL;
  xgr_migrate_checker *c = xgr_migrate_checker_new(a->b->orch, a->b, m->bundle->orch, m->bundle, m->nmap,
                                                   (const char *const *)m->map_from, (const char *const *)m->map_to, NULL, &err);
  if (!c) {
    rc = XGR_EINVAL;
  } else {
    v = xgr_migrate_check_session(c, a->s, a->now);
    bool safe = json_is_true(json_object_get(v, "safe"));
    const json_t *problem = json_array_get(json_object_get(v, "problems"), 0);
    const json_t *added = json_array_get(json_object_get(v, "added"), 0);
    if (problem) {   /* no migrated state can be built: not even forced */
      rc = xgr_error_set(&err, XGR_EINVAL, NULL, "not migrated: %s",
                         json_string_value(json_object_get(problem, "message")));
    } else if (!safe && !m->force) {
      rc = xgr_error_set(&err, XGR_ECONFLICT, NULL, "not migrated: the migration is unsafe: %s",
                         added ? json_string_value(json_object_get(added, "message"))
                               : "an exploration was cut by its bounds, so nothing is proved");
    } else if (m->dry) {
      snprintf(err.message, sizeof err.message, "dry run: would migrate to %s%s", m->bundle->orch->hash,
               safe ? "" : " (forced)");
    } else {
      xgr_session *ns = NULL;
      rc = xgr_session_migrate(a->s, m->bundle->orch, xgr_migrate_checker_map(c), a->now, &a->fx, &ns, NULL, NULL, &err);
      if (!rc) {
        char *detail = migrate_detail(a, m, safe);
        xgr_session *old = a->s;
        if (a->bundle_done) {   /* the old bundle is reported when the actor goes (events may name it) */
          a->prev_b = xgr__xrealloc(a->prev_b, (a->nprev_b + 1) * sizeof *a->prev_b);
          a->prev_b[a->nprev_b++] = a->b;
        }
        a->s = ns;
        a->b = m->bundle;
        a->bundle_done = true;
        /* ordered application: one step at a time when a rule of the new bundle can wake (actor.c) */
        for (size_t i = 0; a->ordered && i < a->b->orch->nsteps && !a->serial; i++)
          a->serial = a->b->step_rule[i] && xgr_rule_nwakeups(a->b->step_rule[i]) > 0;
        free(a->bundle_hash);
        a->bundle_hash = xgr__xstrdup(m->bundle_hash);
        free(a->pin_id);
        free(a->pin_hash);
        free(a->pin_bundle);
        a->pin_id = xgr__xstrdup(ns ? xgr_session_orch(ns)->id : "");
        a->pin_hash = xgr__xstrdup(xgr_session_orch(ns)->hash);
        a->pin_bundle = xgr__xstrdup(m->bundle_hash);
        xgr_eng_consume(a);   /* the PROC effects of every process, under NEW */
        xgr_session_free(old);
        if (m->actor && a->e->has_store) xgr_eng_audit(a, "migrate", m->actor, m->node, m->permit, detail);
        free(detail);
        snprintf(err.message, sizeof err.message, "migrated to %s%s", m->bundle->orch->hash, safe ? "" : " (forced)");
      }
    }
    xgr_migrate_checker_free(c);
  }
  if (m->verdict) *m->verdict = v;
  else json_decref(v);
  a->touched = true;
  xgr_eng_ctl_reply(a, m, rc, err.message);
}

