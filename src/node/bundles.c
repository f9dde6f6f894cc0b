/* bundles.c — the node's cache of assembled bundles, and the namespaces and pins they are made
 * from (xgr/node.h, "bundles"; docs/SEMANTICS.md, "Names and pins").
 *
 * A session runs a bundle assembled from its orchestration's exact bytes and rule documents
 * (xgr_bundle_assemble). Every registered document belongs to its writer's namespace: it is stored
 * under "<namespace>:<key>" ("<key>" alone in the empty namespace), so a name resolves only among
 * one writer's documents — an orchestration's rule references (addresses and aliases) in the
 * orchestration's own namespace, never another's. Assembling from the current rules also gives the
 * bundle's manifest, {"orchestration":"0x<hash>","rules":{"<key>":"0x<hash>",...}} (keys sorted,
 * compact), whose keccak-256 is the bundle hash; a session pins it at start (the manifest is
 * registered as a document "#<bundle hash>" before the session's row names it), and recovery,
 * hibernation and the session views reassemble a pinned session from the exact bytes its manifest
 * names ("@<bundle hash>"), never from the rules current then.
 *
 * Bundles are cached per key ("<ns>:<registry>[/<ostcId>]", "#<orchestration hash>" for sessions
 * started before pins, "@<bundle hash>") and rules generation (pinned ones whatever the generation;
 * at most XGR__NODE_MAX_CACHED entries) and freed when no cache entry points at them and no caller
 * or running session holds them (xgr_node_bundle_put), so memory stays bounded however often rules
 * are replaced. With a chain, an XRC-729 registry's orchestrations and rules come from the chain
 * cache (the contract address is their namespace) and are also registered in the store, so
 * recovery and the session views find their exact bytes.
 */
#include <assert.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "node/node_impl.h"
#include "util/alloc.h"
#include "xgr/json.h"
#include "xgr/keccak.h"
#include "xgr/xrc_types.h"

/* ---- namespaces --------------------------------------------------------------------------------- */

size_t xgr_node_ns_key(char *out, size_t n, const char *ns, const char *key) {
  assert(out && n && key);
  int w = ns && ns[0] ? snprintf(out, n, "%s:%s", ns, key) : snprintf(out, n, "%s", key);
  return w < 0 ? 0 : (size_t)w;
}

int xgr_node_doc_in(xgr_node *n, xgr_registry_kind kind, const char *ns, bool shared, const char *key,
                    uint32_t version, xgr_store_doc *out, xgr_error *err) {
  assert(n && key && out);
  char k[XGR_NODE_KEY_MAX];
  memset(out, 0, sizeof *out);
  int rc = XGR_ENOTFOUND;
  if (ns && ns[0]) {
    xgr_node_ns_key(k, sizeof k, ns, key);
    rc = xgr_store_doc_get(n->st, kind, k, version, out, err);
    if (rc != XGR_ENOTFOUND || !shared) return rc;
    xgr_error_clear(err);
    memset(out, 0, sizeof *out);
  }
  return xgr_store_doc_get(n->st, kind, key, version, out, err);
}

/* ---- bundles ---------------------------------------------------------------------------------- */

/* Rule lookups of one bundle: from the current rules of the orchestration's namespace (recording
 * the hash of each in `seen`), or, pinned, the exact bytes whose hash the manifest names. */
typedef struct lookup_ctx {
  xgr_node *d;
  const char *ns;              /* the orchestration's namespace ("": the empty one) */
  const json_t *pins;          /* pinned: the manifest's "rules" (borrowed); NULL: current rules */
  json_t *seen;                /* current: {"<key>": "0x<hash>"} of what was resolved (the caller's) */
} lookup_ctx;

static int rule_lookup(void *ctx, const char *key, char **bytes, size_t *len, xgr_error *err) {
  lookup_ctx *lc = ctx;
  xgr_store_doc doc = {0};
  int rc;
  if (lc->pins) {
    const char *h = json_string_value(json_object_get(lc->pins, key));
    if (!h) return xgr_error_set(err, XGR_ENOTFOUND, NULL, "the bundle's manifest pins no rule \"%s\"", key);
    rc = xgr_store_doc_by_hash(lc->d->st, XGR_REG_RULE, h, &doc, err);
  } else {
    char k[XGR_NODE_KEY_MAX];
    xgr_node_ns_key(k, sizeof k, lc->ns, key);
    rc = xgr_store_doc_get(lc->d->st, XGR_REG_RULE, k, 0, &doc, err);
    if (!rc) json_object_set_new(lc->seen, key, json_string(doc.hash));
  }
  if (rc) return rc;
  *bytes = doc.content;
  *len = doc.len;
  doc.content = NULL;
  xgr_store_doc_clear(&doc);
  return 0;
}

/* The manifest text of an orchestration hash and its rules' hashes (owned: free), and its hash. */
static char *manifest_of(const char *orch_hash, json_t *rules, char hash[67]) {
  json_t *m = json_pack("{s:s, s:O}", "orchestration", orch_hash, "rules", rules);
  char *text = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(m);
  if (!text) abort();
  xgr_keccak256_hex(text, strlen(text), hash);
  return text;
}

/* Register manifest (the bundle's, hashing to hash) as document "#<hash>" of namespace ns, once per
 * node and manifest (a small ring remembers the latest ones): durable before it returns. */
static int pin_store(xgr_node *d, const char *ns, const char *hash, const char *manifest, xgr_error *err) {
  pthread_mutex_lock(&d->reg_mu);
  bool have = false;
  for (size_t i = 0; i < XGR__NODE_PINS_KEPT && !have; i++) have = !strcmp(d->pins_stored[i], hash);
  pthread_mutex_unlock(&d->reg_mu);
  if (have) return 0;
  char id[70];
  snprintf(id, sizeof id, "#%s", hash);
  xgr_store_doc doc = {0};
  int rc = xgr_store_register(d->st, XGR_REG_ORCHESTRATION, id, ns ? ns : "", manifest, strlen(manifest), &doc, err);
  xgr_store_doc_clear(&doc);
  if (rc) return rc;
  pthread_mutex_lock(&d->reg_mu);
  snprintf(d->pins_stored[d->pins_next++ % XGR__NODE_PINS_KEPT], 67, "%s", hash);
  pthread_mutex_unlock(&d->reg_mu);
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
  free(bn->manifest);
  json_decref(bn->executors);
  free(bn);
}

/* A registry key "<0x + 40 hex>/<ostcId>": an XRC-729 contract on the chain. */
static bool chain_key(const char *key) {
  return strlen(key) > 43 && key[42] == '/' && xgr_xrc_is_address(key, 42);
}

/* level=warn msg=<msg> <key>=<value> error="<error>": a document from the chain the store refused. */
static void log_register_failed(const xgr_node *d, const char *msg, const char *key, const char *value,
                                const char *error) {
  xgr_logfmt l;
  xgr_node_log_begin(d, &l, "warn", msg);
  xgr_logfmt_str(&l, key, value);
  xgr_logfmt_quoted(&l, "error", error);
  xgr_node_log_end(d, &l);
}

/* The bundle of an XRC-729 registry on the chain: getOSTC and getRule through the chain cache
 * (no chain call once cached; the cache is refreshed from the contracts' logs). The exact bytes
 * are also registered in the store, in the contract's namespace, so that recovery and the session
 * views find them; with meta, the manifest of the rules it resolved is made durable too. The pinned
 * orchestration hash is compared by the caller (start.c) before anything else happens. */
static int chain_bundle(xgr_node *d, const char *key, const xgr_bundle **out, xgr_node_bundle_meta *meta,
                        const char *path, xgr_error *err) {
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
  const xgr_bundle *b = o.bundle;
  json_t *rules = meta ? json_object() : NULL;
  if (!o.cached || meta) {   /* first sight of this content: keep its exact bytes in the store's registries */
    xgr_error e;
    char k[XGR_NODE_KEY_MAX];
    for (size_t i = 0; i < b->nrules; i++) {
      /* the rule text as the chain returned it: the rule contract's getRule(), cached */
      char *bytes;
      size_t len;
      if (xgr_chain_rule_text(d->chain_cache, NULL, b->rule_keys[i], &bytes, &len, &e) == 0) {
        if (rules) {
          char h[67];
          xgr_keccak256_hex(bytes, len, h);
          json_object_set_new(rules, b->rule_keys[i], json_string(h));
        }
        if (!o.cached) {
          xgr_store_doc rd = {0};
          xgr_node_ns_key(k, sizeof k, reg, b->rule_keys[i]);
          if (xgr_store_register(d->st, XGR_REG_RULE, k, reg, bytes, len, &rd, &e))
            log_register_failed(d, "cannot register a chain rule in the store", "rule", b->rule_keys[i], e.message);
          xgr_store_doc_clear(&rd);
        }
        free(bytes);
      }
    }
    char *ob;
    size_t ol;
    if (!o.cached && xgr_chain_ostc_text(d->chain_cache, NULL, reg, key + 43, &ob, &ol, &e) == 0) {
      xgr_store_doc od = {0};
      xgr_node_ns_key(k, sizeof k, reg, key);
      if (xgr_store_register(d->st, XGR_REG_ORCHESTRATION, k, reg, ob, ol, &od, &e))
        log_register_failed(d, "cannot register a chain orchestration in the store", "key", key, e.message);
      xgr_store_doc_clear(&od);
      free(ob);
    }
  }
  if (meta) {
    meta->owner = NULL;   /* owner and executors: checked on the chain (start.c) */
    meta->executors = NULL;
    char *m = manifest_of(b->orch->hash, rules, meta->bundle_hash);
    json_decref(rules);
    rc = pin_store(d, reg, meta->bundle_hash, m, err);
    free(m);
    if (rc) return rc;
  }
  *out = b;
  return 0;
}

static void regent_free_locked(xgr_node *d, xgr__regent *r) {
  r->bn->cached = false;
  bnode_release_locked(d, r->bn);
  free(r->key);
  free(r);
}

/* Whether cache entry r is current in rules generation gen: a pinned bundle ("@<hash>") is made of
 * exact bytes and stays current whatever rules change. */
static bool current(const xgr__regent *r, uint64_t gen) { return r->gen == gen || r->key[0] == '@'; }

/* Drop the cache entry of key, if any, and every entry of an older rules generation (reg_mu held). */
static void drop_locked(xgr_node *d, const char *key, uint64_t gen) {
  for (xgr__regent **pp = &d->regs; *pp;) {
    xgr__regent *r = *pp;
    if ((key && !strcmp(r->key, key)) || !current(r, gen)) {
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

int xgr_node_bundle(xgr_node *d, const char *key, const xgr_bundle **out, const char *path, xgr_error *err) {
  return xgr_node_bundle_ex(d, key, false, out, NULL, path, err);
}

/* The orchestration document and lookups of cache key `key` (see xgr_node_bundle_ex): *ns points
 * into key or doc; *pins (owned) is the manifest of a pinned key. */
static int orch_of(xgr_node *d, const char *key, xgr_store_doc *doc, char *ns, size_t nsn, json_t **pins,
                   char **manifest, xgr_error *err) {
  *pins = NULL;
  *manifest = NULL;
  if (key[0] == '#') {   /* a session from before pins: its orchestration, the rules current in its namespace */
    int rc = xgr_store_doc_by_hash(d->st, XGR_REG_ORCHESTRATION, key + 1, doc, err);
    if (!rc) snprintf(ns, nsn, "%s", doc->owner ? doc->owner : "");
    return rc;
  }
  if (key[0] == '@') {   /* pinned: the manifest, then the orchestration of its hash */
    xgr_store_doc m = {0};
    int rc = xgr_store_doc_by_hash(d->st, XGR_REG_ORCHESTRATION, key + 1, &m, err);
    if (rc) return rc;
    json_t *mj = json_loadb(m.content, m.len, 0, NULL);
    const char *oh = json_string_value(json_object_get(mj, "orchestration"));
    json_t *rules = json_object_get(mj, "rules");
    if (!oh || !json_is_object(rules)) {
      json_decref(mj);
      xgr_store_doc_clear(&m);
      return xgr_error_set(err, XGR_ESTATE, NULL, "document %s is not a bundle manifest", key + 1);
    }
    rc = xgr_store_doc_by_hash(d->st, XGR_REG_ORCHESTRATION, oh, doc, err);
    snprintf(ns, nsn, "%s", m.owner ? m.owner : "");
    if (!rc) {
      *pins = json_incref(rules);
      *manifest = m.content;
      m.content = NULL;
    }
    json_decref(mj);
    xgr_store_doc_clear(&m);
    return rc;
  }
  const char *colon = strchr(key, ':');   /* "<ns>:<key>"; none: the empty namespace */
  if (colon && colon - key == 42 && xgr_xrc_is_address(key, 42)) snprintf(ns, nsn, "%.42s", key);
  else ns[0] = 0;
  return xgr_store_doc_get(d->st, XGR_REG_ORCHESTRATION, key, 0, doc, err);
}

int xgr_node_bundle_ex(xgr_node *d, const char *key, bool pin, const xgr_bundle **out, xgr_node_bundle_meta *meta,
                       const char *path, xgr_error *err) {
  *out = NULL;
  xgr__bnode *bn = NULL;
  uint64_t gen = atomic_load(&d->rules_gen);
  pthread_mutex_lock(&d->reg_mu);
  for (xgr__regent *r = d->regs; r; r = r->next)
    if (current(r, gen) && !strcmp(r->key, key)) {
      bn = r->bn;
      bn->refs++;
      break;
    }
  pthread_mutex_unlock(&d->reg_mu);
  if (!bn) {
    xgr_store_doc doc = {0};
    char ns[64];
    json_t *pins = NULL;
    char *manifest = NULL;
    int rc = orch_of(d, key, &doc, ns, sizeof ns, &pins, &manifest, err);
    if (rc) {
      if (rc == XGR_ENOTFOUND)
        xgr_error_set(err, rc, path, "no orchestration is registered under \"%s\"%s", key[0] == '#' || key[0] == '@' ? key + 1 : key,
                      key[0] == '#' || key[0] == '@' ? "" : " (register it with xgr.putOrchestration)");
      return rc;
    }
    xgr_bundle *b = NULL;
    lookup_ctx lc = {d, ns, pins, pins ? NULL : json_object()};
    rc = xgr_bundle_assemble(doc.content, doc.len, rule_lookup, &lc, &b, err);
    json_decref(pins);
    if (rc) {
      json_decref(lc.seen);
      free(manifest);
      xgr_store_doc_clear(&doc);
      return rc;
    }
    xgr__regent *r = xgr__xcalloc(1, sizeof *r);
    bn = xgr__xcalloc(1, sizeof *bn);
    r->key = xgr__xstrdup(key);
    r->gen = gen;
    r->bn = bn;
    bn->b = b;
    bn->refs = 1;          /* the caller's */
    bn->cached = true;     /* r's */
    bn->owner = xgr__xstrdup(ns);
    if (manifest) {
      bn->manifest = manifest;
      snprintf(bn->bundle_hash, sizeof bn->bundle_hash, "%s", key + 1);
    } else {
      bn->manifest = manifest_of(b->orch->hash, lc.seen, bn->bundle_hash);
    }
    json_decref(lc.seen);
    json_t *dj = NULL;   /* exact: a document with integers beyond int64 keeps its executors */
    if (xgr_json_parse_exact(doc.content, doc.len, &dj, NULL)) dj = NULL;
    json_t *ex = json_object_get(dj, "executors");
    if (json_is_array(ex)) bn->executors = json_incref(ex);
    json_decref(dj);
    xgr_store_doc_clear(&doc);
    pthread_mutex_lock(&d->reg_mu);
    bn->next = d->bundles;
    d->bundles = bn;
    /* replace an older entry of the same key; forget stale generations */
    drop_locked(d, key, atomic_load(&d->rules_gen));
    if (current(r, atomic_load(&d->rules_gen))) {
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
  }
  if (pin && key[0] != '@') {
    int rc = pin_store(d, bn->owner, bn->bundle_hash, bn->manifest, err);
    if (rc) {
      xgr_node_bundle_put(d, bn->b);
      return rc;
    }
  }
  if (meta) {
    meta->owner = bn->owner;
    meta->executors = bn->executors;
    snprintf(meta->bundle_hash, sizeof meta->bundle_hash, "%s", bn->bundle_hash);
  }
  *out = bn->b;
  return 0;
}

int xgr_node_bundle_in(xgr_node *d, const char *ns, bool shared, const char *reg_key, bool pin, const xgr_bundle **out,
                       xgr_node_bundle_meta *meta, const char *path, xgr_error *err) {
  *out = NULL;
  if (d->chain_cache && chain_key(reg_key)) {   /* the contract's namespace, on the chain */
    xgr_node_bundle_meta m;
    return chain_bundle(d, reg_key, out, meta ? meta : pin ? &m : NULL, path, err);
  }
  char k[XGR_NODE_KEY_MAX];
  int rc = XGR_ENOTFOUND;
  if (ns && ns[0]) {
    xgr_node_ns_key(k, sizeof k, ns, reg_key);
    rc = xgr_node_bundle_ex(d, k, pin, out, meta, path, err);
    if (rc != XGR_ENOTFOUND || !shared) {
      if (rc == XGR_ENOTFOUND)
        xgr_error_set(err, rc, path, "no orchestration is registered under \"%s\" in the namespace of %s "
                      "(register it with xgr.putOrchestration, or name its owner in registryOwner)", reg_key, ns);
      return rc;
    }
  }
  rc = xgr_node_bundle_ex(d, reg_key, pin, out, meta, path, err);
  if (rc == XGR_ENOTFOUND && ns && ns[0])
    xgr_error_set(err, rc, path, "no orchestration is registered under \"%s\" in the namespace of %s nor in the "
                  "shared one (register it with xgr.putOrchestration, or name its owner in registryOwner)", reg_key, ns);
  return rc;
}

int xgr_node_session_bundle(xgr_node *d, const xgr_store_session *s, const xgr_bundle **out, xgr_error *err) {
  char k[80];
  bool pinned = s->bundle_hash && s->bundle_hash[0];
  snprintf(k, sizeof k, "%c%s", pinned ? '@' : '#', pinned ? s->bundle_hash : s->ostc_hash ? s->ostc_hash : "");
  return xgr_node_bundle_ex(d, k, false, out, NULL, pinned ? "bundleHash" : "ostcHash", err);
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
    free(b->manifest);
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
