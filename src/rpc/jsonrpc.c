/* jsonrpc.c — JSON-RPC 2.0 on an assembled request body (see server_impl.h and xgr/rpc.h).
 *
 * The body is checked against the one nesting limit on its raw text first (nothing deeper is
 * parsed, run or stored), then parsed exactly (integers beyond int64 stay exact). One request is
 * dispatched to the method registered under its name; a batch is answered request by request,
 * runs of consecutive methods marked concurrent (xgr_rpc_set_concurrent) on up to 16 threads, the
 * rest in order, and notifications get no response. Each request of a batch may defer its answer
 * as a single request does (its own xgr_rpc_defer, counted towards the batch's): the batch is then
 * answered, as one array, when the last deferred member is ready, and no thread waits meanwhile. Errors are JSON-RPC error objects whose
 * data names the field path and the xgr error code. Until the server is open (xgrd recovers its
 * store first) every method answers "unavailable".
 */
#include "rpc/server_impl.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "xgr/value.h"
#include "util/alloc.h"

/* Threads that run one batch's run of concurrent requests (at most). */
#define BATCH_THREADS 16

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

/* A method's return as the code on the wire: an xgr_errcode (xgr_error.h, -1 and below, above
 * -32000) becomes its JSON-RPC code here and nowhere else; a JSON-RPC code (a protocol error such
 * as "method not found") stays as it is. */
static int wire_code(int rc) { return rc < 0 && rc > -32000 ? xgr_rpc_code_for(rc) : rc; }

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

/* s as a JSON string that always exists: text that is not UTF-8 (a message quoting bytes a client
 * sent) has each byte outside printable ASCII replaced by '?', so the error is still answered
 * (jansson refuses such text, and a refused error object used to become `"result":null`). */
static json_t *text_json(const char *s) {
  size_t n = strlen(s);
  if (xgr_utf8_valid(s, n)) return json_stringn(s, n);
  char *t = xgr__xstrdup(s);
  for (char *p = t; *p; p++)
    if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) *p = '?';
  json_t *j = json_stringn(t, n);
  free(t);
  return j;
}

static json_t *error_obj(int code, const xgr_error *e) {
  json_t *err = json_object();
  json_object_set_new(err, "code", json_integer(code));
  json_object_set_new(err, "message", text_json(e && e->message[0] ? e->message : code_message(code)));
  if (e && (e->path[0] || e->code)) {
    json_t *data = json_object();
    if (e->path[0]) json_object_set_new(data, "path", text_json(e->path));
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
  xgr__rpc_method *mt = NULL;
  for (size_t i = 0; i < s->nmethods && !mt; i++)
    if (!strcmp(s->methods[i].name, asked)) mt = &s->methods[i];
  bool barred = false;   /* a path that serves some methods only (the console's /ui/rpc) */
  if (mt && caller->only) {
    barred = true;
    for (const char *const *k = caller->only; *k && barred; k++) barred = strcmp(*k, mt->name) != 0;
  }
  /* logs and metrics only ever see a registered name: a client cannot mint label values */
  *name = mt ? mt->name : "unknown";
  json_t *result = NULL, *err = NULL;
  if (!mt) {
    *code = XGR_RPC_METHOD_NOT_FOUND;
    xgr_error_set(&e, 0, NULL, "method \"%.100s\" does not exist", asked);
    err = error_obj(*code, &e);
  } else if (barred) {
    *code = XGR_RPC_METHOD_NOT_FOUND;
    xgr_error_set(&e, 0, NULL, "method \"%.100s\" is not served at /ui/rpc (the console's methods and its actions "
                  "only; the whole API is at POST /)", asked);
    err = error_obj(*code, &e);
  } else {
    int rc = mt->fn(mt->ctx, caller, params, &result, &e);
    if (rc == XGR_RPC_DEFERRED) {   /* answered by xgr__rpc_finish once the deferral is ready */
      assert(caller->defer && caller->defer->finish && !result);
      caller->defer->id = id ? json_incref(id) : NULL;
      caller->defer->name = mt->name;
      *code = XGR_RPC_DEFERRED;
      return NULL;
    }
    if (rc) {
      *code = rc = wire_code(rc);
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
static const xgr__rpc_method *method_of(const xgr_rpc_server *s, const json_t *rq) {
  const char *m = json_string_value(json_object_get(rq, "method"));
  if (!m) return NULL;
  for (size_t i = 0; i < s->nmethods; i++)
    if (!strcmp(s->methods[i].name, m)) return &s->methods[i];
  return NULL;
}

/* One request of batch b (index i) with the caller's identity and, when the batch may defer, its
 * own deferred answer. */
static void dispatch_member(xgr_rpc_server *s, const xgr_rpc_caller *caller, json_t *body, xgr__rpc_batch *b,
                            size_t i) {
  xgr_rpc_caller mc = *caller;
  mc.defer = b->dfs ? &b->dfs[i] : NULL;
  mc.subject = NULL;   /* members may run on several threads; the batch's line names no subject */
  b->outs[i] = dispatch_one(s, &mc, json_array_get(body, i), &b->names[i], &b->codes[i]);
}

/* A run of a batch dispatched by several threads: each takes the next index. */
typedef struct batch_run {
  xgr_rpc_server *s;
  const xgr_rpc_caller *caller;
  json_t *body;
  xgr__rpc_batch *b;
  size_t to;
  _Atomic size_t next;
} batch_run;

static void *batch_worker(void *arg) {
  batch_run *r = arg;
  for (;;) {
    size_t i = atomic_fetch_add(&r->next, 1);
    if (i >= r->to) return NULL;
    dispatch_member(r->s, r->caller, r->body, r->b, i);
  }
}

/* Dispatch every request of a batch: runs of consecutive concurrent requests (xgr_rpc_set_concurrent)
 * on up to BATCH_THREADS threads, the rest in order; b has one slot per request. */
static void dispatch_batch(xgr_rpc_server *s, const xgr_rpc_caller *caller, json_t *body, xgr__rpc_batch *b) {
  size_t n = json_array_size(body);
  bool open = atomic_load_explicit(&s->open, memory_order_acquire);
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (open && j < n) {
      const xgr__rpc_method *m = method_of(s, json_array_get(body, j));
      if (!m || !m->concurrent) break;
      j++;
    }
    if (j - i < 2) {
      dispatch_member(s, caller, body, b, i);
      i++;
      continue;
    }
    batch_run r = {.s = s, .caller = caller, .body = body, .b = b, .to = j};
    atomic_init(&r.next, i);
    pthread_t th[BATCH_THREADS];
    size_t nt = j - i < BATCH_THREADS ? j - i : BATCH_THREADS, started = 0;
    for (size_t k = 1; k < nt; k++)
      if (pthread_create(&th[started], NULL, batch_worker, &r) == 0) started++;
    batch_worker(&r);   /* this thread works too */
    for (size_t k = 0; k < started; k++) pthread_join(th[k], NULL);
    i = j;
  }
}

/* A batch of n requests; its members may defer when df (the request's) is given. */
static xgr__rpc_batch *batch_new(xgr_rpc_server *s, const xgr_rpc_defer *df, size_t n) {
  xgr__rpc_batch *b = xgr__xcalloc(1, sizeof *b);
  b->s = s;
  b->n = n;
  b->outs = xgr__xcalloc(n, sizeof *b->outs);
  b->names = xgr__xcalloc(n, sizeof *b->names);
  b->codes = xgr__xcalloc(n, sizeof *b->codes);
  atomic_init(&b->pending, 1);   /* the dispatcher's hold */
  if (df) {
    b->c = df->c;
    b->dfs = xgr__xcalloc(n, sizeof *b->dfs);
    for (size_t i = 0; i < n; i++) b->dfs[i] = (xgr_rpc_defer){.s = df->s, .c = df->c, .of = b};
  }
  return b;
}

/* The batch's answer once no member is deferred: every request counted, the responses in order
 * (NULL: notifications only); frees b. */
static json_t *batch_done(xgr_rpc_server *s, xgr__rpc_batch *b) {
  json_t *out = json_array();
  for (size_t i = 0; i < b->n; i++) {
    assert(b->codes[i] != XGR_RPC_DEFERRED);
    xgr__rpc_count(s, b->names[i], 200, b->codes[i]);
    if (b->outs[i]) json_array_append_new(out, b->outs[i]);
  }
  free(b->outs);
  free(b->names);
  free(b->codes);
  free(b->dfs);
  free(b);
  if (json_array_size(out) == 0) {
    json_decref(out);
    out = NULL;
  }
  return out;
}

json_t *xgr__rpc_batch_finish(xgr_rpc_defer *df) {
  xgr__rpc_batch *b = df->batch;
  assert(b && !atomic_load(&b->pending));
  df->batch = NULL;
  for (size_t i = 0; i < b->n; i++)
    if (b->codes[i] == XGR_RPC_DEFERRED) b->outs[i] = xgr__rpc_finish(&b->dfs[i], &b->names[i], &b->codes[i]);
  return batch_done(b->s, b);
}

int xgr_rpc_register(xgr_rpc_server *s, const char *name, xgr_rpc_method_fn fn, void *ctx) {
  if (s->nmethods == XGR__RPC_MAX_METHODS) return XGR_ELIMIT;
  s->methods[s->nmethods++] = (xgr__rpc_method){name, fn, ctx, false};
  return 0;
}

int xgr_rpc_set_concurrent(xgr_rpc_server *s, const char *name) {
  for (size_t i = 0; i < s->nmethods; i++)
    if (!strcmp(s->methods[i].name, name)) {
      s->methods[i].concurrent = true;
      return 0;
    }
  return XGR_ENOTFOUND;
}

json_t *xgr__rpc_answer(xgr_rpc_server *s, const xgr_rpc_caller *caller, const char *text, size_t len,
                        const char **name, int *code, bool *batch) {
  *name = NULL;
  *code = 0;
  *batch = false;
  xgr_error de;
  xgr_error_clear(&de);
  /* one nesting limit for everything xgrd reads: checked on the raw text first, so that nothing
   * deeper is parsed, run or stored (the store's reader would refuse it after a restart) */
  bool too_deep = xgr_json_check_depth(text, len, XGR_JSON_MAX_DEPTH, &de) != 0;
  xgr_error pe;
  json_t *body = NULL;   /* exact: integers beyond int64 travel as xgr's exact integer nodes */
  if (xgr_json_parse_exact(text, len, &body, &pe)) body = NULL;
  json_t *out = NULL;
  if (too_deep) {
    *code = XGR_RPC_INVALID_PARAMS;
    de.code = XGR_ELIMIT;
    json_t *id = json_is_object(body) ? json_object_get(body, "id") : NULL;
    if (id && !json_is_string(id) && !json_is_number(id)) id = NULL;
    out = response(id, NULL, error_obj(*code, &de));
  } else if (!body) {
    *code = XGR_RPC_PARSE_ERROR;
    xgr_error e;
    xgr_error_set(&e, XGR_EPARSE, NULL, "%s", pe.message);
    out = response(NULL, NULL, error_obj(*code, &e));
  } else if (json_is_array(body)) {
    *name = "batch";
    *batch = true;
    if (json_array_size(body) == 0) {
      *code = XGR_RPC_INVALID_REQUEST;
      xgr_error e;
      xgr_error_set(&e, 0, NULL, "an empty batch");
      out = response(NULL, NULL, error_obj(*code, &e));
    } else {
      size_t nb = json_array_size(body);
      xgr__rpc_batch *b = batch_new(s, caller->defer, nb);
      dispatch_batch(s, caller, body, b);
      bool deferred = false;
      for (size_t i = 0; i < nb && !deferred; i++) deferred = b->codes[i] == XGR_RPC_DEFERRED;
      if (deferred) {   /* answered when the last deferred member is ready (xgr__rpc_batch_finish) */
        caller->defer->batch = b;
        *code = XGR_RPC_DEFERRED;
        xgr__rpc_batch_suspend(b);
      } else {
        out = batch_done(s, b);
      }
    }
  } else {
    out = dispatch_one(s, caller, body, name, code);
  }
  json_decref(body);
  return out;
}

json_t *xgr__rpc_finish(xgr_rpc_defer *df, const char **name, int *code) {
  assert(df->finish);
  xgr_error e;
  xgr_error_clear(&e);
  json_t *result = NULL, *out = NULL;
  int rc = df->finish(df->ctx, &result, &e);
  assert(rc != XGR_RPC_DEFERRED);
  *code = rc = wire_code(rc);
  *name = df->name;
  if (rc) {
    json_decref(result);
    if (df->id) out = response(df->id, NULL, error_obj(rc, &e));
  } else if (df->id) {
    out = response(df->id, result, NULL);
  } else {
    json_decref(result);   /* a notification gets no response */
  }
  json_decref(df->id);
  df->id = NULL;
  df->finish = NULL;
  df->ctx = NULL;
  return out;
}
