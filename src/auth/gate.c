/* gate.c — xgrd's permit checks (xgr/auth.h): the configuration, verification of params.permit at
 * the daemon's clock, the bindings of each permit to the call it authorizes, and the single use of
 * control permits (through the configured mark_once). Returns xgr_errcodes only (refusals are
 * XGR_EPERM); the JSON-RPC layer maps them. Owns one secp256k1 context and the digests' constant
 * parts (xgr_permit_hashes), shared read-only by every request thread. */
#include "xgr/auth.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "util/alloc.h"
#include "xgr/secp.h"

struct xgr_auth {
  xgr_auth_config cfg;
  xgr_secp *secp;
  xgr_permit_hashes hashes;   /* the digests' constant parts, computed once */
  uint8_t contract[20];
  char contract_hex[43];
};

xgr_auth *xgr_auth_new(const xgr_auth_config *cfg, xgr_error *err) {
  xgr_auth *a = xgr__xcalloc(1, sizeof *a);
  a->cfg = *cfg;
  if (!a->cfg.chain_id) a->cfg.chain_id = XGR_AUTH_DEFAULT_CHAIN_ID;
  const char *cc = cfg->control_contract ? cfg->control_contract : XGR_AUTH_DEFAULT_CONTROL_CONTRACT;
  if (xgr_hex_decode(cc, a->contract, 20)) {
    xgr_error_set(err, XGR_EINVAL, "control-contract", "\"%.80s\" is not an address (0x + 40 hex digits)", cc);
    free(a);
    return NULL;
  }
  xgr_addr_hex(a->contract, a->contract_hex);
  a->cfg.control_contract = a->contract_hex;
  xgr_permit_hashes_init(&a->hashes, a->cfg.chain_id);
  a->secp = xgr_secp_new();
  if (!a->secp) {
    xgr_error_set(err, XGR_EIO, NULL, "cannot create a secp256k1 context (no randomness from getrandom?)");
    free(a);
    return NULL;
  }
  return a;
}

void xgr_auth_free(xgr_auth *a) {
  if (!a) return;
  xgr_secp_free(a->secp);
  free(a);
}

bool xgr_auth_none(const xgr_auth *a) { return a->cfg.none; }
uint64_t xgr_auth_chain_id(const xgr_auth *a) { return a->cfg.chain_id; }
const char *xgr_auth_control_contract(const xgr_auth *a) { return a->contract_hex; }

static int64_t now_s(const xgr_auth *a) { return a->cfg.now ? a->cfg.now(a->cfg.now_ctx) : (int64_t)time(NULL); }

static int refuse(xgr_error *err, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(xgr_error *err, const char *path, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  xgr_error_vset(err, XGR_EPERM, path, fmt, ap);
  va_end(ap);
  return XGR_EPERM;
}

int xgr_auth_verify(const xgr_auth *a, const json_t *params, const char *key, unsigned kinds, xgr_permit *out,
                    xgr_error *err) {
  const json_t *p = json_is_object(params) ? json_object_get(params, key) : NULL;
  if (!p || json_is_null(p)) {
    char names[96] = "";
    for (unsigned b = 1; b <= XGR_PERMIT_XDALA; b <<= 1)
      if (kinds & b)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? " or " : "",
                 xgr_permit_kind_name((xgr_permit_kind)b));
    return refuse(err, key, "missing; this call needs a signed %s (xgr permit, or the CLI's --key)", names);
  }
  xgr_permit_policy pol = {.chain_id = a->cfg.chain_id, .now = (uint64_t)now_s(a), .accept = kinds, .hashes = &a->hashes};
  memcpy(pol.control_contract, a->contract, 20);
  if (xgr_permit_verify(a->secp, p, &pol, key, out, err)) return XGR_EPERM;   /* err: XGR_EPERM, its path */
  return 0;
}

int xgr_auth_check_session(const xgr_permit *p, uint64_t root, const char *ostc_id, const char *ostc_hash,
                           xgr_error *err) {
  if (p->session_id_big || p->session_id != root)
    return refuse(err, "permit.message.sessionId",
                  "wrong sessionId: the permit is for session %llu%s, this start gets rootPid %llu "
                  "(sign the value xgr_getNextProcessId returns)",
                  (unsigned long long)p->session_id, p->session_id_big ? "+" : "", (unsigned long long)root);
  if (strcmp(p->ostc_id, ostc_id ? ostc_id : ""))
    return refuse(err, "permit.message.ostcId", "the permit is for ostcId \"%s\", the request starts \"%s\"", p->ostc_id,
                  ostc_id ? ostc_id : "");
  uint8_t h[32];
  if (!ostc_hash || xgr_hex_decode(ostc_hash, h, 32) || memcmp(h, p->ostc_hash, 32)) {
    char got[67];
    xgr_hex_encode(p->ostc_hash, 32, got);
    return refuse(err, "permit.message.ostcHash", "the permit is for orchestration %s, the registry holds %s", got,
                  ostc_hash ? ostc_hash : "none");
  }
  return 0;
}

int xgr_auth_check_starter(const xgr_permit *p, const char *reg_owner, const json_t *executors, xgr_error *err) {
  if (!reg_owner || !*reg_owner || !strcasecmp(reg_owner, p->from)) return 0;
  size_t i;
  const json_t *e;
  json_array_foreach(executors, i, e) {
    const char *s = json_string_value(e);
    if (s && !strcasecmp(s, p->from)) return 0;
  }
  return refuse(err, "permit.message.from", "signer %s is not the orchestration's owner %s nor one of its executors",
                p->from, reg_owner);
}

int xgr_auth_check_control(const xgr_permit *p, const char *action, uint64_t root, const char *step_id,
                           const char *owner, xgr_error *err) {
  if (strcmp(p->action, action))
    return refuse(err, "permit.message.action", "wrong action: the permit says \"%s\", this call is \"%s\"", p->action,
                  action);
  if (p->session_id_big || p->session_id != root)
    return refuse(err, "permit.message.sessionId", "wrong sessionId: the permit is for session %llu, this call is on %llu",
                  (unsigned long long)p->session_id, (unsigned long long)root);
  if (step_id) {
    if (strcmp(p->step_id, step_id))
      return refuse(err, "permit.message.stepId", "the permit is for step \"%s\", this step-mode wake is \"%s\"",
                    p->step_id, step_id);
  } else if (p->step_id[0]) {
    return refuse(err, "permit.message.stepId", "must be empty for %s (it is \"%s\"; only a step-mode wake signs a step)",
                  strcmp(action, "wake") ? action : "a PID-mode wake", p->step_id);
  }
  if (owner && strcasecmp(p->runner, owner))
    return refuse(err, p->kind == XGR_PERMIT_CONTROL_V2 ? "permit.message.runner" : "permit.message.from",
                  "%s is not the session's owner %s", p->runner, owner);
  if (strcasecmp(p->from, p->runner) && !(step_id && !strcmp(action, "wake")))
    return refuse(err, "permit.message.from",
                  "signer %s is not the runner %s; delegation through allow lists exists for step-mode wakes only",
                  p->from, p->runner);
  return 0;
}

int xgr_auth_consume(const xgr_auth *a, const xgr_permit *p, xgr_error *err) {
  if (!a->cfg.mark_once) return 0;
  char key[80];
  snprintf(key, sizeof key, "permit:");
  xgr_hex_encode(p->digest, 32, key + 7);
  int64_t exp = p->expiry > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)p->expiry;
  xgr_error e;
  xgr_error_clear(&e);
  int rc = a->cfg.mark_once(a->cfg.mark_ctx, key, exp, now_s(a), &e);
  if (rc == XGR_ECONFLICT)
    return refuse(err, "permit", "already used: a control permit works once (this one was used before; sign a new one)");
  if (rc) {
    assert(rc < 0);
    if (err) *err = e;
    return rc;
  }
  return 0;
}
