/* xgr/auth.h — xgrd's authorization by signed permits (docs/RPC.md "Permits"): the daemon's
 * configuration (mode, chain id, control contract), verification of a request's permit, and the
 * per-method bindings of SEMANTICS.md §9 / issue 16:
 *   - SessionPermit (starts): sessionId = the rootPid the session gets, ostcId and ostcHash = the
 *     orchestration started, signer = the registry's owner or one of its executors;
 *   - ControlPermit / ControlPermitV2 (kill, pause, resume, wake): action = the call's, sessionId =
 *     the root, stepId empty except for a step-mode wake, V2's runner = the session owner and a
 *     signer other than the runner only for a step-mode wake (the allow lists decide); single use:
 *     the digest is marked used (xgr_auth_config.mark_once, durably) until the permit expires;
 *   - xdalaPermit (reads and registry writes): the caller's identity.
 * Every function returns 0 or a negative xgr_errcode (xgr/error.h), never a JSON-RPC code: every
 * refusal is XGR_EPERM with err naming the failed check and its path (the JSON-RPC layer answers
 * it as -32007 through xgr_rpc_code_for). The object is read-only after creation: any thread may
 * use it. The Host-header check against DNS rebinding is the HTTP server's (src/rpc/guard.c).
 */
#ifndef XGR_AUTH_H
#define XGR_AUTH_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "xgr/error.h"
#include "xgr/permit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The defaults xgrd documents (docs/RPC.md): chain id 1887 (0x75f, the endpoint reference's
 * example) and the control contract 0x…0729 (the engine's precompile in xgr_getCoreAddrs). */
#define XGR_AUTH_DEFAULT_CHAIN_ID 1887
#define XGR_AUTH_DEFAULT_CONTROL_CONTRACT "0x0000000000000000000000000000000000000729"

typedef struct xgr_auth_config {
  bool none;                      /* --auth none: no permits (loopback only; the server enforces that) */
  uint64_t chain_id;              /* 0: XGR_AUTH_DEFAULT_CHAIN_ID */
  const char *control_contract;   /* NULL: XGR_AUTH_DEFAULT_CONTROL_CONTRACT */
  /* The single-use marks of control permits: record key (at most 200 bytes) as used until
   * expires_at (Unix seconds), durably, before returning 0; XGR_ECONFLICT when key is recorded
   * and has not expired at now; another negative xgr_errcode (err filled) when it cannot record.
   * xgrd wires it to the store (xgr_store_mark_once), so a mark outlives a restart. NULL: nothing
   * is single-use. Called from request threads concurrently, with mark_ctx. */
  int (*mark_once)(void *mark_ctx, const char *key, int64_t expires_at, int64_t now, xgr_error *err);
  void *mark_ctx;
  int64_t (*now)(void *ctx);      /* Unix seconds; NULL: time(NULL) */
  void *now_ctx;
} xgr_auth_config;

typedef struct xgr_auth xgr_auth;

/* NULL with *err when the control contract is not an address. Free with xgr_auth_free. */
xgr_auth *xgr_auth_new(const xgr_auth_config *cfg, xgr_error *err);
void xgr_auth_free(xgr_auth *a);   /* NULL is fine */

bool xgr_auth_none(const xgr_auth *a);
uint64_t xgr_auth_chain_id(const xgr_auth *a);
/* "0x" + 40 lowercase hex digits. */
const char *xgr_auth_control_contract(const xgr_auth *a);

/* Verify params[key] ("permit", "controlPermit") as one of `kinds` (xgr_permit_kind bits) at the
 * current time. Missing: refused, naming the permit the method needs. */
int xgr_auth_verify(const xgr_auth *a, const json_t *params, const char *key, unsigned kinds, xgr_permit *out,
                    xgr_error *err);

/* A SessionPermit for a start: sessionId == root, ostcId == ostc_id ("" when the request names
 * none), ostcHash == ostc_hash ("0x" + 64 hex of the orchestration that will run). */
int xgr_auth_check_session(const xgr_permit *p, uint64_t root, const char *ostc_id, const char *ostc_hash,
                           xgr_error *err);

/* The signer may start sessions of a registry whose owner is reg_owner (lowercase address; "" or
 * NULL: unowned, anyone) and whose executors are listed in `executors` (a JSON array of addresses
 * or NULL). */
int xgr_auth_check_starter(const xgr_permit *p, const char *reg_owner, const json_t *executors, xgr_error *err);

/* A control permit for `action` ("kill", "pause", "resume", "wake") on session root. step_id: the
 * step of a step-mode wake, NULL otherwise (then the signed stepId must be empty). owner: the
 * session's owner = ControlPermit's signer / V2's runner. V2 with from != runner is accepted only for
 * a step-mode wake (the allow lists decide who may). */
int xgr_auth_check_control(const xgr_permit *p, const char *action, uint64_t root, const char *step_id,
                           const char *owner, xgr_error *err);

/* Use a control permit up: mark "permit:0x" + its digest (64 lowercase hex digits) through
 * cfg.mark_once until its expiry. A second use is refused with XGR_EPERM at "permit" ("already
 * used"), also after a restart; a mark that cannot be recorded returns mark_once's code and err. */
int xgr_auth_consume(const xgr_auth *a, const xgr_permit *p, xgr_error *err);

#ifdef __cplusplus
}
#endif
#endif
