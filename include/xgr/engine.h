/* xgr/engine.h — the concurrent engine: many sessions at once, in real time, with real I/O.
 *
 * Every session is one *root actor*, a process of the work-stealing runtime (xgr/runtime.h). The
 * actor owns the session's core (xgr/session.h) — nothing else ever touches it, so joins and
 * inboxes need no lock — and turns the core's effects into work:
 *
 *   RUN_STEP   a TASK yield: the step engine (xgr/rule.h) evaluates the rule on a worker thread;
 *              several steps of one session run at once, up to the per-session cap. A step that
 *              calls APIs hands each HTTP request to the engine's single libcurl multi loop
 *              thread, so waiting on the network never holds a worker.
 *   nextWakeAt timers in per-worker 4-ary min-heaps (O(log n) with a million pending timers),
 *              fired by the workers themselves between actor turns (a timer thread fires what
 *              idle workers leave); a due timer sends the actor a message.
 *   WAKE       internal wake-ups between sessions: messages routed by (owner, rootPid).
 *   PROC,      with a store hook: handed to the store as one batch per actor turn; the batch's
 *   HISTORY    visible effects (steps started, wake-ups sent, events, control replies) wait until
 *              the store says "committed". Without a store (the default) they are immediate.
 *
 * Control calls (kill, pause, resume, wake, inspect) are messages to the actor too; the
 * synchronous functions below wait for its answer. Sessions only meet through messages.
 *
 * Clocks: real time (ms since the engine was created, plus an origin), a scaled clock (real time
 * times a factor: waitSec 3600 passes in 3.6 ms at 10^6) and a stepped virtual clock that jumps to
 * the next timer whenever the whole engine is quiescent — concurrent within an instant, exact in
 * time, used by tests to run the scenario files on the engine.
 *
 * Ordering: by default a session applies step results in the order they complete. With
 * `ordered`, results are applied in the order the steps were promoted (a small reorder buffer per
 * session): process ids, payloads and history are then those of the deterministic driver for the
 * same clock, except what SEMANTICS §3.4 leaves to timing (running producers of a scope closed by
 * a `kill` join finish); a slow step delays the application of later results of its session.
 *
 * Thread safety: every function may be called from any thread that is not one of the engine's
 * own (workers, HTTP loop, timer thread), except where noted; event callbacks run on workers and
 * must not call the synchronous control functions (they would wait for an actor from inside one).
 */
#ifndef XGR_ENGINE_H
#define XGR_ENGINE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xgr/bundle.h"
#include "xgr/error.h"
#include "xgr/rule.h"
#include "xgr/runtime.h"
#include "xgr/session.h"
#include "xgr/value.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xgr_engine xgr_engine;

/* ---- clock ---------------------------------------------------------------------------------- */
typedef enum xgr_clock_kind {
  XGR_CLOCK_REAL = 0,     /* origin_ms + real milliseconds since xgr_engine_new */
  XGR_CLOCK_SCALED = 1,   /* origin_ms + real milliseconds since xgr_engine_new * scale */
  XGR_CLOCK_STEPPED = 2   /* origin_ms + virtual time that only moves when nothing is in flight */
} xgr_clock_kind;

typedef struct xgr_clock_config {
  xgr_clock_kind kind;
  double scale;           /* XGR_CLOCK_SCALED: factor (> 0; 0 means 1) */
  int64_t origin_ms;      /* the clock's value at engine creation (e.g. Unix time for a daemon) */
} xgr_clock_config;

/* ---- snapshots (what the store and subscribers see) ---------------------------------------- */
/* One process's state after a change. Strings and values are borrowed for the callback that
 * receives the snapshot; copy (retain) what you keep. */
typedef struct xgr_engine_proc {
  uint64_t iter, parent_iter;   /* pid = "<rootPid>:<iter>"; parent 0 for the start process */
  uint16_t step;                /* step index; step_id is its name */
  const char *step_id;
  uint8_t status;               /* xgr_proc_status */
  uint8_t abort_reason;         /* xgr_abort_reason */
  bool paused;
  int8_t valid;                 /* -1 none, 0 invalid, 1 valid */
  uint32_t group, from_group;   /* joinGroupId, joinFromGroupId */
  int64_t next_wake_at, created_at, started_at, finished_at;
  xgr_value payload;            /* resumePlain before the step ran, effective payload after */
  const char *error;            /* hard error text or NULL */
  bool is_join;                 /* the process is a join target; then join_closed, join_policy and
                                   join_outcome tell its join's state (cheap: every snapshot has them) */
  bool join_closed;
  uint8_t join_policy;          /* xgr_policy */
  uint8_t join_outcome;         /* xgr_join_outcome */
  const json_t *join;           /* in XGR_EEV_JOIN events only: the decided join as in reports
                                   ({"expect","k","policy","inbox","fail","closed","outcome",
                                   "closedAt"?}); NULL in every other snapshot (building it for each
                                   arrival of a 32-way join was most of a step's cost in xgrd) */
  const char *join_state;       /* in the store's rows only (a store hook is set): the join in the
                                   core's restore form (xgr_session_join_to_json, read back by
                                   xgr_session_restore_proc); NULL in event snapshots */
} xgr_engine_proc;

/* One history row: a step ran (status after the result, outcome, when it began). */
typedef struct xgr_engine_hist {
  uint64_t iter;
  uint16_t step;
  uint8_t status;
  int8_t valid;
  int64_t at;
  const char *api;              /* the step's API calls as JSON text (xgr_effect.api), or NULL */
} xgr_engine_hist;

/* ---- the store hook --------------------------------------------------------------------------- */
/* An internal wake-up this session produced (the outbox row, issue 14): committed with the step
 * result that produced it, sent to its target only after that, removed by the batch of the
 * target that applied or refused it (xgr_store_batch.done), and sent again by
 * xgr_engine_redeliver after a restart while it is still in the outbox. */
typedef struct xgr_engine_wake {
  const char *id;               /* unique (32 hex digits) */
  const char *to_owner;
  uint64_t to_root;
  const char *step;
  const char *caller;           /* the producing session's owner */
  const char *rule;             /* the producing rule's address, or NULL */
  xgr_value payload;
  uint64_t from_iter;           /* the producing process (its iter) and step id: the history row of a */
  const char *from_step;        /* refusal names them (0 / NULL: unknown) */
} xgr_engine_wake;

/* An audit entry of the session (xgr_store_audit in xgr/store.h says what each field holds): a
 * control action or wake-up the batch's changes carry out, written in the same commit. Only for
 * what was applied; strings owned by the actor until the batch is done. */
typedef struct xgr_engine_audit {
  const char *kind;             /* "kill" | "pause" | "resume" | "wake" | "wake-internal" | "wake-refused" */
  const char *actor;            /* signer address, "auth-none", "operator" or the waking session's owner */
  const char *node;             /* the node that applied it */
  const char *permit;           /* hex digest of the permit, or NULL */
  const char *detail;           /* JSON object text, or NULL */
  int64_t session_at;           /* the session clock when applied */
} xgr_engine_audit;

/* A fork's record (xgr.fork; docs/SEMANTICS.md "Retry and fork"), written with the forked session's
 * row in its first commit, so the new session never exists without it: the row's forked_from (JSON
 * text, xgr_store_session.forked_from), the entry "forked" on the new session and the entry "fork" on
 * the session it was forked from (src_owner, src_root; written whoever holds that session's lease).
 * Every string is copied by xgr_engine_start_session. */
typedef struct xgr_engine_fork {
  const char *forked_from;
  xgr_engine_audit forked;
  const char *src_owner;
  uint64_t src_root;
  xgr_engine_audit fork;
} xgr_engine_fork;

/* A grant a step's branch gave (XRC-137 §9 `grants`), written in the commit of the step's result as
 * a session_grants row (xgr_store_grant in xgr/store.h), with an audit entry "grant". Strings
 * owned by the actor until the batch is done. */
typedef struct xgr_engine_grant {
  const char *grantee;          /* lowercased address */
  uint32_t rights;              /* 1 READ, 2 WRITE, 4 MANAGE */
  int64_t expires_at;           /* engine clock ms: when the step's result was applied + the grant's days */
  const char *rule;             /* the step's rule address, or NULL */
  const char *step;             /* the step's id */
} xgr_engine_grant;
/* The days a branch grant lasts without `expireDays` and without the branch's `logExpireDays`. */
#define XGR_ENGINE_DEFAULT_GRANT_DAYS 30u

/* The stored-bytes quotas of a batch (docs/SECURITY.md "Quotas: processes and stored bytes").
 * "Stored bytes" are what the store's translator (xgr_store_changes_add_batch) writes for a
 * batch: the JSON text of every process row's payload, error and join state, of every history
 * row's payload, error and API record, of every outbox row's payload, plus XGR_STORE_ROW_BYTES
 * per row — the same number whatever the backend. A session's count grows with every batch it
 * writes (a row written again counts again) and never shrinks. */
#define XGR_QUOTA_REASON_MAX 192
typedef struct xgr_store_quota {
  uint64_t stored_bytes;        /* in: the session's stored bytes before the batch; out (accepted):
                                   after it — what the store writes into the session's row */
  uint64_t max_bytes;           /* in: the session's quota (0: none) */
  bool abort;                   /* in: the batch replaces one that went over a quota (the session is
                                   aborted in it): accepted whatever its size */
  uint64_t batch_bytes;         /* out: the batch's stored bytes (set by the translator) */
  char reason[XGR_QUOTA_REASON_MAX];  /* out with XGR_ELIMIT: which quota, its value */
} xgr_store_quota;

/* The changes of one session from one actor turn. Everything is borrowed for the submit call. */
typedef struct xgr_store_batch {
  const char *owner;
  uint64_t root_pid;
  const xgr_orch *orch;
  size_t nprocs;
  const xgr_engine_proc *procs; /* in the order the core changed them (one process may repeat) */
  size_t nhist;
  const xgr_engine_hist *hist;
  bool finished;                /* the session ended with this batch */
  xgr_session_result result;    /* when finished */
  size_t nwakes;
  const xgr_engine_wake *wakes; /* outbox rows to write (wake-ups this batch's results produced) */
  size_t ndone;
  const char *const *done;      /* outbox ids this session applied or refused (or, as producer, could
                                   not deliver) */
  const char *const *done_reason; /* per id: NULL applied (the row is removed), else why it was
                                     refused (the row stays as the producer's record of it) */
  /* hibernation: > 0: after this batch the session waits with nothing due before `due` (engine
   * clock ms; INT64_MAX: only a wake-up can move it) and will be evicted — the store records it
   * in its due index (xgr_store_changes_set_due); 0: the session is awake (the store clears it) */
  int64_t due;
  size_t naudit;
  const xgr_engine_audit *audit; /* audit entries (control actions and wake-ups this batch applies) */
  size_t ngrants;
  const xgr_engine_grant *grants; /* branch grants of the step results in this batch */
  /* the steps the session has run so far (what max_session_steps counts); a store hook that keeps
   * it hands it back when the session is loaded again (xgr_engine_start.steps) */
  uint64_t steps;
  /* the session's counters after this batch, as recovery needs them (xgr_session_state) */
  uint64_t next_iter;
  uint32_t next_group;
  bool paused;
  /* the session's first batch (xgr_engine_start.started): its row is inserted only if the store
   * has none — else the whole batch is refused with XGR_ECONFLICT and nothing of it is written */
  bool session_new;
  const char *registry;         /* with session_new: the registry name for the row */
  const char *max_total_gas;    /* with session_new: the permit's maxTotalGas, or NULL */
  const char *bundle_hash;      /* with session_new: the pinned bundle hash, or NULL */
  const xgr_engine_fork *fork;  /* with session_new: the record of the fork it is, or NULL */
  /* The session's stored-bytes count and quota (see xgr_store_quota); NULL: not counted (the
   * session row's count is left as it is). The engine always sets it. */
  xgr_store_quota *quota;
  /* a migration moved the session (xgr_engine_migrate): the row's new orchestration id and hash
   * and bundle hash (xgr_store_changes_pin), written with the rewritten processes; NULL: none */
  const char *pin_ostc_id, *pin_ostc_hash, *pin_bundle_hash;
} xgr_store_batch;

/* Called by the store, from any thread, exactly once per submitted batch that submit() accepted
 * (returned 0 for, or any error but a quota refusal, see below): err 0 = committed,
 * else a negative xgr_errcode. A refused batch stops its session: nothing the batch caused becomes
 * visible (its steps are not dispatched, its wake-ups not sent, its events not delivered, its
 * control calls are answered with err), the session promotes nothing more, results of steps still
 * running are dropped, and subscribers get one XGR_EEV_STORE_ERROR event. A failed store refuses
 * every later batch, so every session stops at its next change; what was committed is what a
 * restart recovers. */
typedef void (*xgr_store_done_fn)(void *token, int err);

/* The interface a store implements. submit() runs on the session's actor (a worker thread) and
 * must not block on I/O: copy the batch, queue it (group commit across sessions is the store's
 * business) and call done(token, err) when it is durable — possibly from inside submit. Batches of
 * one session are submitted one at a time (the next only after the previous one's done), so a
 * store sees each session's changes in order. A session's steps, wake-ups, events and control
 * replies of a batch become visible only after its done. */
/* Quotas: when writing the batch would take the session or its owner over a stored-bytes quota
 * (batch->quota, not abort), submit may refuse it with XGR_ELIMIT and the reason in
 * batch->quota->reason: then nothing of it was queued or written and done is NOT called. The
 * engine then aborts the session and submits, instead, a batch that replaces the refused one:
 * the session killed, its processes' payloads and join states left out, its wake-ups not sent
 * (quota->abort set); submit must accept that one whatever its size. */
typedef struct xgr_store_hook {
  int (*submit)(void *ctx, const xgr_store_batch *batch, xgr_store_done_fn done, void *token);
  void *ctx;
} xgr_store_hook;

/* ---- events (live output) ----------------------------------------------------------------- */
typedef enum xgr_engine_event_kind {
  XGR_EEV_PROC = 0,     /* a process changed: proc */
  XGR_EEV_JOIN,         /* a join was decided: proc is its target (proc->join has the decided join) */
  XGR_EEV_ACTION,       /* a control call was applied (message: what and how it went; ok) */
  XGR_EEV_WAKE,         /* an internal wake-up arrived / could not be delivered (message, ok) */
  XGR_EEV_FINISHED,     /* the session ended (result; message: its name) */
  XGR_EEV_IDLE,         /* nothing runs and no timer is due: only wake-ups can move the session */
  XGR_EEV_STORE_ERROR,  /* the store refused a batch: the session stopped (message; see xgr_store_done_fn) */
  XGR_EEV_STEP          /* a step's result was applied: iter, input (the sanitized input the rule
                           read — `payload` of xgr_validateDataTransfer), output (its outcome payload,
                           the branch's `payload` — `outputPayload` of xgr_validateDataTransfer),
                           rule_action, ok (no hard error); no message. Delivered before the PROC
                           events of the same result, and like them only after the result is committed */
} xgr_engine_event_kind;

typedef struct xgr_engine_event {
  xgr_engine_event_kind kind;
  const char *owner;
  uint64_t root_pid;
  int64_t now;                  /* the session's clock, ms */
  const xgr_orch *orch;
  const xgr_engine_proc *proc;  /* PROC, JOIN */
  const char *message;          /* ACTION, WAKE, FINISHED, STORE_ERROR */
  bool ok;
  xgr_session_result result;    /* FINISHED; also IDLE (running) */
  uint64_t steps;               /* steps the session ran so far */
  uint64_t iter;                /* STEP: the process whose step ran */
  xgr_value input;              /* STEP: the sanitized input (null when the step failed before reading it) */
  xgr_value output;             /* STEP: the outcome payload (null after a hard error or a rule action) */
  uint8_t rule_action;          /* STEP: xgr_rule_action of the result */
  /* STEP, for tracing (src/node/trace.c; only with XGR_EEV_WANT_TRACE): the step's id and rule address (borrowed from the
   * bundle), when its process started running and who spawned it (the core's process), its join
   * group (xgr_engine_proc.group), its API calls as JSON text (xgr_outcome_api_json with the
   * method: [{"name","method","status","ms","url","error"}], or NULL) and its contract reads as JSON text
   * ([{"function","to","error"}], or NULL), the branch taken (valid) */
  const char *step_id;
  const char *rule_address;
  int64_t started_at;
  uint64_t parent_iter;
  uint32_t group;
  const char *api;
  const char *reads;
  bool valid;
  /* WAKE (only with XGR_EEV_WANT_TRACE), an internal wake-up that was applied or refused here: the waking session and the
   * process whose step sent it (from_iter 0: unknown, as for one redelivered after a restart);
   * from_owner NULL for the other WAKE events */
  const char *from_owner;
  uint64_t from_root;
  uint64_t from_iter;
} xgr_engine_event;

/* Called on the session's actor (a worker thread; sessions call concurrently). Everything in ev
 * is borrowed for the call. Must not block and must not call synchronous engine functions. */
typedef void (*xgr_engine_event_fn)(void *ctx, const xgr_engine_event *ev);

/* Executions (XRC-137 §8.3): `submit` is called on the worker once a step's result carries an
 * `execution` (its branch ran, no hard error, no rule action), before the result is applied — so
 * before it is committed. It must make the execution durable under (owner, rootPid, iter), keeping
 * the first one when the same step runs again after a crash, and return without waiting on the
 * network; sending happens elsewhere (src/chain/executor.c). It returns 0 once the execution is
 * durable. When it could not be made durable (its journal unwritable) it returns non-zero with
 * *err filled (path "execution"): the step then becomes a hard error carrying that error, its
 * branch's output is dropped, and nothing is ever sent for it. */
typedef struct xgr_exec_hook {
  int (*submit)(void *ctx, const char *owner, uint64_t root_pid, uint64_t iter, const char *step_id,
                const xgr_execution *x, xgr_error *err);
  void *ctx;
} xgr_exec_hook;

/* ---- configuration -------------------------------------------------------------------------- */
typedef struct xgr_engine_config {
  unsigned workers;                  /* worker threads; 0 = online CPUs */
  uint32_t max_running;              /* per-session cap on running processes; 0 = 32 */
  const xgr_store_hook *store;       /* NULL: memory only (copied at creation) */
  const xgr_api_map_entry *api_map;  /* URL rewriting for API calls (borrowed, must outlive) */
  size_t napi_map;
  const xgr_chain_reader *chain;     /* contract reads; NULL: no backend (borrowed) */
  /* The addresses API calls may connect to (xgr/outbound.h; borrowed, must outlive the engine);
   * NULL: the default policy, which refuses loopback, link-local, private, ... addresses. */
  const xgr_outbound_policy *outbound;
  /* Outbound connections: at most max_outbound API calls (and contract reads) in flight at once
   * in total, and max_outbound_per_owner of one owner's sessions; the others wait in the HTTP
   * loop's queue, holding no socket, and start in turn (owners take turns). 0: the defaults. */
  uint32_t max_outbound;
  uint32_t max_outbound_per_owner;
  const xgr_exec_hook *exec;         /* executions; NULL: resolved only, not sent (borrowed) */
  xgr_clock_config clock;
  bool ordered;                      /* apply results in promotion order (see above) */
  bool keep_finished;                /* keep finished sessions (and their reports) until freed */
  bool measure_latency;              /* keep step latency (ready -> result applied) histograms */
  /* Called exactly once for every xgr_engine_start_session given a bundle directly
   * (xgr_engine_start.bundle): when the session's actor is freed (no part of the engine uses the
   * bundle any more), or before the call returns an error. Lets the caller free bundles of ended
   * sessions (xgrd's bundle cache). NULL: bundles must outlive the engine. From any thread. */
  void (*bundle_done)(void *ctx, const xgr_bundle *b);
  void *bundle_ctx;
  /* Per-session caps: a session with more live (waiting + running) processes than max_live, or
   * that has run more than max_session_steps steps, is killed at the end of that turn; its aborted
   * processes carry the reason as their error ("session aborted: 10001 live processes exceed the
   * cap of 10000 per session") and subscribers get an XGR_EEV_ACTION event with it (ok false).
   * 0: the defaults below. */
  uint64_t max_live;
  uint64_t max_session_steps;
  /* Quotas (docs/SECURITY.md): max_session_bytes, a session's stored bytes (xgr_store_quota; with
   * a store hook that counts them), and max_owner_processes, the live processes of all of one
   * owner's sessions in this engine. A session whose next batch would go over the first, or
   * whose growth takes its owner over the second, is aborted like a capped one (its processes'
   * error: "session aborted: stored bytes 67110912 exceed the quota of 67108864 per session").
   * 0: the defaults below. */
  uint64_t max_session_bytes;
  uint64_t max_owner_processes;
  /* With a store hook: sessions are being restored (xgrd's recovery) until xgr_engine_recovered.
   * Meanwhile an internal wake-up whose target does not run (yet) stays in the outbox, for
   * xgr_engine_redeliver once every session is back; afterwards such a wake-up is refused for
   * good and removed from the outbox. */
  bool recovering;
  /* hibernation of waiting sessions (NULL: every session stays in memory; copied). Needs a
   * store hook; ignored under the stepped clock. */
  const struct xgr_engine_hibernation *hibernate;
  /* With a store hook: the node's name in the audit entries this engine writes (copied; NULL: ""),
   * the node that applied an internal wake-up or a control call that names no node */
  const char *node_name;
} xgr_engine_config;

#define XGR_ENGINE_DEFAULT_MAX_LIVE 10000u
#define XGR_ENGINE_DEFAULT_MAX_SESSION_STEPS 1000000u
#define XGR_ENGINE_DEFAULT_MAX_SESSION_BYTES (256ull << 20)   /* 256 MiB */
#define XGR_ENGINE_DEFAULT_MAX_OWNER_PROCESSES 1000000u
#define XGR_ENGINE_DEFAULT_MAX_OUTBOUND 256u
#define XGR_ENGINE_DEFAULT_MAX_OUTBOUND_PER_OWNER 64u


/* ---- hibernation (src/engine/hibernate.c; docs/RUNTIME.md "Hibernation") -------------------- *
 * A session that waits with nothing due within `after_ms` (or only for wake-ups), whose changes
 * are all committed, is evicted: its actor and core are freed and its registry entry removed; the
 * store holds it, with its next due time in the store's due index (the batch before eviction
 * carries it: xgr_store_batch.due). What stays in memory: nothing. A control call or an internal
 * wake-up for a session the registry does not know calls load(); a thread polls the due index
 * every poll_ms and loads the sessions due within lead_ms, in due order, so their timers fire on
 * time. A session is only evicted when its due time lies beyond what that thread has already
 * looked at, so no timer is missed. */
typedef struct xgr_engine_due_key {
  int64_t due;                  /* engine clock ms */
  char owner[64];
  uint64_t root_pid;
} xgr_engine_due_key;

typedef struct xgr_engine_hibernation {
  int64_t after_ms;             /* the horizon (engine clock ms, >= 0) */
  int64_t lead_ms;              /* load timers this long before they are due (engine clock ms, > 0) */
  long poll_ms;                 /* real ms between polls of the due index (0: 20) */
  /* Load (owner, root_pid) from the store and start it (xgr_engine_start_session with restore and
   * stored_due); 0, XGR_ECONFLICT (it runs already: fine) or XGR_ENOTFOUND (no live session).
   * Called on any thread except the workers, one call per session at a time. */
  int (*load)(void *ctx, const char *owner, uint64_t root_pid, xgr_error *err);
  /* The due index (xgr_store_due): up to max keys after *after with due <= upto, ascending. */
  int (*due)(void *ctx, const xgr_engine_due_key *after, int64_t upto, xgr_engine_due_key *out, size_t max,
             size_t *n);
  void *ctx;
} xgr_engine_hibernation;

/* Create and start an engine (workers, HTTP loop thread, timer thread). curl_global_init is the
 * caller's job, before this call. Returns NULL and fills *err on failure. */
xgr_engine *xgr_engine_new(const xgr_engine_config *cfg, xgr_error *err);

/* Graceful shutdown: stop promoting, let running steps (and their API calls) finish and their
 * results be applied and persisted, then stop every actor and the threads. Sessions stay as they
 * are (not finished). timeout_ms < 0: no limit. Returns 0 or XGR_ETIMEOUT. Idempotent. */
int xgr_engine_shutdown(xgr_engine *e, long timeout_ms);
/* Shut down (if still running, with no limit) and free everything. */
void xgr_engine_free(xgr_engine *e);

/* Subscribe to events. Only before the first session is started (XGR_ESTATE afterwards); at most
 * 8 subscribers. The subscriber gets every event (JOIN events with proc->join). */
int xgr_engine_subscribe(xgr_engine *e, xgr_engine_event_fn fn, void *ctx);

/* What a subscriber wants now: XGR_EEV_WANT(kind) bits, and XGR_EEV_WANT_JOIN_TREE for JOIN events
 * with proc->join (a jansson tree of the whole join: costly). */
#define XGR_EEV_WANT(kind) (1u << (kind))
#define XGR_EEV_WANT_ALL 0xffu              /* every kind */
#define XGR_EEV_WANT_JOIN_TREE (1u << 16)
/* STEP events with their tracing fields (step_id ... valid) and WAKE events with the waking
 * process (from_owner, from_root, from_iter): only when some subscriber asks with this bit (they
 * cost a copy of the step's API record per step); else those fields are zero. */
#define XGR_EEV_WANT_TRACE (1u << 17)
typedef unsigned (*xgr_engine_interest_fn)(void *ctx);

/* Subscribe with an interest (xgr_engine_subscribe's rules). A session's actor asks `interest`
 * once per turn, on a worker (so: cheap, any thread, never blocking), and makes an event only
 * when some subscriber wants its kind; each event goes to the subscribers that wanted it when it
 * was made. Events nobody wants cost nothing: a daemon whose event outputs have no reader does
 * not build a snapshot per process change. interest NULL: xgr_engine_subscribe. */
int xgr_engine_subscribe_interest(xgr_engine *e, xgr_engine_event_fn fn, void *ctx, xgr_engine_interest_fn interest);

/* Register a bundle under a name (its orchestration id when name is NULL). The bundle is borrowed
 * and must outlive the engine. XGR_ECONFLICT when the name is taken. */
int xgr_engine_register(xgr_engine *e, const char *name, const xgr_bundle *b, xgr_error *err);
/* The bundle registered under name, or NULL. */
const xgr_bundle *xgr_engine_bundle(xgr_engine *e, const char *name);

/* ---- sessions ------------------------------------------------------------------------------ */
typedef struct xgr_engine_start {
  const char *bundle_name;      /* a registered bundle ... */
  const xgr_bundle *bundle;     /* ... or one given directly (borrowed; until bundle_done, else must outlive the engine) */
  const char *owner;            /* owner address */
  uint64_t root_pid;            /* > 0; unique per owner among live sessions */
  const char *start;            /* start step id */
  xgr_value payload;            /* start payload (a map or null), borrowed */
  /* The start process's first wake on the engine clock (ms; xgr_session_start_at): it waits until
   * then (init.waitMs). 0, or a time already passed: it runs at once. Ignored with restore. */
  int64_t start_at;
  uint64_t max_steps;           /* stop promoting after this many steps (result "limit"); 0 = none */
  bool record;                  /* keep every process's last state and the history for reports */
  /* Recovery (xgrd): adopt a core rebuilt from the store (xgr_store_restore_session, on
   * bundle->orch) instead of starting one; start and payload are then ignored. The engine owns
   * the core from the call on, also when it fails. restore_fx (may be NULL) holds the effects
   * restoring produced (a pending join decision); they are taken over and the buffer left empty. */
  xgr_session *restore;
  xgr_effects *restore_fx;
  /* A new session (not restore) with a store hook: its actor's first batch carries the session's
   * row (xgr_store_batch.session_new), inserted only if the store has none, together with the
   * start process; nothing of the session becomes visible (its first step is not dispatched) before
   * that batch is committed. started (may be NULL) is then called exactly once, from the thread
   * that completes the commit, with 0, XGR_ECONFLICT (the store holds this session already:
   * nothing was written and the actor leaves without a trace) or the store's error. Without a
   * store hook it is called with 0 once the session has started. It must not block. */
  const char *registry;         /* the registry name recorded on the new row ("" when NULL); copied */
  const char *max_total_gas;    /* the permit's maxTotalGas recorded on the new row (NULL: none); copied */
  const char *bundle_hash;      /* the pinned bundle hash recorded on the new row (NULL: none); copied */
  const xgr_engine_fork *fork;  /* a fork: its record, in the commit of the new row (NULL: none); copied */
  void (*started)(void *ctx, int err);
  void *started_ctx;
  /* With restore: the due time the store holds for the session (xgr_store_session.wake_due; 0:
   * awake). An unchanged session is evicted again without a write. */
  int64_t stored_due;
  /* With restore: the steps the session had run before (xgr_store_batch.steps of its last batch;
   * 0 when unknown, as after a restart): max_session_steps counts on from there, so that eviction
   * and loading do not reset the cap. */
  uint64_t steps;
  /* With restore: the session's stored bytes so far (xgr_store_session.stored_bytes): the
   * max_session_bytes quota counts on from there. */
  uint64_t stored_bytes;
} xgr_engine_start;

/* Hibernation: recovery loaded every session that is awake or due by loaded_upto (engine clock);
 * from now on, sessions are evicted, loaded on demand and loaded before they are due. Before this
 * call no session is evicted and control calls for unknown sessions fail. 0, or XGR_ESTATE
 * without hibernation configured. */
int xgr_engine_hibernation_start(xgr_engine *e, int64_t loaded_upto, xgr_error *err);
/* Make sure (owner, root_pid) is in memory, loading a hibernated session: 0, or XGR_ENOTFOUND. */
int xgr_engine_load(xgr_engine *e, const char *owner, uint64_t root_pid, xgr_error *err);
typedef struct xgr_engine_hib_stats {
  uint64_t evicted, loaded, load_failed, polls;
  uint64_t load_retried;     /* due sessions whose failed load was tried again */
  uint64_t retry_dropped;    /* failed loads not kept for a retry (the bounded list was full) */
} xgr_engine_hib_stats;
void xgr_engine_hib_get_stats(xgr_engine *e, xgr_engine_hib_stats *out);
/* The due poller's horizon: every session due by it that was in the due index when the poller
 * looked is loaded, and no actor evicts itself with a due time by it. Never below now + lead_ms,
 * and never lower than before (the horizon only grows, also when the clock steps back). Whoever
 * makes a session this engine's behind the poller's back (a cluster claim) loads at once what is
 * due by this, read after the session became visible to the poller. */
int64_t xgr_engine_hib_horizon(xgr_engine *e);

/* Start a session: creates its actor and the start process. Returns 0, XGR_ENOTFOUND (bundle or
 * start step), XGR_ECONFLICT (session exists), XGR_ESTATE (shutting down). */
int xgr_engine_start_session(xgr_engine *e, const xgr_engine_start *req, xgr_error *err);

/* Deliver an internal wake-up from the outbox again (xgrd's recovery, with a store hook): the
 * target applies it unless it applied that id already in this run, and removes it from the outbox
 * with its next batch. When the target session does not run here, the refusal is counted and the
 * row is not removed: returns XGR_ENOTFOUND and the caller removes it. Strings are copied. */
void xgr_engine_recovered(xgr_engine *e);   /* see xgr_engine_config.recovering */
int xgr_engine_redeliver(xgr_engine *e, const char *id, const char *from_owner, uint64_t from_root,
                         const char *to_owner, uint64_t to_root, const char *step, const char *rule,
                         xgr_value payload);

/* Cluster nodes (xgrd's outbox poll, docs/CLUSTER.md) deliver rows they read a moment ago while
 * the target may be evicted and loaded again meanwhile: the target is found (or loaded), then
 * pending(ctx, id) must still say the row is in the outbox, then it is sent to that very
 * incarnation — so a row that an earlier incarnation applied (and removed with its last batch) is
 * not applied twice. 0: sent, or no longer pending; XGR_ENOTFOUND: the target does not run here
 * (not counted as refused), or it left before the send (deliver again later). */
int xgr_engine_redeliver_checked(xgr_engine *e, const char *id, const char *from_owner, uint64_t from_root,
                                 const char *to_owner, uint64_t to_root, const char *step, const char *rule,
                                 xgr_value payload, bool (*pending)(void *ctx, const char *id), void *ctx);

/* Control calls. owner NULL matches any owner (the first session with that rootPid). iter 0 means
 * the whole session (kill, pause, resume). They wait for the actor's answer: 0 or the core's error
 * (XGR_ENOTFOUND when no such live session). caller NULL: the owner. */
int xgr_engine_kill(xgr_engine *e, const char *owner, uint64_t root_pid, uint64_t iter, xgr_error *err);
int xgr_engine_pause(xgr_engine *e, const char *owner, uint64_t root_pid, uint64_t iter, bool pause,
                     xgr_error *err);
int xgr_engine_wake_pid(xgr_engine *e, const char *owner, uint64_t root_pid, uint64_t iter, const char *caller,
                        xgr_value payload, xgr_error *err);
int xgr_engine_wake_step(xgr_engine *e, const char *owner, uint64_t root_pid, const char *step,
                         const char *caller, xgr_value payload, size_t *woken, xgr_error *err);

/* The same as one asynchronous request: done(ctx, rc, message) is called once, on the actor's
 * thread (or on the calling thread when the session does not exist). With label set the action
 * is also recorded in the session's report ("actions": at, action = label, ok, message). */
typedef enum xgr_engine_ctl_kind {
  XGR_CTL_KILL = 0, XGR_CTL_PAUSE, XGR_CTL_RESUME, XGR_CTL_WAKE_PID, XGR_CTL_WAKE_STEP,
  XGR_CTL_DROP,                 /* cluster: leave memory without writing (see xgr_engine_drop) */
  XGR_CTL_RETRY,                /* run aborted process iter's step again (xgr_session_retry) */
  XGR_CTL_MIGRATE               /* move the session to another bundle (issue 36; xgr_engine_migrate) */
} xgr_engine_ctl_kind;

typedef struct xgr_engine_ctl {
  xgr_engine_ctl_kind kind;
  const char *owner;            /* NULL: any */
  uint64_t root_pid;
  uint64_t iter;
  const char *step;             /* WAKE_STEP */
  const char *caller;           /* WAKE_*; NULL: the owner */
  xgr_value payload;            /* WAKE_*: map or null, borrowed; RETRY: the payload to run with
                                   (null: the process's last input payload) */
  const xgr_retry_of *retry_of; /* RETRY: the aborted process's last stored state (copied, its payload
                                   retained); NULL: taken from the session's records (cfg.record) */
  const char *label;            /* recorded in the report when set */
  /* the audit trail (with a store hook): when actor is set, the action, once applied, writes an
   * audit entry (xgr_engine_audit) in the same commit as its changes; a refused one writes none */
  const char *actor;            /* who: a permit's signer, "auth-none", "operator"; NULL: no entry */
  const char *permit;           /* hex digest of the permit used, or NULL */
  const char *node;             /* the node the call came through (NULL: xgr_engine_config.node_name) */
  const char *batch;            /* the batch operation it is part of (its id, in the entry's detail), or NULL */
  /* XGR_CTL_MIGRATE (use xgr_engine_migrate): the bundle NEW (borrowed for the call; when the
   * session moved, the session holds it from then on, and the engine reports it through
   * bundle_done when the session is freed, like a started session's bundle), NEW's pinned bundle
   * hash for the session's row, the step map (OLD id -> NEW id pairs), force (migrate even when
   * the check finds it unsafe), and where the check's verdict goes (a new reference; the caller
   * waits for the answer) */
  const xgr_bundle *bundle;
  const char *bundle_hash;
  const char *from_bundle_hash; /* the bundle hash the session's row pins now (for the audit entry) */
  size_t nmap;
  const char *const *map_from;
  const char *const *map_to;
  bool force;
  bool dry;                     /* check at the safe point and answer, change nothing */
  json_t **verdict;
} xgr_engine_ctl;

typedef void (*xgr_engine_ctl_done_fn)(void *ctx, int rc, const char *message);
int xgr_engine_control(xgr_engine *e, const xgr_engine_ctl *c, xgr_engine_ctl_done_fn done, void *ctx);
/* xgr_engine_control, waiting for the actor's answer: 0 or its error in *err. *woken (may be
 * NULL) gets how many processes a wake woke (1 for a PID-mode wake that worked); for a retry, the
 * iter of the new process. */
int xgr_engine_control_sync(xgr_engine *e, const xgr_engine_ctl *c, size_t *woken, xgr_error *err);

/* Migration (issue 36; docs/SEMANTICS.md "Migration"): move session (c->owner, c->root_pid) to
 * c->bundle at its safe point. The actor holds the session (no new step is dispatched) until none
 * of its steps runs, then checks the migration on the state it has then (xgr/migrate.h: static
 * problems, exploration of OLD against NEW) and, when it is safe or c->force, rewrites its
 * processes, join groups and inboxes with xgr_session_migrate and writes them, the row's new pin
 * (orchestration id and hash, bundle hash) and an audit entry "migrate" (c->actor; detail: old,
 * new, map, forced, safe) in one batch: one commit, so a crash leaves the session entirely on OLD
 * or entirely on NEW. The hold ends with the answer. *c->verdict gets the check's verdict.
 * Returns 0 (moved), XGR_ECONFLICT (unsafe, not forced: nothing changed), XGR_EINVAL (a static
 * problem or a map naming an unknown step: nothing changed), XGR_ENOTFOUND / XGR_ESTATE. */
int xgr_engine_migrate(xgr_engine *e, const xgr_engine_ctl *c, xgr_error *err);

/* Cluster (docs/CLUSTER.md): the session's lease went to another node. Asynchronous: the actor
 * drops every effect not yet visible (its uncommitted batch, steps to dispatch, wake-ups to send,
 * control replies, answered with XGR_ELEASE), leaves the registry at once and closes; results of
 * steps still running are dropped when they come back. Nothing is written. The same happens when
 * the store refuses a batch with XGR_ELEASE. 0, or XGR_ENOTFOUND when the session is not here. */
int xgr_engine_drop(xgr_engine *e, const char *owner, uint64_t root_pid);

/* Run fn(ctx, now) on the timer thread when the engine clock reaches at_ms (at once if it has).
 * fn must not block; it typically issues xgr_engine_control calls. Timers of equal time run in
 * the order they were scheduled; xgr_engine_wait and xgr_engine_wait_all wait for them too. */
int xgr_engine_at(xgr_engine *e, int64_t at_ms, void (*fn)(void *ctx, int64_t now), void *ctx);

/* Schedule the timed control actions of `xgr run --script` (the format of xgr_driver_add_script:
 *   [{"at":5000,"wake":{"pid":"1:3"}|{"step":"E1"},"payload":{...},"caller":"0x..."},
 *    {"at":0,"kill":"1"|"1:4"}, {"at":0,"pause":"1:2"}, {"at":10,"resume":"1:2"|"1"}])
 * at base_ms + "at" on the engine clock. Kill, pause, resume and PID wakes go to the session of
 * the rootPid they name; a step-mode wake to `root_pid` unless "session": rootPid says otherwise.
 * Each action is recorded in its session's report with its compact JSON text as "action".
 * Nothing is scheduled when an entry is invalid (*err names it: "[2].at"). Schedule a script
 * before starting its session so that actions due at the same time as a timer go first, as in
 * the deterministic driver. */
int xgr_engine_add_script(xgr_engine *e, uint64_t root_pid, const json_t *script, int64_t base_ms, xgr_error *err);

/* Stepped clock only: while held (a counter: every hold needs a release), virtual time does not
 * move. Hold it while starting sessions and scheduling their scripts so that they all begin at
 * the same instant. No effect on the other clocks. */
void xgr_engine_hold_clock(xgr_engine *e, bool hold);

/* ---- inspection ------------------------------------------------------------------------------- */
typedef struct xgr_engine_session_info {
  char owner[64];
  uint64_t root_pid;
  xgr_session_result result;    /* RUNNING while live */
  bool finished, idle;
  size_t live, running;         /* processes (at the last actor turn) */
  uint64_t steps;
  int64_t now;                  /* the session clock at the last actor turn */
} xgr_engine_session_info;

/* Snapshot of up to max sessions (live, and finished ones kept by keep_finished) into out;
 * returns how many exist in total. */
size_t xgr_engine_list(xgr_engine *e, xgr_engine_session_info *out, size_t max);

/* One session's info. Returns 0 or XGR_ENOTFOUND. */
int xgr_engine_session(xgr_engine *e, const char *owner, uint64_t root_pid, xgr_engine_session_info *out);

/* The report of a session, a new jansson reference, in the shape of xgr_driver_report
 * (`xgr run --json`): {"result","session":{...},"processes":[...],"history":[...],"actions":[...],
 * "steps","clockMs"}. Needs record for the full history and the terminal processes; without it,
 * "processes" lists the live processes only and "history" is empty. A live session answers
 * through its actor (result "running"). NULL with *err when there is no such session. */
json_t *xgr_engine_report(xgr_engine *e, const char *owner, uint64_t root_pid, xgr_error *err);

/* Wait until the session is finished or idle (no running step, no due timer) and no xgr_engine_at
 * callback is pending, at most timeout_ms (< 0: forever). Returns 0 (finished), 1 (idle: with
 * nothing else to come it is stalled, or stopped at its step limit), XGR_ETIMEOUT, XGR_ENOTFOUND. */
int xgr_engine_wait(xgr_engine *e, const char *owner, uint64_t root_pid, long timeout_ms);

/* Wait until every session is finished or idle and nothing is in flight. Returns 0 or XGR_ETIMEOUT. */
int xgr_engine_wait_all(xgr_engine *e, long timeout_ms);

/* ---- counters --------------------------------------------------------------------------------- */
typedef struct xgr_engine_stats {
  uint64_t sessions_started, sessions_finished;
  uint64_t steps;                    /* step results applied */
  uint64_t http_requests;
  uint64_t timers_fired;
  uint64_t store_batches;
  uint64_t sessions_capped;          /* sessions killed by max_live / max_session_steps */
  uint64_t sessions_over_quota;      /* sessions aborted by a quota (stored bytes, owner's processes) */
  uint64_t wakeups_refused;          /* internal wake-ups not applied: no such session, not allowed, no such step */
  uint64_t outbound_refused;         /* API calls the outbound policy refused (XGR_EPERM) */
  uint64_t outbound_in_flight;       /* HTTP requests with a connection now (<= max_outbound) */
  uint64_t outbound_waiting;         /* HTTP requests waiting for a slot under the caps now */
  /* step latency (ready -> result applied) in ns, when measure_latency; 0 otherwise */
  uint64_t lat_count, lat_p50_ns, lat_p99_ns, lat_max_ns;
  xgr_rt_counters runtime;           /* the work-stealing runtime's counters (steals, parks, ...) */
} xgr_engine_stats;

void xgr_engine_get_stats(xgr_engine *e, xgr_engine_stats *out);
/* Forget the latency samples gathered so far (e.g. after a warm-up). */
void xgr_engine_reset_latency(xgr_engine *e);

/* The live processes of all of owner's sessions in this engine (what max_owner_processes counts;
 * updated at the end of each actor turn). */
uint64_t xgr_engine_owner_live(xgr_engine *e, const char *owner);

/* The engine clock now, ms. */
int64_t xgr_engine_now(xgr_engine *e);

#ifdef __cplusplus
}
#endif
#endif
