/* sqlite_schema.c — the SQLite store's schema: the migrations from an empty file to
 * XGR_STORE_SCHEMA_VERSION, in order, and applying them (schema_version holds one row per applied
 * migration; each runs in its own transaction). Never edit a migration once it shipped: add one.
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
    /* 13: the quotas (docs/SECURITY.md): the bytes each session's batches wrote, counted by the
     * engine's batches (0 for sessions written before); an owner's stored bytes are the sum over
     * its session rows, so retention deleting a row takes its bytes off the owner's count */
    "ALTER TABLE sessions ADD COLUMN stored_bytes INTEGER NOT NULL DEFAULT 0;",
    /* 14: names and pins (docs/SEMANTICS.md, "Names and pins"). Every registered document moves into
     * its writer's namespace: its id becomes "<owner>:<id>" (permit mode's per-owner rule names
     * "<owner>/<alias>" become "<owner>:<alias>"); documents without an owner stay in the empty
     * namespace, and a row whose new id is taken already stays where it was. Sessions get the bundle
     * hash they pin ('' for those started before). */
    ("ALTER TABLE sessions ADD COLUMN bundle_hash TEXT NOT NULL DEFAULT '';"
     "UPDATE OR IGNORE rules SET id = lower(owner) || ':' || substr(id, 44) WHERE owner <> '' AND length(id) > 43 AND substr(id, 43, 1) = '/' AND lower(substr(id, 1, 42)) = lower(owner);"
     "UPDATE OR IGNORE rules SET id = lower(owner) || ':' || id WHERE owner <> ''"
     "  AND NOT (length(id) > 43 AND substr(id, 43, 1) IN ('/', ':') AND lower(substr(id, 1, 42)) = lower(owner));"
     "UPDATE OR IGNORE orchestrations SET id = lower(owner) || ':' || id WHERE owner <> ''"
     "  AND NOT (length(id) > 43 AND substr(id, 43, 1) = ':' AND lower(substr(id, 1, 42)) = lower(owner));"),
    /* 15: the audit trail (docs/STORE.md "The audit trail"): one row per control action or wake-up
     * applied to a session, written in the commit of its change; history (kept like proc_steps) */
    ("CREATE TABLE session_audit(owner TEXT NOT NULL, root_pid INTEGER NOT NULL, session_at INTEGER NOT NULL,"
     "  kind TEXT NOT NULL, actor TEXT NOT NULL, node TEXT NOT NULL, permit TEXT, detail TEXT,"
     "  recorded_at INTEGER NOT NULL);"
     "CREATE INDEX session_audit_session ON session_audit(owner, root_pid, session_at);"
     "CREATE INDEX session_audit_recorded ON session_audit(recorded_at);"),
    /* 16: operations on many sessions (docs/STORE.md "Batch operations"): one row per batch
     * operation — its selection and action, who started it, state, progress, cursor and the claim of
     * the node driving it */
    ("CREATE TABLE IF NOT EXISTS batch_ops(id TEXT PRIMARY KEY, caller TEXT NOT NULL, action TEXT NOT NULL, spec TEXT NOT NULL,"
     "  state TEXT NOT NULL, total INTEGER NOT NULL DEFAULT 0, done INTEGER NOT NULL DEFAULT 0,"
     "  failed INTEGER NOT NULL DEFAULT 0, skipped INTEGER NOT NULL DEFAULT 0, cursor TEXT NOT NULL DEFAULT '',"
     "  error TEXT, driver TEXT NOT NULL DEFAULT '', epoch INTEGER NOT NULL DEFAULT 0, expires INTEGER NOT NULL DEFAULT 0,"
     "  created_at INTEGER NOT NULL, started_at INTEGER NOT NULL DEFAULT 0, finished_at INTEGER NOT NULL DEFAULT 0,"
     "  updated_at INTEGER NOT NULL DEFAULT 0);"
     "CREATE INDEX IF NOT EXISTS batch_ops_state ON batch_ops(state, created_at);"
     "CREATE INDEX IF NOT EXISTS batch_ops_caller ON batch_ops(caller, created_at);"),
    /* 17: forks (docs/SEMANTICS.md "Retry and fork"): the recorded step a session was forked from,
     * as JSON text {"owner","rootPid","iter","step","bundleHash"}; '' for a session that is no fork */
    "ALTER TABLE sessions ADD COLUMN forked_from TEXT NOT NULL DEFAULT '';",
    /* 18: grants (docs/STORE.md "Grants"): who else may read, wake or manage a session, until when;
     * one row per (session, grantee), its id the listing's cursor; rows go with the session's row */
    ("CREATE TABLE session_grants(id INTEGER PRIMARY KEY, owner TEXT NOT NULL, root_pid INTEGER NOT NULL,"
     "  grantee TEXT NOT NULL, rights INTEGER NOT NULL, expires_at INTEGER NOT NULL, rule TEXT, step TEXT,"
     "  enc_dek TEXT, created_by TEXT NOT NULL, created_at INTEGER NOT NULL);"
     "CREATE UNIQUE INDEX session_grants_key ON session_grants(owner, root_pid, grantee);"
     "CREATE INDEX session_grants_grantee ON session_grants(grantee, expires_at);"),
};
#define NMIGRATIONS ((int)(sizeof migrations / sizeof migrations[0]))
_Static_assert(sizeof migrations / sizeof migrations[0] == XGR_STORE_SCHEMA_VERSION, "one migration per version");

int xgr__sq_schema_version(sqlite3 *db, const char *path, int *v, xgr_error *err) {
  sqlite3_stmt *s;
  *v = 0;
  int rc = sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='schema_version'", -1,
                              &s, NULL);
  if (rc) return xgr__sq_error(db, rc, path, "cannot read the schema", err);
  int has = sqlite3_step(s) == SQLITE_ROW && sqlite3_column_int(s, 0) > 0;
  rc = sqlite3_errcode(db);
  sqlite3_finalize(s);
  if (rc != SQLITE_OK && rc != SQLITE_ROW && rc != SQLITE_DONE) return xgr__sq_error(db, rc, path, "cannot read the schema", err);
  if (!has) {
    /* a file with tables but no schema_version is not ours */
    rc = sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master", -1, &s, NULL);
    if (rc) return xgr__sq_error(db, rc, path, "cannot read the schema", err);
    int n = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int(s, 0) : 0;
    sqlite3_finalize(s);
    if (n) return xgr_error_set(err, XGR_EINVAL, NULL, "store %s: the database has tables but no schema_version; it is "
                                "not an xgr store", path);
    return 0;
  }
  rc = sqlite3_prepare_v2(db, "SELECT COALESCE(MAX(version), 0) FROM schema_version", -1, &s, NULL);
  if (rc) return xgr__sq_error(db, rc, path, "cannot read schema_version", err);
  if (sqlite3_step(s) == SQLITE_ROW) *v = sqlite3_column_int(s, 0);
  sqlite3_finalize(s);
  return 0;
}

int xgr__sq_migrate(sqstore *q, int from, xgr_error *err) {
  for (int v = from + 1; v <= NMIGRATIONS; v++) {
    char sql[160];
    if (xgr__sq_exec(q->w, q->path, "BEGIN IMMEDIATE", err)) return XGR_EIO;
    int rc = v == 1 ? xgr__sq_exec(q->w, q->path, "CREATE TABLE schema_version(version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)", err) : 0;
    if (!rc) rc = xgr__sq_exec(q->w, q->path, migrations[v - 1], err);
    snprintf(sql, sizeof sql, "INSERT INTO schema_version(version, applied_at) VALUES(%d, %lld)", v,
             (long long)xgr__store_now_ms(&q->base));
    if (!rc) rc = xgr__sq_exec(q->w, q->path, sql, err);
    if (!rc) rc = xgr__sq_exec(q->w, q->path, "COMMIT", err);
    if (rc) {
      sqlite3_exec(q->w, "ROLLBACK", NULL, NULL, NULL);
      char m[XGR_MSG_MAX];
      snprintf(m, sizeof m, "%s", err->message);
      return xgr_error_set(err, XGR_EIO, NULL, "migration to schema version %d failed: %s", v, m);
    }
  }
  return 0;
}

