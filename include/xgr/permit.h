/* xgr/permit.h — XDaLa permits: parse, verify and sign the EIP-712 permits of SEMANTICS.md §9
 * (SessionPermit, ControlPermit, ControlPermitV2, xdalaPermit).
 *
 * A permit is JSON {domain, types, primaryType, message, signature}. Verification checks, in this
 * order, and refuses with XGR_EPERM and the field path of the first check that fails:
 *   - shape: exactly those five keys; primaryType one of the kinds the caller accepts;
 *   - types: exactly EIP712Domain and the primary type, each with exactly the specified fields in
 *     the specified order and types (the older ControlPermit without stepId is accepted for kill,
 *     pause and resume only);
 *   - domain: exactly the fields EIP712Domain lists; SessionPermit's name "XDaLa SessionPermit" and
 *     version "1", the others non-empty; chainId equal to the policy's; a control permit's
 *     verifyingContract equal to the policy's control contract;
 *   - message: every field well-formed for its type (EIP-712 value rules, xgr/eip712.h); action in
 *     pause/resume/kill/wake; expiry later than the policy's clock;
 *   - signature: "0x" + 130 hex digits, v in {27, 28, 0, 1}, low s, and the address recovered from
 *     the EIP-712 digest equal to message.from.
 * What a call may do with a verified permit (owner, sessionId, action, single use) is the daemon's
 * decision; this module only says who signed what.
 *
 * Signing builds the same JSON for the signer's key (the CLI's `xgr permit` and `--key`).
 * No global state; the secp context is the caller's.
 */
#ifndef XGR_PERMIT_H
#define XGR_PERMIT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xgr/error.h"
#include "xgr/secp.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum xgr_permit_kind {
  XGR_PERMIT_SESSION = 1,      /* "SessionPermit" */
  XGR_PERMIT_CONTROL = 2,      /* "ControlPermit" */
  XGR_PERMIT_CONTROL_V2 = 4,   /* "ControlPermitV2" */
  XGR_PERMIT_XDALA = 8,        /* "xdalaPermit" */
} xgr_permit_kind;

#define XGR_PERMIT_ANY_CONTROL (XGR_PERMIT_CONTROL | XGR_PERMIT_CONTROL_V2)

#define XGR_PERMIT_MAX_BYTES (16 * 1024)   /* a permit's JSON text */
#define XGR_PERMIT_MAX_STR 128             /* ostcId, stepId, domain name and version */
#define XGR_PERMIT_SESSION_NAME "XDaLa SessionPermit"
#define XGR_PERMIT_DEFAULT_CONTROL_NAME "XDaLa ControlPermit"
#define XGR_PERMIT_DEFAULT_XDALA_NAME "XDaLa Permit"

/* primaryType name of a kind ("SessionPermit"); NULL for anything else. */
const char *xgr_permit_kind_name(xgr_permit_kind k);

/* The constant parts of the EIP-712 digests, computed once (xgr_permit_hashes_init) by a verifier
 * that checks many permits (xgrd does it once at start): the type hash of every permit struct and
 * of both domain shapes, and the whole SessionPermit domain separator (its name, version and
 * chainId are fixed, so it is one value per chain). Plain data; no pointers. */
typedef struct xgr_permit_hashes {
  uint64_t chain_id;   /* the chain session_domain is for */
  uint8_t session[32], control[32], control_legacy[32], control_v2[32], xdala[32];   /* type hashes */
  uint8_t domain3[32], domain4[32];   /* EIP712Domain(name, version, chainId[, verifyingContract]) */
  uint8_t session_domain[32];         /* domain separator of a SessionPermit on chain_id */
} xgr_permit_hashes;

/* Fill h for chain_id. */
void xgr_permit_hashes_init(xgr_permit_hashes *h, uint64_t chain_id);

/* What the verifier compares against. */
typedef struct xgr_permit_policy {
  uint64_t chain_id;              /* domain.chainId must equal this */
  uint8_t control_contract[20];   /* control permits' domain.verifyingContract */
  uint64_t now;                   /* Unix seconds; expiry must be later */
  unsigned accept;                /* bit set of xgr_permit_kind accepted by the call */
  const xgr_permit_hashes *hashes;   /* borrowed; NULL (or another chain's): computed per call */
} xgr_permit_policy;

/* A verified permit's content. Strings are copies (bounded, NUL-terminated). */
typedef struct xgr_permit {
  xgr_permit_kind kind;
  bool legacy;                        /* ControlPermit without stepId */
  char from[43];                      /* signer = message.from, lowercase 0x-hex */
  char runner[43];                    /* V2: message.runner; otherwise = from */
  char domain_name[XGR_PERMIT_MAX_STR + 1];
  char domain_version[XGR_PERMIT_MAX_STR + 1];
  uint64_t chain_id;
  char ostc_id[XGR_PERMIT_MAX_STR + 1];  /* SessionPermit */
  uint8_t ostc_hash[32];                  /* SessionPermit */
  uint64_t session_id;                /* SessionPermit/Control: sessionId (root pid) */
  bool session_id_big;                /* sessionId does not fit 64 bits (matches no session) */
  char max_total_gas[80];             /* SessionPermit: decimal */
  char action[8];                     /* control: pause|resume|kill|wake|migrate */
  char step_id[XGR_PERMIT_MAX_STR + 1]; /* control: "" in PID mode */
  uint64_t expiry;                    /* Unix seconds (UINT64_MAX when larger) */
  uint8_t digest[32];                 /* the EIP-712 digest signed (single-use bookkeeping) */
} xgr_permit;

/* Verify the permit JSON `permit` (borrowed) under pol. On success fills *out and returns 0; every
 * refusal returns XGR_EPERM with err naming the check and the field path ("permit.domain.chainId":
 * paths are prefixed with `prefix`, e.g. "permit"; NULL or "" for none). */
int xgr_permit_verify(const xgr_secp *ctx, const json_t *permit, const xgr_permit_policy *pol, const char *prefix,
                      xgr_permit *out, xgr_error *err);

/* Parse len bytes of JSON text (at most XGR_PERMIT_MAX_BYTES) and verify it. */
int xgr_permit_verify_text(const xgr_secp *ctx, const char *text, size_t len, const xgr_permit_policy *pol,
                           xgr_permit *out, xgr_error *err);

/* What to sign. Unused fields are ignored for a kind; NULL strings take the defaults shown. */
typedef struct xgr_permit_fields {
  xgr_permit_kind kind;
  uint64_t chain_id;
  const char *domain_name;        /* default: "XDaLa SessionPermit" / "XDaLa ControlPermit" / "XDaLa Permit" */
  const char *domain_version;     /* default "1" */
  const uint8_t *verifying_contract; /* control kinds: 20 bytes (required) */
  const char *runner;             /* ControlPermitV2: 0x address (required) */
  const char *ostc_id;            /* SessionPermit (required) */
  const uint8_t *ostc_hash;       /* SessionPermit: 32 bytes (required) */
  uint64_t session_id;
  uint64_t max_total_gas;
  const char *action;             /* control (required) */
  const char *step_id;            /* control: default "" */
  bool legacy;                    /* ControlPermit without stepId (kill/pause/resume) */
  uint64_t expiry;
} xgr_permit_fields;

/* Build and sign a permit with key; *out is a new JSON object (caller json_decref's it) in the
 * shape xgr_permit_verify takes. Fails with XGR_EINVAL naming a missing or bad field. */
int xgr_permit_sign(const xgr_secp *ctx, const uint8_t key[32], const xgr_permit_fields *f, json_t **out,
                    xgr_error *err);

/* ---- signing for a JSON-RPC call (the CLI's --key, tests) ------------------------------------ */

/* What a client must know to sign the permit of a call. The callbacks learn what the request does
 * not say; each returns 0 or an xgr error code with *err filled. */
typedef struct xgr_permit_call {
  uint64_t chain_id;
  const uint8_t *control_contract;   /* 20 bytes: control permits' verifyingContract */
  uint64_t expiry;                   /* Unix seconds */
  uint64_t max_total_gas;            /* SessionPermit */
  /* the rootPid the signer's next session gets (xgr_getNextProcessId) */
  int (*next_pid)(void *ctx, const char *from, uint64_t *out, xgr_error *err);
  /* the hash of the orchestration the start names (registry xrc729/registry/orchestration, ostcId) */
  int (*ostc_hash)(void *ctx, const json_t *params, uint8_t out[32], xgr_error *err);
  void *ctx;
} xgr_permit_call;

/* The root pid a permit binds, read from a pid value: an integer >= 0, or a string "R" or "R:I"
 * (decimal R). Returns 0 and *root, or -1 for anything else. */
int xgr_permit_root_of(const json_t *v, uint64_t *root);

/* The permit kind `method` needs (xgr.enqueue / xgr_validateDataTransfer: session; kill, pause,
 * resume, xgr_control, wakes: control; listSessions, getSession, registry writes: xdala), 0 for a
 * public method. */
xgr_permit_kind xgr_permit_kind_for_method(const char *method);

/* Sign, with key, the permit `method` needs for params (an object, modified) and put it into
 * params.permit: a SessionPermit binding the rootPid (params.rootPid / sessionId, else next_pid,
 * which is then written into params so the request starts exactly that session), ostcId and the
 * registered ostcHash (params.ostcHash, else ostc_hash); a ControlPermit with the call's action,
 * root and, for a step-mode wake, its step — a ControlPermitV2 with runner = params.owner when the
 * signer is not the owner; an xdalaPermit otherwise. Public methods and params that carry a
 * permit already are left alone. 0 or an error naming the parameter. */
int xgr_permit_sign_call(const xgr_secp *ctx, const uint8_t key[32], const char *method, json_t *params,
                         const xgr_permit_call *info, xgr_error *err);

#ifdef __cplusplus
}
#endif
#endif
