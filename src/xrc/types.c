/* types.c — the XRC type casts of XRC-137 spec §10 (xgr/xrc_types.h).
 *
 * Each cast is a small function from a borrowed xgr_value to a canonical value of its type. A
 * value that is already canonical is returned retained (no allocation), so casting a payload that
 * already has the declared types costs nothing. 256-bit ranges are checked with GMP; the final
 * BIGINT is built by xgr_bigint_parse from the decimal text. Messages follow one pattern:
 * "cannot cast <value> to <type>: expected <accepted forms>".
 */
#include <ctype.h>
#include <errno.h>
#include <gmp.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xgr/xrc_types.h"
#include "util/alloc.h"

static const char *const type_names[XGR_XRC_TYPE_COUNT_] = {
  "string", "bool", "int64", "uint64", "int256", "uint256", "double", "decimal",
  "uuid", "address", "bytes", "bytes32", "timestamp_ms", "duration_ms",
};

int xgr_xrc_type_parse(const char *name, xgr_xrc_type *out) {
  for (int i = 0; i < XGR_XRC_TYPE_COUNT_; i++)
    if (name && !strcmp(name, type_names[i])) {
      *out = (xgr_xrc_type)i;
      return 0;
    }
  return XGR_ESCHEMA;
}

const char *xgr_xrc_type_name(xgr_xrc_type t) {
  return (unsigned)t < XGR_XRC_TYPE_COUNT_ ? type_names[t] : "?";
}

const char *xgr_xrc_type_list(void) {
  return "string, bool, int64, uint64, int256, uint256, double, decimal, uuid, address, bytes, "
         "bytes32, timestamp_ms, duration_ms";
}

/* A short rendering of v for messages: JSON text truncated to ~60 bytes. */
static void preview(xgr_value v, char *buf, size_t n) {
  size_t len = 0;
  char *t = xgr_value_to_json_text(v, 0, &len);
  if (!t) {
    snprintf(buf, n, "(%s)", xgr_value_kind_name(v));
    return;
  }
  if (len > 60) snprintf(buf, n, "%.57s...", t);
  else snprintf(buf, n, "%s", t);
  free(t);
}

static int fail(xgr_value v, xgr_xrc_type t, xgr_value *out, xgr_error *e, const char *expected) {
  char pv[80];
  *out = xgr_value_null();
  if (!e) return XGR_EINVAL;
  preview(v, pv, sizeof pv);
  return xgr_error_set(e, XGR_EINVAL, NULL, "cannot cast %s (%s) to %s: expected %s", pv,
                       xgr_value_kind_name(v), type_names[t], expected);
}

/* ---- integers -------------------------------------------------------------------------------- */

/* Load an integral value of v into z: INT, UINT, BIGINT, integral finite DOUBLE, and (when
 * allow_str) decimal strings [+-]?digits, or 0x-hex when allow_hex. Returns false otherwise. */
static bool to_mpz(xgr_value v, mpz_t z, bool allow_hex) {
  char buf[96];
  switch (v.kind) {
    case XGR_VINT: {
      snprintf(buf, sizeof buf, "%lld", (long long)v.as.i);
      return mpz_set_str(z, buf, 10) == 0;
    }
    case XGR_VUINT: {
      snprintf(buf, sizeof buf, "%llu", (unsigned long long)v.as.u);
      return mpz_set_str(z, buf, 10) == 0;
    }
    case XGR_VBIGINT: {
      if (!xgr_bigint_to_dec(v, buf, sizeof buf)) return false;
      return mpz_set_str(z, buf, 10) == 0;
    }
    case XGR_VDOUBLE:
      if (!isfinite(v.as.d) || v.as.d != floor(v.as.d)) return false;
      mpz_set_d(z, v.as.d);
      return true;
    case XGR_VSTRING: {
      size_t len;
      const char *s = xgr_value_str(v, &len);
      size_t i = 0;
      bool neg = false;
      if (len > 0 && (s[0] == '+' || s[0] == '-')) neg = s[i++] == '-';
      int base = 10;
      if (allow_hex && len - i > 2 && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X')) {
        base = 16;
        i += 2;
      }
      if (i >= len || len - i > 100) return false;
      for (size_t k = i; k < len; k++)
        if (base == 10 ? !isdigit((unsigned char)s[k]) : !isxdigit((unsigned char)s[k])) return false;
      if (mpz_set_str(z, s + i, base) != 0) return false;
      if (neg) mpz_neg(z, z);
      return true;
    }
    default:
      return false;
  }
}

static int cast_int(xgr_xrc_type t, xgr_value v, xgr_value *out, xgr_error *e) {
  bool is_unsigned = t != XGR_XRC_INT64;
  if (!is_unsigned && v.kind == XGR_VINT) {
    *out = v;
    return 0;
  }
  if (is_unsigned && v.kind == XGR_VUINT) {
    *out = v;
    return 0;
  }
  if (is_unsigned && v.kind == XGR_VINT && v.as.i >= 0) {
    *out = xgr_value_uint((uint64_t)v.as.i);
    return 0;
  }
  if (!is_unsigned && v.kind == XGR_VUINT) {
    if (v.as.u > (uint64_t)INT64_MAX) return fail(v, t, out, e, "a value in -9223372036854775808..9223372036854775807 (out of range)");
    *out = xgr_value_int((int64_t)v.as.u);
    return 0;
  }
  const char *forms = "an integer number, an integral double or a decimal string";
  if (v.kind == XGR_VBOOL || v.kind == XGR_VNULL || v.kind == XGR_VLIST || v.kind == XGR_VMAP ||
      v.kind == XGR_VBYTES || v.kind == XGR_VTYPE)
    return fail(v, t, out, e, forms);
  mpz_t z;
  mpz_init(z);
  if (!to_mpz(v, z, false)) {
    mpz_clear(z);
    return fail(v, t, out, e, forms);
  }
  int rc = 0;
  if (is_unsigned) {
    if (mpz_sgn(z) < 0 || mpz_sizeinbase(z, 2) > 64) rc = -1;
    else {
      char buf[32];
      mpz_get_str(buf, 10, z);
      *out = xgr_value_uint(strtoull(buf, NULL, 10));
    }
  } else {
    mpz_t lo, hi;
    mpz_init_set_si(lo, INT64_MIN);
    mpz_init_set_si(hi, INT64_MAX);
    if (mpz_cmp(z, lo) < 0 || mpz_cmp(z, hi) > 0) rc = -1;
    else *out = xgr_value_int(mpz_get_si(z));
    mpz_clear(lo);
    mpz_clear(hi);
  }
  mpz_clear(z);
  if (rc)
    return fail(v, t, out, e, is_unsigned ? "a value in 0..18446744073709551615 (out of range)"
                                           : "a value in -9223372036854775808..9223372036854775807 (out of range)");
  return 0;
}

static int cast_big(xgr_xrc_type t, xgr_value v, xgr_value *out, xgr_error *e) {
  bool is_signed = t == XGR_XRC_INT256;
  if (v.kind == XGR_VBIGINT && ((v.flags & XGR_VF_SIGNED) != 0) == is_signed) {
    *out = xgr_value_retain(v);
    return 0;
  }
  const char *forms = "an integer number, an integral double, or a decimal or 0x-hex string";
  if (!(v.kind == XGR_VINT || v.kind == XGR_VUINT || v.kind == XGR_VBIGINT || v.kind == XGR_VDOUBLE ||
        v.kind == XGR_VSTRING))
    return fail(v, t, out, e, forms);
  mpz_t z;
  mpz_init(z);
  if (!to_mpz(v, z, true)) {
    mpz_clear(z);
    return fail(v, t, out, e, forms);
  }
  bool ok;
  if (is_signed) {
    mpz_t lim;  /* -2^255 <= z < 2^255 */
    mpz_init(lim);
    mpz_ui_pow_ui(lim, 2, 255);
    ok = mpz_cmp(z, lim) < 0;
    mpz_neg(lim, lim);
    ok = ok && mpz_cmp(z, lim) >= 0;
    mpz_clear(lim);
  } else {
    ok = mpz_sgn(z) >= 0 && mpz_sizeinbase(z, 2) <= 256;
  }
  if (!ok) {
    mpz_clear(z);
    return fail(v, t, out, e, is_signed ? "a value in -2^255..2^255-1 (out of range)" : "a value in 0..2^256-1 (out of range)");
  }
  char buf[100];
  mpz_get_str(buf, 10, z);
  mpz_clear(z);
  xgr_error e2;
  if (xgr_bigint_parse(buf, strlen(buf), is_signed, out, &e2) != 0)
    return fail(v, t, out, e, forms);
  return 0;
}

/* ---- strings --------------------------------------------------------------------------------- */

/* JSON number syntax, optionally with a leading '+': [+-]?(digits[.digits]|.digits)([eE][+-]?digits)? */
static bool numeric_syntax(const char *s, size_t len) {
  size_t i = 0, d = 0;
  if (i < len && (s[i] == '+' || s[i] == '-')) i++;
  while (i < len && isdigit((unsigned char)s[i])) i++, d++;
  if (i < len && s[i] == '.') {
    i++;
    while (i < len && isdigit((unsigned char)s[i])) i++, d++;
  }
  if (d == 0) return false;
  if (i < len && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    if (i < len && (s[i] == '+' || s[i] == '-')) i++;
    size_t x = 0;
    while (i < len && isdigit((unsigned char)s[i])) i++, x++;
    if (!x) return false;
  }
  return i == len;
}

static int cast_double(xgr_value v, xgr_value *out, xgr_error *e) {
  const char *forms = "a finite number or a numeric string";
  switch (v.kind) {
    case XGR_VDOUBLE:
      if (!isfinite(v.as.d)) return fail(v, XGR_XRC_DOUBLE, out, e, forms);
      *out = v;
      return 0;
    case XGR_VINT: *out = xgr_value_double((double)v.as.i); return 0;
    case XGR_VUINT: *out = xgr_value_double((double)v.as.u); return 0;
    case XGR_VBIGINT: {
      char buf[100];
      xgr_bigint_to_dec(v, buf, sizeof buf);
      *out = xgr_value_double(strtod(buf, NULL));
      return 0;
    }
    case XGR_VSTRING: {
      size_t len;
      const char *s = xgr_value_str(v, &len);
      if (len > 400 || !numeric_syntax(s, len)) return fail(v, XGR_XRC_DOUBLE, out, e, forms);
      char buf[404];
      memcpy(buf, s, len);
      buf[len] = 0;
      errno = 0;
      double d = strtod(buf, NULL);
      if (!isfinite(d)) return fail(v, XGR_XRC_DOUBLE, out, e, "a finite number (out of range)");
      *out = xgr_value_double(d);
      return 0;
    }
    default:
      return fail(v, XGR_XRC_DOUBLE, out, e, forms);
  }
}

static int cast_bool(xgr_value v, xgr_value *out, xgr_error *e) {
  switch (v.kind) {
    case XGR_VBOOL: *out = v; return 0;
    case XGR_VINT: *out = xgr_value_bool(v.as.i != 0); return 0;
    case XGR_VUINT: *out = xgr_value_bool(v.as.u != 0); return 0;
    case XGR_VDOUBLE:
      if (isnan(v.as.d)) break;
      *out = xgr_value_bool(v.as.d != 0);
      return 0;
    case XGR_VBIGINT: {
      char buf[100];
      xgr_bigint_to_dec(v, buf, sizeof buf);
      *out = xgr_value_bool(strcmp(buf, "0") != 0);
      return 0;
    }
    case XGR_VSTRING: {
      size_t len;
      const char *s = xgr_value_str(v, &len);
      if (len == 4 && !memcmp(s, "true", 4)) { *out = xgr_value_bool(true); return 0; }
      if (len == 5 && !memcmp(s, "false", 5)) { *out = xgr_value_bool(false); return 0; }
      break;
    }
    default:
      break;
  }
  return fail(v, XGR_XRC_BOOL, out, e, "true/false, \"true\"/\"false\" or a number");
}

static int cast_string(xgr_value v, xgr_value *out, xgr_error *e) {
  switch (v.kind) {
    case XGR_VSTRING: {
      size_t len;
      const char *s = xgr_value_str(v, &len);
      if (!xgr_utf8_valid(s, len)) return fail(v, XGR_XRC_STRING, out, e, "valid UTF-8 text");
      *out = xgr_value_retain(v);
      return 0;
    }
    case XGR_VBOOL: case XGR_VINT: case XGR_VUINT: case XGR_VBIGINT: case XGR_VDOUBLE: {
      if (v.kind == XGR_VDOUBLE && !isfinite(v.as.d)) break;
      size_t len;
      char *t = xgr_value_render(v, &len);
      *out = xgr_value_string(t, len);
      free(t);
      return 0;
    }
    default:
      break;
  }
  return fail(v, XGR_XRC_STRING, out, e, "a string (or a number or bool, written as text)");
}

static int cast_decimal(xgr_value v, xgr_value *out, xgr_error *e) {
  const char *forms = "a decimal number or a decimal string such as \"12.50\"";
  switch (v.kind) {
    case XGR_VSTRING: {
      size_t len;
      const char *s = xgr_value_str(v, &len);
      if (!numeric_syntax(s, len)) return fail(v, XGR_XRC_DECIMAL, out, e, forms);
      *out = xgr_value_retain(v);
      return 0;
    }
    case XGR_VINT: case XGR_VUINT: case XGR_VBIGINT: case XGR_VDOUBLE: {
      if (v.kind == XGR_VDOUBLE && !isfinite(v.as.d)) break;
      size_t len;
      char *t = xgr_value_render(v, &len);
      *out = xgr_value_string(t, len);
      free(t);
      return 0;
    }
    default:
      break;
  }
  return fail(v, XGR_XRC_DECIMAL, out, e, forms);
}

static bool all_hex(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isxdigit((unsigned char)s[i])) return false;
  return true;
}

bool xgr_xrc_is_address(const char *s, size_t len) {
  return s && len == 42 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && all_hex(s + 2, 40);
}

static int cast_address(xgr_value v, xgr_value *out, xgr_error *e) {
  size_t len;
  const char *s = xgr_value_str(v, &len);
  if (v.kind != XGR_VSTRING || !xgr_xrc_is_address(s, len))
    return fail(v, XGR_XRC_ADDRESS, out, e, "\"0x\" followed by 40 hex digits");
  *out = xgr_value_retain(v);
  return 0;
}

/* Return v retained when s[0..len) has no upper-case letter, else a lower-cased copy. */
static xgr_value lower_copy(xgr_value v, const char *s, size_t len) {
  size_t i = 0;
  while (i < len && !isupper((unsigned char)s[i])) i++;
  if (i == len) return xgr_value_retain(v);
  char *t = xgr__xmalloc(len + 1);
  for (size_t k = 0; k < len; k++) t[k] = (char)tolower((unsigned char)s[k]);
  xgr_value r = xgr_value_string(t, len);
  free(t);
  return r;
}

static int cast_uuid(xgr_value v, xgr_value *out, xgr_error *e) {
  size_t len;
  const char *s = xgr_value_str(v, &len);
  bool ok = v.kind == XGR_VSTRING && len == 36;
  for (size_t i = 0; ok && i < 36; i++) {
    if (i == 8 || i == 13 || i == 18 || i == 23) ok = s[i] == '-';
    else ok = isxdigit((unsigned char)s[i]) != 0;
  }
  if (!ok) return fail(v, XGR_XRC_UUID, out, e, "a canonical UUID xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx");
  *out = lower_copy(v, s, len);
  return 0;
}

static int cast_bytes(xgr_xrc_type t, xgr_value v, xgr_value *out, xgr_error *e) {
  const char *forms = t == XGR_XRC_BYTES32 ? "\"0x\" followed by exactly 64 hex digits (32 bytes)"
                                           : "\"0x\" followed by an even number of hex digits";
  size_t len;
  const char *s = xgr_value_str(v, &len);
  if (v.kind == XGR_VBYTES) {
    if (t == XGR_XRC_BYTES32 && len != 32) return fail(v, t, out, e, forms);
    static const char hx[] = "0123456789abcdef";
    char *b = xgr__xmalloc(2 * len + 3);
    b[0] = '0', b[1] = 'x';
    for (size_t i = 0; i < len; i++) {
      b[2 + 2 * i] = hx[(unsigned char)s[i] >> 4];
      b[3 + 2 * i] = hx[(unsigned char)s[i] & 15];
    }
    *out = xgr_value_string(b, 2 * len + 2);
    free(b);
    return 0;
  }
  if (v.kind != XGR_VSTRING || len < 2 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') ||
      (len - 2) % 2 != 0 || !all_hex(s + 2, len - 2) || (t == XGR_XRC_BYTES32 && len != 66))
    return fail(v, t, out, e, forms);
  if (s[1] == 'X') {  /* normalise the prefix too */
    char *b = xgr__xmalloc(len + 1);
    for (size_t i = 0; i < len; i++) b[i] = (char)tolower((unsigned char)s[i]);
    *out = xgr_value_string(b, len);
    free(b);
    return 0;
  }
  *out = lower_copy(v, s, len);
  return 0;
}

int xgr_xrc_cast(xgr_xrc_type t, xgr_value v, xgr_value *out, xgr_error *e) {
  switch (t) {
    case XGR_XRC_STRING: return cast_string(v, out, e);
    case XGR_XRC_BOOL: return cast_bool(v, out, e);
    case XGR_XRC_INT64:
    case XGR_XRC_UINT64:
    case XGR_XRC_TIMESTAMP_MS:
    case XGR_XRC_DURATION_MS: return cast_int(t, v, out, e);
    case XGR_XRC_INT256:
    case XGR_XRC_UINT256: return cast_big(t, v, out, e);
    case XGR_XRC_DOUBLE: return cast_double(v, out, e);
    case XGR_XRC_DECIMAL: return cast_decimal(v, out, e);
    case XGR_XRC_UUID: return cast_uuid(v, out, e);
    case XGR_XRC_ADDRESS: return cast_address(v, out, e);
    case XGR_XRC_BYTES:
    case XGR_XRC_BYTES32: return cast_bytes(t, v, out, e);
    default:
      *out = xgr_value_null();
      return xgr_error_set(e, XGR_EINVAL, NULL, "unknown XRC type %d", (int)t);
  }
}
