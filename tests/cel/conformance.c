/* conformance.c — runs a CEL conformance corpus against the engine in PLAIN mode and reports
 * passed / failed / skipped per file.
 *
 *   cel_conformance --own DIR   the project's own corpus (tests/cel/corpus): every test must pass
 *   cel_conformance [FILE]      the public corpus in $XGR_SHARED/cel-conformance (the test
 *                               cel_conformance_shared); skipped, exit 77, when that folder is absent
 *
 * A corpus file is {"file", "sections": [{"name", "tests": [{"name", "expr", "bindings": {NAME:
 * TAGGED}, "expect": TAGGED, "expect_error": bool}]}]}, where a TAGGED value is {"int": "decimal"},
 * {"uint": "decimal"}, {"double": number|"NaN"|"Infinity"|"-Infinity"}, {"string": s},
 * {"bytes_b64": s}, {"bool": b}, {"null": null}, {"list": [TAGGED...]}, {"map": [[TAGGED key,
 * TAGGED value]...]} or {"type": name}.
 *
 * Each test is compiled and evaluated with its bindings; the result is compared with the
 * expectation by CEL equality with the corpus rules (map order ignored, NaN matches NaN, kinds
 * must agree). `expect_error` tests pass when compiling (other than a syntax error) or evaluating
 * ends in an error. Groups the engine does not support are skipped with a reason (listed in
 * docs/CEL.md too). On the public corpus the program fails when a file of the target set passes
 * less than 95% of its non-skipped tests; on the own corpus, on any failure or skipped test.
 * XGR_CEL_VERBOSE=1 prints every failure; FILE limits the run to one file. */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../shared_dir.h"
#include "xgr/cel.h"
#include "xgr/value.h"

/* Groups not supported, with the reason (docs/CEL.md repeats this table). */
static const struct {
  const char *file, *section, *reason;
} skips[] = {
  {"string_ext", NULL, "the cel-go strings extension library (charAt, indexOf, replace, split, "
                       "format, quote, ...) is not part of the XDaLa subset"},
  {NULL, NULL, NULL},
};

static const char *const targets[] = {"basic", "comparisons", "conversions", "fp_math",
                                      "integer_math", "logic", "lists", "macros", "string",
                                      "plumbing", "parse", "fields", NULL};

static const char *skip_reason(const char *file, const char *section) {
  for (int i = 0; skips[i].file; i++)
    if (!strcmp(skips[i].file, file) && (!skips[i].section || !strcmp(skips[i].section, section)))
      return skips[i].reason;
  return NULL;
}

static int b64val(int c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

/* Tagged JSON value of the corpus -> xgr_value. Returns false on an unknown tag. */
static bool tagged(json_t *t, xgr_value *out) {
  json_t *v;
  if ((v = json_object_get(t, "int"))) {
    *out = xgr_value_int(strtoll(json_string_value(v), NULL, 10));
    return true;
  }
  if ((v = json_object_get(t, "uint"))) {
    *out = xgr_value_uint(strtoull(json_string_value(v), NULL, 10));
    return true;
  }
  if ((v = json_object_get(t, "double"))) {
    if (json_is_string(v)) {
      const char *s = json_string_value(v);
      *out = xgr_value_double(!strcmp(s, "NaN") ? NAN : !strcmp(s, "Infinity") ? INFINITY : -INFINITY);
    } else {
      *out = xgr_value_double(json_number_value(v));
    }
    return true;
  }
  if ((v = json_object_get(t, "string"))) {
    *out = xgr_value_string(json_string_value(v), json_string_length(v));
    return true;
  }
  if ((v = json_object_get(t, "bytes_b64"))) {
    const char *s = json_string_value(v);
    size_t n = strlen(s), k = 0;
    unsigned char *buf = malloc(n + 1);
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
      int d = b64val((unsigned char)s[i]);
      if (d < 0) continue;
      acc = (acc << 6) | (uint32_t)d;
      bits += 6;
      if (bits >= 8) {
        bits -= 8;
        buf[k++] = (unsigned char)(acc >> bits);
      }
    }
    *out = xgr_value_bytes(buf, k);
    free(buf);
    return true;
  }
  if ((v = json_object_get(t, "bool"))) {
    *out = xgr_value_bool(json_is_true(v));
    return true;
  }
  if (json_object_get(t, "null")) {
    *out = xgr_value_null();
    return true;
  }
  if ((v = json_object_get(t, "list"))) {
    xgr_value l = xgr_list_new(json_array_size(v));
    for (size_t i = 0; i < json_array_size(v); i++) {
      xgr_value x;
      if (!tagged(json_array_get(v, i), &x)) {
        xgr_value_release(l);
        return false;
      }
      xgr_list_push(l, x);
    }
    *out = l;
    return true;
  }
  if ((v = json_object_get(t, "map"))) {
    xgr_value m = xgr_map_new(json_array_size(v));
    for (size_t i = 0; i < json_array_size(v); i++) {
      json_t *pair = json_array_get(v, i);
      xgr_value k, x;
      if (!tagged(json_array_get(pair, 0), &k) || !tagged(json_array_get(pair, 1), &x)) {
        xgr_value_release(m);
        return false;
      }
      xgr_map_set(m, k, x);
    }
    *out = m;
    return true;
  }
  if ((v = json_object_get(t, "type"))) {
    static const struct { const char *n; xgr_vkind k; } tn[] = {
      {"int", XGR_VINT}, {"uint", XGR_VUINT}, {"double", XGR_VDOUBLE}, {"bool", XGR_VBOOL},
      {"string", XGR_VSTRING}, {"bytes", XGR_VBYTES}, {"list", XGR_VLIST}, {"map", XGR_VMAP},
      {"null_type", XGR_VNULL}, {"type", XGR_VTYPE}};
    for (size_t i = 0; i < sizeof tn / sizeof tn[0]; i++)
      if (!strcmp(tn[i].n, json_string_value(v))) {
        *out = xgr_value_type(tn[i].k, 0);
        return true;
      }
    return false;
  }
  return false;
}

/* Strict comparison: kinds must agree (recursively), NaN matches NaN, map order ignored. */
static bool same(xgr_value a, xgr_value b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case XGR_VDOUBLE:
      if (isnan(a.as.d) && isnan(b.as.d)) return true;
      return a.as.d == b.as.d && signbit(a.as.d) == signbit(b.as.d);
    case XGR_VLIST:
      if (xgr_list_size(a) != xgr_list_size(b)) return false;
      for (size_t i = 0; i < xgr_list_size(a); i++)
        if (!same(xgr_list_get(a, i), xgr_list_get(b, i))) return false;
      return true;
    case XGR_VMAP:
      if (xgr_map_size(a) != xgr_map_size(b)) return false;
      for (size_t i = 0; i < xgr_map_size(a); i++) {
        xgr_value k, v, w;
        xgr_map_entry(a, i, &k, &v);
        bool found = false;
        for (size_t j = 0; j < xgr_map_size(b) && !found; j++) {
          xgr_value k2;
          xgr_map_entry(b, j, &k2, &w);
          found = same(k, k2) && same(v, w);
        }
        if (!found) return false;
      }
      return true;
    default: return xgr_value_equal(a, b);
  }
}

typedef struct counts {
  int passed, failed, skipped;
} counts;

static bool verbose;

static void run_test(const char *file, const char *section, json_t *t, counts *c) {
  const char *name = json_string_value(json_object_get(t, "name"));
  json_t *je = json_object_get(t, "expr");
  const char *expr = json_string_value(je);
  size_t len = json_string_length(je);
  bool expect_error = json_is_true(json_object_get(t, "expect_error"));
  xgr_value expect = xgr_value_null();
  if (!expect_error && !tagged(json_object_get(t, "expect"), &expect)) {
    c->skipped++;
    return;
  }
  xgr_value vars = xgr_map_new(4);
  const char *k;
  json_t *bv;
  json_object_foreach(json_object_get(t, "bindings"), k, bv) {
    xgr_value x;
    if (!tagged(bv, &x)) {
      c->skipped++;
      xgr_value_release(vars);
      xgr_value_release(expect);
      return;
    }
    xgr_map_set_str(vars, k, strlen(k), x);
  }
  xgr_cel_options o = xgr_cel_options_default(XGR_CEL_MODE_PLAIN);
  xgr_cel_program *p = NULL;
  xgr_error e;
  xgr_error_clear(&e);
  bool ok;
  char got[600] = "";
  int rc = xgr_cel_compile(expr, len, &o, &p, &e);
  if (rc) {
    ok = expect_error && rc != XGR_EPARSE;
    snprintf(got, sizeof got, "compile error: %s", e.message);
  } else {
    xgr_cel_vars lv = xgr_cel_vars_map(vars, NULL);
    xgr_value r;
    int st = xgr_cel_eval(p, &lv, &r, &e);
    if (st != XGR_CEL_OK) {
      ok = expect_error;
      snprintf(got, sizeof got, "error: %s", e.message);
    } else {
      ok = !expect_error && same(r, expect);
      char *s = xgr_value_to_json_text(r, 0, NULL);
      snprintf(got, sizeof got, "%s (%s)", s, xgr_value_kind_name(r));
      free(s);
    }
    xgr_value_release(r);
  }
  if (ok) c->passed++;
  else {
    c->failed++;
    if (verbose) {
      char *ex = expect_error ? NULL : xgr_value_to_json_text(expect, 0, NULL);
      printf("  FAIL %s/%s/%s: %.*s\n    expected %s, got %s\n", file, section, name,
             (int)(len > 200 ? 200 : len), expr, ex ? ex : "an error", got);
      free(ex);
    }
  }
  xgr_cel_program_free(p);
  xgr_value_release(vars);
  xgr_value_release(expect);
}

static int cmpstr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
  verbose = getenv("XGR_CEL_VERBOSE") && atoi(getenv("XGR_CEL_VERBOSE"));
  bool own = argc == 3 && !strcmp(argv[1], "--own");
  const char *only = own ? NULL : argc > 1 ? argv[1] : NULL;
  char dir[4096];
  if (own) snprintf(dir, sizeof dir, "%s", argv[2]);
  else snprintf(dir, sizeof dir, "%s/cel-conformance", shared_dir_or_skip("cel_conformance_shared", "the public CEL conformance corpus"));
  DIR *d = opendir(dir);
  if (!d) {
    fprintf(stderr, "conformance: cannot open %s\n", dir);
    return 1;
  }
  char *names[64];
  int nn = 0;
  struct dirent *de;
  while ((de = readdir(d)) && nn < 64) {
    size_t l = strlen(de->d_name);
    if (l > 5 && !strcmp(de->d_name + l - 5, ".json")) names[nn++] = strdup(de->d_name);
  }
  closedir(d);
  qsort(names, (size_t)nn, sizeof *names, cmpstr);
  int bad = 0;
  counts total = {0};
  printf("%-14s %7s %7s %7s %8s\n", "file", "passed", "failed", "skipped", "rate");
  for (int i = 0; i < nn; i++) {
    char base[256];
    snprintf(base, sizeof base, "%.*s", (int)(strlen(names[i]) - 5), names[i]);
    if (only && strcmp(only, base)) {
      free(names[i]);
      continue;
    }
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    json_error_t je;
    json_t *doc = json_load_file(path, JSON_ALLOW_NUL, &je);
    if (!doc) {
      fprintf(stderr, "conformance: %s: %s\n", path, je.text);
      return 1;
    }
    counts c = {0};
    json_t *sections = json_object_get(doc, "sections");
    for (size_t s = 0; s < json_array_size(sections); s++) {
      json_t *sec = json_array_get(sections, s);
      const char *sname = json_string_value(json_object_get(sec, "name"));
      json_t *tests = json_object_get(sec, "tests");
      if (skip_reason(base, sname)) {
        c.skipped += (int)json_array_size(tests);
        continue;
      }
      for (size_t t = 0; t < json_array_size(tests); t++) run_test(base, sname, json_array_get(tests, t), &c);
    }
    json_decref(doc);
    int run = c.passed + c.failed;
    double rate = run ? 100.0 * c.passed / run : 100.0;
    bool target = false;
    for (int k = 0; !own && targets[k]; k++) target |= !strcmp(targets[k], base);
    printf("%-14s %7d %7d %7d %7.1f%%%s\n", base, c.passed, c.failed, c.skipped, rate,
           target || own ? "" : "  (not in the target set)");
    if (target && rate < 95.0) bad = 1;
    if (own && (c.failed || c.skipped)) bad = 1;
    total.passed += c.passed;
    total.failed += c.failed;
    total.skipped += c.skipped;
    free(names[i]);
  }
  int run = total.passed + total.failed;
  printf("%-14s %7d %7d %7d %7.1f%%\n", "total", total.passed, total.failed, total.skipped,
         run ? 100.0 * total.passed / run : 100.0);
  for (int i = 0; !own && skips[i].file; i++)
    printf("skipped: %s%s%s — %s\n", skips[i].file, skips[i].section ? "/" : "",
           skips[i].section ? skips[i].section : "", skips[i].reason);
  if (bad) printf(own ? "FAIL: a test of the project's corpus failed or was skipped\n" : "FAIL: a file of the target set is below 95%%\n");
  return bad;
}
