/* xgr/session.h — the session manager core: the XRC-729 runtime semantics as a pure state
 * machine, one per session (docs/SEMANTICS.md is the contract).
 *
 * A session is (owner, rootPid) running one orchestration. Its processes have ids
 * "<rootPid>:<iter>", move waiting -> running -> done | aborted, form join scopes, deliver pieces
 * into join inboxes, and are promoted, killed, paused and woken. The core never does I/O, never
 * starts threads and never reads a clock: every call takes `now` (milliseconds on the session's
 * clock) and appends effects to an xgr_effects buffer that the driver carries out:
 *
 *   RUN_STEP     run the XRC-137 rule of a process's step on its payload, then report the
 *                outcome with xgr_session_step_result;
 *   PROC         a process changed (created, promoted, finished, aborted, woken, paused, a piece
 *                or fail record arrived in its join inbox, its join decided): persist it / show
 *                it; the pointer is valid until the next call;
 *   HISTORY      a step ran: one audit row (pid, step, status after the result, outcome, at);
 *   WAKE         deliver an internal wake-up to another session (routed by owner and rootPid);
 *   FINISHED     the session has no live process left (result completed or killed);
 *   JOIN         a join closed (satisfied or unfulfillable): proc is its target, the outcome is
 *                in proc->join; a PROC effect of the target follows in the same call.
 *
 * Timers: the driver asks xgr_session_next_due() for the earliest time a waiting process can be
 * promoted and calls xgr_session_promote() when that time has come (or after any event).
 * Promotion is explicit so that the deterministic driver can run one process at a time while a
 * concurrent driver promotes up to the per-session cap.
 *
 * Terminal processes leave the core's tables at once and are freed at the start of the next call
 * (their last state went out as a PROC effect, whose pointer stays valid until then); the core's
 * memory is proportional to the live processes and open joins, so endless loops stay flat.
 *
 * In builds without NDEBUG every call that changes a session ends by checking the core's
 * invariants with assert() (docs/SESSIONS.md lists them).
 *
 * Thread safety: none. One session is only ever touched by one thread at a time (its actor).
 * The orchestration is borrowed and must outlive the session.
 */
#ifndef XGR_SESSION_H
#define XGR_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xgr/error.h"
#include "xgr/orch.h"
#include "xgr/value.h"

#ifdef __cplusplus
extern "C" {
#endif

#define XGR_NEVER INT64_MAX          /* nextWakeAt of a process that waits for a wake-up only */

typedef enum xgr_proc_status {
  XGR_PROC_WAITING = 0,
  XGR_PROC_RUNNING = 1,
  XGR_PROC_DONE = 2,
  XGR_PROC_ABORTED = 3
} xgr_proc_status;

const char *xgr_proc_status_name(xgr_proc_status s);   /* "waiting" | "running" | "done" | "aborted" */

typedef enum xgr_join_outcome {
  XGR_JOIN_OPEN = 0,
  XGR_JOIN_SATISFIED = 1,
  XGR_JOIN_UNFULFILLABLE = 2
} xgr_join_outcome;

const char *xgr_join_outcome_name(xgr_join_outcome o); /* "open" | "satisfied" | "unfulfillable" */

/* The join state of a join target process (SEMANTICS §3). Entries are indexed like decl->from. */
typedef struct xgr_join_state {
  const xgr_join *decl;                 /* borrowed from the orchestration */
  xgr_value inbox[XGR_MAX_JOIN_INPUTS]; /* piece per expected step (null kind: none yet); a piece
                                           never changes once delivered */
  char *inbox_text[XGR_MAX_JOIN_INPUTS]; /* inbox[i] as JSON text once xgr_session_join_to_json wrote
                                           it (owned; NULL: not yet), so a join of k pieces written
                                           after every delivery costs O(k) per write, not a new text
                                           of every piece each time */
  const char *fail[XGR_MAX_JOIN_INPUTS];/* static reason ("aborted") or NULL */
  bool closed;
  xgr_join_outcome outcome;
  int64_t closed_at;
} xgr_join_state;

/* Why a process was aborted (NULL error text for the non-error reasons). */
typedef enum xgr_abort_reason {
  XGR_ABORT_NONE = 0,
  XGR_ABORT_ERROR,          /* hard error of its step */
  XGR_ABORT_STEP,           /* its rule said abortStep */
  XGR_ABORT_CANCEL,         /* cancelSession (by this or another process of the session) */
  XGR_ABORT_KILL,           /* kill of the root or of this pid */
  XGR_ABORT_JOIN_KILL,      /* its scope's join closed with policy kill */
  XGR_ABORT_UNFULFILLABLE   /* it was an open join target whose join became unfulfillable */
} xgr_abort_reason;

const char *xgr_abort_reason_name(xgr_abort_reason r);

/* A process, as the core keeps it while it lives. Read-only for drivers. */
typedef struct xgr_proc {
  uint64_t iter;                /* pid = "<rootPid>:<iter>" */
  uint64_t parent_iter;         /* 0 for the start process */
  uint16_t step;                /* step index in the orchestration */
  uint8_t status;               /* xgr_proc_status */
  bool paused;
  int8_t valid;                 /* outcome: -1 none, 0 invalid, 1 valid (SEMANTICS §7) */
  uint8_t abort_reason;         /* xgr_abort_reason */
  uint32_t group;               /* joinGroupId (0: the session's root scope) */
  uint32_t from_group;          /* joinFromGroupId of a join target, else 0 */
  int64_t next_wake_at;         /* ms; XGR_NEVER: waits for a wake-up */
  int64_t created_at, started_at, finished_at;
  xgr_value payload;            /* resumePlain before the step ran, effective payload after */
  char *error;                  /* hard error text (owned) or NULL */
  xgr_join_state *join;         /* join targets only */
  /* private to the core: its scope (while live), the scope's member list (scope_next_ also
   * links the core's list of terminal processes awaiting release) and the position in a
   * promotion heap */
  void *scope_;
  struct xgr_proc *scope_prev_, *scope_next_;
  size_t heap_idx_;
} xgr_proc;

/* What the step engine decided for one process (SEMANTICS §2). */
typedef enum xgr_outcome_kind {
  XGR_OUTCOME_VALID = 0,
  XGR_OUTCOME_INVALID = 1,
  XGR_OUTCOME_HARD_ERROR = 2,
  XGR_OUTCOME_ABORT_STEP = 3,
  XGR_OUTCOME_CANCEL_SESSION = 4
} xgr_outcome_kind;

/* One internal wake-up a branch requested (already resolved by the step engine). */
typedef struct xgr_wakeup_req {
  const char *runner;           /* owner address of the target session */
  uint64_t session_id;          /* rootPid of the target session */
  const char *step_id;
  xgr_value payload;            /* the wake-up's own payload (a map or null), borrowed */
} xgr_wakeup_req;

typedef struct xgr_step_outcome {
  xgr_outcome_kind kind;
  xgr_value effective;          /* effective payload (map), borrowed; ignored for hard errors */
  xgr_value outcome_payload;    /* outcome payload of the branch (map or null), borrowed */
  int64_t wait_sec;             /* waitSec of the branch taken (0: none; < 0: wait for a wake-up) */
  const char *error;            /* hard error text, or the reason of abortStep/cancelSession */
  const char *rule_address;     /* address of the XRC-137 rule that ran (for fromXRC137), or NULL */
  const char *api_json;         /* its API calls as JSON text (for the history row), borrowed, or NULL */
  size_t nwakeups;
  const xgr_wakeup_req *wakeups;
} xgr_step_outcome;

typedef enum xgr_effect_kind {
  XGR_FX_RUN_STEP = 0,
  XGR_FX_PROC = 1,
  XGR_FX_HISTORY = 2,
  XGR_FX_WAKE = 3,
  XGR_FX_FINISHED = 4,
  XGR_FX_JOIN = 5               /* a join was decided: proc is its target (outcome in proc->join) */
} xgr_effect_kind;

typedef enum xgr_session_result {
  XGR_RESULT_RUNNING = 0,       /* still has live processes */
  XGR_RESULT_COMPLETED,
  XGR_RESULT_KILLED,
  XGR_RESULT_STALLED,           /* set by drivers: only processes without a timer are left */
  XGR_RESULT_LIMIT              /* set by drivers: a step limit stopped the run */
} xgr_session_result;

const char *xgr_session_result_name(xgr_session_result r);

typedef struct xgr_effect {
  xgr_effect_kind kind;
  const xgr_proc *proc;         /* RUN_STEP, PROC, HISTORY, JOIN; WAKE: the process whose step sent it.
                                   Valid until the next core call */
  /* HISTORY */
  uint8_t status;               /* status after the result */
  int8_t valid;                 /* -1 none, 0, 1 */
  int64_t at;                   /* when the step began to run */
  char *api;                    /* the step's API calls as JSON text [{"name","status","ms","url","error"}]
                                   (owned by the effects buffer), or NULL when it made none */
  /* WAKE: target and merged payload (owned by the effects buffer) */
  char *runner;
  uint64_t session_id;
  char *step_id;
  xgr_value payload;
  char *rule_address;
  /* FINISHED */
  xgr_session_result result;
} xgr_effect;

/* A growable effects buffer owned by the driver. xgr_effects_reset releases what the effects
 * own (WAKE strings and payloads, HISTORY api texts) and empties it; xgr_effects_free also frees the array. */
typedef struct xgr_effects {
  xgr_effect *items;
  size_t n, cap;
} xgr_effects;

void xgr_effects_init(xgr_effects *fx);
void xgr_effects_reset(xgr_effects *fx);
void xgr_effects_free(xgr_effects *fx);

typedef struct xgr_session_config {
  uint32_t max_running;         /* per-session cap on running processes (default 32; 0 = default) */
} xgr_session_config;

typedef struct xgr_session xgr_session;

/* A new session for (owner, root_pid) on orchestration o (borrowed). owner is copied. */
xgr_session *xgr_session_new(const xgr_orch *o, const char *owner, uint64_t root_pid,
                             const xgr_session_config *cfg);
void xgr_session_free(xgr_session *s);

const char *xgr_session_owner(const xgr_session *s);
uint64_t xgr_session_root_pid(const xgr_session *s);
const xgr_orch *xgr_session_orch(const xgr_session *s);
xgr_session_result xgr_session_result_of(const xgr_session *s);
size_t xgr_session_live(const xgr_session *s);        /* waiting + running processes */
size_t xgr_session_running(const xgr_session *s);
uint64_t xgr_session_next_iter(const xgr_session *s); /* iter the next process will get */
/* Live process with this iter, or NULL (terminal processes are gone). */
const xgr_proc *xgr_session_find(const xgr_session *s, uint64_t iter);
/* Call fn for every live process (unspecified order). */
void xgr_session_foreach(const xgr_session *s, void (*fn)(void *ctx, const xgr_proc *p), void *ctx);

/* Start: create the start process at `step` with payload (borrowed; keys starting with `_`
 * other than `__` keys are kept as given), waiting with nextWakeAt = now. */
int xgr_session_start(xgr_session *s, unsigned step, xgr_value payload, int64_t now,
                      xgr_effects *fx, xgr_error *err);
/* The same with the start process's first wake at wake_at (>= now; the request's init.waitMs,
 * seed 000 §11): it waits like any process with a timer (a wake-up moves it earlier) and is
 * recorded with that nextWakeAt. xgr_session_start is this with wake_at = now. */
int xgr_session_start_at(xgr_session *s, unsigned step, xgr_value payload, int64_t now, int64_t wake_at,
                         xgr_effects *fx, xgr_error *err);
/* The longest start wait a request may ask for (init.waitMs, `xgr run --wait-ms`): the longest
 * waitSec a rule may give (2^32 - 1 s), in ms. */
#define XGR_MAX_WAIT_MS ((int64_t)UINT32_MAX * 1000)

/* Earliest nextWakeAt of a promotable waiting process, or XGR_NEVER. */
int64_t xgr_session_next_due(const xgr_session *s);

/* Promote up to `max` due processes (nextWakeAt <= now, not paused, dispatch gate) in order of
 * (nextWakeAt, iter), honouring the per-session cap (steps that declare a join bypass it).
 * Each promotion emits RUN_STEP. Processes of a scope closed with kill are aborted instead.
 * Returns the number promoted. */
size_t xgr_session_promote(xgr_session *s, int64_t now, size_t max, xgr_effects *fx);

/* The step of running process `iter` finished. Unknown or no longer running processes (killed
 * meanwhile) are ignored and return XGR_ESTATE. */
int xgr_session_step_result(xgr_session *s, uint64_t iter, const xgr_step_outcome *o, int64_t now,
                            xgr_effects *fx, xgr_error *err);

/* Kill the whole session (iter 0) or one process. */
int xgr_session_kill(xgr_session *s, uint64_t iter, int64_t now, xgr_effects *fx, xgr_error *err);
/* Pause / resume one waiting process, or the whole session (iter 0). */
int xgr_session_pause(xgr_session *s, uint64_t iter, bool pause, int64_t now, xgr_effects *fx,
                      xgr_error *err);

typedef enum xgr_wake_scope { XGR_WAKE_RPC = 0, XGR_WAKE_INTERNAL = 1 } xgr_wake_scope;

/* Wake one waiting process (PID mode). Only the owner may (caller NULL means the owner).
 * Sets nextWakeAt = now and merges payload (a map, borrowed; may be null) shallowly, dropping
 * keys that start with `_`. Errors: not found / not waiting (XGR_ESTATE), open join target
 * (XGR_ESTATE), caller not the owner (XGR_EPERM). */
int xgr_session_wake_pid(xgr_session *s, uint64_t iter, const char *caller, xgr_value payload,
                         int64_t now, xgr_effects *fx, xgr_error *err);

/* Wake every waiting process at `step` (step mode). caller NULL means the owner; another caller
 * needs the process's `__wakeUp` allow list for `scope` (internal: with `fromXRC137` checked
 * against rule_address). Open join targets are skipped. *woken gets the number woken; a wake
 * that matches nothing returns XGR_ENOTFOUND with a message saying so. */
int xgr_session_wake_step(xgr_session *s, unsigned step, const char *caller, xgr_wake_scope scope,
                          const char *rule_address, xgr_value payload, int64_t now,
                          xgr_effects *fx, size_t *woken, xgr_error *err);

/* The one `__wakeUp` allow-list check: may `caller` (not the owner; compared case-insensitively)
 * wake a process waiting on step `step_id` whose payload is `payload` (borrowed)? The entry is
 * `__wakeUp.steps[step_id]` when that is an object, else `__wakeUp.default` (an object), else none.
 * XGR_WAKE_RPC: caller is in the entry's `rpc` list. XGR_WAKE_INTERNAL: caller is in `internal`
 * (a list, wildcards "*" and the zero address allowed) or in `internal.allow`, with rule_address in
 * `internal.fromXRC137` when that is given. xgr_session_wake_step decides with it, and xgrd's
 * allow-list listing shows exactly the processes it would let the caller wake. */
bool xgr_session_wake_allowed(xgr_value payload, const char *step_id, const char *caller, xgr_wake_scope scope,
                              const char *rule_address);

/* "<rootPid>:<iter>" into buf (32 bytes suffice). */
void xgr_pid_format(uint64_t root_pid, uint64_t iter, char *buf, size_t n);
/* Parse "<rootPid>:<iter>" or "<rootPid>" (iter 0): decimal digits, each part in 1..2^64-1 (a larger
 * number is refused, not clamped). Returns 0 or XGR_EINVAL. */
int xgr_pid_parse(const char *s, uint64_t *root_pid, uint64_t *iter);

/* ==== Retry (issue 36; implemented in src/session/core.c) =====================================
 * A process that aborted on a hard error of its step, or was killed, runs its step again as a new
 * process of the same session in the same join scope, so that an open join it fed can still be
 * satisfied (docs/SEMANTICS.md "Retry and fork"). The core forgets terminal processes at once, so
 * the caller hands in the aborted process's last recorded state (a report's record, a store row). */

/* The last recorded state of the process to retry. */
typedef struct xgr_retry_of {
  uint64_t iter;                /* the aborted process */
  unsigned step;                /* its step index */
  xgr_proc_status status;       /* as recorded: must be XGR_PROC_ABORTED */
  xgr_abort_reason reason;      /* must be XGR_ABORT_ERROR or XGR_ABORT_KILL */
  uint32_t group;               /* its join scope (joinGroupId) */
  bool join_unsatisfied;        /* it was a join target whose own join did not close satisfied */
  xgr_value payload;            /* its last input payload (borrowed): the resume payload it ran or
                                   waited with (a hard error and a kill leave it unchanged) */
} xgr_retry_of;

/* Retry r: a new waiting process at r->step in scope r->group, due now, child of r->iter, with
 * payload (a map, borrowed) or, when payload is null, r->payload. *iter_out gets its iter. The
 * decision is the core's; refusals leave the session unchanged and name the field that decided
 * in err->path: "sessionId" (XGR_ESTATE: the session has ended), "pid" (XGR_ESTATE: the process
 * did not abort on a hard error or a kill, is live, was an unsatisfied join target, or the join
 * it fed has closed; XGR_ENOTFOUND: not a process of this session), "payload" (XGR_EINVAL: not a
 * map). */
int xgr_session_retry(xgr_session *s, const xgr_retry_of *r, xgr_value payload, int64_t now, xgr_effects *fx,
                      uint64_t *iter_out, xgr_error *err);
/* ==== end of retry ============================================================================ */

/* ==== Recovery (issue 8 — durable sessions; implemented in src/session/core.c) ===============
 * Additive: rebuild a session core from stored records (xgr/store.h) after a restart. The
 * session's counters and the join state of a process are what the store needs beyond the PROC
 * effects. Restored processes that were running when the previous process died become waiting
 * again with their stored payload (their result was never committed), so they run again. */

/* The core's counters that recovery needs. */
typedef struct xgr_session_state {
  uint64_t next_iter;           /* iter the next process will get */
  uint32_t next_group;          /* join group id the next join will get */
  bool paused;                  /* the whole session is paused (new processes start paused) */
  bool killed;                  /* kill(root) or cancelSession happened */
  int64_t killed_at;
} xgr_session_state;

void xgr_session_state_get(const xgr_session *s, xgr_session_state *out);

/* The join state of a join target as JSON text (malloc'd, caller frees):
 *   {"decl":[STEP,BRANCH],"closed":B,"outcome":N,"closedAt":T,"inbox":[PIECE|null,...],"fail":[B,...]}
 * where decl names the branch that declared the join (o->steps[STEP].branch[BRANCH].join). Keeps
 * each piece's text in js->inbox_text for the next call (the only change it makes to js). */
char *xgr_session_join_to_json(const xgr_orch *o, xgr_join_state *js);

/* The same text written into buf, snprintf's way: at most cap - 1 bytes and a NUL (nothing when
 * cap is 0); returns the text's whole length, so a result >= cap means it was cut (write again
 * with a larger buffer). Returns 0 (buf "" when cap > 0) when js is NULL or not declared in o.
 * For writers that keep their buffer (a session's actor, a store batch): no allocation once
 * every piece's text is kept. */
size_t xgr_session_join_write(const xgr_orch *o, xgr_join_state *js, char *buf, size_t cap);

/* The live join target collecting from join group `group` (its joinFromGroupId), or NULL.
 * A delivery into a join inbox changes the target without a PROC effect of its own; a store
 * persists the collector of every process that became terminal to keep the inbox durable. */
const xgr_proc *xgr_session_collector(const xgr_session *s, uint32_t group);

/* Begin a restore: an empty session with the given counters (no effects). Add every live
 * process with xgr_session_restore_proc and every scope closed with policy kill with
 * xgr_session_restore_scope_killed, then call xgr_session_restore_end. */
xgr_session *xgr_session_restore_begin(const xgr_orch *o, const char *owner, uint64_t root_pid,
                                       const xgr_session_config *cfg, const xgr_session_state *st);
/* Add one live process (copied; payload retained; join_json is its join state or NULL).
 * A running process comes back waiting. Errors: terminal status, iter 0 or >= next_iter, a
 * duplicate iter, a step out of range, malformed join JSON (XGR_EINVAL). */
int xgr_session_restore_proc(xgr_session *s, const xgr_proc *p, const char *join_json, xgr_error *err);
void xgr_session_restore_scope_killed(xgr_session *s, uint32_t group);
/* Finish: wire join targets to their scopes, check consistency, and settle (a decision that
 * was pending is taken now; its effects go to fx, which may be NULL). Returns 0 or XGR_EINVAL. */
int xgr_session_restore_end(xgr_session *s, int64_t now, xgr_effects *fx, xgr_error *err);
/* ==== end of recovery ======================================================================== */


/* ==== Exploration (issue 21, src/explore) ===================================================
 * Additive: what `xgr explore` needs to branch the real core. */

/* A deep copy of a settled session (caller frees with xgr_session_free): live processes with
 * their payloads (shared, retained), join states, scopes, counters. Grave entries (effects of the
 * last call) are not copied. */
xgr_session *xgr_session_clone(const xgr_session *s);
/* Promote exactly process `iter`: it must be waiting, due (nextWakeAt <= now), promotable and
 * within the cap (steps that declare a join bypass it). The dispatch gate applies: a process of a
 * scope closed with kill is aborted instead. Returns 1 promoted (RUN_STEP emitted), 0 aborted by
 * the gate, or XGR_ESTATE (not promotable, nothing changed). */
int xgr_session_promote_iter(xgr_session *s, uint64_t iter, int64_t now, xgr_effects *fx, xgr_error *err);
/* Whether join group `group` closed its join with policy kill (spawn and dispatch gates). */
bool xgr_session_scope_killed(const xgr_session *s, uint32_t group);
/* Whether `step` has a branch that declares a join (such steps bypass the per-session cap). */
bool xgr_session_join_steps_has(const xgr_session *s, unsigned step);
/* ==== end of exploration ===================================================================== */


/* ==== Migration (issue 36, docs/SEMANTICS.md "Migration") =====================================
 * Move a settled session whose steps are all finished (none running: the safe point) from its
 * orchestration OLD to NEW. The one function both the engine (xgr.migrateSessions) and the
 * explorer (xgr migrate-check) use, so they cannot disagree on what a migrated session is.
 *
 * A step map sends each OLD step index to a NEW one (-1: no target): by default the NEW step of
 * the same id, or what a pair (OLD id, NEW id) says. What is rewritten:
 *   - every live process keeps its iter, parent, payload, timer (nextWakeAt), paused flag and
 *     join group, and moves to the mapped step;
 *   - a live join target's join state moves to the NEW join with the same declaring step (mapped)
 *     and branch, or else the NEW join into the target's mapped step; each piece (and fail record)
 *     already in its inbox moves to the NEW `from` entry of its producer's mapped step; closed
 *     joins stay closed with their outcome;
 *   - the counters (next iter, next group), the killed flag and the scopes closed with kill stay.
 * Problems (each one reported, the first also in *err, nothing built): a live process at a step
 * with no target; a join target whose NEW step declares no join into it; a piece whose producer
 * step is not in NEW's `from`, or whose `when` NEW filters differently; an open join that NEW can
 * no longer satisfy in this state while OLD still could. After the rewrite open joins are decided
 * again under NEW (their effects go to fx) and a PROC effect is emitted for every live process. */

/* Called once per problem: path names it (`processes["1:3"].step`), message says what is wrong. */
typedef void (*xgr_migrate_problem_fn)(void *ctx, const char *path, const char *message);

/* Fill map[0..old->nsteps) (the caller's array): same id, then each pair from[i] -> to[i] (ids).
 * Errors (XGR_EINVAL, path `map[i]`): an id that is not a step of OLD / NEW. */
int xgr_migrate_map_build(const xgr_orch *old, const xgr_orch *nw, size_t npairs, const char *const *from,
                          const char *const *to, int *map, xgr_error *err);

/* Build *out (the caller's, xgr_session_free): session s (not changed) migrated to nw (borrowed,
 * must outlive *out) through map. s must have no running process (XGR_ESTATE otherwise). Returns
 * 0, or XGR_EINVAL after reporting every problem to problem (may be NULL). */
int xgr_session_migrate(const xgr_session *s, const xgr_orch *nw, const int *map, int64_t now, xgr_effects *fx,
                        xgr_session **out, xgr_migrate_problem_fn problem, void *ctx, xgr_error *err);
/* ==== end of migration ======================================================================= */

#ifdef __cplusplus
}
#endif
#endif
