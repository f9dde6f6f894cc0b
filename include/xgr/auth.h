/* xgr/auth.h — xgrd's authorization by signed permits (docs/RPC.md "Permits"): the daemon's
 * configuration (mode, chain id, control contract), verification of a request's permit, and the
 * per-method bindings of SEMANTICS.md §9 / issue 16:
 *   - SessionPermit (starts): sessionId = the rootPid the session gets, ostcId and ostcHash = the
 *     orchestration started, signer = the registry's owner or one of its executors;
 *   - ControlPermit / ControlPermitV2 (kill, pause, resume, wake): action = the call's, sessionId =
 *     the root, stepId empty except for a step-mode wake, V2's runner = the session owner and a
 *     signer other than the runner only for a step-mode wake (the allow lists decide); single use:
 *     the digest is kept in the store until the permit expires;
 *   - xdalaPermit (reads and registry writes): the caller's identity.
 * Every refusal is XGR_RPC_NOT_PERMITTED (-32007) with err naming the failed check and its path.
 * The object is read-only after creation: any thread may use it.
 */
#ifndef XGR_AUTH_H
#define XGR_AUTH_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "xgr/error.h"
#include "xgr/permit.h"
#include "xgr/store.h"

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
  xgr_store *store;               /* single-use marks; borrowed, may be NULL (then nothing is single-use) */
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

/* Use a control permit up: record its digest in the store until its expiry. A second use is
 * refused ("already used"), also after a restart. */
int xgr_auth_consume(const xgr_auth *a, const xgr_permit *p, xgr_error *err);

/* DNS rebinding: may a request with this Host header reach a server listening on listen_host:port?
 * A server on a loopback address accepts only localhost, 127.x.y.z and [::1]; one on a specific
 * address only that address; one on 0.0.0.0 or :: any host. A Host header with a port must name
 * the listening port. host NULL (HTTP/1.0 without Host) is accepted. */
bool xgr_auth_host_ok(const char *host, const char *listen_host, unsigned port);

#ifdef __cplusplus
}
#endif
#endif
