/* hashmap.h — the library's one hash map: open addressing with linear probing and backward-shift
 * deletion (no tombstones), for the session core's process and scope tables, the store hook's
 * per-session tracking and the engine's session registry. Internal to the library (not part of
 * include/xgr).
 *
 * A map holds (key, value) slots: a 64-bit key and a non-NULL value pointer (NULL marks an empty
 * slot). The map mixes every key itself (xgr__hashmap_home), so callers may use raw sequential
 * ids as keys. It is used in one of two modes, never both in one map:
 *
 *   - exact keys: the key is the identity (process iters, scope ids). _get/_put/_del; one value
 *     per key.
 *   - hashed keys: the key is a hash of a compound or string key the value carries itself
 *     ((owner, rootPid) pairs, hashed by rootPid alone). _find with a match callback tells apart
 *     values whose hashes are equal; _add inserts without a uniqueness check (the caller _finds
 *     first when it must); _remove removes one value by identity. Several values may share a
 *     hash.
 *
 * Capacity is a power of two (at least 16 once anything was added); the table doubles before an
 * insertion would take it above 3/4 full, and never shrinks (xgr__hashmap_clear keeps it too).
 * Lookups cost one probe plus the length of the cluster in the common case; deletion moves back
 * the later entries of its cluster that may fill the hole, so lookups never see tombstones.
 *
 * Ownership: the map owns its slot array only; values belong to the caller (xgr__hashmap_free does
 * not free them — iterate first). A zeroed xgr_hashmap is an empty map. Not thread-safe: callers
 * lock. Iteration (xgr__hashmap_next) visits every value once provided the map is not changed
 * meanwhile; a caller that changes the map while walking it collects the keys first.
 * Allocation failure aborts (util/alloc.h).
 */
#ifndef XGR_UTIL_HASHMAP_H
#define XGR_UTIL_HASHMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct xgr_hashmap_slot {
  uint64_t key;                 /* the key (exact mode) or the key's hash (hashed mode) */
  void *val;                    /* NULL: empty */
} xgr_hashmap_slot;

typedef struct xgr_hashmap {
  xgr_hashmap_slot *slots;      /* cap slots, or NULL while cap is 0 */
  size_t cap;                   /* 0 or a power of two */
  size_t n;                     /* values held */
} xgr_hashmap;

/* Release the slot array (not the values) and leave an empty map. */
void xgr__hashmap_free(xgr_hashmap *m);
/* Remove every value (not freed) and keep the capacity. */
void xgr__hashmap_clear(xgr_hashmap *m);
static inline size_t xgr__hashmap_size(const xgr_hashmap *m) { return m->n; }
/* Make room for n values without growing later (never shrinks). */
void xgr__hashmap_reserve(xgr_hashmap *m, size_t n);

/* The slot where the probe for key starts (internal to the map; here for the inline lookup).
 * Fibonacci hashing folded: the product's low bits are a permutation of the key's low bits (so
 * sequential ids fill distinct slots) and the fold mixes in bits 32 and up, where the high key
 * bits land; the top bits, which the sharded users take to pick a shard, stay out of it. */
static inline size_t xgr__hashmap_home(const xgr_hashmap *m, uint64_t key) {
  key *= 0x9E3779B97F4A7C15ull;
  return (size_t)(key ^ (key >> 32)) & (m->cap - 1);
}

/* ---- exact keys ---- */
/* The value stored under key, or NULL (inline: the session core looks up on every step). */
static inline void *xgr__hashmap_get(const xgr_hashmap *m, uint64_t key) {
  if (!m->n) return NULL;
  size_t mask = m->cap - 1;
  for (size_t i = xgr__hashmap_home(m, key); m->slots[i].val; i = (i + 1) & mask)
    if (m->slots[i].key == key) return m->slots[i].val;
  return NULL;
}
/* Store val (non-NULL) under key; returns the value it replaced, or NULL. */
void *xgr__hashmap_put(xgr_hashmap *m, uint64_t key, void *val);
/* Remove key; returns its value, or NULL when absent. */
void *xgr__hashmap_del(xgr_hashmap *m, uint64_t key);

/* ---- hashed keys ---- */
/* match(ctx, val) is true when val has the key the caller looks for. */
typedef bool (*xgr_hashmap_match_fn)(const void *ctx, const void *val);
/* The first value with this hash that match accepts, or NULL. */
void *xgr__hashmap_find(const xgr_hashmap *m, uint64_t hash, xgr_hashmap_match_fn match, const void *ctx);
/* Add val (non-NULL) under hash; no uniqueness check. */
void xgr__hashmap_add(xgr_hashmap *m, uint64_t hash, void *val);
/* Remove the slot holding exactly val under hash; returns whether it was there. */
bool xgr__hashmap_remove(xgr_hashmap *m, uint64_t hash, const void *val);

/* ---- iteration (either mode) ---- */
/* The next value at or after slot *pos (start with *pos = 0), or NULL at the end; *pos moves past
 * it and *key (if not NULL) gets its key or hash. The order is unspecified. */
void *xgr__hashmap_next(const xgr_hashmap *m, size_t *pos, uint64_t *key);

#endif
