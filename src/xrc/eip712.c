/* eip712.c — EIP-712 typed-data hashing (see xgr/eip712.h): type strings are parsed on the fly
 * (atomic, struct name, array suffixes), referenced struct types are collected depth-first into a
 * small bounded set and sorted for encodeType, values are encoded into 32-byte words and hashed
 * recursively. Integers are kept as 32-byte big-endian words with their own decimal/hex parser. */
#include "xgr/eip712.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/buf.h"
#include "util/suggest.h"
#include "xgr/json.h"
#include "xgr/keccak.h"
#include "xgr/secp.h"

#define TYPE_MAX 128 /* longest type string accepted */

/* The JSON type of v for messages; "nothing" for a missing value. */
static const char *tname(const json_t *v) { return v ? xgr_json_type_name(v) : "nothing"; }

typedef enum kind { K_ADDRESS, K_BOOL, K_STRING, K_BYTES, K_BYTESN, K_UINT, K_INT, K_STRUCT } kind;

/* ---- type strings ---------------------------------------------------------------------------- */

static int ident_char(int c, int first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' || (!first && c >= '0' && c <= '9');
}

static int is_ident(const char *s) {
  if (!s[0]) return 0;
  for (size_t i = 0; s[i]; i++)
    if (!ident_char((unsigned char)s[i], i == 0)) return 0;
  return 1;
}

/* Parse a decimal size 1..max made of digits only (no leading zero); -1 otherwise. */
static int small_num(const char *s, int max) {
  if (!s[0] || s[0] == '0' || strlen(s) > 4) return -1;
  int n = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return -1;
    n = n * 10 + (*s - '0');
  }
  return n <= max ? n : -1;
}

/* Classify a type without array suffix. For K_BYTESN/K_UINT/K_INT *size is the byte count /
 * bit count. Struct names are identifiers that are not atomic names. */
static kind classify(const char *t, int *size) {
  *size = 0;
  if (!strcmp(t, "address")) return K_ADDRESS;
  if (!strcmp(t, "bool")) return K_BOOL;
  if (!strcmp(t, "string")) return K_STRING;
  if (!strcmp(t, "bytes")) return K_BYTES;
  if (!strncmp(t, "bytes", 5)) {
    int n = small_num(t + 5, 32);
    if (n > 0) {
      *size = n;
      return K_BYTESN;
    }
  }
  if (!strncmp(t, "uint", 4) || !strncmp(t, "int", 3)) {
    int u = t[0] == 'u';
    const char *d = t + (u ? 4 : 3);
    int n = small_num(d, 256);
    if (n > 0 && n % 8 == 0) {
      *size = n;
      return u ? K_UINT : K_INT;
    }
  }
  return K_STRUCT;
}

/* Split "T[2][]" into element "T[2]" and the last dimension: returns 1 for an array (dim = -1 for
 * dynamic, else k), 0 for a non-array, -1 for a malformed suffix. */
static int split_array(const char *t, char elem[TYPE_MAX], int *dim) {
  size_t n = strlen(t);
  if (!n || t[n - 1] != ']') return 0;
  const char *open = NULL;
  for (size_t i = n - 1; i > 0; i--)
    if (t[i - 1] == '[') {
      open = t + i - 1;
      break;
    }
  if (!open || open == t) return -1;
  size_t inner = (size_t)(t + n - 1 - (open + 1));
  if (!inner)
    *dim = -1;
  else {
    char num[8];
    if (inner >= sizeof num) return -1;
    memcpy(num, open + 1, inner);
    num[inner] = 0;
    *dim = small_num(num, XGR_EIP712_MAX_ARRAY);
    if (*dim < 0) return -1;
  }
  memcpy(elem, t, (size_t)(open - t));
  elem[open - t] = 0;
  return 1;
}

/* The base (all array suffixes removed) of t into base. -1 when malformed. */
static int base_type(const char *t, char base[TYPE_MAX]) {
  char cur[TYPE_MAX];
  if (strlen(t) >= TYPE_MAX) return -1;
  snprintf(cur, sizeof cur, "%s", t);
  for (int guard = 0; guard < 16; guard++) {
    int dim, r = split_array(cur, base, &dim);
    if (r < 0) return -1;
    if (r == 0) {
      memcpy(base, cur, strlen(cur) + 1);
      return 0;
    }
    memcpy(cur, base, strlen(base) + 1);
  }
  return -1;
}

/* The field list of struct `name`, checked for shape: an array of {name, type} objects with
 * identifier names, unique, and well-formed type strings. */
static int struct_fields(const json_t *types, const char *name, const json_t **out, xgr_error *err) {
  if (!json_is_object(types)) return xgr_error_set(err, XGR_ESCHEMA, "types", "expected an object of struct types");
  if (json_object_size(types) > XGR_EIP712_MAX_TYPES)
    return xgr_error_set(err, XGR_ELIMIT, "types", "%zu struct types; at most %d", json_object_size(types),
                         XGR_EIP712_MAX_TYPES);
  const json_t *f = json_object_get(types, name);
  if (!f) return xgr_error_set(err, XGR_ESCHEMA, "types", "type %.64s is not defined", name);
  if (!json_is_array(f))
    return xgr_error_set(err, XGR_ESCHEMA, "types", "types.%.64s: expected an array of {name, type}", name);
  size_t n = json_array_size(f);
  if (n > XGR_EIP712_MAX_FIELDS)
    return xgr_error_set(err, XGR_ELIMIT, "types", "types.%.64s: %zu fields; at most %d", name, n, XGR_EIP712_MAX_FIELDS);
  for (size_t i = 0; i < n; i++) {
    const json_t *e = json_array_get(f, i);
    const char *fn = json_string_value(json_object_get(e, "name"));
    const char *ft = json_string_value(json_object_get(e, "type"));
    const char *bad = NULL;
    char base[TYPE_MAX];
    int sz;
    if (!json_is_object(e) || !fn || !ft) bad = "expected {\"name\": string, \"type\": string}";
    else if (!is_ident(fn) || strlen(fn) >= TYPE_MAX) bad = "the field name is not an identifier";
    else if (base_type(ft, base) || (classify(base, &sz) == K_STRUCT && !is_ident(base))) bad = "malformed type";
    for (size_t j = 0; !bad && j < i; j++)
      if (!strcmp(fn, json_string_value(json_object_get(json_array_get(f, j), "name")))) bad = "the field appears twice";
    if (bad) {
      char fp[XGR_PATH_MAX];
      snprintf(fp, sizeof fp, "types.%.64s[%zu]", name, i);
      return xgr_error_set(err, XGR_ESCHEMA, fp, "%s", bad);
    }
  }
  *out = f;
  return 0;
}

/* out = a + "." + b (or b when a is empty), truncated to cap. */
static void path_join(char *out, size_t cap, const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la + 1 + lb + 1 > cap) {
    snprintf(out, cap, "%s.%s", a, b);
    return;
  }
  memcpy(out, a, la);
  if (la) out[la++] = '.';
  memcpy(out + la, b, lb + 1);
}

typedef struct typeset {
  const char *names[XGR_EIP712_MAX_TYPES + 1];
  size_t n;
} typeset;

static int collect(const json_t *types, const char *name, typeset *ts, xgr_error *err) {
  for (size_t i = 0; i < ts->n; i++)
    if (!strcmp(ts->names[i], name)) return 0;
  const json_t *fields;
  int rc = struct_fields(types, name, &fields, err);
  if (rc) return rc;
  if (ts->n >= XGR_EIP712_MAX_TYPES)
    return xgr_error_set(err, XGR_ELIMIT, "types", "more than %d struct types referenced", XGR_EIP712_MAX_TYPES);
  /* the key string owned by `types` outlives this call; look it up to keep a stable pointer */
  const char *key;
  const json_t *val;
  json_object_foreach((json_t *)types, key, val) {
    if (!strcmp(key, name)) {
      ts->names[ts->n++] = key;
      break;
    }
  }
  (void)val;
  size_t i;
  const json_t *e;
  json_array_foreach(fields, i, e) {
    char base[TYPE_MAX];
    int sz;
    if (base_type(json_string_value(json_object_get(e, "type")), base)) return XGR_ESCHEMA; /* checked above */
    if (classify(base, &sz) != K_STRUCT) continue;
    if ((rc = collect(types, base, ts, err))) return rc;
  }
  return 0;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static void put_struct(xgr_buf *b, const char *name, const json_t *fields) {
  xgr__buf_puts(b, name);
  xgr__buf_putc(b, '(');
  size_t i;
  const json_t *e;
  json_array_foreach(fields, i, e) {
    if (i) xgr__buf_putc(b, ',');
    xgr__buf_puts(b, json_string_value(json_object_get(e, "type")));
    xgr__buf_putc(b, ' ');
    xgr__buf_puts(b, json_string_value(json_object_get(e, "name")));
  }
  xgr__buf_putc(b, ')');
}

int xgr_eip712_encode_type(const json_t *types, const char *primary, char **out, xgr_error *err) {
  typeset ts = {.n = 0};
  if (!primary || !is_ident(primary) || classify(primary, &(int){0}) != K_STRUCT)
    return xgr_error_set(err, XGR_ESCHEMA, "primaryType", "\"%.64s\" is not a struct type name", primary ? primary : "");
  int rc = collect(types, primary, &ts, err);
  if (rc) return rc;
  qsort(ts.names + 1, ts.n - 1, sizeof ts.names[0], cmp_names);
  xgr_buf b = {0};
  for (size_t i = 0; i < ts.n; i++) put_struct(&b, ts.names[i], json_object_get(types, ts.names[i]));
  *out = xgr__buf_finish(&b, NULL);
  return 0;
}

int xgr_eip712_type_hash(const json_t *types, const char *primary, uint8_t out[32], xgr_error *err) {
  char *s;
  int rc = xgr_eip712_encode_type(types, primary, &s, err);
  if (rc) return rc;
  xgr_keccak256(s, strlen(s), out);
  free(s);
  return 0;
}

/* ---- integers -------------------------------------------------------------------------------- */

/* w = w * mul + add; returns 1 on overflow past 256 bits. */
static int word_muladd(uint8_t w[32], unsigned mul, unsigned add) {
  unsigned carry = add;
  for (int i = 31; i >= 0; i--) {
    unsigned v = w[i] * mul + carry;
    w[i] = (uint8_t)v;
    carry = v >> 8;
  }
  return carry != 0;
}

static int word_bitlen(const uint8_t w[32]) {
  for (int i = 0; i < 32; i++)
    if (w[i]) {
      int b = 8;
      while (!(w[i] & (1u << (b - 1)))) b--;
      return (31 - i) * 8 + b;
    }
  return 0;
}

/* Is w exactly 2^k? */
static int word_is_pow2(const uint8_t w[32], int k) {
  for (int i = 0; i < 32; i++) {
    int lo = (31 - i) * 8;
    uint8_t want = (k >= lo && k < lo + 8) ? (uint8_t)(1u << (k - lo)) : 0;
    if (w[i] != want) return 0;
  }
  return 1;
}

static void word_negate(uint8_t w[32]) {
  unsigned carry = 1;
  for (int i = 31; i >= 0; i--) {
    unsigned v = (uint8_t)~w[i] + carry;
    w[i] = (uint8_t)v;
    carry = v >> 8;
  }
}

int xgr_eip712_encode_int(const char *type, const json_t *v, const char *path, uint8_t out[32], xgr_error *err) {
  int bits;
  kind k = classify(type, &bits);
  assert(k == K_UINT || k == K_INT);
  int neg = 0;
  memset(out, 0, 32);
  if (json_is_integer(v)) {
    json_int_t x = json_integer_value(v);
    uint64_t m;
    if (x < 0) {
      neg = 1;
      m = (uint64_t)(-(x + 1)) + 1;
    } else
      m = (uint64_t)x;
    for (int i = 0; i < 8; i++) out[31 - i] = (uint8_t)(m >> (8 * i));
  } else if (json_is_string(v)) {
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    if (len > 80 || strlen(s) != len)
      return xgr_error_set(err, XGR_ESCHEMA, path, "expected a %s as a decimal or 0x-hex string of at most 80 characters",
                           type);
    if (*s == '-') {
      neg = 1;
      s++;
    }
    int hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    if (hex) s += 2;
    if (!*s) return xgr_error_set(err, XGR_ESCHEMA, path, "empty number; expected a %s", type);
    for (; *s; s++) {
      int d;
      if (*s >= '0' && *s <= '9')
        d = *s - '0';
      else if (hex && *s >= 'a' && *s <= 'f')
        d = *s - 'a' + 10;
      else if (hex && *s >= 'A' && *s <= 'F')
        d = *s - 'A' + 10;
      else
        return xgr_error_set(err, XGR_ESCHEMA, path, "\"%.80s\" is not a %s number; expected a %s",
                             json_string_value(v), hex ? "hex" : "decimal", type);
      if (word_muladd(out, hex ? 16 : 10, (unsigned)d))
        return xgr_error_set(err, XGR_ESCHEMA, path, "%.80s does not fit a %s", json_string_value(v), type);
    }
  } else {
    return xgr_error_set(err, XGR_ESCHEMA, path, "expected a %s (integer or decimal string), got %s", type,
                         tname(v));
  }
  int bl = word_bitlen(out);
  if (bl == 0) neg = 0;
  if (k == K_UINT) {
    if (neg) return xgr_error_set(err, XGR_ESCHEMA, path, "negative value; expected a %s", type);
    if (bl > bits) return xgr_error_set(err, XGR_ESCHEMA, path, "value does not fit a %s", type);
  } else {
    if (bl > bits - 1 && !(neg && word_is_pow2(out, bits - 1)))
      return xgr_error_set(err, XGR_ESCHEMA, path, "value does not fit an %s", type);
    if (neg) word_negate(out);
  }
  return 0;
}

/* ---- values ---------------------------------------------------------------------------------- */

static int hash_struct(const json_t *types, const char *name, const json_t *v, const char *path, int depth,
                       uint8_t out[32], xgr_error *err);

static int hex_value(const json_t *v, const char *path, const char *type, uint8_t **bytes, size_t *n,
                     size_t max, xgr_error *err) {
  const char *s = json_string_value(v);
  if (!s) return xgr_error_set(err, XGR_ESCHEMA, path, "expected a %s as 0x-hex, got %s", type, tname(v));
  size_t len = json_string_length(v);
  if (len < 2 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || len % 2)
    return xgr_error_set(err, XGR_ESCHEMA, path, "expected a %s as 0x followed by an even number of hex digits", type);
  size_t nb = (len - 2) / 2;
  if (nb > max) return xgr_error_set(err, XGR_ELIMIT, path, "%zu bytes; at most %zu", nb, max);
  uint8_t *b = xgr__xmalloc(nb);
  char *tmp = xgr__xmalloc(len + 1);
  memcpy(tmp, s, len + 1);
  if (strlen(tmp) != len || xgr_hex_decode(tmp, b, nb)) {
    free(tmp);
    free(b);
    return xgr_error_set(err, XGR_ESCHEMA, path, "expected a %s as 0x-hex; found a character that is not a hex digit",
                         type);
  }
  free(tmp);
  *bytes = b;
  *n = nb;
  return 0;
}

#define MAX_BYTES (64 * 1024)

static int encode_value(const json_t *types, const char *type, const json_t *v, const char *path, int depth,
                        uint8_t out[32], xgr_error *err) {
  if (depth > XGR_EIP712_MAX_DEPTH)
    return xgr_error_set(err, XGR_ELIMIT, path, "nested deeper than %d levels", XGR_EIP712_MAX_DEPTH);
  char elem[TYPE_MAX];
  int dim;
  if (strlen(type) >= TYPE_MAX) return xgr_error_set(err, XGR_ESCHEMA, path, "type name too long");
  int arr = split_array(type, elem, &dim);
  if (arr < 0) return xgr_error_set(err, XGR_ESCHEMA, path, "malformed array type \"%.64s\"", type);
  if (arr) {
    if (!json_is_array(v))
      return xgr_error_set(err, XGR_ESCHEMA, path, "expected an array (%s), got %s", type, tname(v));
    size_t n = json_array_size(v);
    if (n > XGR_EIP712_MAX_ARRAY)
      return xgr_error_set(err, XGR_ELIMIT, path, "%zu elements; at most %d", n, XGR_EIP712_MAX_ARRAY);
    if (dim >= 0 && n != (size_t)dim)
      return xgr_error_set(err, XGR_ESCHEMA, path, "%zu elements; %s has exactly %d", n, type, dim);
    uint8_t *words = xgr__xmalloc(n * 32);
    for (size_t i = 0; i < n; i++) {
      char ep[XGR_PATH_MAX];
      snprintf(ep, sizeof ep, "%s[%zu]", path, i);
      int rc = encode_value(types, elem, json_array_get(v, i), ep, depth + 1, words + 32 * i, err);
      if (rc) {
        free(words);
        return rc;
      }
    }
    xgr_keccak256(words, n * 32, out);
    free(words);
    return 0;
  }
  int size;
  kind k = classify(type, &size);
  memset(out, 0, 32);
  switch (k) {
  case K_STRUCT:
    return hash_struct(types, type, v, path, depth + 1, out, err);
  case K_STRING:
    if (!json_is_string(v))
      return xgr_error_set(err, XGR_ESCHEMA, path, "expected a string, got %s", tname(v));
    if (json_string_length(v) > MAX_BYTES)
      return xgr_error_set(err, XGR_ELIMIT, path, "string of %zu bytes; at most %d", json_string_length(v), MAX_BYTES);
    xgr_keccak256(json_string_value(v), json_string_length(v), out);
    return 0;
  case K_BOOL:
    if (!json_is_boolean(v))
      return xgr_error_set(err, XGR_ESCHEMA, path, "expected true or false, got %s", tname(v));
    out[31] = json_is_true(v);
    return 0;
  case K_UINT:
  case K_INT:
    return xgr_eip712_encode_int(type, v, path, out, err);
  case K_ADDRESS: {
    const char *s = json_string_value(v);
    if (!s || json_string_length(v) != 42 || xgr_hex_decode(s, out + 12, 20))
      return xgr_error_set(err, XGR_ESCHEMA, path, "expected an address (0x + 40 hex digits)");
    int lower = 0, upper = 0;
    for (int i = 2; i < 42; i++) {
      lower |= s[i] >= 'a' && s[i] <= 'f';
      upper |= s[i] >= 'A' && s[i] <= 'F';
    }
    if (lower && upper) {
      char want[43];
      xgr_addr_hex_checksum(out + 12, want);
      if (strcmp(want + 2, s + 2))
        return xgr_error_set(err, XGR_ESCHEMA, path, "mixed-case address %s fails its EIP-55 checksum (expected %s)", s,
                             want);
    }
    return 0;
  }
  case K_BYTES:
  case K_BYTESN: {
    uint8_t *b = NULL;
    size_t n = 0;
    int rc = hex_value(v, path, type, &b, &n, k == K_BYTES ? MAX_BYTES : (size_t)size, err);
    if (rc) return rc;
    if (k == K_BYTESN) {
      if (n != (size_t)size) {
        free(b);
        return xgr_error_set(err, XGR_ESCHEMA, path, "%zu bytes; a %s has exactly %d", n, type, size);
      }
      memcpy(out, b, n);
    } else {
      xgr_keccak256(b, n, out);
    }
    free(b);
    return 0;
  }
  }
  return XGR_EINVAL; /* unreachable */
}

/* hashStruct's body once the field list and the type hash are known: every field present and
 * encoded (path "path.field"), no other key, keccak256(typeHash || words). */
static int hash_body(const json_t *types, const char *name, const uint8_t th[32], const xgr_eip712_field *f, size_t n,
                     const json_t *v, const char *path, int depth, uint8_t out[32], xgr_error *err) {
  uint8_t enc[32 * (XGR_EIP712_MAX_FIELDS + 1)];
  assert(n <= XGR_EIP712_MAX_FIELDS);
  memcpy(enc, th, 32);
  for (size_t i = 0; i < n; i++) {
    char fp[XGR_PATH_MAX];
    path_join(fp, sizeof fp, path, f[i].name);
    const json_t *fv = json_object_get(v, f[i].name);
    if (!fv) return xgr_error_set(err, XGR_ESCHEMA, fp, "missing; %s has a field %s", name, f[i].name);
    int rc = encode_value(types, f[i].type, fv, fp, depth, enc + 32 * (i + 1), err);
    if (rc) return rc;
  }
  if (json_object_size(v) != n) {
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)v, key, val) {
      int found = 0;
      for (size_t i = 0; i < n && !found; i++) found = !strcmp(key, f[i].name);
      if (!found) {
        char fp[XGR_PATH_MAX];
        snprintf(fp, sizeof fp, "%s%s%.64s", path, path[0] ? "." : "", key);
        const char *names[XGR_EIP712_MAX_FIELDS];
        for (size_t i = 0; i < n; i++) names[i] = f[i].name;
        const char *near = xgr__nearest_key(key, names, n);
        if (near)
          return xgr_error_set(err, XGR_ESCHEMA, fp, "unknown field; %s has no field of this name (did you mean \"%s\"?)",
                               name, near);
        return xgr_error_set(err, XGR_ESCHEMA, fp, "unknown field; %s has no field of this name", name);
      }
    }
  }
  xgr_keccak256(enc, 32 * (n + 1), out);
  return 0;
}

static int hash_struct(const json_t *types, const char *name, const json_t *v, const char *path, int depth,
                       uint8_t out[32], xgr_error *err) {
  if (!json_is_object(v))
    return xgr_error_set(err, XGR_ESCHEMA, path, "expected an object (%s), got %s", name, tname(v));
  const json_t *fields;
  int rc = struct_fields(types, name, &fields, err);
  if (rc) return rc;
  size_t n = json_array_size(fields);
  xgr_eip712_field f[XGR_EIP712_MAX_FIELDS];
  for (size_t i = 0; i < n; i++) {   /* checked by struct_fields: objects with string name and type */
    const json_t *e = json_array_get(fields, i);
    f[i].name = json_string_value(json_object_get(e, "name"));
    f[i].type = json_string_value(json_object_get(e, "type"));
  }
  uint8_t th[32];
  if ((rc = xgr_eip712_type_hash(types, name, th, err))) return rc;
  return hash_body(types, name, th, f, n, v, path, depth, out, err);
}

void xgr_eip712_type_hash_fields(const char *name, const xgr_eip712_field *f, size_t n, uint8_t out[32]) {
  assert(n <= XGR_EIP712_MAX_FIELDS);
  for (size_t i = 0; i < n; i++) {   /* fields of atomic types (or arrays of them) only */
    char base[TYPE_MAX];
    int ok = !base_type(f[i].type, base) && classify(base, &(int){0}) != K_STRUCT;
    assert(ok && "xgr_eip712_type_hash_fields takes atomic field types only");
    (void)ok;
  }
  xgr_buf b = {0};
  xgr__buf_puts(&b, name);
  xgr__buf_putc(&b, '(');
  for (size_t i = 0; i < n; i++) {
    if (i) xgr__buf_putc(&b, ',');
    xgr__buf_puts(&b, f[i].type);
    xgr__buf_putc(&b, ' ');
    xgr__buf_puts(&b, f[i].name);
  }
  xgr__buf_putc(&b, ')');
  size_t len;
  char *s = xgr__buf_finish(&b, &len);
  xgr_keccak256(s, len, out);
  free(s);
}

int xgr_eip712_hash_fields(const char *name, const uint8_t type_hash[32], const xgr_eip712_field *f, size_t n,
                           const json_t *value, const char *path, uint8_t out[32], xgr_error *err) {
  if (!path) path = "";
  if (!json_is_object(value))
    return xgr_error_set(err, XGR_ESCHEMA, path, "expected an object (%s), got %s", name, tname(value));
  assert(n <= XGR_EIP712_MAX_FIELDS);
  /* no `types`: a struct-typed field would be refused ("expected an object of struct types");
   * the fields are checked once per type by xgr_eip712_type_hash_fields, not on every value */
  return hash_body(NULL, name, type_hash, f, n, value, path, 0, out, err);
}

int xgr_eip712_hash_struct(const json_t *types, const char *type, const json_t *value, const char *path,
                           uint8_t out[32], xgr_error *err) {
  return hash_struct(types, type, value, path ? path : "", 0, out, err);
}

int xgr_eip712_domain_separator(const json_t *types, const json_t *domain, uint8_t out[32], xgr_error *err) {
  if (!json_is_object(domain))
    return xgr_error_set(err, XGR_ESCHEMA, "domain", "expected an object, got %s", tname(domain));
  if (json_object_get(types, "EIP712Domain")) return hash_struct(types, "EIP712Domain", domain, "domain", 0, out, err);
  static const char *const names[] = {"name", "version", "chainId", "verifyingContract", "salt"};
  static const char *const tys[] = {"string", "string", "uint256", "address", "bytes32"};
  json_t *fields = json_array();
  for (size_t i = 0; i < 5; i++)
    if (json_object_get(domain, names[i]))
      json_array_append_new(fields, json_pack("{s:s, s:s}", "name", names[i], "type", tys[i]));
  json_t *t = json_pack("{s:o}", "EIP712Domain", fields);
  int rc = hash_struct(t, "EIP712Domain", domain, "domain", 0, out, err);
  json_decref(t);
  return rc;
}

int xgr_eip712_digest(const json_t *typed, uint8_t out[32], xgr_error *err) {
  if (!json_is_object(typed))
    return xgr_error_set(err, XGR_ESCHEMA, "", "expected an object {types, domain, primaryType, message}");
  const json_t *types = json_object_get(typed, "types");
  const char *primary = json_string_value(json_object_get(typed, "primaryType"));
  if (!json_is_object(types)) return xgr_error_set(err, XGR_ESCHEMA, "types", "missing or not an object");
  if (!primary) return xgr_error_set(err, XGR_ESCHEMA, "primaryType", "missing or not a string");
  uint8_t pre[66];
  pre[0] = 0x19;
  pre[1] = 0x01;
  int rc = xgr_eip712_domain_separator(types, json_object_get(typed, "domain"), pre + 2, err);
  if (rc) return rc;
  if ((rc = hash_struct(types, primary, json_object_get(typed, "message"), "message", 0, pre + 34, err))) return rc;
  xgr_keccak256(pre, sizeof pre, out);
  return 0;
}
