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
 *   migrations   schema_version holds one row per applied migration; the list in sqlite_schema.c
 *                is applied in order from the version found, each in its own transaction.
 *
 * This file is the handle (open, the writer thread's callbacks, close, error texts); the schema,
 * the writes and the reads are in sqlite_schema.c, sqlite_write.c and sqlite_read.c
 * (sqlite_impl.h).
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

#include "store/sqlite_impl.h"

int xgr__sq_error(sqlite3 *db, int rc, const char *path, const char *what, xgr_error *err) {
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

int xgr__sq_exec(sqlite3 *db, const char *path, const char *sql, xgr_error *err) {
  char *msg = NULL;
  int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
  if (rc == SQLITE_OK) return 0;
  xgr_error_set(err, XGR_EIO, NULL, "store %s: %s%s", path, msg ? msg : sqlite3_errstr(rc),
                (rc & 0xff) == SQLITE_READONLY ? " (the file or its directory is read-only)"
                : (rc & 0xff) == SQLITE_FULL ? " (the disk or the database's size limit is full)" : "");
  sqlite3_free(msg);
  return XGR_EIO;
}

/* ---- the writer thread ---------------------------------------------------------------------------- */

/* The writer's two steps (store_impl.h). */
static void commit_cb(void *ctx, xgr_store_changes **list, size_t n) {
  xgr__sq_commit_group(ctx, list, n);
}

static long gc_cb(void *ctx, bool full, bool *more, xgr_error *err) { return xgr__sq_gc_step(ctx, full, more, err); }

static void sq_submit(xgr_store *st, xgr_store_changes *b) { xgr__writer_submit(&((sqstore *)st)->wr, b); }

static void sq_flush(xgr_store *st) { xgr__writer_flush(&((sqstore *)st)->wr); }

static int sq_gc(xgr_store *st, size_t *deleted, xgr_error *err) {
  return xgr__writer_gc(&((sqstore *)st)->wr, deleted, err);
}

static void sq_close(xgr_store *st) {
  sqstore *q = (sqstore *)st;
  xgr__writer_destroy(&q->wr);   /* stops and joins the thread first */
  for (int i = 0; i < S_COUNT; i++) sqlite3_finalize(q->stmt[i].s);
  xgr__sq_read_close(q);
  if (q->w) sqlite3_close(q->w);
  if (q->r) sqlite3_close(q->r);
  if (q->b) sqlite3_close(q->b);
  pthread_mutex_destroy(&q->rmu);
  pthread_mutex_destroy(&q->bmu);
  xgr__store_destroy_common(st);
  free(q->path);
  free(q);
}

static const store_vt sqlite_vt = {"sqlite", sq_submit, sq_flush, sq_close, xgr__sq_session_get, xgr__sq_procs,
                                   xgr__sq_history, xgr__sq_load_live, xgr__sq_doc_get, sq_gc, .sessions = xgr__sq_sessions,
                                   .live_owners = xgr__sq_live_owners, .owners_after = xgr__sq_owners_after,
                                   .peek_pid = xgr__sq_peek_pid, .owner_bytes = xgr__sq_owner_bytes, .outbox = xgr__sq_outbox,
                                   .wakes_refused = xgr__sq_wakes_refused, .audits = xgr__sq_audits, .grants = xgr__sq_grants, .load_some = xgr__sq_load_some, .due = xgr__sq_due,
                                   .bop_create = xgr__sq_bop_create, .bop_claim = xgr__sq_bop_claim,
                                   .bop_progress = xgr__sq_bop_progress, .bop_cancel = xgr__sq_bop_cancel,
                                   .bop_read = xgr__sq_bop_read};


/* ---- open and migrate ------------------------------------------------------------------------------- */

static int configure(sqstore *q, sqlite3 *db, bool writer, xgr_error *err) {
  char sql[128];
  sqlite3_busy_timeout(db, q->base.cfg.busy_timeout_ms);
  if (writer) {
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(db, "PRAGMA journal_mode=WAL", -1, &s, NULL) == SQLITE_OK) {
      const char *mode = sqlite3_step(s) == SQLITE_ROW ? (const char *)sqlite3_column_text(s, 0) : NULL;
      bool wal = mode && !strcasecmp(mode, "wal");
      sqlite3_finalize(s);
      if (!wal) return xgr__sq_error(db, sqlite3_errcode(db), q->path, "cannot switch to WAL mode", err);
    }
  }
  snprintf(sql, sizeof sql, "PRAGMA synchronous=%s", q->base.cfg.sync == XGR_STORE_SYNC_NORMAL ? "NORMAL" : "FULL");
  if (xgr__sq_exec(db, q->path, sql, err)) return XGR_EIO;
  if (q->base.cfg.max_page_count) {
    snprintf(sql, sizeof sql, "PRAGMA max_page_count=%u", (unsigned)q->base.cfg.max_page_count);
    if (xgr__sq_exec(db, q->path, sql, err)) return XGR_EIO;
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
  pthread_mutex_init(&q->bmu, NULL);
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
    xgr__sq_error(q->w, rc, path, "cannot open", err);
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
  if (xgr__sq_schema_version(q->w, path, &found, err)) goto fail;
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
    if (xgr__sq_migrate(q, found, err)) goto fail;
  }
  q->base.version = XGR_STORE_SCHEMA_VERSION;
  if (!ro)
    for (int i = 0; i < S_COUNT; i++)
      if ((rc = sqlite3_prepare_v3(q->w, xgr__sq_stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &q->stmt[i].s, NULL))) {
        xgr__sq_error(q->w, rc, path, "cannot prepare statements", err);
        goto fail;
      }
  rc = sqlite3_open_v2(path, &q->r, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
  if (rc) {
    xgr__sq_error(q->r, rc, path, "cannot open for reading", err);
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
