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
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rpc/rpc_impl.h"
#include "util/alloc.h"
#include "xgr/xrc_types.h"

/* ---- bundles ---------------------------------------------------------------------------------- */

bool xgr__rpc_permits(const xgr_rpc_caller *caller) { return caller && !caller->auth_none && caller->auth; }

/* Rule lookups of one bundle: an alias resolves to the orchestration owner's rule of that name
 * ("<owner>/<alias>", the per-owner names of permit mode) before a plain alias. */
typedef struct lookup_ctx {
  xgr_rpcd *d;
  const char *owner;
} lookup_ctx;

static int rule_lookup(void *ctx, const char *key, char **bytes, size_t *len, xgr_error *err) {
  lookup_ctx *lc = ctx;
  xgr_rpcd *d = lc->d;
  xgr_store_doc doc = {0};
  int rc = XGR_ENOTFOUND;
  if (lc->owner && lc->owner[0] && !xgr_rpc_is_address(key)) {
    char scoped[256];
    snprintf(scoped, sizeof scoped, "%s/%s", lc->owner, key);
    rc = xgr_store_doc_get(d->st, XGR_REG_RULE, scoped, 0, &doc, err);
    if (rc && rc != XGR_ENOTFOUND) return rc;
  }
  if (rc) rc = xgr_store_doc_get(d->st, XGR_REG_RULE, key, 0, &doc, err);
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
  free(bn->owner);
  json_decref(bn->executors);
  free(bn);
}

/* A registry key "<0x + 40 hex>/<ostcId>": an XRC-729 contract on the chain. */
static bool chain_key(const char *key) {
  return strlen(key) > 43 && key[42] == '/' && xgr_xrc_is_address(key, 42);
}

/* The bundle of an XRC-729 registry on the chain: getOSTC and getRule through the chain cache
 * (no chain call once cached; the cache is refreshed from the contracts' logs). The exact bytes
 * are also registered in the store, so that recovery and the session views ("#<hash>") find them.
 * The pinned hash is compared by the caller (start.c) before anything else happens. */
static int chain_bundle(xgr_rpcd *d, const char *key, const xgr_bundle **out, const char *path, xgr_error *err) {
  char reg[43];
  memcpy(reg, key, 42);
  reg[42] = 0;
  xgr_chain_orch o;
  int rc = xgr_chain_load_orch(d->chain_cache, NULL, reg, key + 43, NULL, &o, err);
  if (rc) {
    char p[XGR_PATH_MAX];
    snprintf(p, sizeof p, "%s", path);
    snprintf(err->path, sizeof err->path, "%s", p);
    return rc;
  }
  if (!o.cached) {   /* first sight of this content: keep its exact bytes in the store's registries */
    const xgr_bundle *b = o.bundle;
    xgr_error e;
    for (size_t i = 0; i < b->nrules; i++) {
      xgr_store_doc rd = {0};
      /* the rule text as the chain returned it: the rule contract's getRule(), cached */
      char *bytes;
      size_t len;
      if (xgr_chain_rule_text(d->chain_cache, NULL, b->rule_keys[i], &bytes, &len, &e) == 0) {
        if (xgr_store_register(d->st, XGR_REG_RULE, b->rule_keys[i], reg, bytes, len, &rd, &e))
          xgr__rpcd_log(d, "level=warn msg=\"cannot register a chain rule in the store\" rule=%s error=\"%s\"",
                        b->rule_keys[i], e.message);
        xgr_store_doc_clear(&rd);
        free(bytes);
      }
    }
    char *ob;
    size_t ol;
    if (xgr_chain_ostc_text(d->chain_cache, NULL, reg, key + 43, &ob, &ol, &e) == 0) {
      xgr_store_doc od = {0};
      if (xgr_store_register(d->st, XGR_REG_ORCHESTRATION, key, reg, ob, ol, &od, &e))
        xgr__rpcd_log(d, "level=warn msg=\"cannot register a chain orchestration in the store\" key=%s error=\"%s\"", key,
                      e.message);
      xgr_store_doc_clear(&od);
      free(ob);
    }
  }
  *out = o.bundle;
  return 0;
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
  assert(!bn || bn->refs > 0);
  if (bn) bn->refs++;   /* none: a bundle of the chain cache, which keeps it as long as the service */
  pthread_mutex_unlock(&d->reg_mu);
}

void xgr__rpcd_bundle_put(xgr_rpcd *d, const xgr_bundle *b) {
  if (!b) return;
  pthread_mutex_lock(&d->reg_mu);
  xgr__bnode *bn = bnode_of_locked(d, b);
  assert(!bn || bn->refs > 0);   /* none: a bundle of the chain cache (not counted) */
  if (bn) {
    bn->refs--;
    bnode_release_locked(d, bn);
  }
  pthread_mutex_unlock(&d->reg_mu);
}

void xgr__rpcd_bundle_done(void *d, const xgr_bundle *b) { xgr__rpcd_bundle_put(d, b); }

/* Assemble (or take from the cache) the bundle of registry key `key` ("<reg>/<ostcId>", "<reg>"
 * or "#<hash>"). With a chain, "<XRC-729 address>/<ostcId>" comes from the chain. */
int xgr__rpcd_bundle(xgr_rpcd *d, const char *key, const xgr_bundle **out, const char *path, xgr_error *err) {
  return xgr__rpcd_bundle_ex(d, key, out, NULL, NULL, path, err);
}

int xgr__rpcd_bundle_ex(xgr_rpcd *d, const char *key, const xgr_bundle **out, const char **owner,
                        const json_t **executors, const char *path, xgr_error *err) {
  *out = NULL;
  if (d->chain_cache && chain_key(key)) {   /* owner and executors: checked on the chain (start.c) */
    if (owner) *owner = NULL;
    if (executors) *executors = NULL;
    return chain_bundle(d, key, out, path, err);
  }
  uint64_t gen = atomic_load(&d->rules_gen);
  pthread_mutex_lock(&d->reg_mu);
  for (xgr__regent *r = d->regs; r; r = r->next)
    if (r->gen == gen && !strcmp(r->key, key)) {
      r->bn->refs++;
      *out = r->bn->b;
      if (owner) *owner = r->bn->owner;
      if (executors) *executors = r->bn->executors;
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
  lookup_ctx lc = {d, doc.owner};
  rc = xgr_bundle_assemble(doc.content, doc.len, rule_lookup, &lc, &b, err);
  if (rc) {
    xgr_store_doc_clear(&doc);
    return rc;
  }
  xgr__regent *r = xgr__xcalloc(1, sizeof *r);
  xgr__bnode *bn = xgr__xcalloc(1, sizeof *bn);
  r->key = xgr__xstrdup(key);
  r->gen = gen;
  r->bn = bn;
  bn->b = b;
  bn->refs = 1;          /* the caller's */
  bn->cached = true;     /* r's */
  bn->owner = xgr__xstrdup(doc.owner ? doc.owner : "");
  json_t *dj = NULL;   /* exact: a document with integers beyond int64 keeps its executors */
  if (xgr_json_parse_exact(doc.content, doc.len, &dj, NULL)) dj = NULL;
  json_t *ex = json_object_get(dj, "executors");
  if (json_is_array(ex)) bn->executors = json_incref(ex);
  json_decref(dj);
  xgr_store_doc_clear(&doc);
  if (owner) *owner = bn->owner;
  if (executors) *executors = bn->executors;
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

/* The newest registration of (kind, key) into *prev (version 0 when there is none). In permit mode
 * a key registered by another owner is refused: the first writer owns it (issue 16). */
static int owned(xgr_rpcd *d, const xgr_rpc_caller *caller, xgr_registry_kind kind, const char *key, const char *who,
                 const char *path, xgr_store_doc *prev, xgr_error *err) {
  memset(prev, 0, sizeof *prev);
  int rc = xgr_store_doc_get(d->st, kind, key, 0, prev, err);
  if (rc == XGR_ENOTFOUND) {
    xgr_error_clear(err);
    memset(prev, 0, sizeof *prev);
    return 0;
  }
  if (rc) return xgr__rpc_code(rc, err);
  if (xgr__rpc_permits(caller) && prev->owner && prev->owner[0] && strcasecmp(prev->owner, who)) {
    int r = xgr__rpc_fail(err, XGR_RPC_NOT_PERMITTED, XGR_EPERM, path,
                          "\"%s\" is owned by %s; only its owner may register a new version (signer %s)", key,
                          prev->owner, who);
    xgr_store_doc_clear(prev);
    return r;
  }
  return 0;
}

/* "replaces": {version, hash} of the registration a new version replaced. */
static void replaced(json_t *r, const xgr_store_doc *prev, const xgr_store_doc *now) {
  if (prev->version && now->version > prev->version)
    json_object_set_new(r, "replaces", json_pack("{s:I, s:s}", "version", (json_int_t)prev->version, "hash", prev->hash));
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
  static const char *const keys[] = {"xrc729", "registry", "ostcId", "orchestration", "owner", "permit", NULL};
  const json_t *o;
  int rc = xgr__rpc_named(params, keys, &o, err);
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
  xgr_store_doc doc = {0}, doc2 = {0}, prev = {0}, prev2 = {0};
  if ((rc = owned(d, caller, XGR_REG_ORCHESTRATION, reg, who, rpath, &prev2, err)) ||
      (rc = owned(d, caller, XGR_REG_ORCHESTRATION, key, who, ostc_id ? "ostcId" : "orchestration.id", &prev, err))) {
    xgr_store_doc_clear(&prev2);
    xgr_orch_free(orch);
    free(bytes);
    return rc;
  }
  rc = xgr_store_register(d->st, XGR_REG_ORCHESTRATION, key, who, bytes, len, &doc, err);
  if (!rc) rc = xgr_store_register(d->st, XGR_REG_ORCHESTRATION, reg, who, bytes, len, &doc2, err);
  free(bytes);
  if (rc) {
    xgr_store_doc_clear(&prev);
    xgr_store_doc_clear(&prev2);
    xgr_orch_free(orch);
    return xgr__rpc_code(rc, err);
  }
  invalidate(d, key);
  invalidate(d, reg);
  json_t *r = doc_json(&doc);
  json_object_set_new(r, "registry", json_string(reg));
  json_object_set_new(r, "ostcId", json_string(id));
  json_object_set_new(r, "steps", json_integer((json_int_t)orch->nsteps));
  replaced(r, &prev, &doc);
  xgr_store_doc_clear(&prev);
  xgr_store_doc_clear(&prev2);
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
  static const char *const keys[] = {"xrc729", "registry", "ostcId", "version", NULL};
  const json_t *o;
  int rc = xgr__rpc_named(params, keys, &o, err);
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
  /* only keys a step's `rule` can name (docs/SEMANTICS.md, "Documents"): an address, or an alias
   * that is neither address-like nor a ${addr:...} form and has no white space */
  size_t vl = strlen(v);
  bool hex = vl > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X');
  for (size_t i = 2; hex && i < vl; i++) hex = isxdigit((unsigned char)v[i]) != 0;
  if (hex && vl != 42)
    return xgr__rpc_fail(err, XGR_RPC_INVALID_PARAMS, XGR_ESCHEMA, k,
                         "\"%.80s\" looks like an address but has %zu hex digits; expected 40 (no step could name it)",
                         v, vl - 2);
  if (!strncmp(v, "${", 2))
    return xgr__rpc_fail(err, XGR_RPC_INVALID_PARAMS, XGR_ESCHEMA, k,
                         "\"%.80s\" is a reference form; register the rule under ALIAS and name it ${addr:ALIAS} in steps", v);
  for (size_t i = 0; i < vl; i++)
    if (isspace((unsigned char)v[i]) || iscntrl((unsigned char)v[i]))
      return xgr__rpc_fail(err, XGR_RPC_INVALID_PARAMS, XGR_ESCHEMA, k,
                           "\"%.80s\" contains white space; no step's `rule` can name it", v);
  snprintf(key, n, "%s", v);
  if (xgr_rpc_is_address(key)) xgr__rpc_lower(key);
  return 0;
}

XGR__RPCD_METHOD(xgr__rpcd_m_put_rule) {
  xgr_rpcd *d = ctx;
  static const char *const keys[] = {"address", "key", "alias", "rule", "owner", "permit", NULL};
  const json_t *o;
  int rc = xgr__rpc_named(params, keys, &o, err);
  if (rc) return rc;
  char who[64] = "", key[200];
  const char *kpath;
  if ((rc = xgr_rpc_authorize(caller, o, XGR_RPC_ACT_REGISTER, NULL, who, sizeof who, err))) return rc;
  if ((rc = rule_key(o, key, 128, &kpath, err))) return rc;
  if (xgr__rpc_permits(caller) && !xgr_rpc_is_address(key)) {   /* rule names are per owner */
    char scoped[sizeof key];
    snprintf(scoped, sizeof scoped, "%.42s/%.127s", who, key);
    memcpy(key, scoped, sizeof key);
  }
  xgr_store_doc prev = {0};
  if ((rc = owned(d, caller, XGR_REG_RULE, key, who, kpath, &prev, err))) return rc;
  char *bytes;
  size_t len;
  if ((rc = doc_bytes(o, "rule", &bytes, &len, err))) {
    xgr_store_doc_clear(&prev);
    return rc;
  }
  if (len > 131072) {
    free(bytes);
    xgr_store_doc_clear(&prev);
    return xgr__rpc_fail(err, XGR_RPC_LIMITS_EXCEEDED, XGR_ELIMIT, "rule", "is %zu bytes; MaxXRC137Bytes is 131072",
                         len);
  }
  xgr_rule *rule = NULL;
  xgr_error e;
  if ((rc = xgr_rule_parse(bytes, len, &rule, &e))) {
    free(bytes);
    xgr_store_doc_clear(&prev);
    return prefixed(rc, err, "rule", &e);
  }
  xgr_rule_free(rule);
  xgr_store_doc doc = {0};
  rc = xgr_store_register(d->st, XGR_REG_RULE, key, who, bytes, len, &doc, err);
  free(bytes);
  if (rc) {
    xgr_store_doc_clear(&prev);
    return xgr__rpc_code(rc, err);
  }
  uint64_t gen = atomic_fetch_add(&d->rules_gen, 1) + 1;
  pthread_mutex_lock(&d->reg_mu);
  drop_locked(d, NULL, gen);   /* stale now: freed unless a call or a session holds them */
  pthread_mutex_unlock(&d->reg_mu);
  json_t *r = doc_json(&doc);
  json_object_set_new(r, "address", json_string(key));
  replaced(r, &prev, &doc);
  xgr_store_doc_clear(&prev);
  xgr__rpcd_log(d, "level=info msg=\"rule registered\" key=%s version=%u hash=%s", key, doc.version, doc.hash);
  xgr_store_doc_clear(&doc);
  *result = r;
  return 0;
}

XGR__RPCD_METHOD(xgr__rpcd_m_get_rule) {
  xgr_rpcd *d = ctx;
  static const char *const keys[] = {"address", "key", "alias", "owner", "version", NULL};
  const json_t *o;
  int rc = xgr__rpc_named(params, keys, &o, err);
  if (rc) return rc;
  char key[200];
  const char *kpath, *owner = NULL;
  if ((rc = rule_key(o, key, 128, &kpath, err)) || (rc = xgr__rpc_opt_str(o, "owner", &owner, err))) return rc;
  if (owner && !xgr_rpc_is_address(key)) {   /* an owner's rule name (permit mode registers them so) */
    if (!xgr_rpc_is_address(owner))
      return xgr__rpc_fail(err, XGR_RPC_INVALID_PARAMS, XGR_ESCHEMA, "owner", "is \"%.60s\"; expected an address", owner);
    char lo[43], scoped[sizeof key];
    snprintf(lo, sizeof lo, "%s", owner);
    xgr__rpc_lower(lo);
    snprintf(scoped, sizeof scoped, "%.42s/%.127s", lo, key);
    memcpy(key, scoped, sizeof key);
  }
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
    free(b->owner);
    json_decref(b->executors);
    free(b);
  }
  d->regs = NULL;
  d->bundles = NULL;
}
