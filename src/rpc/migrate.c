/* migrate.c — xgr.migrateSessions (issue 36; docs/RPC.md): move live sessions of one owner to
 * another bundle, each checked at its safe point and moved in one commit by its actor
 * (xgr_node_migrate). The sessions are named ("sessions": [rootPid...]) or selected by their pin
 * ("filter": {"bundleHash", "registry"}); each gets its own answer: migrated, unsafe (left
 * untouched), refused (a static problem), or with dryRun what would happen. Permission: the owner
 * of the sessions (xgr_node_may_migrate, where operators come in); in permit mode a ControlPermit
 * with action "migrate" for the one session named. Also xgr.listVersions and xgr.liveSessions (the
 * stored records of live sessions, read-only, for `xgr migrate-check --url`). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rpc/rpc_impl.h"
#include "util/alloc.h"
#include "xgr/auth.h"
#include "xgr/secp.h"

#define MIGRATE_MAX_MAP 128

static const char *const keys[] = {"owner", "runner", "sessions", "filter", "to", "map", "force", "dryRun", "permit", NULL};
static const char *const filter_keys[] = {"bundleHash", "registry", NULL};

/* The selected rootPids into *out (the caller frees). */
static int select_sessions(xgr_rpcd *d, const json_t *o, const char *owner, uint64_t **out, size_t *n, xgr_error *err) {
  *out = NULL;
  *n = 0;
  const json_t *sv = json_object_get(o, "sessions"), *fv = json_object_get(o, "filter");
  if ((!sv || json_is_null(sv)) && (!fv || json_is_null(fv)))
    return xgr__rpc_fail(err, XGR_ESCHEMA, "sessions",
                         "missing; expected [rootPid, ...] or \"filter\": {\"bundleHash\" | \"registry\"}");
  const unsigned max = d->cfg.max_migrate_sessions;   /* each is checked by exploration and moved in turn */
  uint64_t *r = xgr__xcalloc(max + 1, sizeof *r);
  size_t k = 0;
  if (sv && !json_is_null(sv)) {
    if (!json_is_array(sv) || !json_array_size(sv)) {
      free(r);
      return xgr__rpc_fail(err, XGR_ESCHEMA, "sessions", "is not a non-empty array of rootPids");
    }
    if (json_array_size(sv) > max) {
      free(r);
      return xgr__rpc_fail(err, XGR_ELIMIT, "sessions", "has %zu entries; --max-migrate-sessions is %u per call",
                           json_array_size(sv), max);
    }
    size_t i;
    const json_t *v;
    json_array_foreach(sv, i, v) {
      char path[32];
      snprintf(path, sizeof path, "sessions[%zu]", i);
      int rc = xgr__rpc_uint(v, path, &r[k], err);
      if (rc) {
        free(r);
        return rc;
      }
      k++;
    }
  } else {
    if (!json_is_object(fv)) {
      free(r);
      return xgr__rpc_fail(err, XGR_ESCHEMA, "filter", "is not an object; expected {\"bundleHash\"?, \"registry\"?}");
    }
    int rc = xgr__rpc_keys(fv, "filter", filter_keys, err);
    const char *bh = NULL, *reg = NULL;
    if (!rc) rc = xgr__rpc_opt_str(fv, "bundleHash", &bh, err);
    if (!rc) rc = xgr__rpc_opt_str(fv, "registry", &reg, err);
    if (!rc && !bh && !reg)
      rc = xgr__rpc_fail(err, XGR_ESCHEMA, "filter", "names nothing; expected \"bundleHash\" or \"registry\"");
    if (rc) {
      free(r);
      return rc;
    }
    /* the owner's sessions, newest first, a page of 1000 at a time (the listing's cursor) */
    for (uint64_t before = 0;;) {
      xgr_node_session *ss = NULL;
      size_t ns = 0;
      if ((rc = xgr_node_sessions(d->n, owner, before, 1000, &ss, &ns, err))) {
        free(r);
        return xgr__rpc_code(rc, err);
      }
      for (size_t i = 0; i < ns; i++) {
        const xgr_store_session *row = &ss[i].row;
        before = row->root_pid;
        if (!ss[i].live) continue;
        if (bh && strcasecmp(bh, row->bundle_hash ? row->bundle_hash : "")) continue;
        if (reg && strcmp(reg, row->registry ? row->registry : "")) continue;
        if (k == max) {
          xgr_node_sessions_free(ss, ns);
          free(r);
          return xgr__rpc_fail(err, XGR_ELIMIT, "filter", "selects more than %u live sessions; --max-migrate-sessions is %u "
                               "per call (name them in \"sessions\" in parts)", max, max);
        }
        r[k++] = row->root_pid;
      }
      xgr_node_sessions_free(ss, ns);
      if (ns < 1000 || before <= 1) break;
    }
  }
  *out = r;
  *n = k;
  return 0;
}

/* xgr.listVersions: {"owner"?, "registry"?} -> {"owner","versions":[...]} (xgr_store_versions):
 * the owner's (default the caller), which the owner and operators may read. */
XGR__RPCD_METHOD(xgr__rpcd_m_versions) {
  xgr_rpcd *d = ctx;
  static const char *const vkeys[] = {"owner", "runner", "registry", "permit", NULL};
  const json_t *o;
  int rc = xgr__rpc_named(params, vkeys, &o, err);
  if (rc) return rc;
  char who[64] = "", owner[64];
  const char *opath, *reg = NULL;
  if ((rc = xgr__rpc_owner(o, xgr_rpc_claimed(caller, o), owner, sizeof owner, &opath, err))) return rc;
  if ((rc = xgr__rpc_opt_str(o, "registry", &reg, err))) return rc;
  if ((rc = xgr_rpc_authorize_permit(caller, o, XGR_RPC_ACT_READ, owner, who, sizeof who, NULL, err))) return rc;
  /* the owner's or an operator's (every session of the owner: no grant opens them) */
  if ((rc = xgr_rpc_access(d->n, caller, who, owner, 0, XGR_NODE_READ, opath, NULL, err))) return rc;
  json_t *v = NULL;
  if ((rc = xgr_node_versions(d->n, owner, reg, &v, err))) return xgr__rpc_code(rc, err);
  *result = json_pack("{s:s, s:o}", "owner", owner, "versions", v);
  return 0;
}

#define LIVE_MAX_SESSIONS 100        /* sessions per xgr.liveSessions answer */
#define LIVE_MAX_BYTES (8u << 20)    /* about this many bytes of records per answer (at least one session) */

/* xgr.liveSessions: {"owner"?, "registry", "beforeRootPid"?, "limit"?} -> {"owner","registry",
 * "sessions":[xgr_store_live_to_json...],"nextBeforeRootPid"} — the stored records of live sessions,
 * read-only, for `xgr migrate-check --url`. The owner's (default the caller), which the owner and
 * operators may read (a grant opens one session, not these); without "owner" an operator (or --auth
 * none without "from") reads every owner's. */
XGR__RPCD_METHOD(xgr__rpcd_m_live_sessions) {
  xgr_rpcd *d = ctx;
  static const char *const lkeys[] = {"owner", "registry", "beforeRootPid", "limit", "permit", NULL};
  const json_t *o;
  int rc = xgr__rpc_named(params, lkeys, &o, err);
  if (rc) return rc;
  char who[64] = "", owner[64] = "";
  const char *opath = "owner", *reg = NULL;
  if ((rc = xgr_rpc_authorize(caller, o, XGR_RPC_ACT_READ, NULL, who, sizeof who, err))) return rc;
  if ((rc = xgr__rpc_opt_str(o, "registry", &reg, err))) return rc;
  if (!reg || !reg[0])
    return xgr__rpc_fail(err, XGR_ESCHEMA, "registry", "missing; expected the registry key the sessions started from");
  const json_t *ov = json_object_get(o, "owner"), *bv = json_object_get(o, "beforeRootPid");
  bool every = (!ov || json_is_null(ov)) && (!who[0] || (xgr__rpc_permits(caller) && xgr_node_is_operator(d->n, who)));
  if (!every && (rc = xgr__rpc_owner(o, who, owner, sizeof owner, &opath, err))) return rc;
  /* the owner or an operator (xgr_node_access on every session of the owner: no grant opens them) */
  if (!every && (rc = xgr_rpc_access(d->n, caller, who, owner, 0, XGR_NODE_READ, opath, NULL, err))) return rc;
  uint64_t before = 0, limit = LIVE_MAX_SESSIONS;
  if (bv && !json_is_null(bv) && (rc = xgr__rpc_uint(bv, "beforeRootPid", &before, err))) return rc;
  if ((rc = xgr_rpc_param_uint(o, "limit", false, &limit, err))) return rc;
  if (limit < 1 || limit > LIVE_MAX_SESSIONS)
    return xgr__rpc_fail(err, limit ? XGR_ELIMIT : XGR_ESCHEMA, "limit", "is %llu; expected 1 to %d sessions per call",
                         (unsigned long long)limit, LIVE_MAX_SESSIONS);
  xgr_rpc_log_subject(caller, xgr_rpc_actor(caller, who), every ? "" : owner, 0);
  xgr_node_live_query q = {.owner = every ? NULL : owner, .registry = reg, .before = before, .max_sessions = limit,
                           .max_bytes = LIVE_MAX_BYTES};
  json_t *ss = NULL;
  uint64_t next = 0;
  if ((rc = xgr_node_live_records(d->n, &q, &ss, &next, err))) return xgr__rpc_code(rc, err);
  *result = json_pack("{s:o, s:s, s:o, s:o}", "owner", every ? json_null() : json_string(owner), "registry", reg,
                      "sessions", ss, "nextBeforeRootPid", next ? xgr__rpc_u64_json(next) : json_null());
  return 0;
}

XGR__RPCD_METHOD(xgr__rpcd_m_migrate) {
  xgr_rpcd *d = ctx;
  const json_t *o;
  int rc = xgr__rpc_named(params, keys, &o, err);
  if (rc) return rc;
  if (!o) return xgr__rpc_fail(err, XGR_ESCHEMA, "to", "missing; expected the bundle to move to");
  char who[64] = "", owner[64];
  const char *opath, *to = NULL;
  if ((rc = xgr__rpc_owner(o, xgr_rpc_claimed(caller, o), owner, sizeof owner, &opath, err))) return rc;
  if ((rc = xgr__rpc_opt_str(o, "to", &to, err))) return rc;
  if (!to || !to[0])
    return xgr__rpc_fail(err, XGR_ESCHEMA, "to", "missing; expected \"<registry>[/<ostcId>]\" or \"@<bundle hash>\"");
  const json_t *mv = json_object_get(o, "map"), *fv = json_object_get(o, "force"), *dv = json_object_get(o, "dryRun");
  if (mv && !json_is_null(mv) && (!json_is_object(mv) || json_object_size(mv) > MIGRATE_MAX_MAP))
    return xgr__rpc_fail(err, XGR_ESCHEMA, "map", "is not an object of at most %d \"OLD_STEP\": \"NEW_STEP\" entries",
                         MIGRATE_MAX_MAP);
  const char *from_ids[MIGRATE_MAX_MAP], *to_ids[MIGRATE_MAX_MAP];
  size_t nmap = 0;
  if (mv && json_is_object(mv)) {
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)mv, k, v) {
      if (!json_is_string(v))
        return xgr__rpc_fail(err, XGR_ESCHEMA, "map", "entry \"%.60s\" is not a step id string", k);
      from_ids[nmap] = k;
      to_ids[nmap++] = json_string_value(v);
    }
  }
  if ((fv && !json_is_null(fv) && !json_is_boolean(fv)) || (dv && !json_is_null(dv) && !json_is_boolean(dv)))
    return xgr__rpc_fail(err, XGR_ESCHEMA, fv && !json_is_boolean(fv) && !json_is_null(fv) ? "force" : "dryRun",
                         "is not a boolean");
  bool force = json_is_true(fv), dry = json_is_true(dv);
  xgr_permit permit;
  /* who: a permit's signer or the signed-in address; xgr_node_may_migrate decides (owner or operator) */
  if ((rc = xgr__rpc_control_caller(caller, o, owner, who, sizeof who, &permit, err))) return rc;
  const char *actor_addr = permit.kind ? permit.from : who;
  if (!xgr_node_may_migrate(d->n, actor_addr, owner))
    return xgr__rpc_fail(err, XGR_EPERM, opath, "%s may not migrate sessions of %s (only their owner and xgrd's operators may)", actor_addr, owner);
  uint64_t *roots;
  size_t n;
  if ((rc = select_sessions(d, o, owner, &roots, &n, err))) return rc;
  char digest[67] = "";
  if (permit.kind) {   /* a ControlPermit signs one session and the action "migrate" */
    if (n != 1 || (rc = xgr_auth_check_control(&permit, "migrate", roots[0], NULL, owner, err)) ||
        (rc = xgr_auth_consume(caller->auth, &permit, err))) {
      free(roots);
      return rc ? rc : xgr__rpc_fail(err, XGR_EPERM, "sessions", "a ControlPermit migrates one session; %zu are selected", n);
    }
    xgr_hex_encode(permit.digest, 32, digest);
  }
  xgr_rpc_log_subject(caller, xgr_rpc_actor(caller, actor_addr), owner, n == 1 ? roots[0] : 0);
  json_t *results = json_array();
  size_t moved = 0, unsafe = 0, refused = 0;
  for (size_t i = 0; i < n; i++) {
    xgr_node_migrate_req r = {.owner = owner, .root = roots[i], .to_key = to, .nmap = nmap, .map_from = from_ids,
                              .map_to = to_ids, .force = force, .dry_run = dry,
                              .actor = xgr_rpc_actor(caller, actor_addr), .permit = digest[0] ? digest : NULL};
    json_t *verdict = NULL;
    xgr_error e;
    xgr_error_clear(&e);
    int mrc = xgr_node_migrate(d->n, &r, &verdict, &e);
    bool safe = json_is_true(json_object_get(verdict, "safe"));
    const char *status = !mrc ? (dry ? (safe ? "safe" : "wouldForce") : (safe ? "migrated" : "forced"))
                       : mrc == XGR_ECONFLICT ? "unsafe"
                       : mrc == XGR_EINVAL ? "refused"
                       : "error";
    if (!mrc && !dry) moved++;
    else if (mrc == XGR_ECONFLICT) unsafe++;
    else if (mrc) refused++;
    json_t *it = json_pack("{s:o, s:s, s:s}", "rootPid", xgr__rpc_u64_json(roots[i]), "status", status, "message",
                           mrc ? e.message : "ok");
    if (mrc && mrc != XGR_ECONFLICT && mrc != XGR_EINVAL) json_object_set_new(it, "code", json_integer(mrc));
    if (verdict) json_object_set_new(it, "check", verdict);
    json_array_append_new(results, it);
  }
  free(roots);
  *result = json_pack("{s:s, s:s, s:b, s:b, s:I, s:I, s:I, s:o}", "owner", owner, "to", to, "dryRun", dry, "force", force,
                      "migrated", (json_int_t)moved, "unsafe", (json_int_t)unsafe, "refused", (json_int_t)refused,
                      "sessions", results);
  return 0;
}
