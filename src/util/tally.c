/* tally.c — counts of holders per string key with a cap (see tally.h): a hash map in hashed mode
 * (util/hashmap.h) whose values are the entries, found by their key text. */
#include "util/tally.h"

#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/hash.h"

typedef struct entry {
  char key[XGR__TALLY_KEY];
  unsigned n;   /* above 0 while the entry exists */
} entry;

/* FNV-1a over the key as it is stored (cut at XGR__TALLY_KEY - 1 bytes), finished by the mixer. */
static uint64_t key_hash(const char *key) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; key[i] && i < XGR__TALLY_KEY - 1; i++) h = (h ^ (unsigned char)key[i]) * 0x100000001b3ULL;
  return xgr__mix64(h);
}

static bool same_key(const void *ctx, const void *val) {
  return !strncmp(ctx, ((const entry *)val)->key, XGR__TALLY_KEY - 1);
}

void xgr__tally_init(xgr__tally *t) {
  memset(t, 0, sizeof *t);
  pthread_mutex_init(&t->mu, NULL);
}

void xgr__tally_destroy(xgr__tally *t) {
  size_t pos = 0;
  entry *e;
  while ((e = xgr__hashmap_next(&t->map, &pos, NULL))) free(e);
  xgr__hashmap_free(&t->map);
  pthread_mutex_destroy(&t->mu);
}

bool xgr__tally_take(xgr__tally *t, const char *key, unsigned max, size_t total_max, unsigned *held) {
  uint64_t h = key_hash(key);
  pthread_mutex_lock(&t->mu);
  entry *e = xgr__hashmap_find(&t->map, h, same_key, key);
  unsigned n = e ? e->n : 0;
  if (held) *held = n;
  bool ok = (!max || n < max) && (!total_max || t->total < total_max);
  if (ok) {
    if (!e) {
      e = xgr__xcalloc(1, sizeof *e);
      snprintf(e->key, sizeof e->key, "%s", key);
      xgr__hashmap_add(&t->map, h, e);
    }
    e->n++;
    t->total++;
  }
  pthread_mutex_unlock(&t->mu);
  return ok;
}

void xgr__tally_give(xgr__tally *t, const char *key) {
  uint64_t h = key_hash(key);
  pthread_mutex_lock(&t->mu);
  entry *e = xgr__hashmap_find(&t->map, h, same_key, key);
  assert(e && e->n > 0 && t->total > 0);
  if (e) {
    t->total--;
    if (!--e->n) {
      xgr__hashmap_remove(&t->map, h, e);
      free(e);
    }
  }
  pthread_mutex_unlock(&t->mu);
}

size_t xgr__tally_total(xgr__tally *t) {
  pthread_mutex_lock(&t->mu);
  size_t n = t->total;
  pthread_mutex_unlock(&t->mu);
  return n;
}
