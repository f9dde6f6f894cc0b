/* funcs.c — the function library of the expression engine: CEL standard functions (size,
 * contains, startsWith, endsWith, matches, lowerAscii, upperAscii, the type conversions and the
 * strict int64/uint64 casts) and the XDaLa helpers of the guide §7.3 (numeric scalar helpers,
 * distances, list statistics, quorum/consensus, join, unique, u256). Names and arities are checked
 * at compile time from the table below; argument types are checked here, at run time. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cel/cel_impl.h"

/* style: 1 global f(x), 2 receiver x.f(), 3 both */
const cel_fndef xgr__cel_functions[F_COUNT_] = {
  [F_SIZE] = {"size", 1, 1, 3},           [F_CONTAINS] = {"contains", 2, 2, 2},
  [F_STARTSWITH] = {"startsWith", 2, 2, 2}, [F_ENDSWITH] = {"endsWith", 2, 2, 2},
  [F_MATCHES] = {"matches", 2, 2, 3},     [F_LOWERASCII] = {"lowerAscii", 1, 1, 2},
  [F_UPPERASCII] = {"upperAscii", 1, 1, 2}, [F_INT] = {"int", 1, 1, 1},
  [F_UINT] = {"uint", 1, 1, 1},           [F_DOUBLE] = {"double", 1, 1, 1},
  [F_STRING] = {"string", 1, 1, 1},       [F_BYTES] = {"bytes", 1, 1, 1},
  [F_BOOL] = {"bool", 1, 1, 1},           [F_DYN] = {"dyn", 1, 1, 1},
  [F_TYPE] = {"type", 1, 1, 1},           [F_INT64] = {"int64", 1, 1, 1},
  [F_UINT64] = {"uint64", 1, 1, 1},       [F_ABS] = {"abs", 1, 1, 1},
  [F_POW] = {"pow", 2, 2, 1},             [F_RELDIFF] = {"relDiff", 2, 2, 1},
  [F_SAFEDIV] = {"safeDiv", 3, 3, 1},     [F_CLAMP] = {"clamp", 3, 3, 1},
  [F_DIST] = {"dist", 3, 3, 1},           [F_WITHIN] = {"within", 4, 4, 1},
  [F_MAX] = {"max", 1, 1, 1},             [F_MIN] = {"min", 1, 1, 1},
  [F_SUM] = {"sum", 1, 1, 1},             [F_AVG] = {"avg", 1, 1, 1},
  [F_MEDIAN] = {"median", 1, 1, 1},       [F_STDEV] = {"stdev", 1, 1, 1},
  [F_CV] = {"cv", 1, 1, 1},               [F_MAD] = {"mad", 1, 1, 1},
  [F_QUORUM] = {"quorum", 4, 5, 1},       [F_CONSENSUS] = {"consensus", 5, 6, 1},
  [F_JOIN] = {"join", 2, 2, 3},           [F_UNIQUE] = {"unique", 1, 1, 3},
  [F_U256] = {"u256", 1, 1, 1},           [F_UINT256] = {"uint256", 1, 1, 1},
};

int xgr__cel_fn_lookup(const char *name, size_t len) {
  for (int i = 0; i < F_COUNT_; i++)
    if (strlen(xgr__cel_functions[i].name) == len && !memcmp(xgr__cel_functions[i].name, name, len)) return i;
  return -1;
}

bool xgr__cel_num_to_double(xgr_value v, double *d) {
  switch (v.kind) {
    case XGR_VINT: *d = (double)v.as.i; return true;
    case XGR_VUINT: *d = (double)v.as.u; return true;
    case XGR_VDOUBLE: *d = v.as.d; return true;
    case XGR_VBIGINT: *d = mpz_get_d(v.as.n->z); return true;
    default: return false;
  }
}

#define FNAME(n) (xgr__cel_functions[(n)->fn].name)

static xgr_value bad_args(cel_ctx *c, const cel_node *n, const xgr_value *a, int na) {
  char buf[160];
  size_t k = 0;
  for (int i = 0; i < na && k < sizeof buf - 20; i++)
    k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s", i ? ", " : "", xgr__cel_kind_name(a[i]));
  buf[k < sizeof buf ? k : sizeof buf - 1] = '\0';
  return xgr__cel_err(c, n->pos, "no such overload: %s(%s)", FNAME(n), buf);
}

/* ---- strings ------------------------------------------------------------------------------ */

static int64_t utf8_count(const char *s, size_t n) {
  int64_t k = 0;
  for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
  return k;
}

/* Code points of a UTF-8 string into a malloc'd array. */
static uint32_t *utf8_decode(const char *s, size_t n, size_t *out_n) {
  uint32_t *cp = xgr__xmalloc((n + 1) * sizeof *cp);
  size_t k = 0;
  for (size_t i = 0; i < n;) {
    unsigned char b = (unsigned char)s[i];
    uint32_t v;
    size_t len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    if (i + len > n) len = n - i;
    v = len == 1 ? b : (b & (0x7F >> len));
    for (size_t j = 1; j < len; j++) v = (v << 6) | ((unsigned char)s[i + j] & 0x3F);
    cp[k++] = v;
    i += len;
  }
  *out_n = k;
  return cp;
}

static xgr_value fn_matches(cel_ctx *c, const cel_node *n, xgr_value s, xgr_value re) {
  pcre2_code *code = n->c >= 0 ? c->p->regex[n->c] : NULL;
  bool own = false;
  if (!code) {
    int ec;
    PCRE2_SIZE eo;
    code = pcre2_compile((PCRE2_SPTR)re.as.s->data, re.as.s->len, PCRE2_UTF, &ec, &eo, NULL);
    if (!code) {
      PCRE2_UCHAR msg[160];
      pcre2_get_error_message(ec, msg, sizeof msg);
      return xgr__cel_err(c, n->pos, "invalid regular expression: %s", (const char *)msg);
    }
    own = true;
  }
  pcre2_match_data *md = pcre2_match_data_create(1, NULL);
  int rc = pcre2_match(code, (PCRE2_SPTR)s.as.s->data, s.as.s->len, 0, 0, md, NULL);
  pcre2_match_data_free(md);
  if (own) pcre2_code_free(code);
  if (rc >= 0) return xgr_value_bool(true);
  if (rc == PCRE2_ERROR_NOMATCH) return xgr_value_bool(false);
  return xgr__cel_err(c, n->pos, "regular expression match failed (PCRE2 error %d)", rc);
}

static xgr_value ascii_case(xgr_value s, bool upper) {
  xgr_value r = xgr_value_string(s.as.s->data, s.as.s->len);
  for (uint32_t i = 0; i < r.as.s->len; i++) {
    char ch = r.as.s->data[i];
    if (upper && ch >= 'a' && ch <= 'z') r.as.s->data[i] = (char)(ch - 32);
    if (!upper && ch >= 'A' && ch <= 'Z') r.as.s->data[i] = (char)(ch + 32);
  }
  return r;
}

/* ---- conversions -------------------------------------------------------------------------- */

static bool parse_i64(const char *s, size_t n, int64_t *out) {
  if (n == 0 || n > 25 || isspace((unsigned char)s[0])) return false;
  char buf[32];
  memcpy(buf, s, n);
  buf[n] = '\0';
  char *end;
  errno = 0;
  long long v = strtoll(buf, &end, 10);
  if (errno || *end) return false;
  *out = v;
  return true;
}

static bool parse_u64(const char *s, size_t n, uint64_t *out) {
  if (n == 0 || n > 25 || s[0] == '-' || s[0] == '+' || isspace((unsigned char)s[0])) return false;
  char buf[32];
  memcpy(buf, s, n);
  buf[n] = '\0';
  char *end;
  errno = 0;
  unsigned long long v = strtoull(buf, &end, 10);
  if (errno || *end) return false;
  *out = v;
  return true;
}

static xgr_value to_int(cel_ctx *c, const cel_node *n, xgr_value v) {
  switch (v.kind) {
    case XGR_VINT: return v;
    case XGR_VUINT:
      if (v.as.u > INT64_MAX) return xgr__cel_err(c, n->pos, "range error: %llu does not fit int", (unsigned long long)v.as.u);
      return xgr_value_int((int64_t)v.as.u);
    case XGR_VDOUBLE:
      if (isnan(v.as.d) || v.as.d <= -9223372036854775808.0 || v.as.d >= 9223372036854775808.0)
        return xgr__cel_err(c, n->pos, "range error: %g does not fit int", v.as.d);
      return xgr_value_int((int64_t)v.as.d);
    case XGR_VSTRING: {
      int64_t i;
      if (!parse_i64(v.as.s->data, v.as.s->len, &i))
        return xgr__cel_err(c, n->pos, "cannot convert '%s' to int", v.as.s->data);
      return xgr_value_int(i);
    }
    case XGR_VBIGINT:
      if (!mpz_fits_slong_p(v.as.n->z)) return xgr__cel_err(c, n->pos, "range error: value does not fit int");
      return xgr_value_int((int64_t)mpz_get_si(v.as.n->z));
    default: return xgr__cel_err(c, n->pos, "no such overload: %s(%s)", FNAME(n), xgr__cel_kind_name(v));
  }
}

static xgr_value to_uint(cel_ctx *c, const cel_node *n, xgr_value v) {
  switch (v.kind) {
    case XGR_VUINT: return v;
    case XGR_VINT:
      if (v.as.i < 0) return xgr__cel_err(c, n->pos, "range error: %lld does not fit uint", (long long)v.as.i);
      return xgr_value_uint((uint64_t)v.as.i);
    case XGR_VDOUBLE:
      if (isnan(v.as.d) || v.as.d < 0 || v.as.d >= 18446744073709551616.0)
        return xgr__cel_err(c, n->pos, "range error: %g does not fit uint", v.as.d);
      return xgr_value_uint((uint64_t)v.as.d);
    case XGR_VSTRING: {
      uint64_t u;
      if (!parse_u64(v.as.s->data, v.as.s->len, &u))
        return xgr__cel_err(c, n->pos, "cannot convert '%s' to uint", v.as.s->data);
      return xgr_value_uint(u);
    }
    case XGR_VBIGINT:
      if (mpz_sgn(v.as.n->z) < 0 || !mpz_fits_ulong_p(v.as.n->z))
        return xgr__cel_err(c, n->pos, "range error: value does not fit uint");
      return xgr_value_uint((uint64_t)mpz_get_ui(v.as.n->z));
    default: return xgr__cel_err(c, n->pos, "no such overload: %s(%s)", FNAME(n), xgr__cel_kind_name(v));
  }
}

static xgr_value to_double(cel_ctx *c, const cel_node *n, xgr_value v) {
  double d;
  if (xgr__cel_num_to_double(v, &d)) return xgr_value_double(d);
  if (v.kind == XGR_VSTRING) {
    char *end;
    if (v.as.s->len == 0 || isspace((unsigned char)v.as.s->data[0])) goto bad;
    d = strtod(v.as.s->data, &end);
    if (end != v.as.s->data + v.as.s->len) goto bad;
    return xgr_value_double(d);
  bad:
    return xgr__cel_err(c, n->pos, "cannot convert '%s' to double", v.as.s->data);
  }
  return xgr__cel_err(c, n->pos, "no such overload: double(%s)", xgr__cel_kind_name(v));
}

static xgr_value to_string(cel_ctx *c, const cel_node *n, xgr_value v) {
  switch (v.kind) {
    case XGR_VSTRING: return xgr_value_retain(v);
    case XGR_VBYTES:
      if (!xgr_utf8_valid(v.as.s->data, v.as.s->len))
        return xgr__cel_err(c, n->pos, "string(bytes): invalid UTF-8");
      return xgr_value_string(v.as.s->data, v.as.s->len);
    case XGR_VINT: case XGR_VUINT: case XGR_VDOUBLE: case XGR_VBOOL: case XGR_VBIGINT: {
      char buf[96];
      size_t k;
      if (v.kind == XGR_VDOUBLE) k = xgr_format_double(v.as.d, buf, sizeof buf);
      else if (v.kind == XGR_VBOOL) k = (size_t)snprintf(buf, sizeof buf, "%s", v.as.b ? "true" : "false");
      else k = xgr_bigint_to_dec(v, buf, sizeof buf);
      return xgr_value_string(buf, k);
    }
    default: return xgr__cel_err(c, n->pos, "no such overload: string(%s)", xgr__cel_kind_name(v));
  }
}

static xgr_value to_bool(cel_ctx *c, const cel_node *n, xgr_value v) {
  if (v.kind == XGR_VBOOL) return v;
  if (v.kind == XGR_VSTRING) {
    static const char *const t[] = {"1", "t", "T", "TRUE", "true", "True", NULL};
    static const char *const f[] = {"0", "f", "F", "FALSE", "false", "False", NULL};
    for (int i = 0; t[i]; i++) {
      if (!strcmp(v.as.s->data, t[i]) && strlen(t[i]) == v.as.s->len) return xgr_value_bool(true);
      if (!strcmp(v.as.s->data, f[i]) && strlen(f[i]) == v.as.s->len) return xgr_value_bool(false);
    }
    return xgr__cel_err(c, n->pos, "type conversion error: cannot convert '%s' to bool", v.as.s->data);
  }
  return xgr__cel_err(c, n->pos, "no such overload: bool(%s)", xgr__cel_kind_name(v));
}

static xgr_value to_u256(cel_ctx *c, const cel_node *n, xgr_value v) {
  mpz_t z;
  xgr_value r;
  mpz_init(z);
  switch (v.kind) {
    case XGR_VINT: case XGR_VUINT: case XGR_VBIGINT: xgr__to_mpz(v, z); break;
    case XGR_VDOUBLE:
      if (!isfinite(v.as.d) || v.as.d != floor(v.as.d)) {
        r = xgr__cel_err(c, n->pos, "%s(%g): not an integer", FNAME(n), v.as.d);
        goto out;
      }
      mpz_set_d(z, v.as.d);
      break;
    case XGR_VSTRING: {
      xgr_error e;
      if (xgr_bigint_parse(v.as.s->data, v.as.s->len, false, &r, &e)) r = xgr__cel_err(c, n->pos, "%s", e.message);
      goto out;
    }
    default: r = xgr__cel_err(c, n->pos, "no such overload: %s(%s)", FNAME(n), xgr__cel_kind_name(v)); goto out;
  }
  if (!xgr__bigint_in_range(z, false)) r = xgr__cel_err(c, n->pos, "%s: value out of the uint256 range", FNAME(n));
  else r = xgr__bigint_from_mpz(z, false);
out:
  mpz_clear(z);
  return r;
}

/* ---- XDaLa numeric helpers ---------------------------------------------------------------- */

static double rel_diff(double a, double b) {
  double den = fabs((a + b) / 2);
  if (den == 0) return a == b ? 0.0 : 1e18;
  return fabs(a - b) / den;
}

/* Numeric slice of a list for the list helpers; false if not a non-empty all-numeric list. */
static bool num_slice(xgr_value l, double *out, size_t *n) {
  if (l.kind != XGR_VLIST || l.as.l->len == 0 || l.as.l->len > 4096) return false;
  for (uint32_t i = 0; i < l.as.l->len; i++)
    if (!xgr__cel_num_to_double(l.as.l->items[i], &out[i])) return false;
  *n = l.as.l->len;
  return true;
}

static int dcmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median_of(double *v, size_t n) {
  qsort(v, n, sizeof *v, dcmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void mean_stdev(const double *v, size_t n, double *mean, double *sd) {
  double m = 0, s = 0;
  for (size_t i = 0; i < n; i++) {
    double d = v[i] - m;
    m += d / (double)(i + 1);
    s += d * (v[i] - m);
  }
  *mean = m;
  *sd = n ? sqrt(s / (double)n) : 0;
}

static xgr_value list_stat(cel_ctx *c, const cel_node *n, xgr_value l) {
  double buf[64], *v = buf;
  size_t cnt = 0;
  uint32_t len = l.kind == XGR_VLIST ? l.as.l->len : 0;
  if (len > 64) v = xgr__xmalloc(len * sizeof *v);
  double r = 0.0;
  if (num_slice(l, v, &cnt)) {
    switch ((cel_fn)n->fn) {
      case F_MAX: r = v[0]; for (size_t i = 1; i < cnt; i++) if (v[i] > r) r = v[i]; break;
      case F_MIN: r = v[0]; for (size_t i = 1; i < cnt; i++) if (v[i] < r) r = v[i]; break;
      case F_SUM: for (size_t i = 0; i < cnt; i++) r += v[i]; break;
      case F_AVG: for (size_t i = 0; i < cnt; i++) r += v[i]; r /= (double)cnt; break;
      case F_MEDIAN: r = median_of(v, cnt); break;
      case F_STDEV: { double m; mean_stdev(v, cnt, &m, &r); break; }
      case F_CV: {
        double m, sd;
        mean_stdev(v, cnt, &m, &sd);
        r = m == 0 ? 0.0 : sd / fabs(m);
        break;
      }
      case F_MAD: {
        double med = median_of(v, cnt);
        for (size_t i = 0; i < cnt; i++) v[i] = fabs(v[i] - med);
        r = median_of(v, cnt);
        break;
      }
      default: break;
    }
  }
  if (v != buf) free(v);
  (void)c;
  return xgr_value_double(r);
}

/* ---- distances ---------------------------------------------------------------------------- */

typedef enum metric { MET_REL, MET_ABS, MET_EQ, MET_HAM, MET_LEV, MET_BAD } metric;

static metric parse_metric(xgr_value m) {
  static const struct { const char *n; metric m; } t[] = {
    {"", MET_REL}, {"rel", MET_REL}, {"relative", MET_REL}, {"reldiff", MET_REL},
    {"abs", MET_ABS}, {"absolute", MET_ABS}, {"eq", MET_EQ}, {"equal", MET_EQ},
    {"hamming", MET_HAM}, {"ham", MET_HAM}, {"lev", MET_LEV}, {"levenshtein", MET_LEV}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (strlen(t[i].n) == m.as.s->len && !strcasecmp(t[i].n, m.as.s->data)) return t[i].m;
  return MET_BAD;
}

static double levenshtein(const uint32_t *a, size_t na, const uint32_t *b, size_t nb) {
  size_t row[257];
  for (size_t j = 0; j <= nb; j++) row[j] = j;
  for (size_t i = 1; i <= na; i++) {
    size_t prev = row[0];
    row[0] = i;
    for (size_t j = 1; j <= nb; j++) {
      size_t cur = row[j];
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      size_t best = prev + cost;
      if (row[j] + 1 < best) best = row[j] + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      prev = cur;
    }
  }
  return (double)row[nb];
}

/* Distance under metric m; false with *err set on incompatible values. */
static bool distance(cel_ctx *c, const cel_node *n, metric m, xgr_value a, xgr_value b, double *out,
                     xgr_value *err) {
  double x, y;
  switch (m) {
    case MET_REL:
    case MET_ABS:
      if (!xgr__cel_num_to_double(a, &x) || !xgr__cel_num_to_double(b, &y)) {
        *err = xgr__cel_err(c, n->pos, "%s: metric expects numeric values, got %s and %s", FNAME(n),
                       xgr__cel_kind_name(a), xgr__cel_kind_name(b));
        return false;
      }
      *out = m == MET_REL ? rel_diff(x, y) : fabs(x - y);
      return true;
    case MET_EQ: *out = xgr_value_equal(a, b) ? 0.0 : 1.0; return true;
    case MET_HAM:
    case MET_LEV: {
      if (a.kind != XGR_VSTRING || b.kind != XGR_VSTRING) {
        *err = xgr__cel_err(c, n->pos, "%s: metric '%s' expects strings, got %s and %s", FNAME(n),
                       m == MET_HAM ? "hamming" : "lev", xgr__cel_kind_name(a), xgr__cel_kind_name(b));
        return false;
      }
      size_t na, nb;
      uint32_t *pa = utf8_decode(a.as.s->data, a.as.s->len, &na);
      uint32_t *pb = utf8_decode(b.as.s->data, b.as.s->len, &nb);
      if (m == MET_HAM) {
        if (na != nb) *out = 1e18;
        else if (na == 0) *out = 0.0;
        else {
          size_t d = 0;
          for (size_t i = 0; i < na; i++) d += pa[i] != pb[i];
          *out = (double)d / (double)na;
        }
      } else {
        size_t mx = na > nb ? na : nb;
        if (mx > 256) *out = 1e18;
        else if (mx == 0) *out = 0.0;
        else *out = levenshtein(pa, na, pb, nb) / (double)mx;
      }
      free(pa);
      free(pb);
      return true;
    }
    default: *err = xgr__cel_err(c, n->pos, "unsupported metric"); return false;
  }
}

static bool get_metric(cel_ctx *c, const cel_node *n, xgr_value v, metric *m, xgr_value *err) {
  if (v.kind != XGR_VSTRING) {
    *err = xgr__cel_err(c, n->pos, "%s: metric must be string, got %s", FNAME(n), xgr__cel_kind_name(v));
    return false;
  }
  *m = parse_metric(v);
  if (*m == MET_BAD) {
    *err = xgr__cel_err(c, n->pos, "%s: unsupported metric '%s'", FNAME(n), v.as.s->data);
    return false;
  }
  return true;
}

static bool get_tol(cel_ctx *c, const cel_node *n, xgr_value v, double *tol, xgr_value *err) {
  if (!xgr__cel_num_to_double(v, tol) || !(*tol >= 0)) {
    *err = xgr__cel_err(c, n->pos, "%s: tol must be >= 0", FNAME(n));
    return false;
  }
  return true;
}

/* ---- quorum / consensus ------------------------------------------------------------------- */

/* Select the agreement subset of values (indices into sel, count in *nsel). */
static bool select_subset(cel_ctx *c, const cel_node *n, xgr_value vals, metric m, bool pairwise,
                          double tol, uint32_t *sel, uint32_t *nsel, xgr_value *err) {
  uint32_t len = vals.as.l->len;
  const xgr_value *it = vals.as.l->items;
  *nsel = 0;
  if (len == 0) return true;
  /* pairwise distance matrix */
  bool okbuf[64 * 64];
  uint32_t curbuf[64];
  bool *ok = len <= 64 ? okbuf : xgr__xmalloc((size_t)len * len * sizeof *ok);
  for (uint32_t i = 0; i < len; i++)
    for (uint32_t j = 0; j < len; j++) {
      double d;
      if (!xgr__cel_charge(c, n->pos, 1, err) || !distance(c, n, m, it[i], it[j], &d, err)) {
        if (ok != okbuf) free(ok);
        return false;
      }
      ok[(size_t)i * len + j] = d <= tol;
    }
  uint32_t *cur = len <= 64 ? curbuf : xgr__xmalloc(len * sizeof *cur);
  for (uint32_t i = 0; i < len; i++) {
    uint32_t k = 0;
    if (!pairwise) {
      for (uint32_t j = 0; j < len; j++)
        if (ok[(size_t)i * len + j]) cur[k++] = j;
    } else {
      cur[k++] = i;
      for (uint32_t j = 0; j < len; j++) {
        if (j == i) continue;
        bool all = true;
        for (uint32_t q = 0; q < k && all; q++) all = ok[(size_t)j * len + cur[q]] && ok[(size_t)cur[q] * len + j];
        if (all) cur[k++] = j;
      }
      /* keep the original order of the members */
      for (uint32_t x = 1; x < k; x++)
        for (uint32_t y = x; y > 0 && cur[y - 1] > cur[y]; y--) {
          uint32_t t = cur[y];
          cur[y] = cur[y - 1];
          cur[y - 1] = t;
        }
    }
    if (k > *nsel) {
      *nsel = k;
      memcpy(sel, cur, k * sizeof *sel);
    }
  }
  if (cur != curbuf) free(cur);
  if (ok != okbuf) free(ok);
  return true;
}

typedef enum agg { AGG_MEDOID, AGG_MODE, AGG_MEAN, AGG_MEDIAN, AGG_BAD } agg;

static xgr_value fn_quorum(cel_ctx *c, const cel_node *n, const xgr_value *a, int na, bool consensus) {
  xgr_value err;
  int ai = 0;
  xgr_value vals = a[ai++];
  if (vals.kind != XGR_VLIST)
    return xgr__cel_err(c, n->pos, "%s: values must be a list, got %s", FNAME(n), xgr__cel_kind_name(vals));
  metric m;
  if (!get_metric(c, n, a[ai++], &m, &err)) return err;
  bool pairwise = false;
  int full = consensus ? 6 : 5;
  if (na == full) {
    xgr_value mode = a[ai++];
    if (mode.kind != XGR_VSTRING)
      return xgr__cel_err(c, n->pos, "%s: mode must be string, got %s", FNAME(n), xgr__cel_kind_name(mode));
    if (!strcasecmp(mode.as.s->data, "ball") || mode.as.s->len == 0) pairwise = false;
    else if (!strcasecmp(mode.as.s->data, "pairwise") || !strcasecmp(mode.as.s->data, "clique")) pairwise = true;
    else return xgr__cel_err(c, n->pos, "%s: unsupported mode '%s' (ball, pairwise, clique)", FNAME(n), mode.as.s->data);
  }
  agg g = AGG_MEDOID;
  if (consensus) {
    xgr_value av = a[ai++];
    if (av.kind != XGR_VSTRING)
      return xgr__cel_err(c, n->pos, "consensus: agg must be string, got %s", xgr__cel_kind_name(av));
    const char *s = av.as.s->data;
    g = !strcasecmp(s, "medoid") ? AGG_MEDOID : !strcasecmp(s, "mode") ? AGG_MODE
      : !strcasecmp(s, "mean") ? AGG_MEAN : !strcasecmp(s, "median") ? AGG_MEDIAN : AGG_BAD;
    if (g == AGG_BAD) return xgr__cel_err(c, n->pos, "consensus: unknown agg '%s' (medoid, mode, mean, median)", s);
  }
  double tol, kd;
  if (!get_tol(c, n, a[ai++], &tol, &err)) return err;
  xgr_value kv = a[ai++];
  if (!xgr__cel_num_to_double(kv, &kd) || !(kd >= 1)) return xgr__cel_err(c, n->pos, "%s: k must be >= 1", FNAME(n));
  int64_t k = kd > 1e9 ? 1000000000 : (int64_t)kd;
  uint32_t len = vals.as.l->len;
  uint32_t selbuf[64], *sel = len <= 64 ? selbuf : xgr__xmalloc(len * sizeof *sel), nsel;
  xgr_value r;
  if (!select_subset(c, n, vals, m, pairwise, tol, sel, &nsel, &err)) {
    r = err;
    goto out;
  }
  if (!consensus) {
    r = xgr_value_bool((int64_t)nsel >= k);
    goto out;
  }
  if ((int64_t)nsel < k) {
    r = xgr_value_double(0.0);
    goto out;
  }
  const xgr_value *it = vals.as.l->items;
  switch (g) {
    case AGG_MEDOID: {
      double best = INFINITY;
      uint32_t bi = sel[0];
      for (uint32_t x = 0; x < nsel; x++) {
        double tot = 0, d;
        for (uint32_t y = 0; y < nsel; y++) {
          if (!distance(c, n, m, it[sel[x]], it[sel[y]], &d, &err)) {
            r = err;
            goto out;
          }
          tot += d;
        }
        if (tot < best) best = tot, bi = sel[x];
      }
      r = xgr_value_retain(it[bi]);
      break;
    }
    case AGG_MODE: {
      uint32_t bi = sel[0], bc = 0;
      for (uint32_t x = 0; x < nsel; x++) {
        char *kx = xgr_value_render(it[sel[x]], NULL);
        uint32_t cnt = 0;
        for (uint32_t y = 0; y < nsel; y++) {
          char *ky = xgr_value_render(it[sel[y]], NULL);
          cnt += !strcmp(kx, ky) && it[sel[x]].kind == it[sel[y]].kind;
          free(ky);
        }
        free(kx);
        if (cnt > bc) bc = cnt, bi = sel[x];
      }
      r = xgr_value_retain(it[bi]);
      break;
    }
    default: {
      double v[64], *vp = nsel <= 64 ? v : xgr__xmalloc(nsel * sizeof *vp);
      bool okn = true;
      for (uint32_t x = 0; x < nsel && okn; x++) okn = xgr__cel_num_to_double(it[sel[x]], &vp[x]);
      if (!okn) r = xgr__cel_err(c, n->pos, "consensus: agg '%s' needs numeric values", g == AGG_MEAN ? "mean" : "median");
      else if (g == AGG_MEAN) {
        double s = 0;
        for (uint32_t x = 0; x < nsel; x++) s += vp[x];
        r = xgr_value_double(s / nsel);
      } else {
        r = xgr_value_double(median_of(vp, nsel));
      }
      if (vp != v) free(vp);
      break;
    }
  }
out:
  if (sel != selbuf) free(sel);
  return r;
}

/* ---- misc --------------------------------------------------------------------------------- */

static xgr_value fn_join(cel_ctx *c, const cel_node *n, xgr_value l, xgr_value sep) {
  if (l.kind != XGR_VLIST || sep.kind != XGR_VSTRING) return bad_args(c, n, (xgr_value[]){l, sep}, 2);
  xgr_buf b = {0};
  for (uint32_t i = 0; i < l.as.l->len; i++) {
    if (i) xgr__buf_put(&b, sep.as.s->data, sep.as.s->len);
    size_t k;
    char *s = xgr_value_render(l.as.l->items[i], &k);
    xgr__buf_put(&b, s, k);
    free(s);
  }
  size_t k;
  char *s = xgr__buf_finish(&b, &k);
  xgr_value r;
  if (!xgr__cel_charge(c, n->pos, k / 16, &r)) {
    free(s);
    return r;
  }
  r = xgr_value_string(s, k);
  free(s);
  return r;
}

static xgr_value fn_unique(cel_ctx *c, const cel_node *n, xgr_value l) {
  if (l.kind != XGR_VLIST) return bad_args(c, n, &l, 1);
  xgr_value r = xgr_list_new(l.as.l->len);
  xgr_value out;
  if (!xgr__cel_charge(c, n->pos, (uint64_t)l.as.l->len * l.as.l->len / 8, &out)) {
    xgr_value_release(r);
    return out;
  }
  for (uint32_t i = 0; i < l.as.l->len; i++) {
    bool seen = false;
    for (uint32_t j = 0; j < r.as.l->len && !seen; j++) seen = xgr_value_equal(l.as.l->items[i], r.as.l->items[j]);
    if (!seen) xgr_list_push(r, xgr_value_retain(l.as.l->items[i]));
  }
  return r;
}

/* ---- dispatch ----------------------------------------------------------------------------- */

xgr_value xgr__cel_call(cel_ctx *c, const cel_node *n, int fn, const xgr_value *a, int na) {
  xgr_value x = a[0], err;
  double d, e2, f;
  switch ((cel_fn)fn) {
    case F_SIZE:
      switch (x.kind) {
        case XGR_VSTRING: return xgr_value_int(utf8_count(x.as.s->data, x.as.s->len));
        case XGR_VBYTES: return xgr_value_int(x.as.s->len);
        case XGR_VLIST: return xgr_value_int(x.as.l->len);
        case XGR_VMAP: return xgr_value_int(x.as.m->len);
        default: return bad_args(c, n, a, na);
      }
    case F_CONTAINS:
    case F_STARTSWITH:
    case F_ENDSWITH: {
      if (x.kind != XGR_VSTRING || a[1].kind != XGR_VSTRING) return bad_args(c, n, a, na);
      const char *s = x.as.s->data, *t = a[1].as.s->data;
      size_t ns = x.as.s->len, nt = a[1].as.s->len;
      if (nt > ns) return xgr_value_bool(false);
      if (fn == F_STARTSWITH) return xgr_value_bool(memcmp(s, t, nt) == 0);
      if (fn == F_ENDSWITH) return xgr_value_bool(memcmp(s + ns - nt, t, nt) == 0);
      return xgr_value_bool(nt == 0 || memmem(s, ns, t, nt) != NULL);
    }
    case F_MATCHES:
      if (x.kind != XGR_VSTRING || a[1].kind != XGR_VSTRING) return bad_args(c, n, a, na);
      return fn_matches(c, n, x, a[1]);
    case F_LOWERASCII:
    case F_UPPERASCII:
      if (x.kind != XGR_VSTRING) return bad_args(c, n, a, na);
      return ascii_case(x, fn == F_UPPERASCII);
    case F_INT: case F_INT64: return to_int(c, n, x);
    case F_UINT: case F_UINT64: return to_uint(c, n, x);
    case F_DOUBLE: return to_double(c, n, x);
    case F_STRING: return to_string(c, n, x);
    case F_BYTES:
      if (x.kind == XGR_VBYTES) return xgr_value_retain(x);
      if (x.kind == XGR_VSTRING) return xgr_value_bytes(x.as.s->data, x.as.s->len);
      return bad_args(c, n, a, na);
    case F_BOOL: return to_bool(c, n, x);
    case F_DYN: return xgr_value_retain(x);
    case F_TYPE:
      if (x.kind == XGR_VTYPE) return xgr_value_type(XGR_VTYPE, 0);
      return xgr_value_type((xgr_vkind)x.kind, x.kind == XGR_VBIGINT ? x.flags : 0);
    case F_U256: case F_UINT256: return to_u256(c, n, x);
    case F_ABS:
      if (!xgr__cel_num_to_double(x, &d)) return bad_args(c, n, a, na);
      if (!isfinite(d)) return xgr__cel_err(c, n->pos, "abs: argument is not finite (%g)", d);
      return xgr_value_double(fabs(d));
    case F_POW:
      if (!xgr__cel_num_to_double(x, &d) || !xgr__cel_num_to_double(a[1], &e2)) return xgr_value_double(0.0);
      return xgr_value_double(pow(d, e2));
    case F_RELDIFF:
      if (!xgr__cel_num_to_double(x, &d) || !xgr__cel_num_to_double(a[1], &e2)) return bad_args(c, n, a, na);
      return xgr_value_double(rel_diff(d, e2));
    case F_SAFEDIV:
      if (!xgr__cel_num_to_double(x, &d) || !xgr__cel_num_to_double(a[1], &e2) || e2 == 0)
        return xgr_value_retain(a[2]);
      return xgr_value_double(d / e2);
    case F_CLAMP: {
      double lo, hi;
      if (!xgr__cel_num_to_double(x, &d) || !xgr__cel_num_to_double(a[1], &lo) || !xgr__cel_num_to_double(a[2], &hi))
        return xgr_value_retain(x);
      if (lo > hi) f = lo, lo = hi, hi = f;
      return xgr_value_double(d < lo ? lo : d > hi ? hi : d);
    }
    case F_DIST:
    case F_WITHIN: {
      metric m;
      if (!get_metric(c, n, x, &m, &err)) return err;
      double tol = 0;
      if (fn == F_WITHIN && !get_tol(c, n, a[3], &tol, &err)) return err;
      if (!distance(c, n, m, a[1], a[2], &d, &err)) return err;
      return fn == F_DIST ? xgr_value_double(d) : xgr_value_bool(d <= tol);
    }
    case F_MAX: case F_MIN: case F_SUM: case F_AVG: case F_MEDIAN: case F_STDEV: case F_CV: case F_MAD:
      return list_stat(c, n, x);
    case F_QUORUM: return fn_quorum(c, n, a, na, false);
    case F_CONSENSUS: return fn_quorum(c, n, a, na, true);
    case F_JOIN: return fn_join(c, n, x, a[1]);
    case F_UNIQUE: return fn_unique(c, n, x);
    default: return xgr__cel_err(c, n->pos, "internal error: function %d", fn);
  }
}
