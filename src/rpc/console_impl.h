/* console_impl.h — private interface between the files of the console's server side (console_service_impl.h
 * says what the console is), one room per concern:
 *
 *   console.c         life, the cache of parsed orchestrations by hash, the engine events on the
 *                     hub, and GET /ui (pages, /ui/graph.svg, /ui/events).
 *   console_params.c  the parameter rules the read methods share, and status names.
 *   console_list.c    xgr.console.sessions, xgr.console.owners, xgr.console.info.
 *   console_view.c    xgr.console.session, xgr.console.process, xgr.console.registry.
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

struct xgr__console {
  xgr_node *n;                  /* borrowed: every read goes through its queries (xgr/node.h) */
  xgr__sse_hub *hub;
  pthread_mutex_t mu;           /* the cache */
  xgr__console_orch cache[XGR__CONSOLE_CACHE_MAX];
  uint64_t tick;
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
/* The same, with the verified permit in *p (p->kind 0 under --auth none; p may be NULL). */
int xgr__console_read_owner_permit(xgr__console *c, const xgr_rpc_caller *caller, const json_t *o, uint64_t root,
                                   char *owner, size_t n, xgr_permit *p, xgr_node_access_info *info, xgr_error *err);
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

#endif
