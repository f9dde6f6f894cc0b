/* store_impl.h — what the store front (store.c) and its backends (memory.c, sqlite.c, postgres*.c)
 * share: batch entries, the backend vtable, the common part of a store handle, and the writer
 * thread of the SQLite and PostgreSQL backends (writer.c). Private to src/store.
 *
 * A batch is a list of entries (ops) in the order they were added; backends apply them in that
 * order. Besides the public entries there are two internal ones that only travel alone in a
 * batch: NEXTPID (getNextProcessId) and REGISTER (a registry document); their results are
 * written through pointers the waiting caller owns. The strings of entries belong to the batch
 * (its text arena) and go with it: a backend copies what it keeps. */
#ifndef XGR_STORE_IMPL_H
#define XGR_STORE_IMPL_H

#include "util/alloc.h"
#include "util/buf.h"
#include <pthread.h>
#include <stdatomic.h>

#include "xgr/arena.h"

#include "xgr/store.h"

typedef enum op_kind { OP_SESSION, OP_STATE, OP_PROC, OP_HIST, OP_SCOPE, OP_REMOVE, OP_NEXTPID, OP_REGISTER, OP_MARK, OP_WAKE_OUT, OP_WAKE_DONE, OP_AUDIT, OP_FORKED, OP_PIN, OP_GRANT } op_kind;

typedef struct store_op {
  op_kind kind;
  bool if_absent;               /* OP_SESSION: insert only; an existing row fails the batch (XGR_ECONFLICT) */
  bool unfenced;                /* OP_AUDIT of a change outside the engine's state (a grant): written by
                                   any cluster node, whoever holds the session's lease */
  char *owner;                  /* in the batch's text arena, like every string of an entry */
  uint64_t root;
  const xgr_session *live;      /* OP_PROC from xgr_store_changes_add_effects of a process still live
                                   (defer_live): its record is taken from the session at the seal
                                   (u.proc holds only the iter until then); NULL: u.proc is whole */
  union {
    xgr_store_session session;                  /* OP_SESSION */
    struct {
      uint8_t status;
      int64_t killed_at;
      uint64_t next_iter;
      uint32_t next_group;
      bool paused;
      int64_t due;                              /* sessions.wake_due (0: NULL, awake) */
      bool has_bytes;                           /* sessions.stored_bytes is set to stored_bytes (else kept) */
      uint64_t stored_bytes;
    } state;                                    /* OP_STATE */
    xgr_store_proc proc;                        /* OP_PROC */
    xgr_store_hist hist;                        /* OP_HIST */
    uint32_t group;                             /* OP_SCOPE */
    uint64_t *next_pid;                         /* OP_NEXTPID: result */
    xgr_store_doc *doc;                         /* OP_REGISTER: in (kind, id, owner, content) and out */
    struct {
      int64_t expires_at, now;                  /* Unix seconds */
    } mark;                                     /* OP_MARK: owner holds the mark's key */
    xgr_store_wake wake;                        /* OP_WAKE_OUT; OP_WAKE_DONE: owner holds the id,
                                                   wake.refused the reason or NULL */
    xgr_store_audit audit;                      /* OP_AUDIT (an audit trail row of session owner/root) */
    const char *forked_from;                    /* OP_FORKED: sessions.forked_from of owner/root */
    struct {
      char *ostc_id, *ostc_hash, *bundle_hash;
    } pin;                                      /* OP_PIN: the session row moves to another version (migration) */
    xgr_store_grant grant;                      /* OP_GRANT (owner/root are its session; rights 0: revoke) */
  } u;
} store_op;

struct xgr_store_changes {
  xgr_arena text;               /* every string of the entries (freed with the batch, never one by
                                   one: a batch is thousands of strings, freed by the writer thread) */
  xgr_buf scratch;              /* JSON is written here, then copied into text */
  store_op *ops;
  size_t n, cap;
  size_t last_state;            /* index + 1 of the last OP_STATE (coalescing), 0: none */
  size_t *pidx;                 /* open-addressing index of OP_PROC entries by (root, iter): the
                                   last state of a process replaces an earlier one (index + 1) */
  size_t npidx, cappidx;
  bool defer_live;              /* xgr_store_changes_defer_live was called */
  bool grants;                  /* it writes a grant (xgr_store_changes_grant): its commit moves grants_gen */
  size_t nlive;                 /* OP_PROC entries whose record is still to be taken (op.live) */
  xgr_store_commit_fn done;
  void *ctx;
  struct xgr_store_changes *next; /* queue link */
  int rc;                       /* result, set by the backend */
  xgr_error err;
};

typedef struct store_vt {
  const char *name;
  /* queue b (owned from now on); the backend calls xgr__store_signal for it exactly once */
  void (*submit)(xgr_store *st, xgr_store_changes *b);
  void (*flush)(xgr_store *st);
  void (*close)(xgr_store *st);
  int (*session_get)(xgr_store *st, const char *owner, uint64_t root, xgr_store_session *out, xgr_error *err);
  int (*procs)(xgr_store *st, const char *owner, uint64_t root, xgr_store_proc **out, size_t *n, xgr_error *err);
  int (*history)(xgr_store *st, const char *owner, uint64_t root, xgr_store_hist **out, size_t *n, xgr_error *err);
  int (*load_live)(xgr_store *st, int (*fn)(void *, const xgr_store_live *), void *ctx, xgr_error *err);
  int (*doc_get)(xgr_store *st, xgr_registry_kind kind, const char *id, uint32_t version, const char *hash,
                 xgr_store_doc *out, xgr_error *err);
  int (*gc)(xgr_store *st, size_t *deleted, xgr_error *err);
  /* the owner's session rows below rootPid `before`, rootPid descending, at most limit (xgr_store_sessions) */
  int (*sessions)(xgr_store *st, const char *owner, uint64_t before, size_t limit, xgr_store_session **out, size_t *n,
                  xgr_error *err);
  /* the sum of stored_bytes over owner's session rows (xgr_store_owner_bytes) */
  int (*owner_bytes)(xgr_store *st, const char *owner, uint64_t *bytes, xgr_error *err);
  /* the owner's next expected rootPid (1 when it has none yet), without taking it */
  int (*peek_pid)(xgr_store *st, const char *owner, uint64_t *next, xgr_error *err);
  /* every outbox row, oldest first (xgr_store_outbox) */
  int (*outbox)(xgr_store *st, xgr_store_wake **out, size_t *n, xgr_error *err);
  /* the refused wake-ups a session produced, oldest first (xgr_store_wakes_refused) */
  int (*wakes_refused)(xgr_store *st, const char *owner, uint64_t root, xgr_store_wake **out, size_t *n,
                       xgr_error *err);
  /* the audit entries of a session in order (xgr_store_audits) */
  int (*audits)(xgr_store *st, const char *owner, uint64_t root, xgr_store_audit **out, size_t *n, xgr_error *err);
  /* the grants a filter selects, by id (xgr_store_grants) */
  int (*grants)(xgr_store *st, const xgr_store_grant_filter *f, xgr_store_grant **out, size_t *n, xgr_error *err);
  /* hibernation (xgr_store_load_some, xgr_store_due); NULL: not supported */
  int (*load_some)(xgr_store *st, const xgr_store_load_filter *f, int (*fn)(void *, const xgr_store_live *), void *ctx,
                   xgr_error *err);
  int (*due)(xgr_store *st, const xgr_store_due_key *after, int64_t upto, xgr_store_due_key *out, size_t max, size_t *n,
             xgr_error *err);
  /* the owners with live sessions (only `owner` unless NULL), most first, then by owner, at most max
   * (xgr_store_live_owners) */
  int (*live_owners)(xgr_store *st, const char *owner, size_t max, xgr_store_owner_live **out, size_t *n,
                     xgr_error *err);
  /* operations on many sessions (xgr_store_batchop_*; arguments checked and outs zeroed by store.c) */
  int (*bop_create)(xgr_store *st, const xgr_store_batchop *op, uint32_t max_running,
                    uint32_t max_kept, xgr_error *err);
  int (*bop_claim)(xgr_store *st, const char *node, int64_t lease_ms, bool force, xgr_store_batchop *out, bool *found,
                   xgr_error *err);
  int (*bop_progress)(xgr_store *st, const xgr_store_batchop *op, int64_t lease_ms, char *state, xgr_error *err);
  int (*bop_cancel)(xgr_store *st, const char *id, bool *changed, xgr_error *err);
  /* id set: that one (at most one; none: *n 0); else caller's (NULL: anyone's), newest first */
  int (*bop_read)(xgr_store *st, const char *id, const char *caller, size_t limit, xgr_store_batchop **out, size_t *n,
                  xgr_error *err);
  /* the owners with session rows after `after` ("": from the first), ascending, at most max
   * (xgr_store_owners_after; `live` 0) */
  int (*owners_after)(xgr_store *st, const char *after, size_t max, xgr_store_owner_live **out, size_t *n,
                      xgr_error *err);
} store_vt;

/* The common head of every backend's handle. */
struct xgr_store {
  const store_vt *vt;
  xgr_store_config cfg;
  int found_version, version;
  pthread_mutex_t mu;           /* guards failed, fail_err, stats */
  int failed;
  xgr_error fail_err;
  xgr_store_stats stats;
  _Atomic uint64_t grants_gen;  /* committed batches that wrote grants (xgr_store_grants_generation) */
};

/* store.c */
void xgr__store_init_common(xgr_store *st, const store_vt *vt, const xgr_store_config *cfg);
void xgr__store_destroy_common(xgr_store *st);
int64_t xgr__store_now_ms(const xgr_store *st);
/* Record a fatal error: the store refuses every later write. */
void xgr__store_set_failed(xgr_store *st, int code, const char *msg);
/* Signal b's callback with b->rc / b->err and free b. */
void xgr__store_signal(xgr_store *st, xgr_store_changes *b);
/* Deep copies of records (strings duplicated). */
void xgr__store_session_copy(xgr_store_session *dst, const xgr_store_session *src);
void xgr__store_proc_copy(xgr_store_proc *dst, const xgr_store_proc *src);
void xgr__store_hist_copy(xgr_store_hist *dst, const xgr_store_hist *src);
void xgr__store_doc_copy(xgr_store_doc *dst, const xgr_store_doc *src);
void xgr__store_wake_copy(xgr_store_wake *dst, const xgr_store_wake *src);
void xgr__store_audit_copy(xgr_store_audit *dst, const xgr_store_audit *src);
void xgr__store_batchop_copy(xgr_store_batchop *dst, const xgr_store_batchop *src);
void xgr__store_grant_copy(xgr_store_grant *dst, const xgr_store_grant *src);
/* A new registry record: hash computed (keccak-256 of content). */
int xgr__store_doc_hash(const char *content, size_t len, char out[67]);

/* backends */
xgr_store *xgr_store_memory_open(const xgr_store_config *cfg, xgr_error *err);
xgr_store *xgr_store_sqlite_open(const char *path, const xgr_store_config *cfg, xgr_error *err);
/* url: a libpq URI (postgresql://... or postgres://...) */
xgr_store *xgr_store_postgres_open(const char *url, const xgr_store_config *cfg, xgr_error *err);

/* ---- writer.c: the writer thread of the SQLite and PostgreSQL backends (one copy for both).
 *
 * Submitted batches wait in a queue; the writer takes everything queued when it looks and hands
 * it to the backend as one group (group commit), then signals each batch (xgr__store_signal) and
 * advances the flush tickets. When the queue is empty it runs retention in small steps: every
 * cfg.gc_interval_ms, again at once while a step says there is more, and as a full pass when
 * xgr_store_gc asks for one. The backend supplies the two steps that touch its database; the
 * writer owns the queue, the thread and the tickets. */
typedef struct xgr__writer {
  xgr_store *base;              /* the store whose batches these are (signalled through it) */
  /* Commit list[0..n) as one group on the writer thread; the writer signals them afterwards. */
  void (*commit)(void *ctx, xgr_store_changes **list, size_t n);
  /* One small retention step: rows deleted (or -1 with err set); *more when it hit its limit, or
   * (full: the step is part of a pass xgr_store_gc asked for) when the pass has more to look at. */
  long (*gc_step)(void *ctx, bool full, bool *more, xgr_error *err);
  void *ctx;
  pthread_t thread;
  bool has_thread;              /* false for a read-only store: submit is refused above, flush returns */
  pthread_mutex_t qmu;          /* guards the fields below */
  pthread_cond_t qcv;           /* writer: work arrived; waiters: batches signalled / gc done */
  xgr_store_changes *head, *tail;
  bool stop;
  uint64_t submitted, signalled;
  uint64_t gc_req, gc_done;
  size_t gc_last_deleted;
  int gc_rc;
  xgr_error gc_err;
} xgr__writer;

/* Set w up (no thread yet) for store base with the backend's two steps and their ctx. */
void xgr__writer_init(xgr__writer *w, xgr_store *base, void (*commit)(void *, xgr_store_changes **, size_t),
                      long (*gc_step)(void *, bool, bool *, xgr_error *), void *ctx);
/* Start the thread, named name (at most 15 characters); 0, or -1 when it cannot be created. */
int xgr__writer_start(xgr__writer *w, const char *name);
/* Queue batch b (ownership passes to the store until it is signalled). Any thread. */
void xgr__writer_submit(xgr__writer *w, xgr_store_changes *b);
/* Wait until every batch submitted before the call has been committed (or failed) and signalled. */
void xgr__writer_flush(xgr__writer *w);
/* A full retention pass on the writer thread; *deleted rows. XGR_EPERM without a thread. */
int xgr__writer_gc(xgr__writer *w, size_t *deleted, xgr_error *err);
/* Stop the thread after what is queued (and a requested full pass) is done; free w's locks. */
void xgr__writer_destroy(xgr__writer *w);

#endif
