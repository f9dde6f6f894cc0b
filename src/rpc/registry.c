/* registry.c — the registries of orchestrations and rules (xgr.putOrchestration,
 * getOrchestration, putRule, getRule) and the cache of assembled bundles.
 *
 * Orchestrations are stored under "<registry>/<ostcId>" and, as the registry's current
 * orchestration, under "<registry>" (registry = the XRC-729 address given as `xrc729`, `registry`
 * or `orchestration`, lowercased; "local" when none). Their exact bytes are what is hashed. Rules
 * are stored under their address (lowercased) or alias. A session runs a bundle assembled from the
 * orchestration's bytes and the registered rules (xgr_bundle_assemble); bundles are cached per
 * registry key and rules generation (at most XGR__RPCD_MAX_CACHED entries) and freed when no cache
 * entry points at them and no method call or running session holds them (xgr__rpcd_bundle_put).
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/rpc_impl.h"
#include "util/alloc.h"
#include "xgr/xrc_types.h"

/* ---- bundles ---------------------------------------------------------------------------------- */

static int rule_lookup(void *ctx, const char *key, char **bytes, size_t *len, xgr_error *err) {
  xgr_rpcd *d = ctx;
  xgr_store_doc doc = {0};
  int rc = xgr_store_doc_get(d->st, XGR_REG_RULE, key, 0, &doc, err);
  if (rc) return rc;
  *bytes = doc.content;
  *len = doc.len;
  doc.content = NULL;
  xgr_store_doc_clear(&doc);
  return 0;
}

/* Free bn when nothing holds it and no cache entry points at it (reg_mu held). */
static void bnode_release_locked(xgr_rpcd *d, xgr__bnode *bn) {
  if (bn->refs || bn->cached) return;
  for (xgr__bnode **pp = &d->bundles; *pp; pp = &(*pp)->next)
    if (*pp == bn) {
      *pp = bn->next;
      break;
    }
  xgr_bundle_free(bn->b);
  free(bn);
}

static void regent_free_locked(xgr_rpcd *d, xgr__regent *r) {
  r->bn->cached = false;
  bnode_release_locked(d, r->bn);
  free(r->key);
  free(r);
}

/* Drop the cache entry of key, if any, and every entry of an older rules generation (reg_mu held). */
static void drop_locked(xgr_rpcd *d, const char *key, uint64_t gen) {
  for (xgr__regent **pp = &d->regs; *pp;) {
    xgr__regent *r = *pp;
    if ((key && !strcmp(r->key, key)) || r->gen != gen) {
      *pp = r->next;
      regent_free_locked(d, r);
    } else {
      pp = &r->next;
    }
  }
}

static xgr__bnode *bnode_of_locked(xgr_rpcd *d, const xgr_bundle *b) {
  for (xgr__bnode *bn = d->bundles; bn; bn = bn->next)
    if (bn->b == b) return bn;
  return NULL;
}

void xgr__rpcd_bundle_hold(xgr_rpcd *d, const xgr_bundle *b) {
  pthread_mutex_lock(&d->reg_mu);
  xgr__bnode *bn = bnode_of_locked(d, b);
  assert(bn && bn->refs > 0);
  bn->refs++;
  pthread_mutex_unlock(&d->reg_mu);
}

void xgr__rpcd_bundle_put(xgr_rpcd *d, const xgr_bundle *b) {
  if (!b) return;
  pthread_mutex_lock(&d->reg_mu);
  xgr__bnode *bn = bnode_of_locked(d, b);
  assert(bn && bn->refs > 0);
  if (bn) {
    bn->refs--;
    bnode_release_locked(d, bn);
  }
  pthread_mutex_unlock(&d->reg_mu);
}

void xgr__rpcd_bundle_done(void *d, const xgr_bundle *b) { xgr__rpcd_bundle_put(d, b); }

int xgr__rpcd_bundle(xgr_rpcd *d, const char *key, const xgr_bundle **out, const char *path, xgr_error *err) {
  *out = NULL;
  uint64_t gen = atomic_load(&d->rules_gen);
  pthread_mutex_lock(&d->reg_mu);
  for (xgr__regent *r = d->regs; r; r = r->next)
    if (r->gen == gen && !strcmp(r->key, key)) {
      r->bn->refs++;
      *out = r->bn->b;
      pthread_mutex_unlock(&d->reg_mu);
      return 0;
    }
  pthread_mutex_unlock(&d->reg_mu);
  xgr_store_doc doc = {0};
  int rc = key[0] == '#' ? xgr_store_doc_by_hash(d->st, XGR_REG_ORCHESTRATION, key + 1, &doc, err)
                         : xgr_store_doc_get(d->st, XGR_REG_ORCHESTRATION, key, 0, &doc, err);
  if (rc) {
    if (rc == XGR_ENOTFOUND)
      xgr_error_set(err, rc, path,
                    "no orchestration is registered under \"%s\" (register it with xgr.putOrchestration)",
                    key[0] == '#' ? key + 1 : key);
    return rc;
  }
  xgr_bundle *b = NULL;
  rc = xgr_bundle_assemble(doc.content, doc.len, rule_lookup, d, &b, err);
  xgr_store_doc_clear(&doc);
  if (rc) return rc;
  xgr__regent *r = xgr__xcalloc(1, sizeof *r);
  xgr__bnode *bn = xgr__xcalloc(1, sizeof *bn);
  r->key = xgr__xstrdup(key);
  r->gen = gen;
  r->bn = bn;
  bn->b = b;
  bn->refs = 1;          /* the caller's */
  bn->cached = true;     /* r's */
  pthread_mutex_lock(&d->reg_mu);
  bn->next = d->bundles;
  d->bundles = bn;
  /* replace an older entry of the same key; forget stale generations */
  drop_locked(d, key, atomic_load(&d->rules_gen));
  if (gen == atomic_load(&d->rules_gen)) {
    r->next = d->regs;
    d->regs = r;
    size_t n = 0;   /* bounded: drop the oldest entries beyond the cap */
    for (xgr__regent **pp = &d->regs; *pp;) {
      if (++n > XGR__RPCD_MAX_CACHED) {
        xgr__regent *old = *pp;
        *pp = old->next;
        regent_free_locked(d, old);
      } else {
        pp = &(*pp)->next;
      }
    }
  } else {   /* rules changed meanwhile: used by this call only */
    free(r->key);
    free(r);
    bn->cached = false;
  }
  pthread_mutex_unlock(&d->reg_mu);
  *out = b;
  return 0;
}

static void invalidate(xgr_rpcd *d, const char *key) {
  pthread_mutex_lock(&d->reg_mu);
  drop_locked(d, key, atomic_load(&d->rules_gen));
  pthread_mutex_unlock(&d->reg_mu);
}

/* ---- registries --------------------------------------------------------------------------------- */

/* The exact bytes of a document parameter: a string as given, an object as jansson's compact
 * serialization in key order. *bytes is owned by the caller (free). */
static int doc_bytes(const json_t *o, const char *key, char **bytes, size_t *len, xgr_error *err) {
  const json_t *v = json_object_get(o, key);
  if (!v || json_is_null(v))
    return xgr__rpc_fail(err, XGR_RPC_INVALID_PARAMS, XGR_ESCHEMA, key,
                         "missing; expected the document as an object or its JSON text");
  if (json_is_string(v)) {
    *len = json_string_length(v);
    *bytes = xgr__xmalloc(*len + 1);
    memcpy(*bytes, json_string_value(v), *len + 1);
    return 0;
  }
  if (!json_is_object(v))
    return xgr__rpc_fail(err, XGR_RPC_INVALID_PARAMS, XGR_ESCHEMA, key,
                         "is not an object; expected the document as an object or its JSON text");
  *bytes = xgr_json_dumps_compact(v);   /* numbers beyond int64 as numbers */
  if (!*bytes) abort();
  *len = strlen(*bytes);
  return 0;
}

static int prefixed(int rc, xgr_error *err, const char *pre, const xgr_error *e) {
  xgr_error_set(err, e->code ? e->code : rc, NULL, "%s", e->message);
  snprintf(err->path, sizeof err->path, "%s%s%.200s", pre, e->path[0] && e->path[0] != '[' ? "." : "", e->path);
  /* a document that does not load is the client's: invalid params whatever failed in it (an
   * unknown CEL function is an eval_error of the compiler, not an internal error), limits apart */
  int c = xgr_rpc_code_for(e->code ? e->code : rc);
  return c == XGR_RPC_INTERNAL_ERROR && (e->code ? e->code : rc) != XGR_ENOMEM ? XGR_RPC_INVALID_PARAMS : c;
}

static json_t *doc_json(const xgr_store_doc *doc) {
  return json_pack("{s:s, s:I, s:s, s:I}", "hash", doc->hash, "version", (json_int_t)doc->version, "owner",
                   doc->owner ? doc->owner : "", "registeredAt", (json_int_t)doc->registered_at);
}

XGR__RPCD_METHOD(xgr__rpcd_m_put_orch) {
  xgr_rpcd *d = ctx;
  const json_t *o;
  int rc = xgr_rpc_params_object(params, &o, err);
  if (rc) return rc;
  char who[64] = "", reg[XGR__RPC_MAX_REGISTRY + 1], key[XGR__RPC_KEY_SIZE];
  const char *rpath, *ostc_id = NULL;
  if ((rc = xgr_rpc_authorize(caller, o, XGR_RPC_ACT_REGISTER, NULL, who, sizeof who, err))) return rc;
  if ((rc = xgr__rpc_registry(o, NULL, false, reg, sizeof reg, &rpath, err)) ||
      (rc = xgr__rpc_ostc_id(o, &ostc_id, err)))
    return rc;
  char *bytes;
  size_t len;
  if ((rc = doc_bytes(o, "orchestration", &bytes, &len, err))) return rc;
  if (len > XGR_MAX_OSTC_BYTES) {
    free(bytes);
    return xgr__rpc_fail(err, XGR_RPC_LIMITS_EXCEEDED, XGR_ELIMIT, "orchestration", "is %zu bytes; MaxOSTCBytes is %d",
                         len, XGR_MAX_OSTC_BYTES);
  }
  xgr_orch *orch = NULL;
  xgr_error e;
  if ((rc = xgr_orch_parse(bytes, len, &orch, &e, NULL))) {
    free(bytes);
    return prefixed(rc, err, "orchestration", &e);
  }
  const char *id = ostc_id ? ostc_id : orch->id;
  if (!ostc_id && (rc = xgr__rpc_check_name(id, XGR__RPC_MAX_OSTC_ID, "/", "orchestration.id",
                                            "a non-empty id without '/' (at most 96 bytes), or an ostcId parameter",
                                            err))) {
    xgr_orch_free(orch);
    free(bytes);
    return rc;
  }
  xgr__rpc_registry_key(key, reg, id);
  xgr_store_doc doc = {0}, doc2 = {0};
  rc = xgr_store_register(d->st, XGR_REG_ORCHESTRATION, key, who, bytes, len, &doc, err);
  if (!rc) rc = xgr_store_register(d->st, XGR_REG_ORCHESTRATION, reg, who, bytes, len, &doc2, err);
  free(bytes);
  if (rc) {
    xgr_orch_free(orch);
    return xgr__rpc_code(rc, err);
  }
  invalidate(d, key);
  invalidate(d, reg);
  json_t *r = doc_json(&doc);
  json_object_set_new(r, "registry", json_string(reg));
  json_object_set_new(r, "ostcId", json_string(id));
  json_object_set_new(r, "steps", json_integer((json_int_t)orch->nsteps));
  xgr__rpcd_log(d, "level=info msg=\"orchestration registered\" registry=%s ostcId=%s version=%u hash=%s", reg, id,
                doc.version, doc.hash);
  xgr_store_doc_clear(&doc);
  xgr_store_doc_clear(&doc2);
  xgr_orch_free(orch);
  *result = r;
  return 0;
}

XGR__RPCD_METHOD(xgr__rpcd_m_get_orch) {
  xgr_rpcd *d = ctx;
  const json_t *o;
  int rc = xgr_rpc_params_object(params, &o, err);
  if (rc) return rc;
  char reg[XGR__RPC_MAX_REGISTRY + 1], key[XGR__RPC_KEY_SIZE];
  const char *rpath, *ostc_id = NULL;
  if ((rc = xgr__rpc_registry(o, NULL, false, reg, sizeof reg, &rpath, err)) ||
      (rc = xgr__rpc_ostc_id(o, &ostc_id, err)))
    return rc;
  uint32_t version;
  if ((rc = xgr__rpc_version(o, &version, err))) return rc;
  xgr__rpc_registry_key(key, reg, ostc_id);
  xgr_store_doc doc = {0};
  if ((rc = xgr_store_doc_get(d->st, XGR_REG_ORCHESTRATION, key, version, &doc, err))) {
    if (rc == XGR_ENOTFOUND) xgr_error_set(err, rc, ostc_id ? "ostcId" : rpath, "no orchestration \"%s\"%s", key,
                                           version ? " in that version" : "");
    return xgr__rpc_code(rc, err);
  }
  json_t *r = doc_json(&doc);
  json_object_set_new(r, "registry", json_string(reg));
  json_t *oj = NULL;
  if (xgr_json_parse_exact(doc.content, doc.len, &oj, NULL)) oj = NULL;
  const char *doc_id = json_string_value(json_object_get(oj, "id"));
  json_object_set_new(r, "ostcId", json_string(ostc_id ? ostc_id : doc_id ? doc_id : ""));
  json_object_set_new(r, "orchestration", oj ? oj : json_null());
  json_object_set_new(r, "content", json_stringn(doc.content, doc.len));
  xgr_store_doc_clear(&doc);
  *result = r;
  return 0;
}

static int rule_key(const json_t *o, char *key, size_t n, const char **path, xgr_error *err) {
  static const char *const keys[] = {"address", "key", "alias", NULL};
  const char *k = xgr__rpc_first_key(o, keys), *v;
  int rc = xgr_rpc_param_string(o, k, true, &v, err);
  if (rc) {
    if (!json_object_get(o, k)) snprintf(err->path, sizeof err->path, "address");
    return rc;
  }
  *path = k;
  if ((rc = xgr__rpc_check_name(v, n - 1, "/#", k, "a rule address (0x + 40 hex) or an alias without '/' or '#'", err)))
    return rc;
  snprintf(key, n, "%s", v);
  if (xgr_rpc_is_address(key)) xgr__rpc_lower(key);
  return 0;
}

XGR__RPCD_METHOD(xgr__rpcd_m_put_rule) {
  xgr_rpcd *d = ctx;
  const json_t *o;
  int rc = xgr_rpc_params_object(params, &o, err);
  if (rc) return rc;
  char who[64] = "", key[128];
  const char *kpath;
  if ((rc = xgr_rpc_authorize(caller, o, XGR_RPC_ACT_REGISTER, NULL, who, sizeof who, err))) return rc;
  if ((rc = rule_key(o, key, sizeof key, &kpath, err))) return rc;
  char *bytes;
  size_t len;
  if ((rc = doc_bytes(o, "rule", &bytes, &len, err))) return rc;
  if (len > 131072) {
    free(bytes);
    return xgr__rpc_fail(err, XGR_RPC_LIMITS_EXCEEDED, XGR_ELIMIT, "rule", "is %zu bytes; MaxXRC137Bytes is 131072",
                         len);
  }
  xgr_rule *rule = NULL;
  xgr_error e;
  if ((rc = xgr_rule_parse(bytes, len, &rule, &e))) {
    free(bytes);
    return prefixed(rc, err, "rule", &e);
  }
  xgr_rule_free(rule);
  xgr_store_doc doc = {0};
  rc = xgr_store_register(d->st, XGR_REG_RULE, key, who, bytes, len, &doc, err);
  free(bytes);
  if (rc) return xgr__rpc_code(rc, err);
  uint64_t gen = atomic_fetch_add(&d->rules_gen, 1) + 1;
  pthread_mutex_lock(&d->reg_mu);
  drop_locked(d, NULL, gen);   /* stale now: freed unless a call or a session holds them */
  pthread_mutex_unlock(&d->reg_mu);
  json_t *r = doc_json(&doc);
  json_object_set_new(r, "address", json_string(key));
  xgr__rpcd_log(d, "level=info msg=\"rule registered\" key=%s version=%u hash=%s", key, doc.version, doc.hash);
  xgr_store_doc_clear(&doc);
  *result = r;
  return 0;
}

XGR__RPCD_METHOD(xgr__rpcd_m_get_rule) {
  xgr_rpcd *d = ctx;
  const json_t *o;
  int rc = xgr_rpc_params_object(params, &o, err);
  if (rc) return rc;
  char key[128];
  const char *kpath;
  if ((rc = rule_key(o, key, sizeof key, &kpath, err))) return rc;
  uint32_t version;
  if ((rc = xgr__rpc_version(o, &version, err))) return rc;
  xgr_store_doc doc = {0};
  if ((rc = xgr_store_doc_get(d->st, XGR_REG_RULE, key, version, &doc, err))) {
    if (rc == XGR_ENOTFOUND) xgr_error_set(err, rc, kpath, "no rule is registered under \"%s\"", key);
    return xgr__rpc_code(rc, err);
  }
  json_t *r = doc_json(&doc);
  json_object_set_new(r, "address", json_string(key));
  json_t *rj = NULL;
  if (xgr_json_parse_exact(doc.content, doc.len, &rj, NULL)) rj = NULL;
  json_object_set_new(r, "rule", rj ? rj : json_null());
  json_object_set_new(r, "content", json_stringn(doc.content, doc.len));
  xgr_store_doc_clear(&doc);
  *result = r;
  return 0;
}


void xgr__rpcd_bundles_free(xgr_rpcd *d) {
  for (xgr__regent *r = d->regs, *nx; r; r = nx) {
    nx = r->next;
    free(r->key);
    free(r);
  }
  for (xgr__bnode *b = d->bundles, *nx; b; b = nx) {
    nx = b->next;
    xgr_bundle_free(b->b);
    free(b);
  }
  d->regs = NULL;
  d->bundles = NULL;
}
