/* xgr/runtime.h — the work-stealing runtime (seed 002): processes, events, yields, workers.
 *
 * A *process* is a small state machine driven by events. The runtime calls its step() with a
 * batch of events (yield completions, messages, a cancel at shutdown); step() writes its status
 * and the *yields* it wants performed (commands with a type and a correlation tag) into an
 * xgr_step_out. Commands go to the handler registered for their type, which runs inline on the
 * worker, as a task on the worker pool, or on the handler's own threads for blocking work; a
 * handler reports the outcome with xgr_rt_complete_yield(), which comes back to the process as an
 * event carrying the same tag. Processes talk to each other with xgr_rt_send(pid, ...).
 *
 * Threads: a fixed set of worker threads (default: one per CPU), each with a Chase-Lev deque,
 * plus a global FIFO for submissions from outside. A process is stepped by at most one worker at
 * a time, and its events are delivered in the order each producer sent them. See docs/RUNTIME.md.
 *
 * Lifecycle of a runtime:
 *   xgr_rt_new -> xgr_rt_register_handler* -> xgr_rt_start -> spawn/send/... ->
 *   xgr_rt_shutdown(timeout) -> xgr_rt_free
 *
 * Lifecycle of a process:
 *   spawn: init() is called synchronously by the spawning thread; if it fails, close() is called
 *   and spawn returns the error. Then step() runs on workers until it reports XGR_STEP_COMPLETE
 *   (or returns an error). Afterwards, events that still arrive for it are handed to discard()
 *   (if set) and close() is called exactly once, on whichever thread drops the last reference.
 *
 * Errors are the negative xgr_errcode values of xgr/error.h.
 */
#ifndef XGR_RUNTIME_H
#define XGR_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xgr/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xgr_rt xgr_rt;        /* the runtime context: owns workers, registry, handlers */
typedef struct xgr_worker xgr_worker; /* one worker thread (opaque) */

/* A process id: slot index in the low 32 bits, slot generation in the high 32 bits, so a stale
 * pid of a finished process never reaches the slot's next occupant. 0 is never a valid pid. */
typedef uint64_t xgr_pid;

/* ---- events --------------------------------------------------------------------------------- */
typedef enum xgr_event_type {
  XGR_EV_YIELD = 1,   /* completion of a yield: tag = the command's tag, data/err = its outcome */
  XGR_EV_MESSAGE = 2, /* a message: from = sender pid (0 if sent from outside), tag/data = its content */
  XGR_EV_CANCEL = 3,  /* shutdown: the process should finish (report XGR_STEP_COMPLETE) soon */
} xgr_event_type;

/* One event as step() sees it. The array passed to step() belongs to the runtime and is valid only
 * during the call; each event's `data` belongs to the process from then on (step frees or keeps it). */
typedef struct xgr_event {
  xgr_event_type type;
  int err;        /* XGR_EV_YIELD: 0 or a negative xgr_errcode reported by the handler */
  uint64_t tag;   /* correlation tag of the yield, or the sender's tag of a message */
  xgr_pid from;   /* XGR_EV_MESSAGE: the sending process, 0 when sent from a non-process thread */
  void *data;     /* payload; ownership passes to the receiving process */
} xgr_event;

/* ---- step output ------------------------------------------------------------------------------ */
typedef enum xgr_step_status {
  XGR_STEP_IDLE = 0,     /* wait for any event (message, yield completion, cancel) */
  XGR_STEP_BLOCKED = 1,  /* wait for a yield completion (or cancel); messages queue meanwhile and
                            are delivered with the next batch */
  XGR_STEP_COMPLETE = 2, /* finished: the process is removed and closed */
  XGR_STEP_READY = 3,    /* run me again soon (cooperative time slicing of long work) */
} xgr_step_status;

/* A command (yield). `arg` passes to the handler, which owns it from dispatch on. */
typedef struct xgr_cmd {
  uint32_t type;  /* selects the handler (0 .. XGR_RT_MAX_CMD_TYPES-1) */
  uint64_t tag;   /* chosen by the process; comes back in the XGR_EV_YIELD event */
  void *arg;
} xgr_cmd;

/* What step() reports. Owned by the runtime (one per worker, reused); step() sets `status` and
 * appends commands with xgr_step_yield(). */
typedef struct xgr_step_out {
  xgr_step_status status; /* preset to XGR_STEP_IDLE before each step */
  xgr_cmd *cmds;          /* commands appended by xgr_step_yield, dispatched after step returns */
  size_t ncmds, cap;
} xgr_step_out;

/* Append a command to the step output. Returns 0 or XGR_ENOMEM (then `arg` stays with the caller). */
int xgr_step_yield(xgr_step_out *out, uint32_t type, uint64_t tag, void *arg);

/* ---- processes ------------------------------------------------------------------------------- */
/* The context a process (or a handler running on a worker) gets: which runtime, which process,
 * and on which worker it runs. Valid during the call that received it. Calls made with a context
 * (xgr_ctx_spawn, xgr_ctx_send) push work onto the calling worker's own deque. */
typedef struct xgr_ctx {
  xgr_rt *rt;
  xgr_pid self;        /* the process being initialised or stepped; 0 in handlers */
  xgr_worker *worker;  /* NULL when called from a thread that is not a worker */
} xgr_ctx;

/* The process interface (a vtable, usually static const). `self` is the process object. */
typedef struct xgr_process_vt {
  const char *name; /* for diagnostics */
  /* Bytes of zeroed per-process state the runtime allocates and passes as `self` when spawn is
   * given self == NULL (freed by the runtime after close). 0: the caller always provides self. */
  size_t state_size;
  /* Prepare the process for entry point `method` with `input` (both owned by the caller; copy
   * what must outlive the call). Runs on the spawning thread before the process is scheduled.
   * Return 0, or a negative xgr_errcode and fill *err (close() is still called). May be NULL. */
  int (*init)(void *self, const xgr_ctx *ctx, const char *method, void *input, xgr_error *err);
  /* Advance with n events (n may be 0 on the first step). Set out->status and append yields.
   * A non-zero return ends the process as if it reported XGR_STEP_COMPLETE (counted as failed). */
  int (*step)(void *self, const xgr_ctx *ctx, const xgr_event *events, size_t n, xgr_step_out *out);
  /* Release the process's resources. Called exactly once, after the last step (or a failed init).
   * May run on any thread. May be NULL. */
  void (*close)(void *self);
  /* Receives events that arrive after the process completed, so their data can be freed; called
   * before close(). May be NULL (then such data is dropped without a call). */
  void (*discard)(void *self, xgr_event *ev);
} xgr_process_vt;

/* ---- handlers --------------------------------------------------------------------------------- */
typedef enum xgr_handler_mode {
  XGR_HANDLER_INLINE = 0, /* run() is called on the worker right after the step: must not block
                             (e.g. hand the command to an event loop thread the handler owns) */
  XGR_HANDLER_TASK = 1,   /* run() is scheduled as a task on the worker pool (stealable): CPU work
                             that should run in parallel, e.g. step evaluations */
  XGR_HANDLER_THREAD = 2, /* run() is called on one of the handler's own `threads` threads, which
                             the runtime starts and joins: blocking work */
} xgr_handler_mode;

typedef struct xgr_handler {
  const char *name;
  xgr_handler_mode mode;
  unsigned threads; /* XGR_HANDLER_THREAD: number of threads (0 means 1) */
  /* Perform the command for process `pid`. The handler owns cmd->arg and must eventually call
   * xgr_rt_complete_yield(rt, pid, cmd->tag, ...) exactly once, from any thread (here or later).
   * ctx->worker is NULL on handler threads. */
  void (*run)(void *hctx, const xgr_ctx *ctx, xgr_pid pid, const xgr_cmd *cmd);
  /* Called instead of run() for commands still queued when the runtime shuts down, so cmd->arg
   * can be freed. May be NULL. */
  void (*drop)(void *hctx, xgr_pid pid, const xgr_cmd *cmd);
  void *hctx; /* handler state, owned by the caller; must outlive the runtime */
} xgr_handler;

/* ---- the runtime ------------------------------------------------------------------------------ */
#define XGR_RT_MAX_CMD_TYPES 64

typedef struct xgr_rt_config {
  unsigned workers;       /* worker threads; 0 = number of online CPUs */
  unsigned max_batch;     /* events per step at most; 0 = 256 */
  unsigned global_batch;  /* extra items moved from the global queue to a deque; 0 = 16 */
  unsigned spin_tight;    /* idle rounds spun with a pause instruction; 0 = 4 */
  unsigned spin_yield;    /* idle rounds (in total) before parking, yielding meanwhile; 0 = 16 */
  uint64_t seed;          /* seed of the victim choice; 0 = a fixed default */
  /* A worker runs the newest item of its own deque first (depth first). With fair set, every
   * 1024th pick takes its oldest instead, so no process waits forever behind others that keep
   * pushing work (actor workloads: the engine sets it); unset, fork-join trees keep the memory
   * bound of strict depth-first order. Work from outside (the global queue) is served when a
   * deque runs dry, and every 1024th pick either way. */
  bool fair;
  /* Called on a worker that found no work, once per idle round; `parking` is set on the round
   * after which the worker parks unless work appears. Return true when the hook made work (the
   * worker looks again at once). Runs on the worker (ctx->self is 0); may use xgr_ctx_send.
   * May be NULL. */
  bool (*idle)(void *idle_ctx, const xgr_ctx *ctx, bool parking);
  void *idle_ctx;
} xgr_rt_config;

/* Create a runtime (threads are not started yet). cfg may be NULL for defaults. Returns NULL when
 * out of memory. The caller owns the result and frees it with xgr_rt_free. */
xgr_rt *xgr_rt_new(const xgr_rt_config *cfg);

/* Register the handler for command type `type` (copied). Only before xgr_rt_start.
 * Returns 0, XGR_EINVAL (type out of range, no run function) or XGR_ESTATE (already started). */
int xgr_rt_register_handler(xgr_rt *rt, uint32_t type, const xgr_handler *h);

/* Start the workers and the handler threads. Returns 0, XGR_ESTATE or XGR_ENOMEM. */
int xgr_rt_start(xgr_rt *rt, xgr_error *err);

/* Number of worker threads. */
unsigned xgr_rt_workers(const xgr_rt *rt);

/* Spawn a process from any thread: call vt->init, then schedule its first step (via the global
 * queue). `self` is the process object (NULL: the runtime allocates vt->state_size zeroed bytes).
 * A caller-provided self must stay valid until vt->close. On success *pid (if not NULL) is set.
 * Returns 0, the error of init, XGR_ESTATE (shutting down) or XGR_ENOMEM. */
int xgr_rt_spawn(xgr_rt *rt, const xgr_process_vt *vt, void *self, const char *method, void *input,
                 xgr_pid *pid, xgr_error *err);
/* The same from inside a step or handler on a worker: the child goes onto this worker's deque. */
int xgr_ctx_spawn(const xgr_ctx *ctx, const xgr_process_vt *vt, void *self, const char *method,
                  void *input, xgr_pid *pid, xgr_error *err);

/* Send a message (tag, data) to process `to`. On success the data belongs to the receiver (or to
 * its discard hook if it completes first). Returns 0, or XGR_ENOTFOUND when no such live process
 * exists (the data then stays with the caller), XGR_ENOMEM. Callable from any thread. */
int xgr_rt_send(xgr_rt *rt, xgr_pid to, uint64_t tag, void *data);
/* The same from inside a step on a worker: the sender's pid is recorded and a woken receiver
 * goes onto this worker's deque. */
int xgr_ctx_send(const xgr_ctx *ctx, xgr_pid to, uint64_t tag, void *data);

/* Items waiting on the calling worker's own deque (a snapshot; 0 off the workers). A hint for
 * callers deciding how much work to release at once: the engine fires due timers only while its
 * worker's deque is short, so sessions wait in its timer heap, not on a deque, and stay put. */
size_t xgr_ctx_queued(const xgr_ctx *ctx);

/* Report the outcome of a yield of process `pid`: err = 0 or a negative xgr_errcode, data passes
 * to the process. Wakes the process if it is Blocked or Idle. Callable from any thread. Returns 0,
 * XGR_ENOTFOUND (process gone: data stays with the caller) or XGR_ENOMEM. */
int xgr_rt_complete_yield(xgr_rt *rt, xgr_pid pid, uint64_t tag, void *data, int err);
/* The same from a handler running on a worker (mode INLINE or TASK), using its ctx. */
int xgr_ctx_complete_yield(const xgr_ctx *ctx, xgr_pid pid, uint64_t tag, void *data, int err);

/* Wait until no process is live (every spawned process completed), at most timeout_ms
 * (negative: forever). Returns 0 or XGR_ETIMEOUT. Do not call from a worker. */
int xgr_rt_wait_idle(xgr_rt *rt, long timeout_ms);

/* Number of live processes (spawned, not yet completed); a snapshot. */
uint64_t xgr_rt_live(const xgr_rt *rt);

/* Shut down: refuse new spawns, send XGR_EV_CANCEL to every live process, wait up to timeout_ms
 * for them to complete, then stop and join workers and handler threads (queued handler commands
 * go to their drop hook). Returns 0 when every process completed, XGR_ETIMEOUT otherwise (the
 * remaining processes are closed by xgr_rt_free). Call once, not from a worker. */
int xgr_rt_shutdown(xgr_rt *rt, long timeout_ms);

/* Free the runtime (calls xgr_rt_shutdown(rt, 0) if it is still running): remaining processes get
 * their pending events discarded and are closed. */
void xgr_rt_free(xgr_rt *rt);

/* ---- counters --------------------------------------------------------------------------------- */
/* Sums over all workers; each value is monotonic, the set is not one atomic snapshot. */
typedef struct xgr_rt_counters {
  uint64_t spawned, completed, failed; /* processes */
  uint64_t steps, events;              /* step() calls, events delivered */
  uint64_t messages, yields, completions; /* sends accepted, commands dispatched, completions accepted */
  uint64_t tasks;                      /* XGR_HANDLER_TASK runs */
  uint64_t steals, stolen;             /* successful steal operations, items they moved */
  uint64_t global_batches, global_items; /* takes from the global queue, items they moved */
  uint64_t spins, yields_os, parks, wakeups; /* idle rounds spun, sched_yields, parks, wake calls */
} xgr_rt_counters;

void xgr_rt_get_counters(const xgr_rt *rt, xgr_rt_counters *out);

#ifdef __cplusplus
}
#endif
#endif
