/* xgr/records.h — what a driver remembers of a session for reports: the last state of every
 * process the session created (indexed by iter), the history rows, and the control actions applied
 * to it; and the report JSON built from them — the shape of `xgr run --json`:
 *   {"result","session":{"owner","rootPid","ostcId","ostcHash"},"processes":[{"pid","parentPid",
 *    "step","status","paused","valid","joinGroupId","joinFromGroupId","join","payload","error",
 *    "abortReason"?}],"history":[{"pid","step","status","valid","at","error","apiCalls"?}],"actions":[...],"steps",
 *    "clockMs","killedAt"?}
 * "killedAt" (ms on the session clock) is there once kill(root) or cancelSession happened; a
 * history row's "error" is the process's error text after that result (hard error, abortStep,
 * cancelSession) or null; "apiCalls" ([{"name","status","ms","url","error"}], URLs with credentials
 * masked) is there for a step that made API calls.
 * The deterministic driver and the concurrent engine both use it, so their reports are the same.
 * A records object belongs to one thread at a time (the driver, or the session's actor). */
#ifndef XGR_RECORDS_H
#define XGR_RECORDS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "xgr/session.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xgr_records xgr_records;

xgr_records *xgr_records_new(void);
void xgr_records_free(xgr_records *r);

/* Remember p's current state (after a PROC or JOIN effect); o is its orchestration. */
void xgr_records_proc(xgr_records *r, const xgr_orch *o, const xgr_proc *p);
/* Append the history row of a HISTORY effect. */
void xgr_records_hist(xgr_records *r, const xgr_effect *e);
/* Append a control action: when, what (its text), whether it applied, and the message. */
void xgr_records_action(xgr_records *r, int64_t at, const char *action, bool ok, const char *message);

/* The last recorded state of process iter as a retry source (xgr_session_retry): false when
 * nothing was recorded for it. out->payload is borrowed from r (valid until its next change). */
bool xgr_records_retry_of(const xgr_records *r, uint64_t iter, xgr_retry_of *out);

/* The join state of a join target as reports show it:
 * {"expect":[STEP...],"k","policy","inbox":{STEP:piece},"fail":{STEP:reason},"closed","outcome"}.
 * A new reference. */
json_t *xgr_join_state_json(const xgr_orch *o, const xgr_join_state *js);

/* The report of session s with result name `result`, `steps` steps run and clock `now`. With r
 * NULL (nothing recorded) "processes" lists s's live processes and "history" is empty.
 * A new reference. */
json_t *xgr_records_report(const xgr_records *r, const xgr_session *s, const char *result, uint64_t steps,
                           int64_t now);

#ifdef __cplusplus
}
#endif
#endif
