/* xgr/driver.h — the deterministic driver: runs one or more sessions in one thread on a virtual
 * clock (SEMANTICS §6). It executes one process at a time — among the runnable processes the one
 * due earliest, ties broken by session order then process id — applies each result completely,
 * and when nothing is runnable moves the clock to the next due timer or scripted action. It stops
 * when nothing is left (completed / killed), when only processes without a timer wait (stalled),
 * or at the step limit (limit). Steps run through the step engine (xgr_step_run), so API calls
 * are real HTTP requests (use an API map to point them at local servers).
 *
 * Used by `xgr run --virtual-time`, the scenario tests and the benchmarks. Not thread-safe.
 */
#ifndef XGR_DRIVER_H
#define XGR_DRIVER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "xgr/bundle.h"
#include "xgr/rule.h"
#include "xgr/session.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum xgr_driver_event_kind {
  XGR_DEV_PROC = 0,     /* a process changed: effect->proc, status in effect->status */
  XGR_DEV_JOIN,         /* a join was decided: effect->proc is its target */
  XGR_DEV_ACTION,       /* a scripted action was applied (message says what and how it went) */
  XGR_DEV_WAKE,         /* an internal wake-up was routed (message) */
  XGR_DEV_FINISHED      /* a session ended (message: its result) */
} xgr_driver_event_kind;

typedef struct xgr_driver_event {
  xgr_driver_event_kind kind;
  size_t session;               /* index of the session */
  int64_t now;                  /* virtual time, ms */
  const xgr_effect *effect;     /* PROC, JOIN: the core's effect (borrowed for the callback) */
  const char *message;          /* ACTION, WAKE, FINISHED */
  bool ok;                      /* ACTION, WAKE: whether it was applied */
} xgr_driver_event;

typedef struct xgr_driver_config {
  const xgr_api_map_entry *api_map;   /* URL rewriting for API calls (borrowed) */
  size_t napi_map;
  const xgr_chain_reader *chain;      /* contract reads; NULL: no backend (borrowed) */
  const xgr_outbound_policy *outbound; /* addresses API calls may reach (borrowed); NULL: the default */
  uint64_t max_steps;                 /* 0: no limit */
  bool record;                        /* keep every process's last state and the history for reports */
  uint32_t max_running;               /* per-session cap (0: default 32) */
  void (*observe)(void *ctx, const xgr_driver_event *ev);   /* live output, may be NULL */
  void *observe_ctx;
  /* Every core call's effects of session `session` (core s), right after the call while their
   * pointers are valid — for a store (`xgr run --virtual-time --store`). May be NULL. */
  void (*on_effects)(void *ctx, size_t session, const xgr_session *s, const xgr_effects *fx);
  void *effects_ctx;
} xgr_driver_config;

typedef struct xgr_driver xgr_driver;

xgr_driver *xgr_driver_new(const xgr_driver_config *cfg);
void xgr_driver_free(xgr_driver *d);

/* Add a session on bundle b (borrowed; must outlive the driver) for (owner, root_pid) starting
 * at step `start` with payload (a map, borrowed). Sessions start at virtual time 0. */
int xgr_driver_add_session(xgr_driver *d, const xgr_bundle *b, const char *owner, uint64_t root_pid,
                           const char *start, xgr_value payload, xgr_error *err);
/* The same, its start process waiting wait_ms of virtual time before it runs (init.waitMs;
 * xgr_session_start_at). xgr_driver_add_session is this with wait_ms 0. */
int xgr_driver_add_session_at(xgr_driver *d, const xgr_bundle *b, const char *owner, uint64_t root_pid,
                              const char *start, xgr_value payload, int64_t wait_ms, xgr_error *err);

/* Add scripted control actions (the --script format of `xgr run`):
 *   [{"at":5000,"wake":{"pid":"1:3"}|{"step":"E1"},"payload":{...},"caller":"0x..."},
 *    {"at":0,"kill":"1"|"1:4"}, {"at":0,"pause":"1:2"}, {"at":10,"resume":"1:2"|"1"}]
 * A wake without "caller" comes from the owner; a step-mode wake goes to the first session
 * unless "session": rootPid says otherwise. Errors name the offending entry ("[2].at"). */
int xgr_driver_add_script(xgr_driver *d, const json_t *script, xgr_error *err);

/* Run until done, stalled or the step limit. Returns the first session's result. */
xgr_session_result xgr_driver_run(xgr_driver *d);

uint64_t xgr_driver_steps(const xgr_driver *d);     /* steps executed so far */
/* Change the step limit (0: none); a run stopped by the limit can go on with another run. */
void xgr_driver_set_max_steps(xgr_driver *d, uint64_t max_steps);
int64_t xgr_driver_now(const xgr_driver *d);
xgr_session_result xgr_driver_result(const xgr_driver *d, size_t session);

/* The report of a session (needs cfg.record), a new jansson reference:
 * {"result","session":{"owner","rootPid","ostcId","ostcHash"},"processes":[...],"history":[...],
 *  "actions":[...]} as documented for `xgr run --json`. */
json_t *xgr_driver_report(const xgr_driver *d, size_t session);


/* ---- forced runs (additive, issue 21): a trace of `xgr explore --emit` replayed action by
 * action instead of xgr_driver_run's own order. Effects are recorded and observed as usual. */
const xgr_session *xgr_driver_session(const xgr_driver *d, size_t session);
/* Promote exactly process iter of a session now (xgr_session_promote_iter). */
int xgr_driver_force_promote(xgr_driver *d, size_t session, uint64_t iter, xgr_error *err);
/* Apply outcome o (borrowed for the call) to running process iter of a session now. */
int xgr_driver_force_result(xgr_driver *d, size_t session, uint64_t iter, const xgr_step_outcome *o,
                            xgr_error *err);
/* Move the virtual clock forward to now (never back). */
void xgr_driver_force_clock(xgr_driver *d, int64_t now);

#ifdef __cplusplus
}
#endif
#endif
