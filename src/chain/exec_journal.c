/* exec_journal.c — the engine executor's journal (exec_journal_impl.h) on its two backends.
 *
 * SQLite (a file beside an SQLite store, or in memory): the table chain_exec, WAL and
 * synchronous=FULL, so a statement that returned is on disk.
 *
 * PostgreSQL (a PostgreSQL store): the table exec_journal in the store's database and schema (the
 * same libpq URI, so the same search_path), on a connection of the journal's own with
 * synchronous_commit=on: every statement is its own transaction and is flushed to the WAL when it
 * returns, whatever --sync the store uses. The table is made by the first execution's insert (not
 * at open): the executor starts before the store, and an empty database holding a table but no
 * schema_version is refused by the store as "not an xgr store". A single writer's connection holds
 * a session advisory lock keyed by the schema, exclusively, for as long as it lives, so a second
 * xgrd on the same schema cannot sign from the same journal and allocate the same key's nonces
 * twice. A connection that broke is reset once per call (and the lock taken again); inserts and
 * updates are idempotent, so they are retried once after a reset.
 *
 * Shared (the nodes of a cluster, docs/CLUSTER.md): every node writes its intents into the one
 * table and reads records from it, but only one node at a time signs and sends: the holder of the
 * row of exec_leader, a lease with a fencing epoch like a session's (taken when free, expired or
 * held by a dead node, renewed every third of the lease). Every state change a sender makes is
 * one UPDATE that also locks that row FOR SHARE at the sender's epoch, so a node that lost the
 * lease (stalled, partitioned) has its late writes refused, and a takeover waits for a write in
 * flight: whatever the new sender reads was written under the old epoch or not at all. The nodes
 * hold the schema's advisory lock in shared mode, so a single writer and nodes exclude each
 * other. */
#include <assert.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain/exec_journal_impl.h"
#include "util/sqlite_col.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/clock.h"
#include "xgr/store.h"

struct xgr__xjournal {
  sqlite3 *db;     /* SQLite backend */
  PGconn *pg;      /* PostgreSQL backend */
  bool have_table; /* PostgreSQL: exec_journal exists */
  char *name;
  char sender[43];   /* the engine key's address: stored with each signed row; max_nonce counts only
                        this key's rows, and every node of a schema must send from the same key */
  /* shared (cluster nodes; NULL node otherwise): this node's id, the lease, and the epoch this
   * node sends under (0: it does not); renewed_ns is the monotonic time of the last renewal */
  char *node;
  int64_t lease_ms, epoch;
  uint64_t renewed_ns;
  /* shared: the statements of the sender's lease (xgr_store_fenced_sql over exec_leader's row),
   * made at open: take it, renew it, give it up, and a mark fenced by it */
  char *sql_take, *sql_renew, *sql_release, *sql_mark;
};

static void set_err(char *err, size_t cap, const char *msg) {
  if (err && cap) snprintf(err, cap, "%s", msg ? msg : "unknown error");
}

/* ---- PostgreSQL -------------------------------------------------------------------------------- */

/* The sender's lease: the one row of exec_leader (a fenced lease, xgr/store.h). */
static const xgr_store_fenced_lease LEADER = {"exec_leader", NULL, "node", "epoch", "expires"};

/* Shared: the lease's statements (parameters: $1 node, $2 lease ms, $3 sender or epoch; the mark's
 * $7 node, $8 epoch). A node takes the row when it records this node's engine key and is free; the
 * first node inserts it. */
static void pg_lease_sql(xgr__xjournal *j) {
  j->sql_take = xgr_store_fenced_sql(&LEADER, XGR_STORE_FENCED_TAKE, &(xgr_store_fenced_stmt){
      .insert = "INSERT INTO exec_leader(id, node, epoch, expires, sender) VALUES(1, $1, 1, xgr_ms_now() + $2::bigint, $3)",
      .conflict = "id", .key = "exec_leader.sender = $3", .node = "$1", .ms = "$2::bigint"});
  j->sql_renew = xgr_store_fenced_sql(&LEADER, XGR_STORE_FENCED_RENEW,
                                      &(xgr_store_fenced_stmt){.key = "id = 1", .node = "$1", .ms = "$2::bigint", .epoch = "$3"});
  j->sql_release = xgr_store_fenced_sql(&LEADER, XGR_STORE_FENCED_RELEASE,
                                        &(xgr_store_fenced_stmt){.key = "id = 1", .node = "$1", .epoch = "$2"});
  char *check = xgr_store_fenced_sql(&LEADER, XGR_STORE_FENCED_CHECK,
                                     &(xgr_store_fenced_stmt){.key = "id = 1", .node = "$7", .epoch = "$8", .lock = true});
  xgr_buf b = {0};
  xgr__buf_printf(&b, "WITH l AS (%s) UPDATE exec_journal SET state = $1, raw = $2, hash = $3, nonce = $4, record = $5,"
                  " sender = COALESCE($9, sender) WHERE id = $6 AND EXISTS (SELECT 1 FROM l)", check);
  free(check);
  j->sql_mark = xgr__buf_finish(&b, NULL);
}

/* Made at the first write (in one transaction, serialized between nodes by a transaction lock so
 * that two nodes' first executions do not race on the catalog). exec_leader's one row is the
 * sender's lease of the shared mode; a single writer never writes it. */
static const char PG_TABLE[] =
    "SELECT pg_advisory_xact_lock(hashtextextended('xgr exec journal table ' || COALESCE(current_schema(), ''), 0));"
    " CREATE TABLE IF NOT EXISTS exec_leader(id INTEGER PRIMARY KEY CHECK (id = 1), node TEXT NOT NULL,"
    " epoch BIGINT NOT NULL, expires BIGINT NOT NULL, sender TEXT NOT NULL);"
    " CREATE TABLE IF NOT EXISTS exec_journal(id BIGSERIAL PRIMARY KEY, owner TEXT NOT NULL, root BIGINT NOT NULL,"
    " iter BIGINT NOT NULL, step TEXT, target TEXT NOT NULL, function TEXT, data TEXT NOT NULL, value TEXT,"
    " gas BIGINT NOT NULL, state INTEGER NOT NULL, raw TEXT, hash TEXT, nonce BIGINT NOT NULL DEFAULT 0, record TEXT,"
    " sender TEXT, UNIQUE(owner, root, iter));"
    " ALTER TABLE exec_journal ADD COLUMN IF NOT EXISTS sender TEXT;"
    " CREATE INDEX IF NOT EXISTS exec_journal_open ON exec_journal(state, nonce, id) WHERE state < 2";

/* A message for a failed result: the server's, else the connection's (no trailing newline). */
static void pg_msg(PGconn *c, PGresult *r, char *err, size_t cap) {
  const char *m = r ? PQresultErrorMessage(r) : NULL;
  if (!m || !*m) m = PQerrorMessage(c);
  if (err && cap) {
    snprintf(err, cap, "%s", m && *m ? m : "no connection to PostgreSQL");
    size_t n = strlen(err);
    while (n && (err[n - 1] == '\n' || err[n - 1] == ' ')) err[--n] = 0;
  }
}

/* Session settings and the journal lock on a (new or reset) connection. The lock is waited for
 * up to LOCK_WAIT_MS: a predecessor SIGKILLed a moment ago may still have its backend (and lock)
 * until PostgreSQL notices the closed socket. */
enum { LOCK_WAIT_MS = 10000 };

/* Whether the journal's tables exist (exec_journal, exec_leader) and exec_journal has its column
 * sender (which signed a row's transaction; journals from before it lack it). PG_TABLE makes or
 * completes them; pg_tables runs it for a journal that exists but is not complete, so its rows
 * are worked at once. */
#define TABLES_EXIST                                                                                     \
  "SELECT to_regclass('exec_journal') IS NOT NULL, to_regclass('exec_leader') IS NOT NULL,"              \
  " EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('exec_journal') AND attname = 'sender'" \
  " AND NOT attisdropped)"

/* Sets j->have_table (0), or -1 with a message. On an open connection (no reset here). */
static int pg_tables(xgr__xjournal *j, char *err, size_t cap) {
  PGresult *r = PQexec(j->pg, TABLES_EXIST);
  if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
    pg_msg(j->pg, r, err, cap);
    PQclear(r);
    return -1;
  }
  bool journal = PQgetvalue(r, 0, 0)[0] == 't';
  j->have_table = journal && PQgetvalue(r, 0, 1)[0] == 't' && PQgetvalue(r, 0, 2)[0] == 't';
  PQclear(r);
  if (j->have_table || !journal) return 0;
  r = PQexec(j->pg, PG_TABLE);
  bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  if (!ok) pg_msg(j->pg, r, err, cap);
  PQclear(r);
  j->have_table = ok;
  return ok ? 0 : -1;
}

static int pg_setup(xgr__xjournal *j, char *err, size_t cap) {
  char sql[400];
  snprintf(sql, sizeof sql,
           "SET synchronous_commit = on; SET client_min_messages = warning; SET lock_timeout = %d;"
           " SELECT pg_advisory_lock%s(hashtextextended('xgr exec journal ' || COALESCE(current_schema(), ''), 0));"
           " SET lock_timeout = 0",
           LOCK_WAIT_MS, j->node ? "_shared" : "");
  PGresult *r = PQexec(j->pg, sql);
  bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  if (!ok) {
    const char *code = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    if (code && !strcmp(code, "55P03") && j->node) {   /* lock_not_available */
      snprintf(err, cap, "a single xgrd (without --node-id) sends executions from the execution journal of this database "
               "schema (waited %d ms for its lock); cluster nodes and a single writer cannot share it", LOCK_WAIT_MS);
    } else if (code && !strcmp(code, "55P03")) {
      snprintf(err, cap, "another xgrd sends executions from the execution journal of this database schema (waited %d ms "
               "for its lock); one executor per schema, or cluster nodes (--node-id) that take turns", LOCK_WAIT_MS);
    } else pg_msg(j->pg, r, err, cap);
  }
  PQclear(r);
  if (!ok) return -1;
  return pg_tables(j, err, cap);
}

/* The connection usable (reset once when it broke). */
static int pg_ready(xgr__xjournal *j, char *err, size_t cap) {
  if (PQstatus(j->pg) == CONNECTION_OK) return 0;
  PQreset(j->pg);
  if (PQstatus(j->pg) != CONNECTION_OK) {
    pg_msg(j->pg, NULL, err, cap);
    return -1;
  }
  return pg_setup(j, err, cap);
}

/* Run a statement (n text parameters, NULL for SQL NULL; without parameters it may be several): the result when its status
 * is `want`, else NULL with a message in err. A command (want PGRES_COMMAND_OK) whose connection
 * broke is run once more after a reset (the journal's writes are idempotent). */
static PGresult *pg_run(xgr__xjournal *j, const char *sql, int n, const char *const *params, ExecStatusType want, char *err,
                        size_t cap) {
  for (int attempt = 0; attempt < 2; attempt++) {
    if (pg_ready(j, err, cap)) return NULL;
    PGresult *r = n ? PQexecParams(j->pg, sql, n, NULL, params, NULL, NULL, 0) : PQexec(j->pg, sql);
    if (PQresultStatus(r) == want) return r;
    pg_msg(j->pg, r, err, cap);
    PQclear(r);
    if (want != PGRES_COMMAND_OK || PQstatus(j->pg) == CONNECTION_OK) break;
  }
  return NULL;
}

static char *pg_col(PGresult *r, int row, int col) {
  return PQgetisnull(r, row, col) ? NULL : xgr__xstrdup(PQgetvalue(r, row, col));
}

static int pg_other_sender(xgr__xjournal *j, char *err, size_t cap);

/* Open the PostgreSQL journal at url (j->node set: shared). */
static int pg_open(xgr__xjournal *j, const char *url, xgr_error *e) {
  char *red = xgr_store_url_redacted(url);
  size_t n = strlen(red) + 32;
  j->name = xgr__xmalloc(n);
  snprintf(j->name, n, "%s table exec_journal", red);
  free(red);
  /* the URI's own settings, and a name in pg_stat_activity unless the URI gives one */
  const char *const keys[] = {"dbname", "fallback_application_name", NULL};
  const char *const vals[] = {url, "xgr exec journal", NULL};
  j->pg = PQconnectdbParams(keys, vals, 1);
  char msg[512];
  if (PQstatus(j->pg) != CONNECTION_OK) {
    pg_msg(j->pg, NULL, msg, sizeof msg);
    return xgr_error_set(e, XGR_EIO, "--engine-key", "execution journal %s: %s", j->name, msg);
  }
  if (pg_setup(j, msg, sizeof msg)) return xgr_error_set(e, XGR_EIO, "--engine-key", "execution journal %s: %s", j->name, msg);
  if (j->node && j->have_table && pg_other_sender(j, msg, sizeof msg))
    return xgr_error_set(e, XGR_EIO, "--engine-key", "execution journal %s: %s", j->name, msg);
  return 0;
}

static int pg_add(xgr__xjournal *j, const xgr__xjournal_intent *in, char *err, size_t cap) {
  if (!j->have_table) {
    PGresult *r = pg_run(j, PG_TABLE, 0, NULL, PGRES_COMMAND_OK, err, cap);
    if (!r) return -1;
    PQclear(r);
    j->have_table = true;
  }
  char root[24], iter[24], gas[24], state[8];
  snprintf(root, sizeof root, "%" PRId64, (int64_t)in->root);
  snprintf(iter, sizeof iter, "%" PRId64, (int64_t)in->iter);
  snprintf(gas, sizeof gas, "%" PRId64, (int64_t)in->gas);
  snprintf(state, sizeof state, "%d", in->state);
  const char *p[11] = {in->owner, root, iter, in->step ? in->step : "", in->target, in->function, in->data, in->value,
                       gas, state, in->record};
  PGresult *r = pg_run(j,
                       "INSERT INTO exec_journal(owner, root, iter, step, target, function, data, value, gas, state, record)"
                       " VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (owner, root, iter) DO NOTHING",
                       11, p, PGRES_COMMAND_OK, err, cap);
  if (!r) return -1;
  PQclear(r);
  return 0;
}

/* Whether exec_journal exists yet (another node may have made it): 0 and j->have_table set, or -1. */
static int pg_check_table(xgr__xjournal *j, char *err, size_t cap) {
  if (pg_ready(j, err, cap)) return -1;
  return pg_tables(j, err, cap);
}

static int pg_next(xgr__xjournal *j, xgr__xjournal_row *row, char *err, size_t cap) {
  if (!j->have_table && j->node && pg_check_table(j, err, cap)) return -1;
  if (!j->have_table) return 0;
  PGresult *r = pg_run(j,
                       "SELECT id, state, target, function, data, value, raw, hash, gas, nonce FROM exec_journal"
                       " WHERE state < 2 ORDER BY state DESC, nonce, id LIMIT 1",
                       0, NULL, PGRES_TUPLES_OK, err, cap);
  if (!r) return -1;
  int found = PQntuples(r) == 1;
  if (found) {
    row->id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    row->state = (int)strtol(PQgetvalue(r, 0, 1), NULL, 10);
    row->target = pg_col(r, 0, 2);
    row->function = pg_col(r, 0, 3);
    row->data = pg_col(r, 0, 4);
    row->value = pg_col(r, 0, 5);
    row->raw = pg_col(r, 0, 6);
    row->hash = pg_col(r, 0, 7);
    row->gas = (uint64_t)strtoll(PQgetvalue(r, 0, 8), NULL, 10);
    row->nonce = (uint64_t)strtoll(PQgetvalue(r, 0, 9), NULL, 10);
  }
  PQclear(r);
  return found;
}

static int pg_mark(xgr__xjournal *j, int64_t id, int state, const char *raw, const char *hash, uint64_t nonce,
                   const char *record, char *err, size_t cap) {
  char st[8], nc[24], idt[24];
  snprintf(st, sizeof st, "%d", state);
  snprintf(nc, sizeof nc, "%" PRId64, (int64_t)nonce);
  snprintf(idt, sizeof idt, "%" PRId64, id);
  const char *snd = raw ? j->sender : NULL;   /* who signed raw */
  if (!j->node) {
    const char *p[7] = {st, raw, hash, nc, record, idt, snd};
    PGresult *r = pg_run(j, "UPDATE exec_journal SET state = $1, raw = $2, hash = $3, nonce = $4, record = $5,"
                         " sender = COALESCE($7, sender) WHERE id = $6", 7, p, PGRES_COMMAND_OK, err, cap);
    if (!r) return -1;
    PQclear(r);
    return 0;
  }
  /* shared: only under this node's epoch, which the row lock keeps until the write committed */
  if (!j->epoch) {
    snprintf(err, cap, "this node does not send executions now");
    return XGR__XJ_NOT_SENDER;
  }
  char ep[24];
  snprintf(ep, sizeof ep, "%" PRId64, j->epoch);
  const char *p[9] = {st, raw, hash, nc, record, idt, j->node, ep, snd};
  PGresult *r = pg_run(j, j->sql_mark, 9, p, PGRES_COMMAND_OK, err, cap);
  if (!r) return -1;
  bool done = !strcmp(PQcmdTuples(r), "1");
  PQclear(r);
  if (done) return 0;
  snprintf(err, cap, "another node took over sending executions (this node's epoch %" PRId64 " ended)", j->epoch);
  j->epoch = 0;
  return XGR__XJ_NOT_SENDER;
}

/* Shared: -1 with a message when exec_leader names another engine key than this node's (one key per
 * schema: a second key's nonces would be computed from the first one's journal), else 0. */
static int pg_other_sender(xgr__xjournal *j, char *err, size_t cap) {
  PGresult *r = pg_run(j, "SELECT sender FROM exec_leader WHERE id = 1", 0, NULL, PGRES_TUPLES_OK, err, cap);
  if (!r) return -1;
  int rc = 0;
  if (PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), j->sender)) {
    snprintf(err, cap, "the nodes of this schema send executions from %s, this node's --engine-key is %s: one engine key"
             " for every node of a schema", PQgetvalue(r, 0, 0), j->sender);
    rc = -1;
  }
  PQclear(r);
  return rc;
}

/* Shared: take the sender's lease when free, expired, held by a dead node or by this node's id (a
 * restart), or renew it when a third of it has passed. 1 when this node sends, 0 when another does,
 * -1 on an error. */
static int pg_lead(xgr__xjournal *j, char *err, size_t cap) {
  if (!j->have_table && pg_check_table(j, err, cap)) return -1;
  if (!j->have_table) return 0;   /* no execution anywhere yet */
  uint64_t now = xgr__mono_ns();
  if (j->epoch && now - j->renewed_ns < (uint64_t)xgr_store_fenced_renew_ms(j->lease_ms) * 1000000u) return 1;
  char lm[24], ep[24];
  snprintf(lm, sizeof lm, "%" PRId64, j->lease_ms);
  PGresult *r;
  if (j->epoch) {   /* renew; when that finds another holder, try to take it as anyone would */
    snprintf(ep, sizeof ep, "%" PRId64, j->epoch);
    const char *p[3] = {j->node, lm, ep};
    r = pg_run(j, j->sql_renew, 3, p, PGRES_TUPLES_OK, err, cap);
    bool held = r && PQntuples(r) == 1;
    PQclear(r);
    if (!r) {
      j->epoch = 0;
      return -1;
    }
    if (held) {
      j->renewed_ns = now;
      return 1;
    }
    j->epoch = 0;
  }
  const char *p[3] = {j->node, lm, j->sender};
  r = pg_run(j, j->sql_take, 3, p, PGRES_TUPLES_OK, err, cap);
  if (!r) return -1;
  j->epoch = PQntuples(r) == 1 ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : 0;
  PQclear(r);
  if (j->epoch) j->renewed_ns = now;
  else if (pg_other_sender(j, err, cap)) return -1;   /* never this node's turn: say why */
  return j->epoch ? 1 : 0;
}

/* Shared: give the lease up (at a clean stop), so another node takes over at once. */
static void pg_resign(xgr__xjournal *j) {
  if (!j->epoch || PQstatus(j->pg) != CONNECTION_OK) return;
  char ep[24], msg[256];
  snprintf(ep, sizeof ep, "%" PRId64, j->epoch);
  const char *p[2] = {j->node, ep};
  PGresult *r = pg_run(j, j->sql_release, 2, p, PGRES_COMMAND_OK, msg, sizeof msg);
  PQclear(r);
  j->epoch = 0;
}

static int pg_max_nonce(xgr__xjournal *j, int64_t *out, char *err, size_t cap) {
  *out = -1;
  if (!j->have_table) return 0;
  /* this key's rows only (rows from before the column count as its own): after a key change the
   * new key's nonces start from its own count, not past the old key's */
  const char *p[1] = {j->sender};
  PGresult *r = pg_run(j, "SELECT MAX(nonce) FROM exec_journal WHERE state >= 1 AND raw IS NOT NULL"
                       " AND (sender IS NULL OR sender = $1)", 1, p, PGRES_TUPLES_OK, err, cap);
  if (!r) return -1;
  if (PQntuples(r) == 1 && !PQgetisnull(r, 0, 0)) *out = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
  PQclear(r);
  return 0;
}

static int pg_get(xgr__xjournal *j, const char *owner, uint64_t root, uint64_t iter, int *state, char **hash, char **record) {
  if (!j->have_table) return 0;
  char rt[24], it[24], msg[256];
  snprintf(rt, sizeof rt, "%" PRId64, (int64_t)root);
  snprintf(it, sizeof it, "%" PRId64, (int64_t)iter);
  const char *p[3] = {owner, rt, it};
  PGresult *r = pg_run(j, "SELECT state, hash, record FROM exec_journal WHERE owner = $1 AND root = $2 AND iter = $3", 3, p,
                       PGRES_TUPLES_OK, msg, sizeof msg);
  if (!r) return 0;
  int found = PQntuples(r) == 1;
  if (found) {
    *state = (int)strtol(PQgetvalue(r, 0, 0), NULL, 10);
    *hash = pg_col(r, 0, 1);
    *record = pg_col(r, 0, 2);
  }
  PQclear(r);
  return found;
}

static void pg_counts(xgr__xjournal *j, uint64_t *pending, uint64_t *done) {
  if (!j->have_table) return;
  char msg[256];
  PGresult *r = pg_run(j, "SELECT count(*) FILTER (WHERE state < 2), count(*) FILTER (WHERE state = 2) FROM exec_journal", 0,
                       NULL, PGRES_TUPLES_OK, msg, sizeof msg);
  if (!r) return;
  if (PQntuples(r) == 1) {
    *pending = (uint64_t)strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    *done = (uint64_t)strtoll(PQgetvalue(r, 0, 1), NULL, 10);
  }
  PQclear(r);
}

/* ---- SQLite ------------------------------------------------------------------------------------ */

static int sq_exec(sqlite3 *db, const char *sql) { return sqlite3_exec(db, sql, NULL, NULL, NULL); }

static int sq_open(xgr__xjournal *j, const char *where, xgr_error *e) {
  const char *path = where ? where : ":memory:";
  j->name = xgr__xstrdup(where ? where : "memory (not durable)");
  if (sqlite3_open_v2(path, &j->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL) != SQLITE_OK)
    return xgr_error_set(e, XGR_EIO, "--engine-key", "execution journal %s: %s", path, j->db ? sqlite3_errmsg(j->db) : "cannot open");
  sqlite3_busy_timeout(j->db, 5000);
  if (sq_exec(j->db, "PRAGMA journal_mode=WAL") || sq_exec(j->db, "PRAGMA synchronous=FULL") ||
      sq_exec(j->db,
              "CREATE TABLE IF NOT EXISTS chain_exec(owner TEXT NOT NULL, root INTEGER NOT NULL, iter INTEGER NOT NULL,"
              " step TEXT, target TEXT NOT NULL, function TEXT, data TEXT NOT NULL, value TEXT, gas INTEGER NOT NULL,"
              " state INTEGER NOT NULL, raw TEXT, hash TEXT, nonce INTEGER NOT NULL DEFAULT 0, record TEXT,"
              " sender TEXT, PRIMARY KEY(owner, root, iter))"))
    return xgr_error_set(e, XGR_EIO, "--engine-key", "execution journal %s: %s", path, sqlite3_errmsg(j->db));
  /* a journal from before the column sender gets it (its rows keep NULL: counted as this key's) */
  sqlite3_stmt *st = NULL;
  sqlite3_prepare_v2(j->db, "SELECT 1 FROM pragma_table_info('chain_exec') WHERE name = 'sender'", -1, &st, NULL);
  bool has_sender = st && sqlite3_step(st) == SQLITE_ROW;
  sqlite3_finalize(st);
  if (!has_sender && sq_exec(j->db, "ALTER TABLE chain_exec ADD COLUMN sender TEXT"))
    return xgr_error_set(e, XGR_EIO, "--engine-key", "execution journal %s: %s", path, sqlite3_errmsg(j->db));
  return 0;
}

static void sq_text(sqlite3_stmt *st, int i, const char *s) {
  if (s) sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
}

static int sq_add(xgr__xjournal *j, const xgr__xjournal_intent *in, char *err, size_t cap) {
  sqlite3_stmt *st = NULL;
  sqlite3_prepare_v2(j->db,
                     "INSERT OR IGNORE INTO chain_exec(owner, root, iter, step, target, function, data, value, gas, state, record)"
                     " VALUES(?,?,?,?,?,?,?,?,?,?,?)",
                     -1, &st, NULL);
  sq_text(st, 1, in->owner);
  sqlite3_bind_int64(st, 2, (sqlite3_int64)in->root);
  sqlite3_bind_int64(st, 3, (sqlite3_int64)in->iter);
  sq_text(st, 4, in->step ? in->step : "");
  sq_text(st, 5, in->target);
  sq_text(st, 6, in->function);
  sq_text(st, 7, in->data);
  sq_text(st, 8, in->value);
  sqlite3_bind_int64(st, 9, (sqlite3_int64)in->gas);
  sqlite3_bind_int(st, 10, in->state);
  sq_text(st, 11, in->record);
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc == SQLITE_DONE) return 0;
  set_err(err, cap, sqlite3_errmsg(j->db));
  return -1;
}

static int sq_next(xgr__xjournal *j, xgr__xjournal_row *r, char *err, size_t cap) {
  sqlite3_stmt *st = NULL;
  sqlite3_prepare_v2(j->db,
                     "SELECT rowid, state, target, function, data, value, raw, hash, gas, nonce FROM chain_exec"
                     " WHERE state < 2 ORDER BY state DESC, nonce, rowid LIMIT 1",
                     -1, &st, NULL);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    r->id = sqlite3_column_int64(st, 0);
    r->state = sqlite3_column_int(st, 1);
    r->target = xgr__sqlite_col_text(st, 2);
    r->function = xgr__sqlite_col_text(st, 3);
    r->data = xgr__sqlite_col_text(st, 4);
    r->value = xgr__sqlite_col_text(st, 5);
    r->raw = xgr__sqlite_col_text(st, 6);
    r->hash = xgr__sqlite_col_text(st, 7);
    r->gas = (uint64_t)sqlite3_column_int64(st, 8);
    r->nonce = (uint64_t)sqlite3_column_int64(st, 9);
  } else if (rc != SQLITE_DONE) set_err(err, cap, sqlite3_errmsg(j->db));
  sqlite3_finalize(st);
  return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

static int sq_mark(xgr__xjournal *j, int64_t id, int state, const char *raw, const char *hash, uint64_t nonce,
                   const char *record, char *err, size_t cap) {
  sqlite3_stmt *st = NULL;
  sqlite3_prepare_v2(j->db, "UPDATE chain_exec SET state=?, raw=?, hash=?, nonce=?, record=?, sender=COALESCE(?, sender)"
                     " WHERE rowid=?", -1, &st, NULL);
  sqlite3_bind_int(st, 1, state);
  sq_text(st, 2, raw);
  sq_text(st, 3, hash);
  sqlite3_bind_int64(st, 4, (sqlite3_int64)nonce);
  sq_text(st, 5, record);
  sq_text(st, 6, raw ? j->sender : NULL);
  sqlite3_bind_int64(st, 7, id);
  bool ok = sqlite3_step(st) == SQLITE_DONE;
  sqlite3_finalize(st);
  if (!ok) set_err(err, cap, sqlite3_errmsg(j->db));
  return ok ? 0 : -1;
}

static int sq_max_nonce(xgr__xjournal *j, int64_t *out, char *err, size_t cap) {
  sqlite3_stmt *st = NULL;
  *out = -1;
  sqlite3_prepare_v2(j->db, "SELECT MAX(nonce) FROM chain_exec WHERE state >= 1 AND raw IS NOT NULL"
                     " AND (sender IS NULL OR sender = ?)", -1, &st, NULL);
  sq_text(st, 1, j->sender);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) *out = sqlite3_column_int64(st, 0);
  if (rc != SQLITE_ROW) set_err(err, cap, sqlite3_errmsg(j->db));
  sqlite3_finalize(st);
  return rc == SQLITE_ROW ? 0 : -1;
}

static int sq_get(xgr__xjournal *j, const char *owner, uint64_t root, uint64_t iter, int *state, char **hash, char **record) {
  sqlite3_stmt *st = NULL;
  sqlite3_prepare_v2(j->db, "SELECT state, hash, record FROM chain_exec WHERE owner=? AND root=? AND iter=?", -1, &st, NULL);
  sq_text(st, 1, owner);
  sqlite3_bind_int64(st, 2, (sqlite3_int64)root);
  sqlite3_bind_int64(st, 3, (sqlite3_int64)iter);
  int found = sqlite3_step(st) == SQLITE_ROW;
  if (found) {
    *state = sqlite3_column_int(st, 0);
    *hash = xgr__sqlite_col_text(st, 1);
    *record = xgr__sqlite_col_text(st, 2);
  }
  sqlite3_finalize(st);
  return found;
}

static void sq_counts(xgr__xjournal *j, uint64_t *pending, uint64_t *done) {
  sqlite3_stmt *st = NULL;
  sqlite3_prepare_v2(j->db, "SELECT SUM(state < 2), SUM(state = 2) FROM chain_exec", -1, &st, NULL);
  if (sqlite3_step(st) == SQLITE_ROW) {
    *pending = (uint64_t)sqlite3_column_int64(st, 0);
    *done = (uint64_t)sqlite3_column_int64(st, 1);
  }
  sqlite3_finalize(st);
}

/* ---- the interface ----------------------------------------------------------------------------- */

/* Both opens: node NULL for a journal of its own at where, else the shared journal at the URI. */
static xgr__xjournal *journal_open(const char *where, const char *node, int64_t lease_ms, const char *sender,
                                   xgr_error *e) {
  assert(sender && strlen(sender) == 42);
  xgr__xjournal *j = xgr__xcalloc(1, sizeof *j);
  snprintf(j->sender, sizeof j->sender, "%s", sender);
  if (node) {
    j->node = xgr__xstrdup(node);
    j->lease_ms = lease_ms;
    pg_lease_sql(j);
  }
  if (xgr_store_url_is_postgres(where) ? pg_open(j, where, e) : sq_open(j, where, e)) {
    xgr__xjournal_close(j);
    return NULL;
  }
  return j;
}

xgr__xjournal *xgr__xjournal_open(const char *where, const char *sender, xgr_error *e) {
  return journal_open(where, NULL, 0, sender, e);
}

xgr__xjournal *xgr__xjournal_open_shared(const char *url, const char *node, int64_t lease_ms, const char *sender,
                                         xgr_error *e) {
  assert(node && *node && lease_ms > 0);
  if (!xgr_store_url_is_postgres(url)) {
    xgr_error_set(e, XGR_EINVAL, "--engine-key", "a shared execution journal needs a PostgreSQL store");
    return NULL;
  }
  return journal_open(url, node, lease_ms, sender, e);
}

bool xgr__xjournal_shared(const xgr__xjournal *j) { return j->node != NULL; }

int xgr__xjournal_lead(xgr__xjournal *j, char *err, size_t cap) {
  assert(j->node);
  return pg_lead(j, err, cap);
}

void xgr__xjournal_close(xgr__xjournal *j) {
  if (!j) return;
  if (j->pg && j->node) pg_resign(j);
  free(j->node);
  free(j->sql_take);
  free(j->sql_renew);
  free(j->sql_release);
  free(j->sql_mark);
  if (j->db) sqlite3_close(j->db);
  if (j->pg) PQfinish(j->pg);   /* ends the session: its advisory lock goes with it */
  free(j->name);
  free(j);
}

const char *xgr__xjournal_name(const xgr__xjournal *j) { return j->name; }

int xgr__xjournal_add(xgr__xjournal *j, const xgr__xjournal_intent *in, char *err, size_t cap) {
  return j->pg ? pg_add(j, in, err, cap) : sq_add(j, in, err, cap);
}

int xgr__xjournal_next(xgr__xjournal *j, xgr__xjournal_row *r, char *err, size_t cap) {
  memset(r, 0, sizeof *r);
  return j->pg ? pg_next(j, r, err, cap) : sq_next(j, r, err, cap);
}

void xgr__xjournal_row_clear(xgr__xjournal_row *r) {
  free(r->target);
  free(r->function);
  free(r->data);
  free(r->value);
  free(r->raw);
  free(r->hash);
  memset(r, 0, sizeof *r);
}

int xgr__xjournal_mark(xgr__xjournal *j, int64_t id, int state, const char *raw, const char *hash, uint64_t nonce,
                       const char *record, char *err, size_t cap) {
  return j->pg ? pg_mark(j, id, state, raw, hash, nonce, record, err, cap) : sq_mark(j, id, state, raw, hash, nonce, record, err, cap);
}

int xgr__xjournal_max_nonce(xgr__xjournal *j, int64_t *out, char *err, size_t cap) {
  return j->pg ? pg_max_nonce(j, out, err, cap) : sq_max_nonce(j, out, err, cap);
}

int xgr__xjournal_get(xgr__xjournal *j, const char *owner, uint64_t root, uint64_t iter, int *state, char **hash,
                      char **record) {
  *hash = *record = NULL;
  return j->pg ? pg_get(j, owner, root, iter, state, hash, record) : sq_get(j, owner, root, iter, state, hash, record);
}

void xgr__xjournal_counts(xgr__xjournal *j, uint64_t *pending, uint64_t *done) {
  *pending = *done = 0;
  if (j->pg) pg_counts(j, pending, done);
  else sq_counts(j, pending, done);
}
