/* postgres.c — the PostgreSQL store (libpq): the same interface, schema and migrations as the
 * SQLite store (sqlite.c), for several xgrd nodes on one database (issue 18). docs/STORE.md has
 * the long version; in short:
 *
 *   url          a libpq URI, `postgresql://user@host:port/db?...` or `postgres://...`; a unix
 *                socket directory goes in `?host=/dir`. Messages name it with the password masked.
 *   connections  `w` belongs to the writer thread (every write, retention); `r` serves reads
 *                under a recursive mutex (a load_live callback may read again); the lanes are
 *                further writer connections, one thread each, that commit parts of large groups.
 *   group commit the writer takes every queued batch and sends BEGIN and the statements of all of
 *                them in ONE pipeline (libpq pipeline mode: no round trip per statement), reads
 *                the results, then COMMITs and signals each batch. synchronous_commit is on
 *                (XGR_STORE_SYNC_FULL, the default: COMMIT returns once the WAL is flushed);
 *                XGR_STORE_SYNC_NORMAL sets it off (a crash may lose the last commits, never
 *                half of one). A batch's own fault (SQLSTATE class 23, a constraint such as a
 *                history row twice or a session that exists; class 22, bad data) rolls the group
 *                back and its batches are applied again one transaction each, so only the bad
 *                one fails; any other error (connection lost, disk full, ...) fails the group and
 *                puts the store in the failed state.
 *   bulk path    a group of session rows, states, process and history rows and scopes goes in a
 *                dozen statements: unnest arrays in the pipeline, then (COPY cannot be pipelined)
 *                the process rows by binary COPY — new ones (iter at least the session's stored
 *                next_iter, read first in the pipeline) straight into proc_rt, the others into the
 *                temporary xgr_stage_procs and one upsert from it — and the history rows by binary
 *                COPY into proc_steps (send_bulk, copy_rows). Should a "new" row exist, the group
 *                is redone with every process row through the upsert (commit_group). A process
 *                that a step's result of the group ended has its record written into that
 *                result's history row instead (migration 12, keeps_record), and the live
 *                processes a group makes for one session share one row of proc_born (a pack,
 *                cp_pack): most steps write one row, their history row. A stale proc_rt row or
 *                a superseded member is passed over by every read (ENDED_IN_HIST, BORN_LIVE).
 *   split        a bulk group of at least SPLIT_MIN_BATCHES batches is divided by session key
 *                over `w` and the lanes, each part in its own transaction at the same time; the
 *                owners' counters are raised first, on their own (commit_split).
 *   uint64       rootPids, iters and the owners' counters are NUMERIC(20,0) in the domain
 *                xgr_u64, sent as decimal text or binary NUMERIC and read as decimal text: exact
 *                over the whole range and ordered like the numbers (listing pages by rootPid).
 *                The range 0 .. 2^64-1 is the writer's (every value is a uint64_t), with a CHECK
 *                on the one value SQL computes, owners.next_root (migration 11).
 *   migrations   the same versions as SQLite, in PostgreSQL's dialect; applied under an advisory
 *                lock so nodes that start together migrate once. Owner and mark keys are
 *                COLLATE "C" (byte order, as SQLite compares them, and no locale cost in the keys).
 *   retention    as in SQLite: small delete steps between commits when no batch waits; terminal
 *                process rows are found by a sweep over proc_rt's key (gc_procs), since no index
 *                holds terminal_at: updates of process and session rows change no indexed
 *                column and have room on their page (fillfactor, migration 11), so PostgreSQL
 *                makes them in place (HOT) without index writes. The sweep also deletes stale
 *                rows, a second sweep packs without a live member (gc_sweep); deleting history
 *                rows by age deletes the stale rows of their records.
 */
#include <assert.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rule/rule_impl.h"   /* xgr__rule_mask_url */
#include "store/pg_cluster.h"
#include "store/store_impl.h"
#include "store/writer.h"
#include "util/buf.h"
#include "value/value_impl.h"   /* xgr__json_write_string */
#include "util/hash.h"

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
     * pg_load_some and pg_due read it) */
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
     *   history row (send_bulk): the columns of proc_rt that proc_steps lacks, NULL when the row
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
};
#define NMIGRATIONS ((int)(sizeof migrations / sizeof migrations[0]))
_Static_assert(sizeof migrations / sizeof migrations[0] == XGR_STORE_SCHEMA_VERSION, "one migration per version");

/* the advisory lock key of migrations (any constant; "xgr1" in ASCII) */
#define MIGRATION_LOCK 0x78677231

/* ---- statements (prepared on the writer connection as "x<index>") -------------------------------- */

enum {
  S_SESSION, S_SESSION_NEW, S_STATE, S_SCOPES_DEL, S_PROC, S_HIST, S_SCOPE, S_RM_PROCS, S_RM_SESSION, S_NEXTPID,
  S_OWNER_BUMP, S_MARK, S_MARK_GC, S_REG_LOCK, S_REG_ORCH, S_REG_RULE, S_GC_PROCS, S_GC_HIST, S_GC_SESS, S_GC_SCOPES,
  S_PROCS_BULK, S_STATES_BULK, S_SCOPES_DEL_BULK, S_SESSIONS_BULK, S_SESSIONS_UPSERT_BULK, S_SCOPES_BULK, S_WAKE_OUT, S_WAKE_DONE, S_WAKE_REFUSE, S_RM_REFUSED,
  S_GC_REFUSED, S_NEXT_ITERS, S_OWNERS_BULK, S_RM_HIST_RECORDS, S_RM_BORN, S_BORN_DEL_BULK, S_GC_BORN, S_COUNT
};

#define SESSION_INS "INSERT INTO sessions(owner, root_pid, registry, ostc_id, ostc_hash, status, killed_at, created_at," \
                    " finished_at, next_iter, paused, next_group, max_total_gas)"                                   \
                    " VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)"
#define REGISTER(t)                                                                                              \
  "WITH ex AS (SELECT version, owner, registered_at FROM " t " WHERE id = $1 AND hash = $2 ORDER BY version LIMIT 1),"   \
  " ins AS (INSERT INTO " t "(id, version, hash, owner, registered_at, content) SELECT $1,"                      \
  " (SELECT COALESCE(MAX(version), 0) + 1 FROM " t " WHERE id = $1), $2, $3, $4, $5"                             \
  " WHERE NOT EXISTS (SELECT 1 FROM ex) RETURNING version, owner, registered_at)"                               \
  " SELECT version, owner, registered_at FROM ex UNION ALL SELECT version, owner, registered_at FROM ins"

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

/* The columns of proc_rt in the order the bulk path COPYs them (send_bulk). */
#define PROC_ROW_COLS                                                                                                \
  "owner, root_pid, iter, parent_iter, step, step_id, status, paused, valid, abort_reason, join_group,"          \
  " join_from_group, next_wake_at, created_at, started_at, finished_at, payload, error, join_state, terminal_at"

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
                " wake_due = $9, finished_at = CASE WHEN $3 <> 0 AND status = 0 THEN $8 ELSE finished_at END"
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
                      " finished_at = CASE WHEN u.status <> 0 AND s.status = 0 THEN $9 ELSE s.finished_at END"
                      " FROM unnest($1::text[], $2::numeric[], $3::int[], $4::bigint[], $5::numeric[], $6::bigint[],"
                      " $7::int[], $8::bigint[]) AS u(owner, root_pid, status, killed_at, next_iter, next_group, paused,"
                      " wake_due)"
                      " WHERE s.owner = u.owner AND s.root_pid = u.root_pid",
    /* the new sessions of a group (insert only, as S_SESSION_NEW) and its killed scopes */
    [S_SESSIONS_BULK] = "INSERT INTO sessions(owner, root_pid, registry, ostc_id, ostc_hash, status, killed_at, created_at,"
                        " finished_at, next_iter, paused, next_group, max_total_gas)"
                        " SELECT * FROM unnest($1::text[], $2::numeric[], $3::text[], $4::text[], $5::text[], $6::int[],"
                        " $7::bigint[], $8::bigint[], $9::bigint[], $10::numeric[], $11::int[], $12::bigint[], $13::text[])",
    [S_SESSIONS_UPSERT_BULK] = "INSERT INTO sessions(owner, root_pid, registry, ostc_id, ostc_hash, status, killed_at,"
                               " created_at, finished_at, next_iter, paused, next_group, max_total_gas)"
                               " SELECT * FROM unnest($1::text[], $2::numeric[], $3::text[], $4::text[], $5::text[],"
                               " $6::int[], $7::bigint[], $8::bigint[], $9::bigint[], $10::numeric[], $11::int[],"
                               " $12::bigint[], $13::text[]) ON CONFLICT(owner, root_pid) DO UPDATE SET"
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
    [S_RM_REFUSED] = "DELETE FROM outbox WHERE from_owner = $1 AND from_root = $2 AND refused IS NOT NULL",
    [S_GC_REFUSED] = "DELETE FROM outbox WHERE ctid = ANY(ARRAY(SELECT ctid FROM outbox WHERE refused IS NOT NULL"
                     " AND refused_at <= $1 LIMIT $2))",
    /* the stored next_iter of each session (by its position in the arrays) whose process rows a
     * bulk group writes, read before the group's own session rows and states; copy_rows splits
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

/* ---- the handle ------------------------------------------------------------------------------- */

/* The buffers a writer connection builds its COPY data in, kept from one group to the next so a
 * large group does not fault in fresh pages each time (emptied after each use; freed when one grew
 * past KEEP_BUF_MAX). Owned by the thread that drives the connection. */
typedef struct copybufs {
  xgr_buf copy, fresh, staged, born;   /* history rows; new, stored and packed process rows */
} copybufs;
#define KEEP_BUF_MAX ((size_t)64 << 20)

/* Empty every buffer of cb, freeing those whose capacity is above keep (0: all of them). */
static void copybufs_empty(copybufs *cb, size_t keep) {
  xgr_buf *all[] = {&cb->copy, &cb->fresh, &cb->staged, &cb->born};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    all[i]->len = 0;
    if (all[i]->cap > keep) {
      free(all[i]->p);
      *all[i] = (xgr_buf){0};
    }
  }
}

/* Where one of retention's sweeps over a table's key goes on (gc_sweep; writer thread): the last
 * key looked at, or the start while owner is NULL; full: a full pass's sweep is under way. */
typedef struct sweep {
  char *owner;
  char root[24], iter[24];
  bool full;
} sweep;

typedef struct pgstore {
  xgr_store base;
  char *url;                    /* as given (libpq reads it) */
  char *name;                   /* for messages: the password masked */
  PGconn *w;                    /* writer connection (writer thread only after open) */
  PGconn *r;                    /* reader connection, under rmu */
  pthread_mutex_t rmu;          /* recursive */
  bool r_snapshot;              /* load_live's read transaction is open on r */

  xgr__writer wr;               /* the writer thread and its queue (writer.c) */
  pgc *cl;                      /* cluster node (cfg.node_id; pg_cluster.c), or NULL: the single writer */
  struct lane *lanes;           /* the writer's helper connections (commit_split), nlanes of them */
  size_t nlanes;
  sweep sw_procs, sw_born;       /* retention's sweeps over proc_rt and proc_born (gc_sweep) */
  copybufs bufs;                /* g->w's COPY data (writer thread) */
} pgstore;

/* A helper of the writer thread: its own writer connection and a thread that commits the part of
 * a large group handed to it (commit_split), while the writer thread commits another part on w. */
typedef struct lane {
  pgstore *g;
  PGconn *w;                    /* set up like g->w (prepared statements, staging table, node) */
  pthread_t thread;
  bool has_thread;
  pthread_mutex_t mu;           /* guards list, n, stop */
  pthread_cond_t cv;            /* work handed over, or done (list back to NULL), or stop */
  xgr_store_changes **list;     /* the part to commit; NULL: idle */
  size_t n;
  bool stop;
  copybufs bufs;                /* this lane's COPY data (its thread) */
} lane;

/* ---- errors --------------------------------------------------------------------------------- */

/* Is a SQLSTATE the batch's own fault (a constraint: class 23; bad data: class 22) rather than
 * the store's? */
static bool state_is_batch_fault(const char *state) {
  return state && (!strncmp(state, "23", 2) || !strncmp(state, "22", 2) || !strncmp(state, "XL", 2));
}

static int state_code(const char *state) {
  if (state && !strncmp(state, "XL", 2)) return XGR_ELEASE;   /* xgr_lease_fence: the lease is elsewhere */
  if (state && !strncmp(state, "23", 2)) return XGR_ECONFLICT;
  if (state && !strncmp(state, "22", 2)) return XGR_EINVAL;
  return XGR_EIO;
}

static int res_error(const pgstore *g, const PGresult *res, PGconn *c, const char *what, xgr_error *err) {
  const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
  char msg[300];
  xgr__pg_first_line(res && *PQresultErrorMessage(res) ? PQresultErrorMessage(res) : PQerrorMessage(c), msg, sizeof msg);
  const char *hint = state && !strcmp(state, "53100") ? " (the database's disk is full)"
                     : state && !strncmp(state, "08", 2) ? " (the connection to PostgreSQL was lost)"
                     : state && !strcmp(state, "25006") ? " (the database is read-only)" : "";
  if (!state) hint = " (the connection to PostgreSQL failed: xgr stops writing; restart it once the database is back)";
  return xgr_error_set(err, state_code(state), NULL, "store %s: %s: %s%s%s%s%s", g->name, what, msg,
                       state ? " [SQLSTATE " : "", state ? state : "", state ? "]" : "", hint);
}

/* ---- parameters ------------------------------------------------------------------------------ */

#define PMAX 20

/* Text parameters of one statement; numbers are formatted into num[]. */
typedef struct params {
  int n;
  const char *v[PMAX];
  int len[PMAX];
  int fmt[PMAX];
  char num[PMAX][24];
} params;

static void p_text(params *p, const char *t) {
  assert(p->n < PMAX);
  p->v[p->n] = t;
  p->len[p->n] = 0;
  p->fmt[p->n++] = 0;
}
static void p_i64(params *p, int64_t x) {
  assert(p->n < PMAX);
  snprintf(p->num[p->n], sizeof p->num[0], "%" PRId64, x);
  p_text(p, p->num[p->n]);
}
static void p_u64(params *p, uint64_t x) {
  assert(p->n < PMAX);
  snprintf(p->num[p->n], sizeof p->num[0], "%" PRIu64, x);
  p_text(p, p->num[p->n]);
}
static void p_bin(params *p, const void *b, size_t n) {
  assert(p->n < PMAX);
  p->v[p->n] = b;
  p->len[p->n] = (int)n;
  p->fmt[p->n++] = 1;
}

static uint64_t get_u64(const PGresult *r, int row, int col) {
  return PQgetisnull(r, row, col) ? 0 : strtoull(PQgetvalue(r, row, col), NULL, 10);
}
static int64_t get_i64(const PGresult *r, int row, int col) {
  return PQgetisnull(r, row, col) ? 0 : strtoll(PQgetvalue(r, row, col), NULL, 10);
}
static char *get_text(const PGresult *r, int row, int col) {
  return PQgetisnull(r, row, col) ? NULL : xgr__xstrdup(PQgetvalue(r, row, col));
}

/* ---- applying batches (writer thread, pipeline mode) ------------------------------------------ */

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

static void send_stmt(pgstore *g, PGconn *w, pipe_state *ps, int which, const params *p, size_t batch, size_t op, uint8_t what) {
  char name[8];
  snprintf(name, sizeof name, "x%d", which);
  if (!PQsendQueryPrepared(w, name, p->n, p->v, p->len, p->fmt, 0)) ps->send_failed = true;
  if (ps->n == ps->cap) {
    ps->cap = ps->cap ? ps->cap * 2 : 64;
    ps->p = xgr__xrealloc(ps->p, ps->cap * sizeof *ps->p);
  }
  ps->p[ps->n++] = (pending){batch, op, what};
}

static void send_op(pgstore *g, PGconn *w, pipe_state *ps, size_t bi, size_t oi, const store_op *op, int64_t now) {
  params p = {0};
  switch (op->kind) {
    case OP_SESSION: {
      const xgr_store_session *x = &op->u.session;
      p_text(&p, x->owner);
      p_u64(&p, x->root_pid);
      p_text(&p, x->registry);
      p_text(&p, x->ostc_id);
      p_text(&p, x->ostc_hash);
      p_i64(&p, x->status);
      p_i64(&p, x->killed_at);
      p_i64(&p, x->created_at ? x->created_at : now);
      p_i64(&p, x->status != XGR_RESULT_RUNNING ? (x->finished_at ? x->finished_at : now) : 0);
      p_u64(&p, x->next_iter);
      p_i64(&p, x->paused);
      p_i64(&p, x->next_group);
      p_text(&p, x->max_total_gas ? x->max_total_gas : "");
      send_stmt(g, w, ps, op->if_absent ? S_SESSION_NEW : S_SESSION, &p, bi, oi, op->if_absent ? W_SESSION_NEW : W_PLAIN);
      if (x->root_pid == UINT64_MAX) return;
      params q = {0};
      p_text(&q, x->owner);
      p_u64(&q, x->root_pid + 1);
      send_stmt(g, w, ps, S_OWNER_BUMP, &q, bi, oi, W_PLAIN);
      return;
    }
    case OP_STATE:
      p_text(&p, op->owner);
      p_u64(&p, op->root);
      p_i64(&p, op->u.state.status);
      p_i64(&p, op->u.state.killed_at);
      p_u64(&p, op->u.state.next_iter);
      p_i64(&p, op->u.state.next_group);
      p_i64(&p, op->u.state.paused);
      p_i64(&p, now);
      if (op->u.state.due) p_i64(&p, op->u.state.due);   /* the due index; NULL: awake */
      else p_text(&p, NULL);
      send_stmt(g, w, ps, S_STATE, &p, bi, oi, W_PLAIN);
      if (op->u.state.status != XGR_RESULT_RUNNING) {   /* killed scopes and packs matter only while the session lives */
        params q = {0};
        p_text(&q, op->owner);
        p_u64(&q, op->root);
        send_stmt(g, w, ps, S_SCOPES_DEL, &q, bi, oi, W_PLAIN);
        send_stmt(g, w, ps, S_RM_BORN, &q, bi, oi, W_PLAIN);
      }
      return;
    case OP_PROC: {
      const xgr_store_proc *x = &op->u.proc;
      p_text(&p, op->owner);
      p_u64(&p, op->root);
      p_u64(&p, x->iter);
      p_u64(&p, x->parent_iter);
      p_i64(&p, x->step);
      p_text(&p, x->step_id ? x->step_id : "");
      p_i64(&p, x->status);
      p_i64(&p, x->paused);
      p_i64(&p, x->valid);
      p_i64(&p, x->abort_reason);
      p_i64(&p, x->group);
      p_i64(&p, x->from_group);
      p_i64(&p, x->next_wake_at);
      p_i64(&p, x->created_at);
      p_i64(&p, x->started_at);
      p_i64(&p, x->finished_at);
      p_text(&p, x->payload ? x->payload : "{}");
      p_text(&p, x->error);
      p_text(&p, x->join);
      if (x->status >= XGR_PROC_DONE) p_i64(&p, now);
      else p_text(&p, NULL);
      send_stmt(g, w, ps, S_PROC, &p, bi, oi, W_PLAIN);
      return;
    }
    case OP_HIST: {
      const xgr_store_hist *h = &op->u.hist;
      p_text(&p, op->owner);
      p_u64(&p, op->root);
      p_u64(&p, h->iter);
      p_u64(&p, h->parent_iter);
      p_i64(&p, h->step);
      p_text(&p, h->step_id ? h->step_id : "");
      p_i64(&p, h->status);
      p_i64(&p, h->valid);
      p_i64(&p, h->abort_reason);
      p_i64(&p, h->at);
      p_i64(&p, h->finished_at);
      p_text(&p, h->error);
      p_text(&p, g->base.cfg.no_history_payload ? NULL : h->payload);
      p_i64(&p, now);
      p_text(&p, h->api);
      send_stmt(g, w, ps, S_HIST, &p, bi, oi, W_PLAIN);
      return;
    }
    case OP_SCOPE:
      p_text(&p, op->owner);
      p_u64(&p, op->root);
      p_i64(&p, op->u.group);
      send_stmt(g, w, ps, S_SCOPE, &p, bi, oi, W_PLAIN);
      return;
    case OP_REMOVE: {
      static const int ids[] = {S_RM_PROCS, S_RM_HIST_RECORDS, S_RM_BORN, S_SCOPES_DEL, S_RM_SESSION, S_RM_REFUSED};
      p_text(&p, op->owner);
      p_u64(&p, op->root);
      for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) send_stmt(g, w, ps, ids[i], &p, bi, oi, W_PLAIN);
      return;
    }
    case OP_WAKE_OUT: {
      const xgr_store_wake *wk = &op->u.wake;
      p_text(&p, wk->id);
      p_text(&p, wk->from_owner);
      p_u64(&p, wk->from_root);
      p_text(&p, wk->to_owner);
      p_u64(&p, wk->to_root);
      p_text(&p, wk->step);
      p_text(&p, wk->caller);
      p_text(&p, wk->rule);
      p_text(&p, wk->payload);
      p_i64(&p, now);
      if (wk->from_iter) p_u64(&p, wk->from_iter);
      else p_text(&p, NULL);   /* not recorded */
      p_text(&p, wk->from_step);
      send_stmt(g, w, ps, S_WAKE_OUT, &p, bi, oi, W_PLAIN);
      return;
    }
    case OP_WAKE_DONE:
      p_text(&p, op->owner);   /* the id */
      if (op->u.wake.refused) {
        p_text(&p, op->u.wake.refused);
        p_i64(&p, now);
      }
      send_stmt(g, w, ps, op->u.wake.refused ? S_WAKE_REFUSE : S_WAKE_DONE, &p, bi, oi, W_PLAIN);
      return;
    case OP_NEXTPID:
      p_text(&p, op->owner);
      send_stmt(g, w, ps, S_NEXTPID, &p, bi, oi, W_NEXTPID);
      return;
    case OP_REGISTER: {
      const xgr_store_doc *d = op->u.doc;
      p_text(&p, d->id);
      send_stmt(g, w, ps, S_REG_LOCK, &p, bi, oi, W_PLAIN);
      params q = {0};
      p_text(&q, d->id);
      p_text(&q, d->hash);
      p_text(&q, d->owner);
      p_i64(&q, d->registered_at);
      p_bin(&q, d->content, d->len);
      send_stmt(g, w, ps, d->kind == XGR_REG_RULE ? S_REG_RULE : S_REG_ORCH, &q, bi, oi, W_REGISTER);
      return;
    }
    case OP_MARK: {
      p_i64(&p, op->u.mark.now);
      send_stmt(g, w, ps, S_MARK_GC, &p, bi, oi, W_PLAIN);
      params q = {0};
      p_text(&q, op->owner);
      p_i64(&q, op->u.mark.expires_at);
      p_i64(&q, op->u.mark.now);
      send_stmt(g, w, ps, S_MARK, &q, bi, oi, W_MARK);
      return;
    }
  }
}

/* ---- bulk rows: the process and history rows of a group in two statements ------------------------ */

/* A column of a bulk statement: a PostgreSQL array literal being built ({"a","b",NULL,...}). */
typedef struct colbuf {
  xgr_buf b;
} colbuf;

static void col_sep(colbuf *c) { xgr__buf_putc(&c->b, c->b.len ? ',' : '{'); }

static void col_text(colbuf *c, const char *v) {
  col_sep(c);
  if (!v) {
    xgr__buf_puts(&c->b, "NULL");
    return;
  }
  xgr__buf_putc(&c->b, '"');
  const char *run = v;
  for (const char *q = v; *q; q++)
    if (*q == '"' || *q == '\\') {
      xgr__buf_put(&c->b, run, (size_t)(q - run));
      xgr__buf_putc(&c->b, '\\');
      run = q;
    }
  xgr__buf_puts(&c->b, run);
  xgr__buf_putc(&c->b, '"');
}

/* Decimal digits without printf (xgr__buf_put_u64/_i64): a group has some 30 numbers per row and
 * tens of thousands of rows, and printf's parsing of its format showed as the writer's main cost. */
static void col_u64(colbuf *c, uint64_t x) {
  col_sep(c);
  xgr__buf_put_u64(&c->b, x);
}

static void col_i64(colbuf *c, int64_t x) {
  col_sep(c);
  xgr__buf_put_i64(&c->b, x);
}

/* ---- binary COPY: the history rows of a group ------------------------------------------------------
 *
 * History rows are only ever inserted, so a group's go into proc_steps with one
 * `COPY ... FROM STDIN (FORMAT binary)`: no array literals to build and parse, no unnest, and the
 * server inserts them in multi-row batches. The format: a header, then per row a field count
 * and each field as a 32-bit length (-1: NULL) and its binary value, network byte order; a
 * trailer of -1. xgr_u64 columns are NUMERIC: base-10000 digits (numeric_send's format). */

static const char copy_header[19] = "PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0";

static inline void cp_be(xgr_buf *b, uint64_t v, int bytes) {
  assert(bytes >= 1 && bytes <= 8);
  if (b->len + (size_t)bytes + 1 > b->cap) xgr__buf_reserve(b, (size_t)bytes);
  unsigned char *t = (unsigned char *)b->p + b->len;   /* written in place: this runs for every field */
  for (int i = bytes - 1; i >= 0; i--, v >>= 8) t[i] = (unsigned char)v;
  b->len += (size_t)bytes;
}
static void cp_row(xgr_buf *b, int fields) { cp_be(b, (uint64_t)fields, 2); }
static void cp_text(xgr_buf *b, const char *v) {
  if (!v) {
    cp_be(b, 0xFFFFFFFFu, 4);
    return;
  }
  size_t n = strlen(v);
  assert(n < INT32_MAX);
  cp_be(b, n, 4);
  xgr__buf_put(b, v, n);
}
static void cp_i32(xgr_buf *b, int32_t v) {
  cp_be(b, 4, 4);
  cp_be(b, (uint32_t)v, 4);
}
static void cp_i64(xgr_buf *b, int64_t v) {
  cp_be(b, 8, 4);
  cp_be(b, (uint64_t)v, 8);
}
/* a NUMERIC: ndigits, weight (of the first digit, in powers of 10000), sign, dscale, digits */
static void cp_num(xgr_buf *b, uint64_t v) {
  uint16_t d[5];
  int n = 0;
  for (; v; v /= 10000) d[n++] = (uint16_t)(v % 10000);   /* least significant first */
  int weight = n - 1, low = 0;
  while (low < n && d[low] == 0) low++;                     /* trailing zero digits are implied */
  int nd = n - low;
  cp_be(b, 8 + 2 * (uint64_t)nd, 4);
  cp_be(b, (uint64_t)nd, 2);
  cp_be(b, (uint16_t)(n ? weight : 0), 2);
  cp_be(b, 0, 2);   /* sign: positive */
  cp_be(b, 0, 2);   /* dscale */
  for (int i = n - 1; i >= low; i--) cp_be(b, d[i], 2);
}

/* The start of a row of proc_rt or proc_steps in COPY's binary format (the header first when b is
 * empty): its column count, then the columns both tables begin with — owner, root_pid, iter,
 * parent_iter, step, step_id. */
static void cp_proc_key(xgr_buf *b, int ncols, const store_op *op, uint64_t iter, uint64_t parent_iter, int32_t step,
                        const char *step_id) {
  if (!b->len) xgr__buf_put(b, copy_header, sizeof copy_header);
  cp_row(b, ncols);
  cp_text(b, op->owner);
  cp_num(b, op->root);
  cp_num(b, iter);
  cp_num(b, parent_iter);
  cp_i32(b, step);
  cp_text(b, step_id ? step_id : "");
}

/* One process row in COPY's binary format (the columns PROC_ROW_COLS); the header first when b is
 * empty. Its terminal_at is now when the process has ended. */
static void cp_proc(xgr_buf *b, const store_op *op, int64_t now) {
  const xgr_store_proc *x = &op->u.proc;
  cp_proc_key(b, 20, op, x->iter, x->parent_iter, x->step, x->step_id);
  cp_i32(b, x->status);
  cp_i32(b, x->paused);
  cp_i32(b, x->valid);
  cp_i32(b, x->abort_reason);
  cp_i64(b, x->group);
  cp_i64(b, x->from_group);
  cp_i64(b, x->next_wake_at);
  cp_i64(b, x->created_at);
  cp_i64(b, x->started_at);
  cp_i64(b, x->finished_at);
  cp_text(b, x->payload ? x->payload : "{}");
  cp_text(b, x->error);
  cp_text(b, x->join);
  if (x->status >= XGR_PROC_DONE) cp_i64(b, now);
  else cp_text(b, NULL);
}

/* The fewest new live processes of one session in a group that go into one row of proc_born (a
 * pack) rather than a row each in proc_rt; the most in one pack, and the payload and join-state
 * bytes after which a pack takes no more members (a larger group of new processes makes several
 * packs: no field comes near PostgreSQL's 1 GB, no row is rewritten whole for one member). */
#define PACK_MIN 2
#define PACK_MAX 512
#define PACK_BYTES ((size_t)256 << 10)

/* The bytes of a process record's texts that grow with the process (its payload and join state). */
static size_t rec_bytes(const xgr_store_proc *p) {
  return (p->payload ? strlen(p->payload) : 0) + (p->join ? strlen(p->join) : 0);
}

/* A JSON string of text t (NULL: null) in b. */
static void pack_str(xgr_buf *b, const char *t) {
  if (t) xgr__json_write_string(b, t, strlen(t));
  else xgr__buf_put(b, "null", 4);
}

/* One row of proc_born in COPY's binary format: the n >= PACK_MIN new live processes rows[0..n)
 * of one session, in iter order (the header first when b is empty). Their records are one text
 * field, a JSON array with an array of each record's fields in PROC_COLS' order (BORN_UNNEST
 * reads it): numbers as JSON numbers, texts as JSON strings, so every text comes back exactly. */
static void cp_pack(xgr_buf *b, const store_op *const *rows, size_t n) {
  assert(n >= PACK_MIN);
  if (!b->len) xgr__buf_put(b, copy_header, sizeof copy_header);
  cp_row(b, 5);
  cp_text(b, rows[0]->owner);
  cp_num(b, rows[0]->root);
  cp_num(b, rows[0]->u.proc.iter);
  cp_num(b, rows[n - 1]->u.proc.iter);
  size_t at = b->len;
  cp_be(b, 0, 4);   /* the text's length, filled in below */
  xgr__buf_putc(b, '[');
  for (size_t i = 0; i < n; i++) {
    const xgr_store_proc *x = &rows[i]->u.proc;
    assert(i == 0 || x->iter > rows[i - 1]->u.proc.iter);
    xgr__buf_put(b, i ? ",[" : "[", i ? 2 : 1);
    xgr__buf_put_u64(b, x->iter);
    xgr__buf_putc(b, ',');
    xgr__buf_put_u64(b, x->parent_iter);
    xgr__buf_putc(b, ',');
    xgr__buf_put_i64(b, x->step);
    xgr__buf_putc(b, ',');
    pack_str(b, x->step_id ? x->step_id : "");
    int64_t v[] = {x->status, x->paused, x->valid, x->abort_reason, x->group, x->from_group,
                   x->next_wake_at, x->created_at, x->started_at, x->finished_at};
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
      xgr__buf_putc(b, ',');
      xgr__buf_put_i64(b, v[k]);
    }
    xgr__buf_putc(b, ',');
    pack_str(b, x->payload ? x->payload : "{}");
    xgr__buf_putc(b, ',');
    pack_str(b, x->error);
    xgr__buf_putc(b, ',');
    pack_str(b, x->join);
    xgr__buf_putc(b, ']');
  }
  xgr__buf_putc(b, ']');
  uint64_t len = b->len - at - 4;
  assert(len < INT32_MAX);
  for (int i = 3; i >= 0; i--, len >>= 8) b->p[at + (size_t)i] = (char)(unsigned char)len;
}

/* Can history row h keep the record of process row p (migration 12)? When p is the state of the
 * process that h's result ended, so that every column both have says the same (the record's
 * started_at is the row's `at`). Anything else keeps its proc_rt row. */
static bool keeps_record(const xgr_store_hist *h, const xgr_store_proc *p) {
  return p->status >= XGR_PROC_DONE && p->status == h->status && p->iter == h->iter &&
         p->parent_iter == h->parent_iter && p->step == h->step && p->valid == h->valid &&
         p->abort_reason == h->abort_reason && p->started_at == h->at && p->finished_at == h->finished_at &&
         h->payload && !strcmp(p->payload ? p->payload : "{}", h->payload) &&
         !strcmp(p->step_id ? p->step_id : "", h->step_id ? h->step_id : "") &&
         (p->error ? h->error && !strcmp(p->error, h->error) : !h->error);
}

/* One history row in COPY's binary format (the columns of COPY_HIST); the header first when b is
 * empty. recorded_at is now; the payload is left out with no_payload (cfg.no_history_payload).
 * rec: the process record the row keeps (keeps_record), or NULL. */
static void cp_hist(xgr_buf *b, const store_op *op, int64_t now, bool no_payload, const xgr_store_proc *rec) {
  const xgr_store_hist *x = &op->u.hist;
  assert(!rec || (!no_payload && keeps_record(x, rec)));
  cp_proc_key(b, 21, op, x->iter, x->parent_iter, x->step, x->step_id);
  cp_i32(b, x->status);
  cp_i32(b, x->valid);
  cp_i32(b, x->abort_reason);
  cp_i64(b, x->at);
  cp_i64(b, x->finished_at);
  cp_text(b, x->error);
  cp_text(b, no_payload ? NULL : x->payload);
  cp_i64(b, now);
  cp_text(b, x->api);
  if (rec) {
    cp_i32(b, rec->paused);
    cp_i64(b, rec->group);
    cp_i64(b, rec->from_group);
    cp_i64(b, rec->next_wake_at);
    cp_i64(b, rec->created_at);
    cp_text(b, rec->join);
  } else {
    for (int k = 0; k < 6; k++) cp_text(b, NULL);
  }
}

/* Can the group go through the bulk path? Only entries whose order relative to the process and
 * history rows does not matter: session rows, states, scopes (no removal, no registry, no
 * counters, no marks). */
static bool bulk_ok(xgr_store_changes **list, size_t n) {
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < list[i]->n; k++) {
      op_kind t = list[i]->ops[k].kind;
      if (t != OP_SESSION && t != OP_STATE && t != OP_PROC && t != OP_HIST && t != OP_SCOPE) return false;
    }
  return true;
}

static size_t key_hash(const char *owner, uint64_t root, uint64_t iter) {
  uint64_t x = root * 0x9E3779B97F4A7C15ULL ^ iter;
  for (const char *p = owner; *p; p++) x = (x ^ (unsigned char)*p) * 0x100000001b3ULL;
  x ^= x >> 31;
  return (size_t)x;
}

/* by (owner, rootPid, iter) for process entries, (owner, rootPid) for the others */
static size_t proc_key_hash(const store_op *op) {
  return key_hash(op->owner, op->root, op->kind == OP_PROC ? op->u.proc.iter : 0);
}

/* qsort: entries by session key (owner in byte order, as COLLATE "C"; rootPid) */
static int session_key_cmp(const void *a, const void *b) {
  const store_op *x = *(const store_op *const *)a, *y = *(const store_op *const *)b;
  int c = strcmp(x->owner, y->owner);
  if (c) return c;
  return x->root < y->root ? -1 : x->root > y->root;
}

/* qsort: process entries by session key, then iter */
static int proc_key_cmp(const void *a, const void *b) {
  int c = session_key_cmp(a, b);
  if (c) return c;
  const store_op *x = *(const store_op *const *)a, *y = *(const store_op *const *)b;
  return x->u.proc.iter < y->u.proc.iter ? -1 : x->u.proc.iter > y->u.proc.iter;
}

/* Close the array literals of the columns c[0..ncol) and append them to p as text parameters;
 * text[k] gets column k's text (the caller frees it after the statement). */
static void cols_params(colbuf *c, int ncol, params *p, char **text) {
  for (int k = 0; k < ncol; k++) {
    xgr__buf_putc(&c[k].b, '}');
    text[k] = xgr__buf_finish(&c[k].b, NULL);
    p_text(p, text[k]);
  }
}

/* Send a bulk statement whose parameters are the columns c[0..ncol) (array literals being built)
 * and then those of extra, when it has rows. Frees the columns' buffers either way. */
static void send_cols(pgstore *g, PGconn *w, pipe_state *ps, colbuf *c, int ncol, size_t rows, int stmt, const params *extra) {
  if (!rows) {
    for (int k = 0; k < ncol; k++) free(c[k].b.p);
    return;
  }
  params p = {0};
  char *text[PMAX];
  assert(ncol + (extra ? extra->n : 0) <= PMAX);
  cols_params(c, ncol, &p, text);
  for (int k = 0; extra && k < extra->n; k++) {
    p.v[p.n] = extra->v[k];
    p.len[p.n] = extra->len[k];
    p.fmt[p.n++] = extra->fmt[k];
  }
  send_stmt(g, w, ps, stmt, &p, 0, 0, W_PLAIN);
  for (int k = 0; k < ncol; k++) free(text[k]);
}

typedef struct owner_next {
  const char *owner;            /* borrowed from the group's entries; NULL: a free slot */
  uint64_t next;
} owner_next;

/* Note in the table o[0..cap) (open addressing, cap a power of two with room) that owner's next
 * expected rootPid is at least root + 1. A session started with rootPid 2^64-1 raises nothing. */
static void owner_raise(owner_next *o, size_t cap, const char *owner, uint64_t root) {
  if (root == UINT64_MAX) return;
  size_t h = proc_key_hash(&(store_op){.owner = (char *)owner}) & (cap - 1);
  while (o[h].owner && strcmp(o[h].owner, owner)) h = (h + 1) & (cap - 1);
  if (!o[h].owner || o[h].next < root + 1) o[h] = (owner_next){owner, root + 1};
}

static int owner_next_cmp(const void *a, const void *b) {
  const owner_next *x = a, *y = b;
  return strcmp(x->owner, y->owner);
}

/* Move the used slots of o[0..cap) to its front in owner order; their number. Every connection
 * raises the owners' counters in this order, so two transactions never wait on each other in a
 * cycle. */
static size_t owners_sorted(owner_next *o, size_t cap) {
  size_t k = 0;
  for (size_t h = 0; h < cap; h++)
    if (o[h].owner) o[k++] = o[h];
  qsort(o, k, sizeof *o, owner_next_cmp);
  return k;
}

/* Send the group's entries: with bp->direct first the read of its sessions' stored next_iter
 * (S_NEXT_ITERS), then the session rows, scopes and the sessions' states in a few bulk
 * statements; the history rows go into copy (COPY's binary format) and the process rows, the last
 * state of each in key order, into bp (copy_rows writes them after the pipeline). The last state
 * of a session and of a process in the group wins. A process that the group's history row of it
 * ended (keeps_record) has its record written into that row instead of a process row: most steps
 * end their process, so this saves a row write per step (migration 12). A failing bulk statement
 * is put on batch 0: the group is then applied again one batch at a time, which names the faulty
 * batch. */
static void send_bulk(pgstore *g, PGconn *w, pipe_state *ps, xgr_store_changes **list, size_t n, int64_t now, xgr_buf *copy,
                      bulk_procs *bp, bool bump) {
  size_t nprocs = 0, nstates = 0, nnew_max = 0, nhist = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < list[i]->n; k++) {
      nprocs += list[i]->ops[k].kind == OP_PROC;
      nhist += list[i]->ops[k].kind == OP_HIST;
      nstates += list[i]->ops[k].kind == OP_STATE;
      nnew_max += list[i]->ops[k].kind == OP_SESSION;
    }
  size_t cap = 16, scap = 16;
  while (cap < nprocs * 2) cap *= 2;
  while (scap < nstates * 2) scap *= 2;
  const store_op **slot = xgr__xcalloc(cap, sizeof *slot);   /* open addressing by (owner, root, iter) */
  const store_op **sslot = xgr__xcalloc(scap, sizeof *sslot); /* ... and of states by (owner, root) */
  size_t ocap = 16;
  while (ocap < nnew_max * 2) ocap *= 2;
  owner_next *oslot = xgr__xcalloc(ocap, sizeof *oslot);      /* ... and of owners of new sessions */
  const store_op **kslot = xgr__xcalloc(ocap, sizeof *kslot); /* ... and of sessions with a row */
  size_t (*deferred)[2] = xgr__xcalloc(nnew_max + 1, sizeof *deferred);
  colbuf ic[13], uc[13], kc[3];   /* new sessions (insert only), session rows (upsert), scopes */
  memset(ic, 0, sizeof ic);
  memset(uc, 0, sizeof uc);
  memset(kc, 0, sizeof kc);
  size_t nins = 0, nups = 0, nscope = 0, ndeferred = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < list[i]->n; k++) {
      const store_op *op = &list[i]->ops[k];
      if (op->kind != OP_PROC) continue;
      size_t h = proc_key_hash(op) & (cap - 1);
      while (slot[h] && !(slot[h]->root == op->root && slot[h]->u.proc.iter == op->u.proc.iter &&
                          !strcmp(slot[h]->owner, op->owner)))
        h = (h + 1) & (cap - 1);
      slot[h] = op;   /* a later state of the same process replaces the earlier */
    }
  /* the records that history rows keep (recs[j] for the group's j-th history row, or NULL):
   * their process rows are not written */
  const xgr_store_proc **recs = NULL;
  bool *kept = NULL;
  if (nhist && nprocs && !g->base.cfg.no_history_payload) {
    recs = xgr__xcalloc(nhist, sizeof *recs);
    kept = xgr__xcalloc(cap, sizeof *kept);
    size_t j = 0;
    for (size_t i = 0; i < n; i++)
      for (size_t k = 0; k < list[i]->n; k++) {
        const store_op *op = &list[i]->ops[k];
        if (op->kind != OP_HIST) continue;
        size_t h = key_hash(op->owner, op->root, op->u.hist.iter) & (cap - 1);
        while (slot[h] && !(slot[h]->root == op->root && slot[h]->u.proc.iter == op->u.hist.iter &&
                            !strcmp(slot[h]->owner, op->owner)))
          h = (h + 1) & (cap - 1);
        if (slot[h] && !kept[h] && keeps_record(&op->u.hist, &slot[h]->u.proc)) {
          recs[j] = &slot[h]->u.proc;
          kept[h] = true;
        }
        j++;
      }
  }
  /* in key order: the upsert then walks proc_rt's primary key from left to right */
  size_t nslot = 0;
  for (size_t h = 0; h < cap; h++)
    if (slot[h] && !(kept && kept[h])) slot[nslot++] = slot[h];
  free(kept);
  qsort(slot, nslot, sizeof *slot, proc_key_cmp);
  bp->rows = slot;
  bp->n = nslot;
  if (bp->direct && nslot) {   /* the sessions' stored next_iter, before this group writes them */
    colbuf nc[2];
    memset(nc, 0, sizeof nc);
    bp->sess = xgr__xmalloc(nslot * sizeof *bp->sess);
    for (size_t h = 0; h < nslot; h++) {
      if (!h || slot[h]->root != slot[h - 1]->root || strcmp(slot[h]->owner, slot[h - 1]->owner)) {
        col_text(&nc[0], slot[h]->owner);
        col_u64(&nc[1], slot[h]->root);
        bp->nsess++;
      }
      bp->sess[h] = bp->nsess - 1;
    }
    bp->next = xgr__xcalloc(bp->nsess, sizeof *bp->next);
    size_t at = ps->n;
    send_cols(g, w, ps, nc, 2, bp->nsess, S_NEXT_ITERS, NULL);
    if (ps->n > at) ps->p[at].what = W_NEXT_ITERS;
  }
  size_t nh = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < list[i]->n; k++) {
      const store_op *op = &list[i]->ops[k];
      if (op->kind == OP_PROC) continue;   /* slotted above */
      if (op->kind == OP_HIST) {
        cp_hist(copy, op, now, g->base.cfg.no_history_payload, recs ? recs[nh] : NULL);
        nh++;
      } else if (op->kind == OP_STATE) {
        size_t h = proc_key_hash(op) & (scap - 1);
        while (sslot[h] && !(sslot[h]->root == op->root && !strcmp(sslot[h]->owner, op->owner))) h = (h + 1) & (scap - 1);
        sslot[h] = op;   /* the last state of a session wins (states only move forward) */
      } else if (op->kind == OP_SESSION && n > 1) {
        const xgr_store_session *x = &op->u.session;   /* S_SESSION(_NEW)'s values */
        size_t h = proc_key_hash(&(store_op){.owner = x->owner, .root = x->root_pid}) & (ocap - 1);
        while (kslot[h] && !(kslot[h]->u.session.root_pid == x->root_pid && !strcmp(kslot[h]->u.session.owner, x->owner)))
          h = (h + 1) & (ocap - 1);
        if (kslot[h]) {   /* the session's second row in the group: after the first, on its own */
          deferred[ndeferred][0] = i;
          deferred[ndeferred++][1] = k;
          continue;
        }
        kslot[h] = op;
        colbuf *nc = op->if_absent ? ic : uc;
        col_text(&nc[0], x->owner);
        col_u64(&nc[1], x->root_pid);
        col_text(&nc[2], x->registry);
        col_text(&nc[3], x->ostc_id);
        col_text(&nc[4], x->ostc_hash);
        col_i64(&nc[5], x->status);
        col_i64(&nc[6], x->killed_at);
        col_i64(&nc[7], x->created_at ? x->created_at : now);
        col_i64(&nc[8], x->status != XGR_RESULT_RUNNING ? (x->finished_at ? x->finished_at : now) : 0);
        col_u64(&nc[9], x->next_iter);
        col_i64(&nc[10], x->paused);
        col_i64(&nc[11], x->next_group);
        col_text(&nc[12], x->max_total_gas ? x->max_total_gas : "");
        *(op->if_absent ? &nins : &nups) += 1;
        owner_raise(oslot, ocap, x->owner, x->root_pid);   /* the owner's next expected rootPid: the largest + 1 */
      } else if (op->kind == OP_SCOPE) {
        col_text(&kc[0], op->owner);
        col_u64(&kc[1], op->root);
        col_i64(&kc[2], op->u.group);
        nscope++;
      } else {
        send_op(g, w, ps, i, k, op, now);
      }
    }
  /* the session rows (a session's later rows in the group after them), their owners' counters
   * and the killed scopes, before the states */
  send_cols(g, w, ps, ic, 13, nins, S_SESSIONS_BULK, NULL);
  send_cols(g, w, ps, uc, 13, nups, S_SESSIONS_UPSERT_BULK, NULL);
  for (size_t d = 0; d < ndeferred; d++)
    send_op(g, w, ps, deferred[d][0], deferred[d][1], &list[deferred[d][0]]->ops[deferred[d][1]], now);
  size_t nowners = bump ? owners_sorted(oslot, ocap) : 0;   /* in owner order: see S_OWNERS_BULK */
  for (size_t h = 0; h < nowners; h++) {
    params q = {0};
    p_text(&q, oslot[h].owner);
    p_u64(&q, oslot[h].next);
    send_stmt(g, w, ps, S_OWNER_BUMP, &q, 0, 0, W_PLAIN);
  }
  send_cols(g, w, ps, kc, 3, nscope, S_SCOPES_BULK, NULL);
  free(oslot);
  free(kslot);
  free(deferred);
  /* session states after the session rows and scopes sent above; a session that ended loses its
   * killed scopes */
  colbuf sc[8], dc[2], bc[2];   /* states; ended sessions (their scopes, their packs) */
  memset(sc, 0, sizeof sc);
  memset(dc, 0, sizeof dc);
  memset(bc, 0, sizeof bc);
  size_t nst = 0, ndel = 0;
  const store_op **ended = xgr__xmalloc((nstates + 1) * sizeof *ended);
  for (size_t h = 0; h < scap; h++) {
    const store_op *op = sslot[h];
    if (!op) continue;
    col_text(&sc[0], op->owner);
    col_u64(&sc[1], op->root);
    col_i64(&sc[2], op->u.state.status);
    col_i64(&sc[3], op->u.state.killed_at);
    col_u64(&sc[4], op->u.state.next_iter);
    col_i64(&sc[5], op->u.state.next_group);
    col_i64(&sc[6], op->u.state.paused);
    if (op->u.state.due) col_i64(&sc[7], op->u.state.due);   /* the due index; NULL: awake */
    else col_text(&sc[7], NULL);
    nst++;
    if (op->u.state.status != XGR_RESULT_RUNNING) ended[ndel++] = op;
  }
  /* in key order, as retention's sweeps lock rows (another node's retention may delete the same
   * packs: locks taken in one order cannot deadlock) */
  qsort(ended, ndel, sizeof *ended, session_key_cmp);
  for (size_t k = 0; k < ndel; k++) {
    col_text(&dc[0], ended[k]->owner);
    col_u64(&dc[1], ended[k]->root);
    col_text(&bc[0], ended[k]->owner);
    col_u64(&bc[1], ended[k]->root);
  }
  free(ended);
  free(sslot);
  free(recs);
  if (copy->len) cp_be(copy, 0xFFFF, 2);   /* the trailer */
  params now_p = {0};
  p_i64(&now_p, now);
  send_cols(g, w, ps, sc, 8, nst, S_STATES_BULK, &now_p);
  send_cols(g, w, ps, dc, 2, ndel, S_SCOPES_DEL_BULK, NULL);
  send_cols(g, w, ps, bc, 2, ndel, S_BORN_DEL_BULK, NULL);
}

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
} pipe_result;

/* Read the results of everything in ps (one sync point follows them). Entries whose result is
 * a value (a taken rootPid, a registered version, a mark) are filled in; a mark that is in use
 * fails its batch (list[i]->rc) without failing the transaction when it is the batch's only
 * write. */
static void read_pipeline(pgstore *g, PGconn *w, pipe_state *ps, xgr_store_changes **list, pipe_result *pr) {
  pr->ok = true;
  pr->conn_lost = false;
  pr->state[0] = 0;
  xgr_error_clear(&pr->err);
  for (size_t i = 0; i < ps->n; i++) {
    PGresult *r = PQgetResult(w);
    if (!r) {
      pr->ok = false;
      pr->conn_lost = true;
      res_error(g, NULL, w, "no result from PostgreSQL", &pr->err);
      return;
    }
    const pending *pe = &ps->p[i];
    xgr_store_changes *b = list[pe->batch];
    store_op *op = pe->what != W_PLAIN ? &b->ops[pe->op] : NULL;
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_FATAL_ERROR && pr->ok) {
      pr->ok = false;
      const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
      snprintf(pr->state, sizeof pr->state, "%s", state ? state : "");
      pr->bad_batch = pe->batch;
      if (pe->what == W_SESSION_NEW && state && !strcmp(state, "23505") && pe->op == 0)
        xgr_error_set(&pr->err, XGR_ECONFLICT, NULL, "session %s/%" PRIu64 " exists already; the batch was not applied",
                      op->owner, op->root);
      else res_error(g, r, w, "a write failed", &pr->err);
    } else if (st == PGRES_TUPLES_OK && pr->ok) {
      if (pe->what == W_NEXTPID && PQntuples(r) == 1) {
        *op->u.next_pid = get_u64(r, 0, 0);
      } else if (pe->what == W_REGISTER && PQntuples(r) >= 1) {
        xgr_store_doc *d = op->u.doc;
        d->version = (uint32_t)get_i64(r, 0, 0);
        free(d->owner);
        d->owner = get_text(r, 0, 1);
        d->registered_at = get_i64(r, 0, 2);
      } else if (pe->what == W_NEXT_ITERS) {
        bulk_procs *bp = ps->bp;
        for (int row = 0; row < PQntuples(r); row++) {
          uint64_t ord = get_u64(r, row, 0);
          if (ord >= 1 && ord <= bp->nsess) bp->next[ord - 1] = get_u64(r, row, 1);
        }
      } else if (pe->what == W_MARK && PQntuples(r) == 0) {
        xgr_error_set(&b->err, XGR_ECONFLICT, NULL, "already used (recorded until it expires)");
        b->rc = XGR_ECONFLICT;
        if (pe->op != 0) {   /* earlier entries of the batch were written: it must not commit */
          pr->ok = false;
          snprintf(pr->state, sizeof pr->state, "23505");
          pr->bad_batch = pe->batch;
          pr->err = b->err;
        }
      }
    } else if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && st != PGRES_PIPELINE_ABORTED &&
               st != PGRES_FATAL_ERROR) {
      if (pr->ok) {
        pr->ok = false;
        pr->bad_batch = pe->batch;
        xgr_error_set(&pr->err, XGR_EIO, NULL, "store %s: unexpected result %s", g->name, PQresStatus(st));
      }
    }
    PQclear(r);
    r = PQgetResult(w);   /* the end of this statement's results */
    while (r) {
      PQclear(r);
      r = PQgetResult(w);
    }
  }
  PGresult *r = PQgetResult(w);   /* the sync point */
  if (!r || PQresultStatus(r) != PGRES_PIPELINE_SYNC) {
    if (pr->ok) {
      pr->ok = false;
      pr->conn_lost = true;
      res_error(g, r, w, "the pipeline ended early", &pr->err);
    }
  }
  PQclear(r);
}

/* Run one statement without parameters through the pipeline (BEGIN, COMMIT, ROLLBACK) and wait
 * for its sync point. 0 or an error. */
static int pipe_simple(pgstore *g, PGconn *w, const char *sql, xgr_error *err) {
  if (!PQsendQueryParams(w, sql, 0, NULL, NULL, NULL, NULL, 0) || !PQpipelineSync(w))
    return res_error(g, NULL, w, sql, err);
  int rc = 0;
  PGresult *r = PQgetResult(w);
  if (!r || PQresultStatus(r) != PGRES_COMMAND_OK) rc = res_error(g, r, w, sql, err);
  if (r) {
    PQclear(r);
    while ((r = PQgetResult(w))) PQclear(r);   /* the end of the statement's results */
    r = PQgetResult(w);                         /* the sync point */
    if ((!r || PQresultStatus(r) != PGRES_PIPELINE_SYNC) && !rc) rc = res_error(g, r, w, sql, err);
  }
  PQclear(r);
  if (!rc && PQstatus(w) == CONNECTION_BAD) rc = res_error(g, NULL, w, sql, err);
  return rc;
}

/* Cluster: the group's first statement checks that this node still holds every session the group
 * writes at the epoch it claimed (xgr_lease_fence, share-locking the rows); a failure is put on
 * batch 0 like a failing bulk statement, so the group is applied again one batch at a time and
 * only the batches of lost sessions fail (XGR_ELEASE). */
static void send_fence(pgstore *g, PGconn *w, pipe_state *ps, xgr_store_changes **list, size_t n) {
  char *arr[4] = {0};
  if (!xgr__pgc_fence(g->cl, list, n, arr)) return;
  const char *v[4] = {arr[0], arr[1], arr[2], arr[3]};
  if (!PQsendQueryParams(w, "SELECT xgr_lease_fence($1::text[], $2::numeric[], $3::bigint[], $4)", 4, NULL, v,
                         NULL, NULL, 0))
    ps->send_failed = true;
  for (int i = 0; i < 4; i++) free(arr[i]);
  if (ps->n == ps->cap) {
    ps->cap = ps->cap ? ps->cap * 2 : 64;
    ps->p = xgr__xrealloc(ps->p, ps->cap * sizeof *ps->p);
  }
  ps->p[ps->n++] = (pending){0, 0, W_PLAIN};
}

/* The columns of a history row in COPY (the order cp_* writes them in send_bulk). */
#define COPY_HIST                                                                                                \
  "COPY proc_steps(owner, root_pid, iter, parent_iter, step, step_id, status, valid, abort_reason, at,"          \
  " finished_at, error, payload, recorded_at, api, rt_paused, rt_join_group, rt_join_from_group, rt_next_wake_at," \
  " rt_created_at, rt_join_state) FROM STDIN (FORMAT binary)"

static PGresult *exec_prepared(PGconn *c, int which, const params *p);

/* Record a failed statement of the bulk path's second part on pr (batch 0, like a failing bulk
 * statement in the pipeline). */
static void bulk_failed(pgstore *g, PGconn *w, PGresult *r, pipe_result *pr) {
  const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
  pr->ok = false;
  pr->conn_lost = !state;
  snprintf(pr->state, sizeof pr->state, "%s", state ? state : "");
  pr->bad_batch = 0;
  res_error(g, r, w, "a write failed", &pr->err);
}

/* COPY data (a whole binary stream) with the statement sql in the open transaction (outside
 * pipeline mode). */
static void copy_in(pgstore *g, PGconn *w, const char *sql, const xgr_buf *data, pipe_result *pr) {
  PGresult *r = PQexec(w, sql);
  if (PQresultStatus(r) == PGRES_COPY_IN) {
    PQclear(r);
    bool sent = true;
    for (size_t off = 0; off < data->len && sent;) {   /* CopyData messages of at most 1 MB */
      size_t k = data->len - off < (1u << 20) ? data->len - off : (1u << 20);
      sent = PQputCopyData(w, data->p + off, (int)k) == 1;
      off += k;
    }
    PQputCopyEnd(w, sent ? NULL : "xgr: sending the rows failed");
    r = PQgetResult(w);
  }
  if (PQresultStatus(r) != PGRES_COMMAND_OK) bulk_failed(g, w, r, pr);
  PQclear(r);
  while ((r = PQgetResult(w))) PQclear(r);
}

/* The bulk path's second part, after its pipeline: the process rows — with bp->direct those
 * never stored (iter at least their session's stored next_iter) by a binary COPY straight into
 * proc_rt, the others COPYed into the staging table and upserted from there — and the history
 * rows COPYed into proc_steps. A constraint failure of the direct COPY sets pr->direct_conflict
 * (a row existed after all: commit_group redoes the group through the upsert). COPY cannot run
 * in pipeline mode: the connection leaves it and enters it again. */
static void copy_rows(pgstore *g, PGconn *w, const bulk_procs *bp, int64_t now, copybufs *cb, pipe_result *pr) {
  const xgr_buf *hist = &cb->copy;
  if (!PQexitPipelineMode(w)) {
    pr->ok = false;
    pr->conn_lost = true;
    res_error(g, NULL, w, "cannot leave pipeline mode", &pr->err);
    return;
  }
  xgr_buf *fresh = &cb->fresh, *staged = &cb->staged, *born = &cb->born;
  assert(!fresh->len && !staged->len && !born->len);
#define NEW_LIVE(k) (bp->rows[k]->u.proc.iter >= bp->next[bp->sess[k]] && bp->rows[k]->u.proc.status < XGR_PROC_DONE)
  for (size_t i = 0; i < bp->n;) {
    bool is_new = bp->direct && bp->rows[i]->u.proc.iter >= bp->next[bp->sess[i]];
    if (is_new && NEW_LIVE(i)) {   /* the session's run of new live processes (rows are in key order) */
      size_t j = i + 1, bytes = rec_bytes(&bp->rows[i]->u.proc);
      while (j < bp->n && j - i < PACK_MAX && bytes < PACK_BYTES && bp->sess[j] == bp->sess[i] && NEW_LIVE(j))
        bytes += rec_bytes(&bp->rows[j++]->u.proc);
      if (j - i >= PACK_MIN) {
        cp_pack(born, bp->rows + i, j - i);
        i = j;
        continue;
      }
    }
    cp_proc(is_new ? fresh : staged, bp->rows[i], now);
    i++;
  }
#undef NEW_LIVE
  if (fresh->len) {
    cp_be(fresh, 0xFFFF, 2);   /* the trailer */
    copy_in(g, w, "COPY proc_rt(" PROC_ROW_COLS ") FROM STDIN (FORMAT binary)", fresh, pr);
    if (!pr->ok && !strncmp(pr->state, "23", 2)) pr->direct_conflict = true;
  }
  if (pr->ok && born->len) {
    cp_be(born, 0xFFFF, 2);
    copy_in(g, w, "COPY proc_born(owner, root_pid, first_iter, last_iter, members) FROM STDIN (FORMAT binary)", born, pr);
    if (!pr->ok && !strncmp(pr->state, "23", 2)) pr->direct_conflict = true;
  }
  if (pr->ok && staged->len) {
    cp_be(staged, 0xFFFF, 2);
    copy_in(g, w, "COPY xgr_stage_procs(" PROC_ROW_COLS ") FROM STDIN (FORMAT binary)", staged, pr);
    if (pr->ok) {
      params p = {0};
      PGresult *r = exec_prepared(w, S_PROCS_BULK, &p);
      if (PQresultStatus(r) != PGRES_COMMAND_OK) bulk_failed(g, w, r, pr);
      PQclear(r);
    }
  }
  if (pr->ok && hist->len) copy_in(g, w, COPY_HIST, hist, pr);
  if (!PQenterPipelineMode(w) && pr->ok) {
    pr->ok = false;
    pr->conn_lost = true;
    res_error(g, NULL, w, "cannot enter pipeline mode", &pr->err);
  }
}

/* BEGIN and the statements of list[0..n) in one pipeline, then the results; then the process and
 * history rows of a bulk group by COPY (new process rows straight into proc_rt when direct). */
static void attempt(pgstore *g, PGconn *w, copybufs *cb, xgr_store_changes **list, size_t n, int64_t now, bool direct,
                    bool bump, pipe_result *pr) {
  bulk_procs bp = {.direct = direct};
  pipe_state ps = {.bp = &bp};
  xgr_buf *copy = &cb->copy;
  assert(!copy->len);
  pr->direct_conflict = false;
  for (size_t i = 0; i < n; i++) {
    list[i]->rc = 0;
    xgr_error_clear(&list[i]->err);
  }
  if (!PQsendQueryParams(w, "BEGIN", 0, NULL, NULL, NULL, NULL, 0)) ps.send_failed = true;
  if (g->cl) send_fence(g, w, &ps, list, n);
  bool bulk = bulk_ok(list, n);
  if (bulk) {
    send_bulk(g, w, &ps, list, n, now, copy, &bp, bump);
  } else {
    for (size_t i = 0; i < n && !ps.send_failed; i++)
      for (size_t k = 0; k < list[i]->n; k++) send_op(g, w, &ps, i, k, &list[i]->ops[k], now);
  }
  if (ps.send_failed || !PQpipelineSync(w)) {
    pr->ok = false;
    pr->conn_lost = true;
    pr->state[0] = 0;
    res_error(g, NULL, w, "cannot send to PostgreSQL", &pr->err);
    goto out;
  }
  /* the BEGIN's result comes first */
  PGresult *r = PQgetResult(w);
  if (!r) {
    pr->ok = false;
    pr->conn_lost = true;
    pr->state[0] = 0;
    res_error(g, NULL, w, "cannot begin a transaction", &pr->err);
    goto out;
  }
  bool began = PQresultStatus(r) == PGRES_COMMAND_OK;
  xgr_error berr;
  if (!began) res_error(g, r, w, "cannot begin a transaction", &berr);
  PQclear(r);
  while ((r = PQgetResult(w))) PQclear(r);
  read_pipeline(g, w, &ps, list, pr);
  if (!began) {   /* nobody's fault: the store stops */
    pr->ok = false;
    pr->state[0] = 0;
    pr->bad_batch = n;
    pr->err = berr;
  }
  if (pr->ok && (copy->len || bp.n)) copy_rows(g, w, &bp, now, cb, pr);
out:
  free(ps.p);
  copybufs_empty(cb, KEEP_BUF_MAX);
  free(bp.rows);
  free(bp.sess);
  free(bp.next);
}

/* A failure that is nobody's fault and goes away when the transaction is tried again: the server
 * chose it as the victim of a deadlock (its locks crossed another node's, e.g. that node's
 * retention deleting rows of this node's sessions), or a serialization failure. */
static bool transient(const char *state) { return !strcmp(state, "40P01") || !strcmp(state, "40001"); }

/* How often a group is tried again after a transient failure, the first wait (doubled each time). */
#define TRANSIENT_TRIES 5
#define TRANSIENT_WAIT_MS 5

/* attempt(), and again after a rollback while it fails transiently, at most TRANSIENT_TRIES more
 * times (xgr_store_stats.group_retries counts them). Returns 0, or -1 when a ROLLBACK failed
 * (*err; the caller fails the group). */
static int attempt_retrying(pgstore *g, PGconn *w, copybufs *cb, xgr_store_changes **list, size_t n, int64_t now,
                            bool direct, bool bump, pipe_result *pr, xgr_error *err) {
  for (int tries = 0;; tries++) {
    attempt(g, w, cb, list, n, now, direct, bump, pr);
    if (pr->ok || pr->conn_lost || !transient(pr->state) || tries >= TRANSIENT_TRIES) return 0;
    if (pipe_simple(g, w, "ROLLBACK", err)) return -1;
    pthread_mutex_lock(&g->base.mu);
    g->base.stats.group_retries++;
    pthread_mutex_unlock(&g->base.mu);
    long ms = (long)TRANSIENT_WAIT_MS << tries;
    nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL);
  }
}

/* The store can no longer write: record why, fail every batch in list. */
static void fail_all(pgstore *g, xgr_store_changes **list, size_t n, const xgr_error *why) {
  xgr__store_set_failed(&g->base, why->code ? why->code : XGR_EIO, why->message);
  xgr_error ferr;
  xgr_store_failed(&g->base, &ferr);
  for (size_t i = 0; i < n; i++) {
    list[i]->rc = ferr.code;
    list[i]->err = ferr;
  }
}

static void count_tx(pgstore *g, size_t n) {
  pthread_mutex_lock(&g->base.mu);
  g->base.stats.transactions++;
  if (n > g->base.stats.max_batches_per_tx) g->base.stats.max_batches_per_tx = n;
  pthread_mutex_unlock(&g->base.mu);
}

/* One group on connection w: all batches in one transaction, or (after a batch's own fault) one
 * each. bump: the group's transaction raises its owners' counters (false: commit_split raised
 * them before, in a transaction of their own). */
static void commit_group(pgstore *g, PGconn *w, copybufs *cb, xgr_store_changes **list, size_t n, bool bump) {
  xgr_error err;
  int64_t now = xgr__store_now_ms(&g->base);
  if (xgr_store_failed(&g->base, &err)) {
    for (size_t i = 0; i < n; i++) {
      list[i]->rc = err.code;
      list[i]->err = err;
    }
    return;
  }
  if (!PQenterPipelineMode(w)) {
    res_error(g, NULL, w, "cannot enter pipeline mode", &err);
    fail_all(g, list, n, &err);
    return;
  }
  pipe_result pr;
  if (attempt_retrying(g, w, cb, list, n, now, true, bump, &pr, &err)) {
    fail_all(g, list, n, &err);
    PQexitPipelineMode(w);
    return;
  }
  if (!pr.ok && pr.direct_conflict) {   /* a "new" process row existed: the group again, all upserts */
    if (pipe_simple(g, w, "ROLLBACK", &err)) {
      fail_all(g, list, n, &err);
      PQexitPipelineMode(w);
      return;
    }
    pthread_mutex_lock(&g->base.mu);
    g->base.stats.group_redos++;
    pthread_mutex_unlock(&g->base.mu);
    if (attempt_retrying(g, w, cb, list, n, now, false, bump, &pr, &err)) {
      fail_all(g, list, n, &err);
      PQexitPipelineMode(w);
      return;
    }
  }
  if (pr.ok) {
    if (pipe_simple(g, w, "COMMIT", &err)) fail_all(g, list, n, &err);
    else count_tx(g, n);
    PQexitPipelineMode(w);
    return;
  }
  if (pr.conn_lost || !state_is_batch_fault(pr.state) || pr.bad_batch >= n) {   /* the store stops */
    pipe_simple(g, w, "ROLLBACK", &err);
    fail_all(g, list, n, &pr.err);
    PQexitPipelineMode(w);
    return;
  }
  if (pipe_simple(g, w, "ROLLBACK", &err)) {
    fail_all(g, list, n, &err);
    PQexitPipelineMode(w);
    return;
  }
  /* a batch's own fault: apply each batch in its own transaction so only the bad ones fail */
  for (size_t i = 0; i < n; i++) {
    if (attempt_retrying(g, w, cb, list + i, 1, now, false, true, &pr, &err)) {
      fail_all(g, list + i, n - i, &err);
      break;
    }
    if (pr.ok) {
      if (pipe_simple(g, w, "COMMIT", &err)) {
        fail_all(g, list + i, n - i, &err);
        break;
      }
      count_tx(g, 1);
      continue;
    }
    if (pipe_simple(g, w, "ROLLBACK", &err)) {
      fail_all(g, list + i, n - i, &err);
      break;
    }
    if (pr.conn_lost || !state_is_batch_fault(pr.state)) {
      fail_all(g, list + i, n - i, &pr.err);
      break;
    }
    list[i]->err = pr.err;   /* this batch fails alone */
    list[i]->rc = pr.err.code ? pr.err.code : XGR_ECONFLICT;
  }
  PQexitPipelineMode(w);
}

/* ---- retention (writer thread, outside pipeline mode) ------------------------------------------- */

static PGresult *exec_prepared(PGconn *c, int which, const params *p) {
  char name[8];
  snprintf(name, sizeof name, "x%d", which);
  return PQexecPrepared(c, name, p->n, p->v, p->len, p->fmt, 0);
}

static int exec_plain(pgstore *g, PGconn *c, const char *sql, xgr_error *err) {
  PGresult *r = PQexec(c, sql);
  int rc = 0;
  if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) rc = res_error(g, r, c, "", err);
  PQclear(r);
  return rc;
}

/* The rows of proc_rt one retention step looks at, per gc_batch rows it may delete. */
#define SWEEP_PER_BATCH 8

/* The next stretch of sweep sw starts at its table's first key. */
static void sweep_restart(sweep *sw) {
  free(sw->owner);
  sw->owner = NULL;
}

/* One stretch of sweep sw inside gc_step's transaction: statement stmt (S_GC_PROCS, S_GC_BORN)
 * looks at the next `span` keys after sw's and deletes what is due among them; the sweep then
 * goes on after the last of them, or (*wrapped) starts at the first key again.
 * - S_GC_PROCS: terminal rows of proc_rt ended at or before cut, and stale ones. A process row
 *   that ends is updated in place (no indexed column changes, migration 11), so no index finds
 *   terminal rows: a terminal row is deleted within ttl_secs plus one sweep of the table (rows /
 *   span steps of gc_interval_ms when nothing else is due).
 * - S_GC_BORN: packs of proc_born without a live member (cut unused).
 * Returns the rows deleted or -1 (err). */
static long gc_sweep(pgstore *g, sweep *sw, int stmt, int64_t span, int64_t cut, bool *wrapped, xgr_error *err) {
  params p = {0};
  p_text(&p, sw->owner ? sw->owner : "");
  p_text(&p, sw->owner ? sw->root : "-1");
  p_text(&p, sw->owner ? sw->iter : "-1");
  p_i64(&p, span);
  if (stmt == S_GC_PROCS) p_i64(&p, cut);
  PGresult *r = exec_prepared(g->w, stmt, &p);
  if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
    res_error(g, r, g->w, "retention: delete failed", err);
    PQclear(r);
    return -1;
  }
  long deleted = strtol(PQgetvalue(r, 0, 0), NULL, 10);
  long seen = strtol(PQgetvalue(r, 0, 4), NULL, 10);
  *wrapped = seen < span || PQgetisnull(r, 0, 1);
  sweep_restart(sw);
  if (!*wrapped) {
    sw->owner = xgr__xstrdup(PQgetvalue(r, 0, 1));
    snprintf(sw->root, sizeof sw->root, "%s", PQgetvalue(r, 0, 2));
    snprintf(sw->iter, sizeof sw->iter, "%s", PQgetvalue(r, 0, 3));
  }
  PQclear(r);
  return deleted;
}

/* One retention step: at most gc_batch rows of each kind in one transaction (terminal process
 * rows and packs: one stretch of each sweep, gc_sweep). Returns the rows deleted, or < 0 after an
 * error (in *err). *more: some kind hit the limit, or (full) a sweep has not yet gone over its
 * whole table since the full pass began. */
static long gc_step(pgstore *g, bool full, bool *more, xgr_error *err) {
  const xgr_store_config *c = &g->base.cfg;
  int64_t now = xgr__store_now_ms(&g->base);
  int lim = c->gc_batch;
  long total = 0;
  *more = false;
  if (exec_plain(g, g->w, "BEGIN", err)) goto fail;
  /* the packs first: a history row whose process a pack holds waits for it (S_GC_HIST) */
  struct { sweep *sw; int stmt; int64_t span; } sweeps[] = {
      {&g->sw_born, S_GC_BORN, lim}, {&g->sw_procs, S_GC_PROCS, (int64_t)lim * SWEEP_PER_BATCH}};
  for (size_t k = 0; k < sizeof sweeps / sizeof sweeps[0]; k++) {
    sweep *sw = sweeps[k].sw;
    if (full && !sw->full) {   /* a full pass sweeps from the first key */
      sweep_restart(sw);
      sw->full = true;
    }
    bool wrapped = false;
    long ch = gc_sweep(g, sw, sweeps[k].stmt, sweeps[k].span, now - c->ttl_secs * 1000, &wrapped, err);
    if (ch < 0) {
      exec_plain(g, g->w, "ROLLBACK", &(xgr_error){0});
      goto fail;
    }
    total += ch;
    if (ch >= lim || (full && !wrapped)) *more = true;
    if (wrapped) sw->full = false;
  }
  struct { int stmt; bool on; int64_t cut; } jobs[] = {
      {S_GC_HIST, c->history_secs > 0, now - c->history_secs * 1000},
      {S_GC_SESS, c->history_secs > 0, now - c->history_secs * 1000},
      {S_GC_REFUSED, c->history_secs > 0, now - c->history_secs * 1000},   /* refusal records are history */
      {S_GC_SCOPES, true, 0},
  };
  for (size_t j = 0; j < sizeof jobs / sizeof jobs[0]; j++) {
    if (!jobs[j].on) continue;
    params p = {0};
    if (jobs[j].stmt != S_GC_SCOPES) p_i64(&p, jobs[j].cut);
    p_i64(&p, lim);
    PGresult *r = exec_prepared(g->w, jobs[j].stmt, &p);
    bool counted = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;   /* S_GC_HIST counts in a row */
    if (PQresultStatus(r) != PGRES_COMMAND_OK && !counted) {
      res_error(g, r, g->w, "retention: delete failed", err);
      PQclear(r);
      exec_plain(g, g->w, "ROLLBACK", &(xgr_error){0});
      goto fail;
    }
    long ch = strtol(counted ? PQgetvalue(r, 0, 0) : PQcmdTuples(r), NULL, 10);
    PQclear(r);
    total += ch;
    if (ch >= lim) *more = true;
  }
  if (exec_plain(g, g->w, "COMMIT", err)) goto fail;
  pthread_mutex_lock(&g->base.mu);
  g->base.stats.gc_deleted += (uint64_t)total;
  pthread_mutex_unlock(&g->base.mu);
  return total;
fail:
  g->sw_procs.full = g->sw_born.full = false;   /* the next full pass starts from the first keys again */
  return -1;
}

static const store_vt postgres_vt;

/* ---- the writer thread ---------------------------------------------------------------------------- */

/* A group of at least this many batches is spread over the writer's connections (commit_split);
 * a smaller one goes through g->w alone, in one transaction, as its latency matters more. */
#define SPLIT_MIN_BATCHES 64

/* Which of nparts connections takes batch b: the one of its sessions' key, or -1 when its
 * entries name sessions of different parts (the group is then not split). */
static int part_of(const xgr_store_changes *b, size_t nparts) {
  int part = 0;
  bool any = false;
  const store_op *last = NULL;   /* the last op hashed: most ops of a batch name its one session */
  for (size_t k = 0; k < b->n; k++) {
    const store_op *op = &b->ops[k];
    if (op->kind != OP_SESSION && op->kind != OP_STATE && op->kind != OP_PROC && op->kind != OP_HIST &&
        op->kind != OP_SCOPE)
      continue;
    if (last && op->root == last->root && (op->owner == last->owner || !strcmp(op->owner, last->owner))) continue;
    last = op;
    uint64_t x = op->root * 0x9E3779B97F4A7C15ULL;
    for (const char *c = op->owner; *c; c++) x = (x ^ (unsigned char)*c) * 0x100000001b3ULL;
    int p = (int)(xgr__mix64(x) % nparts);
    if (any && p != part) return -1;
    part = p;
    any = true;
  }
  return part;
}

/* Raise the owners' counters for every session row of list[0..n) in one statement of its own
 * (committed before the parts of a split group, which then leave the owners rows alone: two
 * connections raising one owner's counter would wait for each other's commit). A counter raised
 * for a group that then fails is merely ahead, a gap in the rootPids. 0 or an error. */
static int raise_owners(pgstore *g, xgr_store_changes **list, size_t n, xgr_error *err) {
  size_t cap = 16, nsess = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < list[i]->n; k++) nsess += list[i]->ops[k].kind == OP_SESSION;
  if (!nsess) return 0;
  while (cap < nsess * 2) cap *= 2;
  owner_next *o = xgr__xcalloc(cap, sizeof *o);
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < list[i]->n; k++) {
      const store_op *op = &list[i]->ops[k];
      if (op->kind == OP_SESSION) owner_raise(o, cap, op->u.session.owner, op->u.session.root_pid);
    }
  size_t no = owners_sorted(o, cap);
  int rc = 0;
  if (no) {
    colbuf c[2];
    memset(c, 0, sizeof c);
    for (size_t h = 0; h < no; h++) {
      col_text(&c[0], o[h].owner);
      col_u64(&c[1], o[h].next);
    }
    params p = {0};
    char *text[2];
    cols_params(c, 2, &p, text);
    PGresult *r = exec_prepared(g->w, S_OWNERS_BULK, &p);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) rc = res_error(g, r, g->w, "cannot raise the owners' counters", err);
    PQclear(r);
    for (int k = 0; k < 2; k++) free(text[k]);
  }
  free(o);
  return rc;
}

/* The helper's thread: commit each part handed to it on its own connection. */
static void *lane_main(void *arg) {
  lane *l = arg;
  pthread_mutex_lock(&l->mu);
  for (;;) {
    while (!l->list && !l->stop) pthread_cond_wait(&l->cv, &l->mu);
    if (!l->list) break;
    xgr_store_changes **list = l->list;
    size_t n = l->n;
    pthread_mutex_unlock(&l->mu);
    commit_group(l->g, l->w, &l->bufs, list, n, false);
    pthread_mutex_lock(&l->mu);
    l->list = NULL;
    pthread_cond_broadcast(&l->cv);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

/* Commit list[0..n) as one group: through g->w alone, or — a large group of the bulk path whose
 * batches each write the sessions of one part — divided by session key over g->w and the helper
 * connections, each part in its own transaction at the same time, so the database works on
 * several cores. A session's batches keep their order (they are in one part, in group order),
 * and the next group starts after every part has committed. */
static void commit_split(pgstore *g, xgr_store_changes **list, size_t n) {
  size_t nparts = g->nlanes + 1;
  xgr_error err;
  if (nparts < 2 || n < SPLIT_MIN_BATCHES || !bulk_ok(list, n) || xgr_store_failed(&g->base, &err)) {
    commit_group(g, g->w, &g->bufs, list, n, true);
    return;
  }
  int *part = xgr__xmalloc(n * sizeof *part);
  size_t count[XGR_STORE_PG_WRITERS_MAX] = {0};
  for (size_t i = 0; i < n; i++) {
    part[i] = part_of(list[i], nparts);
    if (part[i] < 0) {   /* a batch across parts: the whole group on one connection */
      free(part);
      commit_group(g, g->w, &g->bufs, list, n, true);
      return;
    }
    count[part[i]]++;
  }
  if (raise_owners(g, list, n, &err)) {
    free(part);
    fail_all(g, list, n, &err);
    return;
  }
  /* the parts, each in group order, one after the other in sorted */
  xgr_store_changes **sorted = xgr__xmalloc(n * sizeof *sorted);
  size_t start[XGR_STORE_PG_WRITERS_MAX], at[XGR_STORE_PG_WRITERS_MAX];
  for (size_t p = 0, sum = 0; p < nparts; p++) {
    start[p] = at[p] = sum;
    sum += count[p];
  }
  for (size_t i = 0; i < n; i++) sorted[at[part[i]]++] = list[i];
  for (size_t p = 1; p < nparts; p++) {
    if (!count[p]) continue;
    lane *l = &g->lanes[p - 1];
    pthread_mutex_lock(&l->mu);
    l->list = sorted + start[p];
    l->n = count[p];
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
  }
  if (count[0]) commit_group(g, g->w, &g->bufs, sorted, count[0], false);
  for (size_t p = 1; p < nparts; p++) {
    lane *l = &g->lanes[p - 1];
    pthread_mutex_lock(&l->mu);
    while (l->list) pthread_cond_wait(&l->cv, &l->mu);
    pthread_mutex_unlock(&l->mu);
  }
  free(sorted);
  free(part);
}

/* The writer's two steps (writer.h). */
static void commit_cb(void *ctx, xgr_store_changes **list, size_t n) {
  pgstore *g = ctx;
  if (!g->cl) {
    commit_split(g, list, n);
  } else {   /* cluster: batches of sessions this node no longer holds fail without a round trip */
    size_t k = xgr__pgc_prefilter(g->cl, list, n);
    if (k) commit_split(g, list, k);
    xgr__pgc_after(g->cl, list, n);
  }
}

static long gc_cb(void *ctx, bool full, bool *more, xgr_error *err) { return gc_step(ctx, full, more, err); }

static void pg_submit(xgr_store *st, xgr_store_changes *b) { xgr__writer_submit(&((pgstore *)st)->wr, b); }

static void pg_flush(xgr_store *st) { xgr__writer_flush(&((pgstore *)st)->wr); }

static int pg_gc(xgr_store *st, size_t *deleted, xgr_error *err) {
  return xgr__writer_gc(&((pgstore *)st)->wr, deleted, err);
}

static void pg_close(xgr_store *st) {
  pgstore *g = (pgstore *)st;
  xgr__writer_destroy(&g->wr);   /* stops and joins the thread first: no part is handed over after it */
  for (size_t i = 0; i < g->nlanes; i++) {
    lane *l = &g->lanes[i];
    if (l->has_thread) {
      pthread_mutex_lock(&l->mu);
      l->stop = true;
      pthread_cond_broadcast(&l->cv);
      pthread_mutex_unlock(&l->mu);
      pthread_join(l->thread, NULL);
    }
    if (l->w) PQfinish(l->w);
    copybufs_empty(&l->bufs, 0);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
  }
  free(g->lanes);
  if (g->w) PQfinish(g->w);
  if (g->r) PQfinish(g->r);
  xgr__pgc_close(g->cl);
  pthread_mutex_destroy(&g->rmu);
  xgr__store_destroy_common(st);
  free(g->url);
  free(g->name);
  sweep_restart(&g->sw_procs);
  sweep_restart(&g->sw_born);
  copybufs_empty(&g->bufs, 0);
  free(g);
}

/* ---- reading (reader connection, under rmu) --------------------------------------------------------- */

#define SESSION_COLS "owner, root_pid, registry, ostc_id, ostc_hash, status, killed_at, created_at, finished_at, " \
                     "next_iter, paused, next_group, max_total_gas, wake_due"
static int connect_one(pgstore *g, PGconn **out, const char *role, xgr_error *err);

/* Run a read query; NULL (with *err) unless it returned rows. A reader connection that broke
 * (the server restarted) is opened again once: reads need no state from before. */
static PGresult *rd_query(pgstore *g, const char *sql, const params *p, xgr_error *err) {
  PGresult *r = NULL;
  for (int attempt = 0; attempt < 2; attempt++) {
    if (PQstatus(g->r) == CONNECTION_BAD && !g->r_snapshot) {   /* (a new one would not be in the snapshot) */
      PQfinish(g->r);
      g->r = NULL;
      if (connect_one(g, &g->r, "reader", err)) return NULL;
    }
    r = PQexecParams(g->r, sql, p ? p->n : 0, NULL, p ? p->v : NULL, p ? p->len : NULL, p ? p->fmt : NULL, 0);
    if (PQresultStatus(r) == PGRES_TUPLES_OK || g->r_snapshot) break;
    /* the connection itself failed (no SQLSTATE: client side; 08: connection; 57P: the server
     * shut down): open a new one and try once more */
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    if (state && strncmp(state, "08", 2) && strncmp(state, "57P", 3)) break;
    if (attempt) break;
    PQclear(r);
    r = NULL;
    PQfinish(g->r);
    g->r = NULL;
    if (connect_one(g, &g->r, "reader", err)) return NULL;
  }
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    res_error(g, r, g->r, "cannot read", err);
    PQclear(r);
    return NULL;
  }
  return r;
}

static void read_session_row(const PGresult *r, int i, xgr_store_session *o) {
  memset(o, 0, sizeof *o);
  o->owner = get_text(r, i, 0);
  o->root_pid = get_u64(r, i, 1);
  o->registry = get_text(r, i, 2);
  o->ostc_id = get_text(r, i, 3);
  o->ostc_hash = get_text(r, i, 4);
  o->status = (uint8_t)get_i64(r, i, 5);
  o->killed_at = get_i64(r, i, 6);
  o->created_at = get_i64(r, i, 7);
  o->finished_at = get_i64(r, i, 8);
  o->next_iter = get_u64(r, i, 9);
  o->paused = get_i64(r, i, 10) != 0;
  o->next_group = (uint32_t)get_i64(r, i, 11);
  o->max_total_gas = get_text(r, i, 12);
  o->wake_due = get_i64(r, i, 13);   /* NULL reads as 0: awake */
}

/* the proc columns start at column `c` */
static void read_proc_row(const PGresult *r, int i, int c, xgr_store_proc *p) {
  memset(p, 0, sizeof *p);
  p->iter = get_u64(r, i, c + 0);
  p->parent_iter = get_u64(r, i, c + 1);
  p->step = (uint16_t)get_i64(r, i, c + 2);
  p->step_id = get_text(r, i, c + 3);
  p->status = (uint8_t)get_i64(r, i, c + 4);
  p->paused = get_i64(r, i, c + 5) != 0;
  p->valid = (int8_t)get_i64(r, i, c + 6);
  p->abort_reason = (uint8_t)get_i64(r, i, c + 7);
  p->group = (uint32_t)get_i64(r, i, c + 8);
  p->from_group = (uint32_t)get_i64(r, i, c + 9);
  p->next_wake_at = get_i64(r, i, c + 10);
  p->created_at = get_i64(r, i, c + 11);
  p->started_at = get_i64(r, i, c + 12);
  p->finished_at = get_i64(r, i, c + 13);
  p->payload = get_text(r, i, c + 14);
  p->error = get_text(r, i, c + 15);
  p->join = get_text(r, i, c + 16);
}

static void read_hist_row(const PGresult *r, int i, xgr_store_hist *h) {
  memset(h, 0, sizeof *h);
  h->iter = get_u64(r, i, 0);
  h->parent_iter = get_u64(r, i, 1);
  h->step = (uint16_t)get_i64(r, i, 2);
  h->step_id = get_text(r, i, 3);
  h->status = (uint8_t)get_i64(r, i, 4);
  h->valid = (int8_t)get_i64(r, i, 5);
  h->abort_reason = (uint8_t)get_i64(r, i, 6);
  h->at = get_i64(r, i, 7);
  h->finished_at = get_i64(r, i, 8);
  h->error = get_text(r, i, 9);
  h->payload = get_text(r, i, 10);
  h->recorded_at = get_i64(r, i, 11);
  h->api = get_text(r, i, 12);
}

static int pg_session_get(xgr_store *st, const char *owner, uint64_t root, xgr_store_session *out, xgr_error *err) {
  pgstore *g = (pgstore *)st;
  params p = {0};
  p_text(&p, owner);
  p_u64(&p, root);
  pthread_mutex_lock(&g->rmu);
  PGresult *r = rd_query(g, "SELECT " SESSION_COLS " FROM sessions WHERE owner = $1 AND root_pid = $2", &p, err);
  int rc = r ? 0 : XGR_EIO;
  if (r && PQntuples(r) == 1) read_session_row(r, 0, out);
  else if (r) rc = xgr_error_set(err, XGR_ENOTFOUND, NULL, "no session %s/%" PRIu64 " in the store", owner, root);
  PQclear(r);
  pthread_mutex_unlock(&g->rmu);
  return rc;
}

static int pg_peek_pid(xgr_store *st, const char *owner, uint64_t *next, xgr_error *err) {
  pgstore *g = (pgstore *)st;
  params p = {0};
  p_text(&p, owner);
  pthread_mutex_lock(&g->rmu);
  PGresult *r = rd_query(g, "SELECT next_root FROM owners WHERE owner = $1", &p, err);
  int rc = r ? 0 : XGR_EIO;
  if (r) *next = PQntuples(r) ? get_u64(r, 0, 0) : 1;
  PQclear(r);
  pthread_mutex_unlock(&g->rmu);
  return rc;
}

#define WAKE_COLS                                                                                               \
  "id, from_owner, from_root, to_owner, to_root, step, caller, rule, payload, created_at, refused, refused_at,"  \
  " from_iter, from_step"

/* Outbox rows of a query with parameters p, in its order. */
static int read_wakes(pgstore *g, const char *sql, params *p, xgr_store_wake **out, size_t *n, xgr_error *err) {
  *out = NULL;
  *n = 0;
  pthread_mutex_lock(&g->rmu);
  PGresult *r = rd_query(g, sql, p, err);
  int rc = r ? 0 : XGR_EIO;
  if (r) {
    int rows = PQntuples(r);
    *out = xgr__xcalloc((size_t)rows + 1, sizeof **out);
    for (int i = 0; i < rows; i++) {
      xgr_store_wake *w = &(*out)[i];
      w->id = get_text(r, i, 0);
      w->from_owner = get_text(r, i, 1);
      w->from_root = get_u64(r, i, 2);
      w->to_owner = get_text(r, i, 3);
      w->to_root = get_u64(r, i, 4);
      w->step = get_text(r, i, 5);
      w->caller = get_text(r, i, 6);
      w->rule = get_text(r, i, 7);
      w->payload = get_text(r, i, 8);
      w->created_at = get_i64(r, i, 9);
      w->refused = get_text(r, i, 10);
      w->refused_at = get_i64(r, i, 11);
      w->from_iter = get_u64(r, i, 12);   /* NULL reads as 0: not recorded */
      w->from_step = get_text(r, i, 13);
    }
    *n = (size_t)rows;
  }
  PQclear(r);
  pthread_mutex_unlock(&g->rmu);
  return rc;
}

static int pg_outbox(xgr_store *st, xgr_store_wake **out, size_t *n, xgr_error *err) {
  params p = {0};
  return read_wakes((pgstore *)st, "SELECT " WAKE_COLS " FROM outbox WHERE refused IS NULL ORDER BY created_at, id", &p,
                    out, n, err);
}

static int pg_wakes_refused(xgr_store *st, const char *owner, uint64_t root, xgr_store_wake **out, size_t *n,
                            xgr_error *err) {
  params p = {0};
  p_text(&p, owner);
  p_u64(&p, root);
  return read_wakes((pgstore *)st,
                    "SELECT " WAKE_COLS " FROM outbox WHERE from_owner = $1 AND from_root = $2 AND refused IS NOT NULL"
                    " ORDER BY refused_at, id",
                    &p, out, n, err);
}

static int pg_procs(xgr_store *st, const char *owner, uint64_t root, xgr_store_proc **out, size_t *n, xgr_error *err) {
  pgstore *g = (pgstore *)st;
  params p = {0};
  p_text(&p, owner);
  p_u64(&p, root);
  *out = NULL;
  *n = 0;
  pthread_mutex_lock(&g->rmu);
  p_i64(&p, xgr__store_now_ms(st) - st->cfg.ttl_secs * 1000);
  /* the rows of proc_rt but the stale ones, the records kept with history rows (listed for
   * ttl_secs after their process ended, as a terminal proc_rt row lives until retention) and the
   * live members of packs */
  PGresult *r = rd_query(g, "SELECT " PROC_COLS " FROM proc_rt r WHERE owner = $1 AND root_pid = $2 AND NOT "
                         ENDED_IN_HIST("r") " UNION ALL SELECT " HIST_RECORD_COLS " FROM proc_steps WHERE owner = $1"
                         " AND root_pid = $2 AND rt_created_at IS NOT NULL AND recorded_at > $3 UNION ALL SELECT m.*"
                         " FROM proc_born b, " BORN_UNNEST " WHERE b.owner = $1 AND b.root_pid = $2 AND " BORN_LIVE
                         " ORDER BY iter", &p, err);
  int rc = r ? 0 : XGR_EIO;
  if (r) {
    int rows = PQntuples(r);
    *out = xgr__xcalloc((size_t)rows + 1, sizeof **out);
    for (int i = 0; i < rows; i++) read_proc_row(r, i, 0, &(*out)[i]);
    *n = (size_t)rows;
  }
  PQclear(r);
  pthread_mutex_unlock(&g->rmu);
  return rc;
}

static int pg_history(xgr_store *st, const char *owner, uint64_t root, xgr_store_hist **out, size_t *n, xgr_error *err) {
  pgstore *g = (pgstore *)st;
  params p = {0};
  p_text(&p, owner);
  p_u64(&p, root);
  *out = NULL;
  *n = 0;
  pthread_mutex_lock(&g->rmu);
  PGresult *r = rd_query(g, "SELECT " HIST_COLS " FROM proc_steps WHERE owner = $1 AND root_pid = $2 ORDER BY iter", &p,
                         err);
  int rc = r ? 0 : XGR_EIO;
  if (r) {
    int rows = PQntuples(r);
    *out = xgr__xcalloc((size_t)rows + 1, sizeof **out);
    for (int i = 0; i < rows; i++) read_hist_row(r, i, &(*out)[i]);
    *n = (size_t)rows;
  }
  PQclear(r);
  pthread_mutex_unlock(&g->rmu);
  return rc;
}

/* The owner's sessions, newest rootPid first: a range scan of the primary key (owner, root_pid). */
static int pg_sessions(xgr_store *st, const char *owner, uint64_t before, size_t limit, xgr_store_session **out,
                       size_t *n, xgr_error *err) {
  pgstore *g = (pgstore *)st;
  params p = {0};
  p_text(&p, owner);
  p_u64(&p, before);
  p_u64(&p, limit);
  /* before = 2^64-1 is "no bound" (the front's default): that rootPid itself is listed too */
  const char *sql = before == UINT64_MAX
                        ? "SELECT " SESSION_COLS " FROM sessions WHERE owner = $1 AND root_pid <= $2 ORDER BY root_pid DESC LIMIT $3"
                        : "SELECT " SESSION_COLS " FROM sessions WHERE owner = $1 AND root_pid < $2 ORDER BY root_pid DESC LIMIT $3";
  *out = NULL;
  *n = 0;
  pthread_mutex_lock(&g->rmu);
  PGresult *r = rd_query(g, sql, &p, err);
  int rc = r ? 0 : XGR_EIO;
  if (r) {
    int rows = PQntuples(r);
    *out = xgr__xcalloc((size_t)rows + 1, sizeof **out);
    for (int i = 0; i < rows; i++) read_session_row(r, i, &(*out)[i]);
    *n = (size_t)rows;
  }
  PQclear(r);
  pthread_mutex_unlock(&g->rmu);
  return rc;
}

/* Compare (owner, root) keys in the order of the queries below (owner COLLATE "C", root). */
static int key_cmp(const char *o1, uint64_t r1, const char *o2, uint64_t r2) {
  int c = strcmp(o1, o2);
  if (c) return c;
  return r1 < r2 ? -1 : r1 > r2 ? 1 : 0;
}

static int load_where(pgstore *g, const char *cond, const params *p, int (*fn)(void *, const xgr_store_live *),
                      void *ctx, xgr_error *err);

/* Every live session with its live processes and killed scopes (load_where, below). */
static int pg_load_live(xgr_store *st, int (*fn)(void *, const xgr_store_live *), void *ctx, xgr_error *err) {
  return load_where((pgstore *)st, "TRUE", NULL, fn, ctx, err);
}

/* Cluster: the live rows of the sessions named by two PostgreSQL array literals (owners, rootPids),
 * as pg_load_live reads them (load_where), for the sessions a claim just took (pg_cluster.c). */
int xgr__pg_load_keys(xgr_store *st, const char *owners, const char *roots,
                      int (*fn)(void *, const xgr_store_live *), void *ctx, xgr_error *err) {
  params p = {0};
  p_text(&p, owners);
  p_text(&p, roots);
  return load_where((pgstore *)st,
                    "(s.owner, s.root_pid) IN (SELECT u.owner, u.root_pid FROM unnest($1::text[], $2::numeric[])"
                    " AS u(owner, root_pid))",
                    &p, fn, ctx, err);
}

pgc *xgr__pg_cluster(xgr_store *st) {
  return st && !strcmp(st->vt->name, "postgresql") ? ((pgstore *)st)->cl : NULL;
}

static int pg_doc_get(xgr_store *st, xgr_registry_kind kind, const char *id, uint32_t version, const char *hash,
                      xgr_store_doc *out, xgr_error *err) {
  pgstore *g = (pgstore *)st;
  const char *table = kind == XGR_REG_RULE ? "rules" : "orchestrations";
  char sql[256];
  params p = {0};
  if (hash) {
    snprintf(sql, sizeof sql, "SELECT id, version, hash, owner, registered_at, content FROM %s WHERE hash = lower($1)"
             " ORDER BY version DESC LIMIT 1", table);
    p_text(&p, hash);
  } else if (version) {
    snprintf(sql, sizeof sql, "SELECT id, version, hash, owner, registered_at, content FROM %s WHERE id = $1 AND"
             " version = $2", table);
    p_text(&p, id);
    p_i64(&p, version);
  } else {
    snprintf(sql, sizeof sql, "SELECT id, version, hash, owner, registered_at, content FROM %s WHERE id = $1"
             " ORDER BY version DESC LIMIT 1", table);
    p_text(&p, id);
  }
  pthread_mutex_lock(&g->rmu);
  PGresult *r = rd_query(g, sql, &p, err);
  int rc = r ? 0 : XGR_EIO;
  if (r && PQntuples(r) == 1) {
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->id = get_text(r, 0, 0);
    out->version = (uint32_t)get_i64(r, 0, 1);
    out->hash = get_text(r, 0, 2);
    out->owner = get_text(r, 0, 3);
    out->registered_at = get_i64(r, 0, 4);
    size_t len = 0;
    unsigned char *bytes = PQunescapeBytea((const unsigned char *)PQgetvalue(r, 0, 5), &len);
    out->len = bytes ? len : 0;
    out->content = xgr__xmalloc(out->len + 1);
    if (out->len) memcpy(out->content, bytes, out->len);
    out->content[out->len] = 0;
    PQfreemem(bytes);
  } else if (r) {
    rc = xgr_error_set(err, XGR_ENOTFOUND, NULL, "no %s %s%s in the registry", kind ? "rule" : "orchestration",
                       hash ? "with hash " : "", hash ? hash : id);
  }
  PQclear(r);
  pthread_mutex_unlock(&g->rmu);
  return rc;
}

/* The owners with live sessions: status = 0 rows grouped by owner, most first. */
static int pg_live_owners(xgr_store *st, const char *owner, size_t max, xgr_store_owner_live **out, size_t *n,
                          xgr_error *err) {
  pgstore *g = (pgstore *)st;
  params p = {0};
  p_u64(&p, max);
  p_text(&p, owner);   /* NULL: every owner */
  pthread_mutex_lock(&g->rmu);
  PGresult *r = rd_query(g, "SELECT owner, COUNT(*) AS live FROM sessions WHERE status = 0 AND ($2::text IS NULL OR owner = $2)"
                            " GROUP BY owner ORDER BY live DESC, owner LIMIT $1::bigint", &p, err);
  int rc = r ? 0 : XGR_EIO;
  *out = xgr__xcalloc(max, sizeof **out);
  for (int i = 0; r && i < PQntuples(r) && *n < max; i++) {
    (*out)[*n].owner = get_text(r, i, 0);
    (*out)[(*n)++].live = get_u64(r, i, 1);
  }
  PQclear(r);
  pthread_mutex_unlock(&g->rmu);
  return rc;
}

/* ---- hibernation: some live sessions, the due index (issue 19; docs/STORE.md "Hibernation") ------ */

/* The live sessions whose row `s` meets `cond` (SQL, with parameters p; NULL: none), each with its
 * live processes and killed scopes: three queries in one snapshot, all in (owner, rootPid) order,
 * merged here (no query per session). Every loader of live sessions goes through it. */
static int load_where(pgstore *g, const char *cond, const params *p, int (*fn)(void *, const xgr_store_live *),
                      void *ctx, xgr_error *err) {
  char sql[3][3072];
  int len[3];   /* cond is one of this file's (short) conditions: nothing is cut off */
  len[0] = snprintf(sql[0], sizeof sql[0], "SELECT " SESSION_COLS " FROM sessions s WHERE s.status = 0 AND (%s)"
           " ORDER BY s.owner COLLATE \"C\", s.root_pid", cond);
  len[1] = snprintf(sql[1], sizeof sql[1], "SELECT r.owner, r.root_pid, r.iter, r.parent_iter, r.step, r.step_id, r.status,"
           " r.paused, r.valid, r.abort_reason, r.join_group, r.join_from_group, r.next_wake_at, r.created_at,"
           " r.started_at, r.finished_at, r.payload, r.error, r.join_state FROM proc_rt r JOIN sessions s"
           " ON s.owner = r.owner AND s.root_pid = r.root_pid WHERE s.status = 0 AND (%s) AND r.status < 2"
           " AND NOT " ENDED_IN_HIST("r") " UNION ALL SELECT b.owner, b.root_pid, m.* FROM proc_born b JOIN sessions s"
           " ON s.owner = b.owner AND s.root_pid = b.root_pid, " BORN_UNNEST " WHERE s.status = 0 AND (%s) AND "
           BORN_LIVE " ORDER BY 1, 2, 3", cond, cond);   /* owner is COLLATE "C" in both parts */
  len[2] = snprintf(sql[2], sizeof sql[2], "SELECT k.owner, k.root_pid, k.grp FROM proc_scopes k JOIN sessions s"
           " ON s.owner = k.owner AND s.root_pid = k.root_pid WHERE s.status = 0 AND (%s)"
           " ORDER BY k.owner COLLATE \"C\", k.root_pid, k.grp", cond);
  for (int q = 0; q < 3; q++) assert(len[q] > 0 && (size_t)len[q] < sizeof sql[q]);
  (void)len;
  pthread_mutex_lock(&g->rmu);
  PGresult *res[3] = {NULL, NULL, NULL};
  if (PQstatus(g->r) == CONNECTION_BAD) {   /* the server restarted since the last read */
    PGresult *ping = rd_query(g, "SELECT 1", NULL, err);
    PQclear(ping);
  }
  int rc = exec_plain(g, g->r, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", err);
  g->r_snapshot = true;
  if (!rc) {
    for (int q = 0; q < 3 && (!q || res[q - 1]); q++) res[q] = rd_query(g, sql[q], p, err);
    if (!res[2]) rc = XGR_EIO;
    exec_plain(g, g->r, "COMMIT", &(xgr_error){0});
  }
  g->r_snapshot = false;
  PGresult *rs = res[0], *rp = res[1], *rg = res[2];
  int ns = rc ? 0 : PQntuples(rs), np = rc ? 0 : PQntuples(rp), ng = rc ? 0 : PQntuples(rg);
  int ip = 0, ig = 0;
  for (int i = 0; !rc && i < ns; i++) {
    xgr_store_session row;
    read_session_row(rs, i, &row);
    while (ip < np && key_cmp(PQgetvalue(rp, ip, 0), get_u64(rp, ip, 1), row.owner, row.root_pid) < 0) ip++;
    int p0 = ip;
    while (ip < np && !key_cmp(PQgetvalue(rp, ip, 0), get_u64(rp, ip, 1), row.owner, row.root_pid)) ip++;
    while (ig < ng && key_cmp(PQgetvalue(rg, ig, 0), get_u64(rg, ig, 1), row.owner, row.root_pid) < 0) ig++;
    int g0 = ig;
    while (ig < ng && !key_cmp(PQgetvalue(rg, ig, 0), get_u64(rg, ig, 1), row.owner, row.root_pid)) ig++;
    size_t nprocs = (size_t)(ip - p0), nkilled = (size_t)(ig - g0);
    xgr_store_proc *procs = xgr__xcalloc(nprocs + 1, sizeof *procs);
    for (size_t k = 0; k < nprocs; k++) read_proc_row(rp, p0 + (int)k, 2, &procs[k]);
    uint32_t *groups = xgr__xcalloc(nkilled + 1, sizeof *groups);
    for (size_t k = 0; k < nkilled; k++) groups[k] = (uint32_t)get_i64(rg, g0 + (int)k, 2);
    xgr_store_live l = {&row, procs, nprocs, groups, nkilled};
    rc = fn(ctx, &l);
    if (rc) xgr_error_set(err, rc, NULL, "recovery stopped at session %s/%" PRIu64, row.owner, row.root_pid);
    xgr_store_procs_free(procs, nprocs);
    free(groups);
    xgr_store_session_clear(&row);
  }
  for (int q = 0; q < 3; q++) PQclear(res[q]);
  pthread_mutex_unlock(&g->rmu);
  return rc;
}

/* One session (loading on demand); the awake ones and those due by due_upto (lazy recovery: the
 * partial indexes sessions_awake and sessions_wake_due, no hibernated row beyond the bound is
 * read); or every live one. */
static int pg_load_some(xgr_store *st, const xgr_store_load_filter *f, int (*fn)(void *, const xgr_store_live *),
                        void *ctx, xgr_error *err) {
  pgstore *g = (pgstore *)st;
  params p = {0};
  if (f && f->owner) {
    p_text(&p, f->owner);
    p_u64(&p, f->root_pid);
    return load_where(g, "s.owner = $1 AND s.root_pid = $2", &p, fn, ctx, err);
  }
  if (f && f->bounded) {
    p_i64(&p, f->due_upto);
    return load_where(g, "s.wake_due IS NULL OR s.wake_due <= $1::bigint", &p, fn, ctx, err);
  }
  return pg_load_live(st, fn, ctx, err);
}

/* The due index: a range scan of sessions_wake_due after the cursor (a row comparison in the
 * index's column order), at most max keys. A cursor whose owner starts with the byte 0xff (the
 * engine's "every key of this due time", xgr_engine_hibernation_start) is past every owner: no
 * text holds that byte, and PostgreSQL refuses it as a parameter, so it is sent as `wake_due > due`. */
static int pg_due(xgr_store *st, const xgr_store_due_key *after, int64_t upto, xgr_store_due_key *out, size_t max,
                  size_t *n, xgr_error *err) {
  pgstore *g = (pgstore *)st;
  bool past_all = after && (unsigned char)after->owner[0] == 0xff;
  params p = {0};
  p_i64(&p, after ? after->due : INT64_MIN);
  p_i64(&p, upto);
  p_u64(&p, max);
  if (!past_all) {
    p_text(&p, after ? after->owner : "");
    p_u64(&p, after ? after->root_pid : 0);
  }
  const char *sql = past_all ? "SELECT wake_due, owner, root_pid FROM sessions WHERE status = 0 AND wake_due IS NOT NULL"
                               " AND wake_due > $1::bigint AND wake_due <= $2::bigint"
                               " ORDER BY wake_due, owner, root_pid LIMIT $3"
                             : "SELECT wake_due, owner, root_pid FROM sessions WHERE status = 0 AND wake_due IS NOT NULL"
                               " AND (wake_due, owner, root_pid) > ($1::bigint, $4::text COLLATE \"C\", $5::numeric)"
                               " AND wake_due <= $2::bigint ORDER BY wake_due, owner, root_pid LIMIT $3";
  pthread_mutex_lock(&g->rmu);
  PGresult *r = rd_query(g, sql, &p, err);
  int rc = r ? 0 : XGR_EIO;
  int rows = r ? PQntuples(r) : 0;
  for (int i = 0; i < rows && *n < max; i++) {
    xgr_store_due_key *k = &out[(*n)++];
    k->due = get_i64(r, i, 0);
    snprintf(k->owner, sizeof k->owner, "%s", PQgetvalue(r, i, 1));
    k->root_pid = get_u64(r, i, 2);
  }
  PQclear(r);
  pthread_mutex_unlock(&g->rmu);
  return rc;
}

static const store_vt postgres_vt = {"postgresql", pg_submit, pg_flush, pg_close, pg_session_get, pg_procs,
                                     pg_history, pg_load_live, pg_doc_get, pg_gc, .sessions = pg_sessions,
                                     .live_owners = pg_live_owners,
                                     .peek_pid = pg_peek_pid, .outbox = pg_outbox,
                                     .wakes_refused = pg_wakes_refused, .load_some = pg_load_some, .due = pg_due};

/* ---- open and migrate ------------------------------------------------------------------------------- */

/* The URL for messages and logs: the userinfo (user:password@) and secret-looking query values
 * (password=, ...) masked by the rule engine's URL masking (src/rule/result.c, fuzzed). */
char *xgr_store_url_redacted(const char *url) { return xgr__rule_mask_url(url); }

/* Open *out as the connection role ("reader", "writer", or "writer-K": the K-th writer
 * connection, commit_split). 0 or an error. */
static int connect_one(pgstore *g, PGconn **out, const char *role, xgr_error *err) {
  /* named in pg_stat_activity (unless the URI names it): which backend is which node's writer */
  bool writer = strcmp(role, "reader") != 0;
  PGconn *c = *out = xgr__pg_connect(g->url, g->name, role, g->base.cfg.node_id, err);
  if (!c) return XGR_EIO;
  char sql[160];
  /* synchronous_commit: FULL waits for the WAL flush at COMMIT; NORMAL does not (a crash may lose
   * the last commits, never half of one) */
  snprintf(sql, sizeof sql, "SET synchronous_commit = %s; SET lock_timeout = %d; SET client_min_messages = warning",
           g->base.cfg.sync == XGR_STORE_SYNC_NORMAL ? "off" : "on", g->base.cfg.busy_timeout_ms);
  if (exec_plain(g, c, sql, err)) return XGR_EIO;
  if (!writer && exec_plain(g, c, "SET default_transaction_read_only = on", err)) return XGR_EIO;
  return 0;
}

/* The schema version in the database: 0 for an empty one; an error for a database with tables
 * but no schema_version (not an xgr store). */
static int schema_version_of(pgstore *g, PGconn *c, int *v, xgr_error *err) {
  *v = 0;
  PGresult *r = PQexec(c, "SELECT to_regclass('schema_version') IS NOT NULL, (SELECT count(*) FROM pg_tables"
                          " WHERE schemaname = current_schema())");
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    res_error(g, r, c, "cannot read the schema", err);
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
    res_error(g, r, c, "cannot read schema_version", err);
    PQclear(r);
    return XGR_EIO;
  }
  *v = (int)strtol(PQgetvalue(r, 0, 0), NULL, 10);
  PQclear(r);
  return 0;
}

/* Bring the schema to XGR_STORE_SCHEMA_VERSION in one transaction under an advisory lock (the
 * version is read again under the lock: another node may have migrated meanwhile). */
static int migrate(pgstore *g, int *found, xgr_error *err) {
  char sql[160];
  if (exec_plain(g, g->w, "BEGIN", err)) return XGR_EIO;
  snprintf(sql, sizeof sql, "SELECT pg_advisory_xact_lock(%d)", MIGRATION_LOCK);
  int rc = exec_plain(g, g->w, sql, err);
  if (!rc) rc = schema_version_of(g, g->w, found, err);
  int from = *found;
  if (!rc && from > XGR_STORE_SCHEMA_VERSION) {
    rc = xgr_error_set(err, XGR_EUNSUPPORTED, NULL, "store %s has schema version %d; this xgr knows versions up to %d "
                       "(use a newer xgr)", g->name, from, XGR_STORE_SCHEMA_VERSION);
  }
  for (int v = from + 1; !rc && v <= NMIGRATIONS; v++) {
    if (v == 1)
      rc = exec_plain(g, g->w, "CREATE TABLE schema_version(version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)",
                      err);
    if (!rc) rc = exec_plain(g, g->w, migrations[v - 1], err);
    snprintf(sql, sizeof sql, "INSERT INTO schema_version(version, applied_at) VALUES(%d, %lld)", v,
             (long long)xgr__store_now_ms(&g->base));
    if (!rc) rc = exec_plain(g, g->w, sql, err);
    if (rc && rc != XGR_EUNSUPPORTED) {
      char m[XGR_MSG_MAX];
      snprintf(m, sizeof m, "%s", err->message);
      rc = xgr_error_set(err, XGR_EIO, NULL, "migration to schema version %d failed: %s", v, m);
    }
  }
  if (!rc) rc = exec_plain(g, g->w, "COMMIT", err);
  if (rc) exec_plain(g, g->w, "ROLLBACK", &(xgr_error){0});
  return rc;
}

/* One writing store per database schema: the writer connection holds a session-level advisory
 * lock keyed by the schema, so a second xgrd (or any second writer) on the same schema waits up
 * to busy_timeout_ms and is then refused, instead of running the same sessions twice. The lock
 * goes with the connection: a writer that is killed releases it as soon as PostgreSQL sees its
 * connection close. (Several nodes sharing a database with leases is issue 18's coordination.) */
static int take_writer_lock(pgstore *g, bool shared, xgr_error *err) {
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
  else rc = res_error(g, r, g->w, "cannot take the writer lock", err);
  PQclear(r);
  return rc;
}

/* Make c a writer connection: the staging table, every statement prepared, and on a cluster node
 * the node's settings (new session rows leased to it). 0 or an error. */
static int setup_writer(pgstore *g, PGconn *c, xgr_error *err) {
  /* a group's staged rows stay in memory (the default, 8 MB, holds some 30,000 of them) */
  if (exec_plain(g, c, "SET temp_buffers = '64MB'", err) || exec_plain(g, c, STAGE_PROCS, err)) return XGR_EIO;
  for (int i = 0; i < S_COUNT; i++) {
    char name[8];
    snprintf(name, sizeof name, "x%d", i);
    PGresult *r = PQprepare(c, name, stmt_sql[i], 0, NULL);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
      int rc = res_error(g, r, c, "cannot prepare statements", err);
      PQclear(r);
      return rc;
    }
    PQclear(r);
  }
  return g->cl ? xgr__pgc_setup_writer(g->cl, c, err) : 0;
}

xgr_store *xgr_store_postgres_open(const char *url, const xgr_store_config *cfg, xgr_error *err) {
  pgstore *g = xgr__xcalloc(1, sizeof *g);
  xgr__store_init_common(&g->base, &postgres_vt, cfg);
  g->url = xgr__xstrdup(url);
  g->name = xgr_store_url_redacted(url);
  pthread_mutexattr_t ra;
  pthread_mutexattr_init(&ra);
  pthread_mutexattr_settype(&ra, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&g->rmu, &ra);
  pthread_mutexattr_destroy(&ra);
  xgr__writer_init(&g->wr, &g->base, commit_cb, gc_cb, g);
  bool ro = g->base.cfg.read_only;
  if (connect_one(g, &g->r, "reader", err)) goto fail;
  int found = 0;
  if (schema_version_of(g, g->r, &found, err)) goto fail;
  g->base.found_version = found;
  if (found > XGR_STORE_SCHEMA_VERSION) {
    xgr_error_set(err, XGR_EUNSUPPORTED, NULL, "store %s has schema version %d; this xgr knows versions up to %d "
                  "(use a newer xgr)", g->name, found, XGR_STORE_SCHEMA_VERSION);
    goto fail;
  }
  if (ro && found < XGR_STORE_SCHEMA_VERSION) {
    xgr_error_set(err, XGR_ESTATE, NULL, "store %s has schema version %d and needs migrating to %d, which a "
                  "read-only open cannot do", g->name, found, XGR_STORE_SCHEMA_VERSION);
    goto fail;
  }
  if (!ro) {
    if (connect_one(g, &g->w, "writer", err)) goto fail;
    if (take_writer_lock(g, g->base.cfg.node_id != NULL, err)) goto fail;
    if (found < XGR_STORE_SCHEMA_VERSION) {
      int now_found = found;
      if (migrate(g, &now_found, err)) goto fail;
      g->base.found_version = now_found;
    }
    if (g->base.cfg.node_id) {   /* a cluster node: its lease connection, and new rows leased to it */
      g->cl = xgr__pgc_open(g->url, g->name, g->base.cfg.node_id, g->base.cfg.lease_ms, err);
      if (!g->cl) goto fail;
    }
    if (setup_writer(g, g->w, err)) goto fail;
    int writers = g->base.cfg.pg_writers ? g->base.cfg.pg_writers : XGR_STORE_PG_WRITERS;
    if (writers < 1) writers = 1;
    if (writers > XGR_STORE_PG_WRITERS_MAX) writers = XGR_STORE_PG_WRITERS_MAX;
    g->lanes = xgr__xcalloc((size_t)writers, sizeof *g->lanes);
    for (int i = 0; i + 1 < writers; i++) {   /* the helper connections of commit_split */
      lane *l = &g->lanes[g->nlanes++];
      l->g = g;
      pthread_mutex_init(&l->mu, NULL);
      pthread_cond_init(&l->cv, NULL);
      char role[24];   /* "writer-2", ...: g->w alone is "writer" */
      snprintf(role, sizeof role, "writer-%d", i + 2);
      if (connect_one(g, &l->w, role, err) || setup_writer(g, l->w, err)) goto fail;
      if (pthread_create(&l->thread, NULL, lane_main, l)) {
        xgr_error_set(err, XGR_EIO, NULL, "store %s: cannot start a writer thread", g->name);
        goto fail;
      }
      l->has_thread = true;
    }
  }
  g->base.version = XGR_STORE_SCHEMA_VERSION;
  if (!ro) {
    if (xgr__writer_start(&g->wr, "xgr-store-pg")) {
      xgr_error_set(err, XGR_EIO, NULL, "store %s: cannot start the writer thread", g->name);
      goto fail;
    }
  }
  return &g->base;
fail:
  pg_close(&g->base);
  return NULL;
}
