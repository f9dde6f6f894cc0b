/* timer.c — the engine clock and the timer thread.
 *
 * Clock: real (ms since creation), scaled (times a factor) or stepped (virtual; see below), each
 * plus the configured origin.
 *
 * Timers: a 4-ary min-heap of (deadline, sequence, target) owned by the timer thread. A 4-ary heap
 * is shallower than a binary one (10 levels for a million entries) and its four children share a
 * cache line or two, so pushes and pops stay cheap with a million pending timers. Other threads
 * never touch the heap: they append to an incoming array under a mutex, and wake the thread only
 * when the new deadline is earlier than the one it sleeps towards (an atomic load), so the common
 * case — a later deadline — costs one short critical section.
 *
 * A timer either sends MSG_TIMER (with its deadline) to an actor, or runs an xgr_engine_at
 * callback. Actors do not cancel timers: a stale one arrives, the actor sees its deadline is not
 * the one it armed, and ignores it (lazy deletion).
 *
 * Stepped clock: every event in flight (messages, step yields, store commits, pending callbacks)
 * is counted in e->busy; when it is zero the whole engine is quiescent, and the timer thread moves
 * virtual time to the earliest deadline and fires everything due then. Time therefore behaves as
 * in the deterministic driver while steps of one instant run concurrently.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine_int.h"

uint64_t xgr_eng_mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int64_t xgr_eng_now(xgr_engine *e) {
  if (e->stepped) return atomic_load_explicit(&e->vnow, memory_order_acquire);
  uint64_t dt = xgr_eng_mono_ns() - e->t0_ns;
  if (e->cfg.clock.kind == XGR_CLOCK_SCALED) return e->cfg.clock.origin_ms + (int64_t)((double)dt * e->cfg.clock.scale / 1e6);
  return e->cfg.clock.origin_ms + (int64_t)(dt / 1000000u);
}

/* Real monotonic ns at which the engine clock reads `at`. */
static uint64_t real_ns_of(xgr_engine *e, int64_t at) {
  double ms = (double)(at - e->cfg.clock.origin_ms);
  if (ms < 0) ms = 0;
  if (e->cfg.clock.kind == XGR_CLOCK_SCALED) ms /= e->cfg.clock.scale;
  double ns = ms * 1e6;
  if (ns > 9e18) ns = 9e18;
  return e->t0_ns + (uint64_t)ns;
}

void xgr_eng_busy_add(xgr_engine *e, long n) {
  if (e->stepped) atomic_fetch_add_explicit(&e->busy, n, memory_order_seq_cst);
}

/* ---- the 4-ary heap ------------------------------------------------------------------------ */

/* Order: deadline, then callbacks before actor timers (scripted actions due at the same time as
 * a process go first, as in the deterministic driver), then scheduling order. */
static bool before(const timer_ent *a, const timer_ent *b) {
  if (a->at != b->at) return a->at < b->at;
  if ((a->seq >> 63) != (b->seq >> 63)) return (a->seq >> 63) > (b->seq >> 63);
  return a->seq < b->seq;
}

void xgr_eng_heap_push(timer_ent **heap, size_t *n, size_t *cap, timer_ent e) {
  if (*n == *cap) {
    *cap = *cap ? *cap * 2 : 256;
    *heap = realloc(*heap, *cap * sizeof **heap);
    if (!*heap) abort();
  }
  timer_ent *h = *heap;
  size_t i = (*n)++;
  while (i > 0) {
    size_t p = (i - 1) / 4;
    if (!before(&e, &h[p])) break;
    h[i] = h[p];
    i = p;
  }
  h[i] = e;
}

/* Remove and return the minimum; *n must be > 0. */
timer_ent xgr_eng_heap_pop(timer_ent *h, size_t *n) {
  timer_ent top = h[0];
  timer_ent last = h[--(*n)];
  size_t i = 0, m = *n;
  for (;;) {
    size_t c = 4 * i + 1;
    if (c >= m) break;
    size_t best = c;
    size_t end = c + 4 < m ? c + 4 : m;
    for (size_t k = c + 1; k < end; k++)
      if (before(&h[k], &h[best])) best = k;
    if (!before(&h[best], &last)) break;
    h[i] = h[best];
    i = best;
  }
  if (m) h[i] = last;
  return top;
}

/* ---- adding ------------------------------------------------------------------------------- */

static void add_entry(xgr_engine *e, int64_t at, uint64_t target, bool cb) {
  timers *t = &e->tm;
  pthread_mutex_lock(&t->mu);
  if (t->nin == t->capin) {
    t->capin = t->capin ? t->capin * 2 : 256;
    t->in = realloc(t->in, t->capin * sizeof *t->in);
    if (!t->in) abort();
  }
  uint64_t seq = t->seq++;
  t->in[t->nin++] = (timer_ent){at, cb ? seq | (1ull << 63) : seq, target};
  /* wake the thread only if it sleeps towards a later deadline (or polls under the stepped clock) */
  if (!e->stepped && at < atomic_load_explicit(&t->sleep_until, memory_order_relaxed)) pthread_cond_signal(&t->cv);
  pthread_mutex_unlock(&t->mu);
}

void xgr_eng_timer_add(xgr_engine *e, int64_t at, xgr_pid pid) { add_entry(e, at, pid, false); }

int xgr_eng_timer_add_cb(xgr_engine *e, int64_t at, at_cb *cb) {
  atomic_fetch_add(&e->pending_at, 1);
  add_entry(e, at, (uint64_t)(uintptr_t)cb, true);
  return 0;
}

/* ---- the thread ----------------------------------------------------------------------------- */

static void fire(xgr_engine *e, const timer_ent *te, int64_t now) {
  if (te->seq >> 63) {
    at_cb *cb = (at_cb *)(uintptr_t)te->target;
    cb->fn(cb->ctx, now);
    free(cb);
    if (atomic_fetch_sub(&e->pending_at, 1) == 1) xgr_eng_notify_waiters(e);
    return;
  }
  atomic_fetch_add_explicit(&e->st_timers, 1, memory_order_relaxed);
  /* the deadline travels as the message data (never dereferenced) */
  xgr_eng_send(e, NULL, (xgr_pid)te->target, MSG_TIMER, (void *)(intptr_t)te->at);
}

static void drain_incoming(timers *t) {
  for (size_t i = 0; i < t->nin; i++) xgr_eng_heap_push(&t->heap, &t->n, &t->cap, t->in[i]);
  t->nin = 0;
}

static void *timer_main(void *arg) {
  xgr_engine *e = arg;
  timers *t = &e->tm;
  timer_ent *due = NULL;
  size_t ndue = 0, capdue = 0;
  pthread_mutex_lock(&t->mu);
  while (!t->stop) {
    drain_incoming(t);
    int64_t now;
    if (e->stepped) {
      if (atomic_load(&e->busy) != 0 || t->n == 0) {
        pthread_mutex_unlock(&t->mu);
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&t->mu);
        continue;
      }
      now = atomic_load(&e->vnow);
      if (t->heap[0].at > now) {
        now = t->heap[0].at;
        atomic_store_explicit(&e->vnow, now, memory_order_release);
      }
    } else {
      now = xgr_eng_now(e);
      if (t->n == 0 || t->heap[0].at > now) {
        int64_t until = t->n ? t->heap[0].at : INT64_MAX;
        atomic_store_explicit(&t->sleep_until, until, memory_order_relaxed);
        if (until == INT64_MAX) {
          pthread_cond_wait(&t->cv, &t->mu);
        } else {
          uint64_t ns = real_ns_of(e, until);
          /* condvar waits use CLOCK_MONOTONIC (set at init) */
          struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
          pthread_cond_timedwait(&t->cv, &t->mu, &ts);
        }
        atomic_store_explicit(&t->sleep_until, INT64_MAX, memory_order_relaxed);
        continue;
      }
    }
    /* collect everything due, fire outside the lock */
    ndue = 0;
    while (t->n && t->heap[0].at <= now) {
      if (ndue == capdue) {
        capdue = capdue ? capdue * 2 : 256;
        due = realloc(due, capdue * sizeof *due);
        if (!due) abort();
      }
      due[ndue++] = xgr_eng_heap_pop(t->heap, &t->n);
    }
    pthread_mutex_unlock(&t->mu);
    for (size_t i = 0; i < ndue; i++) fire(e, &due[i], now);
    pthread_mutex_lock(&t->mu);
  }
  pthread_mutex_unlock(&t->mu);
  free(due);
  return NULL;
}

int xgr_eng_timers_start(xgr_engine *e, xgr_error *err) {
  timers *t = &e->tm;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->cv, &ca);
  pthread_condattr_destroy(&ca);
  atomic_init(&t->sleep_until, INT64_MAX);
  if (pthread_create(&t->th, NULL, timer_main, e)) return xgr_error_set(err, XGR_ENOMEM, NULL, "cannot start the timer thread");
  t->started = true;
  return 0;
}

/* Stop the thread; callbacks still pending are freed without running. */
void xgr_eng_timers_stop(xgr_engine *e) {
  timers *t = &e->tm;
  if (!t->started) return;
  pthread_mutex_lock(&t->mu);
  t->stop = true;
  pthread_cond_signal(&t->cv);
  pthread_mutex_unlock(&t->mu);
  pthread_join(t->th, NULL);
  t->started = false;
  drain_incoming(t);
  for (size_t i = 0; i < t->n; i++)
    if (t->heap[i].seq >> 63) free((at_cb *)(uintptr_t)t->heap[i].target);
  free(t->heap);
  free(t->in);
  t->heap = t->in = NULL;
  t->n = t->nin = 0;
  pthread_mutex_destroy(&t->mu);
  pthread_cond_destroy(&t->cv);
}

/* ---- latency histograms: 8 sub-buckets per power of two from 256 ns ------------------------- */

static unsigned lat_bucket(uint64_t ns) {
  if (ns < 256) return (unsigned)(ns / 32);            /* 0..7: linear below 256 ns */
  unsigned oct = 63u - (unsigned)__builtin_clzll(ns);  /* >= 8 */
  unsigned sub = (unsigned)((ns >> (oct - 3)) & 7u);
  unsigned idx = (oct - 7) * LAT_SUB + sub;
  return idx < LAT_OCT * LAT_SUB ? idx : LAT_OCT * LAT_SUB - 1;
}

static uint64_t lat_value(unsigned idx) {
  if (idx < LAT_SUB) return (uint64_t)idx * 32 + 16;
  unsigned oct = idx / LAT_SUB + 7, sub = idx % LAT_SUB;
  uint64_t lo = (1ull << oct) + ((uint64_t)sub << (oct - 3));
  return lo + (1ull << (oct - 4));                     /* middle of the bucket */
}

void xgr_eng_lat_add(lat_hist *h, uint64_t ns) {
  h->b[lat_bucket(ns)]++;
  h->count++;
  if (ns > h->max) h->max = ns;
}

void xgr_eng_lat_merge(lat_hist *into, const lat_hist *h) {
  for (size_t i = 0; i < LAT_OCT * LAT_SUB; i++) into->b[i] += h->b[i];
  into->count += h->count;
  if (h->max > into->max) into->max = h->max;
}

uint64_t xgr_eng_lat_quantile(const lat_hist *h, double q) {
  if (!h->count) return 0;
  uint64_t want = (uint64_t)((double)h->count * q);
  if (want >= h->count) want = h->count - 1;
  uint64_t seen = 0;
  for (unsigned i = 0; i < LAT_OCT * LAT_SUB; i++) {
    seen += h->b[i];
    if (seen > want) return lat_value(i) < h->max ? lat_value(i) : h->max;
  }
  return h->max;
}
