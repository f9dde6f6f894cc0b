/* writer.h — the writer thread of the SQLite and PostgreSQL backends (one copy for both).
 *
 * Submitted batches wait in a queue; the writer takes everything queued when it looks and hands
 * it to the backend as one group (group commit), then signals each batch (xgr__store_signal) and
 * advances the flush tickets. When the queue is empty it runs retention in small steps: every
 * cfg.gc_interval_ms, again at once while a step says there is more, and as a full pass when
 * xgr_store_gc asks for one. The backend supplies the two steps that touch its database; the
 * writer owns the queue, the thread and the tickets. Library-private. */
#ifndef XGR_STORE_WRITER_H
#define XGR_STORE_WRITER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/store_impl.h"

typedef struct xgr__writer {
  xgr_store *base;              /* the store whose batches these are (signalled through it) */
  /* Commit list[0..n) as one group on the writer thread; the writer signals them afterwards. */
  void (*commit)(void *ctx, xgr_store_changes **list, size_t n);
  /* One small retention step: rows deleted (or -1 with err set); *more when it hit its limit, or
   * (full: the step is part of a pass xgr_store_gc asked for) when the pass has more to look at. */
  long (*gc_step)(void *ctx, bool full, bool *more, xgr_error *err);
  void *ctx;
  pthread_t thread;
  bool has_thread;              /* false for a read-only store: submit is refused above, flush returns */
  pthread_mutex_t qmu;          /* guards the fields below */
  pthread_cond_t qcv;           /* writer: work arrived; waiters: batches signalled / gc done */
  xgr_store_changes *head, *tail;
  bool stop;
  uint64_t submitted, signalled;
  uint64_t gc_req, gc_done;
  size_t gc_last_deleted;
  int gc_rc;
  xgr_error gc_err;
} xgr__writer;

/* Set w up (no thread yet) for store base with the backend's two steps and their ctx. */
void xgr__writer_init(xgr__writer *w, xgr_store *base, void (*commit)(void *, xgr_store_changes **, size_t),
                      long (*gc_step)(void *, bool, bool *, xgr_error *), void *ctx);
/* Start the thread, named name (at most 15 characters); 0, or -1 when it cannot be created. */
int xgr__writer_start(xgr__writer *w, const char *name);
/* Queue batch b (ownership passes to the store until it is signalled). Any thread. */
void xgr__writer_submit(xgr__writer *w, xgr_store_changes *b);
/* Wait until every batch submitted before the call has been committed (or failed) and signalled. */
void xgr__writer_flush(xgr__writer *w);
/* A full retention pass on the writer thread; *deleted rows. XGR_EPERM without a thread. */
int xgr__writer_gc(xgr__writer *w, size_t *deleted, xgr_error *err);
/* Stop the thread after what is queued (and a requested full pass) is done; free w's locks. */
void xgr__writer_destroy(xgr__writer *w);

#endif
