/* bundles.c — the node's cache of assembled bundles (xgr/node.h, "bundles").
 *
 * A session runs a bundle assembled from its orchestration's exact bytes and the registered rules
 * (xgr_bundle_assemble). Bundles are cached per registry key ("<registry>/<ostcId>", "<registry>"
 * or "#<hash>") and rules generation (at most XGR__NODE_MAX_CACHED entries) and freed when no cache
 * entry points at them and no caller or running session holds them (xgr_node_bundle_put), so
 * memory stays bounded however often rules are replaced. An alias of a rule resolves to the
 * orchestration owner's rule of that name before a plain alias. With a chain, an XRC-729
 * registry's orchestrations and rules come from the chain cache and are also registered in the
 * store, so recovery and the session views find their exact bytes.
 */
#include <assert.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "node/node_impl.h"
#include "util/alloc.h"
#include "xgr/xrc_types.h"

/* ---- bundles ---------------------------------------------------------------------------------- */

/* Rule lookups of one bundle: an alias resolves to the orchestration owner's rule of that name
 * ("<owner>/<alias>", the per-owner names of permit mode) before a plain alias. */
typedef struct lookup_ctx {
  xgr_node *d;
  const char *owner;
} lookup_ctx;

static int rule_lookup(void *ctx, const char *key, char **bytes, size_t *len, xgr_error *err) {
  lookup_ctx *lc = ctx;
  xgr_node *d = lc->d;
  xgr_store_doc doc = {0};
  int rc = XGR_ENOTFOUND;
  if (lc->owner && lc->owner[0] && !(strlen(key) == 42 && xgr_xrc_is_address(key, 42))) {
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
static void bnode_release_locked(xgr_node *d, xgr__bnode *bn) {
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
/* level=warn msg=<msg> <key>=<value> error="<error>": a document from the chain the store refused. */
static void log_register_failed(const xgr_node *d, const char *msg, const char *key, const char *value,
                                const char *error) {
  xgr_logfmt l;
  xgr_node_log_begin(d, &l, "warn", msg);
  xgr_logfmt_str(&l, key, value);
  xgr_logfmt_quoted(&l, "error", error);
  xgr_node_log_end(d, &l);
}

static int chain_bundle(xgr_node *d, const char *key, const xgr_bundle **out, const char *path, xgr_error *err) {
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
          log_register_failed(d, "cannot register a chain rule in the store", "rule", b->rule_keys[i], e.message);
        xgr_store_doc_clear(&rd);
        free(bytes);
      }
    }
    char *ob;
    size_t ol;
    if (xgr_chain_ostc_text(d->chain_cache, NULL, reg, key + 43, &ob, &ol, &e) == 0) {
      xgr_store_doc od = {0};
      if (xgr_store_register(d->st, XGR_REG_ORCHESTRATION, key, reg, ob, ol, &od, &e))
        log_register_failed(d, "cannot register a chain orchestration in the store", "key", key, e.message);
      xgr_store_doc_clear(&od);
      free(ob);
    }
  }
  *out = o.bundle;
  return 0;
}

static void regent_free_locked(xgr_node *d, xgr__regent *r) {
  r->bn->cached = false;
  bnode_release_locked(d, r->bn);
  free(r->key);
  free(r);
}

/* Drop the cache entry of key, if any, and every entry of an older rules generation (reg_mu held). */
static void drop_locked(xgr_node *d, const char *key, uint64_t gen) {
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

static xgr__bnode *bnode_of_locked(xgr_node *d, const xgr_bundle *b) {
  for (xgr__bnode *bn = d->bundles; bn; bn = bn->next)
    if (bn->b == b) return bn;
  return NULL;
}

void xgr_node_bundle_hold(xgr_node *d, const xgr_bundle *b) {
  pthread_mutex_lock(&d->reg_mu);
  xgr__bnode *bn = bnode_of_locked(d, b);
  assert(!bn || bn->refs > 0);
  if (bn) bn->refs++;   /* none: a bundle of the chain cache, which keeps it as long as the service */
  pthread_mutex_unlock(&d->reg_mu);
}

void xgr_node_bundle_put(xgr_node *d, const xgr_bundle *b) {
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

void xgr__node_bundle_done(void *d, const xgr_bundle *b) { xgr_node_bundle_put(d, b); }

/* Assemble (or take from the cache) the bundle of registry key `key` ("<reg>/<ostcId>", "<reg>"
 * or "#<hash>"). With a chain, "<XRC-729 address>/<ostcId>" comes from the chain. */
int xgr_node_bundle(xgr_node *d, const char *key, const xgr_bundle **out, const char *path, xgr_error *err) {
  return xgr_node_bundle_ex(d, key, out, NULL, NULL, path, err);
}

int xgr_node_bundle_ex(xgr_node *d, const char *key, const xgr_bundle **out, const char **owner,
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
      if (++n > XGR__NODE_MAX_CACHED) {
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

void xgr_node_bundle_forget(xgr_node *d, const char *key) {
  pthread_mutex_lock(&d->reg_mu);
  drop_locked(d, key, atomic_load(&d->rules_gen));
  pthread_mutex_unlock(&d->reg_mu);
}

void xgr__node_bundles_free(xgr_node *d) {
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

uint64_t xgr_node_rules_changed(xgr_node *d) {
  uint64_t gen = atomic_fetch_add(&d->rules_gen, 1) + 1;
  pthread_mutex_lock(&d->reg_mu);
  drop_locked(d, NULL, gen);   /* stale now: freed unless a call or a session holds them */
  pthread_mutex_unlock(&d->reg_mu);
  return gen;
}
