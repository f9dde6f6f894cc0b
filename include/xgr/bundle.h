/* xgr/bundle.h — a bundle: one orchestration with the rule documents its steps use, in one file:
 *   {"orchestration": {...XRC-729...}, "rules": {"<address|alias>": {...XRC-137...}}}
 * A step's `rule` resolves by address (case-insensitive), by the alias inside `${addr:ALIAS}`,
 * or by bare alias. A bundle has no registered bytes, so its orchestration is hashed as jansson's
 * compact serialization in document key order (SEMANTICS §8).
 *
 * A loaded bundle is immutable and may be shared between threads. Owned by the caller of
 * xgr_bundle_parse / xgr_bundle_load_file; released with xgr_bundle_free.
 */
#ifndef XGR_BUNDLE_H
#define XGR_BUNDLE_H

#include <stddef.h>

#include "xgr/error.h"
#include "xgr/orch.h"
#include "xgr/rule.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xgr_bundle {
  xgr_orch *orch;
  size_t nrules;
  char **rule_keys;             /* as written in "rules" */
  xgr_rule **rules;             /* parsed rule documents, same order */
  const xgr_rule **step_rule;   /* per step index: the resolved rule */
  const char **step_rule_address; /* per step: the rule's address when known ("0x" + 40 hex), else NULL */
} xgr_bundle;

/* Parse a bundle. Every finding goes to diags (paths relative to the bundle: "orchestration.…",
 * "rules.<key>.…"); *err gets the first error. Returns 0 or a negative xgr_errcode. */
int xgr_bundle_parse(const char *bytes, size_t len, xgr_bundle **out, xgr_error *err, xgr_diags *diags);
int xgr_bundle_load_file(const char *path, xgr_bundle **out, xgr_error *err, xgr_diags *diags);
void xgr_bundle_free(xgr_bundle *b);

/* Assemble a bundle from registries: the orchestration from its exact registered bytes (so its
 * hash is keccak-256 of what was registered) and, for every distinct rule reference of its steps,
 * the rule document that lookup() returns for the reference's key (an address, lowercased; the
 * ALIAS of `${addr:ALIAS}`; or a bare alias). lookup fills *bytes (malloc'd, the bundle code frees
 * it) and *len and returns 0, or returns XGR_ENOTFOUND (the step's rule path is reported as
 * XGR_ERULEREF) or another negative code. Errors name the path ("orchestration.structure.A1.rule",
 * "rules.<key>.…"). Returns 0 and *out (xgr_bundle_free) or a negative xgr_errcode. */
typedef int (*xgr_bundle_lookup_fn)(void *ctx, const char *key, char **bytes, size_t *len, xgr_error *err);
int xgr_bundle_assemble(const char *orch_bytes, size_t orch_len, xgr_bundle_lookup_fn lookup, void *ctx,
                        xgr_bundle **out, xgr_error *err);

/* True when the JSON text looks like a bundle (an object with "orchestration" and no "structure"). */
int xgr_bundle_detect(const char *bytes, size_t len);

#ifdef __cplusplus
}
#endif
#endif
