/* executor.c — executions of the engine (XRC-137 §8.3) sent exactly once, across crashes.
 *
 * The engine's workers hand each step's resolved execution to `submit` (xgr_exec_hook) before the
 * step's result is applied. submit encodes it (call data, value, gas limit, target: CPU only) and
 * writes it as an *intent* into a journal — an SQLite file of its own, synchronous=FULL — keyed
 * by (owner, rootPid, iter); a second submit of the same key (the step ran again after a crash
 * before its result was committed) keeps the first. One executor thread then works the journal
 * in order:
 *
 *   intent  -> sign with the engine key (its next nonce; gas.limit or an estimate) and store the
 *              raw transaction and its hash (state "signed") BEFORE anything is sent;
 *   signed  -> broadcast those exact bytes (again, after a restart: a node that has or mined them
 *              is fine), wait for the receipt, store the record (state "done").
 *
 * So a transaction is never signed twice for one step and never sent before it is durable: after
 * a SIGKILL at any point the restarted executor finishes what the journal holds and every
 * execution is mined once. The executor's nonce starts at max(the node's pending count, the
 * highest journaled nonce + 1), and signed-but-unmined transactions go out first, in order.
 * The thread holds no engine worker; records are read by xgrd for history rows (getSession).
 */
#include <pthread.h>
#include <stdarg.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chain/chain_int.h"
#include "store/sqlite_col.h"
#include "util/alloc.h"
#include "xgr/abi.h"
#include "xgr/engine.h"
#include "xgr/secp.h"

enum { ST_INTENT = 0, ST_SIGNED = 1, ST_DONE = 2 };

struct xgr_chain_executor {
  xgr_chain_sender s;
  sqlite3 *db;
  pthread_mutex_t mu;          /* db, stop, pending */
  pthread_cond_t cv;
  bool stop, started;
  pthread_t th;
  FILE *log;
  xgr_exec_hook hook;
  uint64_t done_count;
};

static void logf_(xgr_chain_executor *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(xgr_chain_executor *x, const char *fmt, ...) {
  if (!x->log) return;
  va_list ap;
  va_start(ap, fmt);
  flockfile(x->log);
  vfprintf(x->log, fmt, ap);
  fputc('\n', x->log);
  funlockfile(x->log);
  va_end(ap);
}

static int exec_sql(sqlite3 *db, const char *sql) { return sqlite3_exec(db, sql, NULL, NULL, NULL); }

/* ---- submit (engine workers) ------------------------------------------------------------------- */

static void submit(void *ctx, const char *owner, uint64_t root, uint64_t iter, const char *step_id, const xgr_execution *ex) {
  xgr_chain_executor *x = ctx;
  /* encode now: the intent holds exactly what will be signed */
  xgr_abi_sig *sig = NULL;
  uint8_t *data = NULL, value[32] = {0};
  size_t len = 0;
  bool hv = false;
  xgr_error e;
  char *err = NULL;
  if (ex->function) {
    if (xgr_abi_sig_parse(ex->function, strlen(ex->function), &sig, &e)) err = xgr__xstrdup(e.message);
    else {
      xgr_value args[XGR_MAX_EXEC_ARGS];
      for (size_t i = 0; i < ex->nargs && i < XGR_MAX_EXEC_ARGS; i++) args[i] = ex->args[i].value;
      if (xgr_abi_encode_call(sig, args, ex->nargs, &data, &len, &e)) err = xgr__xstrdup(e.message);
    }
  }
  if (!err && ex->has_value) {
    xgr_abi_type *t = NULL;
    uint8_t *w = NULL;
    size_t wl;
    if (xgr_abi_type_parse("(uint256)", 9, &t, &e) || xgr_abi_encode(t, &ex->value.value, 1, &w, &wl, &e))
      err = xgr__xstrdup("execution value is not a wei amount (uint256)");
    else memcpy(value, w, 32), hv = true;
    free(w);
    xgr_abi_type_free(t);
  }
  xgr_abi_sig_free(sig);
  char *dhex = xgr_hex_encode_alloc(data ? data : (const uint8_t *)"", len);
  char *vhex = hv ? xgr_hex_encode_alloc(value, 32) : NULL;
  free(data);
  pthread_mutex_lock(&x->mu);
  sqlite3_stmt *st = NULL;
  sqlite3_prepare_v2(x->db,
                     "INSERT OR IGNORE INTO chain_exec(owner, root, iter, step, target, function, data, value, gas, state, record)"
                     " VALUES(?,?,?,?,?,?,?,?,?,?,?)",
                     -1, &st, NULL);
  sqlite3_bind_text(st, 1, owner, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st, 2, (sqlite3_int64)root);
  sqlite3_bind_int64(st, 3, (sqlite3_int64)iter);
  sqlite3_bind_text(st, 4, step_id ? step_id : "", -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 5, ex->to, -1, SQLITE_TRANSIENT);
  if (ex->function) sqlite3_bind_text(st, 6, ex->function, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 7, dhex, -1, SQLITE_TRANSIENT);
  if (vhex) sqlite3_bind_text(st, 8, vhex, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st, 9, ex->has_gas ? (sqlite3_int64)ex->gas_limit : 0);
  char *rec = NULL;
  if (err) {   /* cannot be encoded: settled at once, nothing to send */
    json_t *r = json_pack("{s:n, s:s, s:s}", "txHash", "status", "failed", "error", err);
    rec = json_dumps(r, JSON_COMPACT);
    json_decref(r);
  }
  sqlite3_bind_int(st, 10, err ? ST_DONE : ST_INTENT);
  if (rec) sqlite3_bind_text(st, 11, rec, -1, SQLITE_TRANSIENT);
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE)
    logf_(x, "level=error msg=\"execution journal write failed\" owner=%s rootPid=%llu iter=%llu error=\"%s\"", owner,
          (unsigned long long)root, (unsigned long long)iter, sqlite3_errmsg(x->db));
  pthread_cond_signal(&x->cv);
  pthread_mutex_unlock(&x->mu);
  free(rec);
  free(err);
  free(dhex);
  free(vhex);
}

/* ---- the executor thread ----------------------------------------------------------------------- */

typedef struct row {
  sqlite3_int64 rowid;
  int state;
  char *target, *function, *data, *value, *raw, *hash;
  uint64_t gas, nonce;
} row;

static void row_clear(row *r) {
  free(r->target);
  free(r->function);
  free(r->data);
  free(r->value);
  free(r->raw);
  free(r->hash);
  memset(r, 0, sizeof *r);
}

/* The next row to work on (signed ones first, in nonce order; then intents in arrival order). */
static bool next_row(xgr_chain_executor *x, row *r) {
  sqlite3_stmt *st = NULL;
  sqlite3_prepare_v2(x->db,
                     "SELECT rowid, state, target, function, data, value, raw, hash, gas, nonce FROM chain_exec"
                     " WHERE state < 2 ORDER BY state DESC, nonce, rowid LIMIT 1",
                     -1, &st, NULL);
  bool found = sqlite3_step(st) == SQLITE_ROW;
  if (found) {
    r->rowid = sqlite3_column_int64(st, 0);
    r->state = sqlite3_column_int(st, 1);
    r->target = xgr__sqlite_col_text(st, 2);
    r->function = xgr__sqlite_col_text(st, 3);
    r->data = xgr__sqlite_col_text(st, 4);
    r->value = xgr__sqlite_col_text(st, 5);
    r->raw = xgr__sqlite_col_text(st, 6);
    r->hash = xgr__sqlite_col_text(st, 7);
    r->gas = (uint64_t)sqlite3_column_int64(st, 8);
    r->nonce = (uint64_t)sqlite3_column_int64(st, 9);
  }
  sqlite3_finalize(st);
  return found;
}

static bool mark(xgr_chain_executor *x, const row *r, int state, const char *raw, const char *hash, uint64_t nonce,
                 const char *record) {
  sqlite3_stmt *st = NULL;
  sqlite3_prepare_v2(x->db, "UPDATE chain_exec SET state=?, raw=?, hash=?, nonce=?, record=? WHERE rowid=?", -1, &st, NULL);
  sqlite3_bind_int(st, 1, state);
  if (raw) sqlite3_bind_text(st, 2, raw, -1, SQLITE_TRANSIENT);
  if (hash) sqlite3_bind_text(st, 3, hash, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st, 4, (sqlite3_int64)nonce);
  if (record) sqlite3_bind_text(st, 5, record, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st, 6, r->rowid);
  bool ok = sqlite3_step(st) == SQLITE_DONE;
  sqlite3_finalize(st);
  if (!ok) logf_(x, "level=error msg=\"execution journal update failed\" error=\"%s\"", sqlite3_errmsg(x->db));
  return ok;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* An xgr_execution view of a row, for the settle replay (its call data is used as is). */
static json_t *settle_row(xgr_chain_executor *x, const row *r, const xgr_chain_signed *tx) {
  return xgr__chain_settle(&x->s, r->target, r->data, r->value, r->function, tx);
}

/* Work one row; false when the node could not be reached (retry later). */
static bool work(xgr_chain_executor *x, row *r) {
  xgr_chain_signed tx = {0};
  xgr_error e;
  xgr_error_clear(&e);
  if (r->state == ST_INTENT) {
    size_t dl = 0, vl = 0;
    uint8_t *data = xgr_hex_decode_alloc(r->data, strlen(r->data), &dl);
    uint8_t *value = r->value ? xgr_hex_decode_alloc(r->value, strlen(r->value), &vl) : NULL;
    int rc = xgr_chain_sign(&x->s, r->target, data, dl, value, r->gas, &tx, &e);
    free(data);
    free(value);
    if (rc == XGR_EEVAL) {   /* the estimate reverted: nothing to send */
      json_t *rec = xgr_chain_exec_refused(&e);
      char *t = json_dumps(rec, JSON_COMPACT);
      pthread_mutex_lock(&x->mu);
      mark(x, r, ST_DONE, NULL, NULL, 0, t);
      pthread_mutex_unlock(&x->mu);
      free(t);
      json_decref(rec);
      return true;
    }
    if (rc) {
      logf_(x, "level=warn msg=\"cannot sign an execution yet\" error=\"%s\"", e.message);
      return false;
    }
    pthread_mutex_lock(&x->mu);
    bool ok = mark(x, r, ST_SIGNED, tx.raw_hex, tx.hash, tx.nonce, NULL);   /* durable before it is sent */
    pthread_mutex_unlock(&x->mu);
    if (!ok) {
      xgr_chain_signed_clear(&tx);
      return false;
    }
  } else {
    snprintf(tx.hash, sizeof tx.hash, "%s", r->hash ? r->hash : "");
    tx.raw_hex = r->raw ? xgr__xstrdup(r->raw) : xgr__xstrdup("0x");
    tx.nonce = r->nonce;
  }
  json_t *rec = settle_row(x, r, &tx);
  const char *status = json_string_value(json_object_get(rec, "status"));
  bool settled = status && strcmp(status, "pending");
  if (settled) {
    char *t = json_dumps(rec, JSON_COMPACT);
    pthread_mutex_lock(&x->mu);
    mark(x, r, ST_DONE, tx.raw_hex, tx.hash, tx.nonce, t);
    x->done_count++;
    pthread_mutex_unlock(&x->mu);
    free(t);
  }
  json_decref(rec);
  xgr_chain_signed_clear(&tx);
  return settled;
}

static void *run(void *arg) {
  xgr_chain_executor *x = arg;
  bool nonce_ready = false;
  for (;;) {
    pthread_mutex_lock(&x->mu);
    if (x->stop) {
      pthread_mutex_unlock(&x->mu);
      break;
    }
    row r = {0};
    bool have = next_row(x, &r);
    if (!have) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_sec += 1;
      pthread_cond_timedwait(&x->cv, &x->mu, &ts);
      pthread_mutex_unlock(&x->mu);
      continue;
    }
    sqlite3_int64 max_nonce = -1;
    if (!nonce_ready) {
      sqlite3_stmt *st = NULL;
      sqlite3_prepare_v2(x->db, "SELECT MAX(nonce) FROM chain_exec WHERE state >= 1 AND raw IS NOT NULL", -1, &st, NULL);
      if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) max_nonce = sqlite3_column_int64(st, 0);
      sqlite3_finalize(st);
    }
    pthread_mutex_unlock(&x->mu);
    if (!nonce_ready) {
      xgr_error e;
      if (xgr_chain_sender_init(&x->s, &e)) {
        logf_(x, "level=warn msg=\"executor cannot reach the chain\" error=\"%s\"", e.message);
        row_clear(&r);
        sleep_ms(500);
        continue;
      }
      if (max_nonce >= 0 && (uint64_t)max_nonce + 1 > x->s.nonce) x->s.nonce = (uint64_t)max_nonce + 1;
      nonce_ready = true;
    }
    if (!work(x, &r)) sleep_ms(200);
    row_clear(&r);
  }
  return NULL;
}

/* ---- life cycle and records -------------------------------------------------------------------- */

xgr_chain_executor *xgr_chain_executor_new(xgr_chain *c, const xgr_secp *secp, const uint8_t key[32], const char *journal,
                                           FILE *log, xgr_error *e) {
  xgr_chain_executor *x = xgr__xcalloc(1, sizeof *x);
  x->s = (xgr_chain_sender){.chain = c, .secp = secp};
  memcpy(x->s.key, key, 32);
  x->log = log;
  pthread_mutex_init(&x->mu, NULL);
  pthread_cond_init(&x->cv, NULL);
  uint8_t addr[20];
  if (xgr_secp_address(secp, key, addr, e)) {
    xgr_chain_executor_free(x);
    return NULL;
  }
  xgr_addr_hex(addr, x->s.from);
  const char *path = journal ? journal : ":memory:";
  if (sqlite3_open_v2(path, &x->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL) != SQLITE_OK) {
    xgr_error_set(e, XGR_EIO, "--engine-key", "execution journal %s: %s", path, x->db ? sqlite3_errmsg(x->db) : "cannot open");
    xgr_chain_executor_free(x);
    return NULL;
  }
  sqlite3_busy_timeout(x->db, 5000);
  if (exec_sql(x->db, "PRAGMA journal_mode=WAL") || exec_sql(x->db, "PRAGMA synchronous=FULL") ||
      exec_sql(x->db,
               "CREATE TABLE IF NOT EXISTS chain_exec(owner TEXT NOT NULL, root INTEGER NOT NULL, iter INTEGER NOT NULL,"
               " step TEXT, target TEXT NOT NULL, function TEXT, data TEXT NOT NULL, value TEXT, gas INTEGER NOT NULL,"
               " state INTEGER NOT NULL, raw TEXT, hash TEXT, nonce INTEGER NOT NULL DEFAULT 0, record TEXT,"
               " PRIMARY KEY(owner, root, iter))")) {
    xgr_error_set(e, XGR_EIO, "--engine-key", "execution journal %s: %s", path, sqlite3_errmsg(x->db));
    xgr_chain_executor_free(x);
    return NULL;
  }
  x->hook = (xgr_exec_hook){.submit = submit, .ctx = x};
  if (pthread_create(&x->th, NULL, run, x)) {
    xgr_error_set(e, XGR_ENOMEM, NULL, "cannot start the executor thread");
    xgr_chain_executor_free(x);
    return NULL;
  }
  pthread_setname_np(x->th, "xgr-exec");
  x->started = true;
  return x;
}

void xgr_chain_executor_free(xgr_chain_executor *x) {
  if (!x) return;
  if (x->started) {
    pthread_mutex_lock(&x->mu);
    x->stop = true;
    pthread_cond_signal(&x->cv);
    pthread_mutex_unlock(&x->mu);
    pthread_join(x->th, NULL);
  }
  if (x->db) sqlite3_close(x->db);
  memset(x->s.key, 0, sizeof x->s.key);
  pthread_cond_destroy(&x->cv);
  pthread_mutex_destroy(&x->mu);
  free(x);
}

const struct xgr_exec_hook *xgr_chain_executor_hook(xgr_chain_executor *x) { return &x->hook; }
const char *xgr_chain_executor_address(const xgr_chain_executor *x) { return x->s.from; }

json_t *xgr_chain_executor_record(xgr_chain_executor *x, const char *owner, uint64_t root, uint64_t iter) {
  pthread_mutex_lock(&x->mu);
  sqlite3_stmt *st = NULL;
  sqlite3_prepare_v2(x->db, "SELECT state, hash, record FROM chain_exec WHERE owner=? AND root=? AND iter=?", -1, &st, NULL);
  sqlite3_bind_text(st, 1, owner, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st, 2, (sqlite3_int64)root);
  sqlite3_bind_int64(st, 3, (sqlite3_int64)iter);
  json_t *out = NULL;
  if (sqlite3_step(st) == SQLITE_ROW) {
    int state = sqlite3_column_int(st, 0);
    const char *hash = (const char *)sqlite3_column_text(st, 1);
    const char *rec = (const char *)sqlite3_column_text(st, 2);
    json_error_t je;
    if (state == ST_DONE && rec) out = json_loads(rec, 0, &je);
    if (!out) out = json_pack("{s:s?, s:s}", "txHash", hash, "status", "pending");
  }
  sqlite3_finalize(st);
  pthread_mutex_unlock(&x->mu);
  return out;
}

void xgr_chain_executor_counts(xgr_chain_executor *x, uint64_t *pending, uint64_t *done) {
  pthread_mutex_lock(&x->mu);
  sqlite3_stmt *st = NULL;
  sqlite3_prepare_v2(x->db, "SELECT SUM(state < 2), SUM(state = 2) FROM chain_exec", -1, &st, NULL);
  *pending = *done = 0;
  if (sqlite3_step(st) == SQLITE_ROW) {
    *pending = (uint64_t)sqlite3_column_int64(st, 0);
    *done = (uint64_t)sqlite3_column_int64(st, 1);
  }
  sqlite3_finalize(st);
  pthread_mutex_unlock(&x->mu);
}
