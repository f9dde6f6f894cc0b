/* postgres_impl.h — what the files of the PostgreSQL store share (private to src/store): the handle
 * and its helper connections, the prepared statements' ids and the SQL fragments several files'
 * statements are built from, statement parameters, the state of a pipelined group, and each
 * file's entry points. The backend is one concern a file, as SQLite's own source is:
 *
 *   postgres.c         the overview; open and close, errors, the store interface (vtable)
 *   postgres_schema.c  migrations, the writer lock, the statements a writer connection prepares
 *   postgres_write.c   committing a group: pipeline, fence, results, retries, split over lanes
 *   postgres_bulk.c    the bulk path: array literals, binary COPY, packs, the owners' counters
 *   postgres_gc.c      retention between commits
 *   postgres_read.c    reads and the loading of live sessions
 *   pg_cluster.c       a cluster node's leases, claims, heartbeats and command rows
 */
#ifndef XGR_STORE_POSTGRES_IMPL_H
#define XGR_STORE_POSTGRES_IMPL_H

#include <assert.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "store/store_impl.h"
#include "util/buf.h"

/* ---- the cluster part (pg_cluster.c; docs/CLUSTER.md) ------------------------------------------ */

typedef struct pgc pgc;

/* The first line of a libpq message (they end in a newline and may carry a DETAIL) into out. */
void xgr__pg_first_line(const char *msg, char *out, size_t cap);
/* Connect to url as one of the store's connections, named "xgr <role>[ <node>]" in
 * pg_stat_activity unless the URI names it (role: "writer", "reader", "lease", "listen"; node may
 * be NULL). The connection (the caller PQfinishes it), or NULL with *err "store <name>: cannot
 * connect to PostgreSQL: ...". */
PGconn *xgr__pg_connect(const char *url, const char *name, const char *role, const char *node, xgr_error *err);

/* Connect the node's lease connection and its listening connection, take the node's advisory
 * lock (waiting up to 5 s for a previous process of the same id to go), LISTEN on its channel.
 * node (copied) is the node id, lease_ms the lease (0: XGR_STORE_LEASE_MS). NULL with *err. */
pgc *xgr__pgc_open(const char *url, const char *name, const char *node, int64_t lease_ms, xgr_error *err);
/* Close both connections (the node lock goes with them). NULL is fine. */
void xgr__pgc_close(pgc *c);
/* Make the writer connection w insert new session rows leased to this node (xgr.node, xgr.lease_ms),
 * and have the server end it when it sits idle inside a transaction for max(3 leases, 5 s) (a
 * stalled node must not keep its fenced rows locked). */
int xgr__pgc_setup_writer(pgc *c, PGconn *w, xgr_error *err);

/* Writer thread, before a group: move the batches that write a session this node does not hold
 * to the end of list, failed with XGR_ELEASE; returns how many remain at the front. */
size_t xgr__pgc_prefilter(pgc *c, xgr_store_changes **list, size_t n);
/* The fence's parameters for list[0..n): owners, rootPids and epochs as PostgreSQL array literals
 * and the node id (arr[0..3], each the caller's to free). false: nothing to fence (only new
 * sessions or no session at all); arr is then untouched. */
bool xgr__pgc_fence(pgc *c, xgr_store_changes **list, size_t n, char *arr[4]);
/* Writer thread, after a group: sessions created (epoch 1) are held from now on; sessions that
 * ended or whose batch failed with XGR_ELEASE are not; refusals are counted. */
void xgr__pgc_after(pgc *c, xgr_store_changes **list, size_t n);

/* postgres.c: the cluster part of a store (NULL when it is not a cluster node) and the live rows of
 * the sessions named by two array literals (as xgr_store_load_live). */
pgc *xgr__pg_cluster(xgr_store *st);
int xgr__pg_load_keys(xgr_store *st, const char *owners, const char *roots,
                      int (*fn)(void *, const xgr_store_live *), void *ctx, xgr_error *err);

/* ---- statements (prepared on every writer connection as "x<index>", postgres_schema.c) ----------- */

enum {
  S_SESSION, S_SESSION_NEW, S_STATE, S_SCOPES_DEL, S_PROC, S_HIST, S_SCOPE, S_RM_PROCS, S_RM_SESSION, S_NEXTPID,
  S_OWNER_BUMP, S_MARK, S_MARK_GC, S_REG_LOCK, S_REG_ORCH, S_REG_RULE, S_GC_PROCS, S_GC_HIST, S_GC_SESS, S_GC_SCOPES,
  S_PROCS_BULK, S_STATES_BULK, S_SCOPES_DEL_BULK, S_SESSIONS_BULK, S_SESSIONS_UPSERT_BULK, S_SCOPES_BULK, S_WAKE_OUT, S_WAKE_DONE, S_WAKE_REFUSE, S_RM_REFUSED,
  S_GC_REFUSED, S_NEXT_ITERS, S_OWNERS_BULK, S_RM_HIST_RECORDS, S_RM_BORN, S_BORN_DEL_BULK, S_GC_BORN, S_AUDIT, S_GC_AUDIT, S_FORKED, S_PIN, S_GRANT, S_GRANT_DEL, S_RM_GRANTS, S_GC_GRANTS, S_GC_BOPS, S_COUNT
};

/* True when the process of proc_rt row `r` ended with a step's result whose history row keeps its
 * record (migration 12): the row is then stale, and reads and retention pass it over. */
#define ENDED_IN_HIST(r)                                                                                         \
  "EXISTS (SELECT 1 FROM proc_steps h WHERE h.owner = " r ".owner AND h.root_pid = " r ".root_pid"              \
  " AND h.iter = " r ".iter AND h.rt_created_at IS NOT NULL)"

/* The members of pack `b` of proc_born (migration 12) as rows `m` with PROC_COLS' columns: each
 * member is a JSON array of the record's fields in that order (cp_pack). */
#define BORN_UNNEST                                                                                              \
  "json_array_elements(b.members::json) AS e(v), LATERAL (SELECT (e.v->>0)::numeric AS iter,"                    \
  " (e.v->>1)::numeric AS parent_iter, (e.v->>2)::int AS step, e.v->>3 AS step_id, (e.v->>4)::int AS status,"    \
  " (e.v->>5)::int AS paused, (e.v->>6)::int AS valid, (e.v->>7)::int AS abort_reason,"                         \
  " (e.v->>8)::bigint AS join_group, (e.v->>9)::bigint AS join_from_group, (e.v->>10)::bigint AS next_wake_at,"  \
  " (e.v->>11)::bigint AS created_at, (e.v->>12)::bigint AS started_at, (e.v->>13)::bigint AS finished_at,"      \
  " e.v->>14 AS payload, e.v->>15 AS error, e.v->>16 AS join_state) m"
/* True when member m of pack b still holds its process's state: no proc_rt row and no record in
 * a history row has superseded it. */
#define BORN_LIVE                                                                                                \
  "NOT EXISTS (SELECT 1 FROM proc_rt x WHERE x.owner = b.owner AND x.root_pid = b.root_pid AND x.iter = m.iter)" \
  " AND NOT EXISTS (SELECT 1 FROM proc_steps h WHERE h.owner = b.owner AND h.root_pid = b.root_pid"              \
  " AND h.iter = m.iter AND h.rt_created_at IS NOT NULL)"

/* The columns of a process record as the reads take them (read_proc_row). */
#define PROC_COLS "iter, parent_iter, step, step_id, status, paused, valid, abort_reason, join_group, " \
                  "join_from_group, next_wake_at, created_at, started_at, finished_at, payload, error, join_state"
/* a process record kept with its history row (migration 12), as PROC_COLS */
#define HIST_RECORD_COLS "iter, parent_iter, step, step_id, status, rt_paused, valid, abort_reason, rt_join_group, " \
                         "rt_join_from_group, rt_next_wake_at, rt_created_at, at, finished_at, payload, error, rt_join_state"
#define HIST_COLS "iter, parent_iter, step, step_id, status, valid, abort_reason, at, finished_at, error, payload, " \
                  "recorded_at, api"

/* The columns of proc_rt in the order the bulk path COPYs them (xgr__pg_send_bulk). */
#define PROC_ROW_COLS                                                                                                \
  "owner, root_pid, iter, parent_iter, step, step_id, status, paused, valid, abort_reason, join_group,"          \
  " join_from_group, next_wake_at, created_at, started_at, finished_at, payload, error, join_state, terminal_at"

/* ---- the handle ------------------------------------------------------------------------------- */

/* The buffers a writer connection builds its COPY data in, kept from one group to the next so a
 * large group does not fault in fresh pages each time (emptied after each use; freed when one grew
 * past KEEP_BUF_MAX). Owned by the thread that drives the connection. */
typedef struct copybufs {
  xgr_buf copy, fresh, staged, born;   /* history rows; new, stored and packed process rows */
} copybufs;
#define KEEP_BUF_MAX ((size_t)64 << 20)

/* Where one of retention's sweeps over a table's key goes on (gc_sweep; writer thread): the last
 * key looked at, or the start while owner is NULL; full: a full pass's sweep is under way. */
typedef struct sweep {
  char *owner;
  char root[24], iter[24];
  bool full;
} sweep;

/* Which life of the server a connection lives in: the server's start time, and when its shared
 * statistics were last reset — a crash of any server process makes the server discard them and
 * recover without a new start time (tested: a backend SIGKILLed). A crash recovery ends every
 * backend, so a connection lives within one life: a writer connection reads it once, when it is
 * set up (xgr__pg_setup_writer, again at each reconnect), not in every transaction. An explicit
 * statistics reset counts as a new life too, which only makes a lost COMMIT's outcome "not known"
 * (settle_commit, postgres_write.c). */
#define SERVER_LIFE "pg_postmaster_start_time()::text || ' ' || coalesce((SELECT stats_reset FROM pg_stat_bgwriter)::text, '')"
#define PG_LIFE_LEN 80

typedef struct pgstore {
  xgr_store base;
  char *url;                    /* as given (libpq reads it) */
  char *name;                   /* for messages: the password masked */
  PGconn *w;                    /* writer connection (writer thread only after open) */
  char w_life[PG_LIFE_LEN];     /* w's server life (SERVER_LIFE), read when w was set up */
  PGconn *r;                    /* reader connection, under rmu */
  pthread_mutex_t rmu;          /* recursive */
  bool r_snapshot;              /* load_live's read transaction is open on r */

  xgr__writer wr;               /* the writer thread and its queue (writer.c) */
  pgc *cl;                      /* cluster node (cfg.node_id; pg_cluster.c), or NULL: the single writer */
  struct lane *lanes;           /* the writer's helper connections (commit_split, postgres_write.c), nlanes of them */
  size_t nlanes;
  sweep sw_procs, sw_born;       /* retention's sweeps over proc_rt and proc_born (gc_sweep) */
  copybufs bufs;                /* g->w's COPY data (writer thread) */
  PGconn *bc;                   /* batch operations' connection (postgres_batch.c), under bmu; opened at first use */
  pthread_mutex_t bmu;
} pgstore;

/* A helper of the writer thread: its own writer connection and a thread that commits the part of
 * a large group handed to it (commit_split, postgres_write.c), while the writer thread commits another part on w. */
typedef struct lane {
  pgstore *g;
  PGconn *w;                    /* set up like g->w (prepared statements, staging table, node) */
  char life[PG_LIFE_LEN];       /* w's server life, as g->w_life */
  pthread_t thread;
  bool has_thread;
  pthread_mutex_t mu;           /* guards list, n, stop */
  pthread_cond_t cv;            /* work handed over, or done (list back to NULL), or stop */
  xgr_store_changes **list;     /* the part to commit; NULL: idle */
  size_t n;
  bool stop;
  copybufs bufs;                /* this lane's COPY data (its thread) */
} lane;

/* ---- parameters ------------------------------------------------------------------------------ */

/* ---- parameters (text, numbers formatted into the struct) and result columns ------------------- */

#define PMAX 20

/* Text parameters of one statement; numbers are formatted into num[]. */
typedef struct params {
  int n;
  const char *v[PMAX];
  int len[PMAX];
  int fmt[PMAX];
  char num[PMAX][24];
} params;

static inline void p_text(params *p, const char *t) {
  assert(p->n < PMAX);
  p->v[p->n] = t;
  p->len[p->n] = 0;
  p->fmt[p->n++] = 0;
}
static inline void p_i64(params *p, int64_t x) {
  assert(p->n < PMAX);
  snprintf(p->num[p->n], sizeof p->num[0], "%" PRId64, x);
  p_text(p, p->num[p->n]);
}
static inline void p_u64(params *p, uint64_t x) {
  assert(p->n < PMAX);
  snprintf(p->num[p->n], sizeof p->num[0], "%" PRIu64, x);
  p_text(p, p->num[p->n]);
}
static inline void p_bin(params *p, const void *b, size_t n) {
  assert(p->n < PMAX);
  p->v[p->n] = b;
  p->len[p->n] = (int)n;
  p->fmt[p->n++] = 1;
}

static inline uint64_t get_u64(const PGresult *r, int row, int col) {
  return PQgetisnull(r, row, col) ? 0 : strtoull(PQgetvalue(r, row, col), NULL, 10);
}
static inline int64_t get_i64(const PGresult *r, int row, int col) {
  return PQgetisnull(r, row, col) ? 0 : strtoll(PQgetvalue(r, row, col), NULL, 10);
}
static inline char *get_text(const PGresult *r, int row, int col) {
  return PQgetisnull(r, row, col) ? NULL : xgr__xstrdup(PQgetvalue(r, row, col));
}

/* ---- a group in flight (writer thread, pipeline mode) ----------------------------------------- */

/* What the writer does with the result of one statement it sent. */
enum { W_PLAIN, W_NEXTPID, W_REGISTER, W_MARK, W_SESSION_NEW, W_NEXT_ITERS };

typedef struct pending {
  size_t batch, op;             /* the batch (index in the group) and entry it belongs to */
  uint8_t what;
} pending;

/* The process rows of a bulk group: the last state of each process, in key order (owner, rootPid,
 * iter), and the sessions they belong to (runs of equal (owner, rootPid) in that order). With
 * the direct path, S_NEXT_ITERS reads each session's stored next_iter in the pipeline: a row
 * whose iter is at least that (or whose session has no row yet) was never stored, so it goes
 * into proc_rt by a plain COPY; the others go through the staging table and the upsert. */
typedef struct bulk_procs {
  const store_op **rows;        /* borrowed from the group's entries */
  size_t n;
  size_t *sess;                 /* rows[i]'s session (index into next) */
  uint64_t *next;               /* per session: stored next_iter, 0 when it has no row (all new) */
  size_t nsess;
  bool direct;                  /* split new rows off (S_NEXT_ITERS sent) */
} bulk_procs;

typedef struct pipe_state {
  pending *p;
  size_t n, cap;
  bool send_failed;
  bulk_procs *bp;               /* W_NEXT_ITERS fills bp->next */
} pipe_state;

/* The outcome of one pipelined transaction attempt. */
typedef struct pipe_result {
  bool ok;                      /* every statement ran */
  bool conn_lost;               /* no result where one was due (the connection broke) */
  char state[6];                /* SQLSTATE of the first error ("" none) */
  size_t bad_batch;             /* the batch of the first error, or of an entry that must not be
                                   half applied (a used mark after other entries) */
  xgr_error err;                /* the first error */
  bool direct_conflict;         /* the direct COPY of new process rows failed on a constraint: the
                                   group is redone without it (commit_group) */
  char xid[24];                 /* the transaction's id (txid_current()), "" when not read: asked
                                   about after a COMMIT whose answer was lost (commit_group) */
  char boot[PG_LIFE_LEN];       /* the server's life of the connection the transaction ran on
                                   (SERVER_LIFE, read when it was set up): an xid says nothing
                                   across a restart */
} pipe_result;

/* ---- postgres.c --------------------------------------------------------------------------------- */

/* Put the failed result res (NULL: the connection's error) of `what` on c into *err, with its
 * SQLSTATE and a hint; returns the xgr_errcode (a lost lease XGR_ELEASE, a constraint
 * XGR_ECONFLICT, bad data XGR_EINVAL, else XGR_EIO). */
int xgr__pg_res_error(const pgstore *g, const PGresult *res, PGconn *c, const char *what, xgr_error *err);
/* Run prepared statement `which` (S_...) on c outside pipeline mode; the result (the caller clears it). */
PGresult *xgr__pg_exec_prepared(PGconn *c, int which, const params *p);
/* Run sql (no parameters; may be several statements) on c: 0, or an error in *err. */
int xgr__pg_exec_plain(pgstore *g, PGconn *c, const char *sql, xgr_error *err);
/* Open *out as the connection role ("reader", "writer", or "writer-K": the K-th writer
 * connection, commit_split) with the store's session settings. 0 or an error. */
int xgr__pg_connect_one(pgstore *g, PGconn **out, const char *role, xgr_error *err);
/* Empty every buffer of cb, freeing those whose capacity is above keep (0: all of them). */
void xgr__pg_copybufs_empty(copybufs *cb, size_t keep);

/* ---- postgres_batch.c -------------------------------------------------------------------------- */

/* The vtable's batch operations (store_vt.bop_*), on a connection of their own under bmu. */
int xgr__pg_bop_create(xgr_store *st, const xgr_store_batchop *op, uint32_t max_running, uint32_t max_kept,
                        xgr_error *err);
int xgr__pg_bop_claim(xgr_store *st, const char *node, int64_t lease_ms, bool force, xgr_store_batchop *out,
                      bool *found, xgr_error *err);
int xgr__pg_bop_progress(xgr_store *st, const xgr_store_batchop *op, int64_t lease_ms, char *state, xgr_error *err);
int xgr__pg_bop_cancel(xgr_store *st, const char *id, bool *changed, xgr_error *err);
int xgr__pg_bop_read(xgr_store *st, const char *id, const char *caller, size_t limit, xgr_store_batchop **out,
                     size_t *n, xgr_error *err);

/* ---- postgres_schema.c -------------------------------------------------------------------------- */

/* The schema version in the database on c: 0 for an empty one; an error for a database with
 * tables but no schema_version (not an xgr store). */
int xgr__pg_schema_version(pgstore *g, PGconn *c, int *v, xgr_error *err);
/* Bring the schema to XGR_STORE_SCHEMA_VERSION on g->w; *found: the version read under the lock. */
int xgr__pg_migrate(pgstore *g, int *found, xgr_error *err);
/* Take the writer lock of the schema on g->w (shared: a cluster node's). 0 or an error. */
int xgr__pg_take_writer_lock(pgstore *g, bool shared, xgr_error *err);
/* Make c (g->w or a lane's w) a writer connection: the staging table, every statement prepared,
 * the node's settings, and its server life read into xgr__pg_life_of(g, c). */
int xgr__pg_setup_writer(pgstore *g, PGconn *c, xgr_error *err);
/* The server life buffer (PG_LIFE_LEN bytes) of writer connection c: g->w_life or its lane's. */
char *xgr__pg_life_of(pgstore *g, PGconn *c);

/* ---- postgres_write.c --------------------------------------------------------------------------- */

/* Send prepared statement `which` in the pipeline, its result to be handled as `what` for entry
 * op of batch `batch`. */
void xgr__pg_send_stmt(pgstore *g, PGconn *w, pipe_state *ps, int which, const params *p, size_t batch, size_t op,
                       uint8_t what);
/* Send the statements of entry oi of batch bi (op) in the pipeline; now is the commit's time. */
void xgr__pg_send_op(pgstore *g, PGconn *w, pipe_state *ps, size_t bi, size_t oi, const store_op *op, int64_t now);
/* The writer's commit step (store_impl.h): ctx is the pgstore. */
void xgr__pg_commit(void *ctx, xgr_store_changes **list, size_t n);
/* A lane's thread (arg: the lane): commits each part of a split group handed to it. */
void *xgr__pg_lane_main(void *arg);

/* ---- postgres_bulk.c ---------------------------------------------------------------------------- */

/* Can the group go through the bulk path? (Only session rows, states, process and history rows, scopes.) */
bool xgr__pg_bulk_ok(xgr_store_changes **list, size_t n);
/* Send the group's pipeline part of the bulk path; its history rows go into copy, its process rows
 * into bp (for xgr__pg_copy_rows). bump: raise the owners' counters in this transaction. */
void xgr__pg_send_bulk(pgstore *g, PGconn *w, pipe_state *ps, xgr_store_changes **list, size_t n, int64_t now,
                       xgr_buf *copy, bulk_procs *bp, bool bump);
/* The bulk path's second part after its pipeline: the process and history rows by binary COPY. */
void xgr__pg_copy_rows(pgstore *g, PGconn *w, const bulk_procs *bp, int64_t now, copybufs *cb, pipe_result *pr);
/* Raise the owners' counters for every session row of list[0..n) in a statement of its own on g->w. */
int xgr__pg_raise_owners(pgstore *g, xgr_store_changes **list, size_t n, xgr_error *err);

/* ---- postgres_gc.c ------------------------------------------------------------------------------ */

/* The writer's retention step (store_impl.h): ctx is the pgstore. */
long xgr__pg_gc(void *ctx, bool full, bool *more, xgr_error *err);
/* The next stretch of sweep sw starts at its table's first key (frees its cursor). */
void xgr__pg_sweep_restart(sweep *sw);

/* ---- postgres_read.c: the store interface's reads (store_vt) ------------------------------------ */

int xgr__pg_session_get(xgr_store *st, const char *owner, uint64_t root, xgr_store_session *out, xgr_error *err);
int xgr__pg_peek_pid(xgr_store *st, const char *owner, uint64_t *next, xgr_error *err);
int xgr__pg_owner_bytes(xgr_store *st, const char *owner, uint64_t *bytes, xgr_error *err);
int xgr__pg_outbox(xgr_store *st, xgr_store_wake **out, size_t *n, xgr_error *err);
int xgr__pg_wakes_refused(xgr_store *st, const char *owner, uint64_t root, xgr_store_wake **out, size_t *n,
                          xgr_error *err);
int xgr__pg_grants(xgr_store *st, const xgr_store_grant_filter *f, xgr_store_grant **out, size_t *n, xgr_error *err);
int xgr__pg_audits(xgr_store *st, const char *owner, uint64_t root, xgr_store_audit **out, size_t *n, xgr_error *err);
int xgr__pg_procs(xgr_store *st, const char *owner, uint64_t root, xgr_store_proc **out, size_t *n, xgr_error *err);
int xgr__pg_history(xgr_store *st, const char *owner, uint64_t root, xgr_store_hist **out, size_t *n, xgr_error *err);
int xgr__pg_sessions(xgr_store *st, const char *owner, uint64_t before, size_t limit, xgr_store_session **out,
                     size_t *n, xgr_error *err);
int xgr__pg_load_live(xgr_store *st, int (*fn)(void *, const xgr_store_live *), void *ctx, xgr_error *err);
int xgr__pg_doc_get(xgr_store *st, xgr_registry_kind kind, const char *id, uint32_t version, const char *hash,
                    xgr_store_doc *out, xgr_error *err);
int xgr__pg_owners_after(xgr_store *st, const char *after, size_t max, xgr_store_owner_live **out, size_t *n,
                         xgr_error *err);
int xgr__pg_live_owners(xgr_store *st, const char *owner, size_t max, xgr_store_owner_live **out, size_t *n,
                        xgr_error *err);
int xgr__pg_load_some(xgr_store *st, const xgr_store_load_filter *f, int (*fn)(void *, const xgr_store_live *),
                      void *ctx, xgr_error *err);
int xgr__pg_due(xgr_store *st, const xgr_store_due_key *after, int64_t upto, xgr_store_due_key *out, size_t max,
                size_t *n, xgr_error *err);

#endif
