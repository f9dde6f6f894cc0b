/* grants.c — the grant methods of the public endpoint reference (§14–16) on xgr's sessions:
 * xgr_manageGrants (create, change, revoke grants on one session), xgr_listGrants (the grants the
 * caller may see, with the reference's filters and an id cursor) and xgr_getGrantFeePerYear (the
 * fee configured on xgrd). docs/SEMANTICS.md "Grants" maps the reference's rid, scope and refAddr
 * onto xgr: scope 1 is a session, rid is its rootPid as a 0x-hex number, refAddr the rule address a
 * grant came from. Who may do what is the node's decision (xgr_rpc_access → xgr_node_access).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rpc/rpc_impl.h"
#include "rpc/console_service_impl.h"
#include "util/alloc.h"
#include "xgr/secp.h"

#define GRANT_SCOPE_SESSION 1     /* the only scope xgr has: one session's data */
#define GRANTS_PAGE_DEFAULT 100
#define GRANTS_PAGE_MAX 1000
#define GRANT_ENTRIES_MAX 256     /* entries in one xgr_manageGrants call */
#define ENC_DEK_MAX 4096          /* bytes of one encDEK */

/* rid: the session's rootPid as "0x" + hex (or a decimal string / number); 0 or -32602. */
static int parse_rid(const json_t *v, uint64_t *root, xgr_error *err) {
  const char *s = json_string_value(v);
  if (s && (s[0] == '0') && (s[1] == 'x' || s[1] == 'X')) {
    size_t n = strlen(s + 2);
    char *end;
    unsigned long long x = n && n <= 64 ? strtoull(s + 2, &end, 16) : 0;
    size_t lead = strspn(s + 2, "0");
    if (!n || n > 64 || *end || n - lead > 16 || !x)
      return xgr__rpc_fail(err, XGR_ESCHEMA, "rid", "is \"%.80s\"; expected a session's rootPid (0x + hex, not 0)", s);
    *root = x;
    return 0;
  }
  return xgr__rpc_uint(v, "rid", root, err);
}

/* The session a call names: owner (default who) and sessionId or rid (equal when both are given).
 * root 0 when neither names one (allowed only if !required). */
static int grant_session(const json_t *o, const char *who, bool required, char *owner, size_t n, uint64_t *root,
                         xgr_error *err) {
  const json_t *sv = json_object_get(o, "sessionId"), *rv = json_object_get(o, "rid");
  uint64_t a = 0, b = 0;
  int rc;
  if (sv && !json_is_null(sv) && (rc = xgr__rpc_uint(sv, "sessionId", &a, err))) return rc;
  if (rv && !json_is_null(rv) && (rc = parse_rid(rv, &b, err))) return rc;
  if (a && b && a != b)
    return xgr__rpc_fail(err, XGR_ESCHEMA, "rid", "names session %" PRIu64 " and sessionId %" PRIu64 "; they must agree", b, a);
  *root = a ? a : b;
  if (!*root && required)
    return xgr__rpc_fail(err, XGR_ESCHEMA, "sessionId", "missing; expected the session (sessionId, or rid as 0x-hex)");
  const char *opath;
  owner[0] = '\0';
  const json_t *ov = json_object_get(o, "owner");
  if (!*root && (!ov || json_is_null(ov))) return 0;
  return xgr__rpc_owner(o, who, owner, n, &opath, err);
}

static int check_scope(const json_t *o, xgr_error *err) {
  const json_t *v = json_object_get(o, "scope");
  if (!v || json_is_null(v)) return 0;
  uint64_t sc;
  int rc = xgr__rpc_uint(v, "scope", &sc, err);
  if (rc) return rc;
  if (sc != GRANT_SCOPE_SESSION)
    return xgr__rpc_fail(err, XGR_ESCHEMA, "scope", "is %" PRIu64 "; xgr has one scope, 1 (a session's data)", sc);
  return 0;
}

/* An optional address parameter at path, lowercased into out (empty when absent). */
static int opt_addr(const json_t *o, const char *key, const char *path, char *out, size_t n, xgr_error *err) {
  const char *v;
  int rc = xgr__rpc_opt_str(o, key, &v, err);
  out[0] = '\0';
  if (rc || !v || !*v) return rc;
  if (!xgr_rpc_is_address(v)) return xgr__rpc_fail(err, XGR_ESCHEMA, path, "is \"%.80s\"; expected an address (0x + 40 hex)", v);
  snprintf(out, n, "%s", v);
  xgr__rpc_lower(out);
  return 0;
}

static const char *const manage_keys[] = {"rid", "scope", "owner", "entries", "permit", "refAddr", "sessionId", NULL};
static const char *const entry_keys[] = {"grantee", "rights", "expireAt", "encDEK", "isOwner", NULL};

/* xgr_manageGrants (reference §14): upsert (rights 1..7) or revoke (rights 0) grants on one
 * session, all in one commit with an audit entry each; by the owner, an operator, or a MANAGE
 * holder (who may give at most the rights it holds, until at most its own expiry). */
XGR__RPCD_METHOD(xgr__rpcd_m_manage_grants) {
  xgr_rpcd *d = ctx;
  const json_t *o;
  int rc = xgr__rpc_named(params, manage_keys, &o, err);
  if (rc) return rc;
  if (!o) return xgr__rpc_fail(err, XGR_ESCHEMA, "", "params are missing; expected {owner, sessionId, entries, permit}");
  char who[64] = "", owner[64], ref[64];
  xgr_permit permit;
  if ((rc = xgr_rpc_authorize_permit(caller, o, XGR_RPC_ACT_READ, NULL, who, sizeof who, &permit, err))) return rc;
  uint64_t root;
  if ((rc = check_scope(o, err)) || (rc = grant_session(o, who, true, owner, sizeof owner, &root, err)) ||
      (rc = opt_addr(o, "refAddr", "refAddr", ref, sizeof ref, err)))
    return rc;
  const json_t *es = json_object_get(o, "entries");
  if (!json_is_array(es) || !json_array_size(es))
    return xgr__rpc_fail(err, XGR_ESCHEMA, "entries", "is %s; expected a non-empty array of {grantee, rights, expireAt}",
                         es ? "not a non-empty array" : "missing");
  if (json_array_size(es) > GRANT_ENTRIES_MAX)
    return xgr__rpc_fail(err, XGR_ELIMIT, "entries", "has %zu entries; at most %d go in one call",
                         json_array_size(es), GRANT_ENTRIES_MAX);
  xgr_rpc_log_subject(caller, xgr_rpc_actor(caller, who), owner, root);
  xgr_node_access_info acc;
  if ((rc = xgr_rpc_access(d->n, caller, who, owner, root, XGR_NODE_MANAGE, "permit.message.from", &acc, err))) return rc;
  int64_t now = xgr_node_now(d->n);
  size_t n = json_array_size(es), upserted = 0, revoked = 0;
  xgr_node_grant_change *ch = xgr__xcalloc(n, sizeof *ch);
  char (*grantee)[64] = xgr__xcalloc(n, sizeof *grantee);
  for (size_t i = 0; i < n && !rc; i++) {
    const json_t *e = json_array_get(es, i);
    char at[48];
    snprintf(at, sizeof at, "entries[%zu]", i);
    if ((rc = xgr__rpc_keys(e, at, entry_keys, err))) break;
    if (!json_is_object(e)) {
      rc = xgr__rpc_fail(err, XGR_ESCHEMA, at, "is not an object; expected {grantee, rights, expireAt}");
      break;
    }
    char p[64];
    snprintf(p, sizeof p, "%s.grantee", at);
    if ((rc = opt_addr(e, "grantee", p, grantee[i], sizeof grantee[i], err))) break;
    if (!grantee[i][0]) {
      rc = xgr__rpc_fail(err, XGR_ESCHEMA, p, "missing; expected the grantee's address (0x + 40 hex)");
      break;
    }
    uint64_t rights = 0, exp = 0;
    snprintf(p, sizeof p, "%s.rights", at);
    if ((rc = xgr__rpc_uint(json_object_get(e, "rights"), p, &rights, err))) break;
    if (rights > XGR_STORE_RIGHTS_ALL) {
      rc = xgr__rpc_fail(err, XGR_ESCHEMA, p, "is %" PRIu64 "; expected a bitmask of 1 READ, 2 WRITE, 4 MANAGE (0 revokes)", rights);
      break;
    }
    if (acc.via == XGR_NODE_VIA_GRANT && (rights & ~(uint64_t)acc.rights)) {
      rc = xgr__rpc_fail(err, XGR_EPERM, p, "is %" PRIu64 "; a grantee may give only rights it holds (%u)", rights, acc.rights);
      break;
    }
    snprintf(p, sizeof p, "%s.expireAt", at);
    if (rights) {
      if ((rc = xgr__rpc_uint(json_object_get(e, "expireAt"), p, &exp, err))) break;
      if (exp > (uint64_t)INT64_MAX / 1000 || (int64_t)exp * 1000 <= now) {
        rc = xgr__rpc_fail(err, XGR_ESCHEMA, p, "is %" PRIu64 "; expected a time (seconds) after the node's clock %" PRId64,
                           exp, now / 1000);
        break;
      }
      if (acc.via == XGR_NODE_VIA_GRANT && (int64_t)exp * 1000 > acc.expires_at) {
        rc = xgr__rpc_fail(err, XGR_EPERM, p, "is %" PRIu64 "; a grantee may give access until its own grant's expiry %" PRId64,
                           exp, acc.expires_at / 1000);
        break;
      }
    }
    const char *dek;
    snprintf(p, sizeof p, "%s.encDEK", at);
    if ((rc = xgr__rpc_opt_str(e, "encDEK", &dek, err))) break;
    if (dek && strlen(dek) > ENC_DEK_MAX) {
      rc = xgr__rpc_fail(err, XGR_ELIMIT, p, "has %zu bytes; at most %d are kept", strlen(dek), ENC_DEK_MAX);
      break;
    }
    ch[i] = (xgr_node_grant_change){.grantee = grantee[i], .rights = (uint32_t)rights, .expires_at = (int64_t)exp * 1000,
                                    .enc_dek = dek && *dek ? dek : NULL};
    if (rights) upserted++;
    else revoked++;
  }
  if (!rc) {
    char digest[67] = "";
    if (permit.kind) xgr_hex_encode(permit.digest, 32, digest);
    rc = xgr_node_grants_write(d->n, owner, root, ch, n, xgr_rpc_actor(caller, who), digest[0] ? digest : NULL, err);
    if (rc == XGR_ENOTFOUND)
      xgr_error_set(err, rc, json_object_get(o, "sessionId") ? "sessionId" : "rid", "no session %s/%" PRIu64, owner, root);
    if (rc) rc = xgr__rpc_code(rc, err);
    else xgr__console_grants_changed(d->console);   /* grantees' open event streams decide again now */
  }
  free(ch);
  free(grantee);
  if (rc) return rc;
  *result = json_pack("{s:I, s:I}", "upserted", (json_int_t)upserted, "revoked", (json_int_t)revoked);
  return 0;
}

/* A grant as xgr_listGrants shows it (the reference's item and xgr's additions). */
static json_t *grant_json(const xgr_store_grant *g) {
  char rid[24], sid[24];
  snprintf(rid, sizeof rid, "0x%" PRIx64, g->root_pid);
  snprintf(sid, sizeof sid, "%" PRIu64, g->root_pid);
  json_t *j = json_pack("{s:I, s:s, s:i, s:s, s:s, s:i, s:s, s:I, s:b, s:s, s:s, s:s}", "id", (json_int_t)g->id, "rid",
                        rid, "scope", GRANT_SCOPE_SESSION, "grantee", g->grantee, "owner", g->owner, "rights",
                        (int)g->rights, "encDEK", g->enc_dek ? g->enc_dek : "", "expiresAt",
                        (json_int_t)(g->expires_at / 1000), "isOwner", !strcmp(g->grantee, g->owner), "txHash", "",
                        "refAddr", g->rule ? g->rule : "", "sessionId", sid);
  json_object_set_new(j, "expiresAtMs", json_integer(g->expires_at));
  json_object_set_new(j, "step", g->step ? json_string(g->step) : json_null());
  json_object_set_new(j, "createdBy", json_string(g->created_by ? g->created_by : ""));
  json_object_set_new(j, "createdAt", json_integer(g->created_at));
  return j;
}

static const char *const list_keys[] = {"scope",  "rid",    "refAddr", "validAt", "expireFrom", "expireTo",
                                        "limit",  "cursor", "permit",  "owner",   "sessionId",  "grantee", NULL};

/* Seconds parameter key (optional) as engine-clock ms into *ms (0 when absent). */
static int opt_secs(const json_t *o, const char *key, int64_t *ms, xgr_error *err) {
  const json_t *v = json_object_get(o, key);
  *ms = 0;
  if (!v || json_is_null(v)) return 0;
  uint64_t s;
  int rc = xgr__rpc_uint(v, key, &s, err);
  if (rc) return rc;
  if (s > (uint64_t)INT64_MAX / 1000) return xgr__rpc_fail(err, XGR_ESCHEMA, key, "is %" PRIu64 "; too far (seconds)", s);
  *ms = (int64_t)s * 1000;
  return 0;
}

/* xgr_listGrants (reference §15): the grants the caller may see — of one session (sessionId/rid):
 * all of them for its owner, an operator or a MANAGE holder, the caller's own for another grantee;
 * of every session: the grants to or of the caller (every grant for an operator, and under --auth
 * none without "from"). Filters: refAddr, validAt, expireFrom, expireTo, grantee; paged by id
 * (cursor = the last page's nextCursor; 0 when there is no more). */
XGR__RPCD_METHOD(xgr__rpcd_m_list_grants) {
  xgr_rpcd *d = ctx;
  const json_t *o;
  int rc = xgr__rpc_named(params, list_keys, &o, err);
  if (rc) return rc;
  /* o may be NULL (no params): every reader below takes it as empty */
  char who[64] = "", owner[64], ref[64], grantee[64];
  if ((rc = xgr_rpc_authorize_permit(caller, o, XGR_RPC_ACT_READ, NULL, who, sizeof who, NULL, err))) return rc;
  uint64_t root, limit = GRANTS_PAGE_DEFAULT, cursor = 0;
  int64_t valid_at, from, to;
  if ((rc = check_scope(o, err)) || (rc = grant_session(o, who, false, owner, sizeof owner, &root, err)) ||
      (rc = opt_addr(o, "refAddr", "refAddr", ref, sizeof ref, err)) ||
      (rc = opt_addr(o, "grantee", "grantee", grantee, sizeof grantee, err)) || (rc = opt_secs(o, "validAt", &valid_at, err)) ||
      (rc = opt_secs(o, "expireFrom", &from, err)) || (rc = opt_secs(o, "expireTo", &to, err)) ||
      (rc = xgr_rpc_param_uint(o, "limit", false, &limit, err)) || (rc = xgr_rpc_param_uint(o, "cursor", false, &cursor, err)))
    return rc;
  if (!limit) limit = GRANTS_PAGE_DEFAULT;
  if (limit > GRANTS_PAGE_MAX)
    return xgr__rpc_fail(err, XGR_ELIMIT, "limit", "is %" PRIu64 "; at most %d grants are listed at once", limit, GRANTS_PAGE_MAX);
  if (cursor > INT64_MAX) return xgr__rpc_fail(err, XGR_ESCHEMA, "cursor", "is %" PRIu64 "; not a cursor listGrants gave", cursor);
  xgr_store_grant_filter f = {.after_id = (int64_t)cursor, .limit = (size_t)limit, .rule = ref[0] ? ref : NULL,
                              .grantee = grantee[0] ? grantee : NULL};
  /* validAt: still working then; expireFrom..expireTo: expiry within */
  f.expires_after = valid_at > from - 1 ? valid_at : from ? from - 1 : 0;
  f.expires_until = to;
  bool permits = xgr__rpc_permits(caller);
  bool all = !permits ? !who[0] || owner[0] : xgr_node_is_operator(d->n, who);
  if (owner[0]) {
    f.owner = owner;
    f.root_pid = root;
    if (root && permits) {   /* one session: every grant on it for who may manage it, else one's own */
      xgr_node_access_info acc;
      xgr_error ae;
      rc = xgr_rpc_access(d->n, caller, who, owner, root, XGR_NODE_MANAGE, "permit.message.from", &acc, &ae);
      if (rc == XGR_EPERM) {
        f.grantee = who;
        rc = xgr_rpc_access(d->n, caller, who, owner, root, XGR_NODE_READ, "permit.message.from", NULL, err);
        if (rc == XGR_EPERM) {   /* a grant that expired is still the caller's own to list */
          if (!grantee[0] || !strcmp(grantee, who)) rc = 0, xgr_error_clear(err);
        }
      } else if (rc) {
        *err = ae;
      }
      if (rc) return rc;
      all = true;
    }
  }
  if (!all) f.party = who;   /* the grants to or of the caller */
  xgr_store_grant *g = NULL;
  size_t ng = 0;
  if ((rc = xgr_node_grants(d->n, &f, &g, &ng, err))) return xgr__rpc_code(rc, err);
  json_t *items = json_array();
  for (size_t i = 0; i < ng; i++) json_array_append_new(items, grant_json(&g[i]));
  int64_t next = ng == f.limit ? g[ng - 1].id : 0;
  xgr_node_grants_free(g, ng);
  *result = json_pack("{s:o, s:I}", "items", items, "nextCursor", (json_int_t)next);
  return 0;
}

/* xgr_getGrantFeePerYear (reference §16): xgrd --grant-fee-wei, as 0x-hex wei. */
XGR__RPCD_METHOD(xgr__rpcd_m_grant_fee) {
  xgr_rpcd *d = ctx;
  (void)caller;
  const json_t *o;
  static const char *const keys[] = {NULL};
  int rc = xgr__rpc_named(params, keys, &o, err);
  if (rc) return rc;
  *result = json_pack("{s:s}", "wei", d->cfg.grant_fee_wei && d->cfg.grant_fee_wei[0] ? d->cfg.grant_fee_wei : "0x0");
  return 0;
}
