/* xgr/script.h — timed control actions for a run (`xgr run --script`, the scenario files), parsed
 * once for every driver:
 *   [{"at":5000,"wake":{"pid":"1:3"}|{"step":"E1"},"payload":{...},"caller":"0x...","session":N},
 *    {"at":0,"kill":"1"|"1:4"}, {"at":0,"pause":"1:2"}, {"at":10,"resume":"1:2"|"1"},
 *    {"at":20,"retry":"1:3","payload":{...}}]
 * "at" is milliseconds on the session clock (default 0); a wake without "caller" comes from the
 * owner; "session" (a rootPid) aims a step-mode wake at another session than the default.
 * Nothing is ignored: an unknown key (at any level) is an error naming the nearest known key, and
 * so is a key the action's kind does not read ("pid" with "step", "session" outside a step-mode
 * wake, "payload" outside a wake or a retry). A retry runs an aborted process's step again
 * (xgr_session_retry), with its last input payload or "payload" in its place. */
#ifndef XGR_SCRIPT_H
#define XGR_SCRIPT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "xgr/error.h"
#include "xgr/value.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum xgr_script_kind {
  XGR_SCRIPT_WAKE_PID = 0,
  XGR_SCRIPT_WAKE_STEP,
  XGR_SCRIPT_KILL,
  XGR_SCRIPT_PAUSE,
  XGR_SCRIPT_RESUME,
  XGR_SCRIPT_RETRY
} xgr_script_kind;

typedef struct xgr_script_action {
  int64_t at;                 /* ms on the session clock */
  xgr_script_kind kind;
  uint64_t root_pid;          /* the session named by the pid; WAKE_STEP: "session", or 0 for the default */
  uint64_t iter;              /* 0: the whole session (kill, pause, resume) */
  char *step;                 /* WAKE_STEP: the step id (owned) */
  char *caller;               /* WAKE_*: the caller, NULL for the owner (owned) */
  xgr_value payload;          /* WAKE_*, RETRY: map or null (one reference held) */
  char *text;                 /* the entry as compact JSON, for reports (owned) */
} xgr_script_action;

/* Parse a script into *out (n entries, sorted by `at`, script order kept for equal times; the
 * caller frees them with xgr_script_free). Nothing is returned when an entry is invalid: *err
 * names it ("[2].at") and says what was expected. */
int xgr_script_parse(const json_t *script, xgr_script_action **out, size_t *n, xgr_error *err);

/* Release what the actions own (fields may have been taken and set to NULL) and the array. */
void xgr_script_free(xgr_script_action *a, size_t n);

#ifdef __cplusplus
}
#endif
#endif
