/* sqlite_impl.h — private interface between the files of the SQLite store (src/store/sqlite*.c), one
 * concern a file, as SQLite's own source is split:
 *
 *   sqlite.c         the handle: open (connections, pragmas, the writer's statements), the writer
 *                    thread's callbacks, close, the error texts.
 *   sqlite_schema.c  the schema: the migrations, in order, and applying them.
 *   sqlite_write.c   the writer thread's work: applying batches in one transaction (group commit,
 *                    a faulty batch split off), and retention in small delete batches.
 *   sqlite_read.c    reading on the reader connection: sessions, processes, history, the outbox,
 *                    loading live sessions, the due index, registered documents.
 *
 * Not installed; only src/store/sqlite*.c include it.
 */
#ifndef XGR_STORE_SQLITE_IMPL_H
#define XGR_STORE_SQLITE_IMPL_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/store_impl.h"
#include "util/sqlite_col.h"

/* ---- rootPids -------------------------------------------------------------------------------- */

/* A rootPid (uint64) is stored as the signed integer of its bits with the top bit flipped
 * (v XOR 2^63), i.e. v - 2^63: SQLite compares integers as signed, and this keeps their order
 * the unsigned one (0 is INT64_MIN, 2^63 is 0, 2^64-1 is INT64_MAX), so `ORDER BY root_pid`,
 * `root_pid < :bound` and the owner counter's `next_root < :r` compare rootPids as numbers.
 * Being v - 2^63, it also commutes with +1 / -1 below 2^64-1. Every rootPid column (sessions,
 * proc_rt, proc_steps, proc_scopes .root_pid, outbox .from_root/.to_root, owners.next_root) goes
 * through this pair only; ROOT_FLIP_SQL is the same flip in SQL, for migration 8, which rewrote the
 * rows of schemas 1-7 (those kept the unflipped bits, so 2^63 and above sorted below 1). */
#define ROOT_FLIP (UINT64_C(1) << 63)
static inline sqlite3_int64 root_enc(uint64_t v) { return (sqlite3_int64)(v ^ ROOT_FLIP); }
static inline uint64_t root_dec(sqlite3_int64 v) { return (uint64_t)v ^ ROOT_FLIP; }
/* ---- the handle ------------------------------------------------------------------------------- */

enum {
  S_BEGIN, S_COMMIT, S_ROLLBACK, S_SESSION, S_SESSION_NEW, S_STATE, S_SCOPES_DEL, S_PROC, S_HIST, S_SCOPE, S_RM_PROCS,
  S_RM_SESSION, S_NEXTPID, S_OWNER_BUMP, S_GC_PROCS, S_GC_HIST, S_GC_SESS, S_GC_SCOPES, S_MARK, S_MARK_GC, S_WAKE_OUT, S_WAKE_DONE, S_WAKE_REFUSE, S_RM_REFUSED, S_GC_REFUSED, S_AUDIT, S_GC_AUDIT, S_FORKED, S_PIN, S_GRANT, S_GRANT_DEL, S_RM_GRANTS, S_GC_GRANTS, S_GC_BOPS, S_COUNT
};

/* The writer's statements (sqlite_write.c), prepared at open. */
extern const char *const xgr__sq_stmt_sql[S_COUNT];

/* A prepared statement and the index of each parameter name bound on it so far. Statements name
 * their parameters (`:owner`, `:root_pid`, ...) and are bound by name; SQLite finds a name by
 * scanning the statement's names with strncmp, which for the writer's statements (up to 20 names,
 * ~60 bindings per enqueued session) was a measurable part of the writer thread. So each name's
 * index is kept here, keyed by the name's address (open addressing): every name bound is a string
 * literal, whose address stays the same; the same name at another address is only another entry. */
#define PSLOTS 32
typedef struct pstmt {
  sqlite3_stmt *s;
  const char *name[PSLOTS];     /* NULL: a free slot */
  int ix[PSLOTS];
} pstmt;

typedef struct sqstore {
  xgr_store base;
  char *path;
  sqlite3 *w;                   /* writer connection (writer thread only after open) */
  sqlite3 *r;                   /* reader connection, under rmu */
  pthread_mutex_t rmu;           /* recursive */
  pstmt stmt[S_COUNT];            /* the writer's statements (writer thread only after open) */
  sqlite3_stmt *rstmt[2];       /* the reader's statements on an enqueue's path (R_*, under rmu),
                                   prepared at first use and reset after each */

  xgr__writer wr;               /* the writer thread and its queue (writer.c) */
  sqlite3 *b;                   /* batch operations' connection (sqlite_batch.c), under bmu; opened at first use */
  pthread_mutex_t bmu;
} sqstore;

/* ---- errors ----------------------------------------------------------------------------------- */

/* Is a SQLite result the batch's own fault (a constraint, bad data) rather than the store's? */
static inline bool batch_fault(int rc) {
  int p = rc & 0xff;
  return p == SQLITE_CONSTRAINT || p == SQLITE_MISMATCH || p == SQLITE_TOOBIG || p == SQLITE_RANGE;
}

/* ---- sqlite.c ---------------------------------------------------------------------------------- */

/* Set err from SQLite result rc on db (db may be NULL) for `what` on the store at path; returns
 * the xgr code: XGR_ECONFLICT / XGR_EINVAL for a batch's own fault, else XGR_EIO. */
int xgr__sq_error(sqlite3 *db, int rc, const char *path, const char *what, xgr_error *err);
/* Run sql on db; 0 or XGR_EIO with err set. */
int xgr__sq_exec(sqlite3 *db, const char *path, const char *sql, xgr_error *err);

/* ---- sqlite_schema.c ---------------------------------------------------------------------------- */

/* The schema version of the database on db into *v (0: empty); XGR_EINVAL for a database that is
 * not an xgr store. */
int xgr__sq_schema_version(sqlite3 *db, const char *path, int *v, xgr_error *err);
/* Apply the migrations after version `from` on the writer connection, each in its own transaction. */
int xgr__sq_migrate(sqstore *q, int from, xgr_error *err);

/* ---- sqlite_write.c ----------------------------------------------------------------------------- */

/* The writer thread's two steps (store_impl.h): commit a group of batches, one retention step. */
void xgr__sq_commit_group(sqstore *q, xgr_store_changes **list, size_t n);
long xgr__sq_gc_step(sqstore *q, bool full, bool *more, xgr_error *err);

/* ---- sqlite_read.c ------------------------------------------------------------------------------ */

/* The vtable's reads (store_impl.h's store_vt, same contracts), on the reader connection under rmu. */
int xgr__sq_session_get(xgr_store *st, const char *owner, uint64_t root, xgr_store_session *out, xgr_error *err);
int xgr__sq_peek_pid(xgr_store *st, const char *owner, uint64_t *next, xgr_error *err);
int xgr__sq_owner_bytes(xgr_store *st, const char *owner, uint64_t *bytes, xgr_error *err);
int xgr__sq_outbox(xgr_store *st, xgr_store_wake **out, size_t *n, xgr_error *err);
int xgr__sq_wakes_refused(xgr_store *st, const char *owner, uint64_t root, xgr_store_wake **out, size_t *n,
                          xgr_error *err);
int xgr__sq_grants(xgr_store *st, const xgr_store_grant_filter *f, xgr_store_grant **out, size_t *n, xgr_error *err);
int xgr__sq_audits(xgr_store *st, const char *owner, uint64_t root, xgr_store_audit **out, size_t *n, xgr_error *err);
int xgr__sq_procs(xgr_store *st, const char *owner, uint64_t root, xgr_store_proc **out, size_t *n, xgr_error *err);
int xgr__sq_history(xgr_store *st, const char *owner, uint64_t root, xgr_store_hist **out, size_t *n, xgr_error *err);
int xgr__sq_sessions(xgr_store *st, const char *owner, uint64_t before, size_t limit, xgr_store_session **out,
                       size_t *n, xgr_error *err);
int xgr__sq_owners_after(xgr_store *st, const char *after, size_t max, xgr_store_owner_live **out, size_t *n,
                         xgr_error *err);
int xgr__sq_live_owners(xgr_store *st, const char *owner, size_t max, xgr_store_owner_live **out, size_t *n,
                          xgr_error *err);
int xgr__sq_load_some(xgr_store *st, const xgr_store_load_filter *f, int (*fn)(void *, const xgr_store_live *),
                        void *ctx, xgr_error *err);
int xgr__sq_load_live(xgr_store *st, int (*fn)(void *, const xgr_store_live *), void *ctx, xgr_error *err);
int xgr__sq_due(xgr_store *st, const xgr_store_due_key *after, int64_t upto, xgr_store_due_key *out, size_t max,
                  size_t *n, xgr_error *err);
int xgr__sq_doc_get(xgr_store *st, xgr_registry_kind kind, const char *id, uint32_t version, const char *hash,
                      xgr_store_doc *out, xgr_error *err);
/* Finalize the reader's kept statements (close). */
void xgr__sq_read_close(sqstore *q);

/* ---- sqlite_batch.c ----------------------------------------------------------------------------- */

/* The vtable's batch operations (store_vt.bop_*), on a connection of their own under bmu. */
int xgr__sq_bop_create(xgr_store *st, const xgr_store_batchop *op, uint32_t max_running, uint32_t max_kept,
                        xgr_error *err);
int xgr__sq_bop_claim(xgr_store *st, const char *node, int64_t lease_ms, bool force, xgr_store_batchop *out,
                      bool *found, xgr_error *err);
int xgr__sq_bop_progress(xgr_store *st, const xgr_store_batchop *op, int64_t lease_ms, char *state, xgr_error *err);
int xgr__sq_bop_cancel(xgr_store *st, const char *id, bool *changed, xgr_error *err);
int xgr__sq_bop_read(xgr_store *st, const char *id, const char *caller, size_t limit, xgr_store_batchop **out,
                     size_t *n, xgr_error *err);

/* ---- binding helpers (writer and reader) -------------------------------------------------------- */

/* ---- binding helpers ------------------------------------------------------------------------- */

/* The index of parameter `name` (a string literal: see pstmt) in p's statement. Every name bound
 * is in the statement's text (asserted). */
static inline int ix(pstmt *p, const char *name) {
  size_t h = (size_t)(((uintptr_t)name * UINT64_C(0x9E3779B97F4A7C15)) >> 59);   /* 5 bits: PSLOTS */
  for (size_t k = 0; k < PSLOTS; k++, h = (h + 1) & (PSLOTS - 1)) {
    if (p->name[h] == name) return p->ix[h];
    if (!p->name[h]) {
      int i = sqlite3_bind_parameter_index(p->s, name);
      assert(i > 0 && "a parameter the statement does not name");
      p->name[h] = name;
      p->ix[h] = i;
      return i;
    }
  }
  return sqlite3_bind_parameter_index(p->s, name);   /* more names than slots: not cached */
}
/* Text (NULL binds SQL NULL); borrowed until the statement is reset. */
static inline void bind_text(pstmt *p, const char *name, const char *t) {
  if (t) sqlite3_bind_text(p->s, ix(p, name), t, -1, SQLITE_STATIC);
  else sqlite3_bind_null(p->s, ix(p, name));
}
static inline void bind_i64(pstmt *p, const char *name, int64_t v) { sqlite3_bind_int64(p->s, ix(p, name), v); }
/* uint64 values other than rootPids are stored as SQLite's int64 of the same bits. */
static inline void bind_u64(pstmt *p, const char *name, uint64_t v) {
  sqlite3_bind_int64(p->s, ix(p, name), (sqlite3_int64)v);
}
/* rootPids: in their order-preserving encoding (root_enc) */
static inline void bind_root(pstmt *p, const char *name, uint64_t v) { sqlite3_bind_int64(p->s, ix(p, name), root_enc(v)); }
static inline uint64_t col_root(sqlite3_stmt *s, int i) { return root_dec(sqlite3_column_int64(s, i)); }
static inline void bind_int(pstmt *p, const char *name, int v) { sqlite3_bind_int(p->s, ix(p, name), v); }
static inline void bind_null(pstmt *p, const char *name) { sqlite3_bind_null(p->s, ix(p, name)); }
/* Bytes, borrowed until the statement is reset. */
static inline void bind_blob(pstmt *p, const char *name, const void *b, int n) {
  sqlite3_bind_blob(p->s, ix(p, name), b, n, SQLITE_STATIC);
}

static inline char *col_text(sqlite3_stmt *s, int i) { return xgr__sqlite_col_text(s, i); }

/* Run a prepared statement to completion (no rows expected). */
static inline int step_done(pstmt *p) {
  int rc = sqlite3_step(p->s);
  sqlite3_reset(p->s);
  sqlite3_clear_bindings(p->s);
  return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}


#endif
