/* registry.c — orchestrations and rules read from XRC-729 / XRC-137 contracts (xgr/chain.h):
 * getOSTC with the hash pin of XRC-729 §8, getRule with the isEncrypted refusal, bundles assembled
 * by the same code as registry-backed bundles elsewhere (xgr_bundle_assemble), a cache refreshed
 * from the contracts' logs, and the owner / executor authorization.
 *
 * Cache layout: a list of orchestration entries (backend, registry, ostcId, hash, bundle, live)
 * and rule entries (backend, address, bytes, live). Refreshing marks entries dead; a dead
 * orchestration entry keeps its bundle (sessions may hold it) but is no longer returned. Lists are
 * short (one entry per orchestration version and rule contract), so lookups are linear.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain/chain_impl.h"
#include "util/alloc.h"
#include "xgr/abi.h"
#include "xgr/bundle.h"
#include "xgr/keccak.h"

typedef struct orch_ent {
  char *backend, *registry, *id;
  char id_topic[67];            /* keccak256(id): the indexed topic of OSTCSet(string) */
  char hash[67];
  char *bytes;                  /* the exact getOSTC bytes */
  size_t len;
  xgr_bundle *bundle;
  bool live;
  struct orch_ent *next;
} orch_ent;

typedef struct rule_ent {
  char *backend, *address;
  char *bytes;
  size_t len;
  bool live;
  struct rule_ent *next;
} rule_ent;

struct xgr_chain_cache {
  xgr_chain *c;
  pthread_mutex_t mu;
  orch_ent *orchs;
  rule_ent *rules;
  uint64_t next_block;          /* first block the next refresh reads; 0: not started */
};

static bool same_backend(const char *a, const char *b) {
  return !strcmp(a ? a : "", b ? b : "");
}

static char *lower_dup(const char *s) {
  char *d = xgr__xstrdup(s);
  for (char *p = d; *p; p++)
    if (*p >= 'A' && *p <= 'F') *p = (char)(*p - 'A' + 'a');
  return d;
}

xgr_chain_cache *xgr_chain_cache_new(xgr_chain *c) {
  xgr_chain_cache *k = xgr__xcalloc(1, sizeof *k);
  k->c = c;
  pthread_mutex_init(&k->mu, NULL);
  return k;
}

void xgr_chain_cache_free(xgr_chain_cache *k) {
  if (!k) return;
  for (orch_ent *o = k->orchs, *n; o; o = n) {
    n = o->next;
    free(o->backend);
    free(o->registry);
    free(o->id);
    free(o->bytes);
    xgr_bundle_free(o->bundle);
    free(o);
  }
  for (rule_ent *r = k->rules, *n; r; r = n) {
    n = r->next;
    free(r->backend);
    free(r->address);
    free(r->bytes);
    free(r);
  }
  pthread_mutex_destroy(&k->mu);
  free(k);
}

/* eth_call of a view with one declared return value; *out retained from the list. */
static int view1(xgr_chain *c, const char *name, const char *to, const char *sig, const xgr_value *args, size_t n,
                 xgr_value *out, xgr_chain_fault *f, xgr_error *e) {
  xgr_value list;
  int rc = xgr_chain_eth_call(c, name, NULL, to, sig, args, n, &list, f, e);
  if (rc) return rc;
  *out = xgr_value_retain(xgr_list_get(list, 0));
  xgr_value_release(list);
  return 0;
}

/* Re-raise *e with a prefix: "<prefix>: <the previous message>" (the message is copied first:
 * formatting into the buffer being read is undefined). */
static int wrap(xgr_error *e, int code, const char *path, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int wrap(xgr_error *e, int code, const char *path, const char *fmt, ...) {
  char old[XGR_MSG_MAX], pre[XGR_MSG_MAX];
  snprintf(old, sizeof old, "%s", e->message);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(pre, sizeof pre, fmt, ap);
  va_end(ap);
  return xgr_error_set(e, code, path, "%s: %s", pre, old);
}

/* ---- rules ------------------------------------------------------------------------------------- */

typedef struct lookup_ctx {
  xgr_chain_cache *k;
  const char *backend;
} lookup_ctx;

/* Rule bytes for an address: from the cache, or getRule() after isEncrypted() said no. */
static int rule_lookup(void *vctx, const char *key, char **bytes, size_t *len, xgr_error *e) {
  lookup_ctx *lc = vctx;
  xgr_chain_cache *k = lc->k;
  if (!xgr_xrc_is_address(key, strlen(key)))
    return xgr_error_set(e, XGR_ENOTFOUND, NULL, "rule reference \"%s\" is not a contract address", key);
  pthread_mutex_lock(&k->mu);
  for (rule_ent *r = k->rules; r; r = r->next) {
    if (r->live && same_backend(r->backend, lc->backend) && !strcmp(r->address, key)) {
      *bytes = xgr__xmalloc(r->len + 1);
      memcpy(*bytes, r->bytes, r->len + 1);
      *len = r->len;
      pthread_mutex_unlock(&k->mu);
      return 0;
    }
  }
  pthread_mutex_unlock(&k->mu);
  xgr_value enc, rule;
  int rc = view1(k->c, lc->backend, key, "isEncrypted()(bool)", NULL, 0, &enc, NULL, e);
  if (rc) return wrap(e, rc == XGR_EEVAL ? XGR_ENOTFOUND : rc, NULL, "rule contract %s: isEncrypted()", key);
  bool encrypted = enc.kind == XGR_VBOOL && enc.as.b;
  xgr_value_release(enc);
  if (encrypted)
    return xgr_error_set(e, XGR_EUNSUPPORTED, NULL,
                         "rule contract %s holds an encrypted rule (XGR1 envelope); xgr runs plain JSON rules only", key);
  rc = view1(k->c, lc->backend, key, "getRule()(string)", NULL, 0, &rule, NULL, e);
  if (rc) return wrap(e, rc == XGR_EEVAL ? XGR_ENOTFOUND : rc, NULL, "rule contract %s: getRule()", key);
  size_t n;
  const char *s = xgr_value_str(rule, &n);
  rule_ent *r = xgr__xcalloc(1, sizeof *r);
  r->backend = lc->backend ? xgr__xstrdup(lc->backend) : NULL;
  r->address = xgr__xstrdup(key);
  r->bytes = xgr__xmalloc(n + 1);
  memcpy(r->bytes, s, n);
  r->bytes[n] = 0;
  r->len = n;
  r->live = true;
  *bytes = xgr__xmalloc(n + 1);
  memcpy(*bytes, s, n + 1);
  *len = n;
  xgr_value_release(rule);
  pthread_mutex_lock(&k->mu);
  r->next = k->rules;
  k->rules = r;
  pthread_mutex_unlock(&k->mu);
  return 0;
}

/* ---- orchestrations ---------------------------------------------------------------------------- */

int xgr_chain_load_orch(xgr_chain_cache *k, const char *name, const char *registry_in, const char *ostc_id,
                        const char *expected_hash, xgr_chain_orch *out, xgr_error *e) {
  char *want = expected_hash ? lower_dup(expected_hash) : NULL;  /* may point into *out */
  memset(out, 0, sizeof *out);
  if (!xgr_xrc_is_address(registry_in, strlen(registry_in))) {
    free(want);
    return xgr_error_set(e, XGR_EINVAL, "xrc729", "registry \"%.60s\": expected \"0x\" + 40 hex digits", registry_in);
  }
  char *registry = lower_dup(registry_in);
  int rc = 0;
  pthread_mutex_lock(&k->mu);
  for (orch_ent *o = k->orchs; o; o = o->next) {
    if (o->live && same_backend(o->backend, name) && !strcmp(o->registry, registry) && !strcmp(o->id, ostc_id)) {
      out->bundle = o->bundle;
      memcpy(out->hash, o->hash, 67);
      out->cached = true;
      break;
    }
  }
  pthread_mutex_unlock(&k->mu);
  if (!out->bundle) {
    xgr_value idv = xgr_value_cstring(ostc_id), ostc;
    rc = view1(k->c, name, registry, "getOSTC(string)(string)", &idv, 1, &ostc, NULL, e);
    xgr_value_release(idv);
    if (rc) {
      rc = wrap(e, rc == XGR_EEVAL ? XGR_ENOTFOUND : rc, "ostcId", "registry %s has no orchestration \"%.80s\"", registry, ostc_id);
      goto out;
    }
    size_t n;
    const char *bytes = xgr_value_str(ostc, &n);
    orch_ent *o = xgr__xcalloc(1, sizeof *o);
    xgr_keccak256_hex(bytes, n, o->hash);
    lookup_ctx lc = {k, name};
    rc = xgr_bundle_assemble(bytes, n, rule_lookup, &lc, &o->bundle, e);
    if (rc) {
      xgr_value_release(ostc);
      free(o);
      goto out;
    }
    o->bytes = xgr__xmalloc(n + 1);
    memcpy(o->bytes, bytes, n);
    o->bytes[n] = 0;
    o->len = n;
    xgr_value_release(ostc);
    o->backend = name ? xgr__xstrdup(name) : NULL;
    o->registry = xgr__xstrdup(registry);
    o->id = xgr__xstrdup(ostc_id);
    xgr_keccak256_hex(ostc_id, strlen(ostc_id), o->id_topic);
    o->live = true;
    pthread_mutex_lock(&k->mu);
    o->next = k->orchs;
    k->orchs = o;
    pthread_mutex_unlock(&k->mu);
    out->bundle = o->bundle;
    memcpy(out->hash, o->hash, 67);
  }
  if (want && strcmp(want, out->hash)) {
    rc = xgr_error_set(e, XGR_EMISMATCH, "ostcHash", "registry %s returns orchestration \"%.80s\" with hash %s; the session pinned %s",
                       registry, ostc_id, out->hash, want);
    memset(out, 0, sizeof *out);
  }
out:
  free(registry);
  free(want);
  return rc;
}

int xgr_chain_ostc_text(xgr_chain_cache *k, const char *name, const char *registry_in, const char *ostc_id, char **bytes,
                        size_t *len, xgr_error *e) {
  char *registry = lower_dup(registry_in);
  int rc = xgr_error_set(e, XGR_ENOTFOUND, NULL, "orchestration \"%s\" of %s is not cached", ostc_id, registry);
  pthread_mutex_lock(&k->mu);
  for (orch_ent *o = k->orchs; o; o = o->next)
    if (o->live && same_backend(o->backend, name) && !strcmp(o->registry, registry) && !strcmp(o->id, ostc_id)) {
      *bytes = xgr__xmalloc(o->len + 1);
      memcpy(*bytes, o->bytes, o->len + 1);
      *len = o->len;
      rc = 0;
      break;
    }
  pthread_mutex_unlock(&k->mu);
  free(registry);
  return rc;
}

int xgr_chain_rule_text(xgr_chain_cache *k, const char *name, const char *address, char **bytes, size_t *len,
                        xgr_error *e) {
  lookup_ctx lc = {k, name};
  char *a = lower_dup(address);
  int rc = rule_lookup(&lc, a, bytes, len, e);
  free(a);
  return rc;
}

/* ---- refresh from logs ------------------------------------------------------------------------- */

int xgr_chain_cache_refresh(xgr_chain_cache *k, xgr_error *e) {
  /* one backend at a time: the default and every named one with entries */
  int dropped = 0;
  uint64_t latest = 0;
  json_t *res;
  int rc = xgr_chain_rpc(k->c, NULL, "eth_blockNumber", NULL, &res, NULL, e);
  if (rc) return rc;
  bool ok = xgr_chain_quantity(res, &latest);
  json_decref(res);
  if (!ok) return xgr_error_set(e, XGR_EHTTP, NULL, "eth_blockNumber: not a quantity");
  if (k->next_block == 0 || latest + 1 < k->next_block) {
    k->next_block = latest + 1;
    return 0;
  }
  if (latest < k->next_block) return 0;
  char from[24], to[24];
  snprintf(from, sizeof from, "0x%llx", (unsigned long long)k->next_block);
  snprintf(to, sizeof to, "0x%llx", (unsigned long long)latest);
  /* the addresses whose logs matter */
  json_t *addrs = json_array();
  pthread_mutex_lock(&k->mu);
  for (orch_ent *o = k->orchs; o; o = o->next)
    if (o->live) json_array_append_new(addrs, json_string(o->registry));
  for (rule_ent *r = k->rules; r; r = r->next)
    if (r->live) json_array_append_new(addrs, json_string(r->address));
  pthread_mutex_unlock(&k->mu);
  if (json_array_size(addrs) == 0) {
    json_decref(addrs);
    k->next_block = latest + 1;
    return 0;
  }
  char t_set[67], t_del[67], t_rule[67], t_enc[67];
  xgr_keccak256_hex("OSTCSet(string)", 15, t_set);
  xgr_keccak256_hex("OSTCDeleted(string)", 19, t_del);
  xgr_keccak256_hex("RuleUpdated(string)", 19, t_rule);
  xgr_keccak256_hex("EncryptedSet(bytes32,string)", 28, t_enc);
  json_t *filter = json_pack("{s:s, s:s, s:o, s:[[s,s,s,s]]}", "fromBlock", from, "toBlock", to, "address", addrs, "topics",
                             t_set, t_del, t_rule, t_enc);
  rc = xgr_chain_rpc(k->c, NULL, "eth_getLogs", json_pack("[o]", filter), &res, NULL, e);
  if (rc) return rc;
  pthread_mutex_lock(&k->mu);
  size_t i;
  json_t *lg;
  json_array_foreach(res, i, lg) {
    const char *addr = json_string_value(json_object_get(lg, "address"));
    json_t *topics = json_object_get(lg, "topics");
    const char *t0 = json_string_value(json_array_get(topics, 0));
    const char *t1 = json_string_value(json_array_get(topics, 1));
    if (!addr || !t0) continue;
    char *a = lower_dup(addr);
    if (!strcmp(t0, t_set) || !strcmp(t0, t_del)) {
      for (orch_ent *o = k->orchs; o; o = o->next)
        if (o->live && !strcmp(o->registry, a) && t1 && !strcmp(o->id_topic, t1)) o->live = false, dropped++;
    } else {
      for (rule_ent *r = k->rules; r; r = r->next)
        if (r->live && !strcmp(r->address, a)) r->live = false, dropped++;
      /* orchestrations built on that rule must be assembled again */
      for (orch_ent *o = k->orchs; o; o = o->next)
        for (size_t s = 0; o->live && s < o->bundle->orch->nsteps; s++)
          if (o->bundle->step_rule_address[s] && !strcmp(o->bundle->step_rule_address[s], a)) o->live = false, dropped++;
    }
    free(a);
  }
  k->next_block = latest + 1;
  pthread_mutex_unlock(&k->mu);
  json_decref(res);
  return dropped;
}

/* ---- authorization ----------------------------------------------------------------------------- */

int xgr_chain_authorized(xgr_chain *c, const char *name, const char *contract, const char *signer, bool *ok,
                         xgr_error *e) {
  *ok = false;
  char *who = lower_dup(signer);
  xgr_value owner;
  int rc = view1(c, name, contract, "owner()(address)", NULL, 0, &owner, NULL, e);
  if (rc) {
    free(who);
    return wrap(e, rc, NULL, "%s: owner()", contract);
  }
  *ok = !strcmp(xgr_value_str(owner, NULL), who);
  xgr_value_release(owner);
  if (*ok) {
    free(who);
    return 0;
  }
  xgr_value list;
  xgr_chain_fault f;
  rc = view1(c, name, contract, "getExecutorList()(address[])", NULL, 0, &list, &f, e);
  if (rc) {
    /* no executor extension: a revert without data; anything else is a real failure */
    bool legacy = f.reverted && (!f.data || !strcmp(f.data, "0x"));
    xgr_chain_fault_clear(&f);
    free(who);
    if (legacy) {
      xgr_error_clear(e);
      return 0;
    }
    return wrap(e, rc, NULL, "%s: getExecutorList()", contract);
  }
  for (size_t i = 0; i < xgr_list_size(list) && !*ok; i++) *ok = !strcmp(xgr_value_str(xgr_list_get(list, i), NULL), who);
  xgr_value_release(list);
  free(who);
  return 0;
}
