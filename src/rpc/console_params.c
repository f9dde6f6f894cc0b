/* console_params.c — the parameter rules the console's read methods share (console_impl.h):
 * optional strings and unsigned integers with their bounds, the owner a call reads (authorized for
 * READ: one reads one's own sessions, as with xgr.listSessions), and the status names the pages
 * show (a waiting process or a running session that is paused reads "paused").
 */
#include "rpc/console_impl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "xgr/session.h"

int xgr__console_bad(xgr_error *err, const char *path, const char *fmt, const char *v) {
  xgr_error_set(err, XGR_ESCHEMA, path, fmt, v);
  return XGR_ESCHEMA;
}

/* Optional string parameter of at most max bytes. */
int xgr__console_opt_str(const json_t *o, const char *key, size_t max, const char **out, xgr_error *err) {
  *out = NULL;
  const json_t *v = json_object_get(o, key);
  if (!v || json_is_null(v)) return 0;
  if (!json_is_string(v)) return xgr__console_bad(err, key, "is not a string; expected %s", "a string");
  if (json_string_length(v) > max) {
    xgr_error_set(err, XGR_ELIMIT, key, "is %zu bytes long; expected at most %zu", json_string_length(v), max);
    return XGR_ELIMIT;
  }
  *out = json_string_value(v);
  return 0;
}

/* Optional unsigned parameter (a number or its decimal string) in [0, max]. */
int xgr__console_opt_uint(const json_t *o, const char *key, uint64_t max, uint64_t dflt, uint64_t *out, xgr_error *err) {
  *out = dflt;
  const json_t *v = json_object_get(o, key);
  if (!v || json_is_null(v)) return 0;
  uint64_t u = 0;
  bool ok = false;
  if (json_is_integer(v) && json_integer_value(v) >= 0) {
    u = (uint64_t)json_integer_value(v);
    ok = true;
  } else if (json_is_string(v)) {
    const char *s = json_string_value(v);
    char *end;
    if (*s >= '0' && *s <= '9') {
      u = strtoull(s, &end, 10);
      ok = !*end;
    }
  }
  if (!ok) {
    char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    xgr_error_set(err, XGR_ESCHEMA, key, "is %.60s; expected a non-negative integer", t ? t : "?");
    free(t);
    return XGR_ESCHEMA;
  }
  if (u > max) {
    xgr_error_set(err, XGR_ELIMIT, key, "is %" PRIu64 "; expected at most %" PRIu64, u, max);
    return XGR_ELIMIT;
  }
  *out = u;
  return 0;
}

/* The owner the call reads: `owner` (or `from`), authorized, its access decided by the node. */
int xgr__console_read_owner(xgr__console *c, const xgr_rpc_caller *caller, const json_t *o, uint64_t root, char *owner,
                            size_t n, xgr_node_access_info *info, xgr_error *err) {
  return xgr__console_read_owner_permit(c, caller, o, root, owner, n, NULL, info, NULL, err);
}

int xgr__console_read_owner_permit(xgr__console *c, const xgr_rpc_caller *caller, const json_t *o, uint64_t root,
                                   char *owner, size_t n, xgr_permit *p, xgr_node_access_info *info, char *who_out,
                                   xgr_error *err) {
  if (who_out) who_out[0] = '\0';
  const char *v;
  int rc = xgr__console_opt_str(o, "owner", 64, &v, err);
  if (rc) return rc;
  if (!v && (rc = xgr__console_opt_str(o, "from", 64, &v, err))) return rc;
  if (!v) return xgr__console_bad(err, "owner", "missing; expected %s", "the owner's address (0x + 40 hex)");
  if (!xgr_rpc_is_address(v)) return xgr__console_bad(err, "owner", "is \"%.80s\"; expected an address (0x + 40 hex)", v);
  snprintf(owner, n, "%s", v);
  xgr__rpc_lower(owner);
  char who[64];
  rc = xgr_rpc_authorize_permit(caller, o, XGR_RPC_ACT_READ, owner, who, sizeof who, p, err);
  if (rc) return rc;
  if (who_out) snprintf(who_out, 64, "%s", who);
  if (caller && caller->auth_none && who[0] && strcasecmp(who, owner)) {   /* --auth none: `from` reads its own */
    xgr_error_set(err, XGR_EPERM, "from", "%s may not read the sessions of %s (only the owner may)", who, owner);
    return XGR_EPERM;
  }
  /* the same decision as JSON-RPC's (root 0 matches no grant: the owner or an operator) */
  return xgr_rpc_access(c->n, caller, who, owner, root, XGR_NODE_READ, "permit.message.from", info, err);
}

int xgr__console_named(const json_t *params, const char *const *known, const json_t **o, xgr_error *err) {
  int rc = xgr__rpc_named(params, known, o, err);
  if (rc) return rc;
  if (!*o) return xgr__console_bad(err, "", "%s", "params are missing; expected an object");
  return 0;
}

