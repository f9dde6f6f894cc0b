/* hibernate.c — hibernation of waiting sessions (xgr/engine.h "hibernation", docs/RUNTIME.md):
 * loading evicted sessions back on demand and before their timers are due.
 *
 * Eviction itself is the actor's decision at the end of a turn (actor.c): a session whose changes
 * are all committed, that runs nothing and has nothing due within the horizon, wrote its due time
 * with its last batch; the actor then leaves the registry and closes. This file holds the rest:
 *
 *   - xgr_eng_hib_load: a registry miss for a control call or wake-up loads the session through the
 *     configured load() (xgrd: a store read and xgr_store_restore_session). Loads of one session
 *     are serialised by a striped mutex and check the registry first, so a session is never
 *     loaded twice, and a load never reads a row that an evicting actor has not committed yet (an
 *     actor leaves the registry only after its last commit).
 *   - the hibernation thread: every poll_ms it publishes `upto` = now + lead_ms, then reads the
 *     due index after its cursor up to `upto` and loads what the registry lacks, in due order. A
 *     load that fails (other than "no such session") is tried again from a bounded retry list
 *     with a growing delay (50 ms .. 5 s), since the cursor has moved past it.
 *     An actor evicts only when its due time is beyond `upto`, checked and unlinked under the same
 *     mutex that publishes `upto`: either the eviction came first (and the poll that covers the due
 *     time sees the committed row and a registry without the session) or the actor saw the new
 *     `upto` and stays in memory with its timer armed. No timer is missed.
 *   - deferred deliveries: control calls and internal wake-ups that reached an actor just as it
 *     was evicted (discarded by the runtime) are queued here and delivered after loading, on this
 *     thread. (A wake-up for a hibernated target is loaded by the producing worker itself,
 *     actor.c route_wake, so that a missing target is refused there as before — except while
 *     recovering, for good on a cluster node, where xgrd delivers it from the outbox, checked.)
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine_impl.h"
#include "util/alloc.h"
#include "util/clock.h"

#define DUE_PAGE 256

void xgr_eng_hib_init(xgr_engine *e) {
  hib_state *h = &e->hib;
  pthread_mutex_init(&h->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&h->cv, &ca);
  pthread_condattr_destroy(&ca);
  for (int i = 0; i < 64; i++) pthread_mutex_init(&h->load_mu[i], NULL);
  h->upto = INT64_MIN;
  if (e->cfg.hibernate && e->has_store && !e->stepped && e->cfg.hibernate->load && e->cfg.hibernate->due) {
    h->cfg = *e->cfg.hibernate;
    if (h->cfg.after_ms < 0) h->cfg.after_ms = 0;
    if (h->cfg.lead_ms <= 0) h->cfg.lead_ms = 1000;
    if (h->cfg.poll_ms <= 0) h->cfg.poll_ms = 20;
    h->configured = true;
  }
  e->cfg.hibernate = NULL;
}

int xgr_eng_hib_load(xgr_engine *e, const char *owner, uint64_t root, xgr_error *err) {
  hib_state *h = &e->hib;
  if (!atomic_load(&h->on))
    return xgr_error_set(err, XGR_ENOTFOUND, NULL, "no live session with rootPid %llu", (unsigned long long)root);
  pthread_mutex_t *mu = &h->load_mu[(root * 0x9E3779B97F4A7C15ull) >> 58];
  pthread_mutex_lock(mu);
  shard *sh;
  sess_entry *x = xgr_eng_lookup_locked(e, owner, root, &sh);
  bool have = x != NULL;
  pthread_mutex_unlock(&sh->mu);
  int rc = 0;
  if (!have) {
    xgr_error le;
    xgr_error_clear(&le);
    rc = h->cfg.load(h->cfg.ctx, owner ? owner : "", root, &le);
    if (rc == XGR_ECONFLICT) rc = 0;
    if (rc) {
      if (rc != XGR_ENOTFOUND) atomic_fetch_add(&h->load_failed, 1);
      if (err) *err = le;
    } else {
      atomic_fetch_add(&h->loaded, 1);
    }
  }
  pthread_mutex_unlock(mu);
  return rc;
}

int xgr_engine_load(xgr_engine *e, const char *owner, uint64_t root_pid, xgr_error *err) {
  return xgr_eng_hib_load(e, owner, root_pid, err);
}

bool xgr_eng_hib_defer(xgr_engine *e, int kind, const char *owner, uint64_t root, void *msg) {
  hib_state *h = &e->hib;
  if (!atomic_load(&h->on)) return false;
  hib_item *it = xgr__xcalloc(1, sizeof *it);
  it->kind = kind;
  snprintf(it->owner, sizeof it->owner, "%s", owner ? owner : "");
  it->root = root;
  it->msg = msg;
  pthread_mutex_lock(&h->mu);
  if (h->stop) {
    pthread_mutex_unlock(&h->mu);
    free(it);
    return false;
  }
  if (h->tail) h->tail->next = it;
  else h->head = it;
  h->tail = it;
  pthread_cond_signal(&h->cv);
  pthread_mutex_unlock(&h->mu);
  return true;
}

/* Deliver an internal wake-up to (owner, root), loading it first. */
static void deliver_iwake(xgr_engine *e, hib_item *it) {
  for (int k = 0; k < 8; k++) {
    shard *sh;
    sess_entry *x = xgr_eng_lookup_locked(e, it->owner[0] ? it->owner : NULL, it->root, &sh);
    xgr_pid pid = x ? x->pid : 0;
    bool gone = x && x->gone;
    pthread_mutex_unlock(&sh->mu);
    if (pid && xgr_eng_send(e, NULL, pid, MSG_IWAKE, it->msg) == 0) return;
    if (gone) break;
    if (!x && xgr_eng_hib_load(e, it->owner[0] ? it->owner : NULL, it->root, NULL)) break;
    if (x) sched_yield();   /* starting, or evicting right now: look again */
  }
  xgr_eng_iwake_free(it->msg);
}

static void drain(xgr_engine *e, hib_item *list) {
  while (list) {
    hib_item *it = list;
    list = it->next;
    if (it->kind == MSG_CTL) xgr_eng_route_ctl(e, it->msg);
    else deliver_iwake(e, it);
    free(it);
  }
}

#define HIB_RETRY_MAX 1024
#define HIB_RETRY_FIRST_MS 50
#define HIB_RETRY_LAST_MS 5000

/* Load one due session for the poller: true when it is loaded or turns out to be no session of
 * this engine's (nothing to try again); false on any other failure (a store error, a row that
 * stayed locked). */
static bool load_due(xgr_engine *e, const xgr_engine_due_key *k) {
  xgr_error err;
  xgr_error_clear(&err);
  int rc = xgr_eng_hib_load(e, k->owner, k->root_pid, &err);
  return !rc || rc == XGR_ENOTFOUND;
}

/* A due session whose load failed goes on the retry list, since the cursor moves past it and no
 * later poll would see it again. The list is bounded: beyond it a session waits for the next
 * start, as before (counted in retry_dropped and logged by the loader). */
static void poll_load(xgr_engine *e, const xgr_engine_due_key *k) {
  hib_state *h = &e->hib;
  if (load_due(e, k)) return;
  if (h->nretry >= HIB_RETRY_MAX) {
    atomic_fetch_add(&h->retry_dropped, 1);
    return;
  }
  if (!h->retry) h->retry = xgr__xcalloc(HIB_RETRY_MAX, sizeof *h->retry);
  h->retry[h->nretry++] = (struct hib_retry){*k, xgr__mono_ms() + HIB_RETRY_FIRST_MS, HIB_RETRY_FIRST_MS};
}

/* Try again the failed loads whose time has come; keep the ones that fail again, waiting longer. */
static void retry_due(xgr_engine *e) {
  hib_state *h = &e->hib;
  int64_t now = xgr__mono_ms();
  size_t keep = 0;
  for (size_t i = 0; i < h->nretry; i++) {
    struct hib_retry r = h->retry[i];
    if (r.at_ms <= now && !atomic_load(&e->stopping)) {
      atomic_fetch_add(&h->load_retried, 1);
      if (load_due(e, &r.key)) continue;
      r.delay_ms = r.delay_ms * 2 > HIB_RETRY_LAST_MS ? HIB_RETRY_LAST_MS : r.delay_ms * 2;
      r.at_ms = now + r.delay_ms;
    }
    h->retry[keep++] = r;
  }
  h->nretry = keep;
}

/* One poll of the due index: publish the new horizon, then load what is due by it. */
static void poll_due(xgr_engine *e) {
  hib_state *h = &e->hib;
  int64_t upto = xgr_eng_now(e) + h->cfg.lead_ms;
  pthread_mutex_lock(&h->mu);
  if (upto > h->upto) h->upto = upto;
  upto = h->upto;
  pthread_mutex_unlock(&h->mu);
  atomic_fetch_add_explicit(&h->polls, 1, memory_order_relaxed);
  xgr_engine_due_key keys[DUE_PAGE];
  for (;;) {
    size_t n = 0;
    if (h->cfg.due(h->cfg.ctx, &h->cursor, upto, keys, DUE_PAGE, &n)) return;   /* try again next poll */
    for (size_t i = 0; i < n && !atomic_load(&e->stopping); i++) {
      poll_load(e, &keys[i]);   /* a failed load is counted and tried again (retry_due) */
      h->cursor = keys[i];
    }
    if (n < DUE_PAGE || atomic_load(&e->stopping)) return;
  }
}

static void *hib_main(void *arg) {
  xgr_engine *e = arg;
  hib_state *h = &e->hib;
  pthread_mutex_lock(&h->mu);
  while (!h->stop) {
    hib_item *list = h->head;
    h->head = h->tail = NULL;
    pthread_mutex_unlock(&h->mu);
    drain(e, list);
    if (h->nretry) retry_due(e);
    poll_due(e);
    pthread_mutex_lock(&h->mu);
    if (h->stop || h->head) continue;
    struct timespec ts = xgr__mono_deadline(h->cfg.poll_ms);
    pthread_cond_timedwait(&h->cv, &h->mu, &ts);
  }
  pthread_mutex_unlock(&h->mu);
  return NULL;
}

int xgr_engine_hibernation_start(xgr_engine *e, int64_t loaded_upto, xgr_error *err) {
  hib_state *h = &e->hib;
  if (!h->configured) return xgr_error_set(err, XGR_ESTATE, NULL, "hibernation is not configured (needs a store)");
  if (atomic_load(&h->on)) return 0;
  pthread_mutex_lock(&h->mu);
  h->upto = loaded_upto;
  pthread_mutex_unlock(&h->mu);
  /* recovery loaded every due time up to loaded_upto: the poller goes on after it */
  h->cursor = (xgr_engine_due_key){.due = loaded_upto};
  memset(h->cursor.owner, 0xff, sizeof h->cursor.owner - 1);
  h->cursor.root_pid = UINT64_MAX;
  atomic_store(&h->on, true);
  if (pthread_create(&h->th, NULL, hib_main, e)) {
    atomic_store(&h->on, false);
    return xgr_error_set(err, XGR_EIO, NULL, "cannot start the hibernation thread");
  }
  h->started = true;
  pthread_setname_np(h->th, "xgr-hibernate");
  return 0;
}

void xgr_eng_hib_stop(xgr_engine *e) {
  hib_state *h = &e->hib;
  pthread_mutex_lock(&h->mu);
  h->stop = true;
  pthread_cond_broadcast(&h->cv);
  hib_item *list = h->head;
  h->head = h->tail = NULL;
  pthread_mutex_unlock(&h->mu);
  if (h->started) pthread_join(h->th, NULL);
  h->started = false;
  pthread_mutex_lock(&h->mu);   /* items queued while the thread finished */
  hib_item *rest = h->head;
  h->head = h->tail = NULL;
  pthread_mutex_unlock(&h->mu);
  for (int pass = 0; pass < 2; pass++)
    for (hib_item *it = pass ? rest : list, *nx; it; it = nx) {
      nx = it->next;
      if (it->kind == MSG_CTL) {
        ctl_msg *m = it->msg;
        if (m->done) m->done(m->done_ctx, XGR_EIO, "the engine is shutting down");
        m->done = NULL;
        xgr_eng_ctl_free(m);
      } else {
        xgr_eng_iwake_free(it->msg);
      }
      free(it);
    }
}

void xgr_eng_hib_destroy(xgr_engine *e) {
  hib_state *h = &e->hib;
  pthread_mutex_destroy(&h->mu);
  pthread_cond_destroy(&h->cv);
  for (int i = 0; i < 64; i++) pthread_mutex_destroy(&h->load_mu[i]);
  free(h->retry);
}

int64_t xgr_engine_hib_horizon(xgr_engine *e) {
  hib_state *h = &e->hib;
  int64_t now = xgr_eng_now(e) + (h->configured ? h->cfg.lead_ms : 0);
  pthread_mutex_lock(&h->mu);
  int64_t upto = h->upto;
  pthread_mutex_unlock(&h->mu);
  return upto > now ? upto : now;
}

void xgr_engine_hib_get_stats(xgr_engine *e, xgr_engine_hib_stats *out) {
  out->evicted = atomic_load(&e->hib.evicted);
  out->loaded = atomic_load(&e->hib.loaded);
  out->load_failed = atomic_load(&e->hib.load_failed);
  out->polls = atomic_load(&e->hib.polls);
  out->load_retried = atomic_load(&e->hib.load_retried);
  out->retry_dropped = atomic_load(&e->hib.retry_dropped);
}
