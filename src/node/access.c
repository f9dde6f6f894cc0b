/* access.c — who may read and act on a session (xgr/node.h, "Access"), decided here once for every
 * front end: the owner, the operators configured on the node, and holders of unexpired grants
 * (session_grants, xgr/store.h). Also writing grants as xgr_manageGrants asks (one commit with
 * their audit entries) and reading them. A grant is checked against the node's engine clock at
 * every call, so it stops working at its expiry without a restart and without a sweeper.
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "node/node_impl.h"

const char *xgr_node_via_name(xgr_node_via v) {
  switch (v) {
    case XGR_NODE_VIA_OWNER: return "owner";
    case XGR_NODE_VIA_OPERATOR: return "operator";
    case XGR_NODE_VIA_GRANT: return "grant";
    default: return "none";
  }
}

bool xgr_node_is_operator(xgr_node *n, const char *addr) {
  if (!addr || !addr[0]) return false;
  for (size_t i = 0; i < n->cfg.noperators; i++)
    if (!strcasecmp(n->cfg.operators[i], addr)) return true;
  return false;
}

int64_t xgr_node_now(xgr_node *n) { return xgr_engine_now(n->e); }

uint64_t xgr_node_grants_generation(xgr_node *n) { return xgr_store_grants_generation(n->st); }

static const char *right_names(unsigned rights, char *buf, size_t n) {
  buf[0] = '\0';
  static const char *const names[] = {"READ", "WRITE", "MANAGE", "CONTROL"};
  for (unsigned b = 0; b < 4; b++)
    if (rights & (1u << b)) snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", buf[0] ? "+" : "", names[b]);
  return buf;
}

static void count(xgr_counter *c) {
  if (c) xgr_counter_add(c, 1);
}

int xgr_node_access(xgr_node *n, const char *caller, const char *owner, uint64_t root, unsigned rights,
                    const char *path, xgr_node_access_info *info, xgr_error *err) {
  assert(n && owner && rights);
  xgr_node_access_info local;
  if (!info) info = &local;
  memset(info, 0, sizeof *info);
  char want[64];
  if (!caller || !caller[0]) {
    count(n->access_denied);
    return xgr_error_set(err, XGR_EPERM, path, "no caller: %s on %s/%llu needs a signed permit",
                         right_names(rights, want, sizeof want), owner, (unsigned long long)root);
  }
  if (!strcasecmp(caller, owner)) {
    info->via = XGR_NODE_VIA_OWNER;
    info->rights = XGR_STORE_RIGHTS_ALL;
    return 0;
  }
  if (xgr_node_is_operator(n, caller)) {
    info->via = XGR_NODE_VIA_OPERATOR;
    info->rights = XGR_STORE_RIGHTS_ALL;
    return 0;
  }
  if (rights & XGR_NODE_CONTROL) {
    count(n->access_denied);
    return xgr_error_set(err, XGR_EPERM, path,
                         "%s may not control (kill, pause, resume, retry, fork) the session %s/%llu: only its "
                         "owner and xgrd's operators may", caller, owner, (unsigned long long)root);
  }
  char who[64];
  snprintf(who, sizeof who, "%s", caller);
  for (char *c = who; *c; c++)
    if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
  xgr_store_grant_filter f = {.owner = owner, .root_pid = root, .grantee = who, .limit = 1};
  xgr_store_grant *g = NULL;
  size_t ng = 0;
  int rc = xgr_store_grants(n->st, &f, &g, &ng, err);
  if (rc) return rc;
  int64_t now = xgr_node_now(n);
  bool has = ng == 1 && g[0].root_pid == root;
  bool live = has && g[0].expires_at > now;
  uint32_t held = live ? g[0].rights : 0;
  int64_t exp = has ? g[0].expires_at : 0;
  xgr_store_grants_free(g, ng);
  if (live && (held & rights) == rights) {
    info->via = XGR_NODE_VIA_GRANT;
    info->rights = held;
    info->expires_at = exp;
    count(n->access_grant);
    return 0;
  }
  count(n->access_denied);
  char have[64];
  if (has && !live)
    return xgr_error_set(err, XGR_EPERM, path, "%s's grant on %s/%llu expired at %lld (the node's clock is %lld)",
                         who, owner, (unsigned long long)root, (long long)exp, (long long)now);
  if (has)
    return xgr_error_set(err, XGR_EPERM, path, "%s holds %s on %s/%llu; %s needs %s", who,
                         right_names(held, have, sizeof have), owner, (unsigned long long)root,
                         right_names(rights, want, sizeof want), want);
  if (!root)   /* every session of owner: no grant opens them all */
    return xgr_error_set(err, XGR_EPERM, path,
                         "%s may not read the sessions of %s (only the owner and xgrd's operators may; a grant opens "
                         "one session)", who, owner);
  const char *verb = rights & XGR_NODE_MANAGE ? "manage the grants of" : rights & XGR_NODE_WRITE ? "wake" : "read";
  return xgr_error_set(err, XGR_EPERM, path,
                       "%s may not %s the sessions of %s (session %llu): not the owner, not an operator, no grant "
                       "with %s on it", who, verb, owner, (unsigned long long)root,
                       right_names(rights, want, sizeof want));
}

int xgr_node_grants_write(xgr_node *n, const char *owner, uint64_t root, const xgr_node_grant_change *ch, size_t nch,
                          const char *actor, const char *permit, xgr_error *err) {
  assert(n && owner && actor);
  xgr_store_session row;
  int rc = xgr_store_session_get(n->st, owner, root, &row, err);
  if (rc) return rc;
  xgr_store_session_clear(&row);
  int64_t now = xgr_node_now(n);
  xgr_store_changes *b = xgr_store_changes_new();
  for (size_t i = 0; i < nch; i++) {
    const xgr_node_grant_change *c = &ch[i];
    xgr_store_grant g = {.owner = (char *)owner, .root_pid = root, .grantee = (char *)c->grantee,
                         .rights = c->rights, .expires_at = c->expires_at, .enc_dek = (char *)c->enc_dek,
                         .created_by = (char *)actor};
    xgr_store_changes_grant(b, &g);
    char detail[256];
    snprintf(detail, sizeof detail, "{\"grantee\":\"%.42s\",\"rights\":%u,\"expiresAt\":%lld,\"source\":\"manageGrants\"}",
             c->grantee, c->rights, (long long)c->expires_at);
    xgr_store_audit a = {.kind = c->rights ? "grant" : "revoke", .actor = (char *)actor, .node = n->name,
                         .permit = (char *)permit, .detail = detail, .session_at = now};
    xgr_store_changes_audit_unfenced(b, owner, root, &a);   /* any cluster node may write grants */
  }
  return xgr_store_commit(n->st, b, err);
}

int xgr_node_grants(xgr_node *n, const xgr_store_grant_filter *f, xgr_store_grant **out, size_t *count_,
                    xgr_error *err) {
  return xgr_store_grants(n->st, f, out, count_, err);
}
