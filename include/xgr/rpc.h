/* xgr/rpc.h — the JSON-RPC 2.0 server of xgrd over HTTP (libmicrohttpd).
 *
 * POST / (or /rpc) with `Content-Type: application/json` carries one request or a batch; every
 * request is dispatched to the method registered under its name. GET /metrics renders the
 * server's metrics registry (xgr/metrics.h) in Prometheus text format; GET /healthz answers while
 * the server runs; GET /readyz answers 200 only while the ready callback says so.
 *
 * Protocol errors follow JSON-RPC 2.0: -32700 parse error, -32600 invalid request, -32601 method
 * not found, -32602 invalid params (with data.path naming the field), -32603 internal error.
 * Application errors use the codes below. HTTP-level refusals: 404 unknown path, 405 wrong HTTP
 * method, 411/413 body missing or larger than the cap, 415 wrong content type.
 *
 * Methods run on the server's worker threads (thread pool); a method may block for a short while
 * (a durable commit), not for long waits, or defer its answer until a commit is done without
 * holding a thread (xgr_rpc_defer_begin). One line per request is logged at info level as
 * key=value pairs. Authorization: the config names an authorizer; with none (`--auth none`) the
 * server refuses to listen on anything but a loopback address.
 */
#ifndef XGR_RPC_H
#define XGR_RPC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "xgr/error.h"
#include "xgr/metrics.h"
#include "xgr/permit.h"
#include "xgr/rule.h"

struct xgr_auth; /* xgr/auth.h: signed permits */

#ifdef __cplusplus
extern "C" {
#endif

/* JSON-RPC error codes. */
#define XGR_RPC_PARSE_ERROR -32700
#define XGR_RPC_INVALID_REQUEST -32600
#define XGR_RPC_METHOD_NOT_FOUND -32601
#define XGR_RPC_INVALID_PARAMS -32602
#define XGR_RPC_INTERNAL_ERROR -32603
/* Application codes (documented in docs/RPC.md). */
#define XGR_RPC_NOT_FOUND -32004
#define XGR_RPC_LIMITS_EXCEEDED -32005
#define XGR_RPC_REGISTRY_MISMATCH -32006
#define XGR_RPC_NOT_PERMITTED -32007
#define XGR_RPC_CONFLICT -32008
#define XGR_RPC_UNAVAILABLE -32009   /* shutting down, or the store refuses writes */

/* The JSON-RPC code for an xgr_errcode (schema errors -> invalid params, limit -> limits
 * exceeded, ...). */
int xgr_rpc_code_for(int xgr_code);

/* Who is calling, as far as the transport knows (the authorization plumbing of later permits).
 * Filled by the server for every request; borrowed for the method call. */
typedef struct xgr_rpc_defer xgr_rpc_defer;

/* What xgrd's request log line says of a call that changes something (docs/OPERATIONS.md): who
 * acted — the permit's signer, "auth-none" under --auth none — and the session it acted on. A
 * method fills it once it knows them (xgr_rpc_log_subject); never payloads, permits or signatures. */
typedef struct xgr_rpc_subject {
  char actor[64];             /* "" until set */
  char owner[64];             /* the session's owner, "" when the call names no session */
  uint64_t root;
} xgr_rpc_subject;

typedef struct xgr_rpc_caller {
  const char *remote;         /* peer address "ip:port" */
  const char *authorization;  /* the Authorization header, or NULL */
  bool auth_none;             /* the server runs with --auth none (loopback only) */
  const struct xgr_auth *auth; /* the chain id, control contract and (unless auth_none) the permit checks */
  xgr_rpc_defer *defer;       /* this request's answer may be deferred (see below); NULL: it may not */
  const char *traceparent;    /* the W3C traceparent header, or NULL (xgr.enqueue hands it to the node) */
  xgr_rpc_subject *subject;   /* the request's log subject (set by the server; NULL: not logged, e.g.
                                 a batch's members) */
  /* Who the caller is when a console sign-in proved it (the `xgr_console` cookie of POST /ui/rpc or
   * GET /ui/events; docs/CONSOLE.md "Signing in"): its address, lowercase; NULL otherwise. Then the
   * caller needs no permit: xgr_rpc_authorize_permit takes this address as the identity and decides
   * what it may do as for a permit's signer. */
  const char *signed_in;
  const char *const *only;    /* NULL: every method; else the NULL-terminated methods this request may call */
} xgr_rpc_caller;

/* The audit trail's and the log's name of the caller: "auth-none" under --auth none, else the
 * verified signer `who` (may be NULL or ""; then "-"). Borrowed: who or a constant. */
const char *xgr_rpc_actor(const xgr_rpc_caller *c, const char *who);
/* An audit entry (xgr/store.h) as xgr.getSession's "audit" array, the console's timeline and
 * `xgr history --json` show it (docs/RPC.md): kind, actor, node, at (ms since the epoch),
 * sessionAt (session clock), permitDigest (when a permit was used) and detail (an object, when
 * there is one). A new object (the caller's). */
struct xgr_store_audit;
json_t *xgr_rpc_audit_json(const struct xgr_store_audit *a);
/* Record the log subject of c's request: actor and the session (owner may be NULL: none). */
void xgr_rpc_log_subject(const xgr_rpc_caller *c, const char *actor, const char *owner, uint64_t root);

/* ---- answering later ------------------------------------------------------------------------------
 * A method that would otherwise block its server thread on work completed elsewhere (a durable
 * commit, a first step) defers its answer when caller->defer is set (every request the server
 * reads, each request of a batch included: the batch is answered once its last deferred member is
 * ready; NULL only for callers that cannot wait, and then the method blocks as usual). It calls xgr_rpc_defer_begin(caller->defer, finish, ctx) BEFORE it
 * hands the work over, then returns XGR_RPC_DEFERRED; the request's connection waits without a
 * thread. Whoever completes the work calls xgr_rpc_defer_ready(defer) exactly once, from any
 * thread (it must not block). A server thread then calls finish(ctx, &result, err): its return
 * (0 or an error code as a method returns it, with *err filled) and *result (a new reference) are
 * the method's answer.
 * finish owns ctx and frees it. The method must not keep pointers into its params for finish. */
#define XGR_RPC_DEFERRED 1   /* positive: never a JSON-RPC code */
typedef int (*xgr_rpc_finish_fn)(void *ctx, json_t **result, xgr_error *err);
void xgr_rpc_defer_begin(xgr_rpc_defer *df, xgr_rpc_finish_fn finish, void *ctx);
void xgr_rpc_defer_ready(xgr_rpc_defer *df);

/* What a method is about to do, for xgr_rpc_authorize. */
typedef enum xgr_rpc_action {
  XGR_RPC_ACT_READ = 0,       /* read an owner's sessions */
  XGR_RPC_ACT_START,          /* start / enqueue a session of `owner` */
  XGR_RPC_ACT_CONTROL,        /* kill, pause, resume a session of `owner` */
  XGR_RPC_ACT_WAKE,           /* wake processes of `owner`'s session (allow lists may admit others) */
  XGR_RPC_ACT_REGISTER        /* register an orchestration or a rule (the caller becomes its owner) */
} xgr_rpc_action;

/* The one place that decides who the caller is and whether it may act on `owner`'s sessions
 * (owner may be NULL for REGISTER, or when the caller's identity is the owner).
 * With --auth none the identity is the request's `from` field, else its `owner` field, else
 * `owner` itself (an address "0x" + 40 hex, lowercased into who, which needs 43 bytes);
 * START and CONTROL need identity == owner; READ needs identity == owner unless `runner`
 * mode lets the method filter by allow lists (the method's business); WAKE admits anyone (the
 * session's allow lists decide); REGISTER admits anyone. Without --auth none every call is
 * refused until signed permits exist (a later issue). Returns 0 or an xgr_errcode (XGR_EPERM,
 * XGR_ESCHEMA) with
 * *err filled (path "from" / "owner"). */
int xgr_rpc_authorize(const xgr_rpc_caller *c, const json_t *params, xgr_rpc_action act, const char *owner,
                      char *who, size_t n, xgr_error *err);

/* The same decision in permit mode (caller->auth), in two steps: who the caller is — params.permit
 * verified as the kind `act` needs (START: SessionPermit; CONTROL and WAKE: ControlPermit/V2; READ
 * and REGISTER: xdalaPermit), its signer; or, for a console sign-in (caller->signed_in), that
 * address with no permit (p->kind 0) — then whether it may: START needs owner == the caller,
 * CONTROL owner == the permit's runner (the caller when signed in). The verified permit goes to *p (may be NULL) for the method's own bindings
 * (xgr/auth.h); with --auth none p->kind is 0. Refusals: XGR_EPERM (-32007 on the wire) naming the
 * check. */
int xgr_rpc_authorize_permit(const xgr_rpc_caller *c, const json_t *params, xgr_rpc_action act, const char *owner,
                             char *who, size_t n, xgr_permit *p, xgr_error *err);

/* Whether the caller may exercise `rights` (xgr_node_right bits, xgr/node.h) on session (owner,
 * root): every front end's one check before it shows or changes a session (JSON-RPC methods, the
 * console's pages and event streams). With --auth none (c->auth_none) everything is open: 0 with
 * info->via XGR_NODE_VIA_NONE and rights 7. Otherwise who (the verified signer, or the address a
 * console sign-in bound) goes to the node's decision, xgr_node_access (owner, operator, unexpired
 * grant). 0, or XGR_EPERM (-32007 on the wire) naming path, or the store's error. info may be NULL. */
struct xgr_node;
struct xgr_node_access_info;
int xgr_rpc_access(struct xgr_node *n, const xgr_rpc_caller *c, const char *who, const char *owner, uint64_t root,
                   unsigned rights, const char *path, struct xgr_node_access_info *info, xgr_error *err);
/* How a caller reaches a session, as listings and getSession show it: "owner", "operator", "grant",
 * or "open" (--auth none). */
const char *xgr_rpc_access_name(const struct xgr_node_access_info *info);

/* The identity a request claims before any check: its `from`, else (permit mode) the permit's
 * message.runner or message.from; NULL if none. Methods use it as the default owner. */
const char *xgr_rpc_claimed(const xgr_rpc_caller *c, const json_t *params);

/* True when s is "0x" + 40 hex digits. */
bool xgr_rpc_is_address(const char *s);

/* A method: read params (borrowed; an object, an array or NULL), set *result (a new reference)
 * and return 0, or return a negative xgr_errcode and fill *err (err->path becomes data.path; the
 * dispatcher answers the JSON-RPC code xgr_rpc_code_for gives, in this one place), or a JSON-RPC
 * protocol code (-32000 and below) as it is, or defer its answer (XGR_RPC_DEFERRED, above). */
typedef int (*xgr_rpc_method_fn)(void *ctx, const xgr_rpc_caller *caller, const json_t *params, json_t **result,
                                 xgr_error *err);

typedef struct xgr_rpc_config {
  const char *listen;         /* "127.0.0.1:8729" (port 0: an ephemeral port) */
  size_t max_body;            /* body cap in bytes (default 1 MiB) */
  unsigned max_connections;   /* connection cap (default 1024) */
  unsigned timeout_s;         /* idle connection / header timeout in seconds (default 15) */
  unsigned threads;           /* worker threads (default 4) */
  bool auth_none;             /* no authorization: only allowed on loopback addresses */
  const struct xgr_auth *auth; /* permits, chain id, control contract (borrowed; may be NULL with auth_none) */
  const char *metrics_listen; /* "IP:PORT": serve /metrics there only (NULL: on `listen`) */
  FILE *log;                  /* request log (NULL: no log) */
  /* the listener's own failures, whatever the log level: a connection that cannot be accepted
   * (out of file descriptors: EMFILE/ENFILE, or memory) is logged as level=error msg="cannot accept
   * connections" at most once per 10 s (with repeated=N for the ones left out) and counted in
   * xgr_http_accept_failures_total. NULL: counted only. */
  FILE *errlog;
  bool (*ready)(void *ctx);   /* /readyz; NULL: ready while running */
  void *ready_ctx;
  /* listen before the methods can work (xgrd recovering its sessions): until xgr_rpc_open,
   * /readyz answers 503 and every JSON-RPC request XGR_RPC_UNAVAILABLE saying so */
  bool start_closed;
} xgr_rpc_config;

typedef struct xgr_rpc_server xgr_rpc_server;

/* A stopped server with its own metrics registry. Returns NULL on bad config with *err filled. */
xgr_rpc_server *xgr_rpc_server_new(const xgr_rpc_config *cfg, xgr_error *err);
/* Register a method before start, or before xgr_rpc_open of a server started closed; name and
 * ctx are borrowed for the server's life. */
int xgr_rpc_register(xgr_rpc_server *s, const char *name, xgr_rpc_method_fn fn, void *ctx);
int xgr_rpc_start(xgr_rpc_server *s, xgr_error *err);
/* Mark a registered method as independent of its neighbours in a batch: consecutive requests of
 * such methods in one batch run concurrently (their store commits are then shared by the store's
 * group commit), the rest of the batch in order. Same timing rules as xgr_rpc_register. */
int xgr_rpc_set_concurrent(xgr_rpc_server *s, const char *name);
/* Open a server started with start_closed: from now on requests reach the methods registered so
 * far, and /readyz asks ready(ctx) (NULL: ready while running). Call once, from one thread. */
void xgr_rpc_open(xgr_rpc_server *s, bool (*ready)(void *ctx), void *ctx);
/* Replace the permit gate of a server started closed, before xgr_rpc_open (which publishes it):
 * xgrd makes it again once its store is open. auth is borrowed for the server's life. */
void xgr_rpc_set_auth(xgr_rpc_server *s, const struct xgr_auth *auth);
uint16_t xgr_rpc_port(const xgr_rpc_server *s);     /* the bound port (after start) */
uint16_t xgr_rpc_metrics_port(const xgr_rpc_server *s); /* --metrics-listen's bound port, 0 without */
xgr_metrics *xgr_rpc_metrics(xgr_rpc_server *s);    /* owned by the server */
/* Stop accepting, finish requests in flight (deferred answers: up to 10 s), close. Answers still
 * deferred then (waiting for a store that does not answer) keep the quiesced listener until
 * xgr_rpc_server_free, which waits for them again (the service's teardown answers them) and
 * otherwise leaves it unstopped (libmicrohttpd aborts when stopped with suspended connections). */
void xgr_rpc_stop(xgr_rpc_server *s);
void xgr_rpc_server_free(xgr_rpc_server *s);

/* Helpers for methods: parameter readers that refuse with XGR_ESCHEMA (-32602 on the wire) and the
 * field's path. */
int xgr_rpc_param_string(const json_t *params, const char *key, bool required, const char **out, xgr_error *err);
int xgr_rpc_param_object(const json_t *params, const char *key, bool required, const json_t **out, xgr_error *err);
int xgr_rpc_param_uint(const json_t *params, const char *key, bool required, uint64_t *out, xgr_error *err);
/* The object a method reads its named parameters from: params itself when it is an object, its
 * only element when it is a one-element array holding an object (the `params[0]` convention of the
 * public reference), NULL when params is absent. Anything else: XGR_ESCHEMA with *err filled. */
int xgr_rpc_params_object(const json_t *params, const json_t **out, xgr_error *err);

/* ==== xgrd: the JSON-RPC service of a node (src/rpc/rpcd.c and the files of rpc_impl.h) ============
 * An xgr_rpcd is the JSON-RPC face of a node (xgr/node.h): the methods of docs/RPC.md read their
 * parameters, call the node (or its store and engine) and write the answers; the console's pages
 * and events; the first-step waiters of xgr_validateDataTransfer. The node is borrowed. */
typedef struct xgr_rpcd xgr_rpcd;
struct xgr_node;

typedef struct xgr_rpcd_config {
  long first_step_timeout_ms; /* xgr_validateDataTransfer waits this long for the first step (0: 10000) */
  /* Caps that keep one client or owner from taking what every caller needs (docs/SECURITY.md,
   * "Event streams and waiting calls"); 0 takes the default given. */
  unsigned max_validates_per_client; /* xgr_validateDataTransfer calls in flight per client address (16) */
  unsigned max_migrate_sessions;     /* sessions one xgr.migrateSessions call may name or select (1000) */
  unsigned max_streams_per_client;   /* open GET /ui/events streams per client address (8) */
  unsigned max_streams_per_owner;    /* open streams per owner they read (32) */
  unsigned max_streams;              /* open streams in all (512: half the default connection cap) */
  unsigned stream_max_secs;          /* a stream ends this long after it opened (3600) */
  /* Signing in to the console (docs/SECURITY.md, "Console sign-in") */
  unsigned console_max_nonces;       /* sign-in nonces outstanding; a new one evicts the oldest (1024) */
  unsigned console_max_sessions;     /* console sessions live; a new one ends the one expiring first (256) */
  unsigned console_session_secs;     /* a console session's life: its cookie's Max-Age (1800) */
  /* xgr_getGrantFeePerYear's answer: wei as "0x" + lowercase hex without leading zeros (NULL or "":
   * "0x0"); borrowed. xgrd --grant-fee-wei. */
  const char *grant_fee_wei;
} xgr_rpcd_config;
/* The defaults of xgr_rpcd_config's caps. */
#define XGR_RPCD_MAX_VALIDATES_PER_CLIENT 16
#define XGR_RPCD_MAX_MIGRATE_SESSIONS 1000
#define XGR_RPCD_MAX_STREAMS_PER_CLIENT 8
#define XGR_RPCD_MAX_STREAMS_PER_OWNER 32
#define XGR_RPCD_MAX_STREAMS 512
#define XGR_RPCD_STREAM_MAX_SECS 3600
#define XGR_RPCD_CONSOLE_MAX_NONCES 1024
#define XGR_RPCD_CONSOLE_MAX_SESSIONS 256
#define XGR_RPCD_CONSOLE_SESSION_SECS 1800

/* The service of node n (borrowed: it must outlive the service), subscribed to its engine's
 * events. Create it before xgr_node_recover, so no event of a recovered session is missed. NULL
 * with *err on failure. */
xgr_rpcd *xgr_rpcd_new(struct xgr_node *n, const xgr_rpcd_config *cfg, xgr_error *err);
/* Register every method (both naming styles) and the service's and the node's gauges on server s. */
int xgr_rpcd_register(xgr_rpcd *d, xgr_rpc_server *s);
/* /readyz: true once the node is ready, until shutdown begins. */
bool xgr_rpcd_ready(void *d);
/* Refuse new work and answer every waiting validateDataTransfer; call after xgr_rpc_stop and
 * before xgr_node_shutdown. */
void xgr_rpcd_shutdown(xgr_rpcd *d);
/* Free the service. Its node's engine must be gone first (xgr_node_free), since the engine calls
 * the service's event callbacks. NULL is fine. */
void xgr_rpcd_free(xgr_rpcd *d);

#ifdef __cplusplus
}
#endif
#endif
