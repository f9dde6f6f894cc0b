/* trace.c — per-session and per-step tracing (docs/OPERATIONS.md "Tracing"): the node's tracer
 * turns the engine's events into spans in the W3C Trace Context convention and exports them as
 * OTLP/HTTP with JSON encoding to `--otlp-endpoint`. It exists only when that flag is set: without
 * it the node makes no tracer, subscribes to nothing and starts no thread.
 *
 * The spans of a session (owner, rootPid) form one trace:
 *   session <orchestration>   the root span — or, when the session's xgr.enqueue carried a valid
 *                             `traceparent` header, a child of the header's parent in its trace;
 *                             exported when the session ends
 *   step <stepId>             one per step a process ran, child of the session span; linked to the
 *                             step span of the process that spawned it ("spawned_by")
 *   api <name>                one per API call of a step, child of its step span (kind CLIENT;
 *                             the method, the URL's scheme and host and the status only: never a
 *                             path, query, header or body)
 *   chain.read <function>     one per contract read of a step, child of its step span
 *   join <stepId>             a join was decided: child of the session span, linked to the step
 *                             spans of the processes of its scope that ended before ("joined")
 *   wake-up <stepId>          an internal wake-up arrived: child of the session span, linked to the
 *                             step span of the waking session's process that sent it ("woken_by")
 * Ids are derived, not stored: the trace id is the first 16 bytes of sha256("xgr-trace|owner|root")
 * unless a header gave one, a span id the first 8 bytes of sha256 over its kind and place (session;
 * step: iter; api / read: iter and index; join: the target's iter). So a link to another session's
 * step needs nothing but the outbox row's producer, and a session's spans still fit together after
 * a restart — except that a trace continued from a header is only known in memory: spans made after
 * a restart go to the derived trace (a known limit, docs/OPERATIONS.md).
 *
 * Spans are built on the engine's workers (only with a tracer) and queued in a bounded queue; one
 * exporter thread posts them in batches with libcurl (bounded timeouts). A full queue drops the
 * new span, a failed post drops its batch; both are counted (xgr_otlp_spans_dropped_total).
 */
#include <assert.h>
#include <curl/curl.h>
#include <inttypes.h>
#include <jansson.h>
#include <nettle/sha2.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "node/node_impl.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/hashmap.h"
#include "xgr/trace.h"

#define BATCH 512                 /* spans per POST at most */
#define LINGER_MS 200             /* a part batch waits this long for more */
#define POST_TIMEOUT_MS 5000
#define CONNECT_TIMEOUT_MS 2000
#define FLUSH_MS 3000             /* at shutdown: what is queued is posted within this, the rest dropped */
#define MAX_SESSIONS 200000u      /* sessions with trace state in memory (~130 bytes each); beyond,
                                     derived ids only */
#define MAX_ARRIVALS 64           /* processes kept per session for a join's links */

/* The trace state of one session while it lives. */
typedef struct tsess {
  char owner[64];
  uint64_t root;
  uint8_t trace_id[16];
  uint8_t parent[8];            /* the header's parent id (has_parent) */
  bool has_parent;
  int64_t start_ns;             /* the session span's start */
  uint32_t narr, carr;
  struct arrival {
    uint32_t group;
    uint64_t iter;
  } *arr;                       /* owned, NULL until needed: processes of a join scope (group) whose step
                                   ran, oldest first, at most MAX_ARRIVALS */
} tsess;

static void sess_free(tsess *s) {
  if (!s) return;
  free(s->arr);
  free(s);
}

struct xgr__tracer {
  xgr_node *node;               /* the log */
  char *url;                    /* {endpoint}/v1/traces */
  double scale;                 /* engine ms = Unix ms x scale */
  size_t qmax;
  pthread_mutex_t mu;           /* q, qn, qhead, stop */
  pthread_cond_t cv;
  json_t **q;                   /* ring of qmax spans */
  size_t qhead, qn;
  bool stop;
  pthread_t th;
  bool started;
  pthread_mutex_t smu;          /* sessions */
  xgr_hashmap sessions;         /* tsess by root (hashed mode: owner compared) */
  atomic_uint_fast64_t exported, dropped_full, dropped_failed;
};

/* ---- ids and times ------------------------------------------------------------------------------ */

/* The first n bytes of sha256("kind|owner|root|a|b"); never all zero. */
static void derive(uint8_t *out, size_t n, const char *kind, const char *owner, uint64_t root, uint64_t a, uint64_t b) {
  char text[256];
  int len = snprintf(text, sizeof text, "xgr-%s|%s|%" PRIu64 "|%" PRIu64 "|%" PRIu64, kind, owner, root, a, b);
  struct sha256_ctx c;
  uint8_t d[SHA256_DIGEST_SIZE];
  sha256_init(&c);
  sha256_update(&c, (size_t)(len < (int)sizeof text ? len : (int)sizeof text - 1), (const uint8_t *)text);
  sha256_digest(&c, sizeof d, d);
  memcpy(out, d, n);
  bool zero = true;
  for (size_t i = 0; i < n; i++) zero &= out[i] == 0;
  if (zero) out[n - 1] = 1;
}

static void session_span_id(uint8_t out[8], const char *owner, uint64_t root) { derive(out, 8, "session", owner, root, 0, 0); }
static void step_span_id(uint8_t out[8], const char *owner, uint64_t root, uint64_t iter) {
  derive(out, 8, "step", owner, root, iter, 0);
}

static int64_t wall_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* An engine clock time (ms) as Unix ns. */
static int64_t engine_ns(const xgr__tracer *t, int64_t ms) { return (int64_t)((double)ms / t->scale * 1e6); }

/* ---- per-session state ---------------------------------------------------------------------------- */

typedef struct skey {
  const char *owner;
  uint64_t root;
} skey;

static bool sess_match(const void *ctx, const void *val) {
  const skey *k = ctx;
  const tsess *s = val;
  return s->root == k->root && !strcmp(s->owner, k->owner);
}

/* The session's state (smu held), made when create and there is room. */
static tsess *sess_get(xgr__tracer *t, const char *owner, uint64_t root, bool create, int64_t start_ns) {
  skey k = {owner, root};
  tsess *s = xgr__hashmap_find(&t->sessions, root, sess_match, &k);
  if (s || !create || xgr__hashmap_size(&t->sessions) >= MAX_SESSIONS || strlen(owner) >= sizeof s->owner) return s;
  s = xgr__xcalloc(1, sizeof *s);
  snprintf(s->owner, sizeof s->owner, "%s", owner);
  s->root = root;
  derive(s->trace_id, 16, "trace", owner, root, 0, 0);
  s->start_ns = start_ns;
  xgr__hashmap_add(&t->sessions, root, s);
  return s;
}

/* The trace id of session (owner, root): its state's, else the derived one. */
static void trace_of(xgr__tracer *t, const char *owner, uint64_t root, uint8_t out[16]) {
  pthread_mutex_lock(&t->smu);
  tsess *s = sess_get(t, owner, root, false, 0);
  if (s) memcpy(out, s->trace_id, 16);
  pthread_mutex_unlock(&t->smu);
  if (!s) derive(out, 16, "trace", owner, root, 0, 0);
}

bool xgr__tracer_session_begin(xgr__tracer *t, const char *owner, uint64_t root, const char *traceparent) {
  xgr_traceparent tp;
  bool has = traceparent && !xgr_traceparent_parse(traceparent, strlen(traceparent), &tp);
  pthread_mutex_lock(&t->smu);
  bool fresh = !sess_get(t, owner, root, false, 0);
  tsess *s = fresh ? sess_get(t, owner, root, true, wall_ns()) : NULL;   /* an existing one stays as it is */
  if (s && has) {
    memcpy(s->trace_id, tp.trace_id, 16);
    memcpy(s->parent, tp.parent_id, 8);
    s->has_parent = true;
  }
  pthread_mutex_unlock(&t->smu);
  return s != NULL;
}

void xgr__tracer_session_drop(xgr__tracer *t, const char *owner, uint64_t root) {
  pthread_mutex_lock(&t->smu);
  tsess *s = sess_get(t, owner, root, false, 0);
  if (s) xgr__hashmap_remove(&t->sessions, root, s);
  pthread_mutex_unlock(&t->smu);
  sess_free(s);
}

/* ---- spans (OTLP/JSON) ---------------------------------------------------------------------------- */

static json_t *hex_json(const uint8_t *b, size_t n) {
  char h[33];
  assert(n <= 16);
  xgr_trace_hex(b, n, h);
  return json_string(h);
}

static json_t *ns_json(int64_t ns) {
  char s[24];
  snprintf(s, sizeof s, "%" PRId64, ns > 0 ? ns : 0);
  return json_string(s);
}

static void attr_str(json_t *attrs, const char *key, const char *v) {
  if (!v) return;
  json_t *s = json_stringn(v, strnlen(v, 512));
  if (!s) return;   /* not UTF-8 */
  json_array_append_new(attrs, json_pack("{s:s, s:{s:o}}", "key", key, "value", "stringValue", s));
}

static void attr_int(json_t *attrs, const char *key, int64_t v) {
  char s[24];
  snprintf(s, sizeof s, "%" PRId64, v);   /* OTLP/JSON: 64-bit integers as strings */
  json_array_append_new(attrs, json_pack("{s:s, s:{s:s}}", "key", key, "value", "intValue", s));
}

/* A new span: kind 1 INTERNAL, 3 CLIENT; parent NULL: a root span. */
static json_t *span_new(const uint8_t trace[16], const uint8_t span[8], const uint8_t *parent, const char *name,
                        int kind, int64_t start_ns, int64_t end_ns) {
  json_t *s = json_object();
  json_object_set_new(s, "traceId", hex_json(trace, 16));
  json_object_set_new(s, "spanId", hex_json(span, 8));
  if (parent) json_object_set_new(s, "parentSpanId", hex_json(parent, 8));
  json_t *n = json_stringn(name, strnlen(name, 256));
  json_object_set_new(s, "name", n ? n : json_string("span"));
  json_object_set_new(s, "kind", json_integer(kind));
  json_object_set_new(s, "startTimeUnixNano", ns_json(start_ns));
  json_object_set_new(s, "endTimeUnixNano", ns_json(end_ns > start_ns ? end_ns : start_ns));
  json_object_set_new(s, "attributes", json_array());
  return s;
}

static json_t *attrs_of(json_t *span) { return json_object_get(span, "attributes"); }

static void span_link(json_t *span, const uint8_t trace[16], const uint8_t id[8], const char *why) {
  json_t *links = json_object_get(span, "links");
  if (!links) json_object_set_new(span, "links", links = json_array());
  json_t *attrs = json_array();
  attr_str(attrs, "xgr.link", why);
  json_array_append_new(links, json_pack("{s:o, s:o, s:o}", "traceId", hex_json(trace, 16), "spanId", hex_json(id, 8),
                                         "attributes", attrs));
}

/* Status 2 ERROR with a message (cut), or 1 OK. */
static void span_status(json_t *span, bool ok, const char *msg) {
  json_t *st = json_pack("{s:i}", "code", ok ? 1 : 2);
  if (!ok && msg) {
    json_t *m = json_stringn(msg, strnlen(msg, 300));
    if (m) json_object_set_new(st, "message", m);
  }
  json_object_set_new(span, "status", st);
}

/* Queue a span (taken): dropped and counted when the queue is full. */
static void emit(xgr__tracer *t, json_t *span) {
  pthread_mutex_lock(&t->mu);
  if (t->qn == t->qmax || t->stop) {
    pthread_mutex_unlock(&t->mu);
    atomic_fetch_add(&t->dropped_full, 1);
    json_decref(span);
    return;
  }
  t->q[(t->qhead + t->qn) % t->qmax] = span;
  t->qn++;
  if (t->qn == 1 || t->qn == BATCH) pthread_cond_signal(&t->cv);   /* the first wakes it to linger, a full batch ends that */
  pthread_mutex_unlock(&t->mu);
}

/* The scheme and host of a URL ("scheme://[user@]host[:port]/..."): only they go into spans (no
 * user info, port, path or query). Empty when it has no "://". */
static void url_parts(const char *url, char *scheme, size_t ns, char *host, size_t nh) {
  scheme[0] = host[0] = '\0';
  const char *sep = url ? strstr(url, "://") : NULL;
  if (!sep) return;
  snprintf(scheme, ns, "%.*s", (int)(sep - url < 16 ? sep - url : 16), url);
  const char *h = sep + 3, *end = h + strcspn(h, "/?#");
  const char *at = memchr(h, '@', (size_t)(end - h));
  if (at) h = at + 1;
  const char *hend = end;
  if (*h == '[') {   /* an IPv6 literal: up to its ']' */
    const char *close = memchr(h, ']', (size_t)(end - h));
    if (close) hend = close + 1;
  } else {
    const char *colon = memchr(h, ':', (size_t)(end - h));
    if (colon) hend = colon;
  }
  snprintf(host, nh, "%.*s", (int)(hend - h < 255 ? hend - h : 255), h);
}

static void step_spans(xgr__tracer *t, const xgr_engine_event *ev) {
  uint8_t trace[16], sess[8], step[8];
  int64_t start = ev->started_at ? engine_ns(t, ev->started_at) : engine_ns(t, ev->now);
  pthread_mutex_lock(&t->smu);
  tsess *s = sess_get(t, ev->owner, ev->root_pid, true, start);
  if (s) {
    memcpy(trace, s->trace_id, 16);
    if (start < s->start_ns) s->start_ns = start;
    if (ev->group) {   /* a candidate for a join's links */
      if (s->narr == MAX_ARRIVALS) memmove(s->arr, s->arr + 1, --s->narr * sizeof s->arr[0]);
      if (s->narr == s->carr) {
        s->carr = s->carr ? 2 * s->carr : 4;
        s->arr = xgr__xrealloc(s->arr, s->carr * sizeof s->arr[0]);
      }
      s->arr[s->narr++] = (struct arrival){ev->group, ev->iter};
    }
  }
  pthread_mutex_unlock(&t->smu);
  if (!s) derive(trace, 16, "trace", ev->owner, ev->root_pid, 0, 0);
  session_span_id(sess, ev->owner, ev->root_pid);
  step_span_id(step, ev->owner, ev->root_pid, ev->iter);
  char name[300], pid[48];
  snprintf(name, sizeof name, "step %s", ev->step_id ? ev->step_id : "?");
  snprintf(pid, sizeof pid, "%" PRIu64 ":%" PRIu64, ev->root_pid, ev->iter);
  int64_t end = engine_ns(t, ev->now);
  json_t *sp = span_new(trace, step, sess, name, 1, start, end);
  json_t *at = attrs_of(sp);
  attr_str(at, "xgr.step_id", ev->step_id);
  attr_str(at, "xgr.rule", ev->rule_address);
  attr_str(at, "xgr.pid", pid);
  attr_str(at, "xgr.owner", ev->owner);
  attr_int(at, "xgr.root_pid", (int64_t)ev->root_pid);
  static const char *const actions[] = {"none", "abortStep", "cancelSession"};
  const char *outcome = !ev->ok ? "error" : ev->rule_action ? actions[ev->rule_action < 3 ? ev->rule_action : 0]
                                            : ev->valid ? "valid" : "invalid";
  attr_str(at, "xgr.outcome", outcome);
  if (ev->parent_iter) {
    uint8_t parent[8];
    step_span_id(parent, ev->owner, ev->root_pid, ev->parent_iter);
    span_link(sp, trace, parent, "spawned_by");
  }
  span_status(sp, ev->ok, "the step failed");
  emit(t, sp);
  /* API calls, one after another from the step's start (their durations are measured, their
   * starts placed) */
  json_t *calls = ev->api ? json_loads(ev->api, 0, NULL) : NULL;
  size_t i;
  json_t *c;
  int64_t at_ns = start;
  json_array_foreach(calls, i, c) {
    const char *cname = json_string_value(json_object_get(c, "name"));
    int64_t ms = json_integer_value(json_object_get(c, "ms"));
    long status = (long)json_integer_value(json_object_get(c, "status"));
    const char *err = json_string_value(json_object_get(c, "error"));
    uint8_t id[8];
    derive(id, 8, "api", ev->owner, ev->root_pid, ev->iter, i);
    snprintf(name, sizeof name, "api %s", cname ? cname : "?");
    json_t *a = span_new(trace, id, step, name, 3, at_ns, at_ns + ms * 1000000);
    at_ns += ms * 1000000;
    json_t *aa = attrs_of(a);
    char scheme[20], host[256];
    url_parts(json_string_value(json_object_get(c, "url")), scheme, sizeof scheme, host, sizeof host);
    attr_str(aa, "xgr.api_name", cname);
    attr_str(aa, "http.request.method", json_string_value(json_object_get(c, "method")));
    if (host[0]) attr_str(aa, "server.address", host);
    if (scheme[0]) attr_str(aa, "url.scheme", scheme);
    if (status) attr_int(aa, "http.response.status_code", status);
    span_status(a, !err, err);
    emit(t, a);
  }
  json_decref(calls);
  json_t *reads = ev->reads ? json_loads(ev->reads, 0, NULL) : NULL;
  json_array_foreach(reads, i, c) {
    const char *fn = json_string_value(json_object_get(c, "function"));
    const char *err = json_string_value(json_object_get(c, "error"));
    uint8_t id[8];
    derive(id, 8, "read", ev->owner, ev->root_pid, ev->iter, i);
    snprintf(name, sizeof name, "chain.read %s", fn ? fn : "?");
    json_t *r = span_new(trace, id, step, name, 3, start, end);
    attr_str(attrs_of(r), "xgr.chain.function", fn);
    attr_str(attrs_of(r), "xgr.chain.to", json_string_value(json_object_get(c, "to")));
    span_status(r, !err, err);
    emit(t, r);
  }
  json_decref(reads);
}

static void join_span(xgr__tracer *t, const xgr_engine_event *ev) {
  const xgr_engine_proc *p = ev->proc;
  if (!p || !p->from_group) return;
  uint8_t trace[16], sess[8], id[8];
  uint64_t linked[MAX_ARRIVALS];
  size_t nl = 0;
  pthread_mutex_lock(&t->smu);
  tsess *s = sess_get(t, ev->owner, ev->root_pid, false, 0);
  if (s) {
    memcpy(trace, s->trace_id, 16);
    uint32_t keep = 0;
    for (uint32_t i = 0; i < s->narr; i++) {
      if (s->arr[i].group == p->from_group) linked[nl++] = s->arr[i].iter;
      else s->arr[keep++] = s->arr[i];
    }
    s->narr = keep;
  }
  pthread_mutex_unlock(&t->smu);
  if (!s) derive(trace, 16, "trace", ev->owner, ev->root_pid, 0, 0);
  session_span_id(sess, ev->owner, ev->root_pid);
  derive(id, 8, "join", ev->owner, ev->root_pid, p->iter, 0);
  char name[300], pid[48];
  snprintf(name, sizeof name, "join %s", p->step_id ? p->step_id : "?");
  snprintf(pid, sizeof pid, "%" PRIu64 ":%" PRIu64, ev->root_pid, p->iter);
  int64_t now = engine_ns(t, ev->now);
  json_t *sp = span_new(trace, id, sess, name, 1, now, now);
  attr_str(attrs_of(sp), "xgr.pid", pid);
  attr_str(attrs_of(sp), "xgr.join_outcome", xgr_join_outcome_name((xgr_join_outcome)p->join_outcome));
  for (size_t i = 0; i < nl; i++) {
    uint8_t st[8];
    step_span_id(st, ev->owner, ev->root_pid, linked[i]);
    span_link(sp, trace, st, "joined");
  }
  emit(t, sp);
}

static void wake_span(xgr__tracer *t, const xgr_engine_event *ev) {
  if (!ev->from_owner) return;   /* a refusal with no target here: the target's side has no session */
  uint8_t trace[16], sess[8], id[8], from_trace[16], from_span[8];
  trace_of(t, ev->owner, ev->root_pid, trace);
  trace_of(t, ev->from_owner, ev->from_root, from_trace);
  session_span_id(sess, ev->owner, ev->root_pid);
  if (ev->from_iter) step_span_id(from_span, ev->from_owner, ev->from_root, ev->from_iter);
  else session_span_id(from_span, ev->from_owner, ev->from_root);
  int64_t now = engine_ns(t, ev->now);
  derive(id, 8, "wake", ev->owner, ev->root_pid, (uint64_t)now, ev->from_iter);
  json_t *sp = span_new(trace, id, sess, "wake-up", 1, now, now);
  char from[120];
  snprintf(from, sizeof from, "%s/%" PRIu64, ev->from_owner, ev->from_root);
  attr_str(attrs_of(sp), "xgr.from_session", from);
  if (ev->from_iter) attr_int(attrs_of(sp), "xgr.from_iter", (int64_t)ev->from_iter);
  span_link(sp, from_trace, from_span, "woken_by");
  span_status(sp, ev->ok, ev->message);
  emit(t, sp);
}

static void session_span(xgr__tracer *t, const xgr_engine_event *ev) {
  pthread_mutex_lock(&t->smu);
  tsess *s = sess_get(t, ev->owner, ev->root_pid, false, 0);
  if (s) xgr__hashmap_remove(&t->sessions, ev->root_pid, s);
  pthread_mutex_unlock(&t->smu);
  uint8_t trace[16], id[8];
  if (s) memcpy(trace, s->trace_id, 16);
  else derive(trace, 16, "trace", ev->owner, ev->root_pid, 0, 0);
  session_span_id(id, ev->owner, ev->root_pid);
  int64_t end = engine_ns(t, ev->now);
  char name[300];
  snprintf(name, sizeof name, "session %s", ev->orch && ev->orch->id ? ev->orch->id : "?");
  json_t *sp = span_new(trace, id, s && s->has_parent ? s->parent : NULL, name, 1, s ? s->start_ns : end, end);
  json_t *at = attrs_of(sp);
  attr_str(at, "xgr.owner", ev->owner);
  attr_int(at, "xgr.root_pid", (int64_t)ev->root_pid);
  attr_str(at, "xgr.result", ev->message);
  attr_int(at, "xgr.steps", (int64_t)ev->steps);
  span_status(sp, ev->message && !strcmp(ev->message, "completed"), ev->message);
  sess_free(s);
  emit(t, sp);
}

static void on_event(void *ctx, const xgr_engine_event *ev) {
  xgr__tracer *t = ctx;
  switch (ev->kind) {
    case XGR_EEV_STEP: step_spans(t, ev); break;
    case XGR_EEV_JOIN: join_span(t, ev); break;
    case XGR_EEV_WAKE: wake_span(t, ev); break;
    case XGR_EEV_FINISHED: session_span(t, ev); break;
    default: break;
  }
}

static unsigned interest(void *ctx) {
  (void)ctx;
  return XGR_EEV_WANT(XGR_EEV_STEP) | XGR_EEV_WANT(XGR_EEV_JOIN) | XGR_EEV_WANT(XGR_EEV_WAKE) |
         XGR_EEV_WANT(XGR_EEV_FINISHED) | XGR_EEV_WANT_TRACE;
}

/* ---- the exporter ------------------------------------------------------------------------------- */

static size_t discard(char *p, size_t size, size_t n, void *ctx) {
  (void)p, (void)ctx;
  return size * n;
}

/* POST spans[0..n) (taken) as one OTLP/JSON request, within timeout_ms; counted as exported or
 * dropped. */
static void post(xgr__tracer *t, CURL *h, json_t **spans, size_t n, long timeout_ms) {
  json_t *arr = json_array();
  for (size_t i = 0; i < n; i++) json_array_append_new(arr, spans[i]);
  json_t *body = json_pack("{s:[{s:{s:[{s:s, s:{s:s}}]}, s:[{s:{s:s}, s:o}]}]}", "resourceSpans", "resource",
                           "attributes", "key", "service.name", "value", "stringValue", "xgrd", "scopeSpans", "scope",
                           "name", "xgr", "spans", arr);
  char *text = json_dumps(body, JSON_COMPACT);
  json_decref(body);
  struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
  curl_easy_setopt(h, CURLOPT_URL, t->url);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, text ? text : "{}");
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < CONNECT_TIMEOUT_MS ? timeout_ms : (long)CONNECT_TIMEOUT_MS);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
  CURLcode rc = curl_easy_perform(h);
  long status = 0;
  if (rc == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(hd);
  free(text);
  if (rc == CURLE_OK && status >= 200 && status < 300) {
    atomic_fetch_add(&t->exported, n);
    return;
  }
  atomic_fetch_add(&t->dropped_failed, n);
  char msg[300];
  if (rc != CURLE_OK) snprintf(msg, sizeof msg, "%s", curl_easy_strerror(rc));
  else snprintf(msg, sizeof msg, "HTTP status %ld", status);
  xgr_node_log_error(t->node, "warn", "OTLP export failed: spans dropped", msg);
}

static void *exporter(void *arg) {
  xgr__tracer *t = arg;
  CURL *h = curl_easy_init();
  json_t **batch = xgr__xmalloc(BATCH * sizeof *batch);
  int64_t deadline = 0;   /* at shutdown: posting stops then */
  pthread_mutex_lock(&t->mu);
  for (;;) {
    while (!t->stop && t->qn == 0) pthread_cond_wait(&t->cv, &t->mu);
    if (!t->stop && t->qn < BATCH) {   /* linger for a fuller batch */
      struct timespec ts = xgr__mono_deadline(LINGER_MS);
      pthread_cond_timedwait(&t->cv, &t->mu, &ts);
    }
    if (t->stop && !deadline) deadline = xgr__mono_ms() + FLUSH_MS;
    size_t n = t->qn < BATCH ? t->qn : BATCH;
    for (size_t i = 0; i < n; i++) batch[i] = t->q[(t->qhead + i) % t->qmax];
    t->qhead = (t->qhead + n) % t->qmax;
    t->qn -= n;
    bool stop = t->stop;
    pthread_mutex_unlock(&t->mu);
    int64_t left = stop ? deadline - xgr__mono_ms() : POST_TIMEOUT_MS;   /* stopping: only until the deadline */
    if (left <= 0) {   /* out of time: the rest is dropped */
      for (size_t i = 0; i < n; i++) json_decref(batch[i]);
      atomic_fetch_add(&t->dropped_failed, n);
    } else if (n) {
      if (h) post(t, h, batch, n, (long)(left < POST_TIMEOUT_MS ? left : POST_TIMEOUT_MS));
      else {
        for (size_t i = 0; i < n; i++) json_decref(batch[i]);
        atomic_fetch_add(&t->dropped_failed, n);
      }
    }
    pthread_mutex_lock(&t->mu);
    if (t->stop && t->qn == 0) break;
  }
  pthread_mutex_unlock(&t->mu);
  free(batch);
  if (h) curl_easy_cleanup(h);
  return NULL;
}

/* ---- life cycle --------------------------------------------------------------------------------- */

int xgr__tracer_check_endpoint(const char *endpoint, xgr_error *err) {
  if (!endpoint || (strncmp(endpoint, "http://", 7) && strncmp(endpoint, "https://", 8)) ||
      strlen(endpoint) > 2000 || strpbrk(endpoint, " \t\r\n"))
    return xgr_error_set(err, XGR_EINVAL, "otlp-endpoint",
                         "\"%.100s\" is not an http:// or https:// URL (expected the collector's base URL, e.g. "
                         "http://127.0.0.1:4318; spans go to {endpoint}/v1/traces)",
                         endpoint ? endpoint : "");
  return 0;
}

xgr__tracer *xgr__tracer_new(xgr_node *node, const char *endpoint, size_t queue_spans, double scale, xgr_error *err) {
  if (xgr__tracer_check_endpoint(endpoint, err)) return NULL;
  xgr__tracer *t = xgr__xcalloc(1, sizeof *t);
  t->node = node;
  size_t len = strlen(endpoint);
  while (len && endpoint[len - 1] == '/') len--;
  const char *suffix = "/v1/traces";
  bool has = len >= strlen(suffix) && !strncmp(endpoint + len - strlen(suffix), suffix, strlen(suffix));
  t->url = xgr__xmalloc(len + strlen(suffix) + 1);
  snprintf(t->url, len + strlen(suffix) + 1, "%.*s%s", (int)len, endpoint, has ? "" : suffix);
  t->scale = scale > 0 ? scale : 1;
  t->qmax = queue_spans ? queue_spans : XGR_NODE_DEFAULT_OTLP_QUEUE_SPANS;
  t->q = xgr__xmalloc(t->qmax * sizeof *t->q);
  pthread_mutex_init(&t->mu, NULL);
  pthread_condattr_t ca;   /* the linger's deadline is on the monotonic clock */
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&t->cv, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&t->smu, NULL);
  if (pthread_create(&t->th, NULL, exporter, t)) {
    xgr_error_set(err, XGR_EIO, NULL, "cannot start the OTLP exporter thread");
    xgr__tracer_free(t);
    return NULL;
  }
  t->started = true;
  return t;
}

int xgr__tracer_subscribe(xgr__tracer *t, xgr_engine *e, xgr_error *err) {
  int rc = xgr_engine_subscribe_interest(e, on_event, t, interest);
  if (rc) return xgr_error_set(err, rc, NULL, "cannot subscribe the tracer to the engine's events");
  return 0;
}

static void collect(void *ctx, xgr_metrics_out *out) {
  xgr__tracer *t = ctx;
  xgr_metrics_family(out, "xgr_otlp_spans_exported_total", "counter", "Spans the OTLP collector accepted");
  xgr_metrics_line(out, "xgr_otlp_spans_exported_total", "", (double)atomic_load(&t->exported));
  xgr_metrics_family(out, "xgr_otlp_spans_dropped_total", "counter",
                     "Spans dropped: the export queue was full, or the collector refused or did not answer");
  xgr_metrics_line(out, "xgr_otlp_spans_dropped_total", "reason=\"queue_full\"", (double)atomic_load(&t->dropped_full));
  xgr_metrics_line(out, "xgr_otlp_spans_dropped_total", "reason=\"export_failed\"",
                   (double)atomic_load(&t->dropped_failed));
  pthread_mutex_lock(&t->mu);
  size_t qn = t->qn;
  pthread_mutex_unlock(&t->mu);
  xgr_metrics_family(out, "xgr_otlp_queue_spans", "gauge", "Spans waiting in the export queue");
  xgr_metrics_line(out, "xgr_otlp_queue_spans", "", (double)qn);
}

void xgr__tracer_metrics(xgr__tracer *t, xgr_metrics *m) { xgr_metrics_collector(m, "node.otlp", collect, t); }

void xgr__tracer_free(xgr__tracer *t) {
  if (!t) return;
  pthread_mutex_lock(&t->mu);
  t->stop = true;
  pthread_cond_signal(&t->cv);
  pthread_mutex_unlock(&t->mu);
  if (t->started) pthread_join(t->th, NULL);
  for (size_t i = 0; i < t->qn; i++) json_decref(t->q[(t->qhead + i) % t->qmax]);
  free(t->q);
  size_t pos = 0;
  for (tsess *s; (s = xgr__hashmap_next(&t->sessions, &pos, NULL));) sess_free(s);
  xgr__hashmap_free(&t->sessions);
  pthread_mutex_destroy(&t->mu);
  pthread_cond_destroy(&t->cv);
  pthread_mutex_destroy(&t->smu);
  free(t->url);
  free(t);
}
