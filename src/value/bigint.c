/* bigint.c — 256-bit integer values (uint256 / int256) on top of GMP. A BIGINT value points to a
 * refcounted box holding an mpz_t; arithmetic (in src/cel) works on mpz temporaries and checks
 * the flavour's range before boxing a result. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "value/value_impl.h"
#include "util/buf.h"

xgr_value xgr__bigint_from_mpz(mpz_srcptr z, bool is_signed) {
  xgr_bigint *b = xgr__xmalloc(sizeof *b);
  atomic_init(&b->rc, 1);
  mpz_init_set(b->z, z);
  xgr_value v = {0};
  v.kind = XGR_VBIGINT;
  v.flags = is_signed ? XGR_VF_SIGNED : 0;
  v.as.n = b;
  return v;
}

bool xgr__bigint_in_range(mpz_srcptr z, bool is_signed) {
  if (!is_signed) return mpz_sgn(z) >= 0 && mpz_sizeinbase(z, 2) <= 256;
  if (mpz_sgn(z) >= 0) return mpz_sizeinbase(z, 2) <= 255;
  /* -2^255 is the only negative value needing 256 bits */
  if (mpz_sizeinbase(z, 2) <= 255) return true;
  mpz_t t;
  mpz_init(t);
  mpz_neg(t, z);
  bool ok = mpz_sizeinbase(t, 2) == 256 && mpz_scan1(t, 0) == 255;
  mpz_clear(t);
  return ok;
}

bool xgr__to_mpz(xgr_value v, mpz_ptr z) {
  switch (v.kind) {
    case XGR_VINT: {
      /* mpz_set_si takes a long, which is 64-bit on the platforms we build for */
      mpz_set_si(z, (long)v.as.i);
      return true;
    }
    case XGR_VUINT: mpz_set_ui(z, (unsigned long)v.as.u); return true;
    case XGR_VBIGINT: mpz_set(z, v.as.n->z); return true;
    default: return false;
  }
}

int xgr_bigint_parse(const char *s, size_t len, bool is_signed, xgr_value *out, xgr_error *e) {
  char buf[160];
  size_t i = 0;
  bool neg = false;
  if (len >= sizeof buf - 1)
    return xgr_error_set(e, XGR_EINVAL, NULL, "integer text is too long (%zu bytes)", len);
  if (i < len && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
  int base = 10;
  if (i + 1 < len && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X')) base = 16, i += 2;
  if (i == len) return xgr_error_set(e, XGR_EINVAL, NULL, "'%.*s' is not an integer", (int)len, s);
  for (size_t k = i; k < len; k++) {
    char c = s[k];
    bool ok = base == 10 ? (c >= '0' && c <= '9')
                         : ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'));
    if (!ok) return xgr_error_set(e, XGR_EINVAL, NULL, "'%.*s' is not an integer", (int)len, s);
  }
  memcpy(buf, s + i, len - i);
  buf[len - i] = '\0';
  mpz_t z;
  mpz_init_set_str(z, buf, base);
  if (neg) mpz_neg(z, z);
  if (!xgr__bigint_in_range(z, is_signed)) {
    mpz_clear(z);
    return xgr_error_set(e, XGR_EINVAL, NULL, "%.*s is out of the %s range", (int)len, s,
                         is_signed ? "int256" : "uint256");
  }
  *out = xgr__bigint_from_mpz(z, is_signed);
  mpz_clear(z);
  return 0;
}

size_t xgr_bigint_to_dec(xgr_value v, char *buf, size_t n) {
  if (n == 0) return 0;
  if (v.kind == XGR_VINT || v.kind == XGR_VUINT) {   /* as snprintf would: cut to n - 1, full length returned */
    char t[21];
    bool neg = v.kind == XGR_VINT && v.as.i < 0;
    t[0] = '-';
    size_t k = neg + xgr__u64_dec(t + neg, v.kind == XGR_VUINT ? v.as.u : neg ? -(uint64_t)v.as.i : (uint64_t)v.as.i);
    size_t c = k < n ? k : n - 1;
    memcpy(buf, t, c);
    buf[c] = '\0';
    return k;
  }
  if (v.kind != XGR_VBIGINT) return 0;
  if (mpz_sizeinbase(v.as.n->z, 10) + 2 > n) {
    buf[0] = '\0';
    return 0;
  }
  mpz_get_str(buf, 10, v.as.n->z);
  return strlen(buf);
}
