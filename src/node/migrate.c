/* migrate.c — the node's side of migrating a session (issue 36; xgr/node.h "migration"): resolve
 * and pin NEW's bundle, load the session if it sleeps, and hand the move to the session's actor
 * (xgr_engine_migrate), which holds it at its safe point, checks and rewrites it in one commit. The
 * bundle reference passes to the session when it moved; otherwise it is given back here. On a
 * cluster the call is routed to the node that holds the session (lease.c), which runs it here. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "node/node_impl.h"

void xgr__node_migrate_metrics(xgr_node *d, xgr_metrics_out *out) {
  static const char *const names[] = {"migrated", "forced", "unsafe", "refused", "checked"};
  xgr_metrics_family(out, "xgr_migrations_total", "counter",
                     "Sessions xgr.migrateSessions moved (migrated, forced), left alone (unsafe, refused) or checked (dry run)");
  for (int i = 0; i < 5; i++) {
    char l[48];
    snprintf(l, sizeof l, "outcome=\"%s\"", names[i]);
    xgr_metrics_line(out, "xgr_migrations_total", l, (double)atomic_load(&d->migrations[i]));
  }
}

int xgr_node_versions(xgr_node *d, const char *owner, const char *registry, json_t **out, xgr_error *err) {
  return xgr_store_versions(d->st, owner, registry, out, err);
}

bool xgr_node_may_migrate(xgr_node *n, const char *actor, const char *owner) {
  /* the owner of the sessions, or an operator (xgrd --operator; access.c) */
  if (actor && xgr_node_is_operator(n, actor)) return true;
  return actor && owner && !strcasecmp(actor, owner);
}

int xgr_node_migrate(xgr_node *d, const xgr_node_migrate_req *r, json_t **verdict, xgr_error *err) {
  if (verdict) *verdict = NULL;
  return d->lease ? xgr__node_lease_migrate(d, r, verdict, err) : xgr__node_migrate_here(d, r, NULL, verdict, err);
}

int xgr__node_migrate_here(xgr_node *d, const xgr_node_migrate_req *r, const char *via, json_t **verdict,
                           xgr_error *err) {
  if (verdict) *verdict = NULL;
  const xgr_bundle *b = NULL;
  xgr_node_bundle_meta meta;
  memset(&meta, 0, sizeof meta);
  int rc = r->to_key[0] == '@' ? xgr_node_bundle_ex(d, r->to_key, true, &b, &meta, "to", err)
                               : xgr_node_bundle_in(d, r->owner, true, r->to_key, true, &b, &meta, "to", err);
  if (rc) return rc;
  if (!xgr_node_live(d, r->owner, r->root, true, NULL)) {   /* a hibernated session is loaded */
    xgr_node_bundle_put(d, b);
    return xgr_error_set(err, XGR_ENOTFOUND, NULL, "no live session %s/%llu on this node", r->owner,
                         (unsigned long long)r->root);
  }
  xgr_store_session row;
  memset(&row, 0, sizeof row);
  xgr_error rerr;
  bool has_row = !xgr_store_session_get(d->st, r->owner, r->root, &row, &rerr);
  xgr_engine_ctl c = {.kind = XGR_CTL_MIGRATE, .owner = r->owner, .root_pid = r->root, .actor = r->actor,
                      .permit = r->permit, .node = via ? via : d->name, .bundle = b, .bundle_hash = meta.bundle_hash,
                      .nmap = r->nmap, .map_from = r->map_from, .map_to = r->map_to, .force = r->force,
                      .dry = r->dry_run, .verdict = verdict, .from_bundle_hash = has_row ? row.bundle_hash : NULL};
  rc = xgr_engine_migrate(d->e, &c, err);
  if (has_row) xgr_store_session_clear(&row);
  bool safe = verdict && *verdict && json_is_true(json_object_get(*verdict, "safe"));
  int k = r->dry_run && !rc ? 4 : !rc ? (safe ? 0 : 1) : rc == XGR_ECONFLICT ? 2 : rc == XGR_EINVAL ? 3 : -1;
  if (k >= 0) atomic_fetch_add(&d->migrations[k], 1);
  if (rc || r->dry_run) xgr_node_bundle_put(d, b);   /* else the session holds it now */
  return rc;
}
