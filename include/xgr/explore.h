/* xgr/explore.h — exhaustive exploration of one session of an orchestration (issue 21,
 * `xgr explore`). The real session core (xgr/session.h) is branched at every choice a run can
 * meet: the outcome of each step execution (valid, invalid, hard error — or, with `rules`, what
 * the step's XRC-137 rule gives for the payload), the order in which concurrently runnable
 * processes are promoted and finish (the engine's free mode; a waiting producer can be killed by a
 * join closing with `kill`, or already be running and finish), and the order of timers (time
 * jumps to the next deadline at any moment). States are deduplicated by a canonical hash that
 * ignores process ids and join group numbers; a persistent-set reduction promotes processes no
 * kill can reach at once and (without timers) finishes processes whose scope has no open join
 * first, so independent orderings do not multiply. The search is breadth-first, so every finding
 * carries the shortest trace that shows it.
 *
 * The result is JSON (a new jansson reference):
 *   {"states","transitions","complete","seconds","maxLive":{"count","trace"},
 *    "results":[{"result","count","joins":[{"join","outcome","pieces":[STEP...]}]}],
 *    "findings":[{"kind","severity","step"?,"join"?,"message","trace","otherTrace"?,"steps"?,
 *                 "onlyIf"?}],
 *    "replay":{"start","payload","outcomes","rules"}}
 * kind: join_unfulfillable | join_undecided | step_unreachable | stall | unbounded_loop |
 * timing_dependent; severity "error" when it holds on every path, "info" when it is no defect of
 * the normal runs — a finding that only a step forced to end invalid or to fail shows (checked by
 * a second, complete exploration with outcomes {valid}; "onlyIf":[{"step","outcome"}] names the
 * forced outcomes of its trace and the message ends "only if step X fails"), or a timing
 * difference only in which pieces a join took (the race its k of n declares) — else "warning".
 * A loop finding lists the steps of its cycle ("steps").
 * A trace is a list of actions on the session "1:<iter>" pids of that path:
 *   {"promote":PID,"step":S} | {"finish":PID,"step":S,"outcome":"valid"|"invalid"|"error",
 *    "by":"forced"|"rule"} | {"advance":MS}
 * xgr_explore_replay() turns such a trace into the same run on the deterministic driver.
 *
 * Not thread-safe; everything is owned by the call.
 */
#ifndef XGR_EXPLORE_H
#define XGR_EXPLORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xgr/bundle.h"
#include "xgr/driver.h"
#include "xgr/error.h"
#include "xgr/orch.h"
#include "xgr/value.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
  XGR_EXPLORE_VALID = 1u << 0,
  XGR_EXPLORE_INVALID = 1u << 1,
  XGR_EXPLORE_ERROR = 1u << 2,
  XGR_EXPLORE_ALL = 7u
};

typedef struct xgr_explore_config {
  unsigned outcomes;        /* XGR_EXPLORE_* mask; 0 means all three */
  bool rules;               /* evaluate each step's rule on its payload (needs a bundle); steps
                               whose rules make API calls still take every outcome of `outcomes` */
  uint64_t max_steps;       /* step executions along one path (0: 200) */
  size_t max_states;        /* distinct states (0: 200000) */
  double time_budget;       /* seconds; 0: none. Cut searches report complete=false */
  uint32_t max_running;     /* per-session cap (0: 32) */
} xgr_explore_config;

/* Parse "valid,invalid,error" into a mask. Returns 0 or XGR_EINVAL (message names the word). */
int xgr_explore_parse_outcomes(const char *text, unsigned *mask, xgr_error *err);

/* Explore the session of orchestration o started at step `start` with payload (a map or null,
 * borrowed). b (may be NULL) supplies the rules: their static waitSec for forced outcomes and,
 * with cfg->rules, the step engine. *out gets the JSON above (caller json_decref's).
 * Returns 0, or XGR_ENOTFOUND / XGR_EINVAL (unknown start step, rules without a bundle). */
int xgr_explore_run(const xgr_orch *o, const xgr_bundle *b, const char *start, xgr_value payload,
                    const xgr_explore_config *cfg, json_t **out, xgr_error *err);

/* Explore from a given state (issue 36, migrate-check): s (borrowed, settled; its orchestration
 * is the one explored) at session clock now, as xgr_explore_run does from a start. Traces name the
 * processes "<rootPid>:<iter>" of s; "replay" is {"from":label,"outcomes","rules"}. */
int xgr_explore_from(const xgr_session *s, int64_t now, const xgr_bundle *b, const char *label,
                     const xgr_explore_config *cfg, json_t **out, xgr_error *err);

/* Call visit for every distinct state an exploration from `start` reaches (each once, as it is
 * expanded; s is borrowed for the call). *complete (may be NULL) says whether the search was cut. */
int xgr_explore_states(const xgr_orch *o, const xgr_bundle *b, const char *start, xgr_value payload,
                       const xgr_explore_config *cfg, void (*visit)(void *ctx, const xgr_session *s, int64_t now),
                       void *ctx, bool *complete, xgr_error *err);

/* True when some finding of an exploration result has severity "error". */
bool xgr_explore_has_error(const json_t *result);

/* Replay a trace file's actions ({"replay":{"start","payload","rules"},"trace":[...]}, as written
 * by `xgr explore --emit`) on session 0 of driver d, which must have been created with that start
 * and payload on bundle b (borrowed). Forced outcomes are built as the explorer builds them;
 * "by":"rule" runs the step's rule. Errors name the trace entry ("trace[3]"). */
int xgr_explore_replay(xgr_driver *d, const xgr_bundle *b, const json_t *file, xgr_error *err);

#ifdef __cplusplus
}
#endif
#endif
