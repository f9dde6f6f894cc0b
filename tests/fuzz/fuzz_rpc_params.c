/* fuzz_rpc_params.c — libFuzzer target over xgrd's shared parameter parsers (src/rpc/params.c):
 * the input is read as JSON params (an object, or an array holding one) and every parser runs on
 * it — the uint parser on each member, owner, target, registry (default and required keys),
 * ostcId, version, and the generic xgr_rpc_param_* readers. A parser either accepts or refuses
 * with a JSON-RPC code and a field path; any crash, leak, sanitizer report, a refusal without a
 * message, or an accepted name that breaks the registry-name rule is a bug. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/rpc_impl.h"

static void refused(int rc, const xgr_error *e) {
  if (rc && (rc >= 0 || !e->message[0])) abort();   /* a refusal is a negative code with a message */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  json_t *params = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
  if (!params) return 0;
  xgr_error e;
  const json_t *o;
  xgr_error_clear(&e);
  int rc = xgr_rpc_params_object(params, &o, &e);
  refused(rc, &e);
  if (!rc && o) {
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
