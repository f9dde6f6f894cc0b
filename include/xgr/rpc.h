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
 * (a durable commit), not for long waits. One line per request is logged at info level as
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

/* Who is calling, as far as the transport knows (the authorization plumbing of later permits). */
typedef struct xgr_rpc_caller {
  const char *remote;         /* peer address "ip:port" */
  const char *authorization;  /* the Authorization header, or NULL */
} xgr_rpc_caller;

/* A method: read params (borrowed; an object, an array or NULL), set *result (a new reference)
 * and return 0, or return a JSON-RPC error code and fill *err (err->path becomes data.path). */
typedef int (*xgr_rpc_method_fn)(void *ctx, const xgr_rpc_caller *caller, const json_t *params, json_t **result,
                                 xgr_error *err);

typedef struct xgr_rpc_config {
  const char *listen;         /* "127.0.0.1:8729" (port 0: an ephemeral port) */
  size_t max_body;            /* body cap in bytes (default 1 MiB) */
  unsigned max_connections;   /* connection cap (default 1024) */
  unsigned timeout_s;         /* idle connection / header timeout in seconds (default 15) */
  unsigned threads;           /* worker threads (default 4) */
  bool auth_none;             /* no authorization: only allowed on loopback addresses */
  FILE *log;                  /* request log (NULL: no log) */
  bool (*ready)(void *ctx);   /* /readyz; NULL: ready while running */
  void *ready_ctx;
} xgr_rpc_config;

typedef struct xgr_rpc_server xgr_rpc_server;

/* A stopped server with its own metrics registry. Returns NULL on bad config with *err filled. */
xgr_rpc_server *xgr_rpc_server_new(const xgr_rpc_config *cfg, xgr_error *err);
/* Register a method before start; name and ctx are borrowed for the server's life. */
int xgr_rpc_register(xgr_rpc_server *s, const char *name, xgr_rpc_method_fn fn, void *ctx);
int xgr_rpc_start(xgr_rpc_server *s, xgr_error *err);
uint16_t xgr_rpc_port(const xgr_rpc_server *s);     /* the bound port (after start) */
xgr_metrics *xgr_rpc_metrics(xgr_rpc_server *s);    /* owned by the server */
/* Stop accepting, finish requests in flight, close. */
void xgr_rpc_stop(xgr_rpc_server *s);
void xgr_rpc_server_free(xgr_rpc_server *s);

/* Helpers for methods: parameter readers that report -32602 with the field's path. */
int xgr_rpc_param_string(const json_t *params, const char *key, bool required, const char **out, xgr_error *err);
int xgr_rpc_param_object(const json_t *params, const char *key, bool required, const json_t **out, xgr_error *err);
int xgr_rpc_param_uint(const json_t *params, const char *key, bool required, uint64_t *out, xgr_error *err);

#ifdef __cplusplus
}
#endif
#endif
