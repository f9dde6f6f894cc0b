/* registry.c — registering orchestrations and rules in the node's store (xgr/node.h, "Registry").
 *
 * A front end reads the request and checks the document (its size, that it parses); the node
 * decides the rest, here: the writer's namespace (every key is stored as "<writer>:<key>", or
 * "<key>" in the empty namespace of writes without an owner: docs/SEMANTICS.md, "Names and pins"),
 * who may write a key (in permit mode only the owner of a key registers new versions, which the
 * namespace makes the writer itself), the store writes (an orchestration under "<registry>/<id>"
 * and, as the registry's current one, under "<registry>"; a rule under its key), the bundle cache
 * forgetting what it assembled from the old documents, and the log line.
 */
#include <string.h>
#include <strings.h>

#include "node/node_impl.h"

/* The stored key of r's key (or current) in r's writer's namespace. */
static const char *ns_key(char *out, size_t n, const xgr_node_register_req *r, const char *key) {
  xgr_node_ns_key(out, n, r->who, key);
  return out;
}

/* The newest registration of (kind, key) into *prev (version 0 when there is none); with
 * owner_only, XGR_EPERM at path when another owner registered it. */
static int owned(xgr_node *n, xgr_registry_kind kind, const char *key, const char *who, bool owner_only,
                 const char *path, xgr_store_doc *prev, xgr_error *err) {
  memset(prev, 0, sizeof *prev);
  int rc = xgr_store_doc_get(n->st, kind, key, 0, prev, err);
  if (rc == XGR_ENOTFOUND) {
    xgr_error_clear(err);
    memset(prev, 0, sizeof *prev);
    return 0;
  }
  if (rc) return rc;
  if (owner_only && prev->owner && prev->owner[0] && strcasecmp(prev->owner, who)) {
    rc = xgr_error_set(err, XGR_EPERM, path, "\"%s\" is owned by %s; only its owner may register a new version (signer %s)",
                       key, prev->owner, who);
    xgr_store_doc_clear(prev);
    return rc;
  }
  return 0;
}

int xgr_node_register_allowed(xgr_node *n, const xgr_node_register_req *r, xgr_error *err) {
  xgr_store_doc d = {0};
  int rc = 0;
  char k[XGR_NODE_KEY_MAX];
  if (r->current) {
    if ((rc = owned(n, r->kind, ns_key(k, sizeof k, r, r->current), r->who, r->owner_only, r->current_path, &d, err)))
      return rc;
    xgr_store_doc_clear(&d);
  }
  if ((rc = owned(n, r->kind, ns_key(k, sizeof k, r, r->key), r->who, r->owner_only, r->key_path, &d, err))) return rc;
  xgr_store_doc_clear(&d);
  return 0;
}

int xgr_node_register(xgr_node *n, const xgr_node_register_req *r, xgr_store_doc *out, xgr_store_doc *prev,
                      xgr_error *err) {
  memset(out, 0, sizeof *out);
  memset(prev, 0, sizeof *prev);
  xgr_store_doc cur = {0}, cur_prev = {0};
  int rc = 0;
  char key[XGR_NODE_KEY_MAX], current[XGR_NODE_KEY_MAX];
  ns_key(key, sizeof key, r, r->key);
  if (r->current) ns_key(current, sizeof current, r, r->current);
  if (r->current && (rc = owned(n, r->kind, current, r->who, r->owner_only, r->current_path, &cur_prev, err)))
    return rc;
  if ((rc = owned(n, r->kind, key, r->who, r->owner_only, r->key_path, prev, err))) {
    xgr_store_doc_clear(&cur_prev);
    return rc;
  }
  xgr_store_doc_clear(&cur_prev);
  rc = xgr_store_register(n->st, r->kind, key, r->who, r->bytes, r->len, out, err);
  if (!rc && r->current) rc = xgr_store_register(n->st, r->kind, current, r->who, r->bytes, r->len, &cur, err);
  xgr_store_doc_clear(&cur);
  if (rc) {
    xgr_store_doc_clear(out);
    xgr_store_doc_clear(prev);
    return rc;
  }
  xgr_logfmt l;
  if (r->kind == XGR_REG_ORCHESTRATION) {
    xgr_node_bundle_forget(n, key);
    if (r->current) xgr_node_bundle_forget(n, current);
    xgr_node_log_begin(n, &l, "info", "orchestration registered");
    xgr_logfmt_str(&l, "registry", r->current ? r->current : r->key);
    xgr_logfmt_str(&l, "ostcId", r->id ? r->id : "");
  } else {
    xgr_node_rules_changed(n);   /* cached bundles are stale now: freed unless a call or a session holds them */
    xgr_node_log_begin(n, &l, "info", "rule registered");
    xgr_logfmt_str(&l, "key", r->key);
  }
  xgr_logfmt_quoted(&l, "namespace", r->who);
  xgr_logfmt_u64(&l, "version", out->version);
  xgr_logfmt_str(&l, "hash", out->hash);
  xgr_node_log_end(n, &l);
  return 0;
}
