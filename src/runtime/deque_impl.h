/* deque_impl.h — the Chase-Lev work-stealing deque of each worker (internal to src/runtime).
 *
 * One owner thread pushes and takes at the *bottom* (LIFO, no atomic read-modify-write except when
 * racing for the last item); any number of thieves steal at the *top* (FIFO) with a CAS on `top`.
 * The memory orderings follow Lê, Pop, Cohen and Zappa Nardelli, "Correct and Efficient
 * Work-Stealing for Weak Memory Models" (PPoPP 2013), figure 1, with two deliberate strengthenings
 * that cost nothing on x86 and make the happens-before edges visible to ThreadSanitizer (which
 * ignores stand-alone fences): push publishes `bottom` with a release store (instead of a release
 * fence + relaxed store), and thieves load the buffer pointer with acquire (instead of consume).
 *
 * Data structure: `top` and `bottom` are ever-growing 64-bit indices; the items are the indices
 * [top, bottom) of a circular buffer of 2^k slots (index & mask). When a push finds the buffer
 * full, the owner copies the live range into a buffer twice as large and publishes it; the old
 * buffer stays readable by thieves that already loaded it and is freed only with the deque
 * (retired buffers form a list; their total size is less than the current one).
 *
 * steal_half_into moves about half of a victim's items (at most `max`) into the thief's own deque.
 * It claims them one CAS per item, re-checking `bottom` after a fence before each further claim,
 * as crossbeam-deque does for LIFO deques: a single CAS advancing `top` by n would be wrong here,
 * because the owner takes items at the bottom *without* a CAS while more than one item is left, so
 * between the thief reading `bottom` and its CAS the owner may already have taken items inside the
 * thief's range. Per-item claims keep the single-item proof of the paper. The items are still
 * moved in one call and land in the thief's deque, so the thief works on them without further
 * contention.
 *
 * Items are non-NULL pointers; NULL means "nothing".
 */
#ifndef XGR_RUNTIME_DEQUE_IMPL_H
#define XGR_RUNTIME_DEQUE_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "util/alloc.h"

typedef struct rt_dq_buf {
  int64_t mask;                  /* capacity - 1; capacity is a power of two */
  struct rt_dq_buf *retired;     /* older buffers, freed with the deque */
  _Atomic(void *) slot[];
} rt_dq_buf;

typedef struct rt_deque {
  _Alignas(64) _Atomic int64_t top;     /* thieves' end: next item to steal */
  _Alignas(64) _Atomic int64_t bottom;  /* owner's end: one past the newest item */
  _Atomic(rt_dq_buf *) buf;
  char pad_[64 - sizeof(void *)];
} rt_deque;

static inline rt_dq_buf *rt_dq_buf_new(int64_t cap) {
  rt_dq_buf *b = xgr__xmalloc(sizeof(*b) + (size_t)cap * sizeof(b->slot[0]));
  b->mask = cap - 1;
  b->retired = NULL;
  for (int64_t i = 0; i < cap; i++) atomic_init(&b->slot[i], NULL);
  return b;
}

/* Initialise with capacity `cap` (rounded up to a power of two). Returns false when out of memory. */
static inline bool rt_dq_init(rt_deque *q, int64_t cap) {
  int64_t c = 16;
  while (c < cap) c <<= 1;
  rt_dq_buf *b = rt_dq_buf_new(c);
  if (!b) return false;
  atomic_init(&q->top, 0);
  atomic_init(&q->bottom, 0);
  atomic_init(&q->buf, b);
  return true;
}

/* Free the buffers. No thread may use the deque any more. */
static inline void rt_dq_destroy(rt_deque *q) {
  rt_dq_buf *b = atomic_load_explicit(&q->buf, memory_order_relaxed);
  while (b) {
    rt_dq_buf *n = b->retired;
    free(b);
    b = n;
  }
  atomic_store_explicit(&q->buf, NULL, memory_order_relaxed);
}

/* Number of items (a snapshot; exact only for the owner in the absence of thieves). */
static inline int64_t rt_dq_size(rt_deque *q) {
  int64_t b = atomic_load_explicit(&q->bottom, memory_order_relaxed);
  int64_t t = atomic_load_explicit(&q->top, memory_order_relaxed);
  return b > t ? b - t : 0;
}

/* Owner only: double the buffer, copying the live range [t, b). */
static inline rt_dq_buf *rt_dq_grow(rt_deque *q, rt_dq_buf *a, int64_t t, int64_t b) {
  rt_dq_buf *n = rt_dq_buf_new(2 * (a->mask + 1));
  if (!n) return NULL;
  for (int64_t i = t; i < b; i++)
    atomic_store_explicit(&n->slot[i & n->mask],
                          atomic_load_explicit(&a->slot[i & a->mask], memory_order_relaxed),
                          memory_order_relaxed);
  n->retired = a;
  atomic_store_explicit(&q->buf, n, memory_order_release);
  return n;
}

/* Owner only: push x (non-NULL) at the bottom. Returns false only when growing failed (no memory). */
static inline bool rt_dq_push(rt_deque *q, void *x) {
  int64_t b = atomic_load_explicit(&q->bottom, memory_order_relaxed);
  int64_t t = atomic_load_explicit(&q->top, memory_order_acquire);
  rt_dq_buf *a = atomic_load_explicit(&q->buf, memory_order_relaxed);
  if (b - t > a->mask) {
    a = rt_dq_grow(q, a, t, b);
    if (!a) return false;
  }
  atomic_store_explicit(&a->slot[b & a->mask], x, memory_order_relaxed);
  atomic_store_explicit(&q->bottom, b + 1, memory_order_release);
  return true;
}

/* Owner only: take the newest item, or NULL when empty (or the last item went to a thief). */
static inline void *rt_dq_take(rt_deque *q) {
  int64_t b = atomic_load_explicit(&q->bottom, memory_order_relaxed) - 1;
  rt_dq_buf *a = atomic_load_explicit(&q->buf, memory_order_relaxed);
  atomic_store_explicit(&q->bottom, b, memory_order_relaxed);
  atomic_thread_fence(memory_order_seq_cst);
  int64_t t = atomic_load_explicit(&q->top, memory_order_relaxed);
  void *x = NULL;
  if (t <= b) {
    x = atomic_load_explicit(&a->slot[b & a->mask], memory_order_relaxed);
    if (t == b) {
      /* The last item: race the thieves for it by advancing top ourselves. */
      if (!atomic_compare_exchange_strong_explicit(&q->top, &t, t + 1, memory_order_seq_cst,
                                                   memory_order_relaxed))
        x = NULL;
      atomic_store_explicit(&q->bottom, b + 1, memory_order_relaxed);
    }
  } else {
    atomic_store_explicit(&q->bottom, b + 1, memory_order_relaxed);
  }
  return x;
}

/* Any thread: steal the oldest item. Returns it, or NULL; *lost is set when a race was lost
 * (the deque was not empty: worth retrying). */
static inline void *rt_dq_steal(rt_deque *q, bool *lost) {
  int64_t t = atomic_load_explicit(&q->top, memory_order_acquire);
  atomic_thread_fence(memory_order_seq_cst);
  int64_t b = atomic_load_explicit(&q->bottom, memory_order_acquire);
  if (t >= b) return NULL;
  rt_dq_buf *a = atomic_load_explicit(&q->buf, memory_order_acquire);
  void *x = atomic_load_explicit(&a->slot[t & a->mask], memory_order_relaxed);
  if (!atomic_compare_exchange_strong_explicit(&q->top, &t, t + 1, memory_order_seq_cst,
                                               memory_order_relaxed)) {
    if (lost) *lost = true;
    return NULL;
  }
  return x;
}

/* Owner only: make sure `extra` more items can be pushed without growing. */
static inline bool rt_dq_reserve(rt_deque *q, int64_t extra) {
  int64_t b = atomic_load_explicit(&q->bottom, memory_order_relaxed);
  int64_t t = atomic_load_explicit(&q->top, memory_order_acquire);
  rt_dq_buf *a = atomic_load_explicit(&q->buf, memory_order_relaxed);
  while (b - t + extra > a->mask + 1) {
    a = rt_dq_grow(q, a, t, b);
    if (!a) return false;
  }
  return true;
}

/* Thief (the owner of dst): move about half of victim's items, at most max (>= 1), oldest first.
 * The first item taken is returned instead of being pushed; the others are pushed onto dst (room
 * for them is reserved first, so no push can fail midway). *moved (if not NULL) receives the
 * number of items taken including the returned one; *lost is set when a CAS race was lost. */
static inline void *rt_dq_steal_half_into(rt_deque *victim, rt_deque *dst, int64_t max,
                                          int64_t *moved, bool *lost) {
  if (moved) *moved = 0;
  if (!rt_dq_reserve(dst, max)) return NULL;
  int64_t t = atomic_load_explicit(&victim->top, memory_order_acquire);
  atomic_thread_fence(memory_order_seq_cst);
  int64_t b = atomic_load_explicit(&victim->bottom, memory_order_acquire);
  int64_t len = b - t;
  if (len <= 0) return NULL;
  int64_t n = (len + 1) / 2;
  if (n > max) n = max;
  void *first = NULL;
  int64_t got = 0;
  for (; got < n; got++) {
    if (got > 0) {
      atomic_thread_fence(memory_order_seq_cst);
      b = atomic_load_explicit(&victim->bottom, memory_order_acquire);
      if (b - t <= 0) break;
    }
    /* Load the buffer after bottom: an item pushed after a resize is only in the new buffer. */
    rt_dq_buf *a = atomic_load_explicit(&victim->buf, memory_order_acquire);
    void *x = atomic_load_explicit(&a->slot[t & a->mask], memory_order_relaxed);
    if (!atomic_compare_exchange_strong_explicit(&victim->top, &t, t + 1, memory_order_seq_cst,
                                                 memory_order_relaxed)) {
      if (lost) *lost = true;
      break;
    }
    t++;
    if (!first)
      first = x;
    else
      rt_dq_push(dst, x); /* cannot grow: room was reserved above */
  }
  if (moved) *moved = got;
  return first;
}

#endif
