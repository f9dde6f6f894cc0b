/* server_impl.h — private interface between the files of xgrd's HTTP server (xgr/rpc.h), one
 * room per concern:
 *
 *   server.c     the HTTP front on libmicrohttpd: configuration and life cycle of the listeners,
 *                the request callback (path, method, content type and declared length checks, the
 *                body assembled under the cap), the GET endpoints (/metrics, /healthz, /readyz and
 *                the registered GET handlers of console_service_impl.h), refusals, the request log line and the
 *                request counters.
 *   jsonrpc.c    JSON-RPC 2.0 on an assembled body: the nesting limit, parsing, batches (runs of
 *                concurrent methods on several threads), dispatch to the registered methods, the
 *                error objects and codes.
 *   guard.c      the connection guard: the monotonic clock, per-request deadlines (libmicrohttpd
 *                only counts idle time), the reaper thread that shuts down overdue connections,
 *                and the Host-header check against DNS rebinding.
 *   authorize.c  who the caller is and whether it may act: the permit gate (xgr_rpc_authorize*),
 *                addresses and the claimed caller.
 *
 * Not installed; nothing outside these files includes it (but the unit test of the Host check). Every function here is library-private
 * (xgr__ prefix); the server object is created and freed by server.c, the other files only use it.
 */
#ifndef XGR_RPC_SERVER_IMPL_H
#define XGR_RPC_SERVER_IMPL_H

#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rpc/console_service_impl.h"
#include "xgr/rpc.h"

#define XGR__RPC_MAX_METHODS 96

/* A registered method (name borrowed from the caller of xgr_rpc_register). */
typedef struct xgr__rpc_method {
  const char *name;
  xgr_rpc_method_fn fn;
  void *ctx;
  bool concurrent;   /* see xgr_rpc_set_concurrent */
} xgr__rpc_method;

typedef struct xgr__rpc_batch xgr__rpc_batch;

/* A deferred answer (xgr/rpc.h, "answering later"): part of a request's state in server.c, which
 * sets s and c; xgr_rpc_defer_begin sets finish and ctx (and suspends c); jsonrpc.c keeps the request's id
 * and method name for the answer. A member of a batch has its own (jsonrpc.c sets `of`): its
 * begin and ready count towards the batch, which suspends and resumes the connection once. */
struct xgr_rpc_defer {
  struct xgr_rpc_server *s;
  struct MHD_Connection *c;
  xgr_rpc_finish_fn finish;   /* NULL: the answer is not deferred */
  void *ctx;                  /* finish's (finish frees it) */
  json_t *id;                 /* the request's id (own reference); NULL for a notification */
  const char *name;           /* the registered method (never freed) */
  xgr__rpc_batch *of;         /* a batch member's: the batch it belongs to (borrowed); NULL otherwise */
  xgr__rpc_batch *batch;      /* the request's own: its batch, deferred until its members are ready (owned) */
};

/* A batch being answered (jsonrpc.c): one slot per request of the body. When members defer, the
 * request's df.batch owns it until the last of them is ready and the answer is sent; the
 * connection waits without a thread meanwhile. */
struct xgr__rpc_batch {
  struct xgr_rpc_server *s;
  struct MHD_Connection *c;
  size_t n;
  json_t **outs;              /* each request's response (owned; NULL: none yet, or a notification) */
  const char **names;         /* each request's method for the counters */
  int *codes;                 /* each request's JSON-RPC code; XGR_RPC_DEFERRED while its answer is deferred */
  xgr_rpc_defer *dfs;         /* each request's deferred answer (of = this batch); NULL: members may not defer */
  atomic_size_t pending;      /* members deferred and not ready, plus 1 while the batch is being dispatched */
};

/* One accepted connection as the guard tracks it (guard.c). */
typedef struct xgr__rpc_conn xgr__rpc_conn;

struct xgr_rpc_server {
  xgr_rpc_config cfg;
  pthread_mutex_t cmu;     /* guards conns and reaper_stop (guard.c) */
  pthread_cond_t ccv;
  xgr__rpc_conn *conns;
  pthread_t reaper;
  bool reaper_on, reaper_stop;
  _Atomic bool open;       /* methods and the ready callback may be used (see start_closed) */
  struct sockaddr_in addr;
  struct MHD_Daemon *d;
  uint16_t port;
  xgr__rpc_method methods[XGR__RPC_MAX_METHODS];
  size_t nmethods;
  xgr_metrics *metrics;
  xgr_histogram *latency;
  char host[64];                /* the listen address's host (Host header check) */
  struct sockaddr_in maddr;     /* --metrics-listen */
  struct MHD_Daemon *md;
  char mhost[64];
  uint16_t mport;
  struct { const char *prefix; xgr__rpc_get_fn fn; void *ctx; } gets[8];   /* GET handlers (console_service_impl.h) */
  size_t ngets;
  struct { const char *prefix; xgr__rpc_post_fn fn; void *ctx; } posts[4];   /* POST handlers (console_service_impl.h) */
  size_t nposts;
  xgr__rpc_gate_fn ui_gate;     /* POST /ui/rpc (NULL: not served) */
  void *ui_gate_ctx;
  struct { void (*fn)(void *ctx); void *ctx; } on_stop[4];   /* xgr__rpc_on_stop, in order */
  size_t non_stop;
  atomic_uint deferred;         /* answers deferred and not yet sent (xgr_rpc_stop waits for them) */
  /* The stop's gate for JSON-RPC calls (answer_rpc): a call counts itself in `dispatching` and
   * then reads `stopping`; xgr_rpc_stop sets `stopping` and then waits for `dispatching` to reach
   * 0 (both sequentially consistent), so no call can suspend its connection (defer its answer)
   * after the stop has counted the deferred answers — libmicrohttpd aborts the process when it is
   * stopped with a suspended connection. A call that finds the stop begun answers 503. */
  atomic_bool stopping;
  atomic_uint dispatching;
  bool stop_later;              /* xgr_rpc_stop left the quiesced listener to xgr_rpc_server_free */
  xgr_counter *accept_failed;   /* xgr_http_accept_failures_total */
  pthread_mutex_t qmu;          /* the accept-failure log's quiet period (guards the two below) */
  int64_t quiet_until;          /* monotonic ms: no line before then */
  uint64_t left_out;            /* failures not logged since the last line */
};

/* ---- server.c --------------------------------------------------------------------------------- */

/* Set aside the connection of batch b (some member deferred; the dispatch is over): suspend it,
 * then drop the dispatcher's hold on b->pending; the last member ready (or this call, when they all
 * were already) resumes it. */
void xgr__rpc_batch_suspend(xgr__rpc_batch *b);

/* Count one answered request in xgr_http_requests_total (rpc: a registered method name, a fixed
 * label such as "GET /metrics", or NULL for "-"). */
void xgr__rpc_count(xgr_rpc_server *s, const char *rpc, unsigned status, int code);

/* ---- jsonrpc.c -------------------------------------------------------------------------------- */

/* Answer one POSTed body (body[len], not NUL-terminated; borrowed) for caller (borrowed; its auth
 * is filled from the server's once open): the nesting limit on the raw text, then the parse, then
 * one request or a batch. Returns the response to send (owned by the caller), or NULL when nothing
 * is to be sent (notifications only: HTTP 204). *name gets the method for the log (a registered
 * name, "unknown", "batch", or NULL for a body that names none; never freed), *code its JSON-RPC
 * code (0: success). For a batch (*batch true) each request is counted here (xgr__rpc_count), so
 * the caller counts only single requests. */
json_t *xgr__rpc_answer(xgr_rpc_server *s, const xgr_rpc_caller *caller, const char *body, size_t len,
                        const char **name, int *code, bool *batch);
/* A single request whose method deferred its answer (caller->defer): xgr__rpc_answer returns NULL
 * with *code XGR_RPC_DEFERRED; once the deferral is ready, this runs df's finish and returns the
 * response to send (owned by the caller; NULL for a notification), its JSON-RPC code in *code and
 * the method's name in *name, and clears df. */
json_t *xgr__rpc_finish(xgr_rpc_defer *df, const char **name, int *code);
/* A batch whose members deferred: xgr__rpc_answer returns NULL with *code XGR_RPC_DEFERRED and
 * *batch true, and the request's defer holds the batch (caller->defer->batch). Once the
 * connection is resumed, this runs every deferred member's finish, counts every request, frees
 * the batch (and clears df->batch) and returns the array to send (NULL: notifications only). */
json_t *xgr__rpc_batch_finish(xgr_rpc_defer *df);

/* ---- guard.c ---------------------------------------------------------------------------------- */

/* The guard's lock and condition (server_new) and their end (server_free, after the reaper stopped). */
void xgr__rpc_guard_init(xgr_rpc_server *s);
void xgr__rpc_guard_destroy(xgr_rpc_server *s);
/* libmicrohttpd's MHD_OPTION_NOTIFY_CONNECTION callback (cls = the server): tracks each
 * connection from accept to close. */
void xgr__rpc_notify_conn(void *cls, struct MHD_Connection *c, void **ctx, enum MHD_ConnectionNotificationCode toe);
/* busy: a method starts running for the connection (no deadline while it runs); !busy: its answer
 * is queued, or the request ended: the client gets a whole deadline for what comes next. */
void xgr__rpc_conn_busy(xgr_rpc_server *s, struct MHD_Connection *c, bool busy);
/* Start the reaper (after the listener started; failure to start leaves the deadlines to
 * libmicrohttpd's idle timeout) and stop it (joins; no-op when it does not run). */
void xgr__rpc_reaper_start(xgr_rpc_server *s);
void xgr__rpc_reaper_stop(xgr_rpc_server *s);
/* DNS rebinding: may a request with this Host header reach a server listening on listen_host:port?
 * A server on a loopback address accepts only localhost, 127.x.y.z and [::1]; one on a specific
 * address only that address; one on 0.0.0.0 or :: any host. A Host header with a port must name
 * the listening port. host NULL (HTTP/1.0 without Host) is accepted. A pure function. */
bool xgr__rpc_host_allowed(const char *host, const char *listen_host, unsigned port);
/* Cross-site requests (CSRF): may a POST carrying these headers (each NULL when absent) act? An
 * Origin, when present, must be http://HOST or https://HOST with HOST the request's Host header
 * (same origin); Sec-Fetch-Site, when present, must be "same-origin" or "none". A client that is
 * not a browser sends neither and is accepted (it is no cross-site vector). A pure function. */
bool xgr__rpc_same_origin(const char *origin, const char *host, const char *fetch_site);
/* xgr__rpc_host_allowed for the request's Host header and the listener it came in on. */
bool xgr__rpc_host_ok(struct MHD_Connection *c, const char *host, uint16_t port);

#endif
