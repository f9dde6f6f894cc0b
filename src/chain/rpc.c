/* rpc.c — the Ethereum JSON-RPC client of the chain backend (xgr/chain.h): request bodies, the
 * parsing of answers with the revert dialects of the common nodes normalised, the set of named
 * backends with their health counters, and synchronous requests over a curl easy handle for
 * tools. The engine never uses the synchronous path: its reads go through reader.c and the
 * step engine's requests, i.e. through the engine's libcurl multi loop.
 *
 * The backends' URLs are the operator's configuration (--chain), not a tenant's: their requests go
 * through the outbound check (util/outbound.h) as operator endpoints — every address allowed, no
 * proxy from the environment — while the API calls of rules are held to the outbound policy.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "chain/chain_impl.h"
#include "util/alloc.h"
#include "util/outbound.h"
#include "xgr/abi.h"

void xgr_chain_fault_clear(xgr_chain_fault *f) {
  if (!f) return;
  free(f->data);
  memset(f, 0, sizeof *f);
}

char *xgr_chain_rpc_body(const char *method, json_t *take_params, uint64_t id, size_t *len) {
  json_t *req = json_pack("{s:s, s:I, s:s, s:o}", "jsonrpc", "2.0", "id", (json_int_t)id, "method", method, "params",
                          take_params ? take_params : json_array());
  if (!req) abort();
  char *s = json_dumps(req, JSON_COMPACT);
  json_decref(req);
  if (!s) abort();
  if (len) *len = strlen(s);
  return s;
}

static bool is_hex_data(const char *s) {
  if (!s || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return false;
  size_t n = strlen(s + 2);
  if (n % 2) return false;
  for (size_t i = 2; s[i]; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') || (s[i] >= 'A' && s[i] <= 'F'))) return false;
  return true;
}

/* The revert data of a node error, wherever the dialect puts it. */
static const char *revert_data(json_t *err) {
  json_t *d = json_object_get(err, "data");
  if (json_is_string(d) && is_hex_data(json_string_value(d))) return json_string_value(d);  /* anvil, geth */
  if (json_is_object(d)) {
    json_t *dd = json_object_get(d, "data");                                                  /* hardhat */
    if (json_is_string(dd) && is_hex_data(json_string_value(dd))) return json_string_value(dd);
    json_t *rv = json_object_get(d, "result");                                                /* ganache 6 */
    if (json_is_string(rv) && is_hex_data(json_string_value(rv))) return json_string_value(rv);
    /* ganache 6 keyed by transaction hash: {"0x…": {"error":"revert","return":"0x…"}} */
    const char *k;
    json_t *v;
    json_object_foreach(d, k, v) {
      json_t *r = json_object_get(v, "return");
      if (json_is_string(r) && is_hex_data(json_string_value(r))) return json_string_value(r);
    }
  }
  return NULL;
}

int xgr_chain_rpc_parse(const char *body, size_t len, json_t **result, xgr_chain_fault *f, xgr_error *e) {
  *result = NULL;
  if (f) memset(f, 0, sizeof *f);
  json_error_t je;
  json_t *doc = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &je);
  if (!doc || !json_is_object(doc)) {
    json_decref(doc);
    return xgr_error_set(e, XGR_EHTTP, NULL, "chain node answered something that is not a JSON-RPC object: %.80s",
                         doc ? "(not an object)" : je.text);
  }
  json_t *err = json_object_get(doc, "error");
  if (err && !json_is_null(err)) {
    json_t *code = json_object_get(err, "code");
    const char *msg = json_string_value(json_object_get(err, "message"));
    long c = json_is_integer(code) ? (long)json_integer_value(code) : 0;
    const char *data = revert_data(err);
    bool reverted = data != NULL || c == 3 || (msg && (strstr(msg, "revert") || strstr(msg, "Revert")));
    int rc;
    if (reverted) {
      char *reason = NULL;
      if (data) {
        size_t n;
        uint8_t *raw = xgr_hex_decode_alloc(data, strlen(data), &n);
        if (raw) reason = xgr_abi_revert_reason(raw, n);
        free(raw);
      }
      if (reason) rc = xgr_error_set(e, XGR_EEVAL, NULL, "execution reverted: %s", reason);
      else if (data && strlen(data) > 2) rc = xgr_error_set(e, XGR_EEVAL, NULL, "execution reverted (data %.200s)", data);
      else rc = xgr_error_set(e, XGR_EEVAL, NULL, "execution reverted%s%.300s", msg ? ": " : "", msg ? msg : "");
      free(reason);
    } else {
      rc = xgr_error_set(e, XGR_EHTTP, NULL, "chain node error %ld: %.300s", c, msg ? msg : "(no message)");
    }
    if (f) {
      f->reverted = reverted;
      f->rpc_code = c;
      f->data = data ? xgr__xstrdup(data) : NULL;
    }
    json_decref(doc);
    return rc;
  }
  json_t *res = json_object_get(doc, "result");
  if (!res) {
    json_decref(doc);
    return xgr_error_set(e, XGR_EHTTP, NULL, "chain node answer has neither result nor error");
  }
  *result = json_incref(res);
  json_decref(doc);
  return 0;
}

bool xgr_chain_quantity(const json_t *j, uint64_t *out) {
  const char *s = json_string_value(j);
  if (!s || s[0] != '0' || s[1] != 'x' || !s[2] || strlen(s) > 18) return false;
  uint64_t v = 0;
  for (size_t i = 2; s[i]; i++) {
    char ch = s[i];
    int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
    if (d < 0) return false;
    v = v << 4 | (uint64_t)d;
  }
  *out = v;
  return true;
}

/* ---- backends ---------------------------------------------------------------------------------- */

xgr_chain *xgr_chain_new(void) {
  xgr_chain *c = xgr__xcalloc(1, sizeof *c);
  c->timeout_ms = XGR_CHAIN_DEFAULT_TIMEOUT_MS;
  return c;
}

void xgr_chain_free(xgr_chain *c) {
  if (!c) return;
  for (size_t i = 0; i < c->n; i++) {
    free(c->b[i].name);
    free(c->b[i].url);
    pthread_mutex_destroy(&c->b[i].mu);
  }
  free(c);
}

void xgr_chain_set_timeout(xgr_chain *c, long ms) { c->timeout_ms = ms > 0 ? ms : XGR_CHAIN_DEFAULT_TIMEOUT_MS; }
size_t xgr_chain_count(const xgr_chain *c) { return c ? c->n : 0; }

int xgr_chain_add(xgr_chain *c, const char *spec, xgr_error *e) {
  const char *eq = strchr(spec, '=');
  const char *url = spec;
  size_t nl = 0;
  /* NAME=URL only when '=' comes before "://" (URLs may hold '=' in their query) */
  const char *scheme = strstr(spec, "://");
  if (eq && (!scheme || eq < scheme)) {
    nl = (size_t)(eq - spec);
    url = eq + 1;
    if (nl == 0 || nl > 64)
      return xgr_error_set(e, XGR_EINVAL, "--chain", "--chain \"%.100s\": backend name must be 1..64 characters", spec);
    for (size_t i = 0; i < nl; i++) {
      char ch = spec[i];
      if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' || ch == '.'))
        return xgr_error_set(e, XGR_EINVAL, "--chain", "--chain \"%.100s\": backend name may hold only A-Z a-z 0-9 _ - .", spec);
    }
  }
  if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8))
    return xgr_error_set(e, XGR_EINVAL, "--chain", "--chain \"%.100s\": expected URL or NAME=URL with an http:// or https:// URL", spec);
  if (strlen(url) > 2048) return xgr_error_set(e, XGR_EINVAL, "--chain", "--chain: URL longer than 2048 bytes");
  for (size_t i = 0; i < c->n; i++) {
    bool same = nl ? (c->b[i].name && strlen(c->b[i].name) == nl && !strncmp(c->b[i].name, spec, nl)) : !c->b[i].name;
    if (same) {
      if (nl) return xgr_error_set(e, XGR_EINVAL, "--chain", "--chain: backend \"%.*s\" is given twice", (int)nl, spec);
      return xgr_error_set(e, XGR_EINVAL, "--chain", "--chain: only one unnamed (default) backend is allowed; name the others NAME=URL");
    }
  }
  if (c->n == XGR_CHAIN_MAX_BACKENDS)
    return xgr_error_set(e, XGR_EINVAL, "--chain", "--chain: more than %d backends", XGR_CHAIN_MAX_BACKENDS);
  backend *b = &c->b[c->n++];
  memset(b, 0, sizeof *b);
  if (nl) {
    b->name = xgr__xmalloc(nl + 1);
    memcpy(b->name, spec, nl);
    b->name[nl] = 0;
  }
  b->url = xgr__xstrdup(url);
  pthread_mutex_init(&b->mu, NULL);
  return 0;
}

backend *xgr__chain_backend(const xgr_chain *c, const char *name) {
  if (!c) return NULL;
  bool dflt = !name || !name[0];
  for (size_t i = 0; i < c->n; i++) {
    backend *b = (backend *)&c->b[i];
    if (dflt ? !b->name : (b->name && !strcmp(b->name, name))) return b;
  }
  return NULL;
}

const char *xgr_chain_url(const xgr_chain *c, const char *name) {
  backend *b = xgr__chain_backend(c, name);
  return b ? b->url : NULL;
}

void xgr__chain_note(backend *b, bool ok, const char *err) {
  atomic_fetch_add_explicit(&b->calls, 1, memory_order_relaxed);
  if (ok) return;
  atomic_fetch_add_explicit(&b->errors, 1, memory_order_relaxed);
  pthread_mutex_lock(&b->mu);
  snprintf(b->last_error, sizeof b->last_error, "%s", err ? err : "");
  pthread_mutex_unlock(&b->mu);
}

/* ---- synchronous requests ---------------------------------------------------------------------- */

typedef struct sink {
  char *p;
  size_t len, cap;
  bool over;
} sink;

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ud) {
  sink *s = ud;
  size_t n = size * nmemb;
  if (s->len + n > XGR_CHAIN_MAX_RESPONSE) {
    s->over = true;
    return 0;
  }
  if (s->len + n + 1 > s->cap) {
    s->cap = (s->len + n + 1) * 2;
    s->p = xgr__xrealloc(s->p, s->cap);
  }
  memcpy(s->p + s->len, ptr, n);
  s->len += n;
  s->p[s->len] = 0;
  return n;
}

int xgr__chain_post(const char *url, const char *body, size_t len, long timeout_ms, char **resp, size_t *resp_len,
                    xgr_error *e) {
  *resp = NULL;
  *resp_len = 0;
  CURL *h = curl_easy_init();
  if (!h) return xgr_error_set(e, XGR_ENOMEM, NULL, "cannot create a curl handle");
  sink s = {0};
  struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
  xgr__outbound_conn oc = {.operator_endpoint = true};
  xgr__outbound_setopt(h, &oc);
  CURLcode rc = curl_easy_perform(h);
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(h);
  curl_slist_free_all(hdr);
  int out = 0;
  if (s.over) out = xgr_error_set(e, XGR_ELIMIT, NULL, "chain node answer exceeds %u bytes", XGR_CHAIN_MAX_RESPONSE);
  else if (rc == CURLE_OPERATION_TIMEDOUT)
    out = xgr_error_set(e, XGR_ETIMEOUT, NULL, "chain node %s did not answer within %ld ms", url, timeout_ms);
  else if (rc != CURLE_OK) out = xgr_error_set(e, XGR_EHTTP, NULL, "chain node %s: %s", url, curl_easy_strerror(rc));
  else if (status < 200 || status > 299) {
    /* nodes answer JSON-RPC errors with 200; some proxies use other codes with a JSON body */
    if (!s.p) out = xgr_error_set(e, XGR_EHTTP, NULL, "chain node %s answered HTTP status %ld", url, status);
  }
  if (out) {
    free(s.p);
    return out;
  }
  *resp = s.p ? s.p : xgr__xstrdup("");
  *resp_len = s.len;
  return 0;
}

int xgr_chain_rpc(xgr_chain *c, const char *name, const char *method, json_t *take_params, json_t **result,
                  xgr_chain_fault *f, xgr_error *e) {
  *result = NULL;
  if (f) memset(f, 0, sizeof *f);
  backend *b = xgr__chain_backend(c, name);
  if (!b) {
    json_decref(take_params);
    return xgr_error_set(e, XGR_ENOTFOUND, NULL, "chain backend \"%s\" is not configured", name && *name ? name : "(default)");
  }
  size_t len;
  uint64_t id = atomic_fetch_add_explicit(&c->next_id, 1, memory_order_relaxed) + 1;
  char *body = xgr_chain_rpc_body(method, take_params, id, &len);
  char *resp;
  size_t rl;
  int rc = xgr__chain_post(b->url, body, len, c->timeout_ms, &resp, &rl, e);
  free(body);
  if (rc == 0) {
    rc = xgr_chain_rpc_parse(resp, rl, result, f, e);
    free(resp);
  }
  xgr__chain_note(b, rc == 0 || (e && e->code == XGR_EEVAL), e ? e->message : NULL);
  return rc;
}

int xgr_chain_eth_call(xgr_chain *c, const char *name, const char *from, const char *to, const char *sig,
                   const xgr_value *args, size_t n, xgr_value *out, xgr_chain_fault *f, xgr_error *e) {
  *out = xgr_value_null();
  xgr_abi_sig *s = NULL;
  int rc = xgr_abi_sig_parse(sig, strlen(sig), &s, e);
  if (rc) return rc;
  uint8_t *data;
  size_t dl;
  rc = xgr_abi_encode_call(s, args, n, &data, &dl, e);
  if (rc) {
    xgr_abi_sig_free(s);
    return rc;
  }
  char *hex = xgr_hex_encode_alloc(data, dl);
  free(data);
  json_t *tx = json_pack("{s:s, s:s}", "to", to, "data", hex);
  free(hex);
  if (from) json_object_set_new(tx, "from", json_string(from));
  json_t *res;
  rc = xgr_chain_rpc(c, name, "eth_call", json_pack("[o, s]", tx, "latest"), &res, f, e);
  if (rc) {
    xgr_abi_sig_free(s);
    return rc;
  }
  const char *rs = json_string_value(res);
  size_t rawn = 0;
  uint8_t *raw = rs ? xgr_hex_decode_alloc(rs, strlen(rs), &rawn) : NULL;
  json_decref(res);
  if (!raw) {
    xgr_abi_sig_free(s);
    return xgr_error_set(e, XGR_EHTTP, NULL, "eth_call result is not hex data");
  }
  if (s->outputs) rc = xgr_abi_decode(s->outputs, raw, rawn, out, e);
  else *out = xgr_value_bytes(raw, rawn);
  free(raw);
  xgr_abi_sig_free(s);
  return rc;
}

/* ---- health ------------------------------------------------------------------------------------ */

void xgr_chain_probe(xgr_chain *c) {
  for (size_t i = 0; c && i < c->n; i++) {
    backend *b = &c->b[i];
    json_t *res;
    xgr_error e;
    xgr_error_clear(&e);
    if (xgr_chain_rpc(c, b->name, "eth_blockNumber", NULL, &res, NULL, &e) == 0) {
      uint64_t blk;
      if (xgr_chain_quantity(res, &blk)) {
        atomic_store_explicit(&b->last_block, blk, memory_order_relaxed);
        atomic_store_explicit(&b->ok, true, memory_order_relaxed);
      }
      json_decref(res);
    } else {
      atomic_store_explicit(&b->ok, false, memory_order_relaxed);
    }
  }
}

json_t *xgr_chain_health(const xgr_chain *c) {
  json_t *a = json_array();
  for (size_t i = 0; c && i < c->n; i++) {
    backend *b = (backend *)&c->b[i];
    pthread_mutex_lock(&b->mu);
    json_t *le = b->last_error[0] ? json_string(b->last_error) : json_null();
    pthread_mutex_unlock(&b->mu);
    json_array_append_new(a, json_pack("{s:s?, s:s, s:I, s:I, s:I, s:o, s:b}", "name", b->name, "url", b->url, "lastBlock",
                                       (json_int_t)atomic_load(&b->last_block), "calls", (json_int_t)atomic_load(&b->calls),
                                       "errors", (json_int_t)atomic_load(&b->errors), "lastError", le, "ok",
                                       (int)atomic_load(&b->ok)));
  }
  return a;
}
