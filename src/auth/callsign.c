/* callsign.c — a client signs the permit a JSON-RPC call needs (xgr_permit_sign_call in
 * xgr/permit.h): the method decides the kind; the request's parameters (and, through callbacks,
 * xgrd) give what the permit binds. Shared by the CLI's --key and the daemon tests. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "xgr/permit.h"

xgr_permit_kind xgr_permit_kind_for_method(const char *method) {
  static const struct {
    const char *name;
    xgr_permit_kind kind;
  } tab[] = {
      {"enqueue", XGR_PERMIT_SESSION},        {"validateDataTransfer", XGR_PERMIT_SESSION},
      {"kill", XGR_PERMIT_CONTROL},           {"pause", XGR_PERMIT_CONTROL},
      {"resume", XGR_PERMIT_CONTROL},         {"control", XGR_PERMIT_CONTROL},
      {"retry", XGR_PERMIT_CONTROL},          {"fork", XGR_PERMIT_CONTROL},
      {"wakeUpProcess", XGR_PERMIT_CONTROL},  {"wake", XGR_PERMIT_CONTROL},
      {"listSessions", XGR_PERMIT_XDALA},     {"getSession", XGR_PERMIT_XDALA},
      {"putOrchestration", XGR_PERMIT_XDALA}, {"putRule", XGR_PERMIT_XDALA},
      /* batch operations: a control permit names one session, so they take an XDaLa permit */
      {"batchPreview", XGR_PERMIT_XDALA},     {"batchStart", XGR_PERMIT_XDALA},
      {"batchGet", XGR_PERMIT_XDALA},         {"batchCancel", XGR_PERMIT_XDALA},
      {"batchList", XGR_PERMIT_XDALA},
      /* grants (docs/RPC.md "Grants"): an xdalaPermit of the owner, an operator or a MANAGE holder */
      {"manageGrants", XGR_PERMIT_XDALA},     {"listGrants", XGR_PERMIT_XDALA},
      {"liveSessions", XGR_PERMIT_XDALA},     /* migrate-check --url: reads the stored records of live sessions */
      {"listVersions", XGR_PERMIT_XDALA},     {"migrateSessions", XGR_PERMIT_CONTROL},
  };
  if (strncmp(method, "xgr", 3) || (method[3] != '.' && method[3] != '_')) return 0;
  for (size_t i = 0; i < sizeof tab / sizeof *tab; i++)
    if (!strcmp(method + 4, tab[i].name)) return tab[i].kind;
  return 0;
}

static int parse_u64(const char *s, uint64_t *out) {
  if (!s || !*s || *s == '-') return -1;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end) return -1;
  *out = v;
  return 0;
}

int xgr_permit_root_of(const json_t *v, uint64_t *root) {
  if (json_is_integer(v) && json_integer_value(v) >= 0) {
    *root = (uint64_t)json_integer_value(v);
    return 0;
  }
  const char *s = json_string_value(v);
  if (!s) return -1;
  char buf[32];
  size_t n = strcspn(s, ":");
  if (!n || n >= sizeof buf) return -1;
  memcpy(buf, s, n);
  buf[n] = 0;
  return parse_u64(buf, root);
}

static const json_t *first_of(const json_t *o, const char *const *keys, const char **which) {
  for (; *keys; keys++) {
    const json_t *v = json_object_get(o, *keys);
    if (v && !json_is_null(v)) {
      if (which) *which = *keys;
      return v;
    }
  }
  return NULL;
}

int xgr_permit_sign_call(const xgr_secp *ctx, const uint8_t key[32], const char *method, json_t *params,
                         const xgr_permit_call *info, xgr_error *err) {
  xgr_permit_kind kind = xgr_permit_kind_for_method(method);
  if (!kind || !json_is_object(params) || json_object_get(params, "permit") || json_object_get(params, "controlPermit"))
    return 0;
  uint8_t a[20];
  int rc = xgr_secp_address(ctx, key, a, err);
  if (rc) return rc;
  char me[43];
  xgr_addr_hex(a, me);
  xgr_permit_fields f = {.kind = kind, .chain_id = info->chain_id, .verifying_contract = info->control_contract,
                         .expiry = info->expiry, .max_total_gas = info->max_total_gas};
  uint8_t hash[32];
  const char *m = method + 4;
  if (kind == XGR_PERMIT_SESSION) {
    static const char *const root_keys[] = {"rootPid", "sessionId", NULL};
    const char *which = NULL;
    const json_t *rv = first_of(params, root_keys, &which);
    if (rv) {
      if (xgr_permit_root_of(rv, &f.session_id))
        return xgr_error_set(err, XGR_EINVAL, which, "a rootPid must be a number to be signed");
    } else {
      if (!info->next_pid) return xgr_error_set(err, XGR_EINVAL, "rootPid", "no rootPid to sign");
      if ((rc = info->next_pid(info->ctx, me, &f.session_id, err))) return rc;
      char b[24];
      snprintf(b, sizeof b, "%llu", (unsigned long long)f.session_id);
      json_object_set_new(params, strcmp(m, "validateDataTransfer") ? "rootPid" : "sessionId", json_string(b));
    }
    const char *id = json_string_value(json_object_get(params, "ostcId"));
    f.ostc_id = id ? id : "";
    const char *h = json_string_value(json_object_get(params, "ostcHash"));
    if (h) {
      if (xgr_hex_decode(h, hash, 32))
        return xgr_error_set(err, XGR_EINVAL, "ostcHash", "expected 0x + 64 hex digits");
    } else {
      if (!info->ostc_hash) return xgr_error_set(err, XGR_EINVAL, "ostcHash", "no orchestration hash to sign");
      if ((rc = info->ostc_hash(info->ctx, params, hash, err))) return rc;
    }
    f.ostc_hash = hash;
  } else if (kind == XGR_PERMIT_CONTROL) {
    static const char *const pid_keys[] = {"pid", "processId", "rootPid", "sessionId", NULL};
    const char *which = "pid";
    const json_t *pv = first_of(params, pid_keys, &which);
    bool migrate = !strcmp(m, "migrateSessions");   /* a ControlPermit migrates one session, action "migrate" */
    const json_t *sv = json_object_get(params, "sessions");
    if (migrate && !pv && json_array_size(sv) == 1) pv = json_array_get(sv, 0), which = "sessions[0]";
    if (migrate && !pv)
      return xgr_error_set(err, XGR_EINVAL, "sessions", "a control permit migrates one session: name exactly one");
    if (!pv || xgr_permit_root_of(pv, &f.session_id))
      return xgr_error_set(err, XGR_EINVAL, which, "no session id to sign a control permit for");
    bool wake = !strcmp(m, "wakeUpProcess") || !strcmp(m, "wake");
    if (wake) {
      f.action = "wake";
      bool pid_mode = json_object_get(params, "processId") || json_object_get(params, "pid");
      const char *st = json_string_value(json_object_get(params, "stepId"));
      f.step_id = pid_mode || !st ? "" : st;
    } else if (!strcmp(m, "control")) {
      const char *act = json_string_value(json_object_get(params, "action"));
      f.action = act ? act : "kill";
      f.step_id = "";
    } else {
      f.action = migrate ? "migrate" : m;
      f.step_id = "";
    }
    const char *ov = json_string_value(json_object_get(params, "owner"));
    if (!ov) ov = json_string_value(json_object_get(params, "runner"));
    if (ov && strcasecmp(ov, me)) {
      f.kind = XGR_PERMIT_CONTROL_V2;
      f.runner = ov;
    }
  }
  json_t *p;
  if ((rc = xgr_permit_sign(ctx, key, &f, &p, err))) return rc;
  json_object_set_new(params, "permit", p);
  return 0;
}
