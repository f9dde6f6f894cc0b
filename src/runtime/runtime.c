/* runtime.c — the work-stealing runtime of seed 002 (see xgr/runtime.h and docs/RUNTIME.md).
 *
 * Pieces, in the order they appear below:
 *  - process records and the PID registry: records live in chunks that are never freed while the
 *    runtime lives ("type-stable" memory), so a lookup by pid can read a record that is being
 *    recycled without danger. A pid names slot index + generation; a lookup takes a reference
 *    (CAS "increment unless zero") and then checks that the slot still carries that pid.
 *  - the process state machine: one atomic word holds the state (Ready, Running, Blocked, Idle,
 *    Complete) plus two wake-up flags. Producers of events (send, complete_yield, cancel) push the
 *    event onto the process's MPSC queue and then either move Idle/Blocked -> Ready (and schedule
 *    it) or, if the process is Running, set a flag by CAS; the worker that finishes a step moves
 *    Running -> Idle/Blocked by CAS, which fails if a flag appeared, in which case it re-queues the
 *    process instead. So no wake-up is lost and no process runs on two workers at once.
 *  - the global FIFO queue (mutex + ring) for submissions from non-worker threads.
 *  - workers: find work (own deque, global queue with batch transfer, steal half from a random
 *    victim), spin adaptively, park on a futex when idle; submitters wake a parked worker only if
 *    the parked count is non-zero.
 *  - command dispatch to handlers (inline, task, own threads).
 *  - spawn/send/complete_yield, shutdown, counters.
 */
#include "xgr/runtime.h"
#include "util/alloc.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#include "runtime/deque_impl.h"
#include "runtime/mpsc_impl.h"
#include "util/clock.h"

/* ---- small helpers ------------------------------------------------------------------------- */
static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* Counters: each worker owns its set and is the only writer (relaxed load + store, no RMW);
 * threads that are not workers add to the runtime's own set with atomic adds. */
typedef struct rt_counters {
  _Atomic uint64_t spawned, completed, failed, steps, events, messages, yields, completions, tasks,
      steals, stolen, global_batches, global_items, spins, yields_os, parks, wakeups;
} rt_counters;

#define CNT_W(w, f, n)                                                                             \
  atomic_store_explicit(&(w)->cnt.f, atomic_load_explicit(&(w)->cnt.f, memory_order_relaxed) + (n), \
                        memory_order_relaxed)
#define CNT(rt, w, f, n)                                                                           \
  do {                                                                                             \
    if (w) CNT_W(w, f, n);                                                                         \
    else atomic_fetch_add_explicit(&(rt)->ext.f, (n), memory_order_relaxed);                      \
  } while (0)

/* ---- items ------------------------------------------------------------------------------------
 * Deques and the global queue hold pointers to items: a process record or a handler task. */
enum { ITEM_PROC = 1, ITEM_TASK = 2 };
typedef struct rt_item {
  uint32_t kind;
} rt_item;

/* A XGR_HANDLER_TASK command waiting to run on a worker. */
typedef struct rt_task {
  rt_item item;
  const xgr_handler *h;
  xgr_pid pid;
  xgr_cmd cmd;
} rt_task;

/* An event on its way to a process: the MPSC link followed by the event itself. */
typedef struct rt_ev_node {
  rt_mpsc_node link;
  xgr_event ev;
} rt_ev_node;

/* ---- process records ----------------------------------------------------------------------
 * State word: low byte = state, plus wake flags set by producers while the process runs. */
enum { ST_FREE = 0, ST_READY = 1, ST_RUNNING = 2, ST_BLOCKED = 3, ST_IDLE = 4, ST_COMPLETE = 5 };
#define ST_MASK 0xffu
#define WAKE_MSG 0x100u    /* a message arrived while Running */
#define WAKE_URGENT 0x200u /* a yield completion or cancel arrived while Running */

#define RT_INLINE_STATE 64 /* bytes of per-process state kept inside the record */
#define RT_CHUNK_SHIFT 10
#define RT_CHUNK (1u << RT_CHUNK_SHIFT) /* records per chunk */
#define RT_MAX_CHUNKS (1u << 16)        /* so at most 64 Mi records (live processes) */
#define RT_CACHE_MAX 256                /* free records a worker keeps before returning half */

typedef struct rt_proc {
  rt_item item;               /* kind = ITEM_PROC; the record itself is what deques hold */
  uint32_t index;             /* slot index, fixed for the record's life */
  _Atomic uint64_t pid;       /* current pid (generation << 32 | index), 0 while free */
  _Atomic uint32_t state;     /* ST_* | WAKE_* */
  _Atomic uint32_t refs;      /* 1 for the registry while not complete + 1 per ongoing lookup */
  rt_mpsc q;                  /* pending events */
  /* Fields below are written by the spawner or the running worker; the state transitions and
   * the deques order those accesses. */
  const xgr_process_vt *vt;
  void *self;
  struct rt_proc *free_next;  /* free list link while ST_FREE */
  uint32_t gen;               /* generation of the current (or last) pid */
  uint8_t want;               /* status the last step reported (what the process waits for) */
  uint8_t started;            /* step() has run at least once */
  uint8_t own_state;          /* self was allocated by the runtime (inline or malloc) */
  _Alignas(16) unsigned char inline_state[RT_INLINE_STATE];
} rt_proc;

/* ---- handlers --------------------------------------------------------------------------------- */
typedef struct rt_hjob {
  struct rt_hjob *next;
  xgr_pid pid;
  xgr_cmd cmd;
} rt_hjob;

/* A handler registered for one command type; XGR_HANDLER_THREAD handlers have a job queue served
 * by their own threads. */
typedef struct rt_handler {
  xgr_handler h;
  bool set;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  rt_hjob *head, *tail;
  bool stop;
  pthread_t *threads;
  unsigned nthreads;
  xgr_rt *rt;
} rt_handler;

/* ---- workers ---------------------------------------------------------------------------------- */
struct xgr_worker {
  rt_deque dq;
  xgr_rt *rt;
  unsigned id;
  pthread_t thread;
  uint64_t rng;
  rt_proc *cache;     /* free process records */
  unsigned ncache;
  uint32_t ticks;     /* find_work calls (fairness: see FAIR_EVERY) */
  xgr_event *evbuf;   /* events of the current step */
  xgr_step_out out;
  rt_counters cnt;
};

/* ---- the runtime ------------------------------------------------------------------------------ */
struct xgr_rt {
  xgr_rt_config cfg;
  unsigned nworkers;
  xgr_worker *w;                  /* nworkers entries */

  /* global FIFO: a ring buffer under a mutex; n mirrors count for lock-free emptiness checks */
  pthread_mutex_t gq_mu;
  void **gq_ring;
  size_t gq_cap, gq_head, gq_count;
  _Atomic size_t gq_n;

  /* parking: workers sleep on park_seq; wakers bump it */
  _Atomic uint32_t park_seq;
  _Atomic uint32_t nparked;
#ifndef __linux__
  pthread_mutex_t park_mu;
  pthread_cond_t park_cv;
#endif

  /* process records */
  pthread_mutex_t pool_mu;
  _Atomic(rt_proc *) chunks[RT_MAX_CHUNKS];
  _Atomic uint32_t nchunks;
  rt_proc *free_list;             /* under pool_mu */

  rt_handler handlers[XGR_RT_MAX_CMD_TYPES];

  rt_counters ext;                /* counts made outside workers */
  _Atomic int stop;               /* workers exit */
  _Atomic int closing;            /* no new spawns */
  bool started, shut;
  int shut_rc;
};

/* ---- parking ---------------------------------------------------------------------------------- */
static void park_wait(xgr_rt *rt, uint32_t seq) {
#ifdef __linux__
  syscall(SYS_futex, (uint32_t *)&rt->park_seq, FUTEX_WAIT_PRIVATE, seq, NULL, NULL, 0);
#else
  pthread_mutex_lock(&rt->park_mu);
  while (atomic_load(&rt->park_seq) == seq) pthread_cond_wait(&rt->park_cv, &rt->park_mu);
  pthread_mutex_unlock(&rt->park_mu);
#endif
}

static void park_wake(xgr_rt *rt, int n) {
  atomic_fetch_add_explicit(&rt->park_seq, 1, memory_order_release);
#ifdef __linux__
  syscall(SYS_futex, (uint32_t *)&rt->park_seq, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
#else
  pthread_mutex_lock(&rt->park_mu);
  if (n == 1) pthread_cond_signal(&rt->park_cv);
  else pthread_cond_broadcast(&rt->park_cv);
  pthread_mutex_unlock(&rt->park_mu);
#endif
}

/* After making work available: wake one parked worker, only if some worker is parked. The fence
 * pairs with the one in worker_park (store work; fence; load nparked  vs  add nparked; fence; look
 * for work), so either the submitter sees the parker or the parker sees the work. */
static inline void rt_notify(xgr_rt *rt, xgr_worker *w) {
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&rt->nparked, memory_order_relaxed) > 0) {
    park_wake(rt, 1);
    CNT(rt, w, wakeups, 1);
  }
}

/* ---- global queue ----------------------------------------------------------------------------- */
static int gq_push_locked(xgr_rt *rt, void *x) {
  if (rt->gq_count == rt->gq_cap) {
    size_t ncap = rt->gq_cap ? rt->gq_cap * 2 : 256;
    void **n = xgr__xmalloc(ncap * sizeof(*n));
    for (size_t i = 0; i < rt->gq_count; i++) n[i] = rt->gq_ring[(rt->gq_head + i) % rt->gq_cap];
    free(rt->gq_ring);
    rt->gq_ring = n;
    rt->gq_cap = ncap;
    rt->gq_head = 0;
  }
  rt->gq_ring[(rt->gq_head + rt->gq_count) % rt->gq_cap] = x;
  rt->gq_count++;
  atomic_store_explicit(&rt->gq_n, rt->gq_count, memory_order_relaxed);
  return 0;
}

static void *gq_pop_locked(xgr_rt *rt) {
  if (!rt->gq_count) return NULL;
  void *x = rt->gq_ring[rt->gq_head];
  rt->gq_head = (rt->gq_head + 1) % rt->gq_cap;
  rt->gq_count--;
  atomic_store_explicit(&rt->gq_n, rt->gq_count, memory_order_relaxed);
  return x;
}

static int gq_push(xgr_rt *rt, void *x) {
  pthread_mutex_lock(&rt->gq_mu);
  int rc = gq_push_locked(rt, x);
  pthread_mutex_unlock(&rt->gq_mu);
  return rc;
}

/* Take one item for w and move up to `batch` more onto w's deque. */
static void *gq_take_batch(xgr_rt *rt, xgr_worker *w, size_t batch) {
  pthread_mutex_lock(&rt->gq_mu);
  void *first = gq_pop_locked(rt);
  size_t moved = 0;
  if (first) {
    moved = 1;
    size_t k = rt->gq_count < batch ? rt->gq_count : batch;
    if (k && rt_dq_reserve(&w->dq, (int64_t)k)) {
      for (size_t i = 0; i < k; i++) rt_dq_push(&w->dq, gq_pop_locked(rt));
      moved += k;
    }
  }
  pthread_mutex_unlock(&rt->gq_mu);
  if (first) {
    CNT_W(w, global_batches, 1);
    CNT_W(w, global_items, moved);
    if (moved > 1) rt_notify(rt, w); /* others may help with the rest */
  }
  return first;
}

/* Make an item runnable: onto the calling worker's deque, or the global queue from outside. */
static void rt_schedule(xgr_rt *rt, xgr_worker *w, rt_item *it) {
  if (!w || !rt_dq_push(&w->dq, it)) {
    while (gq_push(rt, it) != 0) sched_yield(); /* out of memory: wait for some to be freed */
  }
  rt_notify(rt, w);
}

/* ---- process records and registry ------------------------------------------------------------ */
static rt_proc *slot_of(xgr_rt *rt, uint32_t index) {
  uint32_t c = index >> RT_CHUNK_SHIFT;
  if (c >= RT_MAX_CHUNKS) return NULL;
  rt_proc *chunk = atomic_load_explicit(&rt->chunks[c], memory_order_acquire);
  return chunk ? &chunk[index & (RT_CHUNK - 1)] : NULL;
}

/* Allocate a new chunk of records and put them on the free list. pool_mu held. */
static bool pool_grow_locked(xgr_rt *rt) {
  uint32_t c = atomic_load_explicit(&rt->nchunks, memory_order_relaxed);
  if (c >= RT_MAX_CHUNKS) return false;
  rt_proc *chunk = xgr__xaligned_alloc(64, sizeof(rt_proc) * RT_CHUNK);
  for (uint32_t i = RT_CHUNK; i-- > 0;) {
    rt_proc *p = &chunk[i];
    memset(p, 0, sizeof(*p));
    p->item.kind = ITEM_PROC;
    p->index = (c << RT_CHUNK_SHIFT) | i;
    atomic_init(&p->pid, 0);
    atomic_init(&p->state, ST_FREE);
    atomic_init(&p->refs, 0);
    rt_mpsc_init(&p->q);
    p->free_next = rt->free_list;
    rt->free_list = p;
  }
  atomic_store_explicit(&rt->chunks[c], chunk, memory_order_release);
  atomic_store_explicit(&rt->nchunks, c + 1, memory_order_release);
  return true;
}

static rt_proc *proc_alloc(xgr_rt *rt, xgr_worker *w) {
  if (w && w->cache) {
    rt_proc *p = w->cache;
    w->cache = p->free_next;
    w->ncache--;
    return p;
  }
  pthread_mutex_lock(&rt->pool_mu);
  if (!rt->free_list && !pool_grow_locked(rt)) {
    pthread_mutex_unlock(&rt->pool_mu);
    return NULL;
  }
  rt_proc *p = rt->free_list;
  rt->free_list = p->free_next;
  if (w) { /* refill the worker's cache with a batch */
    while (rt->free_list && w->ncache < RT_CACHE_MAX / 2) {
      rt_proc *q = rt->free_list;
      rt->free_list = q->free_next;
      q->free_next = w->cache;
      w->cache = q;
      w->ncache++;
    }
  }
  pthread_mutex_unlock(&rt->pool_mu);
  return p;
}

static void proc_free(xgr_rt *rt, xgr_worker *w, rt_proc *p) {
  if (w) {
    p->free_next = w->cache;
    w->cache = p;
    if (++w->ncache < RT_CACHE_MAX) return;
    /* return half of the cache to the shared list */
    pthread_mutex_lock(&rt->pool_mu);
    while (w->ncache > RT_CACHE_MAX / 2) {
      rt_proc *q = w->cache;
      w->cache = q->free_next;
      w->ncache--;
      q->free_next = rt->free_list;
      rt->free_list = q;
    }
    pthread_mutex_unlock(&rt->pool_mu);
    return;
  }
  pthread_mutex_lock(&rt->pool_mu);
  p->free_next = rt->free_list;
  rt->free_list = p;
  pthread_mutex_unlock(&rt->pool_mu);
}

static void proc_finalize(xgr_rt *rt, xgr_worker *w, rt_proc *p);

/* Drop one reference; the last one finalizes the process (on the calling thread). */
static void proc_release(xgr_rt *rt, xgr_worker *w, rt_proc *p) {
  if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1) proc_finalize(rt, w, p);
}

/* Take a reference to the live process `pid`, or return NULL. */
static rt_proc *proc_lookup(xgr_rt *rt, xgr_pid pid) {
  rt_proc *p = slot_of(rt, (uint32_t)pid);
  if (!p || pid == 0) return NULL;
  uint32_t r = atomic_load_explicit(&p->refs, memory_order_relaxed);
  do {
    if (r == 0) return NULL;
  } while (!atomic_compare_exchange_weak_explicit(&p->refs, &r, r + 1, memory_order_acquire,
                                                  memory_order_relaxed));
  if (atomic_load_explicit(&p->pid, memory_order_relaxed) != pid) {
    /* the slot holds another incarnation now: drop the reference we took on it */
    proc_release(rt, NULL, p);
    return NULL;
  }
  return p;
}

/* The last reference is gone: no producer can reach the queue any more and no worker runs the
 * process. Discard leftover events, close, recycle the record. */
static void proc_finalize(xgr_rt *rt, xgr_worker *w, rt_proc *p) {
  rt_mpsc_node *n;
  while ((n = rt_mpsc_pop(&p->q)) != NULL) {
    if (n == RT_MPSC_BUSY) continue; /* cannot happen: every producer finished before releasing */
    rt_ev_node *e = (rt_ev_node *)n;
    if (p->vt->discard) p->vt->discard(p->self, &e->ev);
    free(e);
  }
  if (p->vt->close) p->vt->close(p->self);
  if (p->own_state && p->self != (void *)p->inline_state) free(p->self);
  p->self = NULL;
  p->vt = NULL;
  atomic_store_explicit(&p->pid, 0, memory_order_relaxed);
  atomic_store_explicit(&p->state, ST_FREE, memory_order_relaxed);
  CNT(rt, w, completed, 1);
  proc_free(rt, w, p);
}


/* ---- events ----------------------------------------------------------------------------------- */
/* After pushing an event onto p's queue: make sure it will be seen. `urgent` events (yield
 * completions, cancel) wake Blocked processes; messages wake only Idle ones. */
static void proc_notify(xgr_rt *rt, xgr_worker *w, rt_proc *p, bool urgent) {
  /* Pairs with the fence after Ready -> Running in run_proc: if we read Ready, that worker's
   * drain sees our event. */
  atomic_thread_fence(memory_order_seq_cst);
  uint32_t s = atomic_load_explicit(&p->state, memory_order_relaxed);
  for (;;) {
    uint32_t st = s & ST_MASK, ns;
    if (st == ST_IDLE || (st == ST_BLOCKED && urgent)) {
      ns = ST_READY;
    } else if (st == ST_RUNNING) {
      uint32_t f = urgent ? WAKE_URGENT : WAKE_MSG;
      if (s & f) return;
      ns = s | f;
    } else {
      return; /* Ready (will drain), Blocked + message (queued), Complete (discarded) */
    }
    if (atomic_compare_exchange_weak_explicit(&p->state, &s, ns, memory_order_acq_rel,
                                              memory_order_relaxed)) {
      if (ns == ST_READY) rt_schedule(rt, w, &p->item);
      return;
    }
  }
}

/* Push an event to process `pid`. On failure the data stays with the caller. */
static int rt_deliver(xgr_rt *rt, xgr_worker *w, xgr_pid pid, xgr_event_type type, uint64_t tag,
                      xgr_pid from, void *data, int err) {
  rt_proc *p = proc_lookup(rt, pid);
  if (!p) return XGR_ENOTFOUND;
  rt_ev_node *n = xgr__xmalloc(sizeof(*n));
  n->ev.type = type;
  n->ev.err = err;
  n->ev.tag = tag;
  n->ev.from = from;
  n->ev.data = data;
  rt_mpsc_push(&p->q, &n->link);
  proc_notify(rt, w, p, type != XGR_EV_MESSAGE);
  if (type == XGR_EV_MESSAGE) CNT(rt, w, messages, 1);
  else if (type == XGR_EV_YIELD) CNT(rt, w, completions, 1);
  proc_release(rt, w, p);
  return 0;
}

/* ---- dispatch --------------------------------------------------------------------------------- */
static void hpool_push(rt_handler *rh, rt_hjob *j) {
  pthread_mutex_lock(&rh->mu);
  j->next = NULL;
  if (rh->tail) rh->tail->next = j;
  else rh->head = j;
  rh->tail = j;
  pthread_cond_signal(&rh->cv);
  pthread_mutex_unlock(&rh->mu);
}

static void *hpool_main(void *arg) {
  rt_handler *rh = arg;
  xgr_ctx ctx = {rh->rt, 0, NULL};
  pthread_mutex_lock(&rh->mu);
  for (;;) {
    while (!rh->head && !rh->stop) pthread_cond_wait(&rh->cv, &rh->mu);
    if (rh->stop) break;
    rt_hjob *j = rh->head;
    rh->head = j->next;
    if (!rh->head) rh->tail = NULL;
    pthread_mutex_unlock(&rh->mu);
    rh->h.run(rh->h.hctx, &ctx, j->pid, &j->cmd);
    free(j);
    pthread_mutex_lock(&rh->mu);
  }
  pthread_mutex_unlock(&rh->mu);
  return NULL;
}

static void dispatch(xgr_rt *rt, xgr_worker *w, xgr_pid pid, const xgr_cmd *c) {
  CNT_W(w, yields, 1);
  rt_handler *rh = c->type < XGR_RT_MAX_CMD_TYPES && rt->handlers[c->type].set
                       ? &rt->handlers[c->type] : NULL;
  if (!rh) { /* no handler: complete at once with the argument handed back */
    rt_deliver(rt, w, pid, XGR_EV_YIELD, c->tag, 0, c->arg, XGR_EUNSUPPORTED);
    return;
  }
  switch (rh->h.mode) {
  case XGR_HANDLER_INLINE: {
    xgr_ctx ctx = {rt, 0, w};
    rh->h.run(rh->h.hctx, &ctx, pid, c);
    return;
  }
  case XGR_HANDLER_TASK: {
    rt_task *t = xgr__xmalloc(sizeof(*t));
    t->item.kind = ITEM_TASK;
    t->h = &rh->h;
    t->pid = pid;
    t->cmd = *c;
    rt_schedule(rt, w, &t->item);
    return;
  }
  case XGR_HANDLER_THREAD: {
    rt_hjob *j = xgr__xmalloc(sizeof(*j));
    j->pid = pid;
    j->cmd = *c;
    hpool_push(rh, j);
    return;
  }
  }
  /* out of memory */
  rt_deliver(rt, w, pid, XGR_EV_YIELD, c->tag, 0, c->arg, XGR_ENOMEM);
}

/* ---- running a process ------------------------------------------------------------------------ */
/* After a step (or a wake-up that found nothing new): move the process on according to `status`. */
static void proc_finish(xgr_rt *rt, xgr_worker *w, rt_proc *p, unsigned status, bool more) {
  if (status == XGR_STEP_COMPLETE) {
    atomic_store_explicit(&p->state, ST_COMPLETE, memory_order_release);
    proc_release(rt, w, p); /* the registry's reference */
    return;
  }
  if (status == XGR_STEP_READY || more) {
    atomic_exchange_explicit(&p->state, ST_READY, memory_order_acq_rel);
    rt_schedule(rt, w, &p->item);
    return;
  }
  uint32_t target = status == XGR_STEP_BLOCKED ? ST_BLOCKED : ST_IDLE;
  uint32_t wake_on = status == XGR_STEP_BLOCKED ? WAKE_URGENT : (WAKE_URGENT | WAKE_MSG);
  uint32_t s = atomic_load_explicit(&p->state, memory_order_relaxed);
  for (;;) {
    bool wake = (s & wake_on) != 0;
    if (atomic_compare_exchange_weak_explicit(&p->state, &s, wake ? ST_READY : target,
                                              memory_order_acq_rel, memory_order_relaxed)) {
      if (wake) rt_schedule(rt, w, &p->item);
      return;
    }
  }
}

static void run_proc(xgr_rt *rt, xgr_worker *w, rt_proc *p) {
  uint32_t s = ST_READY;
  if (!atomic_compare_exchange_strong_explicit(&p->state, &s, ST_RUNNING, memory_order_acq_rel,
                                               memory_order_relaxed)) {
    /* Only the worker that dequeued a Ready process moves it; anything else is a bug. */
    fprintf(stderr, "xgr runtime: process %llx dequeued in state %x\n",
            (unsigned long long)atomic_load(&p->pid), s);
    abort();
  }
  atomic_thread_fence(memory_order_seq_cst); /* pairs with proc_notify */
  size_t n = 0;
  unsigned max = w->rt->cfg.max_batch;
  while (n < max) {
    rt_mpsc_node *node = rt_mpsc_pop(&p->q);
    if (!node || node == RT_MPSC_BUSY) break; /* a half-done push will notify us itself */
    rt_ev_node *e = (rt_ev_node *)node;
    w->evbuf[n++] = e->ev;
    free(e);
  }
  bool more = n == max;
  unsigned status;
  if (n == 0 && p->started && p->want != XGR_STEP_READY) {
    status = p->want; /* woken by a flag whose event an earlier drain already delivered */
  } else {
    xgr_pid pid = atomic_load_explicit(&p->pid, memory_order_relaxed);
    xgr_ctx ctx = {rt, pid, w};
    w->out.status = XGR_STEP_IDLE;
    w->out.ncmds = 0;
    p->started = 1;
    int rc = p->vt->step(p->self, &ctx, w->evbuf, n, &w->out);
    CNT_W(w, steps, 1);
    CNT_W(w, events, n);
    status = w->out.status;
    if (rc != 0 || status > XGR_STEP_READY) {
      status = XGR_STEP_COMPLETE;
      CNT_W(w, failed, 1);
    }
    for (size_t i = 0; i < w->out.ncmds; i++) dispatch(rt, w, pid, &w->out.cmds[i]);
    p->want = (uint8_t)status;
  }
  proc_finish(rt, w, p, status, more && status != XGR_STEP_COMPLETE);
}

static void run_item(xgr_rt *rt, xgr_worker *w, rt_item *it) {
  if (it->kind == ITEM_PROC) {
    run_proc(rt, w, (rt_proc *)it);
  } else {
    rt_task *t = (rt_task *)it;
    xgr_ctx ctx = {rt, 0, w};
    t->h->run(t->h->hctx, &ctx, t->pid, &t->cmd);
    CNT_W(w, tasks, 1);
    free(t);
  }
}

/* ---- workers ---------------------------------------------------------------------------------- */
static uint64_t rng_next(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

#define RT_STEAL_MAX 128

/* The owner takes the newest item of its deque (depth first: bounded memory for spawn trees,
 * warm caches), and the global queue (new processes, processes woken from other threads) only
 * when its deque runs dry: work that keeps pushing could starve both forever. Every FAIR_EVERY-th
 * look, one global item goes first; with cfg.fair, else the oldest item of the own deque (taken
 * as a thief would), so nothing waits longer than about FAIR_EVERY picks per item ahead of it.
 * The period is long on purpose: while the workers are saturated, sessions started meanwhile
 * wait in the global queue instead of joining at once, so the set in flight stays in the caches
 * (a period of 61 made a 10,000-session benchmark 1.8 times slower for that reason). Without
 * cfg.fair the deque stays strictly depth first. */
#define FAIR_EVERY 1024

static rt_item *find_work(xgr_rt *rt, xgr_worker *w) {
  rt_item *it;
  if (++w->ticks % FAIR_EVERY == 0) {
    /* one item only: a batch would go on top of the deque and push everything else back */
    if (atomic_load_explicit(&rt->gq_n, memory_order_relaxed) > 0 && (it = gq_take_batch(rt, w, 0))) return it;
    bool lost = false;
    if (rt->cfg.fair && (it = rt_dq_steal(&w->dq, &lost))) return it;
  }
  it = rt_dq_take(&w->dq);
  if (it) return it;
  if (atomic_load_explicit(&rt->gq_n, memory_order_relaxed) > 0) {
    it = gq_take_batch(rt, w, rt->cfg.global_batch);
    if (it) return it;
  }
  unsigned n = rt->nworkers;
  if (n < 2) return NULL;
  unsigned start = (unsigned)(rng_next(&w->rng) % n);
  for (unsigned k = 0; k < n; k++) {
    unsigned v = (start + k) % n;
    if (v == w->id) continue;
    int64_t moved = 0;
    bool lost = false;
    it = rt_dq_steal_half_into(&rt->w[v].dq, &w->dq, RT_STEAL_MAX, &moved, &lost);
    if (it) {
      CNT_W(w, steals, 1);
      CNT_W(w, stolen, (uint64_t)moved);
      if (moved > 1) rt_notify(rt, w);
      return it;
    }
  }
  return NULL;
}

static bool any_work(xgr_rt *rt) {
  if (atomic_load_explicit(&rt->gq_n, memory_order_relaxed) > 0) return true;
  for (unsigned i = 0; i < rt->nworkers; i++)
    if (rt_dq_size(&rt->w[i].dq) > 0) return true;
  return false;
}

static void worker_park(xgr_rt *rt, xgr_worker *w) {
  uint32_t seq = atomic_load_explicit(&rt->park_seq, memory_order_acquire);
  atomic_fetch_add_explicit(&rt->nparked, 1, memory_order_seq_cst);
  atomic_thread_fence(memory_order_seq_cst); /* pairs with rt_notify */
  if (!any_work(rt) && !atomic_load_explicit(&rt->stop, memory_order_acquire)) {
    CNT_W(w, parks, 1);
    park_wait(rt, seq);
  }
  atomic_fetch_sub_explicit(&rt->nparked, 1, memory_order_seq_cst);
}

static void *worker_main(void *arg) {
  xgr_worker *w = arg;
  xgr_rt *rt = w->rt;
  unsigned idle = 0;
  while (!atomic_load_explicit(&rt->stop, memory_order_acquire)) {
    rt_item *it = find_work(rt, w);
    if (it) {
      idle = 0;
      run_item(rt, w, it);
      continue;
    }
    idle++;
    if (rt->cfg.idle) {
      xgr_ctx c = {rt, 0, w};
      if (rt->cfg.idle(rt->cfg.idle_ctx, &c, idle >= rt->cfg.spin_yield)) {
        idle = 0;
        continue;
      }
    }
    if (idle < rt->cfg.spin_tight) {
      CNT_W(w, spins, 1);
      for (int i = 0; i < 32; i++) cpu_relax();
    } else if (idle < rt->cfg.spin_yield) {
      CNT_W(w, yields_os, 1);
      sched_yield();
    } else {
      worker_park(rt, w);
      idle = 0;
    }
  }
  return NULL;
}

/* ---- public API ------------------------------------------------------------------------------- */
int xgr_step_yield(xgr_step_out *out, uint32_t type, uint64_t tag, void *arg) {
  if (out->ncmds == out->cap) {
    size_t ncap = out->cap ? out->cap * 2 : 8;
    xgr_cmd *n = xgr__xrealloc(out->cmds, ncap * sizeof(*n));
    out->cmds = n;
    out->cap = ncap;
  }
  out->cmds[out->ncmds++] = (xgr_cmd){type, tag, arg};
  return 0;
}

xgr_rt *xgr_rt_new(const xgr_rt_config *cfg) {
  xgr_rt *rt = xgr__xcalloc(1, sizeof(*rt));
  if (cfg) rt->cfg = *cfg;
  if (!rt->cfg.workers) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    rt->cfg.workers = n > 0 ? (unsigned)n : 1;
  }
  if (!rt->cfg.max_batch) rt->cfg.max_batch = 256;
  if (!rt->cfg.global_batch) rt->cfg.global_batch = 16;
  if (!rt->cfg.spin_tight) rt->cfg.spin_tight = 4;
  if (!rt->cfg.spin_yield) rt->cfg.spin_yield = 16;
  if (!rt->cfg.seed) rt->cfg.seed = 0x9e3779b97f4a7c15ull;
  rt->nworkers = rt->cfg.workers;
  pthread_mutex_init(&rt->gq_mu, NULL);
  pthread_mutex_init(&rt->pool_mu, NULL);
#ifndef __linux__
  pthread_mutex_init(&rt->park_mu, NULL);
  pthread_cond_init(&rt->park_cv, NULL);
#endif
  rt->w = xgr__xaligned_alloc(64, sizeof(xgr_worker) * rt->nworkers);
  memset(rt->w, 0, sizeof(xgr_worker) * rt->nworkers);
  for (unsigned i = 0; i < rt->nworkers; i++) {
    xgr_worker *w = &rt->w[i];
    w->rt = rt;
    w->id = i;
    w->rng = rt->cfg.seed * (2 * i + 1) | 1;
    w->evbuf = xgr__xmalloc(sizeof(xgr_event) * rt->cfg.max_batch);
    if (!rt_dq_init(&w->dq, 256)) {
      for (unsigned j = 0; j <= i; j++) {
        free(rt->w[j].evbuf);
        rt_dq_destroy(&rt->w[j].dq);
      }
      free(rt->w);
      free(rt);
      return NULL;
    }
  }
  return rt;
}

int xgr_rt_register_handler(xgr_rt *rt, uint32_t type, const xgr_handler *h) {
  if (rt->started) return XGR_ESTATE;
  if (type >= XGR_RT_MAX_CMD_TYPES || !h || !h->run) return XGR_EINVAL;
  rt_handler *rh = &rt->handlers[type];
  if (rh->set) return XGR_EDUP;
  rh->h = *h;
  rh->set = true;
  rh->rt = rt;
  return 0;
}

unsigned xgr_rt_workers(const xgr_rt *rt) { return rt->nworkers; }

int xgr_rt_start(xgr_rt *rt, xgr_error *err) {
  if (rt->started) return xgr_error_set(err, XGR_ESTATE, NULL, "runtime already started");
  rt->started = true;
  for (unsigned t = 0; t < XGR_RT_MAX_CMD_TYPES; t++) {
    rt_handler *rh = &rt->handlers[t];
    if (!rh->set || rh->h.mode != XGR_HANDLER_THREAD) continue;
    pthread_mutex_init(&rh->mu, NULL);
    pthread_cond_init(&rh->cv, NULL);
    unsigned n = rh->h.threads ? rh->h.threads : 1;
    rh->threads = xgr__xcalloc(n, sizeof(pthread_t));
    for (unsigned i = 0; i < n; i++) {
      if (pthread_create(&rh->threads[i], NULL, hpool_main, rh) != 0)
        return xgr_error_set(err, XGR_ENOMEM, NULL, "cannot start thread %u of handler %s", i,
                             rh->h.name ? rh->h.name : "?");
      char name[32];   /* thread names hold 15 bytes: cut to that */
      snprintf(name, sizeof name, "xgr-%s-%u", rh->h.name ? rh->h.name : "h", i % 1000u);
      name[15] = '\0';
      pthread_setname_np(rh->threads[i], name);
      rh->nthreads++;
    }
  }
  for (unsigned i = 0; i < rt->nworkers; i++) {
    if (pthread_create(&rt->w[i].thread, NULL, worker_main, &rt->w[i]) != 0) {
      atomic_store(&rt->stop, 1);
      park_wake(rt, INT_MAX);
      for (unsigned j = 0; j < i; j++) pthread_join(rt->w[j].thread, NULL);
      rt->started = false; /* handler threads are stopped by xgr_rt_free */
      return xgr_error_set(err, XGR_ENOMEM, NULL, "cannot start worker thread %u", i);
    }
    char name[32];   /* thread names hold 15 bytes: cut to that */
    snprintf(name, sizeof name, "xgr-worker-%u", i % 10000u);
    name[15] = '\0';
    pthread_setname_np(rt->w[i].thread, name);   /* for top -H, perf and gdb */
  }
  return 0;
}

static int rt_spawn(xgr_rt *rt, xgr_worker *w, const xgr_process_vt *vt, void *self,
                    const char *method, void *input, xgr_pid *pid_out, xgr_error *err) {
  if (!vt || !vt->step || (!self && !vt->state_size))
    return xgr_error_set(err, XGR_EINVAL, NULL, "spawn needs a step function and a process object");
  if (atomic_load_explicit(&rt->closing, memory_order_acquire))
    return xgr_error_set(err, XGR_ESTATE, NULL, "runtime is shutting down");
  rt_proc *p = proc_alloc(rt, w);
  if (!p) return xgr_error_set(err, XGR_ENOMEM, NULL, "no process record available");
  p->own_state = 0;
  if (!self) {
    if (vt->state_size <= RT_INLINE_STATE) {
      self = p->inline_state;
      memset(self, 0, vt->state_size);
    } else if (!(self = xgr__xcalloc(1, vt->state_size))) {
      proc_free(rt, w, p);
      return xgr_error_set(err, XGR_ENOMEM, NULL, "out of memory for process state");
    }
    p->own_state = 1;
  }
  if (++p->gen == 0) p->gen = 1;
  xgr_pid pid = ((uint64_t)p->gen << 32) | p->index;
  p->vt = vt;
  p->self = self;
  p->started = 0;
  p->want = XGR_STEP_READY;
  rt_mpsc_init(&p->q);
  /* Running while init runs: events sent meanwhile only set a flag; the first step gets them. */
  atomic_store_explicit(&p->state, ST_RUNNING, memory_order_relaxed);
  atomic_store_explicit(&p->pid, pid, memory_order_relaxed);
  atomic_store_explicit(&p->refs, 1, memory_order_release); /* published: lookups succeed */
  CNT(rt, w, spawned, 1);
  if (vt->init) {
    xgr_ctx ctx = {rt, pid, w};
    int rc = vt->init(self, &ctx, method, input, err);
    if (rc != 0) {
      CNT(rt, w, failed, 1);
      atomic_store_explicit(&p->state, ST_COMPLETE, memory_order_release);
      proc_release(rt, w, p);
      return rc;
    }
  }
  if (pid_out) *pid_out = pid;
  atomic_store_explicit(&p->state, ST_READY, memory_order_release);
  rt_schedule(rt, w, &p->item); /* includes a seq_cst fence, see xgr_rt_shutdown */
  if (atomic_load_explicit(&rt->closing, memory_order_relaxed))
    rt_deliver(rt, w, pid, XGR_EV_CANCEL, 0, 0, NULL, 0); /* raced with shutdown's sweep */
  return 0;
}

int xgr_rt_spawn(xgr_rt *rt, const xgr_process_vt *vt, void *self, const char *method, void *input,
                 xgr_pid *pid, xgr_error *err) {
  return rt_spawn(rt, NULL, vt, self, method, input, pid, err);
}

int xgr_ctx_spawn(const xgr_ctx *ctx, const xgr_process_vt *vt, void *self, const char *method,
                  void *input, xgr_pid *pid, xgr_error *err) {
  return rt_spawn(ctx->rt, ctx->worker, vt, self, method, input, pid, err);
}

int xgr_rt_send(xgr_rt *rt, xgr_pid to, uint64_t tag, void *data) {
  return rt_deliver(rt, NULL, to, XGR_EV_MESSAGE, tag, 0, data, 0);
}

int xgr_ctx_send(const xgr_ctx *ctx, xgr_pid to, uint64_t tag, void *data) {
  return rt_deliver(ctx->rt, ctx->worker, to, XGR_EV_MESSAGE, tag, ctx->self, data, 0);
}

size_t xgr_ctx_queued(const xgr_ctx *ctx) {
  return ctx && ctx->worker ? (size_t)rt_dq_size(&ctx->worker->dq) : 0;
}

int xgr_rt_complete_yield(xgr_rt *rt, xgr_pid pid, uint64_t tag, void *data, int err) {
  return rt_deliver(rt, NULL, pid, XGR_EV_YIELD, tag, 0, data, err);
}

int xgr_ctx_complete_yield(const xgr_ctx *ctx, xgr_pid pid, uint64_t tag, void *data, int err) {
  return rt_deliver(ctx->rt, ctx->worker, pid, XGR_EV_YIELD, tag, 0, data, err);
}

static void sum_counters(const rt_counters *c, xgr_rt_counters *o) {
#define ADD(f) o->f += atomic_load_explicit(&c->f, memory_order_relaxed)
  ADD(spawned); ADD(completed); ADD(failed); ADD(steps); ADD(events); ADD(messages); ADD(yields);
  ADD(completions); ADD(tasks); ADD(steals); ADD(stolen); ADD(global_batches); ADD(global_items);
  ADD(spins); ADD(yields_os); ADD(parks); ADD(wakeups);
#undef ADD
}

void xgr_rt_get_counters(const xgr_rt *rt, xgr_rt_counters *out) {
  memset(out, 0, sizeof(*out));
  sum_counters(&rt->ext, out);
  for (unsigned i = 0; i < rt->cfg.workers; i++) sum_counters(&rt->w[i].cnt, out);
}

/* Completed counters are read before spawned ones, so a process counted as completed is always
 * counted as spawned: the difference is never below the true number of live processes then. */
uint64_t xgr_rt_live(const xgr_rt *rt) {
  uint64_t done = atomic_load(&rt->ext.completed), made = 0;
  for (unsigned i = 0; i < rt->cfg.workers; i++) done += atomic_load(&rt->w[i].cnt.completed);
  made = atomic_load(&rt->ext.spawned);
  for (unsigned i = 0; i < rt->cfg.workers; i++) made += atomic_load(&rt->w[i].cnt.spawned);
  return made - done;
}

/* Polls the counters with a growing sleep (50 us .. 2 ms): the counters are per worker so that
 * completions never contend on one shared word, which leaves nothing to block on. */
int xgr_rt_wait_idle(xgr_rt *rt, long timeout_ms) {
  uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : xgr__mono_ns() + (uint64_t)timeout_ms * 1000000ull;
  long sleep_us = 50;
  for (;;) {
    if (xgr_rt_live(rt) == 0) return 0;
    if (xgr__mono_ns() >= deadline) return XGR_ETIMEOUT;
    struct timespec ts = {0, sleep_us * 1000};
    nanosleep(&ts, NULL);
    if (sleep_us < 2000) sleep_us *= 2;
  }
}

/* Call f on every record that currently has a registry reference. */
static void for_each_live(xgr_rt *rt, void (*f)(xgr_rt *, rt_proc *)) {
  uint32_t nc = atomic_load_explicit(&rt->nchunks, memory_order_acquire);
  for (uint32_t c = 0; c < nc; c++) {
    rt_proc *chunk = atomic_load_explicit(&rt->chunks[c], memory_order_acquire);
    for (uint32_t i = 0; i < RT_CHUNK; i++)
      if (atomic_load_explicit(&chunk[i].refs, memory_order_acquire) > 0) f(rt, &chunk[i]);
  }
}

static void cancel_one(xgr_rt *rt, rt_proc *p) {
  xgr_pid pid = atomic_load_explicit(&p->pid, memory_order_relaxed);
  if (pid) rt_deliver(rt, NULL, pid, XGR_EV_CANCEL, 0, 0, NULL, 0);
}

int xgr_rt_shutdown(xgr_rt *rt, long timeout_ms) {
  if (rt->shut) return rt->shut_rc;
  rt->shut = true;
  atomic_store_explicit(&rt->closing, 1, memory_order_seq_cst);
  atomic_thread_fence(memory_order_seq_cst); /* pairs with rt_spawn: it sees closing or we see it */
  int rc = 0;
  if (rt->started) {
    for_each_live(rt, cancel_one);
    rc = xgr_rt_wait_idle(rt, timeout_ms);
    atomic_store_explicit(&rt->stop, 1, memory_order_release);
    park_wake(rt, INT_MAX);
    for (unsigned i = 0; i < rt->nworkers; i++) pthread_join(rt->w[i].thread, NULL);
  } else {
    rc = xgr_rt_live(rt) ? XGR_ETIMEOUT : 0;
  }
  for (unsigned t = 0; t < XGR_RT_MAX_CMD_TYPES; t++) {
    rt_handler *rh = &rt->handlers[t];
    if (!rh->set || rh->h.mode != XGR_HANDLER_THREAD || !rh->threads) continue;
    pthread_mutex_lock(&rh->mu);
    rh->stop = true;
    pthread_cond_broadcast(&rh->cv);
    pthread_mutex_unlock(&rh->mu);
    for (unsigned i = 0; i < rh->nthreads; i++) pthread_join(rh->threads[i], NULL);
  }
  rt->shut_rc = rc;
  return rc;
}

/* Free a process that never completed (after shutdown timed out): nothing runs any more. */
static void force_close(xgr_rt *rt, rt_proc *p) {
  atomic_store_explicit(&p->state, ST_COMPLETE, memory_order_relaxed);
  atomic_store_explicit(&p->refs, 0, memory_order_relaxed);
  proc_finalize(rt, NULL, p);
}

static void drop_item(xgr_rt *rt, rt_item *it) {
  if (!it || it->kind != ITEM_TASK) return; /* processes are closed by force_close */
  rt_task *t = (rt_task *)it;
  if (t->h->drop) t->h->drop(t->h->hctx, t->pid, &t->cmd);
  free(t);
}

void xgr_rt_free(xgr_rt *rt) {
  if (!rt) return;
  xgr_rt_shutdown(rt, 0);
  /* handler jobs never run */
  for (unsigned t = 0; t < XGR_RT_MAX_CMD_TYPES; t++) {
    rt_handler *rh = &rt->handlers[t];
    if (!rh->set || rh->h.mode != XGR_HANDLER_THREAD || !rh->threads) continue;
    while (rh->head) {
      rt_hjob *j = rh->head;
      rh->head = j->next;
      if (rh->h.drop) rh->h.drop(rh->h.hctx, j->pid, &j->cmd);
      free(j);
    }
    free(rh->threads);
    pthread_mutex_destroy(&rh->mu);
    pthread_cond_destroy(&rh->cv);
  }
  /* queued tasks, then processes that never completed */
  for (unsigned i = 0; i < rt->cfg.workers; i++) {
    rt_item *it;
    while ((it = rt_dq_take(&rt->w[i].dq)) != NULL) drop_item(rt, it);
  }
  void *x;
  while ((x = gq_pop_locked(rt)) != NULL) drop_item(rt, x);
  for_each_live(rt, force_close);
  for (unsigned i = 0; i < rt->cfg.workers; i++) {
    rt_dq_destroy(&rt->w[i].dq);
    free(rt->w[i].evbuf);
    free(rt->w[i].out.cmds);
  }
  uint32_t nc = atomic_load(&rt->nchunks);
  for (uint32_t c = 0; c < nc; c++) free(atomic_load(&rt->chunks[c]));
  free(rt->gq_ring);
  free(rt->w);
  pthread_mutex_destroy(&rt->gq_mu);
  pthread_mutex_destroy(&rt->pool_mu);
#ifndef __linux__
  pthread_mutex_destroy(&rt->park_mu);
  pthread_cond_destroy(&rt->park_cv);
#endif
  free(rt);
}
