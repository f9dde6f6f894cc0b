/* registry.c — the registries of orchestrations and rules (xgr.putOrchestration,
 * getOrchestration, putRule, getRule); the bundles they make are the node's (src/node/bundles.c).
 *
 * Orchestrations are registered under "<registry>/<ostcId>" and, as the registry's current
 * orchestration, under "<registry>" (registry = the XRC-729 address given as `xrc729`, `registry`
 * or `orchestration`, lowercased; "local" when none). Their exact bytes are what is hashed. Rules
 * are registered under their address (lowercased) or alias. Every key is the writer's: the node
 * stores it in the namespace of the signer (without permits: `from`/`owner`, else the empty
 * namespace), and reads resolve in the namespace `owner` names, else the caller's (`from`), then
 * the empty one (docs/SEMANTICS.md, "Names and pins"). A change tells the node, whose cache of
 * assembled bundles forgets what it made of the old documents.
 */
#include <assert.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rpc/rpc_impl.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "xgr/xrc_types.h"

/* ---- bundles ---------------------------------------------------------------------------------- */

bool xgr__rpc_permits(const xgr_rpc_caller *caller) { return caller && !caller->auth_none && caller->auth; }

/* ---- registries --------------------------------------------------------------------------------- */

/* The exact bytes of a document parameter: a string as given, an object as jansson's compact
 * serialization in key order. *bytes is owned by the caller (free). */
static int doc_bytes(const json_t *o, const char *key, char **bytes, size_t *len, xgr_error *err) {
  const json_t *v = json_object_get(o, key);
  if (!v || json_is_null(v))
    return xgr__rpc_fail(err, XGR_ESCHEMA, key,
                         "missing; expected the document as an object or its JSON text");
  if (json_is_string(v)) {
    *len = json_string_length(v);
    *bytes = xgr__xmalloc(*len + 1);
    memcpy(*bytes, json_string_value(v), *len + 1);
    return 0;
  }
  if (!json_is_object(v))
    return xgr__rpc_fail(err, XGR_ESCHEMA, key,
                         "is not an object; expected the document as an object or its JSON text");
  *bytes = xgr_json_dumps_compact(v);   /* numbers beyond int64 as numbers */
  if (!*bytes) abort();
  *len = strlen(*bytes);
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
  int c = e->code ? e->code : rc;
  return xgr_rpc_code_for(c) == XGR_RPC_INTERNAL_ERROR && c != XGR_ENOMEM ? XGR_ESCHEMA : c;
}

static json_t *doc_json(const xgr_store_doc *doc) {
  return json_pack("{s:s, s:I, s:s, s:I}", "hash", doc->hash, "version", (json_int_t)doc->version, "owner",
                   doc->owner ? doc->owner : "", "registeredAt", (json_int_t)doc->registered_at);
}

/* The namespace a read resolves in: params.owner (an address; then that one only), else the caller
 * (`from`, or a permit's signer as claimed) when it is an address, then the empty namespace (*shared
 * true). ns gets "" when none is named. */
static int read_ns(const xgr_rpc_caller *caller, const json_t *o, char ns[43], bool *shared, xgr_error *err) {
  bool has;
  int rc = xgr__rpc_opt_address(o, "owner", ns, &has, err);
  if (rc) return rc;
  *shared = !has;
  if (!has) {
    const char *c = xgr_rpc_claimed(caller, o);
    if (c && xgr_rpc_is_address(c)) {
      xgr__str_copy(ns, 43, c);
      xgr__rpc_lower(ns);
    }
  }
  return 0;
}

/* "bundleHash": the hash of the bundle registry key `key` of namespace ns makes with the rules current
 * now (what a session started now pins), or null when it does not assemble (a rule is missing). */
static json_t *bundle_hash_json(xgr_rpcd *d, const char *ns, const char *key) {
  const xgr_bundle *b = NULL;
  xgr_node_bundle_meta meta;
  xgr_error e;
  char k[XGR_NODE_KEY_MAX];
  xgr_node_ns_key(k, sizeof k, ns, key);   /* the store's document (with a chain too) */
  if (xgr_node_bundle_ex(d->n, k, false, &b, &meta, "registry", &e)) return json_null();
  xgr_node_bundle_put(d->n, b);
  return json_string(meta.bundle_hash);
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
  xgr_rpc_log_subject(caller, xgr_rpc_actor(caller, who), NULL, 0);
  if ((rc = xgr__rpc_registry(o, NULL, false, reg, sizeof reg, &rpath, err)) ||
      (rc = xgr__rpc_ostc_id(o, &ostc_id, err)))
    return rc;
  char *bytes;
  size_t len;
  if ((rc = doc_bytes(o, "orchestration", &bytes, &len, err))) return rc;
  if (len > XGR_MAX_OSTC_BYTES) {
    free(bytes);
    return xgr__rpc_fail(err, XGR_ELIMIT, "orchestration", "is %zu bytes; MaxOSTCBytes is %d",
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
  xgr_node_register_req rr = {.kind = XGR_REG_ORCHESTRATION, .key = key, .current = reg, .id = id, .who = who,
                              .owner_only = xgr__rpc_permits(caller), .key_path = ostc_id ? "ostcId" : "orchestration.id",
                              .current_path = rpath, .bytes = bytes, .len = len};
  xgr_store_doc doc, prev;
  rc = xgr_node_register(d->n, &rr, &doc, &prev, err);
  free(bytes);
  if (!rc) {
    json_t *r = doc_json(&doc);
    json_object_set_new(r, "registry", json_string(reg));
    json_object_set_new(r, "ostcId", json_string(id));
    json_object_set_new(r, "steps", json_integer((json_int_t)orch->nsteps));
    json_object_set_new(r, "bundleHash", bundle_hash_json(d, who, key));
    replaced(r, &prev, &doc);
    *result = r;
  }
  xgr_node_doc_clear(&prev);
  xgr_node_doc_clear(&doc);
  xgr_orch_free(orch);
  return rc;
}

XGR__RPCD_METHOD(xgr__rpcd_m_get_orch) {
  xgr_rpcd *d = ctx;
  static const char *const keys[] = {"xrc729", "registry", "ostcId", "version", "owner", NULL};
  const json_t *o;
  int rc = xgr__rpc_named(params, keys, &o, err);
  if (rc) return rc;
  char reg[XGR__RPC_MAX_REGISTRY + 1], key[XGR__RPC_KEY_SIZE], ns[43];
  const char *rpath, *ostc_id = NULL;
  bool shared;
  if ((rc = xgr__rpc_registry(o, NULL, false, reg, sizeof reg, &rpath, err)) ||
      (rc = xgr__rpc_ostc_id(o, &ostc_id, err)) || (rc = read_ns(caller, o, ns, &shared, err)))
    return rc;
  if (shared && ostc_id && xgr_node_has_chain(d->n) && xgr_rpc_is_address(reg)) {   /* the contract's namespace */
    xgr__str_copy(ns, sizeof ns, reg);
    shared = false;
  }
  uint32_t version;
  if ((rc = xgr__rpc_version(o, &version, err))) return rc;
  xgr__rpc_registry_key(key, reg, ostc_id);
  xgr_store_doc doc = {0};
  if ((rc = xgr_node_doc_in(d->n, XGR_REG_ORCHESTRATION, ns, shared, key, version, &doc, err))) {
    if (rc == XGR_ENOTFOUND)
      xgr_error_set(err, rc, ostc_id ? "ostcId" : rpath, "no orchestration \"%s\"%s in the namespace of %s%s", key,
                    version ? " in that version" : "", ns[0] ? ns : "nobody (the empty namespace)",
                    shared && ns[0] ? " nor in the empty one" : "");
    return xgr__rpc_code(rc, err);
  }
  json_t *r = doc_json(&doc);
  json_object_set_new(r, "registry", json_string(reg));
  json_object_set_new(r, "bundleHash", version ? json_null() : bundle_hash_json(d, doc.owner, key));
  json_t *oj = NULL;
  if (xgr_json_parse_exact(doc.content, doc.len, &oj, NULL)) oj = NULL;
  const char *doc_id = json_string_value(json_object_get(oj, "id"));
  json_object_set_new(r, "ostcId", json_string(ostc_id ? ostc_id : doc_id ? doc_id : ""));
  json_object_set_new(r, "orchestration", oj ? oj : json_null());
  json_object_set_new(r, "content", json_stringn(doc.content, doc.len));
  xgr_node_doc_clear(&doc);
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
  if ((rc = xgr__rpc_check_name(v, n - 1, "/#:", k, "a rule address (0x + 40 hex) or an alias without '/', '#' or ':'",
                                err)))
    return rc;
  /* only keys a step's `rule` can name (docs/SEMANTICS.md, "Documents"): an address, or an alias
   * that is neither address-like nor a ${addr:...} form and has no white space */
  size_t vl = strlen(v);
  bool hex = vl > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X');
  for (size_t i = 2; hex && i < vl; i++) hex = isxdigit((unsigned char)v[i]) != 0;
  if (hex && vl != 42)
    return xgr__rpc_fail(err, XGR_ESCHEMA, k,
                         "\"%.80s\" looks like an address but has %zu hex digits; expected 40 (no step could name it)",
                         v, vl - 2);
  if (!strncmp(v, "${", 2))
    return xgr__rpc_fail(err, XGR_ESCHEMA, k,
                         "\"%.80s\" is a reference form; register the rule under ALIAS and name it ${addr:ALIAS} in steps", v);
  for (size_t i = 0; i < vl; i++)
    if (isspace((unsigned char)v[i]) || iscntrl((unsigned char)v[i]))
      return xgr__rpc_fail(err, XGR_ESCHEMA, k,
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
  xgr_rpc_log_subject(caller, xgr_rpc_actor(caller, who), NULL, 0);
  if ((rc = rule_key(o, key, 128, &kpath, err))) return rc;
  xgr_node_register_req rr = {.kind = XGR_REG_RULE, .key = key, .who = who, .owner_only = xgr__rpc_permits(caller),
                              .key_path = kpath};
  if ((rc = xgr_node_register_allowed(d->n, &rr, err))) return rc;   /* a non-owner is refused first */
  char *bytes;
  size_t len;
  if ((rc = doc_bytes(o, "rule", &bytes, &len, err))) return rc;
  if (len > 131072) {
    free(bytes);
    return xgr__rpc_fail(err, XGR_ELIMIT, "rule", "is %zu bytes; MaxXRC137Bytes is 131072",
                         len);
  }
  xgr_rule *rule = NULL;
  xgr_error e;
  if ((rc = xgr_rule_parse(bytes, len, &rule, &e))) {
    free(bytes);
    return prefixed(rc, err, "rule", &e);
  }
  xgr_rule_free(rule);
  rr.bytes = bytes;
  rr.len = len;
  xgr_store_doc doc, prev;
  rc = xgr_node_register(d->n, &rr, &doc, &prev, err);
  free(bytes);
  if (!rc) {
    json_t *r = doc_json(&doc);
    json_object_set_new(r, "address", json_string(key));
    replaced(r, &prev, &doc);
    *result = r;
  }
  xgr_node_doc_clear(&prev);
  xgr_node_doc_clear(&doc);
  return rc;
}

XGR__RPCD_METHOD(xgr__rpcd_m_get_rule) {
  xgr_rpcd *d = ctx;
  static const char *const keys[] = {"address", "key", "alias", "owner", "version", NULL};
  const json_t *o;
  int rc = xgr__rpc_named(params, keys, &o, err);
  if (rc) return rc;
  char key[200], ns[43];
  const char *kpath;
  bool shared;
  if ((rc = rule_key(o, key, 128, &kpath, err)) || (rc = read_ns(caller, o, ns, &shared, err))) return rc;
  uint32_t version;
  if ((rc = xgr__rpc_version(o, &version, err))) return rc;
  xgr_store_doc doc = {0};
  if ((rc = xgr_node_doc_in(d->n, XGR_REG_RULE, ns, shared, key, version, &doc, err))) {
    if (rc == XGR_ENOTFOUND)
      xgr_error_set(err, rc, kpath, "no rule is registered under \"%s\" in the namespace of %s%s", key,
                    ns[0] ? ns : "nobody (the empty namespace)", shared && ns[0] ? " nor in the empty one" : "");
    return xgr__rpc_code(rc, err);
  }
  json_t *r = doc_json(&doc);
  json_object_set_new(r, "address", json_string(key));
  json_t *rj = NULL;
  if (xgr_json_parse_exact(doc.content, doc.len, &rj, NULL)) rj = NULL;
  json_object_set_new(r, "rule", rj ? rj : json_null());
  json_object_set_new(r, "content", json_stringn(doc.content, doc.len));
  xgr_node_doc_clear(&doc);
  *result = r;
  return 0;
}

