/* pg_cluster.c — several xgrd nodes on one PostgreSQL database (issue 18): leases with fencing
 * epochs, claims, heartbeats, and the command rows that carry control calls between nodes.
 * docs/CLUSTER.md has the design; in short:
 *
 *   node         a store opened with cfg.node_id. Its lease connection holds the advisory lock
 *                hashtextextended('xgr node ' || id, 0) for as long as the process lives, so
 *                other nodes see at once that a killed node is dead (xgr_node_alive in SQL). A
 *                second connection LISTENs on the node's channel (xgr_n + 16 hex of its id).
 *   lease        sessions.lease_owner / lease_epoch / lease_expires (ms of the database clock).
 *                A row the node inserts is leased to it at epoch 1 (column defaults reading the
 *                writer connection's settings xgr.node and xgr.lease_ms). A claim takes running
 *                sessions that are unleased, expired, or leased to a dead node, FOR UPDATE SKIP
 *                LOCKED, and raises their epoch. A row's lease holds until its own lease_expires
 *                (set by the claim or the insert) or its node's (nodes.expires_at), whichever is
 *                later: the heartbeat extends the node's row, so all its leases at once, and
 *                finds the ones it lost.
 *   epochs       the store remembers the epoch of every session the node holds (`held`). The
 *                writer fails a batch of a session not in it at once, and sends every group with
 *                a fence (xgr_lease_fence) that share-locks the group's session rows and raises
 *                SQLSTATE XL001 unless each still names this node at the held epoch: the late
 *                write of a node that lost a lease is refused in the transaction that would have
 *                made it (postgres.c applies the group again batch by batch, so only those fail).
 *   commands     lease_commands rows: the asking node inserts one and NOTIFYs the holder's
 *                channel ("c"); the holder takes its pending rows, runs them, writes the answer
 *                and NOTIFYs the asker's channel ("r<id>").
 *
 * Threads: the lease connection is used under `mu` (claims, heartbeats, commands, routing
 * lookups from RPC threads); the listening connection only by the thread that calls
 * xgr_store_cmd_listen; `held` and the counters under `hmu` (the writer thread reads them for
 * every group).
 */
#include <assert.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/postgres_impl.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/hashmap.h"

/* One session this node holds: its key and the epoch it claimed it at. */
typedef struct held {
  uint64_t root;
  int64_t epoch;
  char owner[];
} held;

struct pgc {
  char *url, *name, *node;
  int64_t lease_ms;
  char chan[24];                /* this node's NOTIFY channel */
  PGconn *c;                    /* the lease connection (node lock), under mu */
  PGconn *l;                    /* the listening connection (one thread) */
  /* Reconnecting (conn_ready, listen_ready): whether c holds the node lock now, the server
   * process c had when it took it (a connection cut on the way may leave that process alive,
   * holding the lock, until the server notices), and whether l listens. Under mu (c's) and on
   * the listening thread (l's). */
  bool locked, listening;
  int locked_pid;
  pthread_mutex_t mu;
  pthread_mutex_t hmu;          /* guards held, orphans and st */
  xgr_hashmap held;             /* hashed by (owner, root): held * */
  xgr_hashmap orphans;          /* rows naming this node that it does not hold: orphan * (renew) */
  xgr_store_lease_stats st;
  /* Rebalancing (xgr_store_lease_balance, under hmu): this node held at least its share of the
   * running sessions at the last count, so its claim rounds leave rows released in the last lease
   * period to the nodes below their share. */
  bool full;
  /* One claim of a session at a time on this node, from the check that no later claim of it here
   * superseded this one to its load (striped by key): see take_claimed. */
  pthread_mutex_t cmu[64];
  /* the statements of the sessions' leases written by the fenced-lease primitive (pg_lease_sql) */
  char *sql_claim, *sql_current, *sql_give_up, *sql_release_all;
};

static void pg_lease_sql(pgc *c);

/* ---- small helpers ------------------------------------------------------------------------------ */

static uint64_t key_hash(const char *owner, uint64_t root) {
  uint64_t x = 0xcbf29ce484222325ULL ^ root * 0x9E3779B97F4A7C15ULL;
  for (const char *p = owner; *p; p++) x = (x ^ (unsigned char)*p) * 0x100000001b3ULL;
  return x ^ (x >> 29);
}

typedef struct key_ref {
  const char *owner;
  uint64_t root;
} key_ref;

static bool held_match(const void *ctx, const void *val) {
  const key_ref *k = ctx;
  const held *h = val;
  return h->root == k->root && !strcmp(h->owner, k->owner);
}

/* under hmu */
static held *held_find(pgc *c, const char *owner, uint64_t root) {
  key_ref k = {owner, root};
  return xgr__hashmap_find(&c->held, key_hash(owner, root), held_match, &k);
}

/* under hmu: hold (owner, root) at epoch */
static void held_put(pgc *c, const char *owner, uint64_t root, int64_t epoch) {
  held *h = held_find(c, owner, root);
  if (h) {   /* a row's epoch only grows: two claims of one session here (a claim round and a
              * load) that finish out of order keep the later one's */
    if (epoch > h->epoch) h->epoch = epoch;
    return;
  }
  size_t len = strlen(owner);
  h = xgr__xmalloc(sizeof *h + len + 1);
  h->root = root;
  h->epoch = epoch;
  memcpy(h->owner, owner, len + 1);
  xgr__hashmap_add(&c->held, key_hash(owner, root), h);
}

/* under hmu: forget (owner, root); true when it was held */
static bool held_del(pgc *c, const char *owner, uint64_t root) {
  held *h = held_find(c, owner, root);
  if (!h) return false;
  xgr__hashmap_remove(&c->held, key_hash(owner, root), h);
  free(h);
  return true;
}

/* A node's NOTIFY channel: an identifier PostgreSQL accepts whatever the id holds. */
static void channel_of(const char *node, char out[24]) {
  uint64_t x = 0xcbf29ce484222325ULL;
  for (const char *p = node; *p; p++) x = (x ^ (unsigned char)*p) * 0x100000001b3ULL;
  snprintf(out, 24, "xgr_n%016" PRIx64, x);
}

void xgr__pg_first_line(const char *msg, char *out, size_t cap) {
  size_t n = strcspn(msg ? msg : "", "\n");
  if (n >= cap) n = cap - 1;
  memcpy(out, msg ? msg : "", n);
  out[n] = 0;
}

PGconn *xgr__pg_connect(const char *url, const char *name, const char *role, const char *node, xgr_error *err) {
  char app[96];
  snprintf(app, sizeof app, "xgr %s%s%.60s", role, node ? " " : "", node ? node : "");
  /* defaults the URI may override (it comes later): give up connecting after 10 s, and have the
   * kernel notice within about 15 s a TCP connection whose other end went silent (a cut network,
   * a blackholed route) instead of waiting hours for an answer that cannot come */
  const char *const keys[] = {"connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval",
                              "keepalives_count", "dbname", "fallback_application_name", NULL};
  const char *const vals[] = {"10", "1", "5", "2", "3", url, app, NULL};
  PGconn *conn = PQconnectdbParams(keys, vals, 1);
  if (conn && PQstatus(conn) == CONNECTION_OK) return conn;
  char msg[300];
  xgr__pg_first_line(conn ? PQerrorMessage(conn) : "out of memory", msg, sizeof msg);
  xgr_error_set(err, XGR_EIO, NULL, "store %s: cannot connect to PostgreSQL: %s", name, msg);
  PQfinish(conn);
  return NULL;
}

static int pq_error(const pgc *c, PGconn *conn, const PGresult *r, const char *what, xgr_error *err) {
  char msg[300];
  xgr__pg_first_line(r && *PQresultErrorMessage(r) ? PQresultErrorMessage(r) : PQerrorMessage(conn), msg, sizeof msg);
  return xgr_error_set(err, XGR_EIO, NULL, "store %s: %s: %s", c->name, what, msg);
}

static bool conn_ready(pgc *c, xgr_error *err);

/* Run sql with text parameters on the lease connection (under mu); the result when it is
 * TUPLES_OK or COMMAND_OK, else NULL with *err. A connection that was lost (the server
 * restarted, the network cut it) is made again first, with the node lock (conn_ready). */
static PGresult *run(pgc *c, const char *sql, int n, const char *const *v, const char *what, xgr_error *err) {
  if (!conn_ready(c, err)) return NULL;
  PGresult *r = PQexecParams(c->c, sql, n, NULL, v, NULL, NULL, 0);
  ExecStatusType s = PQresultStatus(r);
  if (s == PGRES_TUPLES_OK || s == PGRES_COMMAND_OK) return r;
  pq_error(c, c->c, r, what, err);
  PQclear(r);
  return NULL;
}

/* run() under the lease connection's lock (one statement, no transaction around it). */
static PGresult *run_locked(pgc *c, const char *sql, int n, const char *const *v, const char *what, xgr_error *err) {
  pthread_mutex_lock(&c->mu);
  PGresult *r = run(c, sql, n, v, what, err);
  pthread_mutex_unlock(&c->mu);
  return r;
}

/* A PostgreSQL array literal being built: {"a","b"} */
static void arr_sep(xgr_buf *b) { xgr__buf_putc(b, b->len ? ',' : '{'); }
static void arr_text(xgr_buf *b, const char *v) {
  arr_sep(b);
  xgr__buf_putc(b, '"');
  for (const char *q = v; *q; q++) {
    if (*q == '"' || *q == '\\') xgr__buf_putc(b, '\\');
    xgr__buf_putc(b, *q);
  }
  xgr__buf_putc(b, '"');
}
static void arr_num(xgr_buf *b, const char *fmt, uint64_t u, int64_t i, bool is_signed) {
  arr_sep(b);
  if (is_signed) xgr__buf_printf(b, "%" PRId64, i);
  else xgr__buf_printf(b, fmt, u);
}
static char *arr_finish(xgr_buf *b) {
  if (!b->len) xgr__buf_putc(b, '{');
  xgr__buf_putc(b, '}');
  return xgr__buf_finish(b, NULL);
}

/* ---- open / close ---------------------------------------------------------------------------------- */

/* A connection of the node's own; role names it in pg_stat_activity ("xgr lease <node>"). */
static PGconn *connect_plain(pgc *c, const char *role, xgr_error *err) {
  PGconn *conn = xgr__pg_connect(c->url, c->name, role, c->node, err);
  if (conn) PQclear(PQexec(conn, "SET client_min_messages = warning"));
  return conn;
}

/* Take the node lock on c->c (under mu, or before anyone else has c): true when taken, false
 * when another server process holds it, NULL statement results give *err. */
static int take_lock(pgc *c, bool *got, xgr_error *err) {
  const char *v[1] = {c->node};
  PGresult *r = PQexecParams(c->c, "SELECT pg_try_advisory_lock(hashtextextended('xgr node ' || $1, 0))", 1, NULL, v,
                             NULL, NULL, 0);
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    pq_error(c, c->c, r, "node lock", err);
    PQclear(r);
    return XGR_EIO;
  }
  *got = PQgetvalue(r, 0, 0)[0] == 't';
  PQclear(r);
  if (*got) {
    c->locked = true;
    c->locked_pid = PQbackendPID(c->c);
  }
  return 0;
}

/* Under mu: the lease connection is usable and holds the node lock. A lost connection is made
 * again (PQreset) and the lock taken again; should the server process of the lost connection
 * still hold it (a cut connection whose end the server has not noticed yet), that process is
 * ended first: it is this node's own, and no statement can run on it any more. Counts
 * reconnections in st.reconnects. false with *err while the database cannot be reached. */
static void set_disconnected(pgc *c, bool v) {
  pthread_mutex_lock(&c->hmu);
  c->st.disconnected = v;
  pthread_mutex_unlock(&c->hmu);
}

static bool conn_ready(pgc *c, xgr_error *err) {
  if (PQstatus(c->c) == CONNECTION_OK && c->locked) return true;
  set_disconnected(c, true);
  if (PQstatus(c->c) != CONNECTION_OK) {
    c->locked = false;
    PQreset(c->c);
    if (PQstatus(c->c) != CONNECTION_OK) {
      char msg[300];
      xgr__pg_first_line(PQerrorMessage(c->c), msg, sizeof msg);
      xgr_error_set(err, XGR_EIO, NULL, "store %s: the lease connection is lost and cannot be made again: %s", c->name,
                    msg);
      return false;
    }
    PQclear(PQexec(c->c, "SET client_min_messages = warning"));
    pthread_mutex_lock(&c->hmu);
    c->st.reconnects++;
    pthread_mutex_unlock(&c->hmu);
  }
  bool got = false;
  if (take_lock(c, &got, err)) return false;
  if (!got && c->locked_pid) {
    char pid[16];
    snprintf(pid, sizeof pid, "%d", c->locked_pid);
    const char *v[1] = {pid};
    PGresult *r = PQexecParams(c->c, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = $1::int",
                               1, NULL, v, NULL, NULL, 0);
    PQclear(r);
    for (int i = 0; i < 20 && !got; i++) {   /* the process ends within moments of the signal */
      if (take_lock(c, &got, err)) return false;
      if (!got) nanosleep(&(struct timespec){0, 50000000}, NULL);
    }
  }
  if (!got) {
    xgr_error_set(err, XGR_ESTATE, "nodeId", "store %s: after reconnecting, node id \"%s\" is held by another server "
                  "process; is a second xgrd running with this --node-id?", c->name, c->node);
    return false;
  }
  set_disconnected(c, false);
  return true;
}

/* The listening thread: l is usable and LISTENs on the node's channel; a lost one is made again.
 * Notifications sent while it was gone are lost: the lease thread's polls find their work. */
static int listen_ready(pgc *c, xgr_error *err) {
  if (PQstatus(c->l) == CONNECTION_OK && c->listening) return 0;
  if (PQstatus(c->l) != CONNECTION_OK) {
    c->listening = false;
    PQreset(c->l);
    if (PQstatus(c->l) != CONNECTION_OK) {
      char msg[300];
      xgr__pg_first_line(PQerrorMessage(c->l), msg, sizeof msg);
      return xgr_error_set(err, XGR_EIO, NULL, "store %s: the listening connection is lost and cannot be made again: %s",
                           c->name, msg);
    }
    PQclear(PQexec(c->l, "SET client_min_messages = warning"));
  }
  char sql[64];
  snprintf(sql, sizeof sql, "LISTEN %s", c->chan);
  PGresult *r = PQexec(c->l, sql);
  int rc = PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : pq_error(c, c->l, r, "LISTEN", err);
  PQclear(r);
  c->listening = !rc;
  return rc;
}

pgc *xgr__pgc_open(const char *url, const char *name, const char *node, int64_t lease_ms, xgr_error *err) {
  if (!node || !node[0] || strlen(node) > 200) {
    xgr_error_set(err, XGR_EINVAL, "nodeId", "is %s; expected 1 to 200 bytes", node && node[0] ? "too long" : "empty");
    return NULL;
  }
  pgc *c = xgr__xcalloc(1, sizeof *c);
  c->url = xgr__xstrdup(url);
  c->name = xgr__xstrdup(name);
  c->node = xgr__xstrdup(node);
  c->lease_ms = lease_ms > 0 ? lease_ms : XGR_STORE_LEASE_MS;
  channel_of(node, c->chan);
  pthread_mutex_init(&c->mu, NULL);
  pthread_mutex_init(&c->hmu, NULL);
  for (int i = 0; i < 64; i++) pthread_mutex_init(&c->cmu[i], NULL);
  pg_lease_sql(c);
  if (!(c->c = connect_plain(c, "lease", err)) || !(c->l = connect_plain(c, "listen", err))) goto fail;
  /* the node lock: a process that died released it with its connection; a live one keeps it */
  bool got = false;
  for (int i = 0; i < 50 && !got; i++) {
    if (take_lock(c, &got, err)) goto fail;
    if (!got) nanosleep(&(struct timespec){0, 100000000}, NULL);
  }
  if (!got) {
    xgr_error_set(err, XGR_ESTATE, "nodeId", "node id \"%s\" is in use by a live xgrd on store %s (waited 5 s); give "
                  "each node its own --node-id", node, c->name);
    goto fail;
  }
  if (listen_ready(c, err)) goto fail;
  return c;
fail:
  xgr__pgc_close(c);
  return NULL;
}

void xgr__pgc_close(pgc *c) {
  if (!c) return;
  if (c->c) PQfinish(c->c);
  if (c->l) PQfinish(c->l);
  size_t pos = 0;
  for (held *h; (h = xgr__hashmap_next(&c->held, &pos, NULL));) free(h);
  xgr__hashmap_free(&c->held);
  pos = 0;
  for (void *o; (o = xgr__hashmap_next(&c->orphans, &pos, NULL));) free(o);   /* orphan * (renew) */
  xgr__hashmap_free(&c->orphans);
  pthread_mutex_destroy(&c->mu);
  pthread_mutex_destroy(&c->hmu);
  for (int i = 0; i < 64; i++) pthread_mutex_destroy(&c->cmu[i]);
  free(c->url);
  free(c->name);
  free(c->node);
  free(c->sql_claim);
  free(c->sql_current);
  free(c->sql_give_up);
  free(c->sql_release_all);
  free(c);
}

/* How long the server lets a node's writer sit idle inside a transaction: a node stalled there
 * (paused, swapped out) keeps the rows its fence locked, which claims skip, so its sessions could
 * not move until it went on. After this the server ends the connection, the locks go and the
 * other nodes claim the sessions; when the stalled node resumes, its writer connects again and
 * tries the group once more (nothing of it was committed), and the fence refuses the batches of
 * the sessions it lost (postgres_write.c, writer_ready).
 * A working writer is never idle in a transaction for more than the moments between its
 * statements. */
static int64_t idle_tx_ms(int64_t lease_ms) { return 3 * lease_ms > 5000 ? 3 * lease_ms : 5000; }

int xgr__pgc_setup_writer(pgc *c, PGconn *w, xgr_error *err) {
  char ms[24], idle[24];
  snprintf(ms, sizeof ms, "%" PRId64, c->lease_ms);
  snprintf(idle, sizeof idle, "%" PRId64, idle_tx_ms(c->lease_ms));
  const char *v[3] = {c->node, ms, idle};
  PGresult *r = PQexecParams(w, "SELECT set_config('xgr.node', $1, false), set_config('xgr.lease_ms', $2, false),"
                                " set_config('idle_in_transaction_session_timeout', $3, false)", 3,
                             NULL, v, NULL, NULL, 0);
  int rc = PQresultStatus(r) == PGRES_TUPLES_OK ? 0 : pq_error(c, w, r, "cannot set the node on the writer", err);
  PQclear(r);
  return rc;
}

/* ---- the writer's side: refusals, fence, bookkeeping ---------------------------------------------- */

/* Does op name a session (its owner and root)? */
static bool op_session(const store_op *op, const char **owner, uint64_t *root) {
  switch (op->kind) {
    case OP_SESSION:
    case OP_STATE:
    case OP_PROC:
    case OP_HIST:
    case OP_SCOPE:
    case OP_REMOVE:
    case OP_AUDIT:
    case OP_PIN:
      if (op->kind == OP_AUDIT && op->unfenced) return false;   /* a grant's entry: not the engine's state */
      *owner = op->owner ? op->owner : "";
      *root = op->root;
      return true;
    default:
      return false;
  }
}

/* Does batch b create (owner, root)? */
static bool creates(const xgr_store_changes *b, const char *owner, uint64_t root) {
  for (size_t k = 0; k < b->n; k++) {
    const store_op *op = &b->ops[k];
    if (op->kind == OP_SESSION && op->if_absent && op->root == root && !strcmp(op->owner, owner)) return true;
  }
  return false;
}

size_t xgr__pgc_prefilter(pgc *c, xgr_store_changes **list, size_t n) {
  size_t keep = 0;
  xgr_store_changes **out = xgr__xmalloc((n ? n : 1) * sizeof *out);
  size_t nout = 0;
  pthread_mutex_lock(&c->hmu);
  for (size_t i = 0; i < n; i++) {
    xgr_store_changes *b = list[i];
    const char *bad = NULL;
    uint64_t bad_root = 0;
    for (size_t k = 0; k < b->n && !bad; k++) {
      const char *owner;
      uint64_t root;
      if (!op_session(&b->ops[k], &owner, &root)) continue;
      if (held_find(c, owner, root) || creates(b, owner, root)) continue;
      bad = owner;
      bad_root = root;
    }
    if (bad) {
      b->rc = xgr_error_set(&b->err, XGR_ELEASE, NULL, "node %s does not hold the lease of session %s/%" PRIu64
                            " (it went to another node); the batch was not written", c->node, bad, bad_root);
      c->st.refused_batches++;
      out[nout++] = b;
    } else {
      list[keep++] = b;
    }
  }
  pthread_mutex_unlock(&c->hmu);
  for (size_t i = 0; i < nout; i++) list[keep + i] = out[i];
  free(out);
  return keep;
}

bool xgr__pgc_fence(pgc *c, xgr_store_changes **list, size_t n, char *arr[4]) {
  xgr_buf o = {0}, r = {0}, e = {0};
  xgr_hashmap seen = {0};   /* keys already in the arrays: hashed, values are the ops */
  size_t count = 0;
  pthread_mutex_lock(&c->hmu);
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < list[i]->n; k++) {
      const char *owner;
      uint64_t root;
      if (!op_session(&list[i]->ops[k], &owner, &root)) continue;
      key_ref kr = {owner, root};
      uint64_t h = key_hash(owner, root);
      if (xgr__hashmap_find(&seen, h, held_match, &kr)) continue;
      held *x = held_find(c, owner, root);
      bool fresh = false;   /* created in this group: no row to check yet */
      for (size_t j = 0; j < n && !fresh; j++) fresh = creates(list[j], owner, root);
      if (fresh) continue;
      /* not held: forgotten since the prefilter (the heartbeat found it lost): epoch -1 never
       * matches, so the fence refuses the write instead of letting it through unchecked */
      size_t len = strlen(owner);
      held *sk = xgr__xmalloc(sizeof *sk + len + 1);
      sk->root = root;
      sk->epoch = x ? x->epoch : -1;
      memcpy(sk->owner, owner, len + 1);
      xgr__hashmap_add(&seen, h, sk);
      arr_text(&o, owner);
      arr_num(&r, "%" PRIu64, root, 0, false);
      arr_num(&e, NULL, 0, sk->epoch, true);
      count++;
    }
  pthread_mutex_unlock(&c->hmu);
  size_t pos = 0;
  for (held *sk; (sk = xgr__hashmap_next(&seen, &pos, NULL));) free(sk);
  xgr__hashmap_free(&seen);
  if (!count) {
    free(xgr__buf_finish(&o, NULL));
    free(xgr__buf_finish(&r, NULL));
    free(xgr__buf_finish(&e, NULL));
    return false;
  }
  arr[0] = arr_finish(&o);
  arr[1] = arr_finish(&r);
  arr[2] = arr_finish(&e);
  arr[3] = xgr__xstrdup(c->node);
  return true;
}

void xgr__pgc_after(pgc *c, xgr_store_changes **list, size_t n) {
  pthread_mutex_lock(&c->hmu);
  for (size_t i = 0; i < n; i++) {
    xgr_store_changes *b = list[i];
    if (b->rc == XGR_ELEASE) {   /* the fence refused it (the prefilter counted its own) */
      if (!strstr(b->err.message, "does not hold the lease")) c->st.refused_batches++;
      for (size_t k = 0; k < b->n; k++) {
        const char *owner;
        uint64_t root;
        if (op_session(&b->ops[k], &owner, &root)) held_del(c, owner, root);
      }
      continue;
    }
    if (b->rc) continue;
    for (size_t k = 0; k < b->n; k++) {
      const store_op *op = &b->ops[k];
      if (op->kind == OP_SESSION && op->if_absent && op->u.session.status == XGR_RESULT_RUNNING)
        held_put(c, op->owner, op->root, 1);   /* the row's defaults: this node, epoch 1 */
      else if ((op->kind == OP_STATE && op->u.state.status != XGR_RESULT_RUNNING) || op->kind == OP_REMOVE)
        held_del(c, op->owner, op->root);      /* ended: no lease needed any more */
    }
  }
  pthread_mutex_unlock(&c->hmu);
}

/* ---- the public cluster functions (xgr/store.h) --------------------------------------------------- */

static pgc *cl_of(xgr_store *st, xgr_error *err) {
  pgc *c = xgr__pg_cluster(st);
  if (!c) xgr_error_set(err, XGR_EUNSUPPORTED, NULL, "the store is not a cluster node (PostgreSQL with a node id)");
  return c;
}

const char *xgr_store_node_id(const xgr_store *st) {
  pgc *c = xgr__pg_cluster((xgr_store *)st);
  return c ? c->node : NULL;
}

int64_t xgr_store_lease_ms(const xgr_store *st) {
  pgc *c = xgr__pg_cluster((xgr_store *)st);
  return c ? c->lease_ms : 0;
}

/* The sessions a claim may take. $1 node, $2 limit, $3 lease ms, $4 own ('t'/'f'), $5/$6 one
 * session (NULL: any), $7 how long (ms) a row released by rebalancing is left to others. A lease
 * is free when the row has no owner (released at least $7 ago), when its time ran out — the row's
 * own lease_expires (set by the claim or insert) and its node's lease (nodes.expires_at, which
 * the node's heartbeat extends for all its rows at once; `lapsed`: the nodes whose lease ran
 * out) — or when its node is dead (no advisory lock: the process is gone). Claim rounds run every
 * second on every node and mostly find nothing, so the statement is built to cost little then:
 *   o     the nodes named by running rows, by a skip scan of sessions_lease (one index probe each);
 *   dead  those of them without their node lock, each asked once (asking per row, as the first
 *         version did, read pg_locks ~40 µs a row: 0.74 s per claim with 17,000 leased sessions);
 *   free  whether anything at all is free: a dead node, the oldest unleased row, or for each node
 *         its earliest lease expiry (min() of sessions_lease per node: an index probe) — only then
 *         does `c` walk the running rows in key order (~0.5 µs a row). With 200,000 sessions
 *         leased to a live node a round costs ~0.3–0.9 ms instead of ~90 ms.
 * `free` is only a gate: any row c would take makes one of its tests true (its clock is read
 * first). */
static const char CLAIM_CTE[] =
    "WITH RECURSIVE o AS ((SELECT lease_owner FROM sessions WHERE status = 0 AND lease_owner IS NOT NULL"
    "   ORDER BY lease_owner LIMIT 1) UNION ALL SELECT (SELECT s.lease_owner FROM sessions s WHERE s.status = 0"
    "   AND s.lease_owner > o.lease_owner ORDER BY s.lease_owner LIMIT 1) FROM o WHERE o.lease_owner IS NOT NULL),"
    " dead AS MATERIALIZED (SELECT lease_owner FROM o WHERE lease_owner IS NOT NULL AND lease_owner <> $1"
    "   AND NOT xgr_node_alive(lease_owner)),"
    " t AS MATERIALIZED (SELECT xgr_ms_now() AS now),"
    " lapsed AS MATERIALIZED (SELECT lease_owner FROM o WHERE lease_owner IS NOT NULL AND lease_owner <> $1 AND NOT EXISTS"
    "   (SELECT 1 FROM nodes n WHERE n.node = o.lease_owner AND n.expires_at >= (SELECT now FROM t))),"
    " free AS MATERIALIZED (SELECT $5::text IS NOT NULL OR EXISTS (SELECT 1 FROM dead)"
    "   OR (SELECT min(lease_expires) FROM sessions WHERE status = 0 AND lease_owner IS NULL) <= (SELECT now FROM t) - $7::bigint"
    "   OR ($4::boolean AND EXISTS (SELECT 1 FROM sessions WHERE status = 0 AND lease_owner = $1))"
    "   OR EXISTS (SELECT 1 FROM lapsed l WHERE (SELECT min(x.lease_expires) FROM sessions x WHERE x.status = 0"
    "   AND x.lease_owner = l.lease_owner) < (SELECT now FROM t)) AS any_free),"
    " c AS (SELECT owner, root_pid FROM sessions WHERE (SELECT any_free FROM free) AND status = 0"
    "   AND ($5::text IS NULL OR (owner = $5 AND root_pid = $6::numeric))"
    "   AND ((lease_owner IS NULL AND lease_expires <= xgr_ms_now() - $7::bigint) OR ($4::boolean AND lease_owner = $1)"
    "   OR (lease_owner <> $1 AND ((lease_expires < xgr_ms_now() AND lease_owner IN (SELECT lease_owner FROM lapsed))"
    "   OR lease_owner IN (SELECT lease_owner FROM dead))))"
    "   ORDER BY owner, root_pid LIMIT $2 FOR UPDATE OF sessions SKIP LOCKED)";

/* A session's lease (a fenced lease, xgr/store.h): its row of sessions. */
static const xgr_store_fenced_lease SESSION_LEASE = {"sessions", "s", "lease_owner", "lease_epoch", "lease_expires"};

/* The statements of the sessions' leases, made once per node:
 *   claim     CLAIM_CTE chooses the free rows (c); they are taken ($1 node, $3 lease ms)
 *   current   does (owner $1, rootPid $2) still name node $3 at epoch $4 (xgr_store_lease_current)
 *   give_up   release the rows of the arrays $1-$3 (owners, rootPids, epochs) still naming node $4
 *             at their epoch (the heartbeat's orphans), holder cleared, expiry 0
 *   release_all  every running row of node $1, at any epoch, and the node's row in nodes */
static void pg_lease_sql(pgc *c) {
  char *take = xgr_store_fenced_sql(&SESSION_LEASE, XGR_STORE_FENCED_TAKE, &(xgr_store_fenced_stmt){
      .from = "c", .key = "s.owner = c.owner AND s.root_pid = c.root_pid", .chosen = true, .node = "$1",
      .ms = "$3::bigint", .returning = "s.owner, s.root_pid, s.lease_epoch, COALESCE(s.wake_due, 0)"});
  xgr_buf b = {0};
  xgr__buf_printf(&b, "%s %s", CLAIM_CTE, take);
  free(take);
  c->sql_claim = xgr__buf_finish(&b, NULL);
  c->sql_current = xgr_store_fenced_sql(&SESSION_LEASE, XGR_STORE_FENCED_CHECK, &(xgr_store_fenced_stmt){
      .key = "s.owner = $1 AND s.root_pid = $2::numeric AND s.status = 0", .node = "$3", .epoch = "$4::bigint"});
  c->sql_give_up = xgr_store_fenced_sql(&SESSION_LEASE, XGR_STORE_FENCED_RELEASE, &(xgr_store_fenced_stmt){
      .from = "unnest($1::text[], $2::numeric[], $3::bigint[]) AS u(owner, root_pid, epoch)",
      .key = "s.owner = u.owner AND s.root_pid = u.root_pid AND s.status = 0", .node = "$4", .epoch = "u.epoch",
      .clear = true});
  char *rel = xgr_store_fenced_sql(&SESSION_LEASE, XGR_STORE_FENCED_RELEASE,
                                   &(xgr_store_fenced_stmt){.key = "s.status = 0", .node = "$1", .clear = true});
  b = (xgr_buf){0};
  xgr__buf_printf(&b, "WITH n AS (DELETE FROM nodes WHERE node = $1) %s", rel);
  free(rel);
  c->sql_release_all = xgr__buf_finish(&b, NULL);
}

/* What a claim took, handed to each session's load (claim_load). */
typedef struct claim_ctx {
  pgc *c;
  PGresult *r;                  /* the claimed rows: owner, root_pid, lease_epoch */
  bool (*before)(void *, const char *, uint64_t);
  int (*fn)(void *, const xgr_store_live *);
  void *ctx;
} claim_ctx;

/* Take a session this node just claimed at epoch: drop an older incarnation here (before), hold
 * it at epoch and, with fn, load it — unless a later claim of the same session on this node got
 * there first (two claims race here: a claim round and a load on another thread). That later
 * claim's epoch is the row's, and its rows were read after this one's: this claim is stale and
 * must do nothing, neither drop the incarnation the later one started nor start one from its own
 * older rows (which would run again what the later one committed, under the later epoch the
 * fence now accepts). The stripe lock makes check, drop, hold and load one step per session.
 * Returns fn's result (0 when skipped). */
static int take_claimed(pgc *c, const char *owner, uint64_t root, int64_t epoch,
                        bool (*before)(void *, const char *, uint64_t), int (*fn)(void *, const xgr_store_live *),
                        void *ctx, const xgr_store_live *l) {
  pthread_mutex_t *m = &c->cmu[key_hash(owner, root) >> 58];
  pthread_mutex_lock(m);
  pthread_mutex_lock(&c->hmu);
  held *h = held_find(c, owner, root);
  bool stale = h && h->epoch > epoch;
  if (stale) c->st.stale_claims++;
  pthread_mutex_unlock(&c->hmu);
  int rc = 0;
  /* an older incarnation here leaves first; one that would not is not given the new epoch (it
   * would pass the fence): the row is left as an orphan for the heartbeat */
  if (!stale && (!before || before(ctx, owner, root))) {
    pthread_mutex_lock(&c->hmu);
    held_put(c, owner, root, epoch);
    pthread_mutex_unlock(&c->hmu);
    if (fn) rc = fn(ctx, l);
  }
  pthread_mutex_unlock(m);
  return rc;
}

static int claim_load(void *ctx, const xgr_store_live *l) {
  claim_ctx *cc = ctx;
  const xgr_store_session *s = l->session;
  int64_t epoch = -1;
  for (int i = 0; i < PQntuples(cc->r) && epoch < 0; i++)
    if (strtoull(PQgetvalue(cc->r, i, 1), NULL, 10) == s->root_pid && !strcmp(PQgetvalue(cc->r, i, 0), s->owner))
      epoch = strtoll(PQgetvalue(cc->r, i, 2), NULL, 10);
  if (epoch < 0) return 0;
  return take_claimed(cc->c, s->owner, s->root_pid, epoch, cc->before, cc->fn, cc->ctx, l);
}

/* Claim (xgr_store_lease_claim); with bound set, the sessions hibernated beyond bound(ctx) (read
 * after the claim committed) are held without being loaded (xgr_store_lease_claim_lazy). */
static int claim(xgr_store *st, const char *owner, uint64_t root_pid, bool own, size_t max,
                 int64_t (*bound)(void *ctx), bool (*before)(void *ctx, const char *owner, uint64_t root_pid),
                 int (*fn)(void *ctx, const xgr_store_live *l), void *ctx, size_t *claimed, size_t *loaded,
                 xgr_error *err) {
  if (claimed) *claimed = 0;
  if (loaded) *loaded = 0;
  pgc *c = cl_of(st, err);
  if (!c) return XGR_EUNSUPPORTED;
  char lim[24], ms[24], rt[24];
  snprintf(lim, sizeof lim, "%zu", max ? max : 256);
  snprintf(ms, sizeof ms, "%" PRId64, c->lease_ms);
  snprintf(rt, sizeof rt, "%" PRIu64, root_pid);
  /* a claim round of a node that holds its share leaves freshly released rows (a rebalancing node
   * released them at their lease_expires) to the nodes below it for one lease; a claim of one
   * session (a call or a load here) takes it at once */
  pthread_mutex_lock(&c->hmu);
  bool wait_released = c->full && !owner;
  pthread_mutex_unlock(&c->hmu);
  const char *v[7] = {c->node, lim, ms, own ? "t" : "f", owner, owner ? rt : NULL, wait_released ? ms : "0"};
  PGresult *r = run_locked(c, c->sql_claim, 7, v, "cannot claim sessions", err);
  if (!r) return XGR_EIO;
  int nr = PQntuples(r);
  /* committed: a due poller that runs from now on sees these rows as this node's; the bound is
   * read now, so whatever a poll that ran before may have missed (due by its horizon, which the
   * bound is not below) is loaded here */
  int64_t b = bound && nr ? bound(ctx) : INT64_MAX;
  xgr_buf o = {0}, k = {0};
  size_t nload = 0;
  for (int i = 0; i < nr; i++) {
    const char *ow = PQgetvalue(r, i, 0);
    uint64_t rp = strtoull(PQgetvalue(r, i, 1), NULL, 10);
    int64_t due = strtoll(PQgetvalue(r, i, 3), NULL, 10);
    if (due == 0 || due <= b) {   /* awake, or due soon: loaded below */
      arr_text(&o, ow);
      arr_num(&k, "%" PRIu64, rp, 0, false);
      nload++;
      continue;
    }
    /* hibernated: held at the new epoch (an older incarnation here leaves first), left in the
     * store for the due poller or a call */
    take_claimed(c, ow, rp, strtoll(PQgetvalue(r, i, 2), NULL, 10), before, NULL, ctx, NULL);
  }
  pthread_mutex_lock(&c->hmu);
  c->st.claimed += (uint64_t)nr;
  c->st.claimed_hibernated += (uint64_t)nr - nload;
  pthread_mutex_unlock(&c->hmu);
  char *oa = arr_finish(&o), *ka = arr_finish(&k);
  int rc = 0;
  claim_ctx cc = {c, r, before, fn, ctx};
  if (nload) rc = xgr__pg_load_keys(st, oa, ka, claim_load, &cc, err);
  free(oa);
  free(ka);
  PQclear(r);
  if (claimed) *claimed = (size_t)nr;
  if (loaded) *loaded = nload;
  return rc;
}

int xgr_store_lease_claim(xgr_store *st, const char *owner, uint64_t root_pid, bool own, size_t max,
                          bool (*before)(void *ctx, const char *owner, uint64_t root_pid),
                          int (*fn)(void *ctx, const xgr_store_live *l), void *ctx, size_t *claimed, xgr_error *err) {
  return claim(st, owner, root_pid, own, max, NULL, before, fn, ctx, claimed, NULL, err);
}

int xgr_store_lease_claim_lazy(xgr_store *st, const char *owner, uint64_t root_pid, bool own, size_t max,
                               int64_t (*bound)(void *ctx), bool (*before)(void *ctx, const char *owner, uint64_t root_pid),
                               int (*fn)(void *ctx, const xgr_store_live *l), void *ctx, size_t *claimed,
                               size_t *loaded, xgr_error *err) {
  return claim(st, owner, root_pid, own, max, bound, before, fn, ctx, claimed, loaded, err);
}

/* The due index of this node's rows: as pg_due (postgres.c), on the lease connection, restricted
 * to lease_owner = this node. A cursor whose owner starts with 0xff is past every owner of its due
 * time (xgr_engine_hibernation_start). */
int xgr_store_lease_due(xgr_store *st, const xgr_store_due_key *after, int64_t upto, xgr_store_due_key *out,
                        size_t max, size_t *n, xgr_error *err) {
  *n = 0;
  pgc *c = cl_of(st, err);
  if (!c) return XGR_EUNSUPPORTED;
  bool past_all = after && (unsigned char)after->owner[0] == 0xff;
  char a[24], u[24], m[24], rt[24];
  snprintf(a, sizeof a, "%" PRId64, after ? after->due : INT64_MIN);
  snprintf(u, sizeof u, "%" PRId64, upto);
  snprintf(m, sizeof m, "%zu", max);
  snprintf(rt, sizeof rt, "%" PRIu64, after ? after->root_pid : 0);
  const char *v[6] = {a, u, m, c->node, past_all || !after ? "" : after->owner, rt};
  const char *sql = past_all
      ? "SELECT wake_due, owner, root_pid FROM sessions WHERE status = 0 AND wake_due IS NOT NULL"
        " AND wake_due > $1::bigint AND wake_due <= $2::bigint AND lease_owner = $4"
        " ORDER BY wake_due, owner, root_pid LIMIT $3::bigint"
      : "SELECT wake_due, owner, root_pid FROM sessions WHERE status = 0 AND wake_due IS NOT NULL"
        " AND (wake_due, owner, root_pid) > ($1::bigint, $5::text COLLATE \"C\", $6::numeric)"
        " AND wake_due <= $2::bigint AND lease_owner = $4 ORDER BY wake_due, owner, root_pid LIMIT $3::bigint";
  PGresult *r = run_locked(c, sql, past_all ? 4 : 6, v, "cannot read the due index", err);
  if (!r) return XGR_EIO;
  for (int i = 0; i < PQntuples(r) && *n < max; i++) {
    xgr_store_due_key *k = &out[(*n)++];
    k->due = strtoll(PQgetvalue(r, i, 0), NULL, 10);
    snprintf(k->owner, sizeof k->owner, "%s", PQgetvalue(r, i, 1));
    k->root_pid = strtoull(PQgetvalue(r, i, 2), NULL, 10);
  }
  PQclear(r);
  return 0;
}

/* A row naming this node at epoch that the node does not hold, and how many heartbeats in a row
 * saw it so. Such a row is renewed by every heartbeat (they extend what names the node) but runs
 * nowhere: nobody else may claim it while its lease is valid, and this node neither loads nor polls
 * what it does not hold. It comes from a claim whose load failed or was abandoned, or a lease the
 * heartbeat judged lost while the row named this node again. Seen so by ORPHAN_BEATS heartbeats in
 * a row at one epoch (a claim or a create in progress holds its row within milliseconds), the
 * lease is given up, and the next claim round — here or elsewhere — takes the session as any free
 * one. Fencing keeps that safe even if this node still had an incarnation of it: a claim raises
 * the epoch. */
typedef struct orphan {
  uint64_t root;
  int64_t epoch;
  int beats;
  char owner[];
} orphan;
#define ORPHAN_BEATS 3

static bool orphan_match(const void *ctx, const void *val) {
  const orphan *a = ctx, *b = val;
  return a->root == b->root && a->epoch == b->epoch && !strcmp(a->owner, b->owner);
}

/* A row the heartbeat read. */
typedef struct rowk {
  uint64_t root;
  int64_t epoch;
  const char *owner;
} rowk;

static bool row_match(const void *ctx, const void *val) {
  const rowk *a = ctx, *b = val;
  return a->root == b->root && a->epoch == b->epoch && !strcmp(a->owner, b->owner);
}

static bool row_key_match(const void *ctx, const void *val) {
  const rowk *a = ctx, *b = val;
  return a->root == b->root && !strcmp(a->owner, b->owner);
}

int xgr_store_lease_renew(xgr_store *st, void (*lost)(void *ctx, const char *owner, uint64_t root_pid), void *ctx,
                          xgr_error *err) {
  pgc *c = cl_of(st, err);
  if (!c) return XGR_EUNSUPPORTED;
  char ms[24];
  snprintf(ms, sizeof ms, "%" PRId64, c->lease_ms);
  const char *v[2] = {c->node, ms};
  pthread_mutex_lock(&c->mu);
  /* the node's row in `nodes` extends all its leases at once: a row per session would be a write
   * per session and beat (the first version's; 60,000 row updates a second for a node holding
   * 200,000 hibernated sessions at the default lease) */
  PGresult *r = run(c, "INSERT INTO nodes VALUES($1, xgr_ms_now(), xgr_ms_now() + $2::bigint) ON CONFLICT (node) DO UPDATE"
                       " SET seen_at = EXCLUDED.seen_at, expires_at = EXCLUDED.expires_at", 2, v, "heartbeat", err);
  if (!r) {
    pthread_mutex_unlock(&c->mu);
    return XGR_EIO;
  }
  PQclear(r);
  /* which held sessions the rows still give this node at the held epoch: what was held before
   * the read is compared (a session created meanwhile is held after its row committed) */
  pthread_mutex_lock(&c->hmu);
  size_t nh = xgr__hashmap_size(&c->held), pos = 0, i = 0;
  held **snap = xgr__xmalloc((nh ? nh : 1) * sizeof *snap);
  int64_t *ep = xgr__xmalloc((nh ? nh : 1) * sizeof *ep);
  for (held *h; (h = xgr__hashmap_next(&c->held, &pos, NULL));) {
    size_t len = strlen(h->owner);
    snap[i] = xgr__xmalloc(sizeof **snap + len + 1);
    memcpy(snap[i], h, sizeof **snap + len + 1);
    ep[i++] = h->epoch;
  }
  pthread_mutex_unlock(&c->hmu);
  r = run(c, "SELECT owner, root_pid, lease_epoch FROM sessions WHERE lease_owner = $1 AND status = 0", 1, v,
          "heartbeat", err);
  pthread_mutex_unlock(&c->mu);
  if (!r) {
    for (size_t j = 0; j < nh; j++) free(snap[j]);
    free(snap);
    free(ep);
    return XGR_EIO;
  }
  xgr_hashmap rows = {0};   /* the rows read, hashed by key */
  int nr = PQntuples(r);
  rowk *rk = xgr__xcalloc((size_t)nr + 1, sizeof *rk);
  for (int j = 0; j < nr; j++) {
    rk[j].owner = PQgetvalue(r, j, 0);
    rk[j].root = strtoull(PQgetvalue(r, j, 1), NULL, 10);
    rk[j].epoch = strtoll(PQgetvalue(r, j, 2), NULL, 10);
    xgr__hashmap_add(&rows, key_hash(rk[j].owner, rk[j].root), &rk[j]);
  }
  /* rows naming this node that it does not hold (checked now, after the read): orphans */
  xgr_buf go = {0}, gr = {0}, ge = {0};
  size_t ngive = 0;
  pthread_mutex_lock(&c->hmu);
  xgr_hashmap seen = {0};
  for (int j = 0; j < nr; j++) {
    if (held_find(c, rk[j].owner, rk[j].root)) continue;
    size_t len = strlen(rk[j].owner);
    orphan *o = xgr__xmalloc(sizeof *o + len + 1);
    o->root = rk[j].root;
    o->epoch = rk[j].epoch;
    memcpy(o->owner, rk[j].owner, len + 1);
    uint64_t hh = key_hash(o->owner, o->root);
    orphan *prev = xgr__hashmap_find(&c->orphans, hh, orphan_match, o);
    o->beats = prev ? prev->beats + 1 : 1;
    if (o->beats >= ORPHAN_BEATS) {
      arr_text(&go, o->owner);
      arr_num(&gr, "%" PRIu64, o->root, 0, false);
      arr_num(&ge, NULL, 0, o->epoch, true);
      ngive++;
      free(o);
      continue;
    }
    xgr__hashmap_add(&seen, hh, o);
  }
  size_t opos = 0;
  for (orphan *o; (o = xgr__hashmap_next(&c->orphans, &opos, NULL));) free(o);
  xgr__hashmap_free(&c->orphans);
  c->orphans = seen;
  pthread_mutex_unlock(&c->hmu);
  char *goa = arr_finish(&go), *gra = arr_finish(&gr), *gea = arr_finish(&ge);
  if (ngive) {   /* only at the epoch seen: a claim since then is left alone */
    const char *w[4] = {goa, gra, gea, c->node};
    PGresult *rg = run_locked(c, c->sql_give_up, 4, w, "heartbeat", err);
    if (rg) {
      pthread_mutex_lock(&c->hmu);
      c->st.orphans_released += strtoull(PQcmdTuples(rg), NULL, 10);
      pthread_mutex_unlock(&c->hmu);
    }
    PQclear(rg);
  }
  free(goa);
  free(gra);
  free(gea);
  /* the held sessions the read did not return: ended (forgotten quietly) or lost */
  xgr_buf mo = {0}, mr = {0};
  size_t nmiss = 0;
  for (size_t j = 0; j < nh; j++) {
    rowk want = {snap[j]->root, ep[j], snap[j]->owner};
    if (xgr__hashmap_find(&rows, key_hash(want.owner, want.root), row_match, &want)) {   /* still ours */
      free(snap[j]);
      snap[j] = NULL;
      continue;
    }
    arr_text(&mo, snap[j]->owner);
    arr_num(&mr, "%" PRIu64, snap[j]->root, 0, false);
    nmiss++;
  }
  xgr_hashmap ended = {0};   /* of the missing: the ones whose row is no longer running */
  PGresult *re = NULL;
  char *moa = arr_finish(&mo), *mra = arr_finish(&mr);
  if (nmiss) {
    const char *w[2] = {moa, mra};
    re = run_locked(c, "SELECT s.owner, s.root_pid FROM sessions s JOIN unnest($1::text[], $2::numeric[]) AS u(owner, root_pid)"
                       " ON s.owner = u.owner AND s.root_pid = u.root_pid WHERE s.status <> 0", 2, w, "heartbeat", err);
    for (int q = 0; re && q < PQntuples(re); q++) {
      rowk *k = xgr__xmalloc(sizeof *k);
      *k = (rowk){strtoull(PQgetvalue(re, q, 1), NULL, 10), 0, PQgetvalue(re, q, 0)};
      xgr__hashmap_add(&ended, key_hash(k->owner, k->root), k);
    }
  }
  free(moa);
  free(mra);
  for (size_t j = 0; j < nh; j++) {
    if (!snap[j]) continue;
    rowk want = {snap[j]->root, 0, snap[j]->owner};
    bool over = xgr__hashmap_find(&ended, key_hash(want.owner, want.root), row_key_match, &want) != NULL;
    pthread_mutex_lock(&c->hmu);
    if (over) {   /* it ended (its last batch committed meanwhile): not a lost lease */
      held *x = held_find(c, snap[j]->owner, snap[j]->root);
      if (x && x->epoch == ep[j]) held_del(c, snap[j]->owner, snap[j]->root);
      pthread_mutex_unlock(&c->hmu);
      continue;
    }
    held *x = held_find(c, snap[j]->owner, snap[j]->root);
    bool gone = x && x->epoch == ep[j];   /* not re-claimed meanwhile */
    if (gone) {
      held_del(c, snap[j]->owner, snap[j]->root);
      c->st.lost++;
    }
    pthread_mutex_unlock(&c->hmu);
    if (gone && lost) lost(ctx, snap[j]->owner, snap[j]->root);
  }
  size_t pos2 = 0;
  for (rowk *k; (k = xgr__hashmap_next(&ended, &pos2, NULL));) free(k);
  xgr__hashmap_free(&ended);
  PQclear(re);
  xgr__hashmap_free(&rows);
  free(rk);
  PQclear(r);
  for (size_t j = 0; j < nh; j++) free(snap[j]);
  free(snap);
  free(ep);
  pthread_mutex_lock(&c->hmu);
  c->st.renewals++;
  pthread_mutex_unlock(&c->hmu);
  return 0;
}

/* ---- rebalancing ------------------------------------------------------------------------------- */

/* Nodes seen by a heartbeat within this many leases and alive count as the cluster's; rows of
 * nodes not seen for a day are deleted by the next balance. */
#define NODE_SEEN_LEASES 3
#define NODE_FORGET_MS 86400000

int xgr_store_lease_balance(xgr_store *st, int64_t after, size_t max,
                            bool (*busy)(void *ctx, const char *owner, uint64_t root_pid), void *ctx, size_t *released,
                            xgr_error *err) {
  *released = 0;
  pgc *c = cl_of(st, err);
  if (!c) return XGR_EUNSUPPORTED;
  char seen[24], forget[24];
  snprintf(seen, sizeof seen, "%" PRId64, NODE_SEEN_LEASES * c->lease_ms);
  snprintf(forget, sizeof forget, "%d", NODE_FORGET_MS);
  const char *v[3] = {c->node, seen, forget};
  PGresult *r = run_locked(c, "WITH g AS (DELETE FROM nodes WHERE seen_at < xgr_ms_now() - $3::bigint)"
                              " SELECT (SELECT count(*) FROM sessions WHERE status = 0),"
                              " (SELECT count(*) FROM nodes WHERE node = $1 OR (seen_at > xgr_ms_now() - $2::bigint AND"
                              " xgr_node_alive(node)))",
                           3, v, "cannot count the cluster's sessions", err);
  if (!r) return XGR_EIO;
  uint64_t total = strtoull(PQgetvalue(r, 0, 0), NULL, 10), nodes = strtoull(PQgetvalue(r, 0, 1), NULL, 10);
  PQclear(r);
  if (nodes < 1) nodes = 1;   /* this node's own row may not be written yet */
  uint64_t share = (total + nodes - 1) / nodes, slack = share / 10 > 8 ? share / 10 : 8;
  pthread_mutex_lock(&c->hmu);
  uint64_t mine = xgr__hashmap_size(&c->held);   /* what it holds, loaded or not */
  c->full = mine >= share;
  c->st.nodes = nodes;
  c->st.share = share;
  pthread_mutex_unlock(&c->hmu);
  if (nodes < 2 || mine <= share + slack || !max) return 0;
  uint64_t want = mine - share < max ? mine - share : max;
  /* the hibernated sessions this node holds that sleep longest, beyond `after` */
  char af[24], lim[24];
  snprintf(af, sizeof af, "%" PRId64, after);
  snprintf(lim, sizeof lim, "%" PRIu64, 2 * want);
  const char *w[3] = {c->node, af, lim};
  r = run_locked(c, "SELECT owner, root_pid, lease_epoch FROM sessions WHERE status = 0 AND lease_owner = $1 AND"
                    " wake_due > $2::bigint ORDER BY wake_due DESC LIMIT $3::bigint", 3, w,
                 "cannot read the sessions to hand over", err);
  if (!r) return XGR_EIO;
  xgr_buf o = {0}, k = {0}, e = {0};
  size_t n = 0;
  for (int i = 0; i < PQntuples(r) && n < want; i++) {
    const char *ow = PQgetvalue(r, i, 0);
    uint64_t rp = strtoull(PQgetvalue(r, i, 1), NULL, 10);
    int64_t ep = strtoll(PQgetvalue(r, i, 2), NULL, 10);
    pthread_mutex_lock(&c->hmu);
    held *h = held_find(c, ow, rp);
    bool ours = h && h->epoch == ep;
    pthread_mutex_unlock(&c->hmu);
    if (!ours || (busy && busy(ctx, ow, rp))) continue;   /* being claimed or loaded here, or in memory */
    arr_text(&o, ow);
    arr_num(&k, "%" PRIu64, rp, 0, false);
    arr_num(&e, NULL, 0, ep, true);
    n++;
  }
  PQclear(r);
  char *oa = arr_finish(&o), *ka = arr_finish(&k), *ea = arr_finish(&e);
  int rc = 0;
  if (n) {
    /* released at their lease_expires = now, at the epoch read, only while still hibernated that
     * far; rows a fence or a claim locks right now stay (no waiting, no lock-order deadlock) */
    const char *x[5] = {oa, ka, ea, c->node, af};
    r = run_locked(c, "UPDATE sessions s SET lease_owner = NULL, lease_expires = xgr_ms_now() FROM (SELECT q.owner,"
                      " q.root_pid FROM sessions q JOIN unnest($1::text[], $2::numeric[], $3::bigint[]) AS u(owner, root_pid,"
                      " epoch) ON q.owner = u.owner AND q.root_pid = u.root_pid AND q.lease_epoch = u.epoch WHERE"
                      " q.lease_owner = $4 AND q.status = 0 AND q.wake_due > $5::bigint FOR UPDATE OF q SKIP LOCKED) y"
                      " WHERE s.owner = y.owner AND s.root_pid = y.root_pid RETURNING s.owner, s.root_pid, s.lease_epoch",
                   5, x, "cannot hand sessions over", err);
    if (!r) rc = XGR_EIO;
    for (int i = 0; r && i < PQntuples(r); i++) {
      const char *ow = PQgetvalue(r, i, 0);
      uint64_t rp = strtoull(PQgetvalue(r, i, 1), NULL, 10);
      int64_t ep = strtoll(PQgetvalue(r, i, 2), NULL, 10);
      /* forgotten here unless a claim here took it again meanwhile (a later epoch) */
      pthread_mutex_t *m = &c->cmu[key_hash(ow, rp) >> 58];
      pthread_mutex_lock(m);
      pthread_mutex_lock(&c->hmu);
      held *h = held_find(c, ow, rp);
      if (h && h->epoch == ep) held_del(c, ow, rp);
      c->st.handed_over++;
      pthread_mutex_unlock(&c->hmu);
      pthread_mutex_unlock(m);
      (*released)++;
    }
    PQclear(r);
  }
  free(oa);
  free(ka);
  free(ea);
  return rc;
}

int xgr_store_lease_release_all(xgr_store *st, xgr_error *err) {
  pgc *c = cl_of(st, err);
  if (!c) return XGR_EUNSUPPORTED;
  const char *v[1] = {c->node};
  PGresult *r = run_locked(c, c->sql_release_all, 1, v, "cannot release the leases", err);
  if (!r) return XGR_EIO;
  PQclear(r);
  pthread_mutex_lock(&c->hmu);
  size_t pos = 0;
  for (held *h; (h = xgr__hashmap_next(&c->held, &pos, NULL));) free(h);
  xgr__hashmap_clear(&c->held);
  pthread_mutex_unlock(&c->hmu);
  return 0;
}

bool xgr_store_lease_current(xgr_store *st, const char *owner, uint64_t root_pid) {
  pgc *c = xgr__pg_cluster(st);
  if (!c) return false;
  pthread_mutex_lock(&c->hmu);
  held *h = held_find(c, owner, root_pid);
  int64_t epoch = h ? h->epoch : -1;
  pthread_mutex_unlock(&c->hmu);
  if (epoch < 0) return false;
  char rt[24], ep[24];
  snprintf(rt, sizeof rt, "%" PRIu64, root_pid);
  snprintf(ep, sizeof ep, "%" PRId64, epoch);
  const char *v[4] = {owner, rt, c->node, ep};
  xgr_error err;
  PGresult *r = run_locked(c, c->sql_current, 4, v, "cannot read the lease", &err);
  bool cur = r && PQntuples(r) == 1;
  PQclear(r);
  return cur;
}

bool xgr_store_lease_held(xgr_store *st, const char *owner, uint64_t root_pid) {
  pgc *c = xgr__pg_cluster(st);
  if (!c) return false;
  pthread_mutex_lock(&c->hmu);
  bool h = held_find(c, owner, root_pid) != NULL;
  pthread_mutex_unlock(&c->hmu);
  return h;
}

void xgr_store_lease_forget(xgr_store *st, const char *owner, uint64_t root_pid) {
  pgc *c = xgr__pg_cluster(st);
  if (!c) return;
  pthread_mutex_lock(&c->hmu);
  held_del(c, owner, root_pid);
  pthread_mutex_unlock(&c->hmu);
}

int xgr_store_cluster_clock(xgr_store *st, int64_t *ms, uint64_t *rtt_ns, xgr_error *err) {
  pgc *c = cl_of(st, err);
  if (!c) return XGR_EUNSUPPORTED;
  uint64_t t0 = xgr__mono_ns();
  PGresult *r = run_locked(c, "SELECT xgr_ms_now()", 0, NULL, "cannot read the store's clock", err);
  if (!r) return XGR_EIO;
  *rtt_ns = xgr__mono_ns() - t0;
  *ms = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
  PQclear(r);
  return 0;
}

int xgr_store_lease_holder(xgr_store *st, const char *owner, uint64_t root_pid, char *node, size_t n, bool *valid,
                           bool *running, xgr_error *err) {
  pgc *c = cl_of(st, err);
  if (!c) return XGR_EUNSUPPORTED;
  char rt[24];
  snprintf(rt, sizeof rt, "%" PRIu64, root_pid);
  const char *v[3] = {owner, rt, c->node};
  PGresult *r = run_locked(c, "SELECT COALESCE(lease_owner, ''), lease_owner IS NOT NULL AND (lease_expires > xgr_ms_now() OR"
                              " EXISTS (SELECT 1 FROM nodes n WHERE n.node = lease_owner AND n.expires_at >= xgr_ms_now())) AND"
                              " (lease_owner = $3 OR xgr_node_alive(lease_owner)), status = 0 FROM sessions"
                              " WHERE owner = $1 AND root_pid = $2::numeric", 3, v, "cannot read the lease", err);
  if (!r) return XGR_EIO;
  int rc = 0;
  if (PQntuples(r) != 1) {
    rc = xgr_error_set(err, XGR_ENOTFOUND, NULL, "no session %s/%" PRIu64, owner, root_pid);
  } else {
    snprintf(node, n, "%s", PQgetvalue(r, 0, 0));
    *valid = PQgetvalue(r, 0, 1)[0] == 't';
    *running = PQgetvalue(r, 0, 2)[0] == 't';
  }
  PQclear(r);
  return rc;
}

void xgr_store_lease_get_stats(xgr_store *st, xgr_store_lease_stats *out) {
  memset(out, 0, sizeof *out);
  pgc *c = xgr__pg_cluster(st);
  if (!c) return;
  pthread_mutex_lock(&c->hmu);
  *out = c->st;
  out->held = xgr__hashmap_size(&c->held);
  pthread_mutex_unlock(&c->hmu);
}

/* ---- commands ------------------------------------------------------------------------------------ */

int xgr_store_cmd_send(xgr_store *st, const char *target, const char *owner, uint64_t root_pid, const char *body,
                       int64_t *id, xgr_error *err) {
  pgc *c = cl_of(st, err);
  if (!c) return XGR_EUNSUPPORTED;
  char rt[24], chan[24];
  snprintf(rt, sizeof rt, "%" PRIu64, root_pid);
  channel_of(target, chan);
  const char *v[6] = {target, c->node, owner, rt, body, chan};
  PGresult *r = run_locked(c, "WITH i AS (INSERT INTO lease_commands(target_node, from_node, owner, root_pid, body, created_at)"
                              " VALUES($1, $2, $3, $4::numeric, $5, xgr_ms_now()) RETURNING id)"
                              " SELECT id, pg_notify($6, 'c') FROM i", 6, v, "cannot send a command", err);
  if (!r) return XGR_EIO;
  *id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
  PQclear(r);
  return 0;
}

int xgr_store_cmd_listen(xgr_store *st, int timeout_ms, void (*on)(void *ctx, const char *payload), void *ctx,
                         xgr_error *err) {
  pgc *c = cl_of(st, err);
  if (!c) return XGR_EUNSUPPORTED;
  if (listen_ready(c, err)) return XGR_EIO;
  int fd = PQsocket(c->l);
  struct pollfd p = {.fd = fd, .events = POLLIN};
  if (poll(&p, 1, timeout_ms) < 0) return 0;
  if (!PQconsumeInput(c->l)) {   /* made again by the next call */
    int rc = pq_error(c, c->l, NULL, "the listening connection failed", err);
    c->listening = false;
    if (PQstatus(c->l) == CONNECTION_OK) PQreset(c->l);
    return rc;
  }
  for (PGnotify *nt; (nt = PQnotifies(c->l));) {
    if (on) on(ctx, nt->extra ? nt->extra : "");
    PQfreemem(nt);
  }
  return 0;
}

int xgr_store_cmd_serve(xgr_store *st,
                        char *(*runfn)(void *ctx, int64_t id, const char *owner, uint64_t root_pid, const char *body,
                                       int *rc),
                        void *ctx, xgr_error *err) {
  pgc *c = cl_of(st, err);
  if (!c) return XGR_EUNSUPPORTED;
  const char *v[1] = {c->node};
  PGresult *r = run_locked(c, "UPDATE lease_commands SET taken = true WHERE id IN (SELECT id FROM lease_commands"
                              " WHERE target_node = $1 AND NOT taken ORDER BY id FOR UPDATE SKIP LOCKED)"
                              " RETURNING id, from_node, owner, root_pid, body", 1, v, "cannot take commands", err);
  if (!r) return XGR_EIO;
  int rc = 0;
  for (int i = 0; i < PQntuples(r); i++) {
    int64_t id = strtoll(PQgetvalue(r, i, 0), NULL, 10);
    int res_rc = 0;
    char *res = runfn(ctx, id, PQgetvalue(r, i, 2), strtoull(PQgetvalue(r, i, 3), NULL, 10), PQgetvalue(r, i, 4),
                      &res_rc);
    char ids[24], rcs[16], chan[24];
    snprintf(ids, sizeof ids, "%" PRId64, id);
    snprintf(rcs, sizeof rcs, "%d", res_rc);
    channel_of(PQgetvalue(r, i, 1), chan);
    const char *w[4] = {ids, rcs, res ? res : "", chan};
    PGresult *a = run_locked(c, "WITH u AS (UPDATE lease_commands SET rc = $2::int, result = $3 WHERE id = $1::bigint"
                                " RETURNING id) SELECT pg_notify($4, 'r' || id) FROM u", 4, w, "cannot answer a command", err);
    free(res);
    if (!a) rc = XGR_EIO;
    PQclear(a);
  }
  PQclear(r);
  return rc;
}

int xgr_store_cmd_result(xgr_store *st, int64_t id, bool *done, int *rc, char **result, xgr_error *err) {
  pgc *c = cl_of(st, err);
  if (!c) return XGR_EUNSUPPORTED;
  char ids[24];
  snprintf(ids, sizeof ids, "%" PRId64, id);
  const char *v[1] = {ids};
  PGresult *r = run_locked(c, "DELETE FROM lease_commands WHERE id = $1::bigint AND rc IS NOT NULL RETURNING rc, result", 1, v,
                           "cannot read a command's answer", err);
  if (!r) return XGR_EIO;
  *done = PQntuples(r) == 1;
  if (*done) {
    *rc = (int)strtol(PQgetvalue(r, 0, 0), NULL, 10);
    *result = xgr__xstrdup(PQgetvalue(r, 0, 1));
  }
  PQclear(r);
  return 0;
}

/* Delete command id — any, or only one its target has not taken (untaken); *deleted: whether a row went. */
static int cmd_delete(xgr_store *st, int64_t id, bool untaken, bool *deleted, xgr_error *err) {
  pgc *c = cl_of(st, err);
  *deleted = false;
  if (!c) return XGR_EUNSUPPORTED;
  char ids[24];
  snprintf(ids, sizeof ids, "%" PRId64, id);
  const char *v[1] = {ids};
  PGresult *r = run_locked(c, untaken ? "DELETE FROM lease_commands WHERE id = $1::bigint AND NOT taken RETURNING id"
                                      : "DELETE FROM lease_commands WHERE id = $1::bigint RETURNING id",
                           1, v, "cannot drop a command", err);
  if (!r) return XGR_EIO;
  *deleted = PQntuples(r) == 1;
  PQclear(r);
  return 0;
}

int xgr_store_cmd_drop(xgr_store *st, int64_t id, xgr_error *err) {
  bool deleted;
  return cmd_delete(st, id, false, &deleted, err);
}

int xgr_store_cmd_withdraw(xgr_store *st, int64_t id, bool *withdrawn, xgr_error *err) {
  return cmd_delete(st, id, true, withdrawn, err);
}

/* ---- the outbox across nodes ------------------------------------------------------------------------ */

int xgr_store_outbox_held(xgr_store *st, size_t max, xgr_store_wake **out, size_t *n, xgr_error *err) {
  *out = NULL;
  *n = 0;
  pgc *c = cl_of(st, err);
  if (!c) return XGR_EUNSUPPORTED;
  char lim[24];
  snprintf(lim, sizeof lim, "%zu", max ? max : 1000);
  const char *v[2] = {c->node, lim};
  pthread_mutex_lock(&c->mu);
  /* a wake-up whose target is no running session anywhere (ended, or never was) is refused for good
   * once it is a second old (the target's row may have been on its way) */
  PGresult *g = run(c, "UPDATE outbox o SET refused = 'no such session here', refused_at = xgr_ms_now()"
                       " WHERE o.refused IS NULL AND o.created_at < xgr_ms_now() - 1000 AND NOT EXISTS (SELECT 1"
                       " FROM sessions s WHERE s.owner = o.to_owner COLLATE \"C\" AND s.root_pid = o.to_root"
                       " AND s.status = 0)", 0, NULL, "outbox", err);
  PQclear(g);
  PGresult *r = run(c, "SELECT o.id, o.from_owner, o.from_root, o.to_owner, o.to_root, o.step, o.caller, o.rule,"
                       " o.payload, o.created_at FROM outbox o JOIN sessions s ON s.owner = o.to_owner COLLATE \"C\""
                       " AND s.root_pid = o.to_root WHERE o.refused IS NULL AND s.status = 0 AND s.lease_owner = $1"
                       " ORDER BY o.created_at, o.id LIMIT $2::bigint", 2, v, "cannot read the outbox", err);
  pthread_mutex_unlock(&c->mu);
  if (!r) return XGR_EIO;
  int nr = PQntuples(r);
  xgr_store_wake *w = xgr__xcalloc((size_t)nr + 1, sizeof *w);
  for (int i = 0; i < nr; i++) {
    w[i].id = xgr__xstrdup(PQgetvalue(r, i, 0));
    w[i].from_owner = xgr__xstrdup(PQgetvalue(r, i, 1));
    w[i].from_root = strtoull(PQgetvalue(r, i, 2), NULL, 10);
    w[i].to_owner = xgr__xstrdup(PQgetvalue(r, i, 3));
    w[i].to_root = strtoull(PQgetvalue(r, i, 4), NULL, 10);
    w[i].step = xgr__xstrdup(PQgetvalue(r, i, 5));
    w[i].caller = xgr__xstrdup(PQgetvalue(r, i, 6));
    w[i].rule = PQgetisnull(r, i, 7) ? NULL : xgr__xstrdup(PQgetvalue(r, i, 7));
    w[i].payload = xgr__xstrdup(PQgetvalue(r, i, 8));
    w[i].created_at = strtoll(PQgetvalue(r, i, 9), NULL, 10);
  }
  PQclear(r);
  *out = w;
  *n = (size_t)nr;
  return 0;
}

bool xgr_store_outbox_pending(xgr_store *st, const char *id) {
  pgc *c = xgr__pg_cluster(st);
  if (!c) return false;
  const char *v[1] = {id};
  xgr_error err;
  PGresult *r = run_locked(c, "SELECT 1 FROM outbox WHERE id = $1 AND refused IS NULL", 1, v, "outbox", &err);
  bool queued = r && PQntuples(r) == 1;
  PQclear(r);
  return queued;
}
