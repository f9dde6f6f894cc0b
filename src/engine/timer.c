/* timer.c — the engine clock, the timer heaps and the timer thread.
 *
 * Clock: real (ms since creation), scaled (times a factor) or stepped (virtual; see below), each
 * plus the configured origin.
 *
 * Heaps: every heap is a 4-ary min-heap of (deadline, sequence, target). A 4-ary heap is
 * shallower than a binary one (10 levels for a million entries) and its four children share a
 * cache line or two, so pushes and pops stay cheap with a million pending timers.
 *
 * Real and scaled clocks — per-worker heaps. An actor arms its timer in the heap of the worker it
 * runs on (a slot claimed by that worker on first use; engine_impl.h, wtimers). A worker fires due
 * entries of its own heap at the end of an actor turn, by sending MSG_TIMER with xgr_ctx_send,
 * which puts the actor on the worker's own deque: no thread hop, no futex, no global queue, and
 * the actor's next timer lands in the same heap. It does so only while its deque is short
 * (xgr_eng_timers_poll: up to 64 at once below LOW_QUEUE items; above, one entry per turn once it
 * is LATE_NS overdue, so timers cannot starve): the heap is where a session waits, so sessions
 * stay on the worker whose caches and malloc arena hold them. A worker with nothing queued and
 * none of its own timers due within SOON_NS also takes due entries of its neighbour's heap
 * (trylock) — from its actor turns and from the runtime's idle hook, which idle workers call
 * between looking for work.
 *
 * The timer thread is the backstop: a worker that parks marks its heap unattended (polled_ns 0)
 * and wakes the thread, which fires that heap at its deadlines; a worker that runs notes when it
 * last looked (polled_ns, at most one store per 50 us), and the thread fires its heap only
 * BACKSTOP_NS after that (it is stuck in a long step). The thread sleeps towards the earliest of
 * those times. An arm signals it only when it makes its heap's minimum earlier than the deadline
 * the thread sleeps towards (the thread publishes it in sleep_until, then re-reads the heap
 * minimums: with both sides sequentially consistent, either the arm sees the value and signals,
 * or the thread sees the new minimum). Under load the thread sleeps; the workers fire everything.
 *
 * Central heap: xgr_engine_at callbacks (and timers armed off the workers) live in the timer
 * thread's own heap, fed through a mutex-protected incoming array. Callbacks run on the timer
 * thread, before actor timers of the same or a later deadline: cb_min publishes the earliest
 * callback not yet run, and nobody fires a worker-heap entry at or after it; right after running
 * callbacks the thread fires the entries they held back itself.
 *
 * A timer either sends MSG_TIMER (with its deadline) to an actor, or runs an xgr_engine_at
 * callback. Actors do not cancel timers: a stale one arrives, the actor sees its deadline is not
 * the one it armed, and ignores it (lazy deletion).
 *
 * Stepped clock: every timer lives in the central heap. Every event in flight (messages, step
 * yields, store commits, pending callbacks) is counted in e->busy; when it is zero the whole
 * engine is quiescent, and the timer thread moves virtual time to the earliest deadline and
 * fires everything due then. Time therefore behaves as in the deterministic driver while steps
 * of one instant run concurrently.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine_impl.h"
#include "util/alloc.h"
#include "util/clock.h"

int64_t xgr_eng_now(xgr_engine *e) { return xgr_eng_now_at(e, e->stepped ? 0 : xgr__mono_ns()); }

int64_t xgr_eng_now_at(xgr_engine *e, uint64_t mono_ns) {
  if (e->stepped) return atomic_load_explicit(&e->vnow, memory_order_acquire);
  uint64_t dt = mono_ns - e->t0_ns;
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
    *heap = xgr__xrealloc(*heap, *cap * sizeof **heap);
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

static void signal_thread(timers *t) {
  pthread_mutex_lock(&t->mu);
  pthread_cond_signal(&t->cv);
  pthread_mutex_unlock(&t->mu);
}

static void add_entry(xgr_engine *e, int64_t at, uint64_t target, bool cb) {
  timers *t = &e->tm;
  pthread_mutex_lock(&t->mu);
  if (t->nin == t->capin) {
    t->capin = t->capin ? t->capin * 2 : 256;
    t->in = xgr__xrealloc(t->in, t->capin * sizeof *t->in);
  }
  uint64_t seq = t->seq++;
  t->in[t->nin++] = (timer_ent){at, cb ? seq | (1ull << 63) : seq, target};
  /* workers hold back actor timers due at or after a pending callback (callbacks go first) */
  if (at < atomic_load_explicit(&t->cb_min, memory_order_relaxed)) atomic_store(&t->cb_min, at);
  /* wake the thread only if it sleeps towards a later deadline (or polls under the stepped clock) */
  if (!e->stepped && at < atomic_load_explicit(&t->sleep_until, memory_order_relaxed)) pthread_cond_signal(&t->cv);
  pthread_mutex_unlock(&t->mu);
}

/* The heap of worker w, claimed on first use; NULL if every heap belongs to another worker. */
static wtimers *heap_of(timers *t, const xgr_worker *w) {
  for (unsigned i = 0; i < t->nw; i++) {
    const xgr_worker *o = atomic_load_explicit(&t->owners[i], memory_order_acquire);
    if (o == w) return &t->w[i];
    if (!o) {
      const xgr_worker *none = NULL;
      if (atomic_compare_exchange_strong(&t->owners[i], &none, w) || none == w) return &t->w[i];
    }
  }
  return NULL;
}

wtimers *xgr_eng_wslot(xgr_engine *e, const xgr_ctx *ctx) {
  return e->tm.nw && ctx && ctx->worker ? heap_of(&e->tm, ctx->worker) : NULL;
}

void xgr_eng_timer_add(xgr_engine *e, wtimers *w, int64_t at, xgr_pid pid) {
  timers *t = &e->tm;
  if (!w) {
    add_entry(e, at, pid, false);
    return;
  }
  pthread_mutex_lock(&w->mu);
  xgr_eng_heap_push(&w->heap, &w->n, &w->cap, (timer_ent){at, w->seq++, pid});
  bool earliest = w->heap[0].at == at && at < atomic_load_explicit(&w->min, memory_order_relaxed);
  if (earliest) atomic_store(&w->min, at);   /* seq_cst: pairs with the thread's sleep_until store */
  pthread_mutex_unlock(&w->mu);
  /* the timer thread is the backstop for idle workers: tell it only about an earlier deadline */
  if (earliest && at < atomic_load(&t->sleep_until)) signal_thread(t);
}

int xgr_eng_timer_add_cb(xgr_engine *e, int64_t at, at_cb *cb) {
  atomic_fetch_add(&e->pending_at, 1);
  add_entry(e, at, (uint64_t)(uintptr_t)cb, true);
  return 0;
}

/* ---- firing -------------------------------------------------------------------------------- */

static void send_timer(xgr_engine *e, const xgr_ctx *ctx, const timer_ent *te) {
  /* the deadline travels as the message data (never dereferenced) */
  xgr_eng_send(e, ctx, (xgr_pid)te->target, MSG_TIMER, (void *)(intptr_t)te->at);
}

/* Fire up to max entries of w due at `limit` or earlier, at most 64 per lock hold, sending
 * outside the lock. With try set, give up when the heap is locked (someone else is firing it). */
static void fire_heap(xgr_engine *e, wtimers *w, int64_t limit, const xgr_ctx *ctx, bool try, size_t max) {
  timer_ent due[64];
  for (;;) {
    if (try ? pthread_mutex_trylock(&w->mu) != 0 : pthread_mutex_lock(&w->mu) != 0) return;
    size_t nd = 0, batch = max < 64 ? max : 64;
    while (w->n && w->heap[0].at <= limit && nd < batch) due[nd++] = xgr_eng_heap_pop(w->heap, &w->n);
    atomic_store_explicit(&w->min, w->n ? w->heap[0].at : INT64_MAX, memory_order_relaxed);
    if (nd)
      atomic_store_explicit(&w->fired, atomic_load_explicit(&w->fired, memory_order_relaxed) + nd,
                            memory_order_relaxed);
    bool more = w->n && w->heap[0].at <= limit;
    pthread_mutex_unlock(&w->mu);
    for (size_t i = 0; i < nd; i++) send_timer(e, ctx, &due[i]);
    max -= nd;
    if (!more || !max) return;
  }
}

/* What may fire now: due, and not at or after a callback that has not run yet. */
static int64_t fire_limit(timers *t, int64_t now) {
  int64_t cb = atomic_load_explicit(&t->cb_min, memory_order_acquire);
  return cb <= now ? cb - 1 : now;
}

/* Workers fire timers only while their deque is short (fewer than LOW_QUEUE items): the heap is
 * where sessions wait, so a busy worker does not pour its heap onto its deque, and no other worker
 * takes timers from it — a session stays on the worker (its caches, its malloc arena) it ran on.
 * With a long deque, one entry overdue by LATE_NS (real time) still fires per turn, so timers do
 * not starve behind work that keeps a deque full. A neighbour's heap is looked at only by a worker
 * with nothing queued and none of its own timers due within SOON_NS (timers follow the work to a
 * worker that has time, but a worker about to be busy again keeps its own sessions: on the
 * 10,000-loop benchmark this moved 2.3 % of actor turns to the other worker before). */
#define LOW_QUEUE 8
#define LATE_NS 5000000u
#define SOON_NS 250000u

void xgr_eng_timers_poll(xgr_engine *e, wtimers *own, const xgr_ctx *ctx, int64_t now, uint64_t mono_ns) {
  timers *t = &e->tm;
  if (!own) return;
  size_t q = xgr_ctx_queued(ctx);
  int64_t limit = fire_limit(t, now);
  int64_t m = atomic_load_explicit(&own->min, memory_order_relaxed);
  if (m != INT64_MAX) {
    /* tell the timer thread this heap is looked after (at most one store per 50 us) */
    if (mono_ns - atomic_load_explicit(&own->polled_ns, memory_order_relaxed) > 50000u)
      atomic_store_explicit(&own->polled_ns, mono_ns, memory_order_relaxed);
    if (m <= limit) {
      if (q < LOW_QUEUE) fire_heap(e, own, limit, ctx, false, 64);
      else if (mono_ns > real_ns_of(e, m) + LATE_NS) fire_heap(e, own, limit, ctx, false, 1);
      return;
    }
  }
  if (q || t->nw < 2) return;
  /* own timers due within SOON_NS: wait for them rather than move the neighbour's sessions here */
  if (m != INT64_MAX && real_ns_of(e, m) < mono_ns + SOON_NS) return;
  wtimers *nb = &t->w[(size_t)(own - t->w + 1) % t->nw];
  if (atomic_load_explicit(&nb->min, memory_order_relaxed) <= limit) fire_heap(e, nb, limit, ctx, true, 64);
}

bool xgr_eng_timers_idle(void *engine, const xgr_ctx *ctx, bool parking) {
  xgr_engine *e = engine;
  wtimers *own = xgr_eng_wslot(e, ctx);
  if (!own) return false;
  uint64_t mono = xgr__mono_ns();
  xgr_eng_timers_poll(e, own, ctx, xgr_eng_now_at(e, mono), mono);
  if (xgr_ctx_queued(ctx)) return true;   /* timers fired (or work arrived): look again */
  if (!parking) return false;
  /* parking: nobody looks after this heap now; the timer thread fires it at its deadlines */
  atomic_store(&own->polled_ns, 0);
  if (atomic_load(&own->min) != INT64_MAX) signal_thread(&e->tm);
  return false;
}

uint64_t xgr_eng_steps(xgr_engine *e) {
  uint64_t n = atomic_load(&e->st_steps);
  for (unsigned i = 0; i < e->tm.nw; i++) n += atomic_load_explicit(&e->tm.w[i].steps, memory_order_relaxed);
  return n;
}

static void fire(xgr_engine *e, const timer_ent *te, int64_t now) {
  if (te->seq >> 63) {
    at_cb *cb = (at_cb *)(uintptr_t)te->target;
    cb->fn(cb->ctx, now);
    free(cb);
    if (atomic_fetch_sub(&e->pending_at, 1) == 1) xgr_eng_notify_waiters(e);
    return;
  }
  atomic_fetch_add_explicit(&e->st_timers, 1, memory_order_relaxed);
  send_timer(e, NULL, te);
}

static void drain_incoming(timers *t) {
  for (size_t i = 0; i < t->nin; i++) xgr_eng_heap_push(&t->heap, &t->n, &t->cap, t->in[i]);
  t->nin = 0;
}

/* Worker-heap entries are the workers' to fire while they run; the timer thread fires the
 * entries of an active worker still there this long (real time) after their deadline and after
 * the worker last looked — it is stuck in a long step — and those of a parked worker at once. */
#define BACKSTOP_NS 2000000u

static void *timer_main(void *arg) {
  xgr_engine *e = arg;
  timers *t = &e->tm;
  timer_ent *due = NULL;
  size_t ndue = 0, capdue = 0;
  bool ran_cb = false;
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
      atomic_store_explicit(&t->cb_min, t->n ? t->heap[0].at : INT64_MAX, memory_order_release);
      if (t->n == 0 || t->heap[0].at > now) {
        /* the workers' heaps: fire what stayed overdue (right after callbacks ran: what they held
         * back), else sleep towards the earliest deadline (plus the grace) */
        uint64_t rnow = xgr__mono_ns(), wake = UINT64_MAX;
        int64_t until = t->n ? t->heap[0].at : INT64_MAX;
        bool fired = false;
        for (unsigned i = 0; i < t->nw; i++) {
          int64_t m = atomic_load(&t->w[i].min);
          if (m == INT64_MAX) continue;
          /* a parked owner (polled 0) leaves its heap to us at the deadline; an active one
           * fires it itself, we step in only after BACKSTOP_NS without a look */
          uint64_t mr = real_ns_of(e, m), polled = atomic_load_explicit(&t->w[i].polled_ns, memory_order_relaxed);
          if (polled) mr = (polled > mr ? polled : mr) + BACKSTOP_NS;
          if (m <= now && (ran_cb || rnow >= mr)) {
            pthread_mutex_unlock(&t->mu);
            fire_heap(e, &t->w[i], fire_limit(t, now), NULL, false, SIZE_MAX);
            pthread_mutex_lock(&t->mu);
            fired = true;
            continue;
          }
          if (m < until) until = m;
          if (mr < wake) wake = mr;
        }
        ran_cb = false;
        if (fired) continue;
        if (t->n) {
          uint64_t cr = real_ns_of(e, t->heap[0].at);
          if (cr < wake) wake = cr;
        }
        atomic_store(&t->sleep_until, until);   /* seq_cst: an arm either sees it or we see its min */
        bool raced = false;
        for (unsigned i = 0; i < t->nw && !raced; i++) raced = atomic_load(&t->w[i].min) < until;
        if (!raced && !t->stop && !t->nin) {
          if (wake == UINT64_MAX) {
            pthread_cond_wait(&t->cv, &t->mu);
          } else {
            /* condvar waits use CLOCK_MONOTONIC (set at init) */
            struct timespec ts = {(time_t)(wake / 1000000000u), (long)(wake % 1000000000u)};
            pthread_cond_timedwait(&t->cv, &t->mu, &ts);
          }
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
        due = xgr__xrealloc(due, capdue * sizeof *due);
      }
      due[ndue++] = xgr_eng_heap_pop(t->heap, &t->n);
    }
    pthread_mutex_unlock(&t->mu);
    for (size_t i = 0; i < ndue; i++) fire(e, &due[i], now);
    ran_cb = true;
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
  atomic_init(&t->cb_min, INT64_MAX);
  if (!e->stepped) {
    t->nw = xgr_rt_workers(e->rt);
    t->w = xgr__xaligned_alloc(64, t->nw * sizeof *t->w);
    t->owners = xgr__xcalloc(t->nw, sizeof *t->owners);
    memset(t->w, 0, t->nw * sizeof *t->w);
    for (unsigned i = 0; i < t->nw; i++) {
      pthread_mutex_init(&t->w[i].mu, NULL);
      atomic_init(&t->w[i].min, INT64_MAX);
      atomic_init(&t->w[i].fired, 0);
      atomic_init(&t->w[i].polled_ns, 0);
      atomic_init(&t->w[i].steps, 0);
      atomic_init(&t->owners[i], NULL);
    }
  }
  if (pthread_create(&t->th, NULL, timer_main, e)) return xgr_error_set(err, XGR_ENOMEM, NULL, "cannot start the timer thread");
  pthread_setname_np(t->th, "xgr-timers");
  t->started = true;
  return 0;
}

/* Timers fired so far (the thread's and the workers' heaps). */
uint64_t xgr_eng_timers_fired(xgr_engine *e) {
  uint64_t n = atomic_load(&e->st_timers);
  for (unsigned i = 0; i < e->tm.nw; i++) n += atomic_load_explicit(&e->tm.w[i].fired, memory_order_relaxed);
  return n;
}

/* Stop the thread (the workers are stopped already); callbacks still pending are freed without
 * running. */
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
  for (unsigned i = 0; i < t->nw; i++) {
    free(t->w[i].heap);
    pthread_mutex_destroy(&t->w[i].mu);
  }
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
