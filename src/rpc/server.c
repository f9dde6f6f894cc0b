/* server.c — JSON-RPC 2.0 over HTTP on libmicrohttpd (see xgr/rpc.h).
 *
 * libmicrohttpd calls handle() several times per request: once with the headers (checks of path,
 * method, content type and declared length happen here), once per chunk of body (appended to a
 * buffer up to the cap; beyond it the rest is read and dropped), and once with no data, when the
 * answer is built: the body is parsed, each request of a batch dispatched to its method, and the
 * responses (none for notifications) sent back. Every request ends in one log line and in the
 * request counters and latency histogram of the server's metrics registry.
 */
#include "xgr/rpc.h"
#include "xgr/auth.h"
#include "rpc/console.h"
#include "xgr/value.h"
#include "util/alloc.h"

#include <arpa/inet.h>
#include <assert.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>

#define MAX_METHODS 64

typedef struct method {
  const char *name;
  xgr_rpc_method_fn fn;
  void *ctx;
  bool concurrent;   /* see xgr_rpc_set_concurrent */
} method;

/* Threads that run one batch's run of concurrent requests (at most). */
#define BATCH_THREADS 16

/* One accepted connection, for the request deadline: libmicrohttpd's own timeout only counts
 * idle time, so a client trickling one byte a second would hold its connection forever. */
typedef struct conn {
  struct conn *prev, *next;
  int fd;
  double base;   /* when the current request's clock started (accept, or the previous answer) */
  bool busy;     /* a method runs for it: its own waits are bounded elsewhere */
} conn;

struct xgr_rpc_server {
  xgr_rpc_config cfg;
  pthread_mutex_t cmu;     /* guards conns and reaper_stop */
  pthread_cond_t ccv;
  conn *conns;
  pthread_t reaper;
  bool reaper_on, reaper_stop;
  _Atomic bool open;       /* methods and the ready callback may be used (see start_closed) */
  struct sockaddr_in addr;
  struct MHD_Daemon *d;
  uint16_t port;
  method methods[MAX_METHODS];
  size_t nmethods;
  xgr_metrics *metrics;
  xgr_histogram *latency;
  char host[64];                /* the listen address's host (Host header check) */
  struct sockaddr_in maddr;     /* --metrics-listen */
  struct MHD_Daemon *md;
  char mhost[64];
  uint16_t mport;
  struct { const char *prefix; xgr__rpc_get_fn fn; void *ctx; } gets[8];   /* GET handlers (console.h) */
  size_t ngets;
  void (*on_stop)(void *ctx);
  void *on_stop_ctx;
};

/* Per-request state kept in MHD's con_cls. */
typedef struct req {
  char *body;
  size_t len, cap;
  int refuse;              /* HTTP status to answer with instead of processing, 0 if none */
  const char *refuse_msg;
  double t0;
  bool is_post;
} req;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int xgr_rpc_code_for(int c) {
  switch (c) {
    case XGR_ESCHEMA:
    case XGR_EINVAL:
    case XGR_EPARSE:
    case XGR_EIDENT:
    case XGR_EKRANGE:
    case XGR_EREF:
    case XGR_ERULEREF:
    case XGR_ELEGACY:
    case XGR_ENORULE:
    case XGR_EDUP:
      return XGR_RPC_INVALID_PARAMS;
    case XGR_ELIMIT: return XGR_RPC_LIMITS_EXCEEDED;
    case XGR_ENOTFOUND: return XGR_RPC_NOT_FOUND;
    case XGR_EPERM: return XGR_RPC_NOT_PERMITTED;
    case XGR_ECONFLICT:
    case XGR_ESTATE: return XGR_RPC_CONFLICT;
    case XGR_EMISMATCH: return XGR_RPC_REGISTRY_MISMATCH;
    case XGR_EIO: return XGR_RPC_UNAVAILABLE;
    default: return XGR_RPC_INTERNAL_ERROR;
  }
}

static const char *code_message(int code) {
  switch (code) {
    case XGR_RPC_PARSE_ERROR: return "Parse error";
    case XGR_RPC_INVALID_REQUEST: return "Invalid Request";
    case XGR_RPC_METHOD_NOT_FOUND: return "Method not found";
    case XGR_RPC_INVALID_PARAMS: return "Invalid params";
    case XGR_RPC_NOT_FOUND: return "Not found";
    case XGR_RPC_LIMITS_EXCEEDED: return "Limits exceeded";
    case XGR_RPC_REGISTRY_MISMATCH: return "Registry mismatch";
    case XGR_RPC_NOT_PERMITTED: return "Not permitted";
    case XGR_RPC_CONFLICT: return "Conflict";
    case XGR_RPC_UNAVAILABLE: return "Unavailable";
    default: return "Internal error";
  }
}

static json_t *error_obj(int code, const xgr_error *e) {
  json_t *err = json_pack("{s:i, s:s}", "code", code,
                          "message", e && e->message[0] ? e->message : code_message(code));
  if (e && (e->path[0] || e->code)) {
    json_t *data = json_object();
    if (e->path[0]) json_object_set_new(data, "path", json_string(e->path));
    if (e->code) json_object_set_new(data, "error", json_string(xgr_errcode_name(e->code)));
    json_object_set_new(err, "data", data);
  }
  return err;
}

static json_t *response(json_t *id, json_t *result, json_t *error) {
  json_t *r = json_pack("{s:s}", "jsonrpc", "2.0");
  if (error) json_object_set_new(r, "error", error);
  else json_object_set_new(r, "result", result ? result : json_null());
  json_object_set(r, "id", id ? id : json_null());
  return r;
}

/* Dispatch one request object; NULL for a notification. *name gets the method (for logs). */
static json_t *dispatch_one(xgr_rpc_server *s, const xgr_rpc_caller *caller, json_t *rq, const char **name, int *code) {
  *code = 0;
  xgr_error e;
  xgr_error_clear(&e);
  if (!json_is_object(rq)) {
    *code = XGR_RPC_INVALID_REQUEST;
    xgr_error_set(&e, 0, NULL, "a request is an object {\"jsonrpc\":\"2.0\",\"method\",\"params\",\"id\"}");
    return response(NULL, NULL, error_obj(*code, &e));
  }
  json_t *id = json_object_get(rq, "id");
  const json_t *ver = json_object_get(rq, "jsonrpc"), *m = json_object_get(rq, "method"),
               *params = json_object_get(rq, "params");
  if (id && !json_is_string(id) && !json_is_number(id) && !json_is_null(id)) {
    *code = XGR_RPC_INVALID_REQUEST;
    xgr_error_set(&e, 0, "id", "id must be a string, a number or null");
    return response(NULL, NULL, error_obj(*code, &e));
  }
  if (!json_is_string(ver) || strcmp(json_string_value(ver), "2.0")) {
    *code = XGR_RPC_INVALID_REQUEST;
    xgr_error_set(&e, 0, "jsonrpc", "\"jsonrpc\" must be \"2.0\"");
  } else if (!json_is_string(m)) {
    *code = XGR_RPC_INVALID_REQUEST;
    xgr_error_set(&e, 0, "method", "\"method\" must be a string");
  } else if (params && !json_is_object(params) && !json_is_array(params)) {
    *code = XGR_RPC_INVALID_REQUEST;
    xgr_error_set(&e, 0, "params", "\"params\" must be an object or an array");
  }
  if (!*code && !atomic_load_explicit(&s->open, memory_order_acquire)) {
    *code = XGR_RPC_UNAVAILABLE;
    xgr_error_set(&e, XGR_EIO, NULL,
                  "xgrd is starting: it recovers the store's sessions first; retry once GET /readyz answers 200");
  }
  if (*code) return response(id, NULL, error_obj(*code, &e));
  /* the permit gate is read only once the server is open (xgr_rpc_set_auth happens before that) */
  xgr_rpc_caller opened = *caller;
  opened.auth = s->cfg.auth;
  caller = &opened;
  const char *asked = json_string_value(m);
  method *mt = NULL;
  for (size_t i = 0; i < s->nmethods && !mt; i++)
    if (!strcmp(s->methods[i].name, asked)) mt = &s->methods[i];
  /* logs and metrics only ever see a registered name: a client cannot mint label values */
  *name = mt ? mt->name : "unknown";
  json_t *result = NULL, *err = NULL;
  if (!mt) {
    *code = XGR_RPC_METHOD_NOT_FOUND;
    xgr_error_set(&e, 0, NULL, "method \"%.100s\" does not exist", asked);
    err = error_obj(*code, &e);
  } else {
    int rc = mt->fn(mt->ctx, caller, params, &result, &e);
    if (rc) {
      *code = rc;
      err = error_obj(rc, &e);
      json_decref(result);
      result = NULL;
    }
  }
  if (!id) {   /* a notification gets no response */
    json_decref(result);
    json_decref(err);
    return NULL;
  }
  return response(id, result, err);
}

/* The registered method a request object names, if any (for the batch planner). */
static const method *method_of(const xgr_rpc_server *s, const json_t *rq) {
  const char *m = json_string_value(json_object_get(rq, "method"));
  if (!m) return NULL;
  for (size_t i = 0; i < s->nmethods; i++)
    if (!strcmp(s->methods[i].name, m)) return &s->methods[i];
  return NULL;
}

/* A run of a batch dispatched by several threads: each takes the next index. */
typedef struct batch_run {
  xgr_rpc_server *s;
  const xgr_rpc_caller *caller;
  json_t *body;
  size_t from, to;
  _Atomic size_t next;
  json_t **out;
  const char **names;
  int *codes;
} batch_run;

static void *batch_worker(void *arg) {
  batch_run *b = arg;
  for (;;) {
    size_t i = atomic_fetch_add(&b->next, 1);
    if (i >= b->to) return NULL;
    b->out[i] = dispatch_one(b->s, b->caller, json_array_get(b->body, i), &b->names[i], &b->codes[i]);
  }
}

/* Dispatch every request of a batch: runs of consecutive concurrent requests (xgr_rpc_set_concurrent)
 * on up to BATCH_THREADS threads, the rest in order. out/names/codes have one slot per request. */
static void dispatch_batch(xgr_rpc_server *s, const xgr_rpc_caller *caller, json_t *body, json_t **out,
                           const char **names, int *codes) {
  size_t n = json_array_size(body);
  bool open = atomic_load_explicit(&s->open, memory_order_acquire);
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (open && j < n) {
      const method *m = method_of(s, json_array_get(body, j));
      if (!m || !m->concurrent) break;
      j++;
    }
    if (j - i < 2) {
      out[i] = dispatch_one(s, caller, json_array_get(body, i), &names[i], &codes[i]);
      i++;
      continue;
    }
    batch_run b = {.s = s, .caller = caller, .body = body, .from = i, .to = j, .out = out, .names = names,
                   .codes = codes};
    atomic_init(&b.next, i);
    pthread_t th[BATCH_THREADS];
    size_t nt = j - i < BATCH_THREADS ? j - i : BATCH_THREADS, started = 0;
    for (size_t k = 1; k < nt; k++)
      if (pthread_create(&th[started], NULL, batch_worker, &b) == 0) started++;
    batch_worker(&b);   /* this thread works too */
    for (size_t k = 0; k < started; k++) pthread_join(th[k], NULL);
    i = j;
  }
}

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

static void log_line(xgr_rpc_server *s, struct MHD_Connection *c, const char *http, const char *url, unsigned status,
                     const char *rpc, int code, double ms) {
  if (!s->cfg.log) return;
  char remote[64];
  remote_of(c, remote, sizeof remote);
  struct timeval tv;
  gettimeofday(&tv, NULL);
  struct tm tm;
  gmtime_r(&tv.tv_sec, &tm);
  char ts[32];
  strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
  fprintf(s->cfg.log, "ts=%s.%03ldZ level=info msg=request remote=%s http=%s path=%s status=%u rpc=%s code=%d ms=%.3f\n", ts,
          (long)(tv.tv_usec / 1000), remote, http, url, status, rpc ? rpc : "-", code, ms);
  fflush(s->cfg.log);
}

static void count(xgr_rpc_server *s, const char *rpc, unsigned status, int code) {
  char labels[256], m[160];
  xgr_metrics_label_escape(m, sizeof m, rpc ? rpc : "-");
  snprintf(labels, sizeof labels, "method=\"%s\",http=\"%u\",code=\"%d\"", m, status, code);
  xgr_counter_add(xgr_metrics_counter(s->metrics, "xgr_http_requests_total", "HTTP requests by JSON-RPC method, HTTP status and JSON-RPC code", labels), 1);
}

static conn *conn_of(struct MHD_Connection *c) {
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return ci ? ci->socket_context : NULL;
}

/* busy: a method starts running for the connection; !busy: its answer is queued, the client gets a
 * whole deadline to take it. */
static void conn_busy(xgr_rpc_server *s, struct MHD_Connection *c, bool busy) {
  conn *k = conn_of(c);
  if (!k) return;
  pthread_mutex_lock(&s->cmu);
  k->busy = busy;
  k->base = now_s();
  pthread_mutex_unlock(&s->cmu);
}

static void notify_conn(void *cls, struct MHD_Connection *c, void **ctx, enum MHD_ConnectionNotificationCode toe) {
  xgr_rpc_server *s = cls;
  if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    conn *k = calloc(1, sizeof *k);
    if (!k || !ci) {
      free(k);
      return;
    }
    k->fd = ci->connect_fd;
    k->base = now_s();
    pthread_mutex_lock(&s->cmu);
    k->next = s->conns;
    if (s->conns) s->conns->prev = k;
    s->conns = k;
    pthread_mutex_unlock(&s->cmu);
    *ctx = k;
  } else if (*ctx) {
    /* libmicrohttpd reports the close before it closes the socket, so the reaper never shuts
     * down a descriptor that was reused */
    conn *k = *ctx;
    pthread_mutex_lock(&s->cmu);
    if (k->prev) k->prev->next = k->next;
    else s->conns = k->next;
    if (k->next) k->next->prev = k->prev;
    pthread_mutex_unlock(&s->cmu);
    free(k);
    *ctx = NULL;
  }
}

/* Shut down every connection whose request (or the taking of its answer) has lasted longer than
 * --timeout; libmicrohttpd then sees the socket fail and closes it. */
static void *reaper_main(void *arg) {
  xgr_rpc_server *s = arg;
  pthread_mutex_lock(&s->cmu);
  while (!s->reaper_stop) {
    double now = now_s();
    for (conn *k = s->conns; k; k = k->next)
      if (!k->busy && now - k->base > (double)s->cfg.timeout_s) {
        shutdown(k->fd, SHUT_RD);
        k->base = now;   /* once per deadline */
      }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 200 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&s->ccv, &s->cmu, &ts);
  }
  pthread_mutex_unlock(&s->cmu);
  return NULL;
}

static enum MHD_Result answer_rpc(xgr_rpc_server *s, struct MHD_Connection *c, req *r, const char *url) {
  char remote[64];
  remote_of(c, remote, sizeof remote);
  xgr_rpc_caller caller = {.remote = remote,
                           .authorization = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"),
                           .auth_none = s->cfg.auth_none,
                           .auth = NULL};   /* filled by dispatch_one once the server is open */
  xgr_error de;
  xgr_error_clear(&de);
  /* one nesting limit for everything xgrd reads: checked on the raw text first, so that nothing
   * deeper is parsed, run or stored (the store's reader would refuse it after a restart) */
  bool too_deep = xgr_json_check_depth(r->body ? r->body : "", r->len, XGR_JSON_MAX_DEPTH, &de) != 0;
  xgr_error pe;
  json_t *body = NULL;   /* exact: integers beyond int64 travel as xgr's exact integer nodes */
  if (xgr_json_parse_exact(r->body ? r->body : "", r->len, &body, &pe)) body = NULL;
  const char *name = NULL;
  int code = 0;
  json_t *out = NULL;
  char label[32];
  if (too_deep) {
    code = XGR_RPC_INVALID_PARAMS;
    de.code = XGR_ELIMIT;
    json_t *id = json_is_object(body) ? json_object_get(body, "id") : NULL;
    if (id && !json_is_string(id) && !json_is_number(id)) id = NULL;
    out = response(id, NULL, error_obj(code, &de));
  } else if (!body) {
    code = XGR_RPC_PARSE_ERROR;
    xgr_error e;
    xgr_error_set(&e, XGR_EPARSE, NULL, "%s", pe.message);
    out = response(NULL, NULL, error_obj(code, &e));
  } else if (json_is_array(body)) {
    snprintf(label, sizeof label, "batch");
    name = label;
    if (json_array_size(body) == 0) {
      code = XGR_RPC_INVALID_REQUEST;
      xgr_error e;
      xgr_error_set(&e, 0, NULL, "an empty batch");
      out = response(NULL, NULL, error_obj(code, &e));
    } else {
      out = json_array();
      size_t nb = json_array_size(body);
      json_t **outs = calloc(nb, sizeof *outs);
      const char **names = calloc(nb, sizeof *names);
      int *codes = calloc(nb, sizeof *codes);
      if (!outs || !names || !codes) abort();
      dispatch_batch(s, &caller, body, outs, names, codes);
      for (size_t i = 0; i < nb; i++) {
        count(s, names[i], 200, codes[i]);
        if (outs[i]) json_array_append_new(out, outs[i]);
      }
      free(outs);
      free(names);
      free(codes);
      if (json_array_size(out) == 0) {
        json_decref(out);
        out = NULL;
      }
    }
  } else {
    out = dispatch_one(s, &caller, body, &name, &code);
  }
  if (!name || name != label) count(s, name, out ? 200 : 204, code);
  double ms = (now_s() - r->t0) * 1e3;
  xgr_histogram_observe(s->latency, ms / 1e3);
  log_line(s, c, "POST", url, out ? 200 : 204, name, code, ms);
  json_decref(body);
  if (!out) return send_text(c, MHD_HTTP_NO_CONTENT, "application/json", NULL, 0);
  return send_json(c, MHD_HTTP_OK, out);
}

static enum MHD_Result refuse(xgr_rpc_server *s, struct MHD_Connection *c, const char *http, const char *url,
                              unsigned status, const char *msg) {
  log_line(s, c, http, url, status, NULL, 0, 0);
  count(s, NULL, status, 0);
  char *b = NULL;
  int n = asprintf(&b, "{\"error\":\"%s\"}", msg);
  if (n < 0) return MHD_NO;
  return send_text(c, status, "application/json", b, (size_t)n);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *http,
                              const char *version, const char *data, size_t *data_size, void **con_cls) {
  (void)version;
  xgr_rpc_server *s = cls;
  req *r = *con_cls;
  if (!r) {
    r = xgr__xcalloc(1, sizeof *r);
    r->t0 = now_s();
    *con_cls = r;
    bool rpc_path = !strcmp(url, "/") || !strcmp(url, "/rpc");
    bool host_ok = xgr_auth_host_ok(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host"), s->host, __atomic_load_n(&s->port, __ATOMIC_ACQUIRE));
    if (!host_ok && (!strcmp(http, "GET") || !strcmp(http, "HEAD")))
      return refuse(s, c, http, url, MHD_HTTP_FORBIDDEN, "the Host header does not name this server (DNS rebinding)");
    if (!host_ok) {
      r->refuse = MHD_HTTP_FORBIDDEN;
      r->refuse_msg = "the Host header does not name this server (DNS rebinding)";
    } else if (!strcmp(http, "GET") || !strcmp(http, "HEAD")) {
      if (!strcmp(url, "/metrics") && !s->cfg.metrics_listen) {
        size_t len;
        char *text = xgr_metrics_render(s->metrics, &len);
        count(s, "GET /metrics", 200, 0);
        return send_text(c, MHD_HTTP_OK, "text/plain; version=0.0.4", text, len);
      }
      if (!strcmp(url, "/healthz")) return send_text(c, MHD_HTTP_OK, "text/plain", xgr__xstrdup("ok\n"), 3);
      if (!strcmp(url, "/readyz")) {
        bool ready = atomic_load_explicit(&s->open, memory_order_acquire) && (!s->cfg.ready || s->cfg.ready(s->cfg.ready_ctx));
        return send_text(c, ready ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain",
                         xgr__xstrdup(ready ? "ready\n" : "not ready\n"), ready ? 6 : 10);
      }
      for (size_t i = 0; i < s->ngets; i++) {
        size_t pl = strlen(s->gets[i].prefix);
        if (strncmp(url, s->gets[i].prefix, pl) || (url[pl] != '\0' && url[pl] != '/')) continue;
        char remote[64];
        remote_of(c, remote, sizeof remote);
        xgr_rpc_caller caller = {.remote = remote,
                                 .authorization = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"),
                                 .auth_none = s->cfg.auth_none,
                                 .auth = s->cfg.auth};
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
    } else if (!rpc_path) {
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
          size_t nc = (r->cap ? r->cap * 2 : 4096);
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
  conn_busy(s, c, true);
  enum MHD_Result ret = answer_rpc(s, c, r, url);
  conn_busy(s, c, false);
  return ret;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
  (void)toe;
  conn_busy(cls, c, false);   /* the next request on a kept-alive connection gets its own deadline */
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
  if (!xgr_auth_host_ok(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host"), s->mhost, s->mport))
    return send_text(c, MHD_HTTP_FORBIDDEN, "text/plain", xgr__xstrdup("Host header refused\n"), 20);
  if ((strcmp(http, "GET") && strcmp(http, "HEAD")) || strcmp(url, "/metrics"))
    return send_text(c, MHD_HTTP_NOT_FOUND, "text/plain", xgr__xstrdup("only GET /metrics here\n"), 23);
  size_t len;
  char *text = xgr_metrics_render(s->metrics, &len);
  count(s, "GET /metrics", 200, 0);
  return send_text(c, MHD_HTTP_OK, "text/plain; version=0.0.4", text, len);
}

xgr_rpc_server *xgr_rpc_server_new(const xgr_rpc_config *cfg, xgr_error *err) {
  xgr_rpc_server *s = xgr__xcalloc(1, sizeof *s);
  s->cfg = *cfg;
  pthread_mutex_init(&s->cmu, NULL);
  pthread_cond_init(&s->ccv, NULL);
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
  return s;
}

int xgr_rpc_register(xgr_rpc_server *s, const char *name, xgr_rpc_method_fn fn, void *ctx) {
  if (s->nmethods == MAX_METHODS) return XGR_ELIMIT;
  s->methods[s->nmethods++] = (method){name, fn, ctx, false};
  return 0;
}

int xgr_rpc_start(xgr_rpc_server *s, xgr_error *err) {
  /* no MHD_OPTION_LISTENING_ADDRESS_REUSE: it sets SO_REUSEPORT, and a second xgrd on the same
   * port would then share it silently instead of failing (SO_REUSEADDR, MHD's default, is kept so
   * a restart does not wait for TIME_WAIT) */
  s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_TURBO | MHD_USE_ITC |
                              MHD_ALLOW_SUSPEND_RESUME, 0, NULL, NULL, handle, s,
                          MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&s->addr, MHD_OPTION_THREAD_POOL_SIZE,
                          (unsigned)s->cfg.threads, MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->cfg.max_connections,
                          MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->cfg.timeout_s, MHD_OPTION_NOTIFY_COMPLETED,
                          completed, s, MHD_OPTION_NOTIFY_CONNECTION, notify_conn, s,
                          MHD_OPTION_END);
  if (!s->d) {
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &s->addr.sin_addr, ip, sizeof ip);
    return xgr_error_set(err, XGR_EIO, "listen", "cannot listen on %s:%u (address in use or not allowed)", ip,
                         ntohs(s->addr.sin_port));
  }
  s->reaper_stop = false;
  s->reaper_on = pthread_create(&s->reaper, NULL, reaper_main, s) == 0;
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

int xgr_rpc_set_concurrent(xgr_rpc_server *s, const char *name) {
  for (size_t i = 0; i < s->nmethods; i++)
    if (!strcmp(s->methods[i].name, name)) {
      s->methods[i].concurrent = true;
      return 0;
    }
  return XGR_ENOTFOUND;
}

uint16_t xgr_rpc_port(const xgr_rpc_server *s) { return __atomic_load_n(&s->port, __ATOMIC_ACQUIRE); }
xgr_metrics *xgr_rpc_metrics(xgr_rpc_server *s) { return s->metrics; }

int xgr__rpc_register_get(xgr_rpc_server *s, const char *prefix, xgr__rpc_get_fn fn, void *ctx) {
  if (s->ngets == sizeof s->gets / sizeof s->gets[0]) return XGR_ELIMIT;
  s->gets[s->ngets].prefix = prefix;
  s->gets[s->ngets].fn = fn;
  s->gets[s->ngets++].ctx = ctx;
  return 0;
}

void xgr__rpc_on_stop(xgr_rpc_server *s, void (*fn)(void *ctx), void *ctx) {
  s->on_stop = fn;
  s->on_stop_ctx = ctx;
}

void xgr_rpc_stop(xgr_rpc_server *s) {
  if (s->d && s->on_stop) s->on_stop(s->on_stop_ctx);
  if (s->reaper_on) {
    pthread_mutex_lock(&s->cmu);
    s->reaper_stop = true;
    pthread_cond_signal(&s->ccv);
    pthread_mutex_unlock(&s->cmu);
    pthread_join(s->reaper, NULL);
    s->reaper_on = false;
  }
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
  pthread_cond_destroy(&s->ccv);
  pthread_mutex_destroy(&s->cmu);
  free(s);
}

bool xgr_rpc_is_address(const char *s) {
  if (!s || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || strlen(s) != 42) return false;
  for (size_t i = 2; i < 42; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') || (s[i] >= 'A' && s[i] <= 'F'))) return false;
  return true;
}

const char *xgr_rpc_claimed(const xgr_rpc_caller *c, const json_t *params) {
  if (!json_is_object(params)) return NULL;
  const char *f = json_string_value(json_object_get(params, "from"));
  if (f || !c || c->auth_none) return f;
  const json_t *m = json_object_get(json_object_get(params, "permit"), "message");
  const char *r = json_string_value(json_object_get(m, "runner"));
  return r ? r : json_string_value(json_object_get(m, "from"));
}

/* Permit mode: verify the permit the action needs; the signer is the caller. */
static int authorize_permit(const xgr_rpc_caller *c, const json_t *params, xgr_rpc_action act, const char *owner,
                            char *who, size_t n, xgr_permit *p, xgr_error *err) {
  unsigned kinds = act == XGR_RPC_ACT_START                                 ? XGR_PERMIT_SESSION
                   : act == XGR_RPC_ACT_CONTROL || act == XGR_RPC_ACT_WAKE ? XGR_PERMIT_ANY_CONTROL
                                                                            : XGR_PERMIT_XDALA;
  int rc = xgr_auth_verify(c->auth, params, "permit", kinds, p, err);
  if (rc) return rc;
  if (n) snprintf(who, n, "%s", p->from);
  if (act == XGR_RPC_ACT_START && owner && strcasecmp(owner, p->from)) {
    xgr_error_set(err, XGR_EPERM, "permit.message.from", "signer %s is not the owner %s the request names", p->from,
                  owner);
    return XGR_RPC_NOT_PERMITTED;
  }
  if (act == XGR_RPC_ACT_CONTROL && owner && strcasecmp(owner, p->runner)) {
    xgr_error_set(err, XGR_EPERM, p->kind == XGR_PERMIT_CONTROL_V2 ? "permit.message.runner" : "permit.message.from",
                  "%s is not the session's owner %s", p->runner, owner);
    return XGR_RPC_NOT_PERMITTED;
  }
  return 0;
}

int xgr_rpc_authorize(const xgr_rpc_caller *c, const json_t *params, xgr_rpc_action act, const char *owner,
                      char *who, size_t n, xgr_error *err) {
  xgr_permit p;
  return xgr_rpc_authorize_permit(c, params, act, owner, who, n, &p, err);
}

/* The one place that decides who the caller is and whether it may act (see xgr/rpc.h). */
int xgr_rpc_authorize_permit(const xgr_rpc_caller *c, const json_t *params, xgr_rpc_action act, const char *owner,
                             char *who, size_t n, xgr_permit *p, xgr_error *err) {
  if (n) who[0] = '\0';
  xgr_permit local;
  if (!p) p = &local;
  p->kind = 0;
  if (c && !c->auth_none && c->auth) return authorize_permit(c, params, act, owner, who, n, p, err);
  if (!c || !c->auth_none) {
    xgr_error_set(err, XGR_EPERM, "permit", "xgrd has no authorization configured (--auth permits or --auth none)");
    return XGR_RPC_NOT_PERMITTED;
  }
  const char *key = "from";
  const json_t *v = json_is_object(params) ? json_object_get(params, "from") : NULL;
  if (!v || json_is_null(v)) {
    key = "owner";
    v = json_is_object(params) ? json_object_get(params, "owner") : NULL;
  }
  const char *id = NULL;
  if (v && !json_is_null(v)) {
    if (!json_is_string(v) || !xgr_rpc_is_address(json_string_value(v))) {
      char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
      xgr_error_set(err, XGR_ESCHEMA, key, "is %.60s; expected an address (0x + 40 hex)", t ? t : "?");
      free(t);
      return XGR_RPC_INVALID_PARAMS;
    }
    id = json_string_value(v);
  } else if (owner) {
    id = owner;
  }
  if (id && n > 42) {
    snprintf(who, n, "%s", id);
    for (char *q = who; *q; q++)
      if (*q >= 'A' && *q <= 'Z') *q = (char)(*q - 'A' + 'a');
  }
  switch (act) {
    case XGR_RPC_ACT_START:
    case XGR_RPC_ACT_CONTROL:
      if (owner && who[0] && strcasecmp(who, owner)) {
        xgr_error_set(err, XGR_EPERM, key, "%s may not %s sessions of %s (only the owner may)", who,
                      act == XGR_RPC_ACT_START ? "start" : "control", owner);
        return XGR_RPC_NOT_PERMITTED;
      }
      return 0;
    case XGR_RPC_ACT_READ:
    case XGR_RPC_ACT_WAKE:
    case XGR_RPC_ACT_REGISTER:
    default:
      return 0;
  }
}
