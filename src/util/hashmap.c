/* hashmap.c — the open-addressing hash map of hashmap.h: linear probing from a slot picked by a
 * 64-bit mix of the key, growth by doubling at 3/4 load, and backward-shift deletion (the entries
 * after a removed one that may move into the hole move back, so no tombstones exist and a probe
 * stops at the first empty slot). */
#include "util/hashmap.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"

#define MIN_CAP 16

static inline size_t home(const xgr_hashmap *m, uint64_t key) { return xgr__hashmap_home(m, key); }

/* Rebuild the table with ncap slots (a power of two that holds every value under 3/4 load). */
static void rehash(xgr_hashmap *m, size_t ncap) {
  xgr_hashmap_slot *old = m->slots;
  size_t ocap = m->cap;
  m->slots = xgr__xcalloc(ncap, sizeof *m->slots);
  m->cap = ncap;
  for (size_t i = 0; i < ocap; i++) {
    if (!old[i].val) continue;
    size_t j = home(m, old[i].key);
    while (m->slots[j].val) j = (j + 1) & (ncap - 1);
    m->slots[j] = old[i];
  }
  free(old);
}

/* Capacity for n values: the smallest power of two >= MIN_CAP with n <= 3/4 of it. */
static size_t cap_for(size_t n) {
  size_t c = MIN_CAP;
  while (n > c / 4 * 3) c *= 2;
  return c;
}

void xgr__hashmap_reserve(xgr_hashmap *m, size_t n) {
  size_t c = cap_for(n);
  if (c > m->cap) rehash(m, c);
}

void xgr__hashmap_free(xgr_hashmap *m) {
  free(m->slots);
  memset(m, 0, sizeof *m);
}

void xgr__hashmap_clear(xgr_hashmap *m) {
  if (m->cap) memset(m->slots, 0, m->cap * sizeof *m->slots);
  m->n = 0;
}

/* Room for one more value. */
static inline void grow_for_one(xgr_hashmap *m) {
  if (m->n + 1 > m->cap / 4 * 3) rehash(m, m->cap ? m->cap * 2 : MIN_CAP);
}

/* Empty slot i: move back the later entries of its cluster that may live at i (their home is
 * not cyclically after i), then clear the last slot moved from. */
static void delete_at(xgr_hashmap *m, size_t i) {
  size_t mask = m->cap - 1;
  for (size_t j = (i + 1) & mask; m->slots[j].val; j = (j + 1) & mask) {
    size_t h = home(m, m->slots[j].key);
    /* the entry at j may move to i when i lies on its probe path [h, j) */
    if (((j - h) & mask) >= ((j - i) & mask)) {
      m->slots[i] = m->slots[j];
      i = j;
    }
  }
  m->slots[i].val = NULL;
  m->slots[i].key = 0;
  m->n--;
}

/* ---- exact keys ---- */

void *xgr__hashmap_put(xgr_hashmap *m, uint64_t key, void *val) {
  assert(val);
  grow_for_one(m);
  size_t mask = m->cap - 1, i = home(m, key);
  for (; m->slots[i].val; i = (i + 1) & mask)
    if (m->slots[i].key == key) {
      void *old = m->slots[i].val;
      m->slots[i].val = val;
      return old;
    }
  m->slots[i].key = key;
  m->slots[i].val = val;
  m->n++;
  return NULL;
}

void *xgr__hashmap_del(xgr_hashmap *m, uint64_t key) {
  if (!m->n) return NULL;
  size_t mask = m->cap - 1;
  for (size_t i = home(m, key); m->slots[i].val; i = (i + 1) & mask)
    if (m->slots[i].key == key) {
      void *v = m->slots[i].val;
      delete_at(m, i);
      return v;
    }
  return NULL;
}

/* ---- hashed keys ---- */

void *xgr__hashmap_find(const xgr_hashmap *m, uint64_t hash, xgr_hashmap_match_fn match, const void *ctx) {
  if (!m->n) return NULL;
  size_t mask = m->cap - 1;
  for (size_t i = home(m, hash); m->slots[i].val; i = (i + 1) & mask)
    if (m->slots[i].key == hash && match(ctx, m->slots[i].val)) return m->slots[i].val;
  return NULL;
}

void xgr__hashmap_add(xgr_hashmap *m, uint64_t hash, void *val) {
  assert(val);
  grow_for_one(m);
  size_t mask = m->cap - 1, i = home(m, hash);
  while (m->slots[i].val) i = (i + 1) & mask;
  m->slots[i].key = hash;
  m->slots[i].val = val;
  m->n++;
}

bool xgr__hashmap_remove(xgr_hashmap *m, uint64_t hash, const void *val) {
  if (!m->n) return false;
  size_t mask = m->cap - 1;
  for (size_t i = home(m, hash); m->slots[i].val; i = (i + 1) & mask)
    if (m->slots[i].val == val) {
      assert(m->slots[i].key == hash);
      delete_at(m, i);
      return true;
    }
  return false;
}

/* ---- iteration ---- */

void *xgr__hashmap_next(const xgr_hashmap *m, size_t *pos, uint64_t *key) {
  for (size_t i = *pos; i < m->cap; i++)
    if (m->slots[i].val) {
      *pos = i + 1;
      if (key) *key = m->slots[i].key;
      return m->slots[i].val;
    }
  *pos = m->cap;
  return NULL;
}
