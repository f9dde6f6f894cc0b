/* xgr/value.h — the dynamic value model of xgr: what payloads, API responses, contract reads and
 * CEL expressions compute with.
 *
 * An xgr_value is a small tagged struct (16 bytes) passed by value. Scalars (null, bool, int,
 * uint, double, type values) live inside it and need no memory management. Aggregates (string,
 * bytes, list, map, bigint) point to an immutable, reference-counted heap object; the value
 * holds one reference.
 *
 * Ownership rules (the same everywhere in xgr):
 *   - A function that *returns* an xgr_value (or fills an `xgr_value *out`) gives the caller one
 *     reference: the caller releases it with xgr_value_release() (a no-op for scalars).
 *   - A function that *takes* an xgr_value argument named `take_*` (or documented "takes
 *     ownership") consumes the caller's reference; every other argument is borrowed.
 *   - Accessors that return pointers or values *from inside* an aggregate (xgr_list_get,
 *     xgr_map_get, xgr_value_str, ...) return borrowed data, valid while the aggregate lives.
 *   - Reference counts are atomic: a value may be shared by several threads, read-only.
 *     Mutators (xgr_list_push, xgr_map_set, ...) are only allowed on an aggregate the caller just
 *     created and has not shared yet (its reference count is 1).
 *   - Allocation failure aborts the process (out of memory is not recoverable at this level).
 *
 * Kinds and the JSON mapping (xgr_value_from_json*, xgr_value_to_json*):
 *   null, true/false         <-> NULL, BOOL
 *   integers                  -> INT (fits int64), UINT (fits uint64), else BIGINT (fits 256 bit,
 *                                uint256 or int256), else DOUBLE. Exact: never through a double.
 *   numbers with . or e/E     -> DOUBLE
 *   strings <-> STRING; arrays <-> LIST; objects <-> MAP with string keys in document order.
 *   BYTES -> base64 string; BIGINT -> decimal string (SEMANTICS §8); TYPE -> its name as a string;
 *   non-finite DOUBLE -> "NaN" / "Infinity" / "-Infinity" strings; maps with non-string keys ->
 *   objects keyed by the key's text form.
 */
#ifndef XGR_VALUE_H
#define XGR_VALUE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xgr/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum xgr_vkind {
  XGR_VNULL = 0,   /* null (CEL null_type) */
  XGR_VBOOL = 1,   /* as.b */
  XGR_VINT = 2,    /* as.i, int64 */
  XGR_VUINT = 3,   /* as.u, uint64 */
  XGR_VDOUBLE = 4, /* as.d */
  XGR_VSTRING = 5, /* as.s, UTF-8 text (length-aware, may contain NUL) */
  XGR_VBYTES = 6,  /* as.s, raw bytes */
  XGR_VLIST = 7,   /* as.l */
  XGR_VMAP = 8,    /* as.m, insertion-ordered; keys string, int, uint or bool */
  XGR_VTYPE = 9,   /* a CEL type value: `sub` holds the xgr_vkind it denotes (XGR_VTYPE for
                      `type`, XGR_VNULL for `null_type`); for BIGINT, `flags` 1 means int256 */
  XGR_VBIGINT = 10 /* as.n, 256-bit integer: uint256, or int256 when flags & XGR_VF_SIGNED */
} xgr_vkind;

#define XGR_VF_SIGNED 1u  /* BIGINT / TYPE(BIGINT): the int256 flavour */

typedef struct xgr_str xgr_str;       /* immutable refcounted bytes: string or bytes payload */
typedef struct xgr_list xgr_list;     /* refcounted array of values */
typedef struct xgr_map xgr_map;       /* refcounted insertion-ordered hash map */
typedef struct xgr_bigint xgr_bigint; /* refcounted 256-bit integer */

typedef struct xgr_value {
  uint8_t kind;   /* xgr_vkind */
  uint8_t sub;    /* TYPE: denoted kind; otherwise 0 */
  uint8_t flags;  /* XGR_VF_* */
  uint8_t pad_;
  uint32_t aux_;  /* internal use (never needed by callers) */
  union {
    bool b;
    int64_t i;
    uint64_t u;
    double d;
    xgr_str *s;
    xgr_list *l;
    xgr_map *m;
    xgr_bigint *n;
  } as;
} xgr_value;

/* ---- scalars (no allocation) ---------------------------------------------------------------- */
static inline xgr_value xgr_value_null(void) { xgr_value v = {0}; return v; }
static inline xgr_value xgr_value_bool(bool b) { xgr_value v = {0}; v.kind = XGR_VBOOL; v.as.b = b; return v; }
static inline xgr_value xgr_value_int(int64_t i) { xgr_value v = {0}; v.kind = XGR_VINT; v.as.i = i; return v; }
static inline xgr_value xgr_value_uint(uint64_t u) { xgr_value v = {0}; v.kind = XGR_VUINT; v.as.u = u; return v; }
static inline xgr_value xgr_value_double(double d) { xgr_value v = {0}; v.kind = XGR_VDOUBLE; v.as.d = d; return v; }
/* A type value denoting kind k (flags XGR_VF_SIGNED with XGR_VBIGINT for int256). */
static inline xgr_value xgr_value_type(xgr_vkind k, unsigned flags) {
  xgr_value v = {0}; v.kind = XGR_VTYPE; v.sub = (uint8_t)k; v.flags = (uint8_t)flags; return v;
}
static inline xgr_vkind xgr_value_kind(xgr_value v) { return (xgr_vkind)v.kind; }
/* True for int, uint, double and bigint. */
static inline bool xgr_value_is_number(xgr_value v) {
  return v.kind == XGR_VINT || v.kind == XGR_VUINT || v.kind == XGR_VDOUBLE || v.kind == XGR_VBIGINT;
}

/* ---- reference counting --------------------------------------------------------------------- */
/* Add a reference and return v (for aggregates; scalars are returned unchanged). */
xgr_value xgr_value_retain(xgr_value v);
/* Drop the reference v holds; frees the object when it was the last. No-op for scalars. */
void xgr_value_release(xgr_value v);
/* Pin v and everything inside it: retain and release become no-ops on pinned objects, so
 * constants read by many threads at once (a rule's keys and literals, its empty map) cost no
 * shared write per use. The pinning owner keeps the one reference it held; it must unpin and then
 * release only when no other holder is left — a value taken from a pinned constant holds no
 * reference of its own. Not thread-safe against concurrent pin/unpin of the same value. */
void xgr_value_pin(xgr_value v);
/* Undo xgr_value_pin for v and everything inside it (reference counts are as before pinning). */
void xgr_value_unpin(xgr_value v);
/* Release *v and set it to null. */
static inline void xgr_value_clear(xgr_value *v) { xgr_value_release(*v); *v = xgr_value_null(); }

/* ---- strings and bytes ---------------------------------------------------------------------- */
/* New string / bytes value holding a copy of len bytes of s (caller releases). Strings are not
 * checked for UTF-8 here; xgr_utf8_valid() does that where input is untrusted. */
xgr_value xgr_value_string(const char *s, size_t len);
xgr_value xgr_value_cstring(const char *s);
xgr_value xgr_value_bytes(const void *p, size_t len);
/* Borrowed pointer to the bytes of a string/bytes value (NUL-terminated for convenience, but
 * may contain NULs: use *len). NULL for other kinds. */
const char *xgr_value_str(xgr_value v, size_t *len);
/* True when the len bytes of s are well-formed UTF-8 (no surrogates, no overlongs). */
bool xgr_utf8_valid(const char *s, size_t len);

/* ---- lists -------------------------------------------------------------------------------- */
/* New empty list with room for cap elements (caller releases). */
xgr_value xgr_list_new(size_t cap);
/* Append, taking ownership of take_item. The list must be unshared (refcount 1). */
void xgr_list_push(xgr_value list, xgr_value take_item);
size_t xgr_list_size(xgr_value list);                 /* 0 for non-lists */
xgr_value xgr_list_get(xgr_value list, size_t i);     /* borrowed; i < size */

/* ---- maps --------------------------------------------------------------------------------- */
/* New empty map with room for cap entries (caller releases). Keys keep insertion order. */
xgr_value xgr_map_new(size_t cap);
/* Insert or replace (a replaced key keeps its position), taking ownership of take_key and
 * take_val. Keys must be string, int, uint or bool: otherwise both are released and XGR_EINVAL
 * is returned. Int and uint keys with the same numeric value are the same key. The map must be
 * unshared. Returns 0. */
int xgr_map_set(xgr_value map, xgr_value take_key, xgr_value take_val);
/* Same with a string key copied from key[0..len). */
int xgr_map_set_str(xgr_value map, const char *key, size_t len, xgr_value take_val);
/* Remove a string key (order of the others kept). Returns true if it was present. Unshared map. */
bool xgr_map_remove_str(xgr_value map, const char *key, size_t len);
/* Look up a key with CEL key semantics (int/uint/double keys compare numerically). On success
 * *out is borrowed. */
bool xgr_map_get(xgr_value map, xgr_value key, xgr_value *out);
bool xgr_map_get_str(xgr_value map, const char *key, size_t len, xgr_value *out);
size_t xgr_map_size(xgr_value map);                   /* 0 for non-maps */
/* The i-th entry in insertion order (borrowed). i < size. */
void xgr_map_entry(xgr_value map, size_t i, xgr_value *key, xgr_value *val);
/* A new map with the same entries (each retained), unshared, so the caller may modify it. */
xgr_value xgr_map_copy(xgr_value map);

/* ---- 256-bit integers ----------------------------------------------------------------------- */
/* Parse a decimal (or 0x-hex) integer into a BIGINT value. is_signed selects int256 (range
 * -2^255 .. 2^255-1) over uint256 (0 .. 2^256-1). Out of range or malformed: XGR_EINVAL with a
 * message, *out untouched. */
int xgr_bigint_parse(const char *s, size_t len, bool is_signed, xgr_value *out, xgr_error *e);
/* Write the decimal form of a BIGINT (or int/uint) into buf (at most 80 bytes are needed).
 * Returns the length, or 0 for other kinds. */
size_t xgr_bigint_to_dec(xgr_value v, char *buf, size_t n);

/* ---- comparison, hashing, text ------------------------------------------------------------ */
/* CEL equality: numbers compare by value across int/uint/double/bigint (NaN != NaN), strings
 * and bytes bytewise, lists elementwise, maps by key set and values (order ignored), types by
 * identity. Values of different kinds are unequal. A bigint also equals a string holding its
 * decimal form (SEMANTICS §8). */
bool xgr_value_equal(xgr_value a, xgr_value b);
/* Name of a kind as CEL prints it: "null_type", "bool", "int", "uint", "double", "string",
 * "bytes", "list", "map", "type", "uint256" (v's flags pick "int256"). */
const char *xgr_value_kind_name(xgr_value v);
/* Text form used by templates and string(): strings as-is, ints/uints in decimal, doubles in
 * shortest round-trip form ("0.1", "1e+21", "2"), bools true/false, null "null", bytes as
 * their (UTF-8) bytes, bigints in decimal, types by name, lists/maps as compact JSON.
 * Returns a malloc'd NUL-terminated string (caller frees); *len (if not NULL) gets its length. */
char *xgr_value_render(xgr_value v, size_t *len);
/* Shortest decimal form of d that reads back as exactly d (%.15g..%.17g); "NaN", "Infinity",
 * "-Infinity" for non-finite values. buf needs 32 bytes. Returns the length. */
size_t xgr_format_double(double d, char *buf, size_t n);

/* ---- deep caps ---------------------------------------------------------------------------- */
/* The longest list anywhere inside v (v itself included), cached on construction: O(1). */
size_t xgr_value_max_list_len(xgr_value v);
/* XGR_ELIMIT if some list inside v is longer than max: "list has N elements, MaxListCap is M". */
int xgr_value_check_list_cap(xgr_value v, size_t max, xgr_error *e);

/* ---- JSON ----------------------------------------------------------------------------------- */
enum {
  XGR_JSON_NUMBERS_AS_DOUBLE = 1u << 0, /* guide §6.1 normalisation: every number -> DOUBLE */
  XGR_JSON_PRETTY = 1u << 1,            /* writer: indent with two spaces */
  XGR_JSON_BIGINT_NUMBERS = 1u << 2,    /* writer: a BIGINT as a JSON number (its digits), not a string */
};
/* The one nesting limit of every JSON text xgr reads or writes: requests (xgrd refuses a deeper
 * one at the door with -32602 and the path where it crosses the limit), documents, payloads, store
 * rows. A document of depth d has d containers nested in each other ("[[1]]" has depth 2). Since
 * anything stored is part of something that passed the door, nothing accepted is unreadable later. */
#define XGR_JSON_MAX_DEPTH 128
/* Scan JSON text (no allocation; strings and escapes skipped, nothing else validated) for
 * containers nested deeper than max. Returns 0, or XGR_ELIMIT with e (may be NULL) naming the path
 * to the first container that crosses the limit (`params.init.payload.a[0]…`, cut to fit). */
int xgr_json_check_depth(const char *text, size_t len, size_t max, xgr_error *e);
/* Parse JSON text (length-aware, duplicate object keys rejected, nesting depth <= XGR_JSON_MAX_DEPTH) into a
 * value (caller releases). Errors: XGR_EPARSE "line L, column C: reason". */
int xgr_value_from_json_text(const char *text, size_t len, unsigned flags, xgr_value *out,
                             xgr_error *e);
/* Convert a jansson value (borrowed). jansson integers are int64, so they become INT (or DOUBLE
 * with XGR_JSON_NUMBERS_AS_DOUBLE). Returns 0; XGR_EINVAL only for a NULL j. */
int xgr_value_from_json(const json_t *j, unsigned flags, xgr_value *out, xgr_error *e);
/* Compact (or pretty) JSON text of v, malloc'd (caller frees), *len (if not NULL) its length.
 * Numbers are exact (uint beyond int64 printed as digits; doubles keep a '.' or exponent so
 * they read back as DOUBLE); a BIGINT is a decimal string unless flags has XGR_JSON_BIGINT_NUMBERS. */
char *xgr_value_to_json_text(xgr_value v, unsigned flags, size_t *len);
/* Text of a jansson value (borrowed) with numbers written as the value writer writes them:
 * doubles in their shortest round-trip form ("0.1", not jansson's 17-digit "0.10000000000000001").
 * flags: 0 compact or XGR_JSON_PRETTY. Returns a malloc'd string (caller frees), or NULL for a
 * NULL j. Every printed report uses it. */
char *xgr_json_dumps(const json_t *j, unsigned flags);
/* A new jansson reference (caller json_decref's). jansson cannot hold integers above int64:
 * such uints become decimal strings, like bigints. */
json_t *xgr_value_to_json(xgr_value v);

/* ---- exact integers in jansson trees ----------------------------------------------------------
 * jansson holds integers up to int64 only. Where JSON from outside may carry bigger ones (RPC
 * requests, bundle files, stored payloads), xgr parses with xgr_json_parse_exact: an integer
 * jansson cannot hold becomes an "exact integer" node, a jansson string whose bytes (a prefix that
 * is not UTF-8, then the decimal digits) no parsed JSON can produce. xgr_value_from_json turns it
 * back into the exact uint/bigint (or int), xgr_json_dumps and xgr_json_dumps_compact write it
 * as a JSON number. Anything else sees an opaque string. */
/* Parse like xgr_json_parse (duplicate keys rejected, NUL allowed), exactly: 0 with *out (caller
 * decrefs), or XGR_EPARSE "invalid JSON at line L, column C: ...". */
int xgr_json_parse_exact(const char *text, size_t len, json_t **out, xgr_error *e);
/* Like xgr_value_to_json, but integers beyond int64 become exact integer nodes. */
json_t *xgr_value_to_json_exact(xgr_value v);
/* When j is an exact integer node: true and *out its value (uint, bigint or int). */
bool xgr_json_exact_integer(const json_t *j, xgr_value *out);
/* Compact text of j (malloc'd, caller frees; NULL for NULL j): jansson's own JSON_COMPACT form, or
 * xgr's writer when the tree holds exact integer nodes (jansson would write them as strings). */
char *xgr_json_dumps_compact(const json_t *j);

#ifdef __cplusplus
}
#endif
#endif
