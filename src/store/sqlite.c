/* sqlite.c — the SQLite store: one database file in WAL mode, a versioned schema with
 * migrations, one writer thread doing group commit, and retention in small delete batches
 * between commits. docs/STORE.md is the long version; in short:
 *
 *   connections  `w` belongs to the writer thread (every write); `r` serves reads under a mutex.
 *   group commit the writer takes every queued batch, applies all of them in one transaction
 *                (BEGIN IMMEDIATE … COMMIT) and signals each after COMMIT returned. If one batch
 *                violates a constraint (a history row twice), the transaction is rolled back
 *                and the batches are applied again one transaction each, so only the bad one
 *                fails. An I/O error (disk full, read-only, I/O) rolls back and puts the store in
 *                the failed state: that batch and every later one fail with a clear error.
 *   retention    when no batch waits, the writer runs one small retention step (at most
 *                gc_batch rows per table per transaction) every gc_interval_ms, and keeps going
 *                while rows are due and no batch waits — so commits are never held up long.
 *   migrations   schema_version holds one row per applied migration; the list below is applied
 *                in order from the version found, each in its own transaction.
 */
#include <assert.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "util/sqlite_col.h"
#include "store/store_impl.h"

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
static sqlite3_int64 root_enc(uint64_t v) { return (sqlite3_int64)(v ^ ROOT_FLIP); }
static uint64_t root_dec(sqlite3_int64 v) { return (uint64_t)v ^ ROOT_FLIP; }
/* column c with its top bit flipped (& and | are exact on 64 bits; -9223372036854775807 - 1 is INT64_MIN) */
#define ROOT_FLIP_SQL(c) "(CASE WHEN " c " < 0 THEN " c " & 9223372036854775807 ELSE " c " | (-9223372036854775807 - 1) END)"
/* rewrite table t's root_pid column, which is part of its primary key: the flip maps some rows onto
 * others' old keys (1 and 2^63+1), so the rows are copied out and back rather than updated in place */
#define ROOT_FLIP_TABLE(t)                                                                              \
  "CREATE TEMP TABLE m8 AS SELECT * FROM " t ";"                                                        \
  "UPDATE m8 SET root_pid = " ROOT_FLIP_SQL("root_pid") ";"                                             \
  "DELETE FROM " t ";"                                                                                  \
  "INSERT INTO " t " SELECT * FROM m8;"                                                                 \
  "DROP TABLE m8;"

/* ---- schema ----------------------------------------------------------------------------------- */

/* Migration i (1-based) brings the schema from version i-1 to i. Never edit an entry once it
 * shipped: add a new one. */
static const char *const migrations[] = {
    /* 1: the first schema */
    "CREATE TABLE owners(owner TEXT PRIMARY KEY, next_root INTEGER NOT NULL);"
    "CREATE TABLE orchestrations(id TEXT NOT NULL, version INTEGER NOT NULL, hash TEXT NOT NULL,"
    "  owner TEXT NOT NULL, registered_at INTEGER NOT NULL, content BLOB NOT NULL, PRIMARY KEY(id, version));"
    "CREATE INDEX orchestrations_hash ON orchestrations(hash);"
    "CREATE TABLE rules(id TEXT NOT NULL, version INTEGER NOT NULL, hash TEXT NOT NULL,"
    "  owner TEXT NOT NULL, registered_at INTEGER NOT NULL, content BLOB NOT NULL, PRIMARY KEY(id, version));"
    "CREATE INDEX rules_hash ON rules(hash);"
    "CREATE TABLE sessions(owner TEXT NOT NULL, root_pid INTEGER NOT NULL, registry TEXT NOT NULL DEFAULT '',"
    "  ostc_id TEXT NOT NULL, ostc_hash TEXT NOT NULL, status INTEGER NOT NULL, killed_at INTEGER NOT NULL DEFAULT 0,"
    "  created_at INTEGER NOT NULL, finished_at INTEGER NOT NULL DEFAULT 0, next_iter INTEGER NOT NULL,"
    "  paused INTEGER NOT NULL DEFAULT 0, PRIMARY KEY(owner, root_pid));"
    "CREATE TABLE proc_rt(owner TEXT NOT NULL, root_pid INTEGER NOT NULL, iter INTEGER NOT NULL,"
    "  parent_iter INTEGER NOT NULL, step INTEGER NOT NULL, step_id TEXT NOT NULL, status INTEGER NOT NULL,"
    "  paused INTEGER NOT NULL, valid INTEGER NOT NULL, abort_reason INTEGER NOT NULL, join_group INTEGER NOT NULL,"
    "  join_from_group INTEGER NOT NULL, next_wake_at INTEGER NOT NULL, created_at INTEGER NOT NULL,"
    "  started_at INTEGER NOT NULL, finished_at INTEGER NOT NULL, payload TEXT NOT NULL, error TEXT,"
    "  join_state TEXT, terminal_at INTEGER, PRIMARY KEY(owner, root_pid, iter)) WITHOUT ROWID;"
    "CREATE TABLE proc_steps(owner TEXT NOT NULL, root_pid INTEGER NOT NULL, iter INTEGER NOT NULL,"
    "  parent_iter INTEGER NOT NULL, step INTEGER NOT NULL, step_id TEXT NOT NULL, status INTEGER NOT NULL,"
    "  valid INTEGER NOT NULL, abort_reason INTEGER NOT NULL, at INTEGER NOT NULL, finished_at INTEGER NOT NULL,"
    "  error TEXT, payload TEXT, recorded_at INTEGER NOT NULL, PRIMARY KEY(owner, root_pid, iter)) WITHOUT ROWID;",
    /* 2: recovery of join groups and of kill-closed scopes; indexes for retention */
    "ALTER TABLE sessions ADD COLUMN next_group INTEGER NOT NULL DEFAULT 1;"
    "UPDATE sessions SET next_group = 1 + (SELECT COALESCE(MAX(MAX(r.join_group, r.join_from_group)), 0)"
    "  FROM proc_rt r WHERE r.owner = sessions.owner AND r.root_pid = sessions.root_pid);"
    "CREATE TABLE proc_scopes(owner TEXT NOT NULL, root_pid INTEGER NOT NULL, grp INTEGER NOT NULL,"
    "  PRIMARY KEY(owner, root_pid, grp)) WITHOUT ROWID;"
    "INSERT INTO proc_scopes SELECT owner, root_pid, join_from_group FROM proc_rt"
    "  WHERE join_state IS NOT NULL AND json_extract(join_state, '$.closed') = 1 AND join_from_group > 0"
    "  AND (SELECT status FROM sessions s WHERE s.owner = proc_rt.owner AND s.root_pid = proc_rt.root_pid) = 0;"
    "CREATE INDEX proc_rt_terminal ON proc_rt(terminal_at) WHERE terminal_at IS NOT NULL;"
    "CREATE INDEX proc_steps_recorded ON proc_steps(recorded_at);"
    "CREATE INDEX sessions_finished ON sessions(finished_at) WHERE status <> 0;",
    /* 3: single-use marks (used control permits until their expiry) */
    ("CREATE TABLE marks(key TEXT PRIMARY KEY, expires_at INTEGER NOT NULL) WITHOUT ROWID;"
     "CREATE INDEX marks_expiry ON marks(expires_at);"),
    /* 4: the gas budget of the SessionPermit that started a session */
    "ALTER TABLE sessions ADD COLUMN max_total_gas TEXT NOT NULL DEFAULT '';",
    /* 5: what a step's API calls did (status, time, masked URL, error), kept with its history row */
    "ALTER TABLE proc_steps ADD COLUMN api TEXT;",
    /* 6: the outbox of internal wake-ups (issue 14): written with the producing step's result,
     * deleted with the target's change that applied or refused it */
    ("CREATE TABLE outbox(id TEXT PRIMARY KEY, from_owner TEXT NOT NULL, from_root INTEGER NOT NULL,"
     "  to_owner TEXT NOT NULL, to_root INTEGER NOT NULL, step TEXT NOT NULL, caller TEXT NOT NULL, rule TEXT,"
     "  payload TEXT NOT NULL, created_at INTEGER NOT NULL, refused TEXT, refused_at INTEGER);"
     "CREATE INDEX outbox_refused ON outbox(from_owner, from_root) WHERE refused IS NOT NULL;"),
    /* 7: hibernation: the due time of a hibernated session's next timer (NULL: awake), indexed */
    ("ALTER TABLE sessions ADD COLUMN wake_due INTEGER;"
     "CREATE INDEX sessions_wake_due ON sessions(wake_due, owner, root_pid) WHERE status = 0 AND wake_due IS NOT NULL;"
     "CREATE INDEX sessions_awake ON sessions(owner, root_pid) WHERE status = 0 AND wake_due IS NULL;"),
    /* 8: rootPids in the order-preserving encoding (see root_enc): every rootPid column rewritten, then
     * each owner's counter raised past its largest rootPid (below 2^64-1), which the old encoding
     * could leave behind (raising 2 to 2^63+1 compared -9223372036854775807 < 2) */
    (ROOT_FLIP_TABLE("sessions") ROOT_FLIP_TABLE("proc_rt") ROOT_FLIP_TABLE("proc_steps") ROOT_FLIP_TABLE("proc_scopes")
     "UPDATE outbox SET from_root = " ROOT_FLIP_SQL("from_root") ", to_root = " ROOT_FLIP_SQL("to_root") ";"
     "UPDATE owners SET next_root = " ROOT_FLIP_SQL("next_root") ";"
     "INSERT INTO owners(owner, next_root) SELECT owner, MAX(root_pid) + 1 FROM sessions"
     "  WHERE root_pid < 9223372036854775807 GROUP BY owner"
     "  ON CONFLICT(owner) DO UPDATE SET next_root = excluded.next_root WHERE next_root < excluded.next_root;"
     /* ... and the outbox names the process and step that sent a wake-up, so that a refusal's
      * history row says which step's wake-up it was (NULL in rows written before) */
     "ALTER TABLE outbox ADD COLUMN from_iter INTEGER;"
     "ALTER TABLE outbox ADD COLUMN from_step TEXT;"),
    /* 9: cluster leases (issue 18, docs/CLUSTER.md): the same columns as PostgreSQL's, unused here
     * (a SQLite store has one node) */
    ("ALTER TABLE sessions ADD COLUMN lease_owner TEXT;"
     "ALTER TABLE sessions ADD COLUMN lease_epoch INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE sessions ADD COLUMN lease_expires INTEGER NOT NULL DEFAULT 0;"),
    /* 10: the nodes of a cluster (PostgreSQL's table, unused here) */
    "CREATE TABLE nodes(node TEXT PRIMARY KEY, seen_at INTEGER NOT NULL, expires_at INTEGER NOT NULL);",
    /* 11: PostgreSQL's storage settings for in-place updates (its proc_rt loses the terminal_at
     * index); SQLite keeps its schema: a rewritten row costs the same here either way */
    "SELECT 11;",
    /* 12: PostgreSQL keeps the record of a process ended by a step's result with its history row
     * (one row write fewer per step); SQLite keeps its layout */
    "SELECT 12;",
};
#define NMIGRATIONS ((int)(sizeof migrations / sizeof migrations[0]))
_Static_assert(sizeof migrations / sizeof migrations[0] == XGR_STORE_SCHEMA_VERSION, "one migration per version");

/* ---- the handle ------------------------------------------------------------------------------- */

enum {
  S_BEGIN, S_COMMIT, S_ROLLBACK, S_SESSION, S_SESSION_NEW, S_STATE, S_SCOPES_DEL, S_PROC, S_HIST, S_SCOPE, S_RM_PROCS,
  S_RM_SESSION, S_NEXTPID, S_OWNER_BUMP, S_GC_PROCS, S_GC_HIST, S_GC_SESS, S_GC_SCOPES, S_MARK, S_MARK_GC, S_WAKE_OUT, S_WAKE_DONE, S_WAKE_REFUSE, S_RM_REFUSED, S_GC_REFUSED, S_COUNT
};

static const char *const stmt_sql[S_COUNT] = {
    [S_BEGIN] = "BEGIN IMMEDIATE",
    [S_COMMIT] = "COMMIT",
    [S_ROLLBACK] = "ROLLBACK",
    [S_SESSION] = "INSERT INTO sessions(owner, root_pid, registry, ostc_id, ostc_hash, status, killed_at, created_at,"
                  " finished_at, next_iter, paused, next_group, max_total_gas)"
                  " VALUES(:owner, :root_pid, :registry, :ostc_id, :ostc_hash, :status, :killed_at, :created_at,"
                  " :finished_at, :next_iter, :paused, :next_group, :max_total_gas)"
                  " ON CONFLICT(owner, root_pid) DO UPDATE SET registry=excluded.registry, ostc_id=excluded.ostc_id,"
                  " ostc_hash=excluded.ostc_hash, status=excluded.status, killed_at=excluded.killed_at,"
                  " finished_at=excluded.finished_at, next_iter=excluded.next_iter, paused=excluded.paused,"
                  " next_group=excluded.next_group",
    [S_SESSION_NEW] = "INSERT INTO sessions(owner, root_pid, registry, ostc_id, ostc_hash, status, killed_at,"
                      " created_at, finished_at, next_iter, paused, next_group, max_total_gas)"
                      " VALUES(:owner, :root_pid, :registry, :ostc_id, :ostc_hash, :status, :killed_at, :created_at,"
                      " :finished_at, :next_iter, :paused, :next_group, :max_total_gas)"
                      " ON CONFLICT(owner, root_pid) DO NOTHING",
    [S_STATE] = "UPDATE sessions SET status=:status, killed_at=:killed_at, next_iter=:next_iter,"
                " next_group=:next_group, paused=:paused, wake_due=:wake_due,"
                " finished_at=CASE WHEN :status <> 0 AND status = 0 THEN :now ELSE finished_at END"
                " WHERE owner=:owner AND root_pid=:root_pid",
    [S_SCOPES_DEL] = "DELETE FROM proc_scopes WHERE owner=:owner AND root_pid=:root_pid",
    [S_PROC] = "INSERT INTO proc_rt(owner, root_pid, iter, parent_iter, step, step_id, status, paused, valid,"
               " abort_reason, join_group, join_from_group, next_wake_at, created_at, started_at, finished_at,"
               " payload, error, join_state, terminal_at)"
               " VALUES(:owner, :root_pid, :iter, :parent_iter, :step, :step_id, :status, :paused, :valid,"
               " :abort_reason, :join_group, :join_from_group, :next_wake_at, :created_at, :started_at,"
               " :finished_at, :payload, :error, :join_state, :terminal_at)"
               " ON CONFLICT(owner, root_pid, iter) DO UPDATE SET parent_iter=excluded.parent_iter,"
               " step=excluded.step, step_id=excluded.step_id, status=excluded.status, paused=excluded.paused,"
               " valid=excluded.valid, abort_reason=excluded.abort_reason, join_group=excluded.join_group,"
               " join_from_group=excluded.join_from_group, next_wake_at=excluded.next_wake_at,"
               " created_at=excluded.created_at, started_at=excluded.started_at, finished_at=excluded.finished_at,"
               " payload=excluded.payload, error=excluded.error, join_state=excluded.join_state,"
               " terminal_at=excluded.terminal_at",
    [S_HIST] = "INSERT INTO proc_steps(owner, root_pid, iter, parent_iter, step, step_id, status, valid,"
               " abort_reason, at, finished_at, error, payload, recorded_at, api)"
               " VALUES(:owner, :root_pid, :iter, :parent_iter, :step, :step_id, :status, :valid, :abort_reason,"
               " :at, :finished_at, :error, :payload, :recorded_at, :api)",
    [S_SCOPE] = "INSERT OR IGNORE INTO proc_scopes(owner, root_pid, grp) VALUES(:owner,:root_pid,:grp)",
    [S_RM_PROCS] = "DELETE FROM proc_rt WHERE owner=:owner AND root_pid=:root_pid",
    [S_RM_SESSION] = "DELETE FROM sessions WHERE owner=:owner AND root_pid=:root_pid",
    /* a session started with rootPid R: the owner's next expected rootPid becomes at least R + 1 */
    [S_OWNER_BUMP] = "INSERT INTO owners(owner, next_root) VALUES(:owner, :next_root) ON CONFLICT(owner)"
                     " DO UPDATE SET next_root = excluded.next_root WHERE next_root < excluded.next_root",
    /* (:second is rootPid 2, encoded; a counter at 2^64-1 stays there: no row comes back) */
    [S_NEXTPID] = "INSERT INTO owners(owner, next_root) VALUES(:owner, :second) ON CONFLICT(owner)"
                  " DO UPDATE SET next_root = next_root + 1 WHERE next_root < 9223372036854775807"
                  " RETURNING next_root - 1",
    /* a mark is inserted, or replaces one that expired; no change: used */
    [S_MARK] = "INSERT INTO marks(key, expires_at) VALUES(:key, :expires_at) ON CONFLICT(key) DO UPDATE SET"
               " expires_at = excluded.expires_at WHERE marks.expires_at <= :now",
    [S_WAKE_OUT] = "INSERT OR IGNORE INTO outbox(id, from_owner, from_root, to_owner, to_root, step, caller, rule,"
                   " payload, created_at, from_iter, from_step) VALUES(:id, :from_owner, :from_root, :to_owner, :to_root,"
                   " :step, :caller, :rule, :payload, :created_at, :from_iter, :from_step)",
    [S_WAKE_DONE] = "DELETE FROM outbox WHERE id = :id AND refused IS NULL",
    [S_WAKE_REFUSE] = "UPDATE outbox SET refused = :reason, refused_at = :now WHERE id = :id AND refused IS NULL",
    [S_GC_REFUSED] = "DELETE FROM outbox WHERE rowid IN (SELECT rowid FROM outbox WHERE refused IS NOT NULL AND"
                     " refused_at <= :before LIMIT :limit)",
    [S_RM_REFUSED] = "DELETE FROM outbox WHERE from_owner = :owner AND from_root = :root_pid AND refused IS NOT NULL",
    [S_MARK_GC] = "DELETE FROM marks WHERE key IN (SELECT key FROM marks WHERE expires_at <= :now LIMIT 64)",
    [S_GC_PROCS] = "DELETE FROM proc_rt WHERE (owner, root_pid, iter) IN (SELECT owner, root_pid, iter FROM proc_rt"
                   " WHERE terminal_at IS NOT NULL AND terminal_at <= :before LIMIT :limit)",
    [S_GC_HIST] = "DELETE FROM proc_steps WHERE (owner, root_pid, iter) IN (SELECT owner, root_pid, iter FROM"
                  " proc_steps WHERE recorded_at <= :before LIMIT :limit)",
    [S_GC_SESS] = "DELETE FROM sessions WHERE rowid IN (SELECT rowid FROM sessions WHERE status <> 0 AND"
                  " finished_at <= :before LIMIT :limit)",
    [S_GC_SCOPES] = "DELETE FROM proc_scopes WHERE (owner, root_pid, grp) IN (SELECT s.owner, s.root_pid, s.grp"
                    " FROM proc_scopes s WHERE NOT EXISTS (SELECT 1 FROM proc_rt r WHERE r.owner = s.owner AND"
                    " r.root_pid = s.root_pid AND r.join_group = s.grp AND r.status < 2) LIMIT :limit)",
};

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
} sqstore;

/* ---- errors --------------------------------------------------------------------------------- */

/* Is a SQLite result the batch's own fault (a constraint, bad data) rather than the store's? */
static bool batch_fault(int rc) {
  int p = rc & 0xff;
  return p == SQLITE_CONSTRAINT || p == SQLITE_MISMATCH || p == SQLITE_TOOBIG || p == SQLITE_RANGE;
}

static int sq_error(sqlite3 *db, int rc, const char *path, const char *what, xgr_error *err) {
  int p = rc & 0xff;
  const char *hint = p == SQLITE_FULL ? " (the disk or the database's size limit is full)"
                     : p == SQLITE_READONLY ? " (the file or its directory is read-only)"
                     : p == SQLITE_CANTOPEN ? " (the file or its directory cannot be opened)"
                     : p == SQLITE_NOTADB || p == SQLITE_CORRUPT ? " (not an xgr store or damaged)"
                     : p == SQLITE_BUSY ? " (another process holds the database lock)" : "";
  int code = batch_fault(rc) ? (p == SQLITE_CONSTRAINT ? XGR_ECONFLICT : XGR_EINVAL) : XGR_EIO;
  return xgr_error_set(err, code, NULL, "store %s: %s: %s%s", path, what, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc),
                       hint);
}

static int exec_sql(sqlite3 *db, const char *path, const char *sql, xgr_error *err) {
  char *msg = NULL;
  int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
  if (rc == SQLITE_OK) return 0;
  xgr_error_set(err, XGR_EIO, NULL, "store %s: %s%s", path, msg ? msg : sqlite3_errstr(rc),
                (rc & 0xff) == SQLITE_READONLY ? " (the file or its directory is read-only)"
                : (rc & 0xff) == SQLITE_FULL ? " (the disk or the database's size limit is full)" : "");
  sqlite3_free(msg);
  return XGR_EIO;
}

/* ---- binding helpers ------------------------------------------------------------------------- */

/* The index of parameter `name` (a string literal: see pstmt) in p's statement. Every name bound
 * is in the statement's text (asserted). */
static int ix(pstmt *p, const char *name) {
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
static void bind_text(pstmt *p, const char *name, const char *t) {
  if (t) sqlite3_bind_text(p->s, ix(p, name), t, -1, SQLITE_STATIC);
  else sqlite3_bind_null(p->s, ix(p, name));
}
static void bind_i64(pstmt *p, const char *name, int64_t v) { sqlite3_bind_int64(p->s, ix(p, name), v); }
/* uint64 values other than rootPids are stored as SQLite's int64 of the same bits. */
static void bind_u64(pstmt *p, const char *name, uint64_t v) {
  sqlite3_bind_int64(p->s, ix(p, name), (sqlite3_int64)v);
}
/* rootPids: in their order-preserving encoding (root_enc) */
static void bind_root(pstmt *p, const char *name, uint64_t v) { sqlite3_bind_int64(p->s, ix(p, name), root_enc(v)); }
static uint64_t col_root(sqlite3_stmt *s, int i) { return root_dec(sqlite3_column_int64(s, i)); }
static void bind_int(pstmt *p, const char *name, int v) { sqlite3_bind_int(p->s, ix(p, name), v); }
static void bind_null(pstmt *p, const char *name) { sqlite3_bind_null(p->s, ix(p, name)); }
/* Bytes, borrowed until the statement is reset. */
static void bind_blob(pstmt *p, const char *name, const void *b, int n) {
  sqlite3_bind_blob(p->s, ix(p, name), b, n, SQLITE_STATIC);
}

static char *col_text(sqlite3_stmt *s, int i) { return xgr__sqlite_col_text(s, i); }

/* Run a prepared statement to completion (no rows expected). */
static int step_done(pstmt *p) {
  int rc = sqlite3_step(p->s);
  sqlite3_reset(p->s);
  sqlite3_clear_bindings(p->s);
  return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

/* ---- applying batches (writer thread) -------------------------------------------------------- */

static int apply_register(sqstore *q, xgr_store_doc *d) {
  const char *table = d->kind == XGR_REG_RULE ? "rules" : "orchestrations";
  char sql[256];
  pstmt p = {0};   /* prepared here: registrations are rare */
  snprintf(sql, sizeof sql,
           "SELECT version, owner, registered_at FROM %s WHERE id=:id AND hash=:hash ORDER BY version LIMIT 1", table);
  int rc = sqlite3_prepare_v2(q->w, sql, -1, &p.s, NULL);
  if (rc) return rc;
  sqlite3_stmt *s = p.s;
  bind_text(&p, ":id", d->id);
  bind_text(&p, ":hash", d->hash);
  rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) {   /* the same bytes again: that version */
    d->version = (uint32_t)sqlite3_column_int64(s, 0);
    free(d->owner);
    d->owner = col_text(s, 1);
    d->registered_at = sqlite3_column_int64(s, 2);
    sqlite3_finalize(s);
    return SQLITE_OK;
  }
  sqlite3_finalize(s);
  if (rc != SQLITE_DONE) return rc;
  snprintf(sql, sizeof sql,
           "INSERT INTO %s(id, version, hash, owner, registered_at, content) VALUES(:id,"
           " (SELECT COALESCE(MAX(version), 0) + 1 FROM %s WHERE id=:id), :hash, :owner, :registered_at, :content)"
           " RETURNING version", table, table);
  p = (pstmt){0};
  rc = sqlite3_prepare_v2(q->w, sql, -1, &p.s, NULL);
  if (rc) return rc;
  s = p.s;
  bind_text(&p, ":id", d->id);
  bind_text(&p, ":hash", d->hash);
  bind_text(&p, ":owner", d->owner);
  bind_i64(&p, ":registered_at", d->registered_at);
  bind_blob(&p, ":content", d->content, (int)d->len);
  rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) {
    d->version = (uint32_t)sqlite3_column_int64(s, 0);
    rc = sqlite3_step(s);
  }
  sqlite3_finalize(s);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* apply_op: an if_absent session row found its session already there (nothing was written). */
#define RC_EXISTS 0x7fff0001

static int apply_op(sqstore *q, store_op *op, int64_t now) {
  pstmt *s;
  switch (op->kind) {
    case OP_SESSION: {
      const xgr_store_session *x = &op->u.session;
      s = &q->stmt[op->if_absent ? S_SESSION_NEW : S_SESSION];
      bind_text(s, ":owner", x->owner);
      bind_root(s, ":root_pid", x->root_pid);
      bind_text(s, ":registry", x->registry);
      bind_text(s, ":ostc_id", x->ostc_id);
      bind_text(s, ":ostc_hash", x->ostc_hash);
      bind_i64(s, ":status", x->status);
      bind_i64(s, ":killed_at", x->killed_at);
      bind_i64(s, ":created_at", x->created_at ? x->created_at : now);
      bind_i64(s, ":finished_at", x->status != XGR_RESULT_RUNNING ? (x->finished_at ? x->finished_at : now) : 0);
      bind_u64(s, ":next_iter", x->next_iter);
      bind_i64(s, ":paused", x->paused);
      bind_i64(s, ":next_group", x->next_group);
      bind_text(s, ":max_total_gas", x->max_total_gas ? x->max_total_gas : "");
      int rc = step_done(s);
      if (rc == SQLITE_OK && op->if_absent && sqlite3_changes(q->w) == 0) return RC_EXISTS;
      if (rc != SQLITE_OK || x->root_pid == UINT64_MAX) return rc;
      s = &q->stmt[S_OWNER_BUMP];
      bind_text(s, ":owner", x->owner);
      bind_root(s, ":next_root", x->root_pid + 1);
      return step_done(s);
    }
    case OP_STATE: {
      s = &q->stmt[S_STATE];
      bind_text(s, ":owner", op->owner);
      bind_root(s, ":root_pid", op->root);
      bind_i64(s, ":status", op->u.state.status);
      bind_i64(s, ":killed_at", op->u.state.killed_at);
      bind_u64(s, ":next_iter", op->u.state.next_iter);
      bind_i64(s, ":next_group", op->u.state.next_group);
      bind_i64(s, ":paused", op->u.state.paused);
      if (op->u.state.due) bind_i64(s, ":wake_due", op->u.state.due);
      else bind_null(s, ":wake_due");
      bind_i64(s, ":now", now);
      int rc = step_done(s);
      if (rc || op->u.state.status == XGR_RESULT_RUNNING) return rc;
      s = &q->stmt[S_SCOPES_DEL];   /* killed scopes matter only while the session lives */
      bind_text(s, ":owner", op->owner);
      bind_root(s, ":root_pid", op->root);
      return step_done(s);
    }
    case OP_PROC: {
      const xgr_store_proc *p = &op->u.proc;
      s = &q->stmt[S_PROC];
      bind_text(s, ":owner", op->owner);
      bind_root(s, ":root_pid", op->root);
      bind_u64(s, ":iter", p->iter);
      bind_u64(s, ":parent_iter", p->parent_iter);
      bind_i64(s, ":step", p->step);
      bind_text(s, ":step_id", p->step_id ? p->step_id : "");
      bind_i64(s, ":status", p->status);
      bind_i64(s, ":paused", p->paused);
      bind_i64(s, ":valid", p->valid);
      bind_i64(s, ":abort_reason", p->abort_reason);
      bind_i64(s, ":join_group", p->group);
      bind_i64(s, ":join_from_group", p->from_group);
      bind_i64(s, ":next_wake_at", p->next_wake_at);
      bind_i64(s, ":created_at", p->created_at);
      bind_i64(s, ":started_at", p->started_at);
      bind_i64(s, ":finished_at", p->finished_at);
      bind_text(s, ":payload", p->payload ? p->payload : "{}");
      bind_text(s, ":error", p->error);
      bind_text(s, ":join_state", p->join);
      if (p->status >= XGR_PROC_DONE) bind_i64(s, ":terminal_at", now);
      else bind_null(s, ":terminal_at");
      return step_done(s);
    }
    case OP_HIST: {
      const xgr_store_hist *h = &op->u.hist;
      s = &q->stmt[S_HIST];
      bind_text(s, ":owner", op->owner);
      bind_root(s, ":root_pid", op->root);
      bind_u64(s, ":iter", h->iter);
      bind_u64(s, ":parent_iter", h->parent_iter);
      bind_i64(s, ":step", h->step);
      bind_text(s, ":step_id", h->step_id ? h->step_id : "");
      bind_i64(s, ":status", h->status);
      bind_i64(s, ":valid", h->valid);
      bind_i64(s, ":abort_reason", h->abort_reason);
      bind_i64(s, ":at", h->at);
      bind_i64(s, ":finished_at", h->finished_at);
      bind_text(s, ":error", h->error);
      bind_text(s, ":payload", q->base.cfg.no_history_payload ? NULL : h->payload);
      bind_text(s, ":api", h->api);
      bind_i64(s, ":recorded_at", now);
      return step_done(s);
    }
    case OP_SCOPE:
      s = &q->stmt[S_SCOPE];
      bind_text(s, ":owner", op->owner);
      bind_root(s, ":root_pid", op->root);
      bind_i64(s, ":grp", op->u.group);
      return step_done(s);
    case OP_REMOVE: {
      int rc;
      int ids[] = {S_RM_PROCS, S_SCOPES_DEL, S_RM_SESSION, S_RM_REFUSED};
      for (int i = 0; i < 4; i++) {
        s = &q->stmt[ids[i]];
        bind_text(s, ":owner", op->owner);
        bind_root(s, ":root_pid", op->root);
        if ((rc = step_done(s))) return rc;
      }
      return SQLITE_OK;
    }
    case OP_NEXTPID: {
      s = &q->stmt[S_NEXTPID];
      bind_text(s, ":owner", op->owner);
      bind_root(s, ":second", 2);
      *op->u.next_pid = UINT64_MAX;   /* no row: the counter is at 2^64-1 and stays (that rootPid is taken next) */
      int rc = sqlite3_step(s->s);
      if (rc == SQLITE_ROW) {
        *op->u.next_pid = col_root(s->s, 0);
        rc = sqlite3_step(s->s);
      }
      sqlite3_reset(s->s);
      sqlite3_clear_bindings(s->s);
      return rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    case OP_REGISTER:
      return apply_register(q, op->u.doc);
    case OP_WAKE_OUT: {
      const xgr_store_wake *w = &op->u.wake;
      s = &q->stmt[S_WAKE_OUT];
      bind_text(s, ":id", w->id);
      bind_text(s, ":from_owner", w->from_owner);
      bind_root(s, ":from_root", w->from_root);
      bind_text(s, ":to_owner", w->to_owner);
      bind_root(s, ":to_root", w->to_root);
      bind_text(s, ":step", w->step);
      bind_text(s, ":caller", w->caller);
      bind_text(s, ":rule", w->rule);
      bind_text(s, ":payload", w->payload);
      bind_i64(s, ":created_at", now);
      if (w->from_iter) bind_u64(s, ":from_iter", w->from_iter);
      else bind_null(s, ":from_iter");
      bind_text(s, ":from_step", w->from_step);
      return step_done(s);
    }
    case OP_WAKE_DONE:
      s = &q->stmt[op->u.wake.refused ? S_WAKE_REFUSE : S_WAKE_DONE];
      bind_text(s, ":id", op->owner);
      if (op->u.wake.refused) {
        bind_text(s, ":reason", op->u.wake.refused);
        bind_i64(s, ":now", now);
      }
      return step_done(s);
    case OP_MARK: {
      s = &q->stmt[S_MARK_GC];
      bind_i64(s, ":now", op->u.mark.now);
      int rc = step_done(s);
      if (rc) return rc;
      s = &q->stmt[S_MARK];
      bind_text(s, ":key", op->owner);
      bind_i64(s, ":expires_at", op->u.mark.expires_at);
      bind_i64(s, ":now", op->u.mark.now);
      rc = step_done(s);
      if (rc == SQLITE_OK && sqlite3_changes(q->w) == 0) return RC_EXISTS;
      return rc;
    }
  }
  return SQLITE_OK;
}

/* Apply every op of b; returns the first SQLite error (and fills b->err) or SQLITE_OK. */
/* Apply b's entries. RC_EXISTS: its first entry, an if_absent session row, found the session
 * there — nothing of b was written, b->rc is XGR_ECONFLICT, and the group goes on without it.
 * (Found later in a batch, earlier entries were written: then it is a constraint failure that
 * rolls the group back like any other batch fault.) */
/* Does state entry st only repeat what the new session row `fresh` (if_absent, written earlier in
 * the same batch and not changed since) holds? Then its UPDATE would change nothing: a running
 * session keeps finished_at, and a new row's wake_due is NULL already. An enqueue's first batch
 * is such a pair (the session row, then the state after its first call). */
static bool state_repeats_row(const store_op *fresh, const store_op *st) {
  const xgr_store_session *x = &fresh->u.session;
  return st->root == fresh->root && st->u.state.status == XGR_RESULT_RUNNING && x->status == XGR_RESULT_RUNNING &&
         !st->u.state.due && st->u.state.killed_at == x->killed_at && st->u.state.next_iter == x->next_iter &&
         st->u.state.next_group == x->next_group && st->u.state.paused == x->paused && !strcmp(st->owner, fresh->owner);
}

static int apply_batch(sqstore *q, xgr_store_changes *b, int64_t now) {
  const store_op *fresh = NULL;   /* the batch's new session row while nothing else changed it */
  for (size_t i = 0; i < b->n; i++) {
    const store_op *op = &b->ops[i];
    if (op->kind == OP_STATE && fresh && state_repeats_row(fresh, op)) {
      fresh = NULL;
      continue;
    }
    if (op->kind == OP_SESSION || op->kind == OP_STATE || op->kind == OP_REMOVE) fresh = NULL;
    int rc = apply_op(q, &b->ops[i], now);
    if (rc == SQLITE_OK && op->kind == OP_SESSION && op->if_absent) fresh = op;
    if (rc == RC_EXISTS && b->ops[i].kind == OP_MARK) {
      xgr_error_set(&b->err, XGR_ECONFLICT, NULL, "already used (recorded until it expires)");
      b->rc = XGR_ECONFLICT;
      return i == 0 ? RC_EXISTS : SQLITE_CONSTRAINT;
    }
    if (rc == RC_EXISTS) {
      xgr_error_set(&b->err, XGR_ECONFLICT, NULL, "session %s/%llu exists already; the batch was not applied",
                    b->ops[i].owner, (unsigned long long)b->ops[i].root);
      b->rc = XGR_ECONFLICT;
      return i == 0 ? RC_EXISTS : SQLITE_CONSTRAINT;
    }
    if (rc != SQLITE_OK) {
      sq_error(q->w, rc, q->path, "a write failed", &b->err);
      b->rc = b->err.code;
      return rc;
    }
  }
  return SQLITE_OK;
}

/* The store can no longer write: record why, fail every batch in list. */
static void fail_all(sqstore *q, xgr_store_changes **list, size_t n, const xgr_error *why) {
  xgr__store_set_failed(&q->base, why->code ? why->code : XGR_EIO, why->message);
  xgr_error ferr;
  xgr_store_failed(&q->base, &ferr);
  for (size_t i = 0; i < n; i++) {
    list[i]->rc = ferr.code;
    list[i]->err = ferr;
  }
}

static int tx(sqstore *q, int which) { return step_done(&q->stmt[which]); }

/* One group: all batches in one transaction, or (after a batch's own fault) one each. */
static void commit_group(sqstore *q, xgr_store_changes **list, size_t n) {
  xgr_error err;
  int64_t now = xgr__store_now_ms(&q->base);
  if (xgr_store_failed(&q->base, &err)) {
    for (size_t i = 0; i < n; i++) {
      list[i]->rc = err.code;
      list[i]->err = err;
    }
    return;
  }
  int rc = tx(q, S_BEGIN);
  if (rc) {
    sq_error(q->w, rc, q->path, "cannot begin a transaction", &err);
    fail_all(q, list, n, &err);
    return;
  }
  size_t bad = n;
  for (size_t i = 0; i < n && bad == n; i++) {
    rc = apply_batch(q, list[i], now);
    if (rc && rc != RC_EXISTS) bad = i;
  }
  if (bad == n) {
    rc = tx(q, S_COMMIT);
    if (!rc) {
      pthread_mutex_lock(&q->base.mu);
      q->base.stats.transactions++;
      if (n > q->base.stats.max_batches_per_tx) q->base.stats.max_batches_per_tx = n;
      pthread_mutex_unlock(&q->base.mu);
      return;
    }
    sq_error(q->w, rc, q->path, "commit failed", &err);
    tx(q, S_ROLLBACK);
    fail_all(q, list, n, &err);
    return;
  }
  tx(q, S_ROLLBACK);
  if (!batch_fault(rc)) {   /* an I/O error: the store stops */
    err = list[bad]->err;
    fail_all(q, list, n, &err);
    return;
  }
  /* a batch's own fault: apply each batch in its own transaction so only the bad ones fail */
  for (size_t i = 0; i < n; i++) {
    list[i]->rc = 0;
    xgr_error_clear(&list[i]->err);
    if ((rc = tx(q, S_BEGIN))) {
      sq_error(q->w, rc, q->path, "cannot begin a transaction", &err);
      fail_all(q, list + i, n - i, &err);
      return;
    }
    rc = apply_batch(q, list[i], now);
    if (rc == SQLITE_OK) rc = tx(q, S_COMMIT);
    else if (rc == RC_EXISTS || batch_fault(rc)) {
      tx(q, S_ROLLBACK);
      continue;   /* this batch fails alone (its rc/err are set) */
    }
    if (rc) {
      sq_error(q->w, rc, q->path, "a write failed", &err);
      tx(q, S_ROLLBACK);
      fail_all(q, list + i, n - i, &err);
      return;
    }
    pthread_mutex_lock(&q->base.mu);
    q->base.stats.transactions++;
    pthread_mutex_unlock(&q->base.mu);
  }
}

/* ---- retention (writer thread) ------------------------------------------------------------------ */

/* One retention step: at most gc_batch rows of each kind in one transaction. Returns the rows
 * deleted (*more: some kind hit the limit), or < 0 after an error (in *err). Every step finds its
 * rows through the retention indexes, so a full pass (full) is the same steps until none is left. */
static long gc_step(sqstore *q, bool full, bool *more, xgr_error *err) {
  (void)full;
  const xgr_store_config *c = &q->base.cfg;
  int64_t now = xgr__store_now_ms(&q->base);
  int lim = c->gc_batch;
  long total = 0;
  *more = false;
  int rc = tx(q, S_BEGIN);
  if (rc) return sq_error(q->w, rc, q->path, "retention: cannot begin", err);
  struct { int stmt; bool on; int64_t cut; } jobs[] = {
      {S_GC_PROCS, true, now - c->ttl_secs * 1000},
      {S_GC_HIST, c->history_secs > 0, now - c->history_secs * 1000},
      {S_GC_SESS, c->history_secs > 0, now - c->history_secs * 1000},
      {S_GC_REFUSED, c->history_secs > 0, now - c->history_secs * 1000},   /* refusal records are history */
      {S_GC_SCOPES, true, 0},
  };
  for (size_t j = 0; j < sizeof jobs / sizeof jobs[0]; j++) {
    if (!jobs[j].on) continue;
    pstmt *s = &q->stmt[jobs[j].stmt];
    if (jobs[j].stmt == S_GC_SCOPES) {
      bind_int(s, ":limit", lim);
    } else {
      bind_i64(s, ":before", jobs[j].cut);
      bind_int(s, ":limit", lim);
    }
    if ((rc = step_done(s))) {
      tx(q, S_ROLLBACK);
      return sq_error(q->w, rc, q->path, "retention: delete failed", err);
    }
    int ch = sqlite3_changes(q->w);
    total += ch;
    if (ch >= lim) *more = true;
  }
  if ((rc = tx(q, S_COMMIT))) {
    tx(q, S_ROLLBACK);
    return sq_error(q->w, rc, q->path, "retention: commit failed", err);
  }
  pthread_mutex_lock(&q->base.mu);
  q->base.stats.gc_deleted += (uint64_t)total;
  pthread_mutex_unlock(&q->base.mu);
  return total;
}

/* ---- the writer thread ---------------------------------------------------------------------------- */

/* The writer's two steps (store_impl.h). */
static void commit_cb(void *ctx, xgr_store_changes **list, size_t n) {
  commit_group(ctx, list, n);
}

static long gc_cb(void *ctx, bool full, bool *more, xgr_error *err) { return gc_step(ctx, full, more, err); }

static void sq_submit(xgr_store *st, xgr_store_changes *b) { xgr__writer_submit(&((sqstore *)st)->wr, b); }

static void sq_flush(xgr_store *st) { xgr__writer_flush(&((sqstore *)st)->wr); }

static int sq_gc(xgr_store *st, size_t *deleted, xgr_error *err) {
  return xgr__writer_gc(&((sqstore *)st)->wr, deleted, err);
}

static void sq_close(xgr_store *st) {
  sqstore *q = (sqstore *)st;
  xgr__writer_destroy(&q->wr);   /* stops and joins the thread first */
  for (int i = 0; i < S_COUNT; i++) sqlite3_finalize(q->stmt[i].s);
  for (size_t i = 0; i < sizeof q->rstmt / sizeof *q->rstmt; i++) sqlite3_finalize(q->rstmt[i]);
  if (q->w) sqlite3_close(q->w);
  if (q->r) sqlite3_close(q->r);
  pthread_mutex_destroy(&q->rmu);
  xgr__store_destroy_common(st);
  free(q->path);
  free(q);
}

/* ---- reading (reader connection) --------------------------------------------------------------------- */

#define SESSION_COLS "owner, root_pid, registry, ostc_id, ostc_hash, status, killed_at, created_at, finished_at, " \
                     "next_iter, paused, next_group, max_total_gas, wake_due"
#define PROC_COLS "iter, parent_iter, step, step_id, status, paused, valid, abort_reason, join_group, " \
                  "join_from_group, next_wake_at, created_at, started_at, finished_at, payload, error, join_state"
#define HIST_COLS "iter, parent_iter, step, step_id, status, valid, abort_reason, at, finished_at, error, payload, " \
                  "recorded_at, api"

static int rd_prepare(sqstore *q, const char *sql, sqlite3_stmt **s, xgr_error *err) {
  int rc = sqlite3_prepare_v2(q->r, sql, -1, s, NULL);
  if (rc) return sq_error(q->r, rc, q->path, "cannot read", err);
  return 0;
}

/* The reader's kept statements: the ones every enqueue runs (a start reads the stored row of its
 * session first; a start without a rootPid peeks at the owner's next one), where preparing the
 * SQL each time was ~6% of xgrd's CPU in a fan-out. rmu is held; give the statement back with
 * rd_done. */
enum { R_SESSION, R_PEEK };
static const char *const rd_sql[] = {
    [R_SESSION] = "SELECT " SESSION_COLS " FROM sessions WHERE owner=:owner AND root_pid=:root_pid",
    [R_PEEK] = "SELECT next_root FROM owners WHERE owner=:owner",
};

static int rd_kept(sqstore *q, int which, sqlite3_stmt **s, xgr_error *err) {
  if (!q->rstmt[which]) {
    int rc = sqlite3_prepare_v3(q->r, rd_sql[which], -1, SQLITE_PREPARE_PERSISTENT, &q->rstmt[which], NULL);
    if (rc) return sq_error(q->r, rc, q->path, "cannot read", err);
  }
  *s = q->rstmt[which];
  return 0;
}

static void rd_done(sqlite3_stmt *s) {
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
}

static void read_session_row(sqlite3_stmt *s, xgr_store_session *o) {
  memset(o, 0, sizeof *o);
  o->owner = col_text(s, 0);
  o->root_pid = col_root(s, 1);
  o->registry = col_text(s, 2);
  o->ostc_id = col_text(s, 3);
  o->ostc_hash = col_text(s, 4);
  o->status = (uint8_t)sqlite3_column_int(s, 5);
  o->killed_at = sqlite3_column_int64(s, 6);
  o->created_at = sqlite3_column_int64(s, 7);
  o->finished_at = sqlite3_column_int64(s, 8);
  o->next_iter = (uint64_t)sqlite3_column_int64(s, 9);
  o->paused = sqlite3_column_int(s, 10) != 0;
  o->next_group = (uint32_t)sqlite3_column_int64(s, 11);
  o->max_total_gas = col_text(s, 12);
  o->wake_due = sqlite3_column_int64(s, 13);   /* NULL reads as 0: awake */
}

static void read_proc_row(sqlite3_stmt *s, xgr_store_proc *p) {
  memset(p, 0, sizeof *p);
  p->iter = (uint64_t)sqlite3_column_int64(s, 0);
  p->parent_iter = (uint64_t)sqlite3_column_int64(s, 1);
  p->step = (uint16_t)sqlite3_column_int(s, 2);
  p->step_id = col_text(s, 3);
  p->status = (uint8_t)sqlite3_column_int(s, 4);
  p->paused = sqlite3_column_int(s, 5) != 0;
  p->valid = (int8_t)sqlite3_column_int(s, 6);
  p->abort_reason = (uint8_t)sqlite3_column_int(s, 7);
  p->group = (uint32_t)sqlite3_column_int64(s, 8);
  p->from_group = (uint32_t)sqlite3_column_int64(s, 9);
  p->next_wake_at = sqlite3_column_int64(s, 10);
  p->created_at = sqlite3_column_int64(s, 11);
  p->started_at = sqlite3_column_int64(s, 12);
  p->finished_at = sqlite3_column_int64(s, 13);
  p->payload = col_text(s, 14);
  p->error = col_text(s, 15);
  p->join = col_text(s, 16);
}

static void read_hist_row(sqlite3_stmt *s, xgr_store_hist *h) {
  memset(h, 0, sizeof *h);
  h->iter = (uint64_t)sqlite3_column_int64(s, 0);
  h->parent_iter = (uint64_t)sqlite3_column_int64(s, 1);
  h->step = (uint16_t)sqlite3_column_int(s, 2);
  h->step_id = col_text(s, 3);
  h->status = (uint8_t)sqlite3_column_int(s, 4);
  h->valid = (int8_t)sqlite3_column_int(s, 5);
  h->abort_reason = (uint8_t)sqlite3_column_int(s, 6);
  h->at = sqlite3_column_int64(s, 7);
  h->finished_at = sqlite3_column_int64(s, 8);
  h->error = col_text(s, 9);
  h->payload = col_text(s, 10);
  h->recorded_at = sqlite3_column_int64(s, 11);
  h->api = col_text(s, 12);
}

static int sq_session_get(xgr_store *st, const char *owner, uint64_t root, xgr_store_session *out, xgr_error *err) {
  sqstore *q = (sqstore *)st;
  sqlite3_stmt *s = NULL;
  pthread_mutex_lock(&q->rmu);
  int rc = rd_kept(q, R_SESSION, &s, err);
  if (!rc) {
    pstmt b = {.s = s};
    bind_text(&b, ":owner", owner);
    bind_root(&b, ":root_pid", root);
    int r = sqlite3_step(s);
    if (r == SQLITE_ROW) read_session_row(s, out);
    else if (r == SQLITE_DONE)
      rc = xgr_error_set(err, XGR_ENOTFOUND, NULL, "no session %s/%llu in the store", owner, (unsigned long long)root);
    else rc = sq_error(q->r, r, q->path, "cannot read sessions", err);
    rd_done(s);
  }
  pthread_mutex_unlock(&q->rmu);
  return rc;
}

static int sq_peek_pid(xgr_store *st, const char *owner, uint64_t *next, xgr_error *err) {
  sqstore *q = (sqstore *)st;
  sqlite3_stmt *s = NULL;
  pthread_mutex_lock(&q->rmu);
  int rc = rd_kept(q, R_PEEK, &s, err);
  if (!rc) {
    pstmt b = {.s = s};
    bind_text(&b, ":owner", owner);
    int r = sqlite3_step(s);
    if (r == SQLITE_ROW) *next = col_root(s, 0);
    else if (r == SQLITE_DONE) *next = 1;
    else rc = sq_error(q->r, r, q->path, "cannot read owners", err);
    rd_done(s);
  }
  pthread_mutex_unlock(&q->rmu);
  return rc;
}

/* Outbox rows of a query (owner/root bound when the query names them), in its order. */
static int read_wakes(sqstore *q, const char *sql, const char *owner, uint64_t root, xgr_store_wake **out, size_t *n,
                      xgr_error *err) {
  sqlite3_stmt *s;
  pthread_mutex_lock(&q->rmu);
  int rc = rd_prepare(q, sql, &s, err);
  if (!rc) {
    if (owner) {
      pstmt b = {.s = s};   /* used once: nothing to cache */
      bind_text(&b, ":owner", owner);
      bind_root(&b, ":root_pid", root);
    }
    size_t cap = 8;
    xgr_store_wake *a = xgr__xcalloc(cap, sizeof *a);
    int r;
    while ((r = sqlite3_step(s)) == SQLITE_ROW) {
      if (*n == cap) a = xgr__xrealloc(a, (cap *= 2) * sizeof *a);
      xgr_store_wake *w = &a[(*n)++];
      w->id = col_text(s, 0);
      w->from_owner = col_text(s, 1);
      w->from_root = col_root(s, 2);
      w->to_owner = col_text(s, 3);
      w->to_root = col_root(s, 4);
      w->step = col_text(s, 5);
      w->caller = col_text(s, 6);
      w->rule = col_text(s, 7);
      w->payload = col_text(s, 8);
      w->created_at = sqlite3_column_int64(s, 9);
      w->refused = col_text(s, 10);
      w->refused_at = sqlite3_column_int64(s, 11);
      w->from_iter = (uint64_t)sqlite3_column_int64(s, 12);   /* NULL reads as 0: not recorded */
      w->from_step = col_text(s, 13);
    }
    if (r != SQLITE_DONE) {
      rc = sq_error(q->r, r, q->path, "cannot read the outbox", err);
      xgr_store_wakes_free(a, *n);
      a = NULL;
      *n = 0;
    }
    *out = a;
    sqlite3_finalize(s);
  }
  pthread_mutex_unlock(&q->rmu);
  return rc;
}

#define WAKE_COLS \
  "id, from_owner, from_root, to_owner, to_root, step, caller, rule, payload, created_at, refused, refused_at, from_iter, " \
  "from_step"

static int sq_outbox(xgr_store *st, xgr_store_wake **out, size_t *n, xgr_error *err) {
  return read_wakes((sqstore *)st, "SELECT " WAKE_COLS " FROM outbox WHERE refused IS NULL ORDER BY created_at, id",
                    NULL, 0, out, n, err);
}

static int sq_wakes_refused(xgr_store *st, const char *owner, uint64_t root, xgr_store_wake **out, size_t *n,
                            xgr_error *err) {
  return read_wakes((sqstore *)st,
                    "SELECT " WAKE_COLS " FROM outbox WHERE from_owner = :owner AND from_root = :root_pid AND"
                    " refused IS NOT NULL ORDER BY refused_at, id",
                    owner, root, out, n, err);
}

/* Rows of a per-session query into a growing array of `size`-byte records. */
static int read_rows(sqstore *q, const char *sql, const char *owner, uint64_t root, size_t size,
                     void (*row)(sqlite3_stmt *, void *), void **out, size_t *n, xgr_error *err) {
  sqlite3_stmt *s;
  *out = NULL;
  *n = 0;
  int rc = rd_prepare(q, sql, &s, err);
  if (rc) return rc;
  pstmt b = {.s = s};   /* used once: nothing to cache */
  bind_text(&b, ":owner", owner);
  bind_root(&b, ":root_pid", root);
  size_t cap = 16;
  char *a = xgr__xmalloc(cap * size);
  int r;
  while ((r = sqlite3_step(s)) == SQLITE_ROW) {
    if (*n == cap) a = xgr__xrealloc(a, (cap *= 2) * size);
    row(s, a + *n * size);
    (*n)++;
  }
  if (r != SQLITE_DONE) rc = sq_error(q->r, r, q->path, "cannot read", err);
  sqlite3_finalize(s);
  *out = a;
  return rc;
}

static void proc_row_cb(sqlite3_stmt *s, void *p) { read_proc_row(s, p); }
static void hist_row_cb(sqlite3_stmt *s, void *p) { read_hist_row(s, p); }

static int sq_procs(xgr_store *st, const char *owner, uint64_t root, xgr_store_proc **out, size_t *n, xgr_error *err) {
  sqstore *q = (sqstore *)st;
  pthread_mutex_lock(&q->rmu);
  void *a;
  int rc = read_rows(q, "SELECT " PROC_COLS " FROM proc_rt WHERE owner=:owner AND root_pid=:root_pid ORDER BY iter", owner, root,
                     sizeof(xgr_store_proc), proc_row_cb, &a, n, err);
  pthread_mutex_unlock(&q->rmu);
  *out = a;
  return rc;
}

static int sq_history(xgr_store *st, const char *owner, uint64_t root, xgr_store_hist **out, size_t *n, xgr_error *err) {
  sqstore *q = (sqstore *)st;
  pthread_mutex_lock(&q->rmu);
  void *a;
  int rc = read_rows(q, "SELECT " HIST_COLS " FROM proc_steps WHERE owner=:owner AND root_pid=:root_pid ORDER BY iter", owner,
                     root, sizeof(xgr_store_hist), hist_row_cb, &a, n, err);
  pthread_mutex_unlock(&q->rmu);
  *out = a;
  return rc;
}

static void session_row_cb(sqlite3_stmt *s, void *p) { read_session_row(s, p); }

/* The owner's sessions, newest rootPid first: a range scan of the primary key (owner, root_pid). */
static int sq_sessions(xgr_store *st, const char *owner, uint64_t before, size_t limit, xgr_store_session **out,
                       size_t *n, xgr_error *err) {
  sqstore *q = (sqstore *)st;
  /* the limit is a number: part of the text; `:root_pid` is the bound; 2^64-1 is "no bound" (the
   * front's default), so that rootPid itself is listed too */
  char sql[384];
  bool all = before == UINT64_MAX;
  snprintf(sql, sizeof sql, "SELECT " SESSION_COLS " FROM sessions WHERE owner=:owner AND root_pid %s :root_pid ORDER BY root_pid DESC LIMIT %zu",
           all ? "<=" : "<", limit);
  pthread_mutex_lock(&q->rmu);
  void *a;
  int rc = read_rows(q, sql, owner, before, sizeof(xgr_store_session), session_row_cb, &a, n, err);
  pthread_mutex_unlock(&q->rmu);
  *out = a;
  return rc;
}

/* The owners with live sessions: status = 0 rows grouped by owner, most first (one scan of the
 * live rows; the limit is a number, part of the text). */
static int sq_live_owners(xgr_store *st, const char *owner, size_t max, xgr_store_owner_live **out, size_t *n,
                          xgr_error *err) {
  sqstore *q = (sqstore *)st;
  char sql[256];
  snprintf(sql, sizeof sql,
           "SELECT owner, COUNT(*) AS live FROM sessions WHERE status = 0%s GROUP BY owner ORDER BY live DESC, owner"
           " LIMIT %zu", owner ? " AND owner=:owner" : "", max);
  pthread_mutex_lock(&q->rmu);
  sqlite3_stmt *s;
  int rc = rd_prepare(q, sql, &s, err);
  *out = xgr__xcalloc(max, sizeof **out);
  if (!rc) {
    pstmt b = {.s = s};   /* used once: nothing to cache */
    if (owner) bind_text(&b, ":owner", owner);
    int r = SQLITE_DONE;
    while (*n < max && (r = sqlite3_step(s)) == SQLITE_ROW) {
      (*out)[*n].owner = col_text(s, 0);
      (*out)[(*n)++].live = (uint64_t)sqlite3_column_int64(s, 1);
    }
    if (r != SQLITE_ROW && r != SQLITE_DONE) rc = sq_error(q->r, r, q->path, "cannot read sessions", err);
    sqlite3_finalize(s);
  }
  pthread_mutex_unlock(&q->rmu);
  return rc;
}

static int sq_load_some(xgr_store *st, const xgr_store_load_filter *f, int (*fn)(void *, const xgr_store_live *),
                        void *ctx, xgr_error *err) {
  sqstore *q = (sqstore *)st;
  pthread_mutex_lock(&q->rmu);
  sqlite3_stmt *s = NULL;
  int rc = exec_sql(q->r, q->path, "BEGIN", err);   /* one consistent snapshot */
  const char *where = !f ? "status = 0 ORDER BY owner, root_pid"
                      : f->owner ? "status = 0 AND owner=:owner AND root_pid=:root_pid"
                      /* two index scans (awake; due by upto): lazy recovery reads no hibernated row */
                      : f->bounded ? "status = 0 AND wake_due IS NULL UNION ALL SELECT " SESSION_COLS " FROM sessions"
                                     " WHERE status = 0 AND wake_due IS NOT NULL AND wake_due <= :upto"
                                   : "status = 0 ORDER BY owner, root_pid";
  char sql[1024];
  snprintf(sql, sizeof sql, "SELECT " SESSION_COLS " FROM sessions WHERE %s", where);
  if (!rc) rc = rd_prepare(q, sql, &s, err);
  pstmt b = {.s = s};   /* used once: nothing to cache */
  if (!rc && f && f->owner) {
    bind_text(&b, ":owner", f->owner);
    bind_root(&b, ":root_pid", f->root_pid);
  } else if (!rc && f && f->bounded) {
    bind_i64(&b, ":upto", f->due_upto);
  }
  int r = SQLITE_DONE;
  while (!rc && (r = sqlite3_step(s)) == SQLITE_ROW) {
    xgr_store_session row;
    read_session_row(s, &row);
    void *procs = NULL;
    size_t np = 0;
    rc = read_rows(q, "SELECT " PROC_COLS " FROM proc_rt WHERE owner=:owner AND root_pid=:root_pid AND status < 2 ORDER BY iter",
                   row.owner, row.root_pid, sizeof(xgr_store_proc), proc_row_cb, &procs, &np, err);
    uint32_t *groups = xgr__xmalloc(16 * sizeof *groups);
    size_t ng = 0, capg = 16;
    sqlite3_stmt *g = NULL;
    if (!rc) rc = rd_prepare(q, "SELECT grp FROM proc_scopes WHERE owner=:owner AND root_pid=:root_pid ORDER BY grp", &g, err);
    if (!rc) {
      pstmt gb = {.s = g};   /* used once: nothing to cache */
      bind_text(&gb, ":owner", row.owner);
      bind_root(&gb, ":root_pid", row.root_pid);
      int gr;
      while ((gr = sqlite3_step(g)) == SQLITE_ROW) {
        if (ng == capg) groups = xgr__xrealloc(groups, (capg *= 2) * sizeof *groups);
        groups[ng++] = (uint32_t)sqlite3_column_int64(g, 0);
      }
      if (gr != SQLITE_DONE) rc = sq_error(q->r, gr, q->path, "cannot read proc_scopes", err);
      sqlite3_finalize(g);
    }
    if (!rc) {
      xgr_store_live l = {&row, procs, np, groups, ng};
      rc = fn(ctx, &l);
      if (rc) xgr_error_set(err, rc, NULL, "recovery stopped at session %s/%llu", row.owner, (unsigned long long)row.root_pid);
    }
    xgr_store_procs_free(procs, np);
    free(groups);
    xgr_store_session_clear(&row);
  }
  if (!rc && r != SQLITE_DONE) rc = sq_error(q->r, r, q->path, "cannot read sessions", err);
  sqlite3_finalize(s);
  sqlite3_exec(q->r, "COMMIT", NULL, NULL, NULL);
  pthread_mutex_unlock(&q->rmu);
  return rc;
}

static int sq_load_live(xgr_store *st, int (*fn)(void *, const xgr_store_live *), void *ctx, xgr_error *err) {
  return sq_load_some(st, NULL, fn, ctx, err);
}

/* The due index: a range scan of sessions_wake_due after the cursor (row values compare in
 * index order). */
static int sq_due(xgr_store *st, const xgr_store_due_key *after, int64_t upto, xgr_store_due_key *out, size_t max,
                  size_t *n, xgr_error *err) {
  sqstore *q = (sqstore *)st;
  char sql[384];
  snprintf(sql, sizeof sql, "SELECT wake_due, owner, root_pid FROM sessions INDEXED BY sessions_wake_due"
           " WHERE status = 0 AND wake_due IS NOT NULL AND (wake_due, owner, root_pid) > (:due, :owner, :root_pid)"
           " AND wake_due <= :upto ORDER BY wake_due, owner, root_pid LIMIT %zu", max);
  pthread_mutex_lock(&q->rmu);
  sqlite3_stmt *s;
  int rc = rd_prepare(q, sql, &s, err);
  if (!rc) {
    pstmt b = {.s = s};   /* used once: nothing to cache */
    bind_i64(&b, ":due", after ? after->due : INT64_MIN);
    bind_text(&b, ":owner", after ? after->owner : "");
    bind_root(&b, ":root_pid", after ? after->root_pid : 0);
    bind_i64(&b, ":upto", upto);
    int r = SQLITE_DONE;
    while (*n < max && (r = sqlite3_step(s)) == SQLITE_ROW) {
      xgr_store_due_key *k = &out[(*n)++];
      k->due = sqlite3_column_int64(s, 0);
      snprintf(k->owner, sizeof k->owner, "%s", (const char *)sqlite3_column_text(s, 1));
      k->root_pid = col_root(s, 2);
    }
    if (*n < max && r != SQLITE_DONE) rc = sq_error(q->r, r, q->path, "cannot read the due index", err);
    sqlite3_finalize(s);
  }
  pthread_mutex_unlock(&q->rmu);
  return rc;
}

static int sq_doc_get(xgr_store *st, xgr_registry_kind kind, const char *id, uint32_t version, const char *hash,
                      xgr_store_doc *out, xgr_error *err) {
  sqstore *q = (sqstore *)st;
  const char *table = kind == XGR_REG_RULE ? "rules" : "orchestrations";
  char sql[256];
  if (hash)
    snprintf(sql, sizeof sql, "SELECT id, version, hash, owner, registered_at, content FROM %s WHERE hash = lower(:hash)"
             " ORDER BY version DESC LIMIT 1", table);
  else if (version)
    snprintf(sql, sizeof sql, "SELECT id, version, hash, owner, registered_at, content FROM %s WHERE id=:id AND version=:version",
             table);
  else
    snprintf(sql, sizeof sql, "SELECT id, version, hash, owner, registered_at, content FROM %s WHERE id=:id"
             " ORDER BY version DESC LIMIT 1", table);
  pthread_mutex_lock(&q->rmu);
  sqlite3_stmt *s;
  int rc = rd_prepare(q, sql, &s, err);
  if (!rc) {
    pstmt b = {.s = s};   /* used once: nothing to cache */
    bind_text(&b, hash ? ":hash" : ":id", hash ? hash : id);
    if (!hash && version) bind_i64(&b, ":version", version);
    int r = sqlite3_step(s);
    if (r == SQLITE_ROW) {
      memset(out, 0, sizeof *out);
      out->kind = kind;
      out->id = col_text(s, 0);
      out->version = (uint32_t)sqlite3_column_int64(s, 1);
      out->hash = col_text(s, 2);
      out->owner = col_text(s, 3);
      out->registered_at = sqlite3_column_int64(s, 4);
      out->len = (size_t)sqlite3_column_bytes(s, 5);
      out->content = xgr__xmalloc(out->len + 1);
      if (out->len) memcpy(out->content, sqlite3_column_blob(s, 5), out->len);
      out->content[out->len] = 0;
    } else if (r == SQLITE_DONE) {
      rc = xgr_error_set(err, XGR_ENOTFOUND, NULL, "no %s %s%s in the registry", kind ? "rule" : "orchestration",
                         hash ? "with hash " : "", hash ? hash : id);
    } else {
      rc = sq_error(q->r, r, q->path, "cannot read the registry", err);
    }
    sqlite3_finalize(s);
  }
  pthread_mutex_unlock(&q->rmu);
  return rc;
}

static const store_vt sqlite_vt = {"sqlite", sq_submit, sq_flush, sq_close, sq_session_get, sq_procs,
                                   sq_history, sq_load_live, sq_doc_get, sq_gc, .sessions = sq_sessions,
                                   .live_owners = sq_live_owners,
                                   .peek_pid = sq_peek_pid, .outbox = sq_outbox,
                                   .wakes_refused = sq_wakes_refused, .load_some = sq_load_some, .due = sq_due};

/* ---- open and migrate ------------------------------------------------------------------------------- */

static int schema_version_of(sqlite3 *db, const char *path, int *v, xgr_error *err) {
  sqlite3_stmt *s;
  *v = 0;
  int rc = sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='schema_version'", -1,
                              &s, NULL);
  if (rc) return sq_error(db, rc, path, "cannot read the schema", err);
  int has = sqlite3_step(s) == SQLITE_ROW && sqlite3_column_int(s, 0) > 0;
  rc = sqlite3_errcode(db);
  sqlite3_finalize(s);
  if (rc != SQLITE_OK && rc != SQLITE_ROW && rc != SQLITE_DONE) return sq_error(db, rc, path, "cannot read the schema", err);
  if (!has) {
    /* a file with tables but no schema_version is not ours */
    rc = sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master", -1, &s, NULL);
    if (rc) return sq_error(db, rc, path, "cannot read the schema", err);
    int n = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int(s, 0) : 0;
    sqlite3_finalize(s);
    if (n) return xgr_error_set(err, XGR_EINVAL, NULL, "store %s: the database has tables but no schema_version; it is "
                                "not an xgr store", path);
    return 0;
  }
  rc = sqlite3_prepare_v2(db, "SELECT COALESCE(MAX(version), 0) FROM schema_version", -1, &s, NULL);
  if (rc) return sq_error(db, rc, path, "cannot read schema_version", err);
  if (sqlite3_step(s) == SQLITE_ROW) *v = sqlite3_column_int(s, 0);
  sqlite3_finalize(s);
  return 0;
}

static int migrate(sqstore *q, int from, xgr_error *err) {
  for (int v = from + 1; v <= NMIGRATIONS; v++) {
    char sql[160];
    if (exec_sql(q->w, q->path, "BEGIN IMMEDIATE", err)) return XGR_EIO;
    int rc = v == 1 ? exec_sql(q->w, q->path, "CREATE TABLE schema_version(version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)", err) : 0;
    if (!rc) rc = exec_sql(q->w, q->path, migrations[v - 1], err);
    snprintf(sql, sizeof sql, "INSERT INTO schema_version(version, applied_at) VALUES(%d, %lld)", v,
             (long long)xgr__store_now_ms(&q->base));
    if (!rc) rc = exec_sql(q->w, q->path, sql, err);
    if (!rc) rc = exec_sql(q->w, q->path, "COMMIT", err);
    if (rc) {
      sqlite3_exec(q->w, "ROLLBACK", NULL, NULL, NULL);
      char m[XGR_MSG_MAX];
      snprintf(m, sizeof m, "%s", err->message);
      return xgr_error_set(err, XGR_EIO, NULL, "migration to schema version %d failed: %s", v, m);
    }
  }
  return 0;
}

static int configure(sqstore *q, sqlite3 *db, bool writer, xgr_error *err) {
  char sql[128];
  sqlite3_busy_timeout(db, q->base.cfg.busy_timeout_ms);
  if (writer) {
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(db, "PRAGMA journal_mode=WAL", -1, &s, NULL) == SQLITE_OK) {
      const char *mode = sqlite3_step(s) == SQLITE_ROW ? (const char *)sqlite3_column_text(s, 0) : NULL;
      bool wal = mode && !strcasecmp(mode, "wal");
      sqlite3_finalize(s);
      if (!wal) return sq_error(db, sqlite3_errcode(db), q->path, "cannot switch to WAL mode", err);
    }
  }
  snprintf(sql, sizeof sql, "PRAGMA synchronous=%s", q->base.cfg.sync == XGR_STORE_SYNC_NORMAL ? "NORMAL" : "FULL");
  if (exec_sql(db, q->path, sql, err)) return XGR_EIO;
  if (q->base.cfg.max_page_count) {
    snprintf(sql, sizeof sql, "PRAGMA max_page_count=%u", (unsigned)q->base.cfg.max_page_count);
    if (exec_sql(db, q->path, sql, err)) return XGR_EIO;
  }
  return 0;
}

xgr_store *xgr_store_sqlite_open(const char *path, const xgr_store_config *cfg, xgr_error *err) {
  sqstore *q = xgr__xcalloc(1, sizeof *q);
  xgr__store_init_common(&q->base, &sqlite_vt, cfg);
  q->path = xgr__xstrdup(path);
  /* recursive: a load_live callback may read the store again (e.g. a session's history) */
  pthread_mutexattr_t ra;
  pthread_mutexattr_init(&ra);
  pthread_mutexattr_settype(&ra, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&q->rmu, &ra);
  pthread_mutexattr_destroy(&ra);
  xgr__writer_init(&q->wr, &q->base, commit_cb, gc_cb, q);
  bool ro = q->base.cfg.read_only;
  int flags = (ro ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX;
  if (!ro && strcmp(path, ":memory:")) {
    /* a new store file is created 0600 here (SQLite would make it 0644); SQLite gives its -wal
     * and -shm files the mode of the database file */
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) close(fd);
  }
  int rc = sqlite3_open_v2(path, &q->w, flags, NULL);
  if (rc) {
    sq_error(q->w, rc, path, "cannot open", err);
    goto fail;
  }
  sqlite3_extended_result_codes(q->w, 1);
  if (!ro && sqlite3_db_readonly(q->w, "main") == 1) {
    xgr_error_set(err, XGR_EIO, NULL, "store %s: the file is read-only; xgr needs to write it (fix its permissions, or "
                  "open it read-only for reading)", path);
    goto fail;
  }
  if (configure(q, q->w, !ro, err)) goto fail;
  int found = 0;
  if (schema_version_of(q->w, path, &found, err)) goto fail;
  q->base.found_version = found;
  if (found > XGR_STORE_SCHEMA_VERSION) {
    xgr_error_set(err, XGR_EUNSUPPORTED, NULL, "store %s has schema version %d; this xgr knows versions up to %d "
                  "(use a newer xgr)", path, found, XGR_STORE_SCHEMA_VERSION);
    goto fail;
  }
  if (found < XGR_STORE_SCHEMA_VERSION) {
    if (ro) {
      xgr_error_set(err, XGR_ESTATE, NULL, "store %s has schema version %d and needs migrating to %d, which a "
                    "read-only open cannot do", path, found, XGR_STORE_SCHEMA_VERSION);
      goto fail;
    }
    if (migrate(q, found, err)) goto fail;
  }
  q->base.version = XGR_STORE_SCHEMA_VERSION;
  if (!ro)
    for (int i = 0; i < S_COUNT; i++)
      if ((rc = sqlite3_prepare_v3(q->w, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &q->stmt[i].s, NULL))) {
        sq_error(q->w, rc, path, "cannot prepare statements", err);
        goto fail;
      }
  rc = sqlite3_open_v2(path, &q->r, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
  if (rc) {
    sq_error(q->r, rc, path, "cannot open for reading", err);
    goto fail;
  }
  sqlite3_busy_timeout(q->r, q->base.cfg.busy_timeout_ms);
  if (!ro) {
    if (xgr__writer_start(&q->wr, "xgr-store")) {
      xgr_error_set(err, XGR_EIO, NULL, "store %s: cannot start the writer thread", path);
      goto fail;
    }
  }
  return &q->base;
fail:
  sq_close(&q->base);
  return NULL;
}
