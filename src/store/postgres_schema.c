/* postgres_schema.c — the PostgreSQL store's schema: the migrations that bring a database from any
 * earlier schema version to XGR_STORE_SCHEMA_VERSION (the versions of sqlite.c in PostgreSQL's
 * dialect, applied under an advisory lock so nodes that start together migrate once), the writer's
 * one-per-schema lock, and the statements every writer connection prepares (the text of each
 * S_... statement postgres_write.c, postgres_bulk.c and postgres_gc.c run). Part of the PostgreSQL
 * backend (postgres.c has the overview). */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/postgres_impl.h"

/* ---- schema ----------------------------------------------------------------------------------- */

/* Migration i (1-based) brings the schema from version i-1 to i: the versions of sqlite.c, in
 * PostgreSQL's dialect. Never edit an entry once it shipped: add a new one. */
static const char *const migrations[] = {
    /* 1: the first schema */
    "CREATE DOMAIN xgr_u64 AS NUMERIC(20,0) CHECK (VALUE >= 0 AND VALUE <= 18446744073709551615);"
    "CREATE TABLE owners(owner TEXT COLLATE \"C\" PRIMARY KEY, next_root xgr_u64 NOT NULL);"
    "CREATE TABLE orchestrations(id TEXT NOT NULL, version BIGINT NOT NULL, hash TEXT NOT NULL,"
    "  owner TEXT NOT NULL, registered_at BIGINT NOT NULL, content BYTEA NOT NULL, PRIMARY KEY(id, version));"
    "CREATE INDEX orchestrations_hash ON orchestrations(hash);"
    "CREATE TABLE rules(id TEXT NOT NULL, version BIGINT NOT NULL, hash TEXT NOT NULL,"
    "  owner TEXT NOT NULL, registered_at BIGINT NOT NULL, content BYTEA NOT NULL, PRIMARY KEY(id, version));"
    "CREATE INDEX rules_hash ON rules(hash);"
    "CREATE TABLE sessions(owner TEXT COLLATE \"C\" NOT NULL, root_pid xgr_u64 NOT NULL, registry TEXT NOT NULL DEFAULT '',"
    "  ostc_id TEXT NOT NULL, ostc_hash TEXT NOT NULL, status INTEGER NOT NULL, killed_at BIGINT NOT NULL DEFAULT 0,"
    "  created_at BIGINT NOT NULL, finished_at BIGINT NOT NULL DEFAULT 0, next_iter xgr_u64 NOT NULL,"
    "  paused INTEGER NOT NULL DEFAULT 0, PRIMARY KEY(owner, root_pid));"
    "CREATE TABLE proc_rt(owner TEXT COLLATE \"C\" NOT NULL, root_pid xgr_u64 NOT NULL, iter xgr_u64 NOT NULL,"
    "  parent_iter xgr_u64 NOT NULL, step INTEGER NOT NULL, step_id TEXT NOT NULL, status INTEGER NOT NULL,"
    "  paused INTEGER NOT NULL, valid INTEGER NOT NULL, abort_reason INTEGER NOT NULL, join_group BIGINT NOT NULL,"
    "  join_from_group BIGINT NOT NULL, next_wake_at BIGINT NOT NULL, created_at BIGINT NOT NULL,"
    "  started_at BIGINT NOT NULL, finished_at BIGINT NOT NULL, payload TEXT NOT NULL, error TEXT,"
    "  join_state TEXT, terminal_at BIGINT, PRIMARY KEY(owner, root_pid, iter));"
    "CREATE TABLE proc_steps(owner TEXT COLLATE \"C\" NOT NULL, root_pid xgr_u64 NOT NULL, iter xgr_u64 NOT NULL,"
    "  parent_iter xgr_u64 NOT NULL, step INTEGER NOT NULL, step_id TEXT NOT NULL, status INTEGER NOT NULL,"
    "  valid INTEGER NOT NULL, abort_reason INTEGER NOT NULL, at BIGINT NOT NULL, finished_at BIGINT NOT NULL,"
    "  error TEXT, payload TEXT, recorded_at BIGINT NOT NULL, PRIMARY KEY(owner, root_pid, iter));",
    /* 2: recovery of join groups and of kill-closed scopes; indexes for retention */
    "ALTER TABLE sessions ADD COLUMN next_group BIGINT NOT NULL DEFAULT 1;"
    "UPDATE sessions SET next_group = 1 + (SELECT COALESCE(MAX(GREATEST(r.join_group, r.join_from_group)), 0)"
    "  FROM proc_rt r WHERE r.owner = sessions.owner AND r.root_pid = sessions.root_pid);"
    "CREATE TABLE proc_scopes(owner TEXT COLLATE \"C\" NOT NULL, root_pid xgr_u64 NOT NULL, grp BIGINT NOT NULL,"
    "  PRIMARY KEY(owner, root_pid, grp));"
    "INSERT INTO proc_scopes SELECT owner, root_pid, join_from_group FROM proc_rt"
    "  WHERE join_state IS NOT NULL AND (join_state::jsonb ->> 'closed') = 'true' AND join_from_group > 0"
    "  AND (SELECT status FROM sessions s WHERE s.owner = proc_rt.owner AND s.root_pid = proc_rt.root_pid) = 0"
    "  ON CONFLICT DO NOTHING;"
    "CREATE INDEX proc_rt_terminal ON proc_rt(terminal_at) WHERE terminal_at IS NOT NULL;"
    "CREATE INDEX proc_steps_recorded ON proc_steps(recorded_at);"
    "CREATE INDEX sessions_finished ON sessions(finished_at) WHERE status <> 0;",
    /* 3: single-use marks (used control permits until their expiry) */
    ("CREATE TABLE marks(key TEXT COLLATE \"C\" PRIMARY KEY, expires_at BIGINT NOT NULL);"
     "CREATE INDEX marks_expiry ON marks(expires_at);"),
    /* 4: the gas budget of the SessionPermit that started a session */
    "ALTER TABLE sessions ADD COLUMN max_total_gas TEXT NOT NULL DEFAULT '';",
    /* 5: what a step's API calls did (status, time, masked URL, error), kept with its history row */
    "ALTER TABLE proc_steps ADD COLUMN api TEXT;",
    /* 6: the outbox of internal wake-ups (issue 14): written with the producing step's result,
     * deleted with the target's change that applied it, or kept marked refused */
    "CREATE TABLE outbox(id TEXT COLLATE \"C\" PRIMARY KEY, from_owner TEXT COLLATE \"C\" NOT NULL,"
    "  from_root xgr_u64 NOT NULL, to_owner TEXT NOT NULL, to_root xgr_u64 NOT NULL, step TEXT NOT NULL,"
    "  caller TEXT NOT NULL, rule TEXT, payload TEXT NOT NULL, created_at BIGINT NOT NULL, refused TEXT,"
    "  refused_at BIGINT);"
    "CREATE INDEX outbox_refused ON outbox(from_owner, from_root) WHERE refused IS NOT NULL;",
    /* 7: hibernation (issue 19): the due index of hibernated sessions (S_STATE writes it;
     * xgr__pg_load_some and xgr__pg_due read it) */
    ("ALTER TABLE sessions ADD COLUMN wake_due BIGINT;"
     "CREATE INDEX sessions_wake_due ON sessions(wake_due, owner, root_pid) WHERE status = 0 AND wake_due IS NOT NULL;"
     "CREATE INDEX sessions_awake ON sessions(owner, root_pid) WHERE status = 0 AND wake_due IS NULL;"),
    /* 8: the sending process of an outbox row (its iter and step), so a refused wake-up shows in
     * the sender's history; SQLite's order-preserving rootPid encoding has nothing to do here
     * (NUMERIC rootPids already order as numbers) */
    ("ALTER TABLE outbox ADD COLUMN from_iter xgr_u64;"
     "ALTER TABLE outbox ADD COLUMN from_step TEXT;"),
    /* 9: cluster leases (issue 18, docs/CLUSTER.md). Each live session is leased to one node: owner,
     * fencing epoch, expiry (ms of the database's clock). A row inserted by a node gets its lease
     * from the connection's settings xgr.node / xgr.lease_ms (pg_cluster.c sets them on the
     * writer); the defaults are set after the columns are added, so existing rows stay unleased.
     * xgr_lease_fence is the check every batch makes in its own transaction; a node is alive
     * while its connection holds the advisory lock xgr_node_alive looks for. lease_commands
     * carries control calls to the node that holds a session. */
    ("CREATE FUNCTION xgr_ms_now() RETURNS BIGINT LANGUAGE sql VOLATILE AS"
     "  $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;"
     "ALTER TABLE sessions ADD COLUMN lease_owner TEXT COLLATE \"C\";"
     "ALTER TABLE sessions ADD COLUMN lease_epoch BIGINT NOT NULL DEFAULT 0;"
     "ALTER TABLE sessions ADD COLUMN lease_expires BIGINT NOT NULL DEFAULT 0;"
     "ALTER TABLE sessions ALTER COLUMN lease_owner SET DEFAULT NULLIF(current_setting('xgr.node', true), '');"
     "ALTER TABLE sessions ALTER COLUMN lease_epoch SET DEFAULT 1;"
     "ALTER TABLE sessions ALTER COLUMN lease_expires SET DEFAULT COALESCE(xgr_ms_now() +"
     "  NULLIF(current_setting('xgr.lease_ms', true), '')::bigint, 0);"
     "CREATE INDEX sessions_lease ON sessions(lease_owner, lease_expires) WHERE status = 0;"
     "CREATE FUNCTION xgr_node_alive(node TEXT) RETURNS BOOLEAN LANGUAGE sql STABLE AS"
     "  $$ SELECT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
     "  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
     "  AND l.classid = ((hashtextextended('xgr node ' || node, 0) >> 32) & 4294967295)::oid"
     "  AND l.objid = (hashtextextended('xgr node ' || node, 0) & 4294967295)::oid) $$;"
     "CREATE FUNCTION xgr_lease_fence(o TEXT[], r NUMERIC[], e BIGINT[], node TEXT) RETURNS INTEGER"
     "  LANGUAGE plpgsql AS $$ DECLARE n INTEGER; BEGIN"
     "  SELECT count(*) INTO n FROM (SELECT 1 FROM sessions s, unnest(o, r, e) AS u(owner, root_pid, epoch)"
     "    WHERE s.owner = u.owner AND s.root_pid = u.root_pid AND s.lease_owner = node AND s.lease_epoch = u.epoch"
     "    FOR SHARE OF s) x;"
     "  IF n <> cardinality(o) THEN RAISE EXCEPTION 'lease lost: % of % sessions are no longer leased to node % at"
     "   their epoch', cardinality(o) - n, cardinality(o), node USING ERRCODE = 'XL001'; END IF;"
     "  RETURN n; END $$;"
     "CREATE TABLE lease_commands(id BIGSERIAL PRIMARY KEY, target_node TEXT COLLATE \"C\" NOT NULL,"
     "  from_node TEXT COLLATE \"C\" NOT NULL, owner TEXT COLLATE \"C\" NOT NULL, root_pid xgr_u64 NOT NULL,"
     "  body TEXT NOT NULL, created_at BIGINT NOT NULL, taken BOOLEAN NOT NULL DEFAULT false, rc INTEGER, result TEXT);"
     "CREATE INDEX lease_commands_pending ON lease_commands(target_node, id) WHERE NOT taken;"),
    /* 10: the nodes of a cluster (docs/CLUSTER.md): each node's heartbeat writes its row, with the
     * time until which all its leases hold (one write per heartbeat, not one per session); the
     * live nodes (rebalancing) are the rows seen lately whose node holds its advisory lock */
    "CREATE TABLE nodes(node TEXT COLLATE \"C\" PRIMARY KEY, seen_at BIGINT NOT NULL, expires_at BIGINT NOT NULL);",
    /* 11: in-place (HOT) updates of process and session rows. An update that changes no indexed
     * column and finds room on its row's page writes no index entry; most process rows are
     * written twice (made, then ended), so proc_rt pages are filled to 40% and sessions pages to
     * 50%. proc_rt(terminal_at) goes: ending a process changed an indexed column, so no update
     * of a process row was in place; retention finds terminal rows by a sweep over the primary
     * key instead (gc_procs). Affects pages written from now on.
     * The domain xgr_u64 loses its CHECK (0 .. 2^64-1), which PostgreSQL evaluated for every
     * rootPid, iter and parent iter of every row written (about 2 us a row, a sixth of the server's
     * time per step): every such value is a uint64_t of the writer's (p_u64, cp_num). The one value
     * computed in SQL, an owner's counter + 1 (S_NEXTPID), gets a CHECK of its own on owners. */
    ("DROP INDEX proc_rt_terminal;"
     "ALTER TABLE proc_rt SET (fillfactor = 40);"
     "ALTER TABLE sessions SET (fillfactor = 50);"
     "ALTER DOMAIN xgr_u64 DROP CONSTRAINT xgr_u64_check;"
     "ALTER TABLE owners ADD CONSTRAINT owners_next_root_u64 CHECK (next_root >= 0 AND next_root <= 18446744073709551615);"),
    /* 12: fewer row writes per step (docs/STORE.md, "Process records in fewer rows").
     * - The record of a process that ended with a step's result is kept with that result's
     *   history row (xgr__pg_send_bulk): the columns of proc_rt that proc_steps lacks, NULL when the row
     *   carries no record (rt_created_at IS NULL). Such a process's proc_rt row, if it has one, is
     *   then stale (ENDED_IN_HIST) and ignored by every read; retention deletes it.
     * - The processes a group makes for one session (at least PACK_MIN of them, all live) go
     *   into ONE row of proc_born (a pack; a fan-out's children: one row, not one each): their
     *   iters first_iter .. last_iter (not every iter between is a member) and their records as
     *   the JSON text `members` (cp_pack; one text field: PostgreSQL parses it only when it is
     *   read, not when it is written). A member's later state goes to proc_rt or a history row,
     *   which then supersede it (BORN_LIVE); a pack whose members are all superseded is deleted
     *   by retention, and the packs of a session go when it ends. Packs of a few KB stay in
     *   their row uncompressed (toast_tuple_target).
     * - proc_steps(recorded_at), which only retention reads, becomes a BRIN index: history rows
     *   are appended in about the order of recorded_at, so a summary per range of pages finds the
     *   old ones, and a row written costs no b-tree insert (about 6% of the server's CPU). */
    ("ALTER TABLE proc_steps ADD COLUMN rt_paused INTEGER, ADD COLUMN rt_join_group BIGINT,"
     " ADD COLUMN rt_join_from_group BIGINT, ADD COLUMN rt_next_wake_at BIGINT, ADD COLUMN rt_created_at BIGINT,"
     " ADD COLUMN rt_join_state TEXT;"
     "CREATE TABLE proc_born(owner TEXT COLLATE \"C\" NOT NULL, root_pid xgr_u64 NOT NULL, first_iter xgr_u64 NOT NULL,"
     "  last_iter xgr_u64 NOT NULL, members TEXT NOT NULL, PRIMARY KEY(owner, root_pid, first_iter))"
     "  WITH (toast_tuple_target = 8160);"
     "DROP INDEX proc_steps_recorded;"
     "CREATE INDEX proc_steps_recorded ON proc_steps USING brin(recorded_at) WITH (autosummarize = on);"),
    /* 13: the quotas (docs/SECURITY.md): the bytes each session's batches wrote, counted by the
     * engine's batches (0 for sessions written before); an owner's stored bytes are the sum over
     * its session rows (the primary key's index finds them), so retention deleting a row takes its
     * bytes off the owner's count in the same statement, and no counter row is shared by the
     * concurrent transactions of a split group or of several nodes */
    "ALTER TABLE sessions ADD COLUMN stored_bytes BIGINT NOT NULL DEFAULT 0;",
    /* 14: names and pins (sqlite_schema.c's 14): registered documents move into their writer's
     * namespace ("<owner>:<id>"; "<owner>/<alias>" becomes "<owner>:<alias>"; no owner: the empty
     * namespace; a row whose new id is taken stays), sessions get the bundle hash they pin */
    ("ALTER TABLE sessions ADD COLUMN bundle_hash TEXT NOT NULL DEFAULT '';"
     "UPDATE rules r SET id = lower(r.owner) || ':' || substr(r.id, 44) WHERE r.owner <> ''"
     "  AND length(r.id) > 43 AND substr(r.id, 43, 1) = '/' AND lower(substr(r.id, 1, 42)) = lower(r.owner)"
     "  AND NOT EXISTS (SELECT 1 FROM rules x WHERE x.id = lower(r.owner) || ':' || substr(r.id, 44) AND x.version = r.version);"
     "UPDATE rules r SET id = lower(r.owner) || ':' || r.id WHERE r.owner <> ''"
     "  AND NOT (length(r.id) > 43 AND substr(r.id, 43, 1) IN ('/', ':') AND lower(substr(r.id, 1, 42)) = lower(r.owner))"
     "  AND NOT EXISTS (SELECT 1 FROM rules x WHERE x.id = lower(r.owner) || ':' || r.id AND x.version = r.version);"
     "UPDATE orchestrations o SET id = lower(o.owner) || ':' || o.id WHERE o.owner <> ''"
     "  AND NOT (length(o.id) > 43 AND substr(o.id, 43, 1) = ':' AND lower(substr(o.id, 1, 42)) = lower(o.owner))"
     "  AND NOT EXISTS (SELECT 1 FROM orchestrations x WHERE x.id = lower(o.owner) || ':' || o.id AND x.version = o.version);"),
    /* 15: the audit trail (docs/STORE.md "The audit trail"): one row per control action or wake-up
     * applied to a session, written in the commit of its change; history (kept like proc_steps,
     * found by retention through a BRIN index of recorded_at as proc_steps is) */
    ("CREATE TABLE session_audit(id BIGSERIAL PRIMARY KEY, owner TEXT COLLATE \"C\" NOT NULL,"
     "  root_pid xgr_u64 NOT NULL, session_at BIGINT NOT NULL, kind TEXT NOT NULL, actor TEXT NOT NULL, node TEXT NOT NULL,"
     "  permit TEXT, detail TEXT, recorded_at BIGINT NOT NULL);"
     "CREATE INDEX session_audit_session ON session_audit(owner, root_pid, session_at);"
     "CREATE INDEX session_audit_recorded ON session_audit USING brin(recorded_at) WITH (autosummarize = on);"),
    /* 16: operations on many sessions (docs/STORE.md "Batch operations"): one row per batch
     * operation — its selection and action, who started it, state, progress, cursor and the claim of
     * the node driving it (driver, epoch, expires on the database's clock: a fenced lease) */
    ("CREATE TABLE IF NOT EXISTS batch_ops(id TEXT PRIMARY KEY, caller TEXT NOT NULL, action TEXT NOT NULL, spec TEXT NOT NULL,"
     "  state TEXT NOT NULL, total BIGINT NOT NULL DEFAULT 0, done BIGINT NOT NULL DEFAULT 0,"
     "  failed BIGINT NOT NULL DEFAULT 0, skipped BIGINT NOT NULL DEFAULT 0, cursor TEXT NOT NULL DEFAULT '',"
     "  error TEXT, driver TEXT NOT NULL DEFAULT '', epoch BIGINT NOT NULL DEFAULT 0, expires BIGINT NOT NULL DEFAULT 0,"
     "  created_at BIGINT NOT NULL, started_at BIGINT NOT NULL DEFAULT 0, finished_at BIGINT NOT NULL DEFAULT 0,"
     "  updated_at BIGINT NOT NULL DEFAULT 0);"
     "CREATE INDEX IF NOT EXISTS batch_ops_state ON batch_ops(state, created_at);"
     "CREATE INDEX IF NOT EXISTS batch_ops_caller ON batch_ops(caller, created_at);"),
    /* 17: forks (docs/SEMANTICS.md "Retry and fork"): the recorded step a session was forked from,
     * as JSON text {"owner","rootPid","iter","step","bundleHash"}; '' for a session that is no fork */
    "ALTER TABLE sessions ADD COLUMN forked_from TEXT NOT NULL DEFAULT '';",
    /* 18: grants (sqlite_schema.c's 18): one row per (session, grantee), its id the listing's
     * cursor; rows go with the session's row */
    ("CREATE TABLE session_grants(id BIGSERIAL PRIMARY KEY, owner TEXT COLLATE \"C\" NOT NULL,"
     "  root_pid xgr_u64 NOT NULL, grantee TEXT COLLATE \"C\" NOT NULL, rights INTEGER NOT NULL,"
     "  expires_at BIGINT NOT NULL, rule TEXT, step TEXT, enc_dek TEXT, created_by TEXT NOT NULL,"
     "  created_at BIGINT NOT NULL);"
     "CREATE UNIQUE INDEX session_grants_key ON session_grants(owner, root_pid, grantee);"
     "CREATE INDEX session_grants_grantee ON session_grants(grantee, expires_at);"),
};
#define NMIGRATIONS ((int)(sizeof migrations / sizeof migrations[0]))
_Static_assert(sizeof migrations / sizeof migrations[0] == XGR_STORE_SCHEMA_VERSION, "one migration per version");

/* the advisory lock key of migrations (any constant; "xgr1" in ASCII) */
#define MIGRATION_LOCK 0x78677231

/* ---- statements (prepared on the writer connection as "x<index>") -------------------------------- */

#define SESSION_INS "INSERT INTO sessions(owner, root_pid, registry, ostc_id, ostc_hash, status, killed_at, created_at," \
                    " finished_at, next_iter, paused, next_group, max_total_gas, bundle_hash)"                      \
                    " VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
#define REGISTER(t)                                                                                              \
  "WITH ex AS (SELECT version, owner, registered_at FROM " t " WHERE id = $1 AND hash = $2 ORDER BY version LIMIT 1),"   \
  " ins AS (INSERT INTO " t "(id, version, hash, owner, registered_at, content) SELECT $1,"                      \
  " (SELECT COALESCE(MAX(version), 0) + 1 FROM " t " WHERE id = $1), $2, $3, $4, $5"                             \
  " WHERE NOT EXISTS (SELECT 1 FROM ex) RETURNING version, owner, registered_at)"                               \
  " SELECT version, owner, registered_at FROM ex UNION ALL SELECT version, owner, registered_at FROM ins"

/* The writer's staging table of process rows (one per connection, emptied at each commit; a
 * rollback empties it too). Its columns are proc_rt's without the domain checks and keys. */
#define STAGE_PROCS                                                                                              \
  "CREATE TEMPORARY TABLE xgr_stage_procs(owner TEXT COLLATE \"C\", root_pid NUMERIC, iter NUMERIC,"            \
  " parent_iter NUMERIC, step INTEGER, step_id TEXT, status INTEGER, paused INTEGER, valid INTEGER,"             \
  " abort_reason INTEGER, join_group BIGINT, join_from_group BIGINT, next_wake_at BIGINT, created_at BIGINT,"   \
  " started_at BIGINT, finished_at BIGINT, payload TEXT, error TEXT, join_state TEXT, terminal_at BIGINT)"       \
  " ON COMMIT DELETE ROWS"

static const char *const stmt_sql[S_COUNT] = {
    [S_SESSION] = SESSION_INS " ON CONFLICT(owner, root_pid) DO UPDATE SET registry = excluded.registry,"
                  " ostc_id = excluded.ostc_id, ostc_hash = excluded.ostc_hash, status = excluded.status,"
                  " killed_at = excluded.killed_at, finished_at = excluded.finished_at, next_iter = excluded.next_iter,"
                  " paused = excluded.paused, next_group = excluded.next_group",
    /* insert only: an existing row is a unique violation, which fails the batch (see commit_group) */
    [S_SESSION_NEW] = SESSION_INS,
    [S_STATE] = "UPDATE sessions SET status = $3, killed_at = $4, next_iter = $5, next_group = $6, paused = $7,"
                " wake_due = $9, finished_at = CASE WHEN $3 <> 0 AND status = 0 THEN $8 ELSE finished_at END,"
                " stored_bytes = COALESCE($10::bigint, stored_bytes)"
                " WHERE owner = $1 AND root_pid = $2",
    [S_SCOPES_DEL] = "DELETE FROM proc_scopes WHERE owner = $1 AND root_pid = $2",
    [S_PROC] = "INSERT INTO proc_rt(owner, root_pid, iter, parent_iter, step, step_id, status, paused, valid,"
               " abort_reason, join_group, join_from_group, next_wake_at, created_at, started_at, finished_at,"
               " payload, error, join_state, terminal_at)"
               " VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)"
               " ON CONFLICT(owner, root_pid, iter) DO UPDATE SET parent_iter = excluded.parent_iter,"
               " step = excluded.step, step_id = excluded.step_id, status = excluded.status, paused = excluded.paused,"
               " valid = excluded.valid, abort_reason = excluded.abort_reason, join_group = excluded.join_group,"
               " join_from_group = excluded.join_from_group, next_wake_at = excluded.next_wake_at,"
               " created_at = excluded.created_at, started_at = excluded.started_at,"
               " finished_at = excluded.finished_at, payload = excluded.payload, error = excluded.error,"
               " join_state = excluded.join_state, terminal_at = excluded.terminal_at",
    [S_HIST] = "INSERT INTO proc_steps(owner, root_pid, iter, parent_iter, step, step_id, status, valid,"
               " abort_reason, at, finished_at, error, payload, recorded_at, api)"
               " VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
    [S_SCOPE] = "INSERT INTO proc_scopes(owner, root_pid, grp) VALUES($1, $2, $3) ON CONFLICT DO NOTHING",
    [S_RM_PROCS] = "DELETE FROM proc_rt WHERE owner = $1 AND root_pid = $2",
    /* a removed session's process records kept with its history rows go (the rows stay) */
    [S_RM_HIST_RECORDS] = "UPDATE proc_steps SET rt_created_at = NULL WHERE owner = $1 AND root_pid = $2"
                          " AND rt_created_at IS NOT NULL",
    /* a removed or ended session's packs of new processes (an ended session has no live process:
     * every member has been superseded by then) */
    [S_RM_BORN] = "DELETE FROM proc_born WHERE owner = $1 AND root_pid = $2",
    [S_BORN_DEL_BULK] = "DELETE FROM proc_born b USING unnest($1::text[], $2::numeric[]) AS u(owner, root_pid)"
                        " WHERE b.owner = u.owner AND b.root_pid = u.root_pid",
    /* one stretch of retention's sweep over proc_born, as S_GC_PROCS over proc_rt: the next $4
     * packs after the key ($1, $2, $3); those without a live member are deleted */
    [S_GC_BORN] = "WITH s AS (SELECT owner, root_pid, first_iter FROM proc_born"
                  " WHERE (owner, root_pid, first_iter) > ($1::text COLLATE \"C\", $2::numeric, $3::numeric)"
                  " ORDER BY owner, root_pid, first_iter LIMIT $4),"
                  " d AS (DELETE FROM proc_born b USING s WHERE b.owner = s.owner AND b.root_pid = s.root_pid"
                  " AND b.first_iter = s.first_iter AND NOT EXISTS (SELECT 1 FROM " BORN_UNNEST " WHERE " BORN_LIVE ")"
                  " RETURNING 1)"
                  " SELECT (SELECT count(*) FROM d), l.owner, l.root_pid, l.first_iter, (SELECT count(*) FROM s)"
                  " FROM (SELECT 1) one LEFT JOIN (SELECT owner, root_pid, first_iter FROM s"
                  " ORDER BY owner DESC, root_pid DESC, first_iter DESC LIMIT 1) l ON true",
    [S_RM_SESSION] = "DELETE FROM sessions WHERE owner = $1 AND root_pid = $2",
    [S_NEXTPID] = "INSERT INTO owners(owner, next_root) VALUES($1, 2) ON CONFLICT(owner)"
                  " DO UPDATE SET next_root = owners.next_root + 1 RETURNING next_root - 1",
    /* a session started with rootPid R: the owner's next expected rootPid becomes at least R + 1 */
    [S_OWNER_BUMP] = "INSERT INTO owners(owner, next_root) VALUES($1, $2) ON CONFLICT(owner)"
                     " DO UPDATE SET next_root = excluded.next_root WHERE owners.next_root < excluded.next_root",
    /* a mark is inserted, or replaces one that expired; no row returned: used */
    [S_MARK] = "INSERT INTO marks(key, expires_at) VALUES($1, $2) ON CONFLICT(key) DO UPDATE SET"
               " expires_at = excluded.expires_at WHERE marks.expires_at <= $3 RETURNING 1",
    [S_MARK_GC] = "DELETE FROM marks WHERE key IN (SELECT key FROM marks WHERE expires_at <= $1 LIMIT 64)",
    /* registering serializes per id across nodes (the next version is MAX + 1) */
    [S_REG_LOCK] = "SELECT pg_advisory_xact_lock(hashtextextended($1, 729))",
    [S_REG_ORCH] = REGISTER("orchestrations"),
    [S_REG_RULE] = REGISTER("rules"),
    /* the process rows of a whole group, COPYed into the writer's temporary table first (STAGE_PROCS) */
    [S_PROCS_BULK] = "INSERT INTO proc_rt(" PROC_ROW_COLS ") SELECT " PROC_ROW_COLS " FROM xgr_stage_procs"
                     " ON CONFLICT(owner, root_pid, iter) DO UPDATE SET parent_iter = excluded.parent_iter,"
                     " step = excluded.step, step_id = excluded.step_id, status = excluded.status,"
                     " paused = excluded.paused, valid = excluded.valid, abort_reason = excluded.abort_reason,"
                     " join_group = excluded.join_group, join_from_group = excluded.join_from_group,"
                     " next_wake_at = excluded.next_wake_at, created_at = excluded.created_at,"
                     " started_at = excluded.started_at, finished_at = excluded.finished_at,"
                     " payload = excluded.payload, error = excluded.error, join_state = excluded.join_state,"
                     " terminal_at = excluded.terminal_at",
    /* the last state of every session of a group; $9 is the commit's time */
    [S_STATES_BULK] = "UPDATE sessions s SET status = u.status, killed_at = u.killed_at, next_iter = u.next_iter,"
                      " next_group = u.next_group, paused = u.paused, wake_due = u.wake_due,"
                      " stored_bytes = COALESCE(u.stored_bytes, s.stored_bytes),"
                      " finished_at = CASE WHEN u.status <> 0 AND s.status = 0 THEN $10 ELSE s.finished_at END"
                      " FROM unnest($1::text[], $2::numeric[], $3::int[], $4::bigint[], $5::numeric[], $6::bigint[],"
                      " $7::int[], $8::bigint[], $9::bigint[]) AS u(owner, root_pid, status, killed_at, next_iter, next_group,"
                      " paused, wake_due, stored_bytes)"
                      " WHERE s.owner = u.owner AND s.root_pid = u.root_pid",
    /* the new sessions of a group (insert only, as S_SESSION_NEW) and its killed scopes */
    [S_SESSIONS_BULK] = "INSERT INTO sessions(owner, root_pid, registry, ostc_id, ostc_hash, status, killed_at, created_at,"
                        " finished_at, next_iter, paused, next_group, max_total_gas, bundle_hash)"
                        " SELECT * FROM unnest($1::text[], $2::numeric[], $3::text[], $4::text[], $5::text[], $6::int[],"
                        " $7::bigint[], $8::bigint[], $9::bigint[], $10::numeric[], $11::int[], $12::bigint[], $13::text[],"
                        " $14::text[])",
    [S_SESSIONS_UPSERT_BULK] = "INSERT INTO sessions(owner, root_pid, registry, ostc_id, ostc_hash, status, killed_at,"
                               " created_at, finished_at, next_iter, paused, next_group, max_total_gas, bundle_hash)"
                               " SELECT * FROM unnest($1::text[], $2::numeric[], $3::text[], $4::text[], $5::text[],"
                               " $6::int[], $7::bigint[], $8::bigint[], $9::bigint[], $10::numeric[], $11::int[],"
                               " $12::bigint[], $13::text[], $14::text[]) ON CONFLICT(owner, root_pid) DO UPDATE SET"
                               " registry = excluded.registry, ostc_id = excluded.ostc_id, ostc_hash = excluded.ostc_hash,"
                               " status = excluded.status, killed_at = excluded.killed_at, finished_at = excluded.finished_at,"
                               " next_iter = excluded.next_iter, paused = excluded.paused, next_group = excluded.next_group",
    [S_SCOPES_BULK] = "INSERT INTO proc_scopes(owner, root_pid, grp) SELECT * FROM unnest($1::text[], $2::numeric[],"
                      " $3::bigint[]) ON CONFLICT DO NOTHING",
    [S_SCOPES_DEL_BULK] = "DELETE FROM proc_scopes k USING unnest($1::text[], $2::numeric[]) AS u(owner, root_pid)"
                          " WHERE k.owner = u.owner AND k.root_pid = u.root_pid",
    /* one stretch of the retention sweep over proc_rt (gc_procs): the next $4 rows after the key
     * ($1, $2, $3) in key order; those terminal at or before $5 are deleted, and the stale ones
     * (ENDED_IN_HIST). Returns the rows deleted, the stretch's last key (NULL: nothing after the
     * key) and the rows looked at. */
    [S_GC_PROCS] = "WITH s AS (SELECT owner, root_pid, iter, terminal_at FROM proc_rt"
                   " WHERE (owner, root_pid, iter) > ($1::text COLLATE \"C\", $2::numeric, $3::numeric)"
                   " ORDER BY owner, root_pid, iter LIMIT $4),"
                   " d AS (DELETE FROM proc_rt r USING s WHERE r.owner = s.owner AND r.root_pid = s.root_pid"
                   " AND r.iter = s.iter AND ((s.terminal_at <= $5 AND r.terminal_at <= $5) OR " ENDED_IN_HIST("r") ")"
                   " RETURNING 1)"
                   " SELECT (SELECT count(*) FROM d), l.owner, l.root_pid, l.iter, (SELECT count(*) FROM s)"
                   " FROM (SELECT 1) one LEFT JOIN (SELECT owner, root_pid, iter FROM s"
                   " ORDER BY owner DESC, root_pid DESC, iter DESC LIMIT 1) l ON true",
    /* history rows past their time, with the stale proc_rt rows of the records they kept (else such
     * a process would look live again); a row whose record supersedes a member of a pack waits for
     * the pack to go, for the same reason. Returns the history rows deleted. */
    [S_GC_HIST] = "WITH d AS (DELETE FROM proc_steps WHERE ctid = ANY(ARRAY(SELECT p.ctid FROM proc_steps p"
                  " WHERE p.recorded_at <= $1 AND (p.rt_created_at IS NULL OR NOT EXISTS (SELECT 1 FROM proc_born b"
                  " WHERE b.owner = p.owner AND b.root_pid = p.root_pid AND p.iter BETWEEN b.first_iter AND b.last_iter))"
                  " LIMIT $2))"
                  " RETURNING owner, root_pid, iter, rt_created_at),"
                  " x AS (DELETE FROM proc_rt r USING d WHERE d.rt_created_at IS NOT NULL AND r.owner = d.owner"
                  " AND r.root_pid = d.root_pid AND r.iter = d.iter RETURNING 1)"
                  " SELECT count(*) FROM d",
    [S_GC_SESS] = "DELETE FROM sessions WHERE ctid = ANY(ARRAY(SELECT ctid FROM sessions WHERE status <> 0 AND"
                  " finished_at <= $1 LIMIT $2))",
    [S_WAKE_OUT] = "INSERT INTO outbox(id, from_owner, from_root, to_owner, to_root, step, caller, rule, payload,"
                   " created_at, from_iter, from_step) VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
                   " ON CONFLICT(id) DO NOTHING",
    [S_WAKE_DONE] = "DELETE FROM outbox WHERE id = $1 AND refused IS NULL",
    [S_WAKE_REFUSE] = "UPDATE outbox SET refused = $2, refused_at = $3 WHERE id = $1 AND refused IS NULL",
    [S_PIN] = "UPDATE sessions SET ostc_id = $3, ostc_hash = $4, bundle_hash = $5 WHERE owner = $1 AND root_pid = $2",
    [S_AUDIT] = "INSERT INTO session_audit(owner, root_pid, session_at, kind, actor, node, permit, detail, recorded_at)"
                 " VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    [S_FORKED] = "UPDATE sessions SET forked_from = $3 WHERE owner = $1 AND root_pid = $2",
    [S_GC_AUDIT] = "DELETE FROM session_audit WHERE id = ANY(ARRAY(SELECT id FROM session_audit WHERE recorded_at <= $1"
                   " LIMIT $2))",
    [S_GRANT] = "INSERT INTO session_grants(owner, root_pid, grantee, rights, expires_at, rule, step, enc_dek,"
                " created_by, created_at) VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
                " ON CONFLICT(owner, root_pid, grantee) DO UPDATE SET rights = excluded.rights,"
                " expires_at = excluded.expires_at, rule = excluded.rule, step = excluded.step,"
                " enc_dek = excluded.enc_dek, created_by = excluded.created_by, created_at = excluded.created_at",
    [S_GRANT_DEL] = "DELETE FROM session_grants WHERE owner = $1 AND root_pid = $2 AND grantee = $3",
    [S_RM_GRANTS] = "DELETE FROM session_grants WHERE owner = $1 AND root_pid = $2",
    /* grants go with their session's row (retention deleted it, S_GC_SESS) */
    [S_GC_GRANTS] = "DELETE FROM session_grants WHERE id = ANY(ARRAY(SELECT g.id FROM session_grants g WHERE NOT EXISTS"
                    " (SELECT 1 FROM sessions s WHERE s.owner = g.owner AND s.root_pid = g.root_pid) LIMIT $1))",
    /* finished batch operations past $1 ms of the database's clock (their times are that clock's,
     * postgres_batch.c; finished_at >= created_at: the range of the index on (state, created_at)) */
    [S_GC_BOPS] = "DELETE FROM batch_ops WHERE id = ANY(ARRAY(SELECT id FROM batch_ops"
                  " WHERE state IN ('done', 'cancelled', 'failed') AND created_at <= xgr_ms_now() - $1::bigint"
                  " AND finished_at <= xgr_ms_now() - $1::bigint LIMIT $2))",
    [S_RM_REFUSED] = "DELETE FROM outbox WHERE from_owner = $1 AND from_root = $2 AND refused IS NOT NULL",
    [S_GC_REFUSED] = "DELETE FROM outbox WHERE ctid = ANY(ARRAY(SELECT ctid FROM outbox WHERE refused IS NOT NULL"
                     " AND refused_at <= $1 LIMIT $2))",
    /* the stored next_iter of each session (by its position in the arrays) whose process rows a
     * bulk group writes, read before the group's own session rows and states; xgr__pg_copy_rows splits
     * the process rows on it */
    [S_NEXT_ITERS] = "SELECT u.ord, s.next_iter FROM unnest($1::text[], $2::numeric[]) WITH ORDINALITY"
                     " AS u(owner, root_pid, ord) JOIN sessions s ON s.owner = u.owner AND s.root_pid = u.root_pid",
    /* the owners' counters of a group spread over several connections, raised in a transaction of
     * their own before the group (commit_split); owners sorted, so concurrent raises never deadlock */
    [S_OWNERS_BULK] = "INSERT INTO owners(owner, next_root) SELECT * FROM unnest($1::text[], $2::numeric[])"
                      " ON CONFLICT(owner) DO UPDATE SET next_root = excluded.next_root"
                      " WHERE owners.next_root < excluded.next_root",
    [S_GC_SCOPES] = "DELETE FROM proc_scopes WHERE ctid = ANY(ARRAY(SELECT s.ctid FROM proc_scopes s WHERE NOT EXISTS"
                    " (SELECT 1 FROM proc_rt r WHERE r.owner = s.owner AND r.root_pid = s.root_pid AND"
                    " r.join_group = s.grp AND r.status < 2 AND NOT " ENDED_IN_HIST("r") ") AND NOT EXISTS"
                    " (SELECT 1 FROM proc_born b, " BORN_UNNEST " WHERE b.owner = s.owner AND b.root_pid = s.root_pid"
                    " AND m.join_group = s.grp AND " BORN_LIVE ") LIMIT $1))",
};

/* The schema version in the database: 0 for an empty one; an error for a database with tables
 * but no schema_version (not an xgr store). */
int xgr__pg_schema_version(pgstore *g, PGconn *c, int *v, xgr_error *err) {
  *v = 0;
  PGresult *r = PQexec(c, "SELECT to_regclass('schema_version') IS NOT NULL, (SELECT count(*) FROM pg_tables"
                          " WHERE schemaname = current_schema())");
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    xgr__pg_res_error(g, r, c, "cannot read the schema", err);
    PQclear(r);
    return XGR_EIO;
  }
  bool has = PQgetvalue(r, 0, 0)[0] == 't';
  long tables = strtol(PQgetvalue(r, 0, 1), NULL, 10);
  PQclear(r);
  if (!has) {
    if (tables) return xgr_error_set(err, XGR_EINVAL, NULL, "store %s: the database has tables but no schema_version; it "
                                     "is not an xgr store", g->name);
    return 0;
  }
  r = PQexec(c, "SELECT COALESCE(MAX(version), 0) FROM schema_version");
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    xgr__pg_res_error(g, r, c, "cannot read schema_version", err);
    PQclear(r);
    return XGR_EIO;
  }
  *v = (int)strtol(PQgetvalue(r, 0, 0), NULL, 10);
  PQclear(r);
  return 0;
}

/* Bring the schema to XGR_STORE_SCHEMA_VERSION in one transaction under an advisory lock (the
 * version is read again under the lock: another node may have migrated meanwhile). */
int xgr__pg_migrate(pgstore *g, int *found, xgr_error *err) {
  char sql[160];
  if (xgr__pg_exec_plain(g, g->w, "BEGIN", err)) return XGR_EIO;
  snprintf(sql, sizeof sql, "SELECT pg_advisory_xact_lock(%d)", MIGRATION_LOCK);
  int rc = xgr__pg_exec_plain(g, g->w, sql, err);
  if (!rc) rc = xgr__pg_schema_version(g, g->w, found, err);
  int from = *found;
  if (!rc && from > XGR_STORE_SCHEMA_VERSION) {
    rc = xgr_error_set(err, XGR_EUNSUPPORTED, NULL, "store %s has schema version %d; this xgr knows versions up to %d "
                       "(use a newer xgr)", g->name, from, XGR_STORE_SCHEMA_VERSION);
  }
  for (int v = from + 1; !rc && v <= NMIGRATIONS; v++) {
    if (v == 1)
      rc = xgr__pg_exec_plain(g, g->w, "CREATE TABLE schema_version(version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)",
                      err);
    if (!rc) rc = xgr__pg_exec_plain(g, g->w, migrations[v - 1], err);
    snprintf(sql, sizeof sql, "INSERT INTO schema_version(version, applied_at) VALUES(%d, %lld)", v,
             (long long)xgr__store_now_ms(&g->base));
    if (!rc) rc = xgr__pg_exec_plain(g, g->w, sql, err);
    if (rc && rc != XGR_EUNSUPPORTED) {
      char m[XGR_MSG_MAX];
      snprintf(m, sizeof m, "%s", err->message);
      rc = xgr_error_set(err, XGR_EIO, NULL, "migration to schema version %d failed: %s", v, m);
    }
  }
  if (!rc) rc = xgr__pg_exec_plain(g, g->w, "COMMIT", err);
  if (rc) xgr__pg_exec_plain(g, g->w, "ROLLBACK", &(xgr_error){0});
  return rc;
}

/* One writing store per database schema: the writer connection holds a session-level advisory
 * lock keyed by the schema, so a second xgrd (or any second writer) on the same schema waits up
 * to busy_timeout_ms and is then refused, instead of running the same sessions twice. The lock
 * goes with the connection: a writer that is killed releases it as soon as PostgreSQL sees its
 * connection close. (Several nodes sharing a database with leases is issue 18's coordination.) */
int xgr__pg_take_writer_lock(pgstore *g, bool shared, xgr_error *err) {
  /* cluster nodes share it (docs/CLUSTER.md); a single writer excludes them and they exclude it */
  PGresult *r = PQexec(g->w, shared ? "SELECT pg_advisory_lock_shared(hashtextextended('xgr store writer ' ||"
                                      " current_schema(), 0))"
                                    : "SELECT pg_advisory_lock(hashtextextended('xgr store writer ' || current_schema(), 0))");
  if (PQresultStatus(r) == PGRES_TUPLES_OK) {
    PQclear(r);
    return 0;
  }
  const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  int rc;
  if (state && !strcmp(state, "55P03"))
    rc = xgr_error_set(err, XGR_ESTATE, NULL, "store %s: another xgr process writes this database schema (waited %d ms "
                       "for it); one writer per schema until several nodes can share one (issue 18)", g->name,
                       g->base.cfg.busy_timeout_ms);
  else rc = xgr__pg_res_error(g, r, g->w, "cannot take the writer lock", err);
  PQclear(r);
  return rc;
}

char *xgr__pg_life_of(pgstore *g, PGconn *c) {
  for (size_t i = 0; i < g->nlanes; i++)
    if (g->lanes[i].w == c) return g->lanes[i].life;
  assert(c == g->w);
  return g->w_life;
}

/* Make c a writer connection: the staging table, every statement prepared, its server life (read
 * here only: a connection lives within one, SERVER_LIFE), and on a cluster node the node's settings
 * (new session rows leased to it). 0 or an error. */
int xgr__pg_setup_writer(pgstore *g, PGconn *c, xgr_error *err) {
  char *life = xgr__pg_life_of(g, c);
  life[0] = '\0';
  PGresult *lr = PQexec(c, "SELECT " SERVER_LIFE);
  if (PQresultStatus(lr) != PGRES_TUPLES_OK || PQntuples(lr) != 1) {
    int rc = xgr__pg_res_error(g, lr, c, "cannot read the server's start time", err);
    PQclear(lr);
    return rc;
  }
  snprintf(life, PG_LIFE_LEN, "%s", PQgetvalue(lr, 0, 0));
  PQclear(lr);
  /* a group's staged rows stay in memory (the default, 8 MB, holds some 30,000 of them) */
  if (xgr__pg_exec_plain(g, c, "SET temp_buffers = '64MB'", err) || xgr__pg_exec_plain(g, c, STAGE_PROCS, err)) return XGR_EIO;
  for (int i = 0; i < S_COUNT; i++) {
    char name[8];
    snprintf(name, sizeof name, "x%d", i);
    PGresult *r = PQprepare(c, name, stmt_sql[i], 0, NULL);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
      int rc = xgr__pg_res_error(g, r, c, "cannot prepare statements", err);
      PQclear(r);
      return rc;
    }
    PQclear(r);
  }
  return g->cl ? xgr__pgc_setup_writer(g->cl, c, err) : 0;
}
