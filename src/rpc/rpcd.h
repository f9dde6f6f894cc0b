/* rpcd.h — private interface between the files of xgrd's service (src/rpc): the persistence
 * adapter (persist.c) that connects the engine's store hook to the store's group-commit batches,
 * and the service (rpc_impl.h lists its files). Not installed; nothing outside src/rpc includes it. */
#ifndef XGR_RPC_RPCD_H
#define XGR_RPC_RPCD_H

#include <stdbool.h>
#include <stdint.h>

#include "xgr/engine.h"
#include "xgr/metrics.h"
#include "xgr/store.h"

/* ---- persist.c ------------------------------------------------------------------------------- */
/* The adapter: an xgr_store_hook whose submit() turns one engine batch (process snapshots and
 * history rows of one session) into an xgr_store_changes and hands it to xgr_store_submit; the
 * engine's done() is called from the store's commit callback. Keeps, per live session, the
 * counters recovery needs (next iter, next join group, session-wide pause), which the engine's
 * batch does not carry: the highest iter and group seen so far, seeded by xgr_persist_track when
 * a session is enqueued or recovered. Thread-safe (sessions submit concurrently). */
typedef struct xgr_persist xgr_persist;

/* st (borrowed) must outlive the adapter; m (borrowed, may be NULL) gets the step / commit
 * metrics. */
xgr_persist *xgr_persist_new(xgr_store *st);
void xgr_persist_free(xgr_persist *p);
/* The hook to put into xgr_engine_config.store (valid while p lives). */
const xgr_store_hook *xgr_persist_hook(xgr_persist *p);
/* Register the metrics the adapter updates (call once, before the engine runs sessions). */
void xgr_persist_metrics(xgr_persist *p, xgr_metrics *m);
/* Seed a session's counters (enqueue, recovery). */
void xgr_persist_track(xgr_persist *p, const char *owner, uint64_t root_pid, uint64_t next_iter, uint32_t next_group,
                       bool paused);
/* The steps session (owner, root_pid) had run at its last batch (xgr_store_batch.steps), 0 when not
 * tracked: handed to a hibernated session when it is loaded, so the per-session step cap counts on. */
uint64_t xgr_persist_steps(xgr_persist *p, const char *owner, uint64_t root_pid);
/* Record a session-wide pause / resume (persisted with the session's next batch). */
void xgr_persist_set_paused(xgr_persist *p, const char *owner, uint64_t root_pid, bool paused);
/* Batches submitted and not yet committed. */
uint64_t xgr_persist_inflight(xgr_persist *p);


#endif
