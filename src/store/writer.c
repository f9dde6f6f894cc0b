/* writer.c — the writer thread shared by the SQLite and PostgreSQL backends (declared in store_impl.h). */
#include "store/store_impl.h"

#include <assert.h>
#include <time.h>

#include "util/alloc.h"
#include "util/clock.h"

void xgr__writer_init(xgr__writer *w, xgr_store *base, void (*commit)(void *, xgr_store_changes **, size_t),
                      long (*gc_step)(void *, bool, bool *, xgr_error *), void *ctx) {
  *w = (xgr__writer){.base = base, .commit = commit, .gc_step = gc_step, .ctx = ctx};
  pthread_mutex_init(&w->qmu, NULL);
  pthread_cond_init(&w->qcv, NULL);
}

static void *writer_main(void *arg) {
  xgr__writer *w = arg;
  const xgr_store_config *c = &w->base->cfg;
  int64_t next_gc = c->gc_interval_ms > 0 ? xgr__mono_ms() + c->gc_interval_ms : INT64_MAX;
  bool gc_more = false;          /* the last background step hit its limit: go on when idle */
  size_t full_deleted = 0;       /* rows removed by the requested full pass so far */
  xgr_store_changes **list = NULL;
  size_t cap = 0;
  pthread_mutex_lock(&w->qmu);
  for (;;) {
    bool want_full = w->gc_req != w->gc_done;
    while (!w->head && !w->stop && !want_full && !gc_more && xgr__mono_ms() < next_gc) {
      if (next_gc == INT64_MAX) {
        pthread_cond_wait(&w->qcv, &w->qmu);
      } else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t wait = next_gc - xgr__mono_ms();
        if (wait < 1) wait = 1;
        ts.tv_sec += wait / 1000;
        ts.tv_nsec += (wait % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
          ts.tv_sec++;
          ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&w->qcv, &w->qmu, &ts);
      }
      want_full = w->gc_req != w->gc_done;
    }
    if (w->head) {   /* group commit: everything queued now */
      size_t n = 0;
      for (xgr_store_changes *b = w->head; b; b = b->next) n++;
      if (n > cap) {
        cap = n * 2;
        list = xgr__xrealloc(list, cap * sizeof *list);
      }
      n = 0;
      for (xgr_store_changes *b = w->head; b; b = b->next) list[n++] = b;
      w->head = w->tail = NULL;
      pthread_mutex_unlock(&w->qmu);
      w->commit(w->ctx, list, n);
      for (size_t i = 0; i < n; i++) xgr__store_signal(w->base, list[i]);
      pthread_mutex_lock(&w->qmu);
      w->signalled += n;
      pthread_cond_broadcast(&w->qcv);
      continue;
    }
    if (w->stop && !want_full) break;
    /* retention: one small step, then look at the queue again */
    uint64_t req = w->gc_req;
    pthread_mutex_unlock(&w->qmu);
    xgr_error err;
    xgr_error_clear(&err);
    bool more = false;
    long d = xgr_store_failed(w->base, &err) ? -1 : w->gc_step(w->ctx, want_full, &more, &err);
    pthread_mutex_lock(&w->qmu);
    if (d < 0) {
      more = false;
      if (want_full) {
        w->gc_rc = err.code ? err.code : XGR_EIO;
        w->gc_err = err;
      }
    } else {
      full_deleted += (size_t)d;
    }
    gc_more = more;
    if (!more) {
      next_gc = c->gc_interval_ms > 0 ? xgr__mono_ms() + c->gc_interval_ms : INT64_MAX;
      if (want_full) {
        w->gc_last_deleted = full_deleted;
        w->gc_done = req;
        pthread_cond_broadcast(&w->qcv);
      }
      full_deleted = 0;
    }
  }
  pthread_mutex_unlock(&w->qmu);
  free(list);
  return NULL;
}

int xgr__writer_start(xgr__writer *w, const char *name) {
  assert(!w->has_thread);
  if (pthread_create(&w->thread, NULL, writer_main, w)) return -1;
  w->has_thread = true;
  pthread_setname_np(w->thread, name);
  return 0;
}

void xgr__writer_submit(xgr__writer *w, xgr_store_changes *b) {
  b->next = NULL;
  pthread_mutex_lock(&w->qmu);
  if (w->tail) w->tail->next = b;
  else w->head = b;
  w->tail = b;
  w->submitted++;
  pthread_cond_broadcast(&w->qcv);
  pthread_mutex_unlock(&w->qmu);
}

void xgr__writer_flush(xgr__writer *w) {
  pthread_mutex_lock(&w->qmu);
  uint64_t ticket = w->submitted;
  while (w->signalled < ticket && w->has_thread) pthread_cond_wait(&w->qcv, &w->qmu);
  pthread_mutex_unlock(&w->qmu);
}

int xgr__writer_gc(xgr__writer *w, size_t *deleted, xgr_error *err) {
  if (!w->has_thread) return xgr_error_set(err, XGR_EPERM, NULL, "the store was opened read-only");
  pthread_mutex_lock(&w->qmu);
  uint64_t ticket = ++w->gc_req;
  w->gc_rc = 0;
  pthread_cond_broadcast(&w->qcv);
  while (w->gc_done < ticket) pthread_cond_wait(&w->qcv, &w->qmu);
  int rc = w->gc_rc;
  if (rc && err) *err = w->gc_err;
  *deleted = w->gc_last_deleted;
  pthread_mutex_unlock(&w->qmu);
  return rc;
}

void xgr__writer_destroy(xgr__writer *w) {
  if (w->has_thread) {
    pthread_mutex_lock(&w->qmu);
    w->stop = true;
    pthread_cond_broadcast(&w->qcv);
    pthread_mutex_unlock(&w->qmu);
    pthread_join(w->thread, NULL);
    w->has_thread = false;
  }
  pthread_mutex_destroy(&w->qmu);
  pthread_cond_destroy(&w->qcv);
}
