/* console_impl.h — private interface between the files of the console's server side (console_service_impl.h
 * says what the console is), one room per concern:
 *
 *   console.c         life, the cache of parsed orchestrations by hash, the engine events on the
 *                     hub, and GET /ui (pages, /ui/graph.svg, /ui/events).
 *   console_params.c  the parameter rules the read methods share, and status names.
 *   console_list.c    xgr.console.sessions, xgr.console.owners, xgr.console.info.
 *   console_view.c    xgr.console.session, xgr.console.process, xgr.console.registry.
 *   console_auth.c    signing in (EIP-4361 nonces, sessions and their cookie; POST /ui/auth/...) and
 *                     the gate of the console's JSON-RPC (POST /ui/rpc).
 *
 * Not installed; nothing outside these files includes it. Every function here is library-private
 * (xgr__ prefix). Strings returned through `const char **` point into the request's JSON
 * (borrowed, valid while the params live). Methods follow xgr_rpc_method_fn (xgr/rpc.h) with
 * ctx = the console: 0 with *result set (owned by the server), or a JSON-RPC code with err naming
 * the parameter path.
 */
#ifndef XGR_RPC_CONSOLE_IMPL_H
#define XGR_RPC_CONSOLE_IMPL_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rpc/console_service_impl.h"
#include "rpc/rpc_impl.h"
#include "xgr/orch.h"
#include "xgr/secp.h"

#define XGR__CONSOLE_CACHE_MAX 64   /* orchestrations kept parsed (and drawn) per console */

/* A parsed orchestration of the cache (console.c). */
typedef struct xgr__console_orch {
  char hash[80];
  xgr_orch *orch;
  char *svg;                    /* drawn on first request, NULL until then */
  size_t svg_len;
  unsigned refs;
  uint64_t used;
} xgr__console_orch;

/* An issued sign-in nonce and a console session (console_auth.c). */
typedef struct xgr__console_nonce {
  char v[33];                   /* 32 hex digits */
  int64_t exp;                  /* ms since the epoch */
} xgr__console_nonce;
typedef struct xgr__console_session {
  char key[67];                 /* keccak-256 of the cookie's token (the token itself is not kept) */
  char csrf[65];                /* the X-XGR-CSRF token of its /ui/rpc calls */
  char addr[43];                /* the signed-in address, lowercase */
  int64_t exp;                  /* ms since the epoch */
} xgr__console_session;

struct xgr__console {
  xgr_node *n;                  /* borrowed: every read goes through its queries (xgr/node.h) */
  xgr__sse_hub *hub;
  pthread_mutex_t mu;           /* the cache */
  xgr__console_orch cache[XGR__CONSOLE_CACHE_MAX];
  uint64_t tick;
  /* signing in (console_auth.c); the tables and counters under amu */
  xgr__console_auth_limits alim;
  pthread_mutex_t amu;
  xgr__console_nonce *nonces;   /* [alim.max_nonces] */
  xgr__console_session *sess;   /* [alim.max_sessions] */
  unsigned nnonces, nsess;
  uint64_t nonces_evicted, sess_evicted;
  xgr_secp *secp;               /* owned: signature recovery */
  xgr_metrics *metrics;         /* the server's (borrowed): the sign-in counters */
};

/* ---- console.c ------------------------------------------------------------------------------- */

/* The entry for hash, parsed from the registry on first use, with a reference taken (give it back
 * with xgr__console_cache_put; NULL is accepted there). NULL when nothing is registered under
 * hash or it does not parse. Its orch is immutable and may be read without the lock; svg and
 * svg_len are guarded by c->mu. */
xgr__console_orch *xgr__console_cache_get(xgr__console *c, const char *hash);
void xgr__console_cache_put(xgr__console *c, xgr__console_orch *ce);

/* ---- console_params.c ------------------------------------------------------------------------ */

/* Refuse with XGR_ESCHEMA at path: fmt has one %s, filled with v. Returns -32602. */
int xgr__console_bad(xgr_error *err, const char *path, const char *fmt, const char *v);
/* Optional string parameter key of at most max bytes (*out NULL when absent or null). */
int xgr__console_opt_str(const json_t *o, const char *key, size_t max, const char **out, xgr_error *err);
/* Optional unsigned parameter key (a number or its decimal string) in [0, max]; dflt when absent. */
int xgr__console_opt_uint(const json_t *o, const char *key, uint64_t max, uint64_t dflt, uint64_t *out,
                          xgr_error *err);
/* The owner the call reads: `owner` (or `from`), lowercased into owner[n], the caller authorized
 * (xgr_rpc_authorize_permit, READ) and its access decided as for JSON-RPC (xgr_rpc_access):
 * root != 0: READ on session (owner, root) — its owner, an operator or a READ grantee; root 0
 * (every session of owner): its owner or an operator. *info (may be NULL) says how. */
int xgr__console_read_owner(xgr__console *c, const xgr_rpc_caller *caller, const json_t *o, uint64_t root, char *owner,
                            size_t n, xgr_node_access_info *info, xgr_error *err);
/* The same, with the verified permit in *p (p->kind 0 under --auth none; p may be NULL) and the
 * caller's address in who[64] (may be NULL) once it is identified — also when the access decision
 * then refuses; "" when it is not (or under --auth none without `from`). */
int xgr__console_read_owner_permit(xgr__console *c, const xgr_rpc_caller *caller, const json_t *o, uint64_t root,
                                   char *owner, size_t n, xgr_permit *p, xgr_node_access_info *info, char *who,
                                   xgr_error *err);
/* The params as an object (required), its keys checked against known (NULL-terminated; "from"
 * is always known): xgr__rpc_named. */
int xgr__console_named(const json_t *params, const char *const *known, const json_t **o, xgr_error *err);
/* Status names as the pages show them (static strings). */

/* ---- console_list.c -------------------------------------------------------------------------- */

XGR__RPCD_METHOD(xgr__console_m_sessions);
XGR__RPCD_METHOD(xgr__console_m_owners);
XGR__RPCD_METHOD(xgr__console_m_info);

/* ---- console_view.c -------------------------------------------------------------------------- */

XGR__RPCD_METHOD(xgr__console_m_session);
XGR__RPCD_METHOD(xgr__console_m_process);
XGR__RPCD_METHOD(xgr__console_m_registry);

/* ---- console_auth.c ---------------------------------------------------------------------------- */

/* The tables at their caps (0: the defaults of xgr/rpc.h) and their end. */
void xgr__console_auth_init(xgr__console *c, const xgr__console_auth_limits *lim);
void xgr__console_auth_free(xgr__console *c);
/* The address the request's `xgr_console` cookie signs in (lowercase into addr[43]), its session's
 * CSRF token (csrf[65], may be NULL), expiry (ms, may be NULL) and key (key[67], may be NULL: what
 * tags its event streams); false when there is no cookie or its session ended, expired or never was. */
bool xgr__console_signed_in(xgr__console *c, struct MHD_Connection *conn, char addr[43], char csrf[65], int64_t *exp,
                            char key[67]);
/* POST /ui/auth/{nonce,signin,me,signout} (xgr__rpc_post_fn). */
int xgr__console_post(void *ctx, const xgr_rpc_caller *caller, struct MHD_Connection *conn, const char *url,
                      const char *body, size_t len, unsigned *status);
/* The gate of POST /ui/rpc (xgr__rpc_gate_fn): the console's methods only; in permit mode a
 * session's cookie and its X-XGR-CSRF token are required, and caller->signed_in = its address. */
unsigned xgr__console_gate(void *ctx, struct MHD_Connection *conn, xgr_rpc_caller *caller, char addr[43],
                           const char **msg);
/* The sign-in metrics on m (xgr_console_nonces, xgr_console_sessions, their evictions, sign-ins). */
void xgr__console_auth_metrics(xgr__console *c, xgr_metrics *m);

#endif
