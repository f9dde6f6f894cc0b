/* value_impl.h — the layout of xgr's refcounted value objects, shared by src/value and
 * src/cel (which reads them directly on its hot paths). Not a public header.
 *
 * Every heap object starts with an atomic reference count. Strings and bytes are one block
 * (header + bytes + NUL). Lists hold a separate, growable item array. Maps keep their entries in
 * insertion order in an array and, from XGR_MAP_INDEX_MIN entries on, an open-addressing index of
 * entry numbers keyed by a 64-bit hash of the key. Numeric keys hash by numeric value so that
 * 1, 1u and 1.0 find the same entry. Every list and map caches `deepmax`, the longest list inside
 * it (itself included), so the MaxListCap check on an input is O(1).
 */
#ifndef XGR_VALUE_IMPL_H
#define XGR_VALUE_IMPL_H

#include "util/alloc.h"
#include <gmp.h>
#include <stdatomic.h>

#include "util/buf.h"
#include "xgr/value.h"

struct xgr_str {
  atomic_uint rc;
  uint32_t len;
  char data[];   /* len bytes + NUL */
};

struct xgr_list {
  atomic_uint rc;
  uint32_t len, cap;
  uint32_t deepmax;
  xgr_value *items;
};

typedef struct xgr_map_ent {
  xgr_value key, val;
  uint64_t hash;
} xgr_map_ent;

#define XGR_MAP_INDEX_MIN 9

struct xgr_map {
  atomic_uint rc;
  uint32_t len, cap;
  uint32_t deepmax;
  uint32_t nslots;      /* 0 (no index) or a power of two */
  xgr_map_ent *e;
  uint32_t *slots;      /* entry index + 1, 0 = empty */
};

struct xgr_bigint {
  atomic_uint rc;
  mpz_t z;
};

/* 64-bit hash of bytes (the hash of string keys; the compiler pre-hashes names with it). */
uint64_t xgr__hash_bytes(const void *p, size_t n);
/* Hash of a map key; false if v cannot be a key (kind or a non-integral double). */
bool xgr__hash_key(xgr_value v, uint64_t *h);
/* Lookup of a string key whose hash is already known. */
bool xgr__map_get_str_hashed(const xgr_map *m, const char *key, size_t len, uint64_t h, xgr_value *out);
/* Lookup with a key value (CEL semantics); false when absent or not a key kind. */
bool xgr__map_get(const xgr_map *m, xgr_value key, xgr_value *out);

/* A new BIGINT value taking the value of z (copied); is_signed picks int256. No range check. */
xgr_value xgr__bigint_from_mpz(mpz_srcptr z, bool is_signed);
/* Range check for the flavour: 0 <= z < 2^256 or -2^255 <= z < 2^255. */
bool xgr__bigint_in_range(mpz_srcptr z, bool is_signed);
/* Set z to the integer value of v (int, uint or bigint); false for other kinds. */
bool xgr__to_mpz(xgr_value v, mpz_ptr z);

/* Three-way numeric comparison across int/uint/double/bigint. Returns -1, 0, 1, or 2 when the
 * values are unordered (NaN). Both must be numbers. */
int xgr__num_cmp(xgr_value a, xgr_value b);

/* The growable byte buffer of the renderers and the JSON writer: util/buf.h. */
/* Append the JSON form of v (the writer of xgr_value_to_json_text). */
void xgr__json_write(xgr_buf *b, xgr_value v, unsigned flags, int indent);
/* Append s as a JSON string literal. */
void xgr__json_write_string(xgr_buf *b, const char *s, size_t n);
/* The common case of xgr_json_parse_exact's jansson reading (json.c): the same tree as
 * json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL) for texts without string escapes,
 * fractions, exponents or integers beyond 18 digits; NULL (declined, nothing said) for every other
 * text, valid or not. The caller owns the tree. */
json_t *xgr__json_parse_fast(const char *text, size_t len);


#endif
