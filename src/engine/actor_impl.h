/* actor_impl.h — the session actor's state, shared by the files that make up the actor
 * (engine-private; see actor.c for what a turn does):
 *   actor.c         the turn: events, promotion, commits, caps and quotas, hibernation, the end;
 *   actor_batch.c   the store batch of a turn: row snapshots of the core's processes, history
 *                   rows, the live join targets' texts, and clearing it after the commit.
 * Everything here is touched only by the actor's own turn (one thread at a time).
 */
#ifndef XGR_ENGINE_ACTOR_IMPL_H
#define XGR_ENGINE_ACTOR_IMPL_H

#include "engine/engine_impl.h"
#include "util/hashmap.h"

typedef enum vis_kind { V_DISPATCH = 0, V_WAKE, V_EVENT, V_REPLY } vis_kind;

typedef struct evsnap {
  xgr_engine_event ev;
  xgr_engine_proc p;
  char *msg;
  char *api, *reads;               /* STEP: owned texts behind ev.api and ev.reads */
  char *from_owner;                /* WAKE: owned text behind ev.from_owner */
  uint8_t to;                      /* the subscribers it goes to (bit k: e->subs[k]) */
} evsnap;

typedef struct wake_out {
  char *target_owner;
  uint64_t target_root;
  iwake_msg *m;
} wake_out;

typedef struct vis {
  vis_kind kind;
  union {
    job *j;
    wake_out w;
    evsnap *ev;
    struct {
      xgr_engine_ctl_done_fn fn;
      void *ctx;
      int rc;
      char *msg;
    } r;
  } u;
} vis;

typedef struct visq {
  vis *v;
  size_t n, cap;
} visq;

struct actor {
  xgr_engine *e;
  sess_entry *ent;
  const xgr_bundle *b;
  bool bundle_done;                /* b came from xgr_engine_start.bundle: report it when freed */
  xgr_session *s;
  uint64_t root;
  xgr_pid pid;
  xgr_effects fx;
  /* the current turn */
  const xgr_ctx *ctx;
  xgr_step_out *out;
  int64_t now;
  uint64_t mono;                 /* monotonic ns when the turn began (now is the clock then) */
  wtimers *slot;                 /* the turn's worker slot (timer heap, counters) or NULL */
  /* state */
  bool started, finished, stopping, limit, idle, completed, record, touched, ent_unlinked;
  /* the turn's subscribers of each event kind (bit k: e->subs[k]; see interest), and whether one
   * of those of JOIN wants its join tree */
  uint8_t to[8];
  bool join_tree;
  bool trace;                      /* some subscriber wants the tracing fields (XGR_EEV_WANT_TRACE) */
  /* a new session's row: its first batch carries it (insert if absent); started is told once that
   * batch is committed or refused (xgr_engine_start.started) */
  bool new_row;                  /* the row still has to go out with the next batch */
  bool starting;                 /* the batch with the row is in flight: its commit answers started */
  char *registry, *max_total_gas, *bundle_hash;   /* owned: the row's fields */
  xgr_engine_fork *fork;         /* owned (xgr_eng_fork_dup): a fork's record, with the row */
  void (*started_fn)(void *ctx, int err);
  void *started_ctx;
  /* a new session's core is made on its first turn, on the worker that runs it (its memory then
   * lives in that worker's malloc arena, and the starting thread returns sooner) */
  bool need_start;
  unsigned start_step;
  xgr_value start_payload;       /* held until the first turn */
  int64_t start_now;             /* the engine clock when the session was started */
  int64_t start_at;              /* the start process's first wake (xgr_engine_start.start_at) */
  xgr_session_result result;
  uint64_t steps, promoted, max_steps;
  char cap_reason[XGR_QUOTA_REASON_MAX];   /* set when a per-session cap or a quota killed the session */
  /* quotas: the owner's live-process count (held from creation to free) and what this actor
   * added to it; the session's stored bytes so far; over_quota: a batch went over a stored-bytes
   * quota and the session was aborted (every later batch is accepted whatever its size) */
  owner_live *ol;
  int64_t live_counted;
  uint64_t stored_bytes;
  bool over_quota;
  uint32_t inflight;
  int64_t armed;
  int64_t clock_ms;              /* the session clock of its last change (reports' clockMs) */
  xgr_records *rec;             /* reports (record only), else NULL */
  /* ordered application */
  bool ordered;
  bool serial;                 /* ordered and a rule can wake: one step at a time, as the driver */
  job **ring;
  size_t ringcap;
  uint64_t next_seq, apply_seq;
  /* visible effects: pending (current batch) and held (committing batch) */
  visq pend, hold;
  bool committing;
  bool store_failed;             /* the store refused a batch: the session stops, results are dropped */
  /* hibernation (hibernate.c): the due time the store holds for the session (0: awake), the one
   * the next batch writes, the one the batch being committed writes; evicted: it left the
   * registry and closes */
  int64_t stored_due, batch_due, committing_due;
  bool evicted;
  bool dropped;                  /* cluster: the lease went elsewhere; the actor leaves (drop_now) */
  uint64_t sleep_after_ns;       /* a loaded session stays this long (monotonic ns): the call that
                                    loaded it finds it, and a burst of calls does not thrash */
  xgr_engine_proc *bp;
  size_t nbp, capbp;
  char *jtext;                   /* the join texts of the batch's live join targets (join_rows_fill),
                                    kept from batch to batch: the rows borrow it until batch_clear */
  size_t jcap;
  xgr_engine_hist *bh;
  size_t nbh, capbh;
  xgr_engine_wake *bw;           /* outbox rows of the batch (strings owned, payload held) */
  size_t nbw, capbw;
  char **bd;                     /* outbox ids the batch marks done (owned) */
  char **bdr;                    /* their refusal reasons (owned; NULL: applied) */
  size_t nbd, capbd;
  /* migration (issue 36): the migrate call waiting for the safe point (the session is held: no
   * promotion), the bundles the session ran before (reported through bundle_done at the free),
   * and the row's new pin that the next batch writes (owned, NULL: none) */
  ctl_msg *mig;
  const xgr_bundle **prev_b;
  size_t nprev_b;
  char *pin_id, *pin_hash, *pin_bundle;
  xgr_engine_audit *ba;          /* audit entries of the batch (strings owned; xgr_eng_audit) */
  size_t nba, capba;
  xgr_engine_grant *bg;          /* branch grants of the batch (strings owned; xgr_eng_grant) */
  size_t nbg, capbg;
  xgr_hashmap applied;           /* outbox ids applied in this run (64-bit prefix -> (void *)1): at most once */
  bool batch_finished;
  /* latency and job cache */
  lat_hist *lat;
  job *free_jobs;
  unsigned nfree;
};

/* What a snapshot is for: the store's batch (the join in restore form) or an event (the report
 * form of the join, for XGR_EEV_JOIN only). */
typedef enum snap_use { SNAP_ROW, SNAP_EVENT, SNAP_JOIN_EVENT } snap_use;

/* A process status that is still live (waiting or running). */
static inline bool xgr_eng_live_status(uint8_t status) {
  return status == XGR_PROC_WAITING || status == XGR_PROC_RUNNING;
}

/* ---- actor_batch.c -------------------------------------------------------------------------- */

/* Fill *d from effect fe for use (its strings, payload and join texts owned by *d; release with
 * xgr_eng_snap_release). A process a cap or quota killed carries a->cap_reason as its error. */
void xgr_eng_snap_fill(actor *a, xgr_engine_proc *d, const xgr_effect *fe, snap_use use);
void xgr_eng_snap_release(xgr_engine_proc *d);
/* Add fe's process row to the turn's batch (a live join target's earlier row in it is replaced). */
void xgr_eng_batch_row(actor *a, const xgr_effect *fe);
/* Add fe's history row to the turn's batch. */
void xgr_eng_batch_hist(actor *a, const xgr_effect *fe);
/* Point the batch's live join targets' rows at their texts, written into a->jtext. */
void xgr_eng_join_rows_fill(actor *a);
/* Add an audit entry to the turn's batch (strings copied; detail is JSON text or NULL): a control
 * action or wake-up that was applied in this turn. Only with a store hook. */
/* actor.c: take the core's effects of the last call into the turn (batch rows, events, dispatches). */
void xgr_eng_consume(actor *a);
/* actor.c: answer control call m (visible with the batch, like every reply) and free it. */
void xgr_eng_ctl_reply(actor *a, ctl_msg *m, int rc, const char *text);
/* actor_migrate.c: run the waiting migration (a->mig) once the session is at its safe point. */
void xgr_eng_migrate_try(actor *a);
/* Put the grants of step result r (process iter, step index step) into the batch, each with its
 * audit entry; expiry from the actor's clock. */
void xgr_eng_grants(actor *a, const xgr_step_result *r, uint16_t step, uint64_t iter);
void xgr_eng_audit(actor *a, const char *kind, const char *actor_name, const char *node, const char *permit,
                   const char *detail);
/* Drop the batch's outbox rows (wake-ups it would send). */
void xgr_eng_batch_clear_wakes(actor *a);
/* Empty the batch (rows, history, outbox rows and marks) after it was submitted. */
void xgr_eng_batch_clear(actor *a);
/* A copy of f (xgr_engine_start.fork) the actor owns; NULL for NULL. */
xgr_engine_fork *xgr_eng_fork_dup(const xgr_engine_fork *f);
/* Free the new row's fields a owns (registry, max_total_gas, bundle_hash, fork) and NULL them. */
void xgr_eng_row_fields_free(actor *a);

#endif
