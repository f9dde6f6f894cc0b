/* console_service_impl.h — private to src/rpc: the xgr console in the browser (docs/CONSOLE.md).
 *
 * Three parts, all served on xgrd's one listener:
 *  - sse.c: an event hub. The engine's events (one subscriber) become short JSON lines in a
 *    bounded ring; GET /ui/events streams them as server-sent events to each browser, filtered by
 *    owner and session, with the ring position as the event id (a reconnecting browser resumes
 *    where it left off, or is told to reload when the ring has moved past it), under caps per
 *    client, per owner and in all, each ending with its permit or its lifetime.
 *  - console.c (and console_list.c, console_view.c, console_params.c; console_impl.h lists
 *    them): the static pages (web/, embedded at build time), the SVG of an orchestration
 *    (GET /ui/graph.svg?hash=..., xgr/svg.h), and four read-only JSON-RPC methods the pages need
 *    beyond the API's own (a filtered page of an owner's sessions with live counts, a session's
 *    per-step state and join progress with paged processes and history, one process, a
 *    registry entry with its versions, rules and `xgr check` findings). The actions (kill, pause,
 *    resume, wake) are the API's own methods, called by the page.
 *  - server.c: GET handlers registered by path prefix, and a hook run before the server stops.
 */
#ifndef XGR_RPC_CONSOLE_SERVICE_IMPL_H
#define XGR_RPC_CONSOLE_SERVICE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xgr/engine.h"
#include "xgr/metrics.h"
#include "xgr/node.h"
#include "xgr/rpc.h"
#include "xgr/store.h"

struct MHD_Connection;

/* ---- server.c: GET handlers ------------------------------------------------------------------ */
/* Answer a GET or HEAD of a path under a registered prefix: queue a response on c and return an
 * enum MHD_Result (as int). caller is filled as for a JSON-RPC request (borrowed for the call); url
 * is the path without the query string; read query arguments with MHD_lookup_connection_value. */
typedef int (*xgr__rpc_get_fn)(void *ctx, const xgr_rpc_caller *caller, struct MHD_Connection *c, const char *url);
/* Register fn for every path starting with prefix (borrowed, e.g. "/ui"), before xgr_rpc_open (a server
 * opened at start: before xgr_rpc_start); at most 8. Until open, those GETs answer 503. */
int xgr__rpc_register_get(xgr_rpc_server *s, const char *prefix, xgr__rpc_get_fn fn, void *ctx);
/* fn(ctx) runs at the start of xgr_rpc_stop, before the listener closes (the event hub ends its
 * streams there; xgrd answers its deferred validateDataTransfer calls). At most four, run in the
 * order they were added. */
void xgr__rpc_on_stop(xgr_rpc_server *s, void (*fn)(void *ctx), void *ctx);

/* POST handlers: answer a POST of a path under a registered prefix, given its whole body (body[len],
 * borrowed; Content-Type application/json, the same-origin check and the body cap have passed):
 * queue a response on c, set *status to the HTTP status (the log line's) and return an enum
 * MHD_Result. caller as for GET. At most 4, before open. */
typedef int (*xgr__rpc_post_fn)(void *ctx, const xgr_rpc_caller *caller, struct MHD_Connection *c, const char *url,
                                const char *body, size_t len, unsigned *status);
int xgr__rpc_register_post(xgr_rpc_server *s, const char *prefix, xgr__rpc_post_fn fn, void *ctx);
/* JSON-RPC at POST /ui/rpc (the console's): gate runs before the body is answered; it may fill
 * caller (signed_in pointing into addr[43], only) and returns 0 to go on, or an HTTP status to
 * refuse with (*msg says why). Without a gate, /ui/rpc is not served. */
typedef unsigned (*xgr__rpc_gate_fn)(void *ctx, struct MHD_Connection *c, xgr_rpc_caller *caller, char addr[43],
                                     const char **msg);
void xgr__rpc_set_ui_gate(xgr_rpc_server *s, xgr__rpc_gate_fn gate, void *ctx);

/* ---- sse.c: the event hub ------------------------------------------------------------------- */
typedef struct xgr__sse_hub xgr__sse_hub;

/* A hub keeping the last `ring` events (0: 8192) and a keep-alive thread (a comment line every
 * 10 s, so dead browsers are noticed); it wants events while a stream is open and for keep_ms
 * (0: a minute) after one ended or an id was handed out (xgr__sse_wanted). Free with
 * xgr__sse_hub_free after the server stopped. */
xgr__sse_hub *xgr__sse_hub_new(size_t ring, unsigned keep_ms);
void xgr__sse_hub_free(xgr__sse_hub *h);
/* Append one event of session (owner, root) and wake the streams waiting for it. data is one line
 * of JSON, malloc'd and NUL-terminated; the hub takes it over (cut at 8 KiB, newlines blanked) and
 * frees it. Any thread; does not block on I/O. */
void xgr__sse_publish_owned(xgr__sse_hub *h, const char *owner, uint64_t root, char *data);
/* The caps on open streams (0: none) and their longest lifetime (docs/SECURITY.md, "Event streams
 * and waiting calls"). xgrd sets them from --max-streams-per-client, --max-streams-per-owner,
 * --max-streams and --stream-max-secs. */
typedef struct xgr__sse_limits {
  unsigned per_client;   /* streams per client address */
  unsigned per_owner;    /* streams per owner (a stream of every owner counts under "*") */
  unsigned total;        /* streams in all */
  unsigned max_secs;     /* a stream ends this long after it opened */
} xgr__sse_limits;
/* The caps, as the refusal counters name them. */
typedef enum xgr__sse_limit { XGR__SSE_LIMIT_CLIENT, XGR__SSE_LIMIT_OWNER, XGR__SSE_LIMIT_TOTAL, XGR__SSE_LIMIT_N } xgr__sse_limit;
/* Set the caps (any time; streams already open keep theirs). A new hub has none. */
void xgr__sse_set_limits(xgr__sse_hub *h, const xgr__sse_limits *lim);
/* Register the hub's metrics on m: xgr_event_streams (open), xgr_event_streams_refused_total{limit}
 * (client, owner, total) and xgr_event_streams_ended_total{reason} (permit_expired, max_lifetime,
 * signed_out, access_revoked). */
void xgr__sse_metrics(xgr__sse_hub *h, xgr_metrics *m);
/* Streams open now, and streams refused so far by one cap (for tests). */
unsigned xgr__sse_open_streams(xgr__sse_hub *h);
uint64_t xgr__sse_refused(xgr__sse_hub *h, xgr__sse_limit which);

/* What a new stream reads and who holds it (all borrowed for the call). */
typedef struct xgr__sse_open {
  const char *owner;     /* events of this owner (NULL or "": all owners) */
  uint64_t root;         /* of this session (0: all sessions) */
  uint64_t after;        /* from ring position after + 1 (the browser's Last-Event-ID; 0: only new events) */
  const char *client;    /* the client's address the per-client cap counts under (NULL: "?") */
  uint64_t expiry;       /* Unix seconds at which the permit that opened it expires (0: none): it ends then */
  const char *tag;       /* the console sign-in that opened it (NULL: none): xgr__sse_end_tagged ends it */
  const char *grantee;   /* the reader when a grant let it open the stream (NULL: the owner, an operator,
                            or --auth none): its access is decided again (xgr__sse_access) */
  uint64_t gen;          /* the access generation read before that decision (xgr__sse_access.generation) */
} xgr__sse_open;
/* How a stream opened through a grant is decided again while it is open (a grant revoked,
 * narrowed or expired): before each delivery, when generation() moved since its last decision or
 * SSE keep-alive's 10 s passed (a change another cluster node made does not move it), check() is
 * asked again — outside the hub's lock. check: 0 while reader may still read (owner, root), with
 * *expires_s the grant's expiry (Unix s, 0: none); else nonzero with msg[n] saying why. A refused
 * stream sends no more events: one `event: end` {"reason":"access revoked","message":...} and
 * it ends. Both are called from libmicrohttpd's threads and must not block for long. */
typedef struct xgr__sse_access {
  int (*check)(void *ctx, const char *reader, const char *owner, uint64_t root, uint64_t *expires_s, char *msg,
               size_t n);
  uint64_t (*generation)(void *ctx);
  void *ctx;
} xgr__sse_access;
/* Set how grant streams are decided again (before the server starts; copied). Without it they
 * are not: they end at the expiry they opened with. */
void xgr__sse_set_access(xgr__sse_hub *h, const xgr__sse_access *a);
/* Grants changed: every waiting stream opened through a grant decides again now (it ends at once
 * when it lost access), not at its next event or keep-alive. Any thread. */
void xgr__sse_grants_changed(xgr__sse_hub *h);
#define XGR__SSE_TAG 72    /* the longest tag + 1 */
/* End, with `event: end` {"reason":"signed out"}, every open stream opened with tag (its sign-in
 * was signed out or pushed out of the table). Any thread. */
void xgr__sse_end_tagged(xgr__sse_hub *h, const char *tag);
/* Start a stream on c, or refuse it with 429 and a text naming the cap when one is reached (the
 * caller and every other stream are unaffected). An open stream ends, with one `event: end` whose
 * data says why ({"reason":"permit expired","expiry":T}, {"reason":"stream lifetime
 * reached","maxSecs":N} or {"reason":"signed out"}), when its permit expires, its lifetime is over
 * or its sign-in ends (xgr__sse_end_tagged), whichever comes first.
 * Returns an enum MHD_Result. The connection must belong to a daemon with MHD_ALLOW_SUSPEND_RESUME. */
int xgr__sse_serve(xgr__sse_hub *h, struct MHD_Connection *c, const xgr__sse_open *o);
/* End every stream (before the server stops); later xgr__sse_serve calls answer 503. */
void xgr__sse_close(xgr__sse_hub *h);
/* Events published so far (the next event's id - 1). Handing out an id keeps the events that
 * follow for a while (see xgr__sse_wanted): the caller streams from there. */
uint64_t xgr__sse_last_id(xgr__sse_hub *h);
/* Whether events are wanted now: a stream is open, or one ended or an id was handed out (a page
 * about to stream) within the hub's keep time (a minute). When not, the caller leaves the event out (does not
 * even write it) and the hub notes the hole, so that a stream resuming from before it gets
 * `event: reset`. Any thread; cheap when nobody reads (two atomic loads). */
bool xgr__sse_wanted(xgr__sse_hub *h);

/* ---- console.c -------------------------------------------------------------------------------- */
typedef struct xgr__console xgr__console;

/* Signing in to the console (console_auth.c; docs/SECURITY.md, "Console sign-in"): the caps. */
typedef struct xgr__console_auth_limits {
  unsigned max_nonces;     /* sign-in nonces outstanding (--console-max-nonces) */
  unsigned max_sessions;   /* console sessions live (--console-max-sessions) */
  unsigned session_secs;   /* a session's life (--console-session-secs) */
} xgr__console_auth_limits;

/* A console over node n (borrowed; it outlives the console): it reads through the node's queries;
 * its event streams are held to lim (copied). */
xgr__console *xgr__console_new(xgr_node *n, const xgr__sse_limits *lim, const xgr__console_auth_limits *alim);
void xgr__console_free(xgr__console *c);
/* The engine subscriber (xgr_engine_subscribe(e, xgr__console_on_event, c)): publishes each event
 * to the hub, while the hub wants events (xgr__sse_wanted). */
void xgr__console_on_event(void *ctx, const xgr_engine_event *ev);
/* Its interest, for xgr_engine_subscribe_interest(e, xgr__console_on_event, c, xgr__console_interest):
 * every kind of event while the hub wants events, none while nobody reads (so the engine makes
 * none for it); never join trees (its lines do not show them). */
unsigned xgr__console_interest(void *ctx);
/* Register the console's methods and GET handlers (/ui) on s, its stop hook and its metrics. */
int xgr__console_register(xgr__console *c, xgr_rpc_server *s);
/* Grants changed (xgr_manageGrants wrote some): the console's event streams opened through a grant
 * decide again at once (xgr__sse_grants_changed). c may be NULL. */
void xgr__console_grants_changed(xgr__console *c);

/* The embedded assets (generated from web/ at build time by web/embed.py). */
typedef struct xgr__asset {
  const char *path;          /* "/ui/index.html" */
  const char *type;          /* Content-Type */
  const unsigned char *data;
  size_t len;
} xgr__asset;
extern const xgr__asset xgr__console_assets[];
extern const size_t xgr__console_nassets;

#endif
