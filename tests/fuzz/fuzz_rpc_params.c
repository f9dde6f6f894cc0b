/* fuzz_rpc_params.c — libFuzzer target over xgrd's shared parameter parsers (src/rpc/params.c):
 * the input is read as JSON params (an object, or an array holding one) and every parser runs on
 * it — the uint parser on each member, owner, target, registry (default and required keys),
 * ostcId, version, and the generic xgr_rpc_param_* readers — and the unknown-key check every
 * method reads its parameters through (xgr__rpc_named, xgr__rpc_keys on a nested object). A parser
 * either accepts or refuses with a JSON-RPC code and a field path; any crash, leak, sanitizer
 * report, a refusal without a message, an accepted name that breaks the registry-name rule, an
 * accepted object with a key outside the list, or a key refusal whose path names a listed key is
 * a bug. */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/rpc_impl.h"

static void refused(int rc, const xgr_error *e) {
  if (rc && (rc >= 0 || !e->message[0])) abort();   /* a refusal is a negative code with a message */
}

static bool listed(const char *k, const char *const *keys) {
  for (; *keys; keys++)
    if (!strcmp(k, *keys)) return true;
  return false;
}

/* xgr__rpc_keys on o at path: accepted only when every key is listed (or "from" at the top level);
 * a refusal is XGR_ESCHEMA (-32602 on the wire) at "<path>.<key>" of a key that is not. */
static void keys_checked(const json_t *o, const char *path, const char *const *keys) {
  xgr_error e;
  xgr_error_clear(&e);
  int rc = xgr__rpc_keys(o, path, keys, &e);
  refused(rc, &e);
  const char *k;
  json_t *v;
  if (!rc) {
    if (json_is_object(o))
      json_object_foreach((json_t *)o, k, v) if (!listed(k, keys) && (*path || strcmp(k, "from"))) abort();
    return;
  }
  size_t pl = strlen(path);
  const char *at = e.path + (pl ? pl + 1 : 0);
  if (rc != XGR_ESCHEMA || !json_is_object(o) || strncmp(e.path, path, pl) || listed(at, keys) ||
      strncmp(e.message, "params.", 7))
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  json_t *params = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
  if (!params) return 0;
  xgr_error e;
  const json_t *o;
  xgr_error_clear(&e);
  int rc = xgr_rpc_params_object(params, &o, &e);
  refused(rc, &e);
  static const char *const top[] = {"owner", "rootPid", "xrc729", "ostcId", "ostcHash", "init", "permit", NULL};
  static const char *const init[] = {"stepId", "payload", "waitMs", NULL};
  const json_t *named;
  xgr_error_clear(&e);
  int nrc = xgr__rpc_named(params, top, &named, &e);   /* refuses what xgr_rpc_params_object does, and more */
  refused(nrc, &e);
  if ((rc && !nrc) || (!nrc && named != o)) abort();
  if (!rc && o) {
    keys_checked(o, "", top);
    keys_checked(json_object_get(o, "init"), "init", init);
    const char *k;
    json_t *v;
    uint64_t u;
    json_object_foreach((json_t *)o, k, v) {
      xgr_error_clear(&e);
      refused(xgr__rpc_uint(v, k, &u, &e), &e);
    }
    char owner[64], reg[XGR__RPC_MAX_REGISTRY + 1], key[XGR__RPC_KEY_SIZE];
    const char *path, *id = NULL, *str;
    uint64_t root, iter;
    uint32_t version;
    const json_t *obj;
    xgr_error_clear(&e);
    refused(xgr__rpc_owner(o, NULL, owner, sizeof owner, &path, &e), &e);
    xgr_error_clear(&e);
    refused(xgr__rpc_target(o, &root, &iter, &path, &e), &e);
    xgr_error_clear(&e);
    refused(xgr__rpc_version(o, &version, &e), &e);
    static const char *const req[] = {"orchestration", NULL};
    for (int r = 0; r < 2; r++) {
      xgr_error_clear(&e);
      rc = xgr__rpc_registry(o, r ? req : NULL, r == 1, reg, sizeof reg, &path, &e);
      refused(rc, &e);
      if (!rc && (!*reg || strpbrk(reg, "/#"))) abort();
    }
    xgr_error_clear(&e);
    rc = xgr__rpc_ostc_id(o, &id, &e);
    refused(rc, &e);
    if (!rc && id && (!*id || strchr(id, '/') || strlen(id) > XGR__RPC_MAX_OSTC_ID)) abort();
    xgr_error_clear(&e);
    if (!rc && !xgr__rpc_registry(o, NULL, false, reg, sizeof reg, &path, &e)) xgr__rpc_registry_key(key, reg, id);
    xgr_error_clear(&e);
    refused(xgr_rpc_param_string(o, "stepId", false, &str, &e), &e);
    xgr_error_clear(&e);
    refused(xgr_rpc_param_object(o, "init", false, &obj, &e), &e);
    xgr_error_clear(&e);
    refused(xgr_rpc_param_uint(o, "limit", true, &u, &e), &e);
  }
  json_decref(params);
  return 0;
}
