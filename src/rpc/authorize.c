/* authorize.c — who the caller of a JSON-RPC method is and whether it may act (see xgr/rpc.h).
 *
 * xgr_rpc_authorize_permit is the one place that decides: with signed permits (--auth permits)
 * the permit the action needs is verified (xgr_auth_verify: the session permit for a start, a
 * control permit for control calls and wake-ups, an XDaLa permit for the rest) and its signer is
 * the caller — or the caller is the address a console sign-in proved (caller->signed_in) — who
 * must be the owner a start or control call names (identify, then decide); with --auth none (loopback
 * only) the caller is whoever `from` (or `owner`) names, and only the owner may start or control
 * its sessions. Also the address syntax and the caller a request claims to be (for logs and
 * errors before verification). Pure functions of their arguments: no server state — except
 * xgr_rpc_access, which hands the signer to the node's access decision (xgr_node_access).
 */
#include "xgr/rpc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "xgr/auth.h"
#include "xgr/json.h"
#include "xgr/node.h"

bool xgr_rpc_is_address(const char *s) {
  if (!s || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || strlen(s) != 42) return false;
  for (size_t i = 2; i < 42; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') || (s[i] >= 'A' && s[i] <= 'F'))) return false;
  return true;
}

const char *xgr_rpc_actor(const xgr_rpc_caller *c, const char *who) {
  if (c && c->auth_none) return "auth-none";
  return who && who[0] ? who : "-";
}

void xgr_rpc_log_subject(const xgr_rpc_caller *c, const char *actor, const char *owner, uint64_t root) {
  if (!c || !c->subject) return;
  snprintf(c->subject->actor, sizeof c->subject->actor, "%s", actor ? actor : "-");
  snprintf(c->subject->owner, sizeof c->subject->owner, "%s", owner ? owner : "");
  c->subject->root = root;
}

const char *xgr_rpc_claimed(const xgr_rpc_caller *c, const json_t *params) {
  if (!json_is_object(params)) return NULL;
  const char *f = xgr_json_text(json_object_get(params, "from"));
  if (f || !c || c->auth_none) return f;
  if (c->signed_in) return c->signed_in;
  const json_t *m = json_object_get(json_object_get(params, "permit"), "message");
  const char *r = xgr_json_text(json_object_get(m, "runner"));
  return r ? r : xgr_json_text(json_object_get(m, "from"));
}

/* Permit mode, step 1: who the caller is. A console sign-in (c->signed_in) is that address, with no
 * permit (p->kind 0); otherwise the permit the action needs is verified and its signer is the caller. */
static int identify(const xgr_rpc_caller *c, const json_t *params, xgr_rpc_action act, char *who, size_t n,
                    xgr_permit *p, xgr_error *err) {
  if (c->signed_in) {
    memset(p, 0, sizeof *p);
    snprintf(p->from, sizeof p->from, "%s", c->signed_in);
    snprintf(p->runner, sizeof p->runner, "%s", c->signed_in);
    if (n) snprintf(who, n, "%s", c->signed_in);
    return 0;
  }
  unsigned kinds = act == XGR_RPC_ACT_START                                 ? XGR_PERMIT_SESSION
                   : act == XGR_RPC_ACT_CONTROL || act == XGR_RPC_ACT_WAKE ? XGR_PERMIT_ANY_CONTROL
                                                                            : XGR_PERMIT_XDALA;
  int rc = xgr_auth_verify(c->auth, params, "permit", kinds, p, err);
  if (rc) return rc;
  if (n) snprintf(who, n, "%s", p->from);
  return 0;
}

/* Permit mode, step 2: may the identified caller (p->from, acting for p->runner) do act on owner's
 * sessions? The one decision for permits and console sign-ins alike (a signed-in caller's control
 * of another owner's session is the node's to decide: xgr__rpc_control_caller passes no owner). */
static int decide(const xgr_permit *p, xgr_rpc_action act, const char *owner, xgr_error *err) {
  if (act == XGR_RPC_ACT_START && owner && strcasecmp(owner, p->from)) {
    xgr_error_set(err, XGR_EPERM, p->kind ? "permit.message.from" : "owner",
                  "signer %s is not the owner %s the request names", p->from, owner);
    return XGR_EPERM;
  }
  if (act == XGR_RPC_ACT_CONTROL && owner && strcasecmp(owner, p->runner)) {
    xgr_error_set(err, XGR_EPERM,
                  !p->kind ? "owner" : p->kind == XGR_PERMIT_CONTROL_V2 ? "permit.message.runner" : "permit.message.from",
                  "%s is not the session's owner %s", p->runner, owner);
    return XGR_EPERM;
  }
  return 0;
}

static int authorize_permit(const xgr_rpc_caller *c, const json_t *params, xgr_rpc_action act, const char *owner,
                            char *who, size_t n, xgr_permit *p, xgr_error *err) {
  int rc = identify(c, params, act, who, n, p, err);
  return rc ? rc : decide(p, act, owner, err);
}

int xgr_rpc_authorize(const xgr_rpc_caller *c, const json_t *params, xgr_rpc_action act, const char *owner,
                      char *who, size_t n, xgr_error *err) {
  xgr_permit p;
  return xgr_rpc_authorize_permit(c, params, act, owner, who, n, &p, err);
}

/* The one place that decides who the caller is and whether it may act (see xgr/rpc.h). */
int xgr_rpc_authorize_permit(const xgr_rpc_caller *c, const json_t *params, xgr_rpc_action act, const char *owner,
                             char *who, size_t n, xgr_permit *p, xgr_error *err) {
  if (n) who[0] = '\0';
  xgr_permit local;
  if (!p) p = &local;
  p->kind = 0;
  if (c && !c->auth_none && (c->auth || c->signed_in)) return authorize_permit(c, params, act, owner, who, n, p, err);
  if (!c || !c->auth_none) {
    xgr_error_set(err, XGR_EPERM, "permit", "xgrd has no authorization configured (--auth permits or --auth none)");
    return XGR_EPERM;
  }
  const char *key = "from";
  const json_t *v = json_is_object(params) ? json_object_get(params, "from") : NULL;
  if (!v || json_is_null(v)) {
    key = "owner";
    v = json_is_object(params) ? json_object_get(params, "owner") : NULL;
  }
  const char *id = NULL;
  if (v && !json_is_null(v)) {
    if (!json_is_string(v) || !xgr_rpc_is_address(json_string_value(v))) {
      char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
      xgr_error_set(err, XGR_ESCHEMA, key, "is %.60s; expected an address (0x + 40 hex)", t ? t : "?");
      free(t);
      return XGR_ESCHEMA;
    }
    id = json_string_value(v);
  } else if (owner) {
    id = owner;
  }
  if (id && n > 42) {
    snprintf(who, n, "%s", id);
    for (char *q = who; *q; q++)
      if (*q >= 'A' && *q <= 'Z') *q = (char)(*q - 'A' + 'a');
  }
  switch (act) {
    case XGR_RPC_ACT_START:
    case XGR_RPC_ACT_CONTROL:
      if (owner && who[0] && strcasecmp(who, owner)) {
        xgr_error_set(err, XGR_EPERM, key, "%s may not %s sessions of %s (only the owner may)", who,
                      act == XGR_RPC_ACT_START ? "start" : "control", owner);
        return XGR_EPERM;
      }
      return 0;
    case XGR_RPC_ACT_READ:
    case XGR_RPC_ACT_WAKE:
    case XGR_RPC_ACT_REGISTER:
    default:
      return 0;
  }
}

int xgr_rpc_access(struct xgr_node *n, const xgr_rpc_caller *c, const char *who, const char *owner, uint64_t root,
                   unsigned rights, const char *path, struct xgr_node_access_info *info, xgr_error *err) {
  xgr_node_access_info local;
  if (!info) info = &local;
  memset(info, 0, sizeof *info);
  if (c && c->auth_none) {   /* loopback development: open */
    info->rights = 7;
    return 0;
  }
  return xgr_node_access(n, who, owner, root, rights, path, info, err);
}

const char *xgr_rpc_access_name(const struct xgr_node_access_info *info) {
  return info->via == XGR_NODE_VIA_NONE ? "open" : xgr_node_via_name(info->via);
}
