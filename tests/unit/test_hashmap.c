/* test_hashmap.c — the open-addressing hash map of src/util/hashmap.h: growth and load factor,
 * replacement, deletion with backward shift (clusters that wrap around the end of the table),
 * colliding keys and shared hashes, iteration, and long random runs checked against a simple
 * model (a flat array indexed by key). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "util/hashmap.h"

/* Values are pointers into this array so that every key has a distinct, checkable value. */
static char vals[1 << 17];
#define V(k) ((void *)&vals[(k) % sizeof vals])

/* Every slot of a consistent table is reachable from its home without crossing an empty slot:
 * a lookup of each stored key finds exactly its slot. Counts the values too. */
static void check_table(const xgr_hashmap *m) {
  size_t n = 0;
  for (size_t i = 0; i < m->cap; i++)
    if (m->slots[i].val) {
      n++;
      assert_ptr_equal(xgr__hashmap_get(m, m->slots[i].key), m->slots[i].val);
    }
  assert_int_equal(n, m->n);
  if (m->cap) {
    assert_int_equal(m->cap & (m->cap - 1), 0);
    assert_true(m->n <= m->cap / 4 * 3);
  }
}

static void test_empty(void **s) {
  (void)s;
  xgr_hashmap m = {0};
  assert_null(xgr__hashmap_get(&m, 0));
  assert_null(xgr__hashmap_del(&m, 7));
  assert_false(xgr__hashmap_remove(&m, 7, V(7)));
  size_t pos = 0;
  assert_null(xgr__hashmap_next(&m, &pos, NULL));
  assert_int_equal(xgr__hashmap_size(&m), 0);
  xgr__hashmap_free(&m);
}

static void test_growth(void **s) {
  (void)s;
  xgr_hashmap m = {0};
  size_t caps_seen = 0, last_cap = 0;
  for (uint64_t k = 0; k < 100000; k++) {
    assert_null(xgr__hashmap_put(&m, k, V(k)));
    if (m.cap != last_cap) {
      assert_true(m.cap == 16 || m.cap == last_cap * 2);   /* doubles from 16 */
      last_cap = m.cap;
      caps_seen++;
    }
    assert_true(m.n * 4 <= m.cap * 3);
  }
  assert_int_equal(m.n, 100000);
  assert_int_equal(m.cap, 262144);   /* 100000 > 3/4 of 131072 */
  assert_true(caps_seen > 10);
  for (uint64_t k = 0; k < 100000; k++) assert_ptr_equal(xgr__hashmap_get(&m, k), V(k));
  assert_null(xgr__hashmap_get(&m, 100000));
  check_table(&m);
  /* reserve never shrinks; clear keeps the capacity */
  xgr__hashmap_reserve(&m, 10);
  assert_int_equal(m.cap, 262144);
  xgr__hashmap_clear(&m);
  assert_int_equal(m.n, 0);
  assert_int_equal(m.cap, 262144);
  assert_null(xgr__hashmap_get(&m, 5));
  xgr__hashmap_free(&m);
  assert_int_equal(m.cap, 0);
  xgr__hashmap_reserve(&m, 1000);
  assert_int_equal(m.cap, 2048);   /* 1000 > 3/4 of 1024 */
  for (uint64_t k = 0; k < 1000; k++) xgr__hashmap_put(&m, k * 7919, V(k));
  assert_int_equal(m.cap, 2048);   /* no growth after reserve */
  xgr__hashmap_free(&m);
}

static void test_put_replaces(void **s) {
  (void)s;
  xgr_hashmap m = {0};
  assert_null(xgr__hashmap_put(&m, 42, V(1)));
  assert_ptr_equal(xgr__hashmap_put(&m, 42, V(2)), V(1));
  assert_int_equal(m.n, 1);
  assert_ptr_equal(xgr__hashmap_get(&m, 42), V(2));
  assert_ptr_equal(xgr__hashmap_del(&m, 42), V(2));
  assert_null(xgr__hashmap_del(&m, 42));
  assert_int_equal(m.n, 0);
  /* key 0 and UINT64_MAX are ordinary keys */
  xgr__hashmap_put(&m, 0, V(3));
  xgr__hashmap_put(&m, UINT64_MAX, V(4));
  assert_ptr_equal(xgr__hashmap_get(&m, 0), V(3));
  assert_ptr_equal(xgr__hashmap_get(&m, UINT64_MAX), V(4));
  xgr__hashmap_free(&m);
}

/* Keys whose home slot in a 16-slot table is `want` (found by asking a scratch map where a lone
 * key lands). */
static size_t keys_with_home(size_t want, uint64_t *out, size_t max) {
  size_t n = 0;
  for (uint64_t k = 1; n < max && k < 1000000; k++) {
    xgr_hashmap t = {0};
    xgr__hashmap_put(&t, k, V(k));
    size_t at = 0;
    while (!t.slots[at].val) at++;
    if (at == want) out[n++] = k;
    xgr__hashmap_free(&t);
  }
  return n;
}

/* Colliding keys form one cluster; deleting from its middle must keep every later key findable,
 * including a cluster that wraps from the last slot to slot 0. */
static void test_collisions_and_backward_shift(void **s) {
  (void)s;
  uint64_t at14[6], at0[3];
  assert_int_equal(keys_with_home(14, at14, 6), 6);
  assert_int_equal(keys_with_home(0, at0, 3), 3);
  for (size_t del = 0; del < 6; del++) {
    xgr_hashmap m = {0};
    xgr__hashmap_reserve(&m, 12);
    assert_int_equal(m.cap, 16);
    /* slots 14, 15, 0, 1, 2, 3 from home 14, then the home-0 keys behind them */
    for (size_t i = 0; i < 6; i++) xgr__hashmap_put(&m, at14[i], V(i));
    for (size_t i = 0; i < 3; i++) xgr__hashmap_put(&m, at0[i], V(10 + i));
    assert_ptr_equal(m.slots[15].val, V(1));
    assert_ptr_equal(m.slots[0].val, V(2));   /* wrapped */
    assert_ptr_equal(xgr__hashmap_del(&m, at14[del]), V(del));
    check_table(&m);
    for (size_t i = 0; i < 6; i++) assert_ptr_equal(xgr__hashmap_get(&m, at14[i]), i == del ? NULL : V(i));
    for (size_t i = 0; i < 3; i++) assert_ptr_equal(xgr__hashmap_get(&m, at0[i]), V(10 + i));
    /* the cluster shrank by one: no hole is left before its end */
    size_t filled = 0;
    for (size_t i = 0; i < 16; i++) filled += m.slots[i].val != NULL;
    assert_int_equal(filled, 8);
    assert_null(m.slots[(14 + 8) & 15].val);
    xgr__hashmap_free(&m);
  }
}

/* Hashed mode: values carry their own key; many share one hash. */
typedef struct item {
  char name[16];
  uint64_t id;
} item;

static bool item_match(const void *ctx, const void *val) {
  const item *want = ctx, *it = val;
  return it->id == want->id && !strcmp(it->name, want->name);
}

static uint64_t item_hash(const item *it, bool weak) {
  if (weak) return it->id % 3;   /* deliberately terrible: three hashes for all items */
  uint64_t h = 1469598103934665603ull;
  for (const char *c = it->name; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
  return h ^ it->id;
}

static void hashed_mode(bool weak) {
  enum { N = 600 };
  item *items = calloc(N, sizeof *items);
  assert_non_null(items);
  xgr_hashmap m = {0};
  for (size_t i = 0; i < N; i++) {
    snprintf(items[i].name, sizeof items[i].name, "owner%zu", i % 7);
    items[i].id = i / 7;
    xgr__hashmap_add(&m, item_hash(&items[i], weak), &items[i]);
  }
  assert_int_equal(m.n, N);
  for (size_t i = 0; i < N; i++) {
    item key = items[i];
    assert_ptr_equal(xgr__hashmap_find(&m, item_hash(&key, weak), item_match, &key), &items[i]);
  }
  item none = {.name = "nobody", .id = 1};
  assert_null(xgr__hashmap_find(&m, item_hash(&none, weak), item_match, &none));
  /* remove by identity: every other item */
  for (size_t i = 0; i < N; i += 2) assert_true(xgr__hashmap_remove(&m, item_hash(&items[i], weak), &items[i]));
  assert_false(xgr__hashmap_remove(&m, item_hash(&items[0], weak), &items[0]));
  assert_int_equal(m.n, N / 2);
  for (size_t i = 0; i < N; i++) {
    item key = items[i];
    assert_ptr_equal(xgr__hashmap_find(&m, item_hash(&key, weak), item_match, &key), i % 2 ? &items[i] : NULL);
  }
  xgr__hashmap_free(&m);
  free(items);
}

static void test_hashed_keys(void **s) {
  (void)s;
  hashed_mode(false);
}

static void test_hashed_keys_shared_hashes(void **s) {
  (void)s;
  hashed_mode(true);
}

/* Two values with the same hash and the same key: find returns one, remove takes each by identity. */
static void test_hashed_duplicates(void **s) {
  (void)s;
  item a = {.name = "x", .id = 1}, b = {.name = "x", .id = 1};
  xgr_hashmap m = {0};
  xgr__hashmap_add(&m, 9, &a);
  xgr__hashmap_add(&m, 9, &b);
  assert_ptr_equal(xgr__hashmap_find(&m, 9, item_match, &a), &a);
  assert_true(xgr__hashmap_remove(&m, 9, &a));
  assert_ptr_equal(xgr__hashmap_find(&m, 9, item_match, &a), &b);
  assert_false(xgr__hashmap_remove(&m, 9, &a));
  assert_true(xgr__hashmap_remove(&m, 9, &b));
  assert_int_equal(m.n, 0);
  xgr__hashmap_free(&m);
}

static void test_iteration(void **s) {
  (void)s;
  enum { N = 5000 };
  xgr_hashmap m = {0};
  for (uint64_t k = 0; k < N; k++) xgr__hashmap_put(&m, k * 3, V(k));
  for (uint64_t k = 0; k < N; k += 5) xgr__hashmap_del(&m, k * 3);
  unsigned char *seen = calloc(N, 1);
  assert_non_null(seen);
  size_t pos = 0, n = 0;
  uint64_t key;
  void *v;
  while ((v = xgr__hashmap_next(&m, &pos, &key))) {
    assert_int_equal(key % 3, 0);
    uint64_t k = key / 3;
    assert_true(k < N && k % 5 != 0);
    assert_ptr_equal(v, V(k));
    assert_int_equal(seen[k], 0);
    seen[k] = 1;
    n++;
  }
  assert_int_equal(n, N - N / 5);
  assert_null(xgr__hashmap_next(&m, &pos, NULL));   /* stays at the end */
  free(seen);
  xgr__hashmap_free(&m);
}

/* A long random run of puts and deletes over a small key range (so clusters form, wrap and are
 * punched), checked after every operation against a flat model. */
static void test_random_against_model(void **s) {
  (void)s;
  enum { KEYS = 3000, OPS = 400000 };
  void **model = calloc(KEYS, sizeof *model);
  assert_non_null(model);
  xgr_hashmap m = {0};
  uint64_t r = 88172645463325252ull;
  size_t live = 0;
  for (size_t op = 0; op < OPS; op++) {
    r ^= r << 13;
    r ^= r >> 7;
    r ^= r << 17;
    uint64_t k = r % KEYS;
    /* bias towards deletion in the second half so the table also empties out */
    bool del = (r >> 32) % 100 < (op < OPS / 2 ? 40u : 60u);
    if (del) {
      assert_ptr_equal(xgr__hashmap_del(&m, k), model[k]);
      if (model[k]) live--;
      model[k] = NULL;
    } else {
      void *v = V(op);
      assert_ptr_equal(xgr__hashmap_put(&m, k, v), model[k]);
      if (!model[k]) live++;
      model[k] = v;
    }
    assert_int_equal(m.n, live);
    if (op % 4096 == 0) {
      check_table(&m);
      for (uint64_t j = 0; j < KEYS; j++) assert_ptr_equal(xgr__hashmap_get(&m, j), model[j]);
    }
  }
  for (uint64_t j = 0; j < KEYS; j++) assert_ptr_equal(xgr__hashmap_get(&m, j), model[j]);
  check_table(&m);
  xgr__hashmap_free(&m);
  free(model);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_empty),
      cmocka_unit_test(test_growth),
      cmocka_unit_test(test_put_replaces),
      cmocka_unit_test(test_collisions_and_backward_shift),
      cmocka_unit_test(test_hashed_keys),
      cmocka_unit_test(test_hashed_keys_shared_hashes),
      cmocka_unit_test(test_hashed_duplicates),
      cmocka_unit_test(test_iteration),
      cmocka_unit_test(test_random_against_model),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
