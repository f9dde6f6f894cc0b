/* exec_journal_impl.h — where the engine executor (executor.c) keeps its executions: an SQLite file of
 * its own beside an SQLite store, in memory for a memory store, or the table `exec_journal` in the
 * store's own PostgreSQL database and schema. One row per execution, keyed by (owner, rootPid,
 * iter), in the states intent (0) -> signed (1: raw transaction and hash stored) -> done (2:
 * record stored). Every write is durable when it returns 0 (SQLite synchronous=FULL; PostgreSQL
 * synchronous_commit=on), which is what the executor's exactly-once rule rests on. Private to
 * the library. A journal is not thread-safe: its one user (the executor) serializes calls. */
#ifndef XGR_CHAIN_EXEC_JOURNAL_IMPL_H
#define XGR_CHAIN_EXEC_JOURNAL_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xgr/error.h"

enum { XGR__XJ_INTENT = 0, XGR__XJ_SIGNED = 1, XGR__XJ_DONE = 2 };
/* xgr__xjournal_mark's answer on a shared journal when this node does not (or no longer) send. */
enum { XGR__XJ_NOT_SENDER = -2 };

typedef struct xgr__xjournal xgr__xjournal;

/* A row to work on; the strings are owned by the row (xgr__xjournal_row_clear frees them). */
typedef struct xgr__xjournal_row {
  int64_t id;
  int state;
  char *target, *function, *data, *value, *raw, *hash;
  uint64_t gas, nonce;
} xgr__xjournal_row;

/* A new execution (borrowed strings; function, value and record may be NULL). */
typedef struct xgr__xjournal_intent {
  const char *owner, *step, *target, *function, *data, *value, *record;
  uint64_t root, iter, gas;
  int state;   /* XGR__XJ_INTENT, or XGR__XJ_DONE with a record (nothing to send) */
} xgr__xjournal_intent;

/* Open the journal at `where`: NULL (in memory, not durable), an SQLite file path, or a libpq URI
 * (postgresql://... or postgres://...: the table exec_journal in that database's current schema).
 * On PostgreSQL the journal holds a session advisory lock keyed by the schema while open
 * (exclusively), so a second executor on the same journal is refused. sender (borrowed): the
 * engine key's address ("0x" + 40 hex), stored with each row it signs. NULL with *e
 * (path "--engine-key") on failure. Free with xgr__xjournal_close. */
xgr__xjournal *xgr__xjournal_open(const char *where, const char *sender, xgr_error *e);
/* Open the shared journal of a cluster node (docs/CLUSTER.md): the table exec_journal at the
 * PostgreSQL URI url, written by every node, worked by one at a time: the holder of the sender's
 * lease (node: this node's id, borrowed; lease_ms > 0: how long a hold lasts without renewal).
 * Marks (state changes) succeed only under this node's epoch as sender. sender (borrowed) is the
 * engine key's address ("0x" + 40 hex): the lease records it, and a node whose key differs from
 * the recorded one is refused at open and never sends. The schema's advisory lock is held in
 * shared mode, so a single writer's journal and nodes' exclude each other. NULL with *e on
 * failure. */
xgr__xjournal *xgr__xjournal_open_shared(const char *url, const char *node, int64_t lease_ms, const char *sender,
                                         xgr_error *e);
/* Whether j was opened shared. */
bool xgr__xjournal_shared(const xgr__xjournal *j);
/* Shared journals: take or renew the sender's lease (a query only when a third of the lease has
 * passed since the last renewal, or when this node does not send). 1 when this node sends, 0 when
 * another node does (or no execution exists yet), -1 on an error or when the lease records another
 * engine key (message in err; not sending). */
int xgr__xjournal_lead(xgr__xjournal *j, char *err, size_t cap);
void xgr__xjournal_close(xgr__xjournal *j);
/* The journal as logged (an SQLite path, "memory (not durable)" or the redacted URI + table);
 * owned by j. */
const char *xgr__xjournal_name(const xgr__xjournal *j);

/* Insert an execution unless its (owner, root, iter) is already there (then the first stays).
 * 0 when durable; else nonzero with a message in err. */
int xgr__xjournal_add(xgr__xjournal *j, const xgr__xjournal_intent *in, char *err, size_t cap);
/* The next row to work on: signed rows first in nonce order, then intents in arrival order.
 * 1 with *r filled, 0 when there is none, -1 on a journal error (message in err). */
int xgr__xjournal_next(xgr__xjournal *j, xgr__xjournal_row *r, char *err, size_t cap);
void xgr__xjournal_row_clear(xgr__xjournal_row *r);
/* Set row id's state, raw transaction, hash, nonce and record (NULL strings store NULL).
 * 0 when durable; XGR__XJ_NOT_SENDER on a shared journal whose sender's lease this node does not
 * hold at its epoch (nothing written; the node no longer sends until xgr__xjournal_lead says so);
 * else another nonzero value with a message in err (the write may or may not have happened). */
int xgr__xjournal_mark(xgr__xjournal *j, int64_t id, int state, const char *raw, const char *hash, uint64_t nonce,
                       const char *record, char *err, size_t cap);
/* The highest nonce of a signed or settled row of this journal's sender (rows from before the
 * sender was recorded count as its own) in *out (-1 when there is none). 0, or nonzero with a
 * message in err. */
int xgr__xjournal_max_nonce(xgr__xjournal *j, int64_t *out, char *err, size_t cap);
/* The state, hash and record of (owner, root, iter): 1 when found (*hash and *record new strings
 * or NULL; the caller frees them), 0 when there is no such row or the journal cannot be read. */
int xgr__xjournal_get(xgr__xjournal *j, const char *owner, uint64_t root, uint64_t iter, int *state, char **hash,
                      char **record);
/* Rows not settled yet and settled (both 0 when the journal cannot be read). */
void xgr__xjournal_counts(xgr__xjournal *j, uint64_t *pending, uint64_t *done);

#endif
