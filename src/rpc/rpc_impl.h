/* rpc_impl.h — private interface between the files of xgrd's service (src/rpc), one room per
 * concern:
 *
 *   params.c    the shared parameter parsers: the one unsigned-integer parser (range-checked), the
 *               one validator of names that become registry keys (registry, ostcId, rule keys), owner
 *               and target parsing, and xgr__rpc_fail, the one way a method refuses a call.
 *   start.c     starting sessions (xgr.enqueue, xgr_validateDataTransfer), the first-step waiters,
 *               xgr_getNextProcessId, the engine event callback.
 *   control.c   kill, pause, resume, control, wakeUp, sessionAlive, stepExecuted.
 *   list.c      listSessions (join and raw views, sorting, paging) and getSession.
 *   registry.c  orchestration and rule registries and the bundle cache.
 *   rpcd.c      the service object over a node (xgr/node.h): its life cycle, its gauges, the method
 *               table. The node runs the sessions; these files read parameters, call it (or its
 *               store and engine) and write the answers.
 *
 * Not installed; nothing outside src/rpc includes it. Every function here is library-private
 * (xgr__ prefix). Strings returned through `const char **` point into the request's JSON
 * (borrowed, valid while the params live); json_t results are new references owned by the caller
 * unless a comment says otherwise. Methods follow xgr_rpc_method_fn (xgr/rpc.h): 0 with *result
 * set (owned by the server), or a negative xgr_errcode with err naming the parameter path (the
 * dispatcher maps it to the JSON-RPC code, in one place).
 */
#ifndef XGR_RPC_RPC_IMPL_H
#define XGR_RPC_RPC_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "xgr/bundle.h"
#include "xgr/chain.h"
#include "xgr/engine.h"
#include "xgr/node.h"
#include "xgr/rpc.h"
#include "xgr/store.h"
#include "util/tally.h"


/* A validateDataTransfer waiting for the first step of its session (start.c; fields after `next`
 * are written under xgr_rpcd.w_mu by the event callback). Owned by the method call that waits, or,
 * once its answer is deferred (df set), by the deferred answer's finish. */
typedef struct xgr__waiter {
  struct xgr__waiter *next;
  char owner[64];
  uint64_t root;               /* 0 until registered */
  bool done;
  uint8_t status;
  int8_t valid;
  json_t *payload;             /* owned: the first step's sanitized input (XGR_EEV_STEP), else the first
                                  process's payload when the step read none (a hard error first) */
  json_t *output;              /* owned: the first step's outcome payload (XGR_EEV_STEP), or NULL */
  bool stepped;                /* the XGR_EEV_STEP of the first step was seen (payload is its input) */
  uint8_t action;              /* its rule action */
  char *error;                 /* owned */
  /* a deferred answer (a single request): set under w_mu when the connection is set aside; then
   * the waiter is on the deadline list until `fired` (under w_mu: exactly one of the first step's
   * result, the store's failure, the deadline and the stop fires it and calls xgr_rpc_defer_ready) */
  xgr_rpc_defer *df;
  bool fired;
  int64_t due_ns;              /* the deadline (monotonic ns) */
  struct xgr__waiter *dprev, *dnext;   /* the deadline list, earliest first */
  struct xgr__waiter *fnext;   /* a list of waiters fired together (local to the one firing) */
  struct xgr_rpcd *d;
  char *step;                  /* owned: the start step (the answer's executedSteps) */
  char client[64];             /* the caller's address: its unit of d->validates, given back with the answer */
  char hash[67];               /* the orchestration's hash */
} xgr__waiter;

/* A writing method and its service (the context of rpcd.c's store-failure guard). */
typedef struct xgr__guard {
  struct xgr_rpcd *d;
  xgr_rpc_method_fn fn;
} xgr__guard;

/* The names of a start's acks (xgr_node_ack, xgr/node.h) in the answers and the xgr_enqueue_total
 * labels (defined in start.c). */
extern const char *const xgr__rpcd_ack_names[XGR_NODE_ACK_N];

/* The service: the JSON-RPC face of a node. Created and freed by rpcd.c; the other files only use
 * it. The node and what it owns are borrowed (the node outlives the service's use of them). */
struct xgr_rpcd {
  xgr_rpcd_config cfg;
  xgr_node *n;                 /* borrowed */
  const xgr_node_config *nc;   /* n's configuration (chain, executor, ...) */
  xgr_store *st;               /* n's store */
  xgr_engine *e;               /* n's engine */
  struct xgr__console *console; /* owned: the console's pages, events and read methods (console_service_impl.h) */
  atomic_bool stopping;
  atomic_bool store_down;      /* the store failed (logged once) */
  pthread_mutex_t w_mu;        /* waiters */
  pthread_cond_t w_cv;
  xgr__waiter *waiters;
  atomic_int nwaiters;
  /* deferred validateDataTransfer answers (start.c): their deadlines, earliest first, and the one
   * timer thread that fires them (started with the first; all under w_mu) */
  xgr__waiter *dhead, *dtail;
  pthread_cond_t t_cv;         /* the timer thread sleeps on it (CLOCK_MONOTONIC) */
  pthread_t t_th;
  bool t_on, t_stop;           /* the thread runs; it is asked to end */
  bool v_stop;                 /* the server stops: waiting answers go at once, new ones are not deferred */
  xgr_counter *c_enq[XGR_NODE_ACK_N];
  xgr__tally validates;        /* xgr_validateDataTransfer calls in flight per client address (start.c) */
  xgr_counter *c_validates_refused;
  char names[96][40];          /* method names registered on the server (borrowed by it) */
  xgr__guard guards[32];       /* contexts of the guarded (writing) methods */
};

/* The signature of every method (xgr_rpc_method_fn); ctx is the xgr_rpcd. */
#define XGR__RPCD_METHOD(name) \
  int name(void *ctx, const xgr_rpc_caller *caller, const json_t *params, json_t **result, xgr_error *err)

/* ---- params.c ------------------------------------------------------------------------------- */

/* Refuse a call: sets err (code, path, formatted message) and returns code, the xgr_errcode the
 * dispatcher turns into the JSON-RPC code (xgr_rpc_code_for, jsonrpc.c). */
int xgr__rpc_fail(xgr_error *err, int code, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* An xgr error code from a lower layer, returned as it is; fills a message if err has none. */
int xgr__rpc_code(int rc, xgr_error *err);
/* The one unsigned-integer parser: a non-negative JSON integer or a decimal string of digits only
 * that fits in 64 bits (no sign, no spaces; "18446744073709551616" is refused, not clamped).
 * v NULL or null counts as missing and is refused. 0 or -32602 naming path. */
int xgr__rpc_uint(const json_t *v, const char *path, uint64_t *out, xgr_error *err);
/* The one rule for a name that becomes (part of) a registry key: non-empty, at most max bytes,
 * none of the characters of `forbid`. 0 or -32602 naming path and quoting the value. */
int xgr__rpc_check_name(const char *v, size_t max, const char *forbid, const char *path, const char *what,
                        xgr_error *err);
/* Longest ostcId, and the optional `ostcId` parameter checked by xgr__rpc_check_name (no '/'):
 * *out NULL when absent. Every method that takes an ostcId reads it here. */
#define XGR__RPC_MAX_OSTC_ID 96
int xgr__rpc_ostc_id(const json_t *o, const char **out, xgr_error *err);
/* Longest registry name (xgr__rpc_registry), and the size of a registry key buffer. */
#define XGR__RPC_MAX_REGISTRY 95
#define XGR__RPC_KEY_SIZE (XGR__RPC_MAX_REGISTRY + 1 + XGR__RPC_MAX_OSTC_ID + 1)
/* The registry key of an orchestration: "<reg>/<ostcId>", or "<reg>" (its current one) when
 * ostc_id is NULL. Both must have passed their validators (asserted). */
void xgr__rpc_registry_key(char key[XGR__RPC_KEY_SIZE], const char *reg, const char *ostc_id);
/* The optional `version` parameter of a registry read: 0 (the newest) when absent; refused beyond
 * 32 bits. */
int xgr__rpc_version(const json_t *o, uint32_t *out, xgr_error *err);
/* Optional string field (null counts as absent). */
int xgr__rpc_opt_str(const json_t *o, const char *key, const char **out, xgr_error *err);
/* Optional address parameter key (a namespace such as registryOwner): lowercased into out and *has
 * true, or *has false when absent or null; anything but an address is refused naming key. */
int xgr__rpc_opt_address(const json_t *o, const char *key, char out[43], bool *has, xgr_error *err);
/* The first of NULL-terminated alias keys present (not null) in o, else the last key. */
const char *xgr__rpc_first_key(const json_t *o, const char *const *keys);
/* The client's address of a caller (its `remote` "ip:port" without the port) into out[n]: what
 * the per-client caps count under. "?" when unknown. */
void xgr__rpc_client_addr(const xgr_rpc_caller *caller, char *out, size_t n);
/* ASCII lowercase in place. */
void xgr__rpc_lower(char *s);
/* "R:I" (or "R" for iter 0) and a u64 as decimal JSON strings (new references). */
json_t *xgr__rpc_pid_json(uint64_t root, uint64_t iter);
/* Mark o (a session row or item) with how the caller reaches it: "access" (xgr_rpc_access_name)
 * and "rights" (the bitmask held; plus "grantExpiresAt" for a grant). */
void xgr__rpc_access_mark(json_t *o, const xgr_node_access_info *a);
json_t *xgr__rpc_u64_json(uint64_t v);
/* The history row of a refused internal wake-up w of session root (xgr.getSession, the console's
 * timeline; docs/RPC.md): its sending process and step, status "wake_refused", "at"/"finishedAt"
 * of the sender's history row h (NULL: unknown, 0) and the refusal under "wakeUp". New reference. */
json_t *xgr__rpc_refused_row(uint64_t root, const xgr_store_hist *h, const xgr_store_wake *w);
/* A stored process's state fields on a list item it: "valid" (null when not decided),
 * for a waiting process "nextWakeAt" and "waitsFor" (xgr_node_proc_wait: null / "timer", "join": an
 * open join target, "resume": paused, "wakeUp": no timer),
 * "abortReason" (aborted), "error" (when set). */
void xgr__rpc_proc_state(json_t *it, const xgr_store_proc *p);
/* A session's "nextWakeAt" (new reference): the earliest time one of its processes ps[0..n) wakes
 * on its own (xgr_node_session_next_wake: no paused process, no open join target), or null — also
 * for a paused or ended session. The one definition every report (listing, xgr.getSession, the
 * console) uses. */
json_t *xgr__rpc_next_wake_json(const xgr_store_session *s, const xgr_store_proc *ps, size_t n);
/* The status a listing shows: of a process ("paused" for a paused waiting one, else waiting,
 * running, done, aborted) and of a session ("paused" for a paused live one, else running,
 * completed, killed, stalled, limit). Static strings. */
const char *xgr__rpc_proc_status(const xgr_store_proc *p);
const char *xgr__rpc_session_status(const xgr_store_session *s);
/* A listing's status filter: 0 when status is NULL or a word listings of sessions (sessions) or of
 * processes filter by, else -32602 naming path, the words and the nearest one. Session words:
 * running (live, not paused), waiting (running with no process running now), paused, live,
 * completed, killed, stalled, limit, finished (not live); process words: the process statuses. */
int xgr__rpc_status_check(const char *status, const char *path, bool sessions, xgr_error *err);
/* Whether session s (its row and the engine's view, xgr_node_sessions) has session status word
 * want (checked); "waiting": live, not paused and no process running in the engine. */
bool xgr__rpc_session_status_is(const xgr_node_session *s, const char *want);
/* The owner of a request: "owner" (or "runner"), else `who` (the caller); an address, lowercased
 * into owner[n]; *path gets the key it came from. */
int xgr__rpc_owner(const json_t *o, const char *who, char *owner, size_t n, const char **path, xgr_error *err);
/* The registry name of a request, lowercased into reg[n]: the first of `keys` present (default
 * {"xrc729", "registry"}); "local" when absent unless `required`. *path gets the key. */
int xgr__rpc_registry(const json_t *o, const char *const *keys, bool required, char *reg, size_t n, const char **path,
                      xgr_error *err);
/* A target: "pid"/"processId" ("R:I" or "R") or "rootPid"/"sessionId"; *iter 0 for a session. */
int xgr__rpc_target(const json_t *o, uint64_t *root, uint64_t *iter, const char **path, xgr_error *err);

/* Refuse a key of object o that its method does not read: -32602 at "<path>.<key>" with the
 * message "params.<path>.<key>: unknown key; did you mean "<nearest>"?" (xgr__nearest_key), or the
 * list of known keys when none is close. path is where o sits in params ("" for params itself, "init",
 * "sort"); known is NULL-terminated. At the top level (path "") "from", the caller's address, is
 * always known. o not an object: 0 (its type is its reader's to check). */
int xgr__rpc_keys(const json_t *o, const char *path, const char *const *known, xgr_error *err);
/* A method's named parameters (xgr_rpc_params_object: an object, or params[0]) with their keys
 * checked against known (xgr__rpc_keys at the top level). *out NULL when params are absent. Every
 * method reads its parameters through this (or xgr__rpc_keys on each object it reads). */
int xgr__rpc_named(const json_t *params, const char *const *known, const json_t **out, xgr_error *err);


/* ---- registry.c ------------------------------------------------------------------------------- */

/* Permit mode (the caller is a verified signer)? */
bool xgr__rpc_permits(const xgr_rpc_caller *caller);
/* ---- grants.c: xgr_manageGrants, xgr_listGrants, xgr_getGrantFeePerYear --------------------- */
XGR__RPCD_METHOD(xgr__rpcd_m_manage_grants);
XGR__RPCD_METHOD(xgr__rpcd_m_list_grants);
XGR__RPCD_METHOD(xgr__rpcd_m_grant_fee);
XGR__RPCD_METHOD(xgr__rpcd_m_put_orch);
XGR__RPCD_METHOD(xgr__rpcd_m_get_orch);
XGR__RPCD_METHOD(xgr__rpcd_m_put_rule);
XGR__RPCD_METHOD(xgr__rpcd_m_get_rule);

/* ---- start.c ---------------------------------------------------------------------------------- */

/* The engine's event callback (ctx = d): first-step waiters and the store-failure latch. */
void xgr__rpcd_on_event(void *ctx, const xgr_engine_event *ev);
/* Its interest (xgr_engine_subscribe_interest): store failures, refused wake-ups and aborted
 * sessions always; a first step's STEP and PROC events only while a waiter waits for one (a waiter is
 * registered before its session's start is handed to the engine, so its first turn asks after it). */
unsigned xgr__rpcd_interest(void *ctx);
/* The first-step waiters' side of the service's life: init (rpcd_new: the timer's condition), the
 * server's stop hook (ctx = d; answers every deferred validateDataTransfer at once and defers no
 * new one) and free (stops the timer thread; no deferred answer may be pending). */
void xgr__rpcd_waiters_init(xgr_rpcd *d);
void xgr__rpcd_waiters_stop(void *ctx);
void xgr__rpcd_waiters_free(xgr_rpcd *d);
XGR__RPCD_METHOD(xgr__rpcd_m_enqueue);
XGR__RPCD_METHOD(xgr__rpcd_m_validate);
XGR__RPCD_METHOD(xgr__rpcd_m_next_pid);

/* ---- control.c -------------------------------------------------------------------------------- */

/* Who acts on session (owner, root) with a control action — kill, pause, resume, retry, fork — and
 * whether they may (the one path for all of them). First the caller is identified for a control
 * call (xgr_rpc_authorize_permit XGR_RPC_ACT_CONTROL: a control permit, or a console sign-in,
 * whose address then goes to the node like a permit's signer): who[n] and *p as it fills them.
 * Then, when the signer (a ControlPermitV2's from, or the signed-in address) is not the owner, the
 * node decides (xgr_node_access XGR_NODE_CONTROL: an operator may; a grant of any rights does not):
 * *delegated is set for a permit signed by such a caller, who then signs as the runner could
 * (xgr__rpc_check_control). Split in two because xgr_control learns root from the permit.
 * 0, or -32007 (XGR_EPERM) naming the permit's field (or "owner" for a sign-in). */
int xgr__rpc_control_caller(const xgr_rpc_caller *caller, const json_t *o, const char *owner, char *who, size_t n,
                            xgr_permit *p, xgr_error *err);
int xgr__rpc_control_access(xgr_rpcd *d, const xgr_rpc_caller *caller, const xgr_permit *p, const char *owner,
                            uint64_t root, bool *delegated, xgr_error *err);
/* xgr_auth_check_control for action on (owner, root), with a delegated signer (above) checked as
 * the runner it acts for. 0 or -32007 naming the permit's field. */
int xgr__rpc_check_control(const xgr_permit *p, const char *action, uint64_t root, const char *step,
                           const char *owner, bool delegated, xgr_error *err);
XGR__RPCD_METHOD(xgr__rpcd_m_kill);
XGR__RPCD_METHOD(xgr__rpcd_m_pause);
XGR__RPCD_METHOD(xgr__rpcd_m_retry);
XGR__RPCD_METHOD(xgr__rpcd_m_fork);
XGR__RPCD_METHOD(xgr__rpcd_m_migrate);   /* migrate.c */
XGR__RPCD_METHOD(xgr__rpcd_m_versions);  /* migrate.c */
XGR__RPCD_METHOD(xgr__rpcd_m_live_sessions);   /* migrate.c */
XGR__RPCD_METHOD(xgr__rpcd_m_resume);
XGR__RPCD_METHOD(xgr__rpcd_m_control);
XGR__RPCD_METHOD(xgr__rpcd_m_wake);
XGR__RPCD_METHOD(xgr__rpcd_m_alive);
XGR__RPCD_METHOD(xgr__rpcd_m_step_executed);

/* ---- batch.c ---------------------------------------------------------------------------------- */

XGR__RPCD_METHOD(xgr__rpcd_m_batch_preview);
XGR__RPCD_METHOD(xgr__rpcd_m_batch_start);
XGR__RPCD_METHOD(xgr__rpcd_m_batch_get);
XGR__RPCD_METHOD(xgr__rpcd_m_batch_cancel);
XGR__RPCD_METHOD(xgr__rpcd_m_batch_list);

/* ---- list.c ----------------------------------------------------------------------------------- */

XGR__RPCD_METHOD(xgr__rpcd_m_list_join);
XGR__RPCD_METHOD(xgr__rpcd_m_list_raw);
XGR__RPCD_METHOD(xgr__rpcd_m_get_session);

#endif
