/* step.c — the XRC-137 step engine: one rule document run on one payload (xgr/rule.h).
 *
 * A step is a small state machine so that HTTP can happen elsewhere:
 *   begin    input casts and defaults, contract reads (through the chain reader; a resumable
 *            reader's reads are handed out as requests by next_request, before the API calls);
 *   next_request / feed_http, once per API call, in order: the request is rendered from the
 *            environment as it is at that moment (input ∪ extracts of earlier calls), so later
 *            URL templates may use earlier extracts;
 *   finish   rules, branch, soft-invalid downgrade, execution, grants, wake-ups, effective payload.
 *
 * Expressions see three layers, first hit wins: the context variables (`__sessionId`, `__pid`,
 * `__stepId`, `__owner`, `from`), the extracted map, the sanitized input map. Maps are bound
 * directly (no copy, no filtering) for the common case; only a program that reads some other
 * `_`-prefixed name — which must stay invisible — is given a filtering lookup function instead.
 * Context values are built once per step and only when the rule reads them.
 *
 * Allocation per step: the sanitized input is the caller's map itself (retained) when no cast,
 * default or removal changes it; the extracted map and the soft-invalid list exist only when the
 * rule can produce them; the outcome and the effective payload are one map each.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rule/rule_impl.h"
#include "util/alloc.h"

#define NCTX 5

struct xgr_step_state {
  const xgr_rule *rule;
  xgr_step_ctx ctx;
  xgr_step_result res;        /* being built */
  bool soft_forced;           /* an extract / read target without default could not be produced */
  bool ctx_ready;
  xgr_value ctxv[NCTX];       /* __sessionId, __pid, __stepId, __owner, from */
  size_t call;                /* next apiCalls index to settle */
  size_t read;                /* next contractReads index to settle (resumable reads) */
  bool async_reads;           /* the reader is resumable: reads go out as requests */
  bool pending_read;          /* req describes contractReads[read] */
  bool pending;               /* req describes apiCalls[call] (or a read, with pending_read) */
  xgr_http_request req;
  char *url, *body;
  char *hdr[65];                /* a rule's headers (64 at most) and the Content-Type of a JSON body */
  bool heap;
};

static const char *const ctx_names[NCTX] = {"__sessionId", "__pid", "__stepId", "__owner", "from"};

/* ---- small helpers ---------------------------------------------------------------------------- */

static char *rdup(xgr_step_result *r, const char *s) {
  if (!s) return NULL;
  char *d = xgr_arena_strdup(&r->arena, s);
  if (!d) abort();
  return d;
}

static char *rprintf(xgr_step_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *rprintf(xgr_step_result *r, const char *fmt, ...) {
  char buf[XGR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return rdup(r, buf);
}

static void hard(xgr_step_state *st, int code, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void hard(xgr_step_state *st, int code, const char *path, const char *fmt, ...) {
  if (st->res.error.code) return;  /* the first hard error wins */
  va_list ap;
  va_start(ap, fmt);
  xgr_error_vset(&st->res.error, code ? code : XGR_EEVAL, path, fmt, ap);
  va_end(ap);
}

static void add_soft(xgr_step_state *st, const char *key) {
  if (st->res.soft_invalid.kind != XGR_VLIST) st->res.soft_invalid = xgr_list_new(4);
  xgr_list_push(st->res.soft_invalid, xgr_value_cstring(key));
}

static void ensure_ctx(xgr_step_state *st) {
  if (st->ctx_ready) return;
  const char *owner = st->ctx.owner ? st->ctx.owner : "";
  st->ctxv[0] = xgr_value_uint(st->ctx.session_id);
  st->ctxv[1] = xgr_value_cstring(st->ctx.pid ? st->ctx.pid : "");
  st->ctxv[2] = xgr_value_cstring(st->ctx.step_id ? st->ctx.step_id : "");
  st->ctxv[3] = xgr_value_cstring(owner);
  st->ctxv[4] = xgr_value_retain(st->ctxv[3]);
  st->ctx_ready = true;
}

static bool ctx_lookup(void *p, const char *name, size_t len, xgr_value *out) {
  xgr_step_state *st = p;
  if (!xgr__rule_is_ctx_var(name, len)) return false;
  ensure_ctx(st);
  for (int i = 0; i < NCTX; i++)
    if (strlen(ctx_names[i]) == len && !memcmp(ctx_names[i], name, len)) {
      *out = st->ctxv[i];
      return true;
    }
  return false;
}

/* Full environment lookup with `_` keys hidden: context, extracted, input. */
static bool env_lookup(void *p, const char *name, size_t len, xgr_value *out) {
  xgr_step_state *st = p;
  if (ctx_lookup(p, name, len, out)) return true;
  if (len && name[0] == '_') return false;
  if (xgr_map_get_str(st->res.extracted, name, len, out)) return true;
  return xgr_map_get_str(st->res.payload, name, len, out);
}

/* Build the variable chain for a program with flags f into layers[] (caller's stack); returns the
 * head. `resp` (when not null-kind sentinel) goes first. */
static const xgr_cel_vars *build_vars(xgr_step_state *st, unsigned f, const xgr_value *resp, xgr_cel_vars layers[4]) {
  const xgr_cel_vars *head = NULL;
  int n = 0;
  if (f & RX_HIDDEN) {
    layers[n] = xgr_cel_vars_fn(env_lookup, st, NULL);
    head = &layers[n++];
  } else {
    layers[n] = xgr_cel_vars_map(st->res.payload, NULL);
    head = &layers[n++];
    if (xgr_map_size(st->res.extracted)) {
      layers[n] = xgr_cel_vars_map(st->res.extracted, head);
      head = &layers[n++];
    }
    if (f & RX_CTX) {
      ensure_ctx(st);
      layers[n] = xgr_cel_vars_fn(ctx_lookup, st, head);
      head = &layers[n++];
    }
  }
  if (resp) {
    layers[n] = xgr_cel_vars_one("resp", *resp, head);
    head = &layers[n++];
  }
  return head;
}

enum { R_OK = 0, R_SOFT = 1, R_ERR = -1 };

/* Resolve a document value (literal, template, program) in the step environment. R_OK: *out is a
 * new reference. R_SOFT: a key is missing, *why names it. R_ERR: hard error recorded. */
static int resolve(xgr_step_state *st, const rvalue *v, xgr_value *out, char *why, size_t whyn) {
  *out = xgr_value_null();
  if (v->kind == RV_LITERAL) {
    *out = xgr_value_retain(v->literal);
    return R_OK;
  }
  if (v->kind == RV_TEMPLATE) {
    char *s;
    size_t n;
    const char *miss;
    size_t ml;
    if (xgr__rule_template_render(&v->tpl, env_lookup, st, TPL_TEXT, &s, &n, &miss, &ml)) {
      snprintf(why, whyn, "missing key %.*s", (int)ml, miss);
      return R_SOFT;
    }
    *out = xgr_value_string(s, n);
    free(s);
    return R_OK;
  }
  xgr_cel_vars layers[4];
  const xgr_cel_vars *vars = build_vars(st, v->flags, NULL, layers);
  xgr_error e;
  xgr_error_clear(&e);
  int rc = xgr_cel_eval(v->prog, vars, out, &e);
  if (rc == XGR_CEL_OK) return R_OK;
  xgr_value_clear(out);
  if (rc == XGR_CEL_SOFT_INVALID || rc == XGR_CEL_MISSING) {
    snprintf(why, whyn, "%s", e.message[0] ? e.message : "missing key");
    return R_SOFT;
  }
  hard(st, e.code ? e.code : XGR_EEVAL, v->path, "%s", e.message[0] ? e.message : "evaluation failed");
  return R_ERR;
}

/* A TypedValue: resolve, fall back to its default when a key is missing, cast (failure is hard). */
static int resolve_typed(xgr_step_state *st, const rtyped *t, xgr_value *out, char *why, size_t whyn) {
  xgr_value v;
  int rc = resolve(st, &t->v, &v, why, whyn);
  if (rc == R_SOFT && t->has_default) {
    *out = xgr_value_retain(t->def);
    return R_OK;
  }
  if (rc != R_OK) return rc;
  xgr_error e;
  if (xgr_xrc_cast(t->type, v, out, &e)) {
    xgr_value_release(v);
    hard(st, XGR_ESCHEMA, t->v.path, "%s", e.message);
    return R_ERR;
  }
  xgr_value_release(v);
  return R_OK;
}

/* Resolve to an address string ("0x" + 40 hex); anything else is a hard error. */
static int resolve_address(xgr_step_state *st, const rvalue *v, const char **out, char *why, size_t whyn) {
  xgr_value a;
  int rc = resolve(st, v, &a, why, whyn);
  if (rc != R_OK) return rc;
  size_t n;
  const char *s = xgr_value_str(a, &n);
  if (a.kind != XGR_VSTRING || !xgr_xrc_is_address(s, n)) {
    char *t = xgr_value_to_json_text(a, 0, NULL);
    hard(st, XGR_ESCHEMA, v->path, "resolved to %.80s; expected an address (\"0x\" + 40 hex digits)", t ? t : "?");
    free(t);
    xgr_value_release(a);
    return R_ERR;
  }
  *out = rdup(&st->res, s);
  xgr_value_release(a);
  return R_OK;
}

static void set_extracted(xgr_step_state *st, xgr_value key, xgr_value take_val) {
  xgr_map_set(st->res.extracted, xgr_value_retain(key), take_val);
}

/* A target that could not be produced: its default, or soft-invalid. */
static void fallback(xgr_step_state *st, xgr_value key, const char *name, bool has_def, xgr_value def) {
  if (has_def) set_extracted(st, key, xgr_value_retain(def));
  else {
    add_soft(st, name);
    st->soft_forced = true;
  }
}

/* ---- 1. input ---------------------------------------------------------------------------------- */

static bool same(xgr_value a, xgr_value b) {
  return a.kind == b.kind && a.flags == b.flags && !memcmp(&a.as, &b.as, sizeof a.as);
}

static void sanitize(xgr_step_state *st, xgr_value in) {
  const xgr_rule *r = st->rule;
  xgr_value empty = r->empty_map;
  if (in.kind != XGR_VMAP) in = empty;
  xgr_value cast[XGR_MAX_PAYLOAD_FIELDS];
  bool changed = false;
  xgr_value tmp;
  if (xgr_map_get_str(in, "_from", 5, &tmp) || xgr_map_get_str(in, "_when", 5, &tmp)) changed = true;
  for (size_t i = 0; i < r->ninputs; i++) {
    const rinput *f = &r->inputs[i];
    xgr_value v;
    cast[i] = xgr_value_null();
    bool present = xgr_map_get_str(in, f->name, f->len, &v) && v.kind != XGR_VNULL;
    if (!present) {
      if (f->has_default) {
        cast[i] = xgr_value_retain(f->def);
        changed = true;
      } else {
        st->res.missing_input = true;
        add_soft(st, f->name);
        if (xgr_map_get_str(in, f->name, f->len, &v)) changed = true;  /* explicit null: drop it */
      }
      continue;
    }
    xgr_error e;
    if (xgr_xrc_cast(f->type, v, &cast[i], &e)) {
      char path[XGR_PATH_MAX];
      snprintf(path, sizeof path, "payload.%s", f->name);
      hard(st, XGR_ESCHEMA, path, "input %s: %s", f->name, e.message);
      for (size_t k = 0; k <= i; k++) xgr_value_release(cast[k]);
      st->res.payload = xgr_value_retain(in);
      return;
    }
    if (!same(cast[i], v)) changed = true;
  }
  if (!changed) {
    for (size_t i = 0; i < r->ninputs; i++) xgr_value_release(cast[i]);
    st->res.payload = xgr_value_retain(in);
    return;
  }
  xgr_value m = xgr_map_copy(in);
  xgr_map_remove_str(m, "_from", 5);
  xgr_map_remove_str(m, "_when", 5);
  for (size_t i = 0; i < r->ninputs; i++) {
    const rinput *f = &r->inputs[i];
    if (cast[i].kind == XGR_VNULL) xgr_map_remove_str(m, f->name, f->len);
    else xgr_map_set(m, xgr_value_retain(f->key), cast[i]);
  }
  st->res.payload = m;
}

/* ---- 2. contract reads ------------------------------------------------------------------------- */

static void read_failed(xgr_step_state *st, const rread *rd, xgr_read_report *rep, const char *why) {
  rep->error = rdup(&st->res, why);
  for (size_t j = 0; j < rd->nsave; j++)
    fallback(st, rd->save[j].key, rd->save[j].name, rd->save[j].has_default, rd->save[j].def);
}

/* The saveAs slot types of a read: slot i has the type of saveAs "i", XGR_XRC_TYPE_COUNT_ when no
 * entry saves it. Returns the number of slots (indices are at most 999, see parse.c). */
static size_t read_slots(const rread *rd, xgr_xrc_type *slots, size_t cap) {
  size_t n = 0;
  for (size_t j = 0; j < rd->nsave; j++)
    if (rd->save[j].index < cap && rd->save[j].index + 1 > n) n = rd->save[j].index + 1;
  for (size_t k = 0; k < n; k++) slots[k] = XGR_XRC_TYPE_COUNT_;
  for (size_t j = 0; j < rd->nsave; j++)
    if (rd->save[j].index < cap) slots[rd->save[j].index] = rd->save[j].type;
  return n;
}

#define MAX_SLOTS 1000

/* Store the decoded return values of a read: per slot its value cast to the slot's type, or the
 * slot's default (or soft-invalid) when the index is out of range or the cast fails (§6.4). */
static void read_succeeded(xgr_step_state *st, const rread *rd, xgr_value ret) {
  for (size_t j = 0; j < rd->nsave; j++) {
    const rsave *s = &rd->save[j];
    xgr_value cv;
    if (s->index < xgr_list_size(ret) && xgr_xrc_cast(s->type, xgr_list_get(ret, s->index), &cv, NULL) == 0)
      set_extracted(st, s->key, cv);
    else fallback(st, s->key, s->name, s->has_default, s->def);
  }
}

/* Resolve `to` and the arguments of contractReads[i]. R_OK: *to and args[0..nargs) are set (the
 * caller releases the args); R_SOFT: the read failed with `why` (nothing to release); R_ERR. */
static int read_inputs(xgr_step_state *st, const rread *rd, xgr_read_report *rep, const char **to, xgr_value *args,
                       char *why, size_t whyn) {
  int rc = resolve_address(st, &rd->to, to, why, whyn);
  if (rc != R_OK) return rc;
  rep->to = *to;
  for (size_t na = 0; na < rd->nargs; na++) {
    rc = resolve_typed(st, &rd->args[na], &args[na], why, whyn);
    if (rc != R_OK) {
      for (size_t k = 0; k < na; k++) xgr_value_release(args[k]);
      return rc;
    }
  }
  return R_OK;
}

static void run_reads(xgr_step_state *st) {
  const xgr_rule *r = st->rule;
  for (size_t i = 0; i < r->nreads && !st->res.error.code; i++) {
    const rread *rd = &r->reads[i];
    xgr_read_report *rep = &st->res.reads[i];
    rep->function = rdup(&st->res, rd->function);
    char why[XGR_MSG_MAX];
    const char *to = NULL;
    xgr_value args[XGR_MAX_EXEC_ARGS];
    int rc = read_inputs(st, rd, rep, &to, args, why, sizeof why);
    if (rc == R_ERR) return;
    if (rc == R_OK) {
      if (!st->ctx.chain || !st->ctx.chain->call) {
        rc = R_SOFT;
        snprintf(why, sizeof why, "no backend configured");
      } else {
        xgr_xrc_type slots[MAX_SLOTS];
        size_t ns = read_slots(rd, slots, MAX_SLOTS);
        xgr_chain_call call = {rd->rpc, to, rd->function, rd->nargs, rd->arg_types, args, ns, slots};
        xgr_value ret = xgr_value_null();
        xgr_error e;
        xgr_error_clear(&e);
        if (st->ctx.chain->call(st->ctx.chain->ctx, &call, &ret, &e) != 0) {
          rc = R_SOFT;
          snprintf(why, sizeof why, "%s", e.message[0] ? e.message : "contract read failed");
        } else {
          read_succeeded(st, rd, ret);
        }
        xgr_value_release(ret);
      }
      for (size_t k = 0; k < rd->nargs; k++) xgr_value_release(args[k]);
    }
    if (rc == R_SOFT) read_failed(st, rd, rep, why);
  }
}

/* Resumable reads: describe contractReads[st->read] as a request. false when it settled without
 * one (inputs missing, no backend, prepare failed) or on a hard error. */
static bool prepare_read(xgr_step_state *st) {
  const rread *rd = &st->rule->reads[st->read];
  xgr_read_report *rep = &st->res.reads[st->read];
  rep->function = rdup(&st->res, rd->function);
  char why[XGR_MSG_MAX];
  const char *to = NULL;
  xgr_value args[XGR_MAX_EXEC_ARGS];
  int rc = read_inputs(st, rd, rep, &to, args, why, sizeof why);
  if (rc == R_ERR) return false;
  if (rc == R_SOFT) {
    read_failed(st, rd, rep, why);
    return false;
  }
  xgr_xrc_type slots[MAX_SLOTS];
  size_t ns = read_slots(rd, slots, MAX_SLOTS);
  xgr_chain_call call = {rd->rpc, to, rd->function, rd->nargs, rd->arg_types, args, ns, slots};
  xgr_chain_post post = {0};
  xgr_error e;
  xgr_error_clear(&e);
  rc = st->ctx.chain->prepare(st->ctx.chain->ctx, &call, &post, &e);
  for (size_t k = 0; k < rd->nargs; k++) xgr_value_release(args[k]);
  if (rc != 0) {
    free(post.url);
    free(post.body);
    read_failed(st, rd, rep, e.message[0] ? e.message : "contract read failed");
    return false;
  }
  static const char ctype[] = "Content-Type: application/json";
  st->hdr[0] = xgr__xmalloc(sizeof ctype);
  memcpy(st->hdr[0], ctype, sizeof ctype);
  st->url = post.url;
  st->body = post.body;
  st->req.call_index = st->read;
  st->req.name = rd->path;
  st->req.method = "POST";
  st->req.url = st->url;
  st->req.nheaders = 1;
  st->req.headers = (const char *const *)st->hdr;
  st->req.body = st->body;
  st->req.body_len = post.body_len;
  st->req.timeout_ms = post.timeout_ms > 0 ? post.timeout_ms : XGR_HTTP_DEFAULT_TIMEOUT_MS;
  st->req.max_response = XGR_HTTP_MAX_RESPONSE;
  st->req.operator_endpoint = true;   /* the operator's --chain endpoint, not the tenant's choice */
  st->pending = st->pending_read = true;
  return true;
}

static void feed_read(xgr_step_state *st, const xgr_http_response *resp) {
  const rread *rd = &st->rule->reads[st->read];
  xgr_read_report *rep = &st->res.reads[st->read];
  char why[XGR_MSG_MAX];
  xgr_xrc_type slots[MAX_SLOTS];
  size_t ns = read_slots(rd, slots, MAX_SLOTS);
  xgr_chain_call call = {rd->rpc, rep->to, rd->function, rd->nargs, rd->arg_types, NULL, ns, slots};
  if (resp->error || resp->status < 200 || resp->status > 299) {
    if (resp->error) snprintf(why, sizeof why, "%s", resp->error_message ? resp->error_message : xgr_errcode_name(resp->error));
    else snprintf(why, sizeof why, "chain backend answered HTTP status %ld", resp->status);
    if (st->ctx.chain->failed) st->ctx.chain->failed(st->ctx.chain->ctx, &call, why);
    read_failed(st, rd, rep, why);
    return;
  }
  xgr_value ret = xgr_value_null();
  xgr_error e;
  xgr_error_clear(&e);
  if (st->ctx.chain->decode(st->ctx.chain->ctx, &call, resp->body ? resp->body : "", resp->body_len, &ret, &e) != 0)
    read_failed(st, rd, rep, e.message[0] ? e.message : "contract read failed");
  else read_succeeded(st, rd, ret);
  xgr_value_release(ret);
}

/* ---- 3. API calls ------------------------------------------------------------------------------ */

static void free_request(xgr_step_state *st) {
  free(st->url);
  free(st->body);
  for (size_t i = 0; i < st->req.nheaders; i++) free(st->hdr[i]);
  st->url = st->body = NULL;
  memset(&st->req, 0, sizeof st->req);
  st->pending = st->pending_read = false;
}

/* Settle apiCalls[call] as failed: every alias takes its default or becomes soft-invalid. */
static void call_failed(xgr_step_state *st, const rapi *a, const char *why) {
  xgr_api_call_report *rep = &st->res.api_calls[st->call];
  rep->error = rdup(&st->res, why);
  for (size_t j = 0; j < a->nextract; j++)
    fallback(st, a->extract[j].key, a->extract[j].name, a->extract[j].has_default, a->extract[j].def);
}

static char *apply_api_map(const xgr_step_ctx *ctx, char *url) {
  for (size_t i = 0; i < ctx->napi_map; i++) {
    const char *from = ctx->api_map[i].from, *to = ctx->api_map[i].to;
    size_t fl = strlen(from);
    if (fl && !strncmp(url, from, fl)) {
      size_t tl = strlen(to), rest = strlen(url + fl);
      char *n = xgr__xmalloc(tl + rest + 1);
      memcpy(n, to, tl);
      memcpy(n + tl, url + fl, rest + 1);
      free(url);
      return n;
    }
  }
  return url;
}

/* Render the request of apiCalls[call]; false (call settled as failed) when a key is missing. */
static bool prepare_request(xgr_step_state *st) {
  const rapi *a = &st->rule->api[st->call];
  char *s;
  size_t n, ml;
  const char *miss;
  char why[XGR_MSG_MAX];
  if (xgr__rule_template_render(&a->url, env_lookup, st, TPL_URL, &s, &n, &miss, &ml)) {
    snprintf(why, sizeof why, "urlTemplate: missing key %.*s", (int)ml, miss);
    call_failed(st, a, why);
    return false;
  }
  st->url = apply_api_map(&st->ctx, s);
  {   /* what reports show of the call: its final URL, credentials masked */
    char *masked = xgr_rule_mask_url(st->url);
    st->res.api_calls[st->call].url = rdup(&st->res, masked);
    free(masked);
  }
  for (size_t i = 0; i < a->nheaders; i++) {
    char *v;
    size_t vl;
    if (xgr__rule_template_render(&a->headers[i].value, env_lookup, st, TPL_TEXT, &v, &vl, &miss, &ml)) {
      snprintf(why, sizeof why, "headers.%s: missing key %.*s", a->headers[i].name, (int)ml, miss);
      call_failed(st, a, why);
      free_request(st);
      return false;
    }
    if (memchr(v, '\r', vl) || memchr(v, '\n', vl) || memchr(v, '\0', vl)) {
      /* a value with a line break would be two header lines on the wire: the call fails instead */
      snprintf(why, sizeof why, "headers.%s: the rendered value contains CR, LF or NUL", a->headers[i].name);
      free(v);
      call_failed(st, a, why);
      free_request(st);
      return false;
    }
    size_t hl = strlen(a->headers[i].name);
    st->hdr[i] = xgr__xmalloc(hl + vl + 3);
    memcpy(st->hdr[i], a->headers[i].name, hl);
    memcpy(st->hdr[i] + hl, ": ", 2);
    memcpy(st->hdr[i] + hl + 2, v, vl + 1);
    free(v);
    st->req.nheaders = i + 1;
  }
  if (a->has_body && a->json_body) {   /* contentType json: the body is sent as JSON unless headers say otherwise */
    bool named = false;
    for (size_t i = 0; i < a->nheaders && !named; i++) named = !strcasecmp(a->headers[i].name, "Content-Type");
    if (!named) st->hdr[st->req.nheaders++] = xgr__xstrdup("Content-Type: application/json");
  }
  if (a->has_body) {
    if (xgr__rule_template_render(&a->body, env_lookup, st, a->json_body ? TPL_JSON : TPL_TEXT, &st->body, &n, &miss,
                                  &ml)) {
      snprintf(why, sizeof why, "bodyTemplate: missing key %.*s", (int)ml, miss);
      call_failed(st, a, why);
      free_request(st);
      return false;
    }
    st->req.body = st->body;
    st->req.body_len = n;
  }
  st->req.call_index = st->call;
  st->req.name = a->name;
  st->req.method = a->method;
  st->req.url = st->url;
  st->req.headers = (const char *const *)st->hdr;
  st->req.timeout_ms = a->timeout_ms;
  st->req.max_response = XGR_HTTP_MAX_RESPONSE;
  st->req.outbound = st->ctx.outbound;
  st->pending = true;
  return true;
}

const xgr_http_request *xgr_step_next_request(xgr_step_state *st) {
  if (!st || st->res.error.code) return NULL;
  while (st->async_reads && !st->pending && st->read < st->rule->nreads) {
    if (prepare_read(st)) return &st->req;
    if (st->res.error.code) return NULL;
    st->read++;
  }
  while (!st->pending && st->call < st->rule->napi) {
    st->res.api_calls[st->call].name = rdup(&st->res, st->rule->api[st->call].name);
    st->res.api_calls[st->call].method = st->rule->api[st->call].method;
    if (prepare_request(st)) break;
    st->call++;
  }
  return st->pending ? &st->req : NULL;
}

static void run_extracts(xgr_step_state *st, const rapi *a, xgr_value resp) {
  for (size_t j = 0; j < a->nextract && !st->res.error.code; j++) {
    const rextract *x = &a->extract[j];
    xgr_cel_vars layers[4];
    const xgr_cel_vars *vars = build_vars(st, x->expr.flags, &resp, layers);
    xgr_value v;
    xgr_error e;
    xgr_error_clear(&e);
    int rc = xgr_cel_eval(x->expr.prog, vars, &v, &e);
    if (rc == XGR_CEL_ERROR && e.code == XGR_ELIMIT) {  /* caps are never hidden by defaults */
      hard(st, XGR_ELIMIT, x->expr.path, "%s", e.message);
      xgr_value_release(v);
      return;
    }
    xgr_value cv;
    if (rc == XGR_CEL_OK && xgr_xrc_cast(x->type, v, &cv, NULL) == 0) set_extracted(st, x->key, cv);
    else fallback(st, x->key, x->name, x->has_default, x->def);
    xgr_value_release(v);
  }
}

void xgr_step_feed_http(xgr_step_state *st, const xgr_http_response *resp) {
  if (!st || !st->pending) return;
  if (st->pending_read) {
    feed_read(st, resp);
    free_request(st);
    st->read++;
    return;
  }
  const rapi *a = &st->rule->api[st->call];
  xgr_api_call_report *rep = &st->res.api_calls[st->call];
  rep->status = resp->status;
  rep->ms = resp->ms;
  if (resp->error) {
    if (resp->error_message) call_failed(st, a, resp->error_message);
    else {
      char why[128];
      snprintf(why, sizeof why, "%s", xgr_errcode_name(resp->error));
      call_failed(st, a, why);
    }
  } else if (resp->status < 200 || resp->status > 299) {
    char why[64];
    snprintf(why, sizeof why, "HTTP status %ld", resp->status);
    call_failed(st, a, why);
  } else {
    xgr_value doc;
    xgr_error e;
    if (xgr_value_from_json_text(resp->body ? resp->body : "", resp->body_len, XGR_JSON_NUMBERS_AS_DOUBLE, &doc, &e)) {
      char why[XGR_MSG_MAX];
      snprintf(why, sizeof why, "response is not JSON: %.400s", e.message);
      call_failed(st, a, why);
    } else {
      run_extracts(st, a, doc);
      xgr_value_release(doc);
    }
  }
  free_request(st);
  st->call++;
}

/* ---- begin ------------------------------------------------------------------------------------- */

static void state_init(xgr_step_state *st, const xgr_rule *rule, xgr_value payload, const xgr_step_ctx *ctx) {
  memset(st, 0, sizeof *st);
  st->rule = rule;
  if (ctx) st->ctx = *ctx;
  xgr_step_result *r = &st->res;
  xgr_arena_init(&r->arena, 1024);
  r->encrypt_logs = -1;
  r->extracted = rule->nextract_total ? xgr_map_new(rule->nextract_total) : xgr_value_retain(rule->empty_map);
  if (rule->napi) {
    r->napi_calls = rule->napi;
    r->api_calls = xgr_arena_alloc(&r->arena, rule->napi * sizeof *r->api_calls);
    if (!r->api_calls) abort();
  }
  if (rule->nreads) {
    r->nreads = rule->nreads;
    r->reads = xgr_arena_alloc(&r->arena, rule->nreads * sizeof *r->reads);
    if (!r->reads) abort();
  }
  st->async_reads = ctx && ctx->chain && ctx->chain->prepare && ctx->chain->decode;
  sanitize(st, payload);
  if (!r->error.code && !st->async_reads) run_reads(st);
}

xgr_step_state *xgr_step_begin(const xgr_rule *rule, xgr_value payload, const xgr_step_ctx *ctx) {
  xgr_step_state *st = xgr__xmalloc(sizeof *st);
  state_init(st, rule, payload, ctx);
  st->heap = true;
  return st;
}

static void state_release(xgr_step_state *st) {
  free_request(st);
  if (st->ctx_ready)
    for (int i = 0; i < NCTX; i++) xgr_value_release(st->ctxv[i]);
  st->ctx_ready = false;
}

void xgr_step_state_free(xgr_step_state *st) {
  if (!st) return;
  state_release(st);
  xgr_step_result_free(&st->res);
  if (st->heap) free(st);
}

/* ---- 4/5. rules and branch ------------------------------------------------------------------- */

static void run_rules(xgr_step_state *st, bool *all_valid) {
  const xgr_rule *r = st->rule;
  bool abort_step = false, cancel = false;
  *all_valid = true;
  xgr_rule_report *rep = r->nrules ? xgr_arena_alloc(&st->res.arena, r->nrules * sizeof *rep) : NULL;
  if (r->nrules && !rep) abort();
  for (size_t i = 0; i < r->nrules; i++) rep[i] = (xgr_rule_report){XGR_RULE_SKIPPED, (uint8_t)r->rules[i].type, NULL};
  st->res.rule_reports = rep;
  st->res.nrule_reports = r->nrules;
  for (size_t i = 0; i < r->nrules; i++) {
    const rrule *rr = &r->rules[i];
    if (rr->type == RR_VALIDATE && st->res.missing_input) continue;
    xgr_cel_vars layers[4];
    const xgr_cel_vars *vars = build_vars(st, rr->expr.flags, NULL, layers);
    xgr_value v;
    xgr_error e;
    xgr_error_clear(&e);
    int rc = xgr_cel_eval(rr->expr.prog, vars, &v, &e);
    bool val = false;
    if (rc == XGR_CEL_OK) {
      if (v.kind != XGR_VBOOL) {
        rep[i].outcome = XGR_RULE_ERROR;
        hard(st, XGR_EEVAL, rr->expr.path, "rule evaluated to %s; expected bool", xgr_value_kind_name(v));
        xgr_value_release(v);
        return;
      }
      val = v.as.b;
      rep[i].outcome = val ? XGR_RULE_TRUE : XGR_RULE_FALSE;
    } else if (rc != XGR_CEL_MISSING) {
      rep[i].outcome = XGR_RULE_ERROR;
      rep[i].detail = rdup(&st->res, e.message);
      hard(st, e.code ? e.code : XGR_EEVAL, rr->expr.path, "%s", e.message);
      xgr_value_release(v);
      return;
    } else {
      rep[i].outcome = XGR_RULE_MISSING;
      rep[i].detail = rdup(&st->res, e.message[0] ? e.message : "a key it reads is missing");
    }
    xgr_value_release(v);
    if (rr->type == RR_VALIDATE) *all_valid = *all_valid && val;
    else if (rr->type == RR_ABORT_STEP) abort_step = abort_step || val;
    else cancel = cancel || val;
  }
  st->res.action = cancel ? XGR_ACTION_CANCEL_SESSION : abort_step ? XGR_ACTION_ABORT_STEP : XGR_ACTION_NONE;
}

static void release_execution(xgr_execution *x) {
  if (!x) return;
  for (size_t i = 0; i < x->nargs; i++) xgr_value_release(x->args[i].value);
  if (x->has_value) xgr_value_release(x->value.value);
  xgr_value_release(x->extras);
}

static void release_branch_outputs(xgr_step_result *r) {
  xgr_value_clear(&r->output);
  release_execution(r->execution);
  r->execution = NULL;
  for (size_t i = 0; i < r->nwakeups; i++) xgr_value_release(r->wakeups[i].payload);
  r->nwakeups = 0;
  r->ngrants = 0;
}

static int resolve_exec(xgr_step_state *st, const rexec *x, char *why, size_t whyn) {
  xgr_step_result *r = &st->res;
  xgr_execution *ex = xgr_arena_alloc(&r->arena, sizeof *ex);
  if (!ex) abort();
  ex->extras = xgr_value_null();
  int rc = resolve_address(st, &x->to, &ex->to, why, whyn);
  if (rc != R_OK) return rc;
  ex->has_gas = x->has_gas;
  ex->gas_limit = x->gas_limit;
  ex->function = rdup(r, x->function);
  ex->args = xgr_arena_alloc(&r->arena, (x->nargs ? x->nargs : 1) * sizeof *ex->args);
  if (!ex->args) abort();
  for (size_t i = 0; i < x->nargs; i++) {
    ex->args[i].type = x->args[i].type;
    rc = resolve_typed(st, &x->args[i], &ex->args[i].value, why, whyn);
    if (rc != R_OK) {
      release_execution(ex);
      return rc;
    }
    ex->nargs = i + 1;
  }
  if (x->has_value) {
    ex->value.type = x->value.type;
    rc = resolve_typed(st, &x->value, &ex->value.value, why, whyn);
    if (rc != R_OK) {
      release_execution(ex);
      return rc;
    }
    ex->has_value = true;
  }
  ex->extras = xgr_value_retain(x->extras);
  r->execution = ex;
  return R_OK;
}

static void resolve_wake(xgr_step_state *st, const rwake *w, xgr_wakeup *out) {
  char why[XGR_MSG_MAX];
  out->payload = xgr_value_null();
  const char *runner = NULL;
  xgr_value sid = xgr_value_null(), step = xgr_value_null(), pay = xgr_value_null();
  int rc = resolve(st, &w->runner, &sid, why, sizeof why);
  if (rc == R_OK) {
    size_t n;
    const char *s = xgr_value_str(sid, &n);
    if (sid.kind == XGR_VSTRING && xgr_xrc_is_address(s, n)) runner = rdup(&st->res, s);
    else {
      rc = R_SOFT;
      snprintf(why, sizeof why, "runner is not an address");
    }
    xgr_value_clear(&sid);
  }
  if (rc == R_OK) {
    rc = resolve(st, &w->session, &sid, why, sizeof why);
    xgr_value u;
    if (rc == R_OK) {
      if (xgr_xrc_cast(XGR_XRC_UINT64, sid, &u, NULL) || u.as.u == 0) {
        rc = R_SOFT;
        snprintf(why, sizeof why, "sessionId is not an integer > 0");
      } else out->session_id = u.as.u;
    }
  }
  if (rc == R_OK) {
    rc = resolve(st, &w->step, &step, why, sizeof why);
    if (rc == R_OK && step.kind != XGR_VSTRING) {
      rc = R_SOFT;
      snprintf(why, sizeof why, "stepId is not a string");
    } else if (rc == R_OK) out->step_id = rdup(&st->res, xgr_value_str(step, NULL));
  }
  if (rc == R_OK) {
    pay = xgr_map_new(w->npay);
    for (size_t i = 0; i < w->npay && rc == R_OK; i++) {
      if (w->pay[i].name[0] == '_') continue;
      xgr_value v;
      rc = resolve(st, &w->pay[i].v, &v, why, sizeof why);
      if (rc == R_OK) xgr_map_set(pay, xgr_value_retain(w->pay[i].key), v);
    }
  }
  xgr_value_release(sid);
  xgr_value_release(step);
  out->runner = runner;
  if (rc == R_OK) {
    out->payload = pay;
    return;
  }
  xgr_value_release(pay);
  out->payload = xgr_value_retain(st->rule->empty_map);
  out->skipped = true;
  if (rc == R_SOFT) out->skip_reason = rprintf(&st->res, "%s: %s", w->path, why);
}

/* Evaluate branch bi (0 onValid, 1 onInvalid). Returns R_OK, R_SOFT (valid branch must be
 * downgraded) or R_ERR. */
static int eval_branch(xgr_step_state *st, int bi) {
  const rbranch *b = &st->rule->branch[bi];
  xgr_step_result *r = &st->res;
  char why[XGR_MSG_MAX];
  r->output = b->nout ? xgr_map_new(b->nout) : xgr_value_retain(st->rule->empty_map);
  for (size_t i = 0; i < b->nout; i++) {
    xgr_value v;
    int rc = resolve(st, &b->out[i].v, &v, why, sizeof why);
    if (rc == R_ERR) return R_ERR;
    if (rc == R_SOFT) {
      add_soft(st, b->out[i].name);
      if (bi == 0) return R_SOFT;
      continue;
    }
    xgr_map_set(r->output, xgr_value_retain(b->out[i].key), v);
  }
  if (b->exec) {
    int rc = resolve_exec(st, b->exec, why, sizeof why);
    if (rc == R_ERR) return R_ERR;
    if (rc == R_SOFT) {
      add_soft(st, "execution");
      if (bi == 0) return R_SOFT;
    }
  }
  if (b->ngrants) {
    r->grants = xgr_arena_alloc(&r->arena, b->ngrants * sizeof *r->grants);
    if (!r->grants) abort();
  }
  for (size_t i = 0; i < b->ngrants; i++) {
    const char *addr;
    int rc = resolve_address(st, &b->grants[i].address, &addr, why, sizeof why);
    if (rc == R_ERR) return R_ERR;
    if (rc == R_SOFT) {
      char k[32];
      snprintf(k, sizeof k, "grants[%zu]", i);
      add_soft(st, k);
      continue;
    }
    xgr_grant *g = &r->grants[r->ngrants++];
    g->address = addr;
    g->rights = b->grants[i].rights;
    g->expire_days = b->grants[i].has_expire && b->grants[i].expire_days ? b->grants[i].expire_days
                     : b->has_log_expire ? b->log_expire_days : 0;
  }
  if (b->nwake) {
    r->wakeups = xgr_arena_alloc(&r->arena, b->nwake * sizeof *r->wakeups);
    if (!r->wakeups) abort();
  }
  for (size_t i = 0; i < b->nwake; i++) {
    resolve_wake(st, &b->wake[i], &r->wakeups[i]);
    r->nwakeups = i + 1;
    if (r->error.code) return R_ERR;
  }
  r->wait_sec = b->has_wait ? b->wait_sec : 0;
  r->has_log_expire_days = b->has_log_expire;
  r->log_expire_days = b->log_expire_days;
  r->encrypt_logs = b->encrypt_logs;
  return R_OK;
}

static void build_effective(xgr_step_state *st) {
  xgr_step_result *r = &st->res;
  size_t ne = xgr_map_size(r->extracted), no = xgr_map_size(r->output);
  xgr_value tmp;
  bool meta = xgr_map_get_str(r->output, "_from", 5, &tmp) || xgr_map_get_str(r->output, "_when", 5, &tmp);
  if (!ne && !no) {
    r->effective = xgr_value_retain(r->payload);
    return;
  }
  xgr_value m = xgr_map_copy(r->payload);
  for (size_t i = 0; i < ne; i++) {
    xgr_value k, v;
    xgr_map_entry(r->extracted, i, &k, &v);
    xgr_map_set(m, xgr_value_retain(k), xgr_value_retain(v));
  }
  for (size_t i = 0; i < no; i++) {
    xgr_value k, v;
    xgr_map_entry(r->output, i, &k, &v);
    xgr_map_set(m, xgr_value_retain(k), xgr_value_retain(v));
  }
  if (meta) {
    xgr_map_remove_str(m, "_from", 5);
    xgr_map_remove_str(m, "_when", 5);
  }
  r->effective = m;
}

static int finish_into(xgr_step_state *st, xgr_step_result *out) {
  xgr_step_result *r = &st->res;
  /* Calls never performed count as failed. */
  if (!r->error.code) {
    while (xgr_step_next_request(st)) {
      if (st->pending_read) {
        read_failed(st, &st->rule->reads[st->read], &st->res.reads[st->read], "not performed");
        free_request(st);
        st->read++;
        continue;
      }
      call_failed(st, &st->rule->api[st->call], "not performed");
      free_request(st);
      st->call++;
    }
  }
  if (!r->error.code) {
    bool all_valid;
    run_rules(st, &all_valid);
    r->valid = !r->missing_input && all_valid && !st->soft_forced;
  }
  if (!r->error.code && r->action == XGR_ACTION_NONE) {
    int rc = eval_branch(st, r->valid ? 0 : 1);
    if (rc == R_SOFT) {  /* soft-invalid downgrade: the invalid branch runs instead */
      release_branch_outputs(r);
      r->valid = false;
      rc = eval_branch(st, 1);
    }
  }
  if (r->error.code) {
    r->valid = false;
    release_branch_outputs(r);
    r->wait_sec = 0;
  }
  if (r->output.kind != XGR_VMAP) r->output = xgr_value_retain(st->rule->empty_map);
  if (r->soft_invalid.kind != XGR_VLIST) r->soft_invalid = xgr_value_retain(st->rule->empty_list);
  build_effective(st);
  state_release(st);
  *out = *r;
  memset(r, 0, sizeof *r);
  return out->error.code;
}

int xgr_step_finish(xgr_step_state *st, xgr_step_result *out) {
  int rc = finish_into(st, out);
  if (st->heap) free(st);
  return rc;
}

int xgr_step_run(const xgr_rule *rule, xgr_value payload, const xgr_step_ctx *ctx, xgr_http_exchange *x,
                 xgr_step_result *out) {
  xgr_step_state st;
  state_init(&st, rule, payload, ctx);
  const xgr_http_request *rq;
  xgr_http_exchange *own = NULL;
  while ((rq = xgr_step_next_request(&st)) != NULL) {
    if (!x && !own) own = xgr_http_exchange_new();
    xgr_http_response resp;
    if (x || own) xgr_http_exchange_perform(x ? x : own, rq, &resp);
    else resp = (xgr_http_response){.error = XGR_EHTTP, .error_message = "curl unavailable"};
    xgr_step_feed_http(&st, &resp);
  }
  xgr_http_exchange_free(own);
  return finish_into(&st, out);
}

const char *xgr_rule_action_name(xgr_rule_action a) {
  return a == XGR_ACTION_ABORT_STEP ? "abortStep" : a == XGR_ACTION_CANCEL_SESSION ? "cancelSession" : "";
}
