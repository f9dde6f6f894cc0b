/* server.c — the HTTP front of xgrd's JSON-RPC 2.0 server on libmicrohttpd (see xgr/rpc.h and
 * server_impl.h for the other rooms: JSON-RPC in jsonrpc.c, deadlines and the Host check in
 * guard.c, the permit gate in authorize.c).
 *
 * libmicrohttpd calls handle() several times per request: once with the headers (checks of Host,
 * path, method, content type and declared length happen here; GETs are answered at once), once
 * per chunk of body (appended to a buffer up to the cap; beyond it the rest is read and dropped),
 * and once with no data, when the answer is built (jsonrpc.c) and sent. Every request ends in one
 * log line and in the request counters and latency histogram of the server's metrics registry.
 * This file also owns the server object: configuration, the listeners (the API and the optional
 * --metrics-listen one), opening after recovery, and shutdown.
 */
#include "rpc/server_impl.h"

#include <arpa/inet.h>
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util/alloc.h"
#include "util/clock.h"
#include "xgr/logfmt.h"
#include "xgr/value.h"

/* Per-request state kept in MHD's con_cls. */
typedef struct req {
  char *body;
  size_t len, cap;
  int refuse;              /* HTTP status to answer with instead of processing, 0 if none */
  const char *refuse_msg;
  double t0;
  bool is_post;
  xgr_rpc_defer df;        /* the answer, when the method deferred it (xgr/rpc.h) */
  xgr_rpc_subject subject; /* who acted on which session, for the log line (set by the method) */
  int post;                /* a POST handler's index + 1 (console_service_impl.h), 0: none */
  bool ui_rpc;             /* POST /ui/rpc: JSON-RPC behind the console's gate */
  char signed_in[43];      /* the address the gate found signed in (caller.signed_in) */
} req;

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *type, char *body, size_t len) {
  struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(body);
    return MHD_NO;
  }
  MHD_add_response_header(r, "Content-Type", type);
  enum MHD_Result ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, json_t *j) {
  char *s = xgr_json_dumps(j, 0);
  json_decref(j);
  if (!s) return MHD_NO;
  return send_text(c, status, "application/json", s, strlen(s));
}

static void remote_of(struct MHD_Connection *c, char *buf, size_t n) {
  snprintf(buf, n, "?");
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (ci && ci->client_addr && ci->client_addr->sa_family == AF_INET) {
    const struct sockaddr_in *a = (const struct sockaddr_in *)ci->client_addr;
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
    snprintf(buf, n, "%s:%u", ip, ntohs(a->sin_port));
  }
}

/* The path as logged: libmicrohttpd hands over the path without its query string, so a permit
 * in the query (GET /ui/events?permit=...) never reaches the log; a path that carries `permit=`
 * itself (a '?' sent percent-encoded) has each such value replaced by "REDACTED" too. Into
 * out[n]; returns out, or path when there is nothing to hide. */
static const char *log_path(const char *path, char *out, size_t n) {
  if (!strstr(path, "permit=")) return path;
  size_t k = 0;
  for (const char *p = path; *p && k + 1 < n;) {
    if (!strncmp(p, "permit=", 7)) {
      k += (size_t)snprintf(out + k, n - k, "permit=REDACTED");
      if (k >= n) k = n - 1;
      for (p += 7; *p && *p != '&'; p++) {}
      continue;
    }
    out[k++] = *p++;
  }
  out[k] = '\0';
  return out;
}

static void log_line(xgr_rpc_server *s, struct MHD_Connection *c, const char *http, const char *url, unsigned status,
                     const char *rpc, int code, double ms, const xgr_rpc_subject *sub) {
  if (!s->cfg.log) return;
  char remote[64], hidden[512];
  url = log_path(url, hidden, sizeof hidden);
  remote_of(c, remote, sizeof remote);
  xgr_logfmt l;
  xgr_logfmt_begin(&l, true, "info", "request");
  xgr_logfmt_str(&l, "remote", remote);
  xgr_logfmt_str(&l, "http", http);
  xgr_logfmt_str(&l, "path", url);
  xgr_logfmt_u64(&l, "status", status);
  xgr_logfmt_str(&l, "rpc", rpc ? rpc : "-");
  xgr_logfmt_i64(&l, "code", code);
  if (sub && sub->actor[0]) {   /* a call that changes something: who, and on which session */
    xgr_logfmt_str(&l, "caller", sub->actor);
    if (sub->owner[0]) {
      xgr_logfmt_str(&l, "owner", sub->owner);
      xgr_logfmt_u64(&l, "rootPid", sub->root);
    }
  }
  xgr_logfmt_printf(&l, "ms", "%.3f", ms);
  xgr_logfmt_write(&l, s->cfg.log);
}

void xgr__rpc_count(xgr_rpc_server *s, const char *rpc, unsigned status, int code) {
  char labels[256], m[160];
  xgr_metrics_label_escape(m, sizeof m, rpc ? rpc : "-");
  snprintf(labels, sizeof labels, "method=\"%s\",http=\"%u\",code=\"%d\"", m, status, code);
  xgr_counter_add(xgr_metrics_counter(s->metrics, "xgr_http_requests_total", "HTTP requests by JSON-RPC method, HTTP status and JSON-RPC code", labels), 1);
}

/* The end of every answered POST: counters, latency, log line, and the response (out is taken). */
static enum MHD_Result send_answer(xgr_rpc_server *s, struct MHD_Connection *c, req *r, const char *url,
                                   json_t *out, const char *name, int code, bool batch) {
  if (!batch) xgr__rpc_count(s, name, out ? 200 : 204, code);
  double ms = (xgr__mono_s() - r->t0) * 1e3;
  xgr_histogram_observe(s->latency, ms / 1e3);
  log_line(s, c, "POST", url, out ? 200 : 204, name, code, ms, &r->subject);
  if (!out) return send_text(c, MHD_HTTP_NO_CONTENT, "application/json", NULL, 0);
  return send_json(c, MHD_HTTP_OK, out);
}

static enum MHD_Result refuse(xgr_rpc_server *s, struct MHD_Connection *c, const char *http, const char *url,
                              unsigned status, const char *msg);

static enum MHD_Result answer_rpc(xgr_rpc_server *s, struct MHD_Connection *c, req *r, const char *url) {
  char remote[64];
  remote_of(c, remote, sizeof remote);
  r->df = (xgr_rpc_defer){.s = s, .c = c};
  xgr_rpc_caller caller = {.remote = remote,
                           .authorization = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"),
                           .auth_none = s->cfg.auth_none,
                           .auth = NULL,   /* filled by dispatch_one once the server is open */
                           .defer = &r->df,
                           .traceparent = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "traceparent"),
                           .subject = &r->subject};
  if (r->ui_rpc) {   /* the console's: its gate says who is signed in and which methods it serves */
    const char *msg = "refused";
    caller.auth = s->cfg.auth;
    unsigned st = s->ui_gate(s->ui_gate_ctx, c, &caller, r->signed_in, &msg);
    caller.auth = NULL;
    if (st) return refuse(s, c, "POST", url, st, msg);
  }
  const char *name;
  int code;
  bool batch;
  atomic_fetch_add(&s->dispatching, 1);   /* the stop's gate (server_impl.h): count, then look */
  if (atomic_load(&s->stopping)) {
    atomic_fetch_sub(&s->dispatching, 1);
    return refuse(s, c, "POST", url, MHD_HTTP_SERVICE_UNAVAILABLE, "xgrd is stopping: try again (another node, or once it is back)");
  }
  json_t *out = xgr__rpc_answer(s, &caller, r->body ? r->body : "", r->len, &name, &code, &batch);
  atomic_fetch_sub(&s->dispatching, 1);
  if (code == XGR_RPC_DEFERRED) return MHD_YES;   /* suspended until xgr_rpc_defer_ready */
  return send_answer(s, c, r, url, out, name, code, batch);
}

void xgr_rpc_defer_begin(xgr_rpc_defer *df, xgr_rpc_finish_fn finish, void *ctx) {
  assert(df && df->c && !df->finish && finish);
  df->finish = finish;
  df->ctx = ctx;
  if (df->of) {   /* a batch member: the batch suspends its connection once its dispatch is over */
    atomic_fetch_add(&df->of->pending, 1);
    return;
  }
  atomic_fetch_add(&df->s->deferred, 1);
  /* suspended before the work is handed over, so that its completion (which may come at once,
   * on another thread) always finds the connection suspended */
  MHD_suspend_connection(df->c);
}

void xgr_rpc_defer_ready(xgr_rpc_defer *df) {
  xgr__rpc_batch *b = df->of;
  if (!b) {
    MHD_resume_connection(df->c);
    return;
  }
  /* b lives until its connection is resumed, which only the last one ready does */
  if (atomic_fetch_sub(&b->pending, 1) == 1) MHD_resume_connection(b->c);
}

void xgr__rpc_batch_suspend(xgr__rpc_batch *b) {
  atomic_fetch_add(&b->s->deferred, 1);
  MHD_suspend_connection(b->c);
  if (atomic_fetch_sub(&b->pending, 1) == 1) MHD_resume_connection(b->c);
}

static enum MHD_Result refuse(xgr_rpc_server *s, struct MHD_Connection *c, const char *http, const char *url,
                              unsigned status, const char *msg) {
  log_line(s, c, http, url, status, NULL, 0, 0, NULL);
  xgr__rpc_count(s, NULL, status, 0);
  return send_json(c, status, json_pack("{s:s}", "error", msg));
}

/* The POST handler registered for url's prefix: its index + 1, or 0. */
static int post_handler(xgr_rpc_server *s, const char *url) {
  for (size_t i = 0; i < s->nposts; i++) {
    size_t pl = strlen(s->posts[i].prefix);
    if (!strncmp(url, s->posts[i].prefix, pl) && (url[pl] == '\0' || url[pl] == '/')) return (int)i + 1;
  }
  return 0;
}

/* The caller of a GET or POST handler (remote[64] holds its address). */
static xgr_rpc_caller handler_caller(xgr_rpc_server *s, struct MHD_Connection *c, char remote[64]) {
  remote_of(c, remote, 64);
  return (xgr_rpc_caller){.remote = remote,
                          .authorization = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"),
                          .auth_none = s->cfg.auth_none,
                          .auth = s->cfg.auth};
}

/* A POST handler's request: its body to the handler, then the log line and the counters. */
static enum MHD_Result answer_post(xgr_rpc_server *s, struct MHD_Connection *c, req *r, const char *url) {
  char remote[64];
  xgr_rpc_caller caller = handler_caller(s, c, remote);
  unsigned status = 0;
  size_t i = (size_t)r->post - 1;
  enum MHD_Result ret = (enum MHD_Result)s->posts[i].fn(s->posts[i].ctx, &caller, c, url, r->body, r->len, &status);
  double ms = (xgr__mono_s() - r->t0) * 1e3;
  log_line(s, c, "POST", url, status, NULL, 0, ms, NULL);
  xgr__rpc_count(s, s->posts[i].prefix, status, 0);
  return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *http,
                              const char *version, const char *data, size_t *data_size, void **con_cls) {
  (void)version;
  xgr_rpc_server *s = cls;
  req *r = *con_cls;
  if (!r) {
    r = xgr__xcalloc(1, sizeof *r);
    r->t0 = xgr__mono_s();
    *con_cls = r;
    bool rpc_path = !strcmp(url, "/") || !strcmp(url, "/rpc");
    bool host_ok = xgr__rpc_host_ok(c, s->host, __atomic_load_n(&s->port, __ATOMIC_ACQUIRE));
    if (!host_ok && (!strcmp(http, "GET") || !strcmp(http, "HEAD")))
      return refuse(s, c, http, url, MHD_HTTP_FORBIDDEN, "the Host header does not name this server (DNS rebinding)");
    if (!host_ok) {
      r->refuse = MHD_HTTP_FORBIDDEN;
      r->refuse_msg = "the Host header does not name this server (DNS rebinding)";
    } else if (!strcmp(http, "GET") || !strcmp(http, "HEAD")) {
      if (!strcmp(url, "/metrics") && !s->cfg.metrics_listen) {
        size_t len;
        char *text = xgr_metrics_render(s->metrics, &len);
        xgr__rpc_count(s, "GET /metrics", 200, 0);
        return send_text(c, MHD_HTTP_OK, "text/plain; version=0.0.4", text, len);
      }
      if (!strcmp(url, "/healthz")) return send_text(c, MHD_HTTP_OK, "text/plain", xgr__xstrdup("ok\n"), 3);
      if (!strcmp(url, "/readyz")) {
        bool ready = atomic_load_explicit(&s->open, memory_order_acquire) && (!s->cfg.ready || s->cfg.ready(s->cfg.ready_ctx));
        return send_text(c, ready ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain",
                         xgr__xstrdup(ready ? "ready\n" : "not ready\n"), ready ? 6 : 10);
      }
      /* the GET handlers (the console) and the permit gate are registered while xgrd recovers and
       * published by xgr_rpc_open: until then every other GET is refused as "starting" */
      if (!atomic_load_explicit(&s->open, memory_order_acquire))
        return refuse(s, c, http, url, MHD_HTTP_SERVICE_UNAVAILABLE,
                      "xgrd is starting: it recovers the store's sessions first; retry once GET /readyz answers 200");
      for (size_t i = 0; i < s->ngets; i++) {
        size_t pl = strlen(s->gets[i].prefix);
        if (strncmp(url, s->gets[i].prefix, pl) || (url[pl] != '\0' && url[pl] != '/')) continue;
        char remote[64];
        xgr_rpc_caller caller = handler_caller(s, c, remote);
        return (enum MHD_Result)s->gets[i].fn(s->gets[i].ctx, &caller, c, url);
      }
      return refuse(s, c, http, url, rpc_path ? MHD_HTTP_METHOD_NOT_ALLOWED : MHD_HTTP_NOT_FOUND,
                    rpc_path ? "JSON-RPC takes POST" : "no such path");
    }
    if (r->refuse) {
      /* refused above */
    } else if (strcmp(http, "POST")) {
      r->refuse = MHD_HTTP_METHOD_NOT_ALLOWED;
      r->refuse_msg = "only GET and POST are served";
    } else if (!xgr__rpc_same_origin(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin"),
                                     MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host"),
                                     MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Sec-Fetch-Site"))) {
      r->refuse = MHD_HTTP_FORBIDDEN;
      r->refuse_msg = "cross-origin request refused: the Origin (or Sec-Fetch-Site) is not this server's";
    } else if (!rpc_path && !(r->ui_rpc = s->ui_gate && !strcmp(url, "/ui/rpc")) && !(r->post = post_handler(s, url))) {
      r->refuse = MHD_HTTP_NOT_FOUND;
      r->refuse_msg = "no such path; JSON-RPC is served at /";
    } else {
      r->is_post = true;
      const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
      const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
      if (!ct || strncasecmp(ct, "application/json", 16) || (ct[16] && ct[16] != ';' && ct[16] != ' ')) {
        r->refuse = MHD_HTTP_UNSUPPORTED_MEDIA_TYPE;
        r->refuse_msg = "Content-Type must be application/json";
      } else if (cl && strtoull(cl, NULL, 10) > s->cfg.max_body) {
        r->refuse = MHD_HTTP_CONTENT_TOO_LARGE;
        r->refuse_msg = "request body larger than the server's cap";
      }
    }
    return MHD_YES;
  }
  if (r->df.finish || r->df.batch) {   /* resumed: the deferred answer is ready */
    const char *name = "batch";
    int code = 0;
    bool batch = r->df.batch;
    json_t *out = batch ? xgr__rpc_batch_finish(&r->df) : xgr__rpc_finish(&r->df, &name, &code);
    enum MHD_Result ret = send_answer(s, c, r, url, out, name, code, batch);
    xgr__rpc_conn_busy(s, c, false);
    atomic_fetch_sub(&s->deferred, 1);
    return ret;
  }
  if (*data_size) {
    if (!r->refuse) {
      if (r->len + *data_size > s->cfg.max_body) {
        r->refuse = MHD_HTTP_CONTENT_TOO_LARGE;
        r->refuse_msg = "request body larger than the server's cap";
        free(r->body);
        r->body = NULL;
        r->len = r->cap = 0;
      } else {
        if (r->len + *data_size > r->cap) {
          /* 1 KiB first: a typical body (a permit-carrying enqueue is ~1 KB) then stays within
           * malloc's per-thread cache instead of taking an arena lock for 4 KiB per request */
          size_t nc = (r->cap ? r->cap * 2 : 1024);
          while (nc < r->len + *data_size) nc *= 2;
          r->body = xgr__xrealloc(r->body, nc);
          r->cap = nc;
        }
        memcpy(r->body + r->len, data, *data_size);
        r->len += *data_size;
      }
    }
    *data_size = 0;
    return MHD_YES;
  }
  if (r->refuse) return refuse(s, c, http, url, (unsigned)r->refuse, r->refuse_msg);
  if (!atomic_load_explicit(&s->open, memory_order_acquire) && (r->post || r->ui_rpc))
    return refuse(s, c, http, url, MHD_HTTP_SERVICE_UNAVAILABLE,
                  "xgrd is starting: it recovers the store's sessions first; retry once GET /readyz answers 200");
  if (r->post) return answer_post(s, c, r, url);
  xgr__rpc_conn_busy(s, c, true);
  enum MHD_Result ret = answer_rpc(s, c, r, url);
  if (!r->df.finish && !r->df.batch) xgr__rpc_conn_busy(s, c, false);   /* a deferred answer stays busy until sent */
  return ret;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
  (void)toe;
  xgr__rpc_conn_busy(cls, c, false);   /* the next request on a kept-alive connection gets its own deadline */
  req *r = *con_cls;
  if (r) {
    free(r->body);
    free(r);
  }
  *con_cls = NULL;
}

/* "IPv4:PORT" into addr and its host part into host[64]; -1 when malformed. */
static int parse_listen(const char *listen, struct sockaddr_in *addr, char host[64]) {
  const char *colon = strrchr(listen, ':');
  if (!colon || (size_t)(colon - listen) >= 64) return -1;
  memcpy(host, listen, (size_t)(colon - listen));
  host[colon - listen] = '\0';
  char *end;
  unsigned long port = strtoul(colon + 1, &end, 10);
  memset(addr, 0, sizeof *addr);
  addr->sin_family = AF_INET;
  if (*end || !colon[1] || port > 65535 ||
      inet_pton(AF_INET, !strcmp(host, "localhost") ? "127.0.0.1" : host, &addr->sin_addr) != 1)
    return -1;
  addr->sin_port = htons((uint16_t)port);
  return 0;
}

/* The --metrics-listen listener: GET /metrics only. */
static enum MHD_Result handle_metrics(void *cls, struct MHD_Connection *c, const char *url, const char *http,
                                      const char *version, const char *data, size_t *data_size, void **con_cls) {
  (void)version, (void)data, (void)data_size, (void)con_cls;
  xgr_rpc_server *s = cls;
  if (!xgr__rpc_host_ok(c, s->mhost, s->mport))
    return send_text(c, MHD_HTTP_FORBIDDEN, "text/plain", xgr__xstrdup("Host header refused\n"), 20);
  if ((strcmp(http, "GET") && strcmp(http, "HEAD")) || strcmp(url, "/metrics"))
    return send_text(c, MHD_HTTP_NOT_FOUND, "text/plain", xgr__xstrdup("only GET /metrics here\n"), 23);
  size_t len;
  char *text = xgr_metrics_render(s->metrics, &len);
  xgr__rpc_count(s, "GET /metrics", 200, 0);
  return send_text(c, MHD_HTTP_OK, "text/plain; version=0.0.4", text, len);
}

xgr_rpc_server *xgr_rpc_server_new(const xgr_rpc_config *cfg, xgr_error *err) {
  xgr_rpc_server *s = xgr__xcalloc(1, sizeof *s);
  s->cfg = *cfg;
  xgr__rpc_guard_init(s);
  atomic_init(&s->open, !cfg->start_closed);
  if (!s->cfg.max_body) s->cfg.max_body = 1u << 20;
  if (!s->cfg.max_connections) s->cfg.max_connections = 1024;
  if (!s->cfg.timeout_s) s->cfg.timeout_s = 15;
  if (!s->cfg.threads) s->cfg.threads = 4;
  const char *listen = cfg->listen ? cfg->listen : "127.0.0.1:8729";
  const char *colon = strrchr(listen, ':');
  char host[64];
  if (!colon || (size_t)(colon - listen) >= sizeof host) {
    xgr_error_set(err, XGR_EINVAL, "listen", "--listen is \"%s\"; expected IPv4:PORT such as 127.0.0.1:8729", listen);
    free(s);
    return NULL;
  }
  memcpy(host, listen, (size_t)(colon - listen));
  host[colon - listen] = '\0';
  char *end;
  unsigned long port = strtoul(colon + 1, &end, 10);
  s->addr.sin_family = AF_INET;
  if (*end || port > 65535 || inet_pton(AF_INET, !strcmp(host, "localhost") ? "127.0.0.1" : host, &s->addr.sin_addr) != 1) {
    xgr_error_set(err, XGR_EINVAL, "listen", "--listen is \"%s\"; expected IPv4:PORT such as 127.0.0.1:8729", listen);
    free(s);
    return NULL;
  }
  s->addr.sin_port = htons((uint16_t)port);
  snprintf(s->host, sizeof s->host, "%s", host);
  if (cfg->metrics_listen && parse_listen(cfg->metrics_listen, &s->maddr, s->mhost)) {
    xgr_error_set(err, XGR_EINVAL, "metrics-listen", "--metrics-listen is \"%s\"; expected IPv4:PORT",
                  cfg->metrics_listen);
    free(s);
    return NULL;
  }
  if (!s->cfg.auth_none && !s->cfg.auth) {
    xgr_error_set(err, XGR_EINVAL, "auth", "no authorization configured: --auth permits (the default) or --auth none");
    free(s);
    return NULL;
  }
  if (s->cfg.auth_none && (ntohl(s->addr.sin_addr.s_addr) >> 24) != 127) {
    xgr_error_set(err, XGR_EPERM, "listen",
                  "--auth none is only allowed on a loopback address (127.0.0.0/8), not %s", host);
    free(s);
    return NULL;
  }
  s->metrics = xgr_metrics_new();
  s->latency = xgr_metrics_histogram(s->metrics, "xgr_http_request_seconds", "Time to answer a JSON-RPC POST", "",
                                     xgr_metrics_latency_buckets, xgr_metrics_latency_nbuckets);
  s->accept_failed = xgr_metrics_counter(s->metrics, "xgr_http_accept_failures_total",
                                         "Connections the listener could not accept (out of file descriptors or memory)", "");
  pthread_mutex_init(&s->qmu, NULL);
  return s;
}

/* libmicrohttpd's error log (MHD_USE_ERROR_LOG): only the listener's accept failures matter here —
 * "Error accepting connection: Too many open files", "Hit process or system resource limit ..." —
 * when MHD stops accepting until a connection closes. Issue 38, finding 6: xgrd out of descriptors
 * stopped accepting and said nothing. They are counted and logged at most once per 10 s; MHD's
 * other messages (a client that went away, ...) are per-connection noise and dropped. */
#define ACCEPT_QUIET_MS 10000
static void mhd_log(void *cls, const char *fmt, va_list ap) {
  xgr_rpc_server *s = cls;
  char msg[256];
  vsnprintf(msg, sizeof msg, fmt, ap);
  if (!strstr(msg, "accepting connection") && !strstr(msg, "resource limit")) return;
  size_t n = strlen(msg);
  while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' ')) msg[--n] = 0;
  if (strstr(msg, "accepting connection")) xgr_counter_add(s->accept_failed, 1);
  if (!s->cfg.errlog) return;
  int64_t now = xgr__mono_ms();
  pthread_mutex_lock(&s->qmu);
  uint64_t left_out = 0;
  bool say = now >= s->quiet_until;
  if (say) {
    left_out = s->left_out;
    s->left_out = 0;
    s->quiet_until = now + ACCEPT_QUIET_MS;
  } else {
    s->left_out++;
  }
  pthread_mutex_unlock(&s->qmu);
  if (!say) return;
  xgr_logfmt l;
  xgr_logfmt_begin(&l, true, "error", "cannot accept connections");
  xgr_logfmt_quoted(&l, "error", msg);
  xgr_logfmt_quoted(&l, "hint", "out of file descriptors? raise ulimit -n, or lower --max-connections / --max-outbound");
  if (left_out) xgr_logfmt_u64(&l, "repeated", left_out);
  xgr_logfmt_write(&l, s->cfg.errlog);
}

int xgr_rpc_start(xgr_rpc_server *s, xgr_error *err) {
  /* no MHD_OPTION_LISTENING_ADDRESS_REUSE: it sets SO_REUSEPORT, and a second xgrd on the same
   * port would then share it silently instead of failing (SO_REUSEADDR, MHD's default, is kept so
   * a restart does not wait for TIME_WAIT) */
  s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_TURBO | MHD_USE_ITC |
                              MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0, NULL, NULL, handle, s,
                          MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
                          MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&s->addr, MHD_OPTION_THREAD_POOL_SIZE,
                          (unsigned)s->cfg.threads, MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->cfg.max_connections,
                          MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->cfg.timeout_s, MHD_OPTION_NOTIFY_COMPLETED,
                          completed, s, MHD_OPTION_NOTIFY_CONNECTION, xgr__rpc_notify_conn, s,
                          MHD_OPTION_END);
  if (!s->d) {
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &s->addr.sin_addr, ip, sizeof ip);
    return xgr_error_set(err, XGR_EIO, "listen", "cannot listen on %s:%u (address in use or not allowed)", ip,
                         ntohs(s->addr.sin_port));
  }
  xgr__rpc_reaper_start(s);
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
  /* atomic: the listener's threads already answer (the Host check reads it); a client cannot know
   * a port given as 0 before this is set */
  __atomic_store_n(&s->port, di ? di->port : ntohs(s->addr.sin_port), __ATOMIC_RELEASE);
  if (s->cfg.metrics_listen) {
    s->md = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, 0, NULL, NULL, handle_metrics, s,
                             MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&s->maddr, MHD_OPTION_CONNECTION_LIMIT, 64u,
                             MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->cfg.timeout_s,
                             MHD_OPTION_LISTENING_ADDRESS_REUSE, 1, MHD_OPTION_END);
    if (!s->md) {
      MHD_stop_daemon(s->d);
      s->d = NULL;
      return xgr_error_set(err, XGR_EIO, "metrics-listen", "cannot listen on %s for /metrics", s->cfg.metrics_listen);
    }
    di = MHD_get_daemon_info(s->md, MHD_DAEMON_INFO_BIND_PORT);
    s->mport = di ? di->port : ntohs(s->maddr.sin_port);
  }
  return 0;
}

void xgr_rpc_set_auth(xgr_rpc_server *s, const struct xgr_auth *auth) {
  assert(!atomic_load(&s->open));
  assert(auth || s->cfg.auth_none);
  s->cfg.auth = auth;
}

void xgr_rpc_open(xgr_rpc_server *s, bool (*ready)(void *ctx), void *ctx) {
  assert(!atomic_load(&s->open));
  s->cfg.ready = ready;
  s->cfg.ready_ctx = ctx;
  atomic_store_explicit(&s->open, true, memory_order_release);   /* publishes the methods and ready */
}

uint16_t xgr_rpc_port(const xgr_rpc_server *s) { return __atomic_load_n(&s->port, __ATOMIC_ACQUIRE); }
xgr_metrics *xgr_rpc_metrics(xgr_rpc_server *s) { return s->metrics; }

int xgr__rpc_register_get(xgr_rpc_server *s, const char *prefix, xgr__rpc_get_fn fn, void *ctx) {
  assert(!atomic_load(&s->open));   /* handle() reads the table without a lock once open */
  if (s->ngets == sizeof s->gets / sizeof s->gets[0]) return XGR_ELIMIT;
  s->gets[s->ngets].prefix = prefix;
  s->gets[s->ngets].fn = fn;
  s->gets[s->ngets++].ctx = ctx;
  return 0;
}

int xgr__rpc_register_post(xgr_rpc_server *s, const char *prefix, xgr__rpc_post_fn fn, void *ctx) {
  assert(!atomic_load(&s->open));
  if (s->nposts == sizeof s->posts / sizeof s->posts[0]) return XGR_ELIMIT;
  s->posts[s->nposts].prefix = prefix;
  s->posts[s->nposts].fn = fn;
  s->posts[s->nposts++].ctx = ctx;
  return 0;
}

void xgr__rpc_set_ui_gate(xgr_rpc_server *s, xgr__rpc_gate_fn gate, void *ctx) {
  assert(!atomic_load(&s->open));
  s->ui_gate = gate;
  s->ui_gate_ctx = ctx;
}

void xgr__rpc_on_stop(xgr_rpc_server *s, void (*fn)(void *ctx), void *ctx) {
  assert(s->non_stop < sizeof s->on_stop / sizeof s->on_stop[0]);
  s->on_stop[s->non_stop].fn = fn;
  s->on_stop[s->non_stop++].ctx = ctx;
}

/* Wait up to 10 s for the calls being dispatched to return and the deferred answers to go out;
 * whether none is left. Once `stopping` is set no call starts (answer_rpc), so none can defer an
 * answer after this has seen `deferred` at 0. */
static bool deferred_sent(xgr_rpc_server *s) {
  for (int i = 0; (atomic_load(&s->dispatching) || atomic_load(&s->deferred)) && i < 10000; i++) {
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  return !atomic_load(&s->dispatching) && !atomic_load(&s->deferred);
}

void xgr_rpc_stop(xgr_rpc_server *s) {
  atomic_store(&s->stopping, true);
  if (s->d && !s->stop_later) {
    for (size_t i = 0; i < s->non_stop; i++) s->on_stop[i].fn(s->on_stop[i].ctx);
    /* deferred answers wait for commits, which end (the store is still open), or were woken by a
     * stop hook (xgrd's first-step waiters): send them before the listener goes, as a blocked
     * method would have (at most 10 s). One still waiting (a store that does not answer) keeps
     * its connection suspended, and libmicrohttpd must not be stopped so (it aborts the
     * process): the listener stops taking connections now, and goes at xgr_rpc_server_free, once
     * the service's teardown has answered the rest (a session's start that never committed is
     * answered when its engine goes) */
    if (!deferred_sent(s)) {
      s->stop_later = true;
      MHD_socket ls = MHD_quiesce_daemon(s->d);
      if (ls != MHD_INVALID_SOCKET) close(ls);
      return;
    }
  } else if (s->d && !deferred_sent(s)) {   /* the second call, and answers are still suspended */
    if (s->cfg.log) {
      xgr_logfmt l;
      xgr_logfmt_begin(&l, true, "warn", "answers still waiting for the store at the stop were not sent");
      xgr_logfmt_u64(&l, "answers", atomic_load(&s->deferred));
      xgr_logfmt_write(&l, s->cfg.log);
    }
    s->d = NULL;   /* left as it is: stopping it with suspended connections aborts the process */
  }
  xgr__rpc_reaper_stop(s);
  if (s->d) MHD_stop_daemon(s->d);
  s->d = NULL;
  if (s->md) MHD_stop_daemon(s->md);
  s->md = NULL;
}

uint16_t xgr_rpc_metrics_port(const xgr_rpc_server *s) { return s->mport; }

void xgr_rpc_server_free(xgr_rpc_server *s) {
  if (!s) return;
  xgr_rpc_stop(s);
  xgr_metrics_free(s->metrics);
  xgr__rpc_guard_destroy(s);
  pthread_mutex_destroy(&s->qmu);
  free(s);
}

