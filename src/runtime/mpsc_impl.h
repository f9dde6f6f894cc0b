/* mpsc_impl.h — intrusive multi-producer single-consumer queue (internal to src/runtime).
 *
 * Each process has one: any thread pushes events (lock-free: one atomic exchange and one store),
 * the worker that runs the process pops them. This is D. Vyukov's intrusive MPSC node queue:
 *
 *   producers:  head --xchg--> newest node          consumer: tail -> oldest node -> ... -> head
 *
 * A push swaps itself in as `head` and then links the previous head to itself. Between those two
 * steps the chain is broken: the consumer sees `tail->next == NULL` although `tail != head`, and
 * pop reports "nothing yet" (RT_MPSC_BUSY). The runtime never waits for that: the producer has
 * not yet looked at the process state, so it will wake the process (or flag it) itself. A stub
 * node, owned by the queue, keeps the chain non-empty so that no push needs to touch `tail`.
 *
 * FIFO per producer; a node may be pushed again only after it was popped.
 */
#ifndef XGR_RUNTIME_MPSC_IMPL_H
#define XGR_RUNTIME_MPSC_IMPL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rt_mpsc_node {
  _Atomic(struct rt_mpsc_node *) next;
} rt_mpsc_node;

typedef struct rt_mpsc {
  _Atomic(rt_mpsc_node *) head; /* producers: the newest node */
  rt_mpsc_node *tail;           /* consumer only: the oldest node (possibly the stub) */
  rt_mpsc_node stub;
} rt_mpsc;

static inline void rt_mpsc_init(rt_mpsc *q) {
  atomic_init(&q->stub.next, NULL);
  atomic_init(&q->head, &q->stub);
  q->tail = &q->stub;
}

/* Any thread: append n. */
static inline void rt_mpsc_push(rt_mpsc *q, rt_mpsc_node *n) {
  atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
  rt_mpsc_node *prev = atomic_exchange_explicit(&q->head, n, memory_order_acq_rel);
  atomic_store_explicit(&prev->next, n, memory_order_release);
}

/* Sentinel returned by rt_mpsc_pop when a push is half done (see the file comment). */
#define RT_MPSC_BUSY ((rt_mpsc_node *)(uintptr_t)1)

/* Consumer only: remove and return the oldest node, NULL when empty, RT_MPSC_BUSY when a producer
 * is between its two steps. */
static inline rt_mpsc_node *rt_mpsc_pop(rt_mpsc *q) {
  rt_mpsc_node *tail = q->tail;
  rt_mpsc_node *next = atomic_load_explicit(&tail->next, memory_order_acquire);
  if (tail == &q->stub) {
    if (!next) {
      return atomic_load_explicit(&q->head, memory_order_acquire) == tail ? NULL : RT_MPSC_BUSY;
    }
    q->tail = next;
    tail = next;
    next = atomic_load_explicit(&tail->next, memory_order_acquire);
  }
  if (next) {
    q->tail = next;
    return tail;
  }
  if (atomic_load_explicit(&q->head, memory_order_acquire) != tail) return RT_MPSC_BUSY;
  /* tail is the only node: put the stub behind it so tail can be handed out. */
  rt_mpsc_push(q, &q->stub);
  next = atomic_load_explicit(&tail->next, memory_order_acquire);
  if (next) {
    q->tail = next;
    return tail;
  }
  return RT_MPSC_BUSY; /* another producer slipped in between: its link is still pending */
}

/* Consumer only: true when no node is queued or being queued. */
static inline int rt_mpsc_empty(rt_mpsc *q) {
  return q->tail == &q->stub && atomic_load_explicit(&q->stub.next, memory_order_acquire) == NULL &&
         atomic_load_explicit(&q->head, memory_order_acquire) == &q->stub;
}

#endif
