/* engine_impl.h — private structures of the concurrent engine (src/engine), shared by its files:
 *
 *   engine.c   the public API: configuration, the session registry (sharded hash table keyed by
 *              (owner, rootPid)), control calls as messages, waiting, counters, shutdown;
 *   actor.c    the root actor of one session: a runtime process that owns the session core;
 *   timer.c    the engine clock, per-worker timer heaps (4-ary) and the timer thread;
 *   http.c     the libcurl multi loop thread that performs the API calls of steps;
 *
 * Nothing here is public; see include/xgr/engine.h for the contracts.
 */
#ifndef XGR_ENGINE_IMPL_H
#define XGR_ENGINE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "xgr/engine.h"
#include "xgr/records.h"
#include "xgr/runtime.h"
#include "util/hashmap.h"

/* Runtime command types. */
enum { CMD_STEP = 1 };

/* Message / yield tags the actor understands. Step yields use the process iter as their tag
 * (iters start at 1), so the special tags live at the top of the range. */
#define TAG_STORE UINT64_MAX           /* yield: a store batch was committed */
enum msg_kind { MSG_TIMER = 1, MSG_CTL, MSG_IWAKE, MSG_REPORT, MSG_INFO };

/* ---- clock and timers (timer.c) ------------------------------------------------------------ */
typedef struct timer_ent {
  int64_t at;
  uint64_t seq;                 /* ties: scheduling order; bit 63 set: cb is a callback */
  uint64_t target;              /* actor pid, or (uintptr_t) of an at_cb */
} timer_ent;

typedef struct at_cb {
  void (*fn)(void *ctx, int64_t now);
  void *ctx;
} at_cb;

/* One worker's slot (real and scaled clocks): its timer heap and counters. Actor timers armed on a
 * worker go to that worker's heap; the worker fires what is due at the end of its actor turns
 * (and a neighbour's heap when none of its own is due); the timer thread only fires entries that
 * stayed overdue for a grace period after a worker last looked (the workers are parked or busy
 * with long steps). `mu` is taken by the owner, a neighbour and the timer thread, so it is almost
 * never contended; `min` publishes the earliest deadline without it. */
typedef struct wtimers {
  _Alignas(64) pthread_mutex_t mu;
  timer_ent *heap;              /* 4-ary heap (under mu) */
  size_t n, cap;
  uint64_t seq;                 /* ties: arming order (under mu) */
  _Atomic int64_t min;          /* heap[0].at, INT64_MAX when empty (written under mu) */
  _Atomic uint64_t fired;       /* timers fired from this heap (written under mu) */
  _Atomic uint64_t polled_ns;   /* when a worker last looked at this heap (monotonic ns) */
  _Atomic uint64_t steps;       /* step results applied on this worker (written by it only) */
} wtimers;

typedef struct timers {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  timer_ent *in;                /* incoming entries (under mu) */
  size_t nin, capin;
  timer_ent *heap;              /* the 4-ary heap (timer thread only) */
  size_t n, cap;
  uint64_t seq;                 /* under mu */
  _Atomic int64_t sleep_until;  /* the deadline the thread sleeps towards (INT64_MAX: none) */
  _Atomic int64_t cb_min;       /* earliest central entry (callbacks) not yet run; INT64_MAX: none */
  bool stop;                    /* under mu */
  pthread_t th;
  bool started;
  /* per-worker heaps (not under the stepped clock); owners[i] is the worker of w[i], claimed by
   * the worker on its first arm (compare-and-swap from NULL) */
  wtimers *w;
  _Atomic(const xgr_worker *) *owners;
  unsigned nw;
} timers;

/* 4-ary heap primitives (exposed for the unit test). */
void xgr_eng_heap_push(timer_ent **heap, size_t *n, size_t *cap, timer_ent e);
timer_ent xgr_eng_heap_pop(timer_ent *heap, size_t *n);

/* ---- HTTP loop (http.c) -------------------------------------------------------------------- */
typedef struct job job;
typedef struct http_loop http_loop;
http_loop *xgr_eng_http_new(xgr_engine *e);
int xgr_eng_http_start(http_loop *h, xgr_error *err);
void xgr_eng_http_submit(http_loop *h, job *j);      /* j->st has a pending request */
void xgr_eng_http_free(http_loop *h);                /* stops the thread */

/* ---- jobs: one step evaluation in flight ---------------------------------------------------- */
enum job_phase { JOB_NEW = 0, JOB_HTTP, JOB_FINISH, JOB_DONE };

struct job {
  job *next;                    /* HTTP queue / actor free list */
  struct actor *a;              /* read-only fields only (bundle, owner, root, engine) */
  xgr_pid apid;
  uint64_t iter, seq;
  unsigned step;
  int phase;
  xgr_value payload;
  xgr_step_state *st;
  void *x;                      /* HTTP exchange while in the loop */
  uint64_t t_ready;             /* monotonic ns when the step was promoted */
  xgr_step_ctx sctx;
  char pid[32];
  xgr_step_result res;
};

/* ---- latency histogram ---------------------------------------------------------------------- */
#define LAT_SUB 8
#define LAT_OCT 28
typedef struct lat_hist {
  uint32_t b[LAT_OCT * LAT_SUB];
  uint64_t count, max;
} lat_hist;
void xgr_eng_lat_add(lat_hist *h, uint64_t ns);
void xgr_eng_lat_merge(lat_hist *into, const lat_hist *h);
uint64_t xgr_eng_lat_quantile(const lat_hist *h, double q);

/* ---- records: xgr/records.h (shared with the deterministic driver) --------------------------- */

/* ---- session registry entry ------------------------------------------------------------------ */
typedef struct sess_entry {
  char owner[64];
  uint64_t root;
  xgr_pid pid;                  /* 0 while starting */
  /* info: written by the actor at the end of each turn under mu alone (the entry is its own, so
   * the two workers never share this lock's cache line); readers hold the shard lock (the entry
   * stays alive) and then mu — xgr_eng_info() */
  pthread_mutex_t mu;
  xgr_engine_session_info info;
  json_t *report;               /* final report (record + keep_finished) */
  bool gone;                    /* the actor closed */
} sess_entry;

#define NSHARDS 64
typedef struct shard {
  pthread_mutex_t mu;
  xgr_hashmap tab;              /* sess_entry by rootPid (util/hashmap.h, hashed mode) */
} shard;

/* ---- per-owner live processes (engine.c; xgr_engine_config.max_owner_processes) ------------- */
/* One owner's count of live processes over its sessions' actors here. An actor holds a reference
 * from its creation to its end and adds the change of its own live count at the end of each turn
 * (xgr_eng_owner_add); the entry goes when its last actor does. */
typedef struct owner_live {
  char owner[64];
  _Atomic int64_t live;
  long refs;                    /* under the owner shard's lock */
} owner_live;

owner_live *xgr_eng_owner_ref(xgr_engine *e, const char *owner);
/* Subtract the actor's last count (counted) and drop its reference. */
void xgr_eng_owner_unref(xgr_engine *e, owner_live *o, int64_t counted);

/* ---- the engine ------------------------------------------------------------------------------ */
/* ---- hibernation (hibernate.c) --------------------------------------------------------------- */
typedef struct hib_item {
  struct hib_item *next;
  int kind;                     /* MSG_CTL or MSG_IWAKE */
  char owner[64];
  uint64_t root;
  void *msg;                    /* ctl_msg / iwake_msg (owned) */
} hib_item;

typedef struct hib_state {
  bool configured;              /* cfg is set (a store hook, not the stepped clock) */
  _Atomic bool on;              /* xgr_engine_hibernation_start was called */
  xgr_engine_hibernation cfg;
  pthread_mutex_t mu;           /* guards upto (and orders evictions against polls), queue, stop */
  pthread_cond_t cv;
  int64_t upto;                 /* the poller has looked at due times up to here */
  hib_item *head, *tail;
  bool stop;
  pthread_t th;
  bool started;
  xgr_engine_due_key cursor;    /* poller thread only */
  /* due sessions whose load failed (not "no such session"): tried again with a growing delay,
   * since the cursor has passed them (poller thread only; at most HIB_RETRY_MAX) */
  struct hib_retry {
    xgr_engine_due_key key;
    int64_t at_ms, delay_ms;    /* monotonic ms of the next try; the delay after it */
  } *retry;
  size_t nretry;
  _Atomic uint64_t load_retried, retry_dropped;
  pthread_mutex_t load_mu[64];  /* one load per session at a time (striped by rootPid) */
  _Atomic uint64_t evicted, loaded, load_failed, polls;
} hib_state;

struct xgr_engine {
  xgr_engine_config cfg;
  xgr_store_hook store;
  bool has_store;
  xgr_rt *rt;
  http_loop *http;
  timers tm;
  /* clock */
  uint64_t t0_ns;               /* CLOCK_MONOTONIC at creation */
  _Atomic int64_t vnow;         /* stepped clock: current virtual time */
  _Atomic long busy;            /* stepped clock: events in flight */
  bool stepped;
  /* subscribers (fixed once a session started) */
  xgr_engine_event_fn subs[8];
  void *subs_ctx[8];
  xgr_engine_interest_fn subs_want[8];   /* NULL: every event */
  unsigned nsubs;
  _Atomic bool started_any;
  /* bundles */
  pthread_mutex_t reg_mu;
  struct named_bundle { char *name; const xgr_bundle *b; } *bundles;
  size_t nbundles;
  /* sessions */
  shard shards[NSHARDS];
  _Atomic uint64_t nsessions;
  shard owners[NSHARDS];        /* owner_live by a hash of the owner (case-insensitive) */
  /* waiting */
  pthread_mutex_t wait_mu;
  pthread_cond_t wait_cv;
  _Atomic int waiters;
  _Atomic long pending_at;      /* xgr_engine_at callbacks not yet run */
  _Atomic long live_actors;
  _Atomic long ctl_inflight;    /* control messages sent, not yet handled */
  /* stats */
  _Atomic uint64_t st_started, st_finished, st_steps, st_http, st_timers, st_batches, st_capped, st_wake_refused;
  _Atomic uint64_t st_quota;                   /* sessions aborted by a quota */
  _Atomic uint64_t st_out_refused;             /* API calls refused by the outbound policy */
  _Atomic uint64_t st_out_active, st_out_waiting;   /* the HTTP loop's in flight / queued (gauges) */
  pthread_mutex_t lat_mu;
  lat_hist lat;
  _Atomic bool stopping;
  _Atomic bool recovering;      /* xgr_engine_config.recovering until xgr_engine_recovered */
  bool shut;
  hib_state hib;
};

int64_t xgr_eng_now(xgr_engine *e);
int64_t xgr_eng_now_at(xgr_engine *e, uint64_t mono_ns);   /* the engine clock at that monotonic time */
void xgr_eng_busy_add(xgr_engine *e, long n);
int xgr_eng_timers_start(xgr_engine *e, xgr_error *err);
void xgr_eng_timers_stop(xgr_engine *e);
/* The calling worker's slot (its timer heap and counters), claimed on first use; NULL under the
 * stepped clock or off the workers. */
wtimers *xgr_eng_wslot(xgr_engine *e, const xgr_ctx *ctx);
/* Arm a timer that sends MSG_TIMER (data: the deadline) to pid at `at`, in the calling worker's
 * heap (own, from xgr_eng_wslot) or, when own is NULL, the timer thread's. */
void xgr_eng_timer_add(xgr_engine *e, wtimers *own, int64_t at, xgr_pid pid);
/* On a worker (own = its slot, may be NULL): fire the actor timers that are due at `now` (the
 * engine clock at monotonic time mono_ns, read recently) in this worker's heap, at most 64 — and
 * when none of its own are due, a neighbour's (timers follow the work to a worker that has time).
 * Cheap when nothing is due (an atomic load). */
void xgr_eng_timers_poll(xgr_engine *e, wtimers *own, const xgr_ctx *ctx, int64_t now, uint64_t mono_ns);
uint64_t xgr_eng_timers_fired(xgr_engine *e);
/* The runtime's idle hook (xgr_rt_config.idle; engine = the engine): an idle worker fires the due
 * timers of its heap (or its neighbour's); when it parks, it leaves its heap to the timer thread. */
bool xgr_eng_timers_idle(void *engine, const xgr_ctx *ctx, bool parking);
uint64_t xgr_eng_steps(xgr_engine *e);   /* step results applied (all workers) */
int xgr_eng_timer_add_cb(xgr_engine *e, int64_t at, at_cb *cb);

/* Registry. */
sess_entry *xgr_eng_lookup_locked(xgr_engine *e, const char *owner, uint64_t root, shard **sh);
shard *xgr_eng_shard(xgr_engine *e, uint64_t root);
void xgr_eng_unlink_locked(shard *sh, sess_entry *ent);
/* A copy of ent->info (the caller holds ent's shard lock). */
xgr_engine_session_info xgr_eng_info(sess_entry *ent);
void xgr_eng_entry_free(sess_entry *ent);
void xgr_eng_notify_waiters(xgr_engine *e);
/* Send an accounted message to an actor; returns 0 or XGR_ENOTFOUND (data stays with the caller). */
int xgr_eng_send(xgr_engine *e, const xgr_ctx *ctx, xgr_pid pid, uint64_t tag, void *data);

/* ---- actor (actor.c) ---------------------------------------------------------------------------- */
typedef struct ctl_msg {
  char owner[64];               /* the target session ("" with the owner unknown: any) */
  uint64_t root;
  xgr_engine_ctl_kind kind;
  uint64_t iter;
  char *step, *caller, *label;
  char *actor, *permit, *node;  /* the audit entry's (xgr_engine_ctl); actor NULL: none */
  char *batch;                  /* the batch operation's id (xgr_engine_ctl.batch), or NULL */
  xgr_value payload;
  bool has_retry;               /* RETRY: retry holds the aborted process's stored state (payload held) */
  xgr_retry_of retry;
  xgr_engine_ctl_done_fn done;
  void *done_ctx;
  /* XGR_CTL_MIGRATE (xgr_engine_ctl) */
  const xgr_bundle *bundle;
  char *bundle_hash, *from_bundle_hash;
  size_t nmap;
  char **map_from, **map_to;
  bool force, dry;
  json_t **verdict;
} ctl_msg;

typedef struct iwake_msg {
  char *id;                     /* outbox id (with a store hook), else NULL */
  char *caller;                 /* the producing session's owner */
  uint64_t from_root;
  uint64_t from_iter;           /* the producing process (trace links, audit entry; 0: unknown, after a restart) */
  char *step_id;
  char *rule_address;
  xgr_value payload;
  char *from_step;              /* the producing process's step (audit entry; NULL: unknown) */
} iwake_msg;

typedef struct report_msg {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
  json_t *report;
} report_msg;

extern const xgr_process_vt xgr_eng_actor_vt;
typedef struct actor actor;
/* Make an actor for a session (the core is created and started here). */
actor *xgr_eng_actor_new(xgr_engine *e, sess_entry *ent, const xgr_bundle *b, const xgr_engine_start *req,
                         xgr_error *err);
void xgr_eng_actor_free(actor *a);
void xgr_eng_ctl_free(ctl_msg *m);
void xgr_eng_iwake_free(iwake_msg *m);

/* The TASK handler that evaluates steps. */
void xgr_eng_step_task(void *hctx, const xgr_ctx *ctx, xgr_pid pid, const xgr_cmd *cmd);
void xgr_eng_step_drop(void *hctx, xgr_pid pid, const xgr_cmd *cmd);
/* Continue a job after its HTTP requests (called on the HTTP thread). */
void xgr_eng_job_http_done(xgr_engine *e, job *j);

/* ---- hibernation (hibernate.c) --------------------------------------------------------------- */
void xgr_eng_hib_init(xgr_engine *e);
void xgr_eng_hib_stop(xgr_engine *e);     /* joins the thread; queued calls answered ESTATE */
void xgr_eng_hib_destroy(xgr_engine *e);
/* Load (owner, root) unless the registry has it: 0, or XGR_ENOTFOUND. Blocks (store read). */
int xgr_eng_hib_load(xgr_engine *e, const char *owner, uint64_t root, xgr_error *err);
/* Hand a control call or internal wake-up for a session that is not in memory (or was just
 * evicted) to the hibernation thread, which loads the session and delivers it. Never blocks.
 * false: hibernation is off (the caller keeps msg). */
bool xgr_eng_hib_defer(xgr_engine *e, int kind, const char *owner, uint64_t root, void *msg);
/* Deliver a control message (its owner/root say where), loading the session when needed; answers
 * done itself when it cannot. May block on a load. */
int xgr_eng_route_ctl(xgr_engine *e, ctl_msg *m);

#endif
