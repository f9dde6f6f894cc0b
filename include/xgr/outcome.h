/* xgr/outcome.h — the bridge between the step engine and the session core: turn an XRC-137 step
 * result (xgr/rule.h) into the outcome the core applies (xgr/session.h), following SEMANTICS §2:
 * a hard error wins, then cancelSession, then abortStep, else valid / invalid with the effective
 * and outcome payloads, waitSec and the wake-ups that could be resolved (skipped ones are not
 * sent). Every driver (deterministic or concurrent) uses this one function. */
#ifndef XGR_OUTCOME_H
#define XGR_OUTCOME_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "xgr/rule.h"
#include "xgr/session.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Scratch space the outcome borrows from: keep it alive (and r) until the core has applied it. */
typedef struct xgr_outcome_buf {
  char error[XGR_PATH_MAX + XGR_MSG_MAX + 32];
  xgr_wakeup_req wakeups[64];
  char api[12288];              /* the API calls as JSON text (URLs and errors cut to 300 bytes each) */
} xgr_outcome_buf;

/* What each API call of r did as a JSON array (a new reference): [{"name","status","ms","url",
 * "error"}] — the history row's record (URLs and errors cut to 300 bytes; the URL has its
 * credentials masked) — with "method" too when with_method (tracing reads it). */
json_t *xgr_outcome_api_json(const xgr_step_result *r, bool with_method);

/* Fill *o from r. rule_address is the executing rule's address (for `fromXRC137`), or NULL.
 * o borrows from r and buf. */
void xgr_outcome_from_result(const xgr_step_result *r, const char *rule_address, xgr_outcome_buf *buf,
                             xgr_step_outcome *o);

#ifdef __cplusplus
}
#endif
#endif
