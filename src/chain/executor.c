/* executor.c — executions of the engine (XRC-137 §8.3) sent exactly once, across crashes.
 *
 * The engine's workers hand each step's resolved execution to `submit` (xgr_exec_hook) before the
 * step's result is applied. submit encodes it (call data, value, gas limit, target: CPU only) and
 * writes it as an *intent* into a journal (exec_journal.c: an SQLite file of its own,
 * synchronous=FULL, beside an SQLite store; the table exec_journal in a PostgreSQL store's own
 * database, synchronous_commit=on) keyed by (owner, rootPid, iter); a second submit of the same
 * key (the step ran again after a crash before its result was committed) keeps the first. One
 * executor thread then works the journal in order:
 *
 *   intent  -> sign with the engine key (its next nonce; gas.limit or an estimate) and store the
 *              raw transaction and its hash (state "signed") BEFORE anything is sent;
 *   signed  -> broadcast those exact bytes (again, after a restart: a node that has or mined them
 *              is fine), wait for the receipt, store the record (state "done").
 *
 * So a transaction is never signed twice for one step and never sent before it is durable: after
 * a SIGKILL at any point the restarted executor finishes what the journal holds and every
 * execution is mined once. The executor's nonce starts at max(the node's pending count, the
 * highest journaled nonce + 1), and signed-but-unmined transactions go out first, in order. When
 * storing a signed transaction fails (a PostgreSQL connection lost at COMMIT: written or not), the
 * nonce is computed that way again before the next signature, so it is neither reused nor skipped.
 * The thread holds no engine worker; records are read by xgrd for history rows (getSession).
 *
 * On the nodes of a cluster (xgr_chain_executor_new_node) the journal is shared: every node
 * journals its own steps' executions, and the one node that holds the sender's lease
 * (exec_journal.c) signs and sends everyone's. Taking the lease over is a restart as above: the
 * nonce is computed again, signed rows go out first. A node whose lease ended (a write refused
 * at its old epoch) drops its nonce and sends nothing until it holds the lease again.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chain/chain_impl.h"
#include "chain/exec_journal_impl.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "xgr/abi.h"
#include "xgr/engine.h"
#include "xgr/logfmt.h"
#include "xgr/secp.h"

enum { ST_INTENT = XGR__XJ_INTENT, ST_SIGNED = XGR__XJ_SIGNED, ST_DONE = XGR__XJ_DONE };

struct xgr_chain_executor {
  xgr_chain_sender s;
  xgr__xjournal *j;
  pthread_mutex_t mu;          /* j, stop */
  pthread_cond_t cv;
  bool stop, started;
  bool nonce_ready;            /* s.nonce accounts for the journal (executor thread only) */
  bool sending;                /* shared journal: this node holds the sender's lease (under mu) */
  long idle_ms;                /* how long the thread waits when there is nothing to do */
  /* shared journal: the keeper thread renews the sender's lease while the executor thread waits
   * on the chain (a receipt can take longer than the lease) */
  int64_t lease_ms;
  char lead_err[512];          /* the last error of taking the lease, logged once (under mu) */
  pthread_cond_t kcv;          /* the keeper sleeps on it (CLOCK_MONOTONIC) */
  pthread_t keeper;
  bool keeper_started;
  pthread_t th;
  FILE *log;
  xgr_exec_hook hook;
  uint64_t done_count;
};

/* One log line "level=LEVEL msg=MSG [key=\"value\"]" (logfmt; key NULL: none). */
static void logkv(xgr_chain_executor *x, const char *level, const char *msg, const char *key, const char *value) {
  if (!x->log) return;
  xgr_logfmt l;
  xgr_logfmt_begin(&l, false, level, msg);
  if (key) xgr_logfmt_quoted(&l, key, value);
  xgr_logfmt_write(&l, x->log);
}

/* ---- submit (engine workers) ------------------------------------------------------------------- */

static int submit(void *ctx, const char *owner, uint64_t root, uint64_t iter, const char *step_id, const xgr_execution *ex,
                  xgr_error *fail) {
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
  char *rec = NULL;
  if (err) {   /* cannot be encoded: settled at once, nothing to send */
    json_t *r = json_pack("{s:n, s:s, s:s}", "txHash", "status", "failed", "error", err);
    rec = json_dumps(r, JSON_COMPACT);
    json_decref(r);
  }
  xgr__xjournal_intent in = {.owner = owner, .root = root, .iter = iter, .step = step_id, .target = ex->to,
                             .function = ex->function, .data = dhex, .value = vhex,
                             .gas = ex->has_gas ? ex->gas_limit : 0, .state = err ? ST_DONE : ST_INTENT, .record = rec};
  char msg[512];
  pthread_mutex_lock(&x->mu);
  int rc = xgr__xjournal_add(x->j, &in, msg, sizeof msg);
  if (rc) {
    if (x->log) {
      xgr_logfmt l;
      xgr_logfmt_begin(&l, false, "error", "execution journal write failed; the step fails");
      xgr_logfmt_str(&l, "owner", owner);
      xgr_logfmt_u64(&l, "rootPid", root);
      xgr_logfmt_u64(&l, "iter", iter);
      xgr_logfmt_quoted(&l, "error", msg);
      xgr_logfmt_write(&l, x->log);
    }
    xgr_error_set(fail, XGR_EIO, "execution", "the execution could not be written to the execution journal (%s), so it was not sent: %s",
                  xgr__xjournal_name(x->j), msg);
  } else pthread_cond_signal(&x->cv);
  pthread_mutex_unlock(&x->mu);
  free(rec);
  free(err);
  free(dhex);
  free(vhex);
  return rc ? -1 : 0;
}

/* ---- the executor thread ----------------------------------------------------------------------- */

typedef xgr__xjournal_row row;

/* This node no longer sends (shared journal): say so once. Called with x->mu held. The nonce is
 * computed again when it sends again (may_send). */
static void step_down(xgr_chain_executor *x, const char *why) {
  if (x->sending) logkv(x, "warn", "this node no longer sends executions", "reason", why);
  x->sending = false;
}

static bool mark(xgr_chain_executor *x, const row *r, int state, const char *raw, const char *hash, uint64_t nonce,
                 const char *record) {
  char msg[512];
  int rc = xgr__xjournal_mark(x->j, r->id, state, raw, hash, nonce, record, msg, sizeof msg);
  if (rc == XGR__XJ_NOT_SENDER) step_down(x, msg);
  else if (rc) logkv(x, "error", "execution journal update failed", "error", msg);
  return rc == 0;
}

/* Shared journal: whether this node sends now (taking or renewing the lease as due). Called with
 * x->mu held. */
static bool may_send(xgr_chain_executor *x) {
  if (!xgr__xjournal_shared(x->j)) return true;
  char msg[512];
  int rc = xgr__xjournal_lead(x->j, msg, sizeof msg);
  if (rc == 1) {
    if (!x->sending) {
      if (x->log) {
        xgr_logfmt l;
        xgr_logfmt_begin(&l, false, "info", "this node now sends the engine key's executions");
        xgr_logfmt_str(&l, "from", x->s.from);
        xgr_logfmt_write(&l, x->log);
      }
      x->nonce_ready = false;   /* as at a restart: the chain's count and the journal decide the nonce */
    }
    x->sending = true;
    return true;
  }
  if (rc < 0 && strcmp(msg, x->lead_err))   /* said once until it changes (this runs every poll) */
    logkv(x, "error", "execution journal: cannot take the sender's lease", "error", msg);
  snprintf(x->lead_err, sizeof x->lead_err, "%s", rc < 0 ? msg : "");
  step_down(x, rc < 0 ? msg : "another node holds the sender's lease");
  return false;
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
      logkv(x, "warn", "cannot sign an execution yet", "error", e.message);
      return false;
    }
    pthread_mutex_lock(&x->mu);
    bool ok = mark(x, r, ST_SIGNED, tx.raw_hex, tx.hash, tx.nonce, NULL);   /* durable before it is sent */
    pthread_mutex_unlock(&x->mu);
    if (!ok) {   /* stored or not: not sent; the next nonce is taken from the node and the journal again */
      x->nonce_ready = false;
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
  char msg[512];
  for (;;) {
    pthread_mutex_lock(&x->mu);
    if (x->stop) {
      pthread_mutex_unlock(&x->mu);
      break;
    }
    row r = {0};
    int have = may_send(x) ? xgr__xjournal_next(x->j, &r, msg, sizeof msg) : 0;
    if (have < 0) logkv(x, "error", "execution journal read failed", "error", msg);
    if (have <= 0) {
      struct timespec ts = xgr__mono_deadline(x->idle_ms);
      pthread_cond_timedwait(&x->cv, &x->mu, &ts);
      pthread_mutex_unlock(&x->mu);
      continue;
    }
    int64_t max_nonce = -1;
    bool journal_ok = true;
    if (!x->nonce_ready && xgr__xjournal_max_nonce(x->j, &max_nonce, msg, sizeof msg)) {
      logkv(x, "error", "execution journal read failed", "error", msg);
      journal_ok = false;
    }
    pthread_mutex_unlock(&x->mu);
    if (!journal_ok) {
      xgr__xjournal_row_clear(&r);
      sleep_ms(500);
      continue;
    }
    if (!x->nonce_ready) {
      xgr_error e;
      if (xgr_chain_sender_init(&x->s, &e)) {
        logkv(x, "warn", "executor cannot reach the chain", "error", e.message);
        xgr__xjournal_row_clear(&r);
        sleep_ms(500);
        continue;
      }
      if (max_nonce >= 0 && (uint64_t)max_nonce + 1 > x->s.nonce) x->s.nonce = (uint64_t)max_nonce + 1;
      x->nonce_ready = true;
    }
    if (!work(x, &r)) sleep_ms(200);
    xgr__xjournal_row_clear(&r);
  }
  return NULL;
}

/* The keeper (shared journal): every sixth of the lease, renew the sender's lease this node holds
 * (xgr__xjournal_lead queries only when a third has passed). The executor thread takes the lease
 * and renews it too, but it can wait on the chain for up to the receipt timeout (60 s) while the
 * lease is seconds: without the keeper, every slow receipt would hand the sending to another node. */
static void *keep(void *arg) {
  xgr_chain_executor *x = arg;
  long every = (long)(x->lease_ms / 6 > 0 ? x->lease_ms / 6 : 1);
  pthread_mutex_lock(&x->mu);
  while (!x->stop) {
    struct timespec ts = xgr__mono_deadline(every);
    pthread_cond_timedwait(&x->kcv, &x->mu, &ts);
    if (x->stop || !x->sending) continue;
    char msg[512];
    int rc = xgr__xjournal_lead(x->j, msg, sizeof msg);
    if (rc != 1) step_down(x, rc < 0 ? msg : "another node holds the sender's lease");
  }
  pthread_mutex_unlock(&x->mu);
  return NULL;
}

/* ---- life cycle and records -------------------------------------------------------------------- */

/* Both constructors: node NULL for a journal of its own (journal: path, URI or NULL), else the
 * shared journal at the URI journal. */
static xgr_chain_executor *executor_new(xgr_chain *c, const xgr_secp *secp, const uint8_t key[32], const char *journal,
                                        const char *node, int64_t lease_ms, FILE *log, xgr_error *e) {
  xgr_chain_executor *x = xgr__xcalloc(1, sizeof *x);
  /* a shared journal also gets intents from other nodes, which cannot signal this thread */
  x->idle_ms = node ? (lease_ms / 3 < 200 ? lease_ms / 3 : 200) : 1000;
  if (x->idle_ms < 1) x->idle_ms = 1;
  x->s = (xgr_chain_sender){.chain = c, .secp = secp};
  memcpy(x->s.key, key, 32);
  x->log = log;
  x->lease_ms = lease_ms;
  pthread_mutex_init(&x->mu, NULL);
  pthread_condattr_t ca;   /* both threads wait with deadlines on the monotonic clock */
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&x->cv, &ca);
  pthread_cond_init(&x->kcv, &ca);
  pthread_condattr_destroy(&ca);
  uint8_t addr[20];
  if (xgr_secp_address(secp, key, addr, e)) {
    xgr_chain_executor_free(x);
    return NULL;
  }
  xgr_addr_hex(addr, x->s.from);
  if (!(x->j = node ? xgr__xjournal_open_shared(journal, node, lease_ms, x->s.from, e) : xgr__xjournal_open(journal, x->s.from, e))) {
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
  if (node) {
    if (pthread_create(&x->keeper, NULL, keep, x)) {
      xgr_error_set(e, XGR_ENOMEM, NULL, "cannot start the executor's lease thread");
      xgr_chain_executor_free(x);
      return NULL;
    }
    pthread_setname_np(x->keeper, "xgr-exec-lease");
    x->keeper_started = true;
  }
  return x;
}

xgr_chain_executor *xgr_chain_executor_new(xgr_chain *c, const xgr_secp *secp, const uint8_t key[32], const char *journal,
                                           FILE *log, xgr_error *e) {
  return executor_new(c, secp, key, journal, NULL, 0, log, e);
}

xgr_chain_executor *xgr_chain_executor_new_node(xgr_chain *c, const xgr_secp *secp, const uint8_t key[32], const char *url,
                                                const char *node, int64_t lease_ms, FILE *log, xgr_error *e) {
  if (!node || !*node || lease_ms <= 0) {
    xgr_error_set(e, XGR_EINVAL, "--node-id", "a cluster node's executor needs its node id and a lease");
    return NULL;
  }
  return executor_new(c, secp, key, url, node, lease_ms, log, e);
}

bool xgr_chain_executor_sending(xgr_chain_executor *x) {
  pthread_mutex_lock(&x->mu);
  bool s = !xgr__xjournal_shared(x->j) || x->sending;
  pthread_mutex_unlock(&x->mu);
  return s;
}

void xgr_chain_executor_free(xgr_chain_executor *x) {
  if (!x) return;
  if (x->started) {
    pthread_mutex_lock(&x->mu);
    x->stop = true;
    pthread_cond_signal(&x->cv);
    pthread_cond_signal(&x->kcv);
    pthread_mutex_unlock(&x->mu);
    pthread_join(x->th, NULL);
    if (x->keeper_started) pthread_join(x->keeper, NULL);
  }
  xgr__xjournal_close(x->j);
  memset(x->s.key, 0, sizeof x->s.key);
  pthread_cond_destroy(&x->cv);
  pthread_cond_destroy(&x->kcv);
  pthread_mutex_destroy(&x->mu);
  free(x);
}

const struct xgr_exec_hook *xgr_chain_executor_hook(xgr_chain_executor *x) { return &x->hook; }
const char *xgr_chain_executor_address(const xgr_chain_executor *x) { return x->s.from; }

const char *xgr_chain_executor_journal(const xgr_chain_executor *x) { return xgr__xjournal_name(x->j); }

json_t *xgr_chain_executor_record(xgr_chain_executor *x, const char *owner, uint64_t root, uint64_t iter) {
  int state = 0;
  char *hash = NULL, *rec = NULL;
  pthread_mutex_lock(&x->mu);
  int found = xgr__xjournal_get(x->j, owner, root, iter, &state, &hash, &rec);
  pthread_mutex_unlock(&x->mu);
  json_t *out = NULL;
  if (found) {
    json_error_t je;
    if (state == ST_DONE && rec) out = json_loads(rec, 0, &je);
    if (!out) out = json_pack("{s:s?, s:s}", "txHash", hash, "status", "pending");
  }
  free(hash);
  free(rec);
  return out;
}

void xgr_chain_executor_counts(xgr_chain_executor *x, uint64_t *pending, uint64_t *done) {
  pthread_mutex_lock(&x->mu);
  xgr__xjournal_counts(x->j, pending, done);
  pthread_mutex_unlock(&x->mu);
}
