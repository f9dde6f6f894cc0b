/* pg_cluster.h — what the PostgreSQL store (postgres.c) and its cluster part (pg_cluster.c) share:
 * opening a named connection, a node's lease connection and the epochs of the sessions it holds,
 * the fence every group commit sends, and the bookkeeping after a commit. Private to src/store;
 * docs/CLUSTER.md has the design. */
#ifndef XGR_STORE_PG_CLUSTER_H
#define XGR_STORE_PG_CLUSTER_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>

#include "store/store_impl.h"

typedef struct pgc pgc;

/* The first line of a libpq message (they end in a newline and may carry a DETAIL) into out. */
void xgr__pg_first_line(const char *msg, char *out, size_t cap);
/* Connect to url as one of the store's connections, named "xgr <role>[ <node>]" in
 * pg_stat_activity unless the URI names it (role: "writer", "reader", "lease", "listen"; node may
 * be NULL). The connection (the caller PQfinishes it), or NULL with *err "store <name>: cannot
 * connect to PostgreSQL: ...". */
PGconn *xgr__pg_connect(const char *url, const char *name, const char *role, const char *node, xgr_error *err);

/* Connect the node's lease connection and its listening connection, take the node's advisory
 * lock (waiting up to 5 s for a previous process of the same id to go), LISTEN on its channel.
 * node (copied) is the node id, lease_ms the lease (0: XGR_STORE_LEASE_MS). NULL with *err. */
pgc *xgr__pgc_open(const char *url, const char *name, const char *node, int64_t lease_ms, xgr_error *err);
/* Close both connections (the node lock goes with them). NULL is fine. */
void xgr__pgc_close(pgc *c);
/* Make the writer connection w insert new session rows leased to this node (xgr.node, xgr.lease_ms),
 * and have the server end it when it sits idle inside a transaction for max(3 leases, 5 s) (a
 * stalled node must not keep its fenced rows locked). */
int xgr__pgc_setup_writer(pgc *c, PGconn *w, xgr_error *err);

/* Writer thread, before a group: move the batches that write a session this node does not hold
 * to the end of list, failed with XGR_ELEASE; returns how many remain at the front. */
size_t xgr__pgc_prefilter(pgc *c, xgr_store_changes **list, size_t n);
/* The fence's parameters for list[0..n): owners, rootPids and epochs as PostgreSQL array literals
 * and the node id (arr[0..3], each the caller's to free). false: nothing to fence (only new
 * sessions or no session at all); arr is then untouched. */
bool xgr__pgc_fence(pgc *c, xgr_store_changes **list, size_t n, char *arr[4]);
/* Writer thread, after a group: sessions created (epoch 1) are held from now on; sessions that
 * ended or whose batch failed with XGR_ELEASE are not; refusals are counted. */
void xgr__pgc_after(pgc *c, xgr_store_changes **list, size_t n);

/* postgres.c: the cluster part of a store (NULL when it is not a cluster node) and the live rows of
 * the sessions named by two array literals (as xgr_store_load_live). */
pgc *xgr__pg_cluster(xgr_store *st);
int xgr__pg_load_keys(xgr_store *st, const char *owners, const char *roots,
                      int (*fn)(void *, const xgr_store_live *), void *ctx, xgr_error *err);

#endif
