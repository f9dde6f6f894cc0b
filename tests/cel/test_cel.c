/* test_cel.c — unit tests of the value model and the expression engine: JSON <-> value
 * exactness, the classifier, placeholder rewriting, every XDaLa helper with the guide's examples
 * and edge cases, each hard cap, missing-key behaviour per mode, error messages, uint256 and
 * sharing a compiled program between threads. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "xgr/cel.h"
#include "xgr/value.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static xgr_value J(const char *json) {
  xgr_value v;
  xgr_error e;
  if (xgr_value_from_json_text(json, strlen(json), 0, &v, &e)) fail_msg("bad test JSON %s: %s", json, e.message);
  return v;
}

/* Evaluate src in mode with vars (JSON object text or NULL); returns the status, result in *out
 * (caller releases), error message in msg (may be NULL). Compile errors return -100 + code. */
static int run(xgr_cel_mode mode, const char *src, const char *vars, xgr_value *out, char *msg) {
  xgr_cel_options o = xgr_cel_options_default(mode);
  xgr_cel_program *p;
  xgr_error e;
  xgr_error_clear(&e);
  *out = xgr_value_null();
  int rc = xgr_cel_compile(src, (size_t)-1, &o, &p, &e);
  if (rc) {
    if (msg) snprintf(msg, 512, "%s", e.message);
    return -100 + rc;
  }
  xgr_value v = vars ? J(vars) : xgr_value_null();
  xgr_cel_vars lv = xgr_cel_vars_map(v, NULL);
  int st = xgr_cel_eval(p, &lv, out, &e);
  if (msg) snprintf(msg, 512, "%s", e.message);
  xgr_value_release(v);
  xgr_cel_program_free(p);
  return st;
}

/* Evaluate and return the result as compact JSON text + " : type" (static buffer). */
static const char *show(xgr_cel_mode mode, const char *src, const char *vars) {
  static char buf[1024];
  xgr_value r;
  char msg[512];
  int st = run(mode, src, vars, &r, msg);
  if (st != XGR_CEL_OK && st != XGR_CEL_MISSING) {
    snprintf(buf, sizeof buf, "%s: %s", st == XGR_CEL_SOFT_INVALID ? "soft_invalid" : "error", msg);
  } else {
    char *t = xgr_value_to_json_text(r, 0, NULL);
    snprintf(buf, sizeof buf, "%s : %s", t, xgr_value_kind_name(r));
    free(t);
  }
  xgr_value_release(r);
  return buf;
}

#define V(src) show(XGR_CEL_MODE_VALUE, (src), NULL)
#define VV(src, vars) show(XGR_CEL_MODE_VALUE, (src), (vars))
#define EXPECT(got, want) assert_string_equal((got), (want))

static double num(const char *src, const char *vars) {
  xgr_value r;
  char msg[512];
  int st = run(XGR_CEL_MODE_VALUE, src, vars, &r, msg);
  if (st != XGR_CEL_OK) fail_msg("%s: %s", src, msg);
  if (r.kind != XGR_VDOUBLE) fail_msg("%s: not a double (%s)", src, xgr_value_kind_name(r));
  return r.as.d;
}

static bool is_error(const char *src, const char *needle) {
  xgr_value r;
  char msg[512] = "";
  int st = run(XGR_CEL_MODE_VALUE, src, NULL, &r, msg);
  xgr_value_release(r);
  if (st == XGR_CEL_OK) return false;
  if (needle && !strstr(msg, needle)) {
    print_message("message '%s' lacks '%s'\n", msg, needle);
    return false;
  }
  return true;
}

/* ---- values and JSON ---------------------------------------------------------------------- */

static void test_json_exact(void **state) {
  (void)state;
  xgr_value v = J("{\"b\": 1, \"a\": 9223372036854775807, \"c\": 9223372036854775808,"
                  " \"d\": 18446744073709551616, \"e\": -9223372036854775808, \"f\": 2.0, \"g\": 1e2,"
                  " \"h\": [true, null, \"x\\u00e9\\ud83d\\ude00\"]}");
  xgr_value x;
  assert_true(xgr_map_get_str(v, "a", 1, &x) && x.kind == XGR_VINT && x.as.i == INT64_MAX);
  assert_true(xgr_map_get_str(v, "c", 1, &x) && x.kind == XGR_VUINT && x.as.u == 9223372036854775808ULL);
  assert_true(xgr_map_get_str(v, "d", 1, &x) && x.kind == XGR_VBIGINT);
  assert_true(xgr_map_get_str(v, "e", 1, &x) && x.kind == XGR_VINT && x.as.i == INT64_MIN);
  assert_true(xgr_map_get_str(v, "f", 1, &x) && x.kind == XGR_VDOUBLE && x.as.d == 2.0);
  assert_true(xgr_map_get_str(v, "g", 1, &x) && x.kind == XGR_VDOUBLE && x.as.d == 100.0);
  char *t = xgr_value_to_json_text(v, 0, NULL);
  assert_string_equal(t, "{\"b\":1,\"a\":9223372036854775807,\"c\":9223372036854775808,"
                         "\"d\":\"18446744073709551616\",\"e\":-9223372036854775808,\"f\":2.0,"
                         "\"g\":100.0,\"h\":[true,null,\"x\xc3\xa9\xf0\x9f\x98\x80\"]}");
  free(t);
  /* jansson conversion: uints above int64 become strings there */
  json_t *j = xgr_value_to_json(v);
  assert_true(json_is_string(json_object_get(j, "c")));
  assert_true(json_is_integer(json_object_get(j, "a")));
  xgr_value back;
  assert_int_equal(xgr_value_from_json(j, 0, &back, NULL), 0);
  assert_int_equal(xgr_map_size(back), 8);
  xgr_value_release(back);
  json_decref(j);
  xgr_value_release(v);
}

static void test_json_errors_and_flags(void **state) {
  (void)state;
  xgr_value v;
  xgr_error e;
  assert_int_equal(xgr_value_from_json_text("{\"a\":1,\"a\":2}", 13, 0, &v, &e), XGR_EPARSE);
  assert_non_null(strstr(e.message, "duplicate"));
  assert_int_equal(xgr_value_from_json_text("[1,", 3, 0, &v, &e), XGR_EPARSE);
  assert_int_equal(xgr_value_from_json_text("01", 2, 0, &v, &e), XGR_EPARSE);
  assert_int_equal(xgr_value_from_json_text("\"\\ud800\"", 8, 0, &v, &e), XGR_EPARSE);
  assert_int_equal(xgr_value_from_json_text("{\"n\": 5}", 8, XGR_JSON_NUMBERS_AS_DOUBLE, &v, &e), 0);
  xgr_value n;
  assert_true(xgr_map_get_str(v, "n", 1, &n) && n.kind == XGR_VDOUBLE && n.as.d == 5.0);
  xgr_value_release(v);
  /* deep nesting is refused, not a crash */
  char deep[2000];
  memset(deep, '[', sizeof deep);
  assert_int_equal(xgr_value_from_json_text(deep, sizeof deep, 0, &v, &e), XGR_EPARSE);
}

static void test_map_order_and_keys(void **state) {
  (void)state;
  xgr_value m = xgr_map_new(2);
  for (int i = 20; i > 0; i--) {
    char k[8];
    snprintf(k, sizeof k, "k%d", i);
    xgr_map_set_str(m, k, strlen(k), xgr_value_int(i));
  }
  xgr_map_set_str(m, "k5", 2, xgr_value_int(500)); /* replace keeps position */
  xgr_value k, v;
  xgr_map_entry(m, 15, &k, &v);
  assert_int_equal(v.as.i, 500);
  assert_true(xgr_map_remove_str(m, "k20", 3));
  assert_int_equal(xgr_map_size(m), 19);
  xgr_map_entry(m, 0, &k, &v);
  assert_int_equal(v.as.i, 19);
  assert_int_equal(xgr_map_set(m, xgr_value_double(1.5), xgr_value_null()), XGR_EINVAL);
  xgr_map_set(m, xgr_value_int(7), xgr_value_cstring("seven"));
  assert_true(xgr_map_get(m, xgr_value_uint(7), &v) && v.kind == XGR_VSTRING);
  assert_true(xgr_map_get(m, xgr_value_double(7.0), &v));
  xgr_value c = xgr_map_copy(m);
  assert_true(xgr_value_equal(c, m));
  xgr_value_release(c);
  xgr_value_release(m);
}

static void test_render(void **state) {
  (void)state;
  char *s;
  s = xgr_value_render(xgr_value_double(0.1), NULL); assert_string_equal(s, "0.1"); free(s);
  s = xgr_value_render(xgr_value_double(2.0), NULL); assert_string_equal(s, "2"); free(s);
  s = xgr_value_render(xgr_value_double(1e21), NULL); assert_string_equal(s, "1e+21"); free(s);
  s = xgr_value_render(xgr_value_double(1.0 / 3), NULL); assert_string_equal(s, "0.3333333333333333"); free(s);
  s = xgr_value_render(xgr_value_int(-12), NULL); assert_string_equal(s, "-12"); free(s);
  s = xgr_value_render(xgr_value_bool(true), NULL); assert_string_equal(s, "true"); free(s);
}

static void test_list_cap_cached(void **state) {
  (void)state;
  xgr_value inner = xgr_list_new(1);
  for (int i = 0; i < 65; i++) xgr_list_push(inner, xgr_value_int(i));
  xgr_value m = xgr_map_new(1);
  xgr_value outer = xgr_list_new(1);
  xgr_list_push(outer, inner);
  xgr_map_set_str(m, "x", 1, outer);
  assert_int_equal(xgr_value_max_list_len(m), 65);
  xgr_error e;
  assert_int_equal(xgr_value_check_list_cap(m, 64, &e), XGR_ELIMIT);
  assert_non_null(strstr(e.message, "MaxListCap is 64"));
  assert_non_null(strstr(e.message, "65"));
  xgr_value_release(m);
}

/* ---- classifier and placeholders ---------------------------------------------------------- */

static void test_classify(void **state) {
  (void)state;
  static const struct { const char *s; xgr_cel_kind k; } t[] = {
    {"[A]", XGR_CEL_KIND_EXPRESSION},          {"  [A]  ", XGR_CEL_KIND_EXPRESSION},
    {"memo: [A]", XGR_CEL_KIND_TEMPLATE},      {"[A] >= 60", XGR_CEL_KIND_EXPRESSION},
    {"[A_out] >= 60", XGR_CEL_KIND_EXPRESSION}, {"[Amount] + 15", XGR_CEL_KIND_EXPRESSION},
    {"[Iter]+1", XGR_CEL_KIND_EXPRESSION},     {"([A_out] + 15)", XGR_CEL_KIND_EXPRESSION},
    {"[Base]-[Quote]", XGR_CEL_KIND_TEMPLATE}, {"kyc-valid-[x]", XGR_CEL_KIND_TEMPLATE},
    {"1990-04-15", XGR_CEL_KIND_TEMPLATE},     {"hello world", XGR_CEL_KIND_TEMPLATE},
    {"true", XGR_CEL_KIND_EXPRESSION},         {"false", XGR_CEL_KIND_EXPRESSION},
    {"null", XGR_CEL_KIND_EXPRESSION},         {"42", XGR_CEL_KIND_EXPRESSION},
    {"-3.5e2", XGR_CEL_KIND_EXPRESSION},       {"7u", XGR_CEL_KIND_EXPRESSION},
    {"\"some literal string\"", XGR_CEL_KIND_EXPRESSION}, {"'single'", XGR_CEL_KIND_EXPRESSION},
    {"1234567890123456", XGR_CEL_KIND_BIGLITERAL}, {"123456789012345", XGR_CEL_KIND_EXPRESSION},
    {"size(resp.items)", XGR_CEL_KIND_EXPRESSION}, {"a - b", XGR_CEL_KIND_TEMPLATE},
    {"[A] - [B]", XGR_CEL_KIND_EXPRESSION},    {"[A]-1", XGR_CEL_KIND_EXPRESSION},
    {"[A]-(1)", XGR_CEL_KIND_EXPRESSION},      {"x [A] + y", XGR_CEL_KIND_EXPRESSION},
    {"'a (b)' [A]", XGR_CEL_KIND_TEMPLATE},    {"[A] 'x<y'", XGR_CEL_KIND_TEMPLATE},
    {"", XGR_CEL_KIND_TEMPLATE},               {"Order [Id] for [Who]", XGR_CEL_KIND_TEMPLATE},
    /* SEMANTICS §8 counts '=' as a strong token, so this guide example is an expression */
    {"Hello [Name], amount=[Amount]", XGR_CEL_KIND_EXPRESSION},
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    if (xgr_cel_classify(t[i].s, (size_t)-1) != t[i].k) fail_msg("classify('%s') != %d", t[i].s, t[i].k);
  }
}

static void rw(const char *in, const char *want) {
  char *out;
  xgr_error e;
  assert_int_equal(xgr_cel_rewrite(in, (size_t)-1, &out, &e), 0);
  if (strcmp(out, want)) fail_msg("rewrite(%s) = %s, want %s", in, out, want);
  free(out);
}

static void test_rewrite(void **state) {
  (void)state;
  rw("[AmountA]", "AmountA");
  rw("[A] + [B_2]", "A + B_2");
  rw("l[0] + m[\"k\"] + m['k'] + l[x + 1]", "l[0] + m[\"k\"] + m[\"k\"] + l[x + 1]");
  rw("[[A],[B]]", "[A,B]");
  rw("'hello'", "\"hello\"");
  rw("'it\\'s \"x\"'", "\"it's \\\"x\\\"\"");
  rw("\"[A] stays\" + '[B]'", "\"[A] stays\" + \"[B]\"");
  rw("names[i]", "names[i]");
  rw("x in [A]", "x in A");
  rw("f(x)[k] + [l][0]", "f(x)[k] + l[0]");
  rw("r'a\\d' + b'[X]'", "r'a\\d' + b'[X]'");
  rw("'''tri'''", "'''tri'''");
  rw("[0]", "[0]");
  char *out;
  xgr_error e;
  assert_int_equal(xgr_cel_rewrite("'open", (size_t)-1, &out, &e), XGR_EPARSE);
}

static void test_templates(void **state) {
  (void)state;
  EXPECT(VV("Hello [Name], amount [Amount]", "{\"Name\":\"Alice\",\"Amount\":12}"),
         "\"Hello Alice, amount 12\" : string");
  EXPECT(VV("p=[P] ok", "{\"P\":1.5}"), "error: at 1: unexpected '=' (did you mean '=='?)");
  EXPECT(VV("memo [D] [B] [N] [U]", "{\"D\":0.1,\"B\":true,\"N\":null,\"U\":18446744073709551615}"),
         "\"memo 0.1 true null 18446744073709551615\" : string");
  EXPECT(VV("memo: [A]", "{}"), "soft_invalid: missing key 'A'");
  EXPECT(VV("[A]", "{\"A\":[1,2]}"), "[1,2] : list");
  EXPECT(V("1234567890123456789012"), "\"1234567890123456789012\" : string");
  EXPECT(V("123456789012345"), "123456789012345 : int");
  EXPECT(V("1990-04-15"), "\"1990-04-15\" : string");
  EXPECT(V("'quoted'"), "\"quoted\" : string");
}

/* ---- XDaLa helpers ------------------------------------------------------------------------ */

static void test_numeric_helpers(void **state) {
  (void)state;
  EXPECT(V("abs(-5)"), "5.0 : double");
  EXPECT(V("abs(double(-3.2))"), "3.2 : double");
  EXPECT(V("abs(7u)"), "7.0 : double");
  assert_true(is_error("abs('x')", "no such overload"));
  assert_true(is_error("abs(1.0/0.0)", "not finite"));
  EXPECT(V("pow(2, 10)"), "1024.0 : double");
  EXPECT(VV("pow(double([X]), 2)", "{\"X\":3}"), "9.0 : double");
  EXPECT(V("pow('a', 2)"), "0.0 : double");
  assert_true(fabs(num("relDiff(100.0, 101.0)", NULL) - 0.009950248756218905) < 1e-15);
  EXPECT(V("relDiff(0.0, 0.0)"), "0.0 : double");
  /* The guide lists relDiff(0.0, 1.0) as 1e18, but its normative definition gives
   * |0-1| / |(0+1)/2| = 2.0; the sentinel applies only when (a+b)/2 == 0 (docs/CEL.md). */
  EXPECT(V("relDiff(0.0, 1.0)"), "2.0 : double");
  EXPECT(V("relDiff(-1.0, 1.0)"), "1e+18 : double");
  assert_true(is_error("relDiff('a', 1.0)", "no such overload"));
  EXPECT(V("safeDiv(10.0, 2.0, 0.0)"), "5.0 : double");
  EXPECT(V("safeDiv(10.0, 0.0, 0.0)"), "0.0 : double");
  EXPECT(V("safeDiv(10, 4, 0.0)"), "2.5 : double");
  EXPECT(V("safeDiv('x', 2.0, 'fallback')"), "\"fallback\" : string");
  EXPECT(VV("safeDiv([X], [Y], 0.0)", "{\"X\":1,\"Y\":0}"), "0.0 : double");
  EXPECT(V("clamp(5.0, 0.0, 10.0)"), "5.0 : double");
  EXPECT(V("clamp(-1.0, 0.0, 10.0)"), "0.0 : double");
  EXPECT(V("clamp(99.0, 0.0, 10.0)"), "10.0 : double");
  EXPECT(V("clamp(99.0, 10.0, 0.0)"), "10.0 : double");
  EXPECT(V("clamp('x', 0.0, 10.0)"), "\"x\" : string");
  EXPECT(V("clamp(5, 'lo', 10.0)"), "5 : int");
}

static void test_distance_helpers(void **state) {
  (void)state;
  assert_true(fabs(num("dist(\"rel\", 100.0, 101.0)", NULL) - 0.009950248756218905) < 1e-15);
  EXPECT(V("dist(\"\", 100.0, 101.0) == dist(\"RelDiff\", 100.0, 101.0)"), "true : bool");
  EXPECT(V("dist(\"abs\", 100.0, 101.0)"), "1.0 : double");
  EXPECT(V("dist(\"ABSOLUTE\", 1, 3u)"), "2.0 : double");
  EXPECT(V("dist(\"eq\", \"CB\", \"CB\")"), "0.0 : double");
  EXPECT(V("dist(\"equal\", 1, 1.0)"), "0.0 : double");
  EXPECT(V("dist(\"eq\", \"CB\", 1)"), "1.0 : double");
  assert_true(fabs(num("dist(\"hamming\", \"ABC\", \"ABD\")", NULL) - 1.0 / 3) < 1e-15);
  EXPECT(V("dist(\"ham\", \"ABC\", \"ABCD\")"), "1e+18 : double");
  EXPECT(V("dist(\"lev\", \"kitten\", \"sitting\") > 0.42 && dist(\"lev\", \"kitten\", \"sitting\") < 0.43"), "true : bool");
  EXPECT(V("dist(\"levenshtein\", \"\", \"\")"), "0.0 : double");
  char big[400];
  snprintf(big, sizeof big, "dist(\"lev\", \"%0257d\", \"a\")", 0);
  EXPECT(V(big), "1e+18 : double");
  assert_true(is_error("dist(1, 2.0, 3.0)", "metric must be string"));
  assert_true(is_error("dist(\"cosine\", 2.0, 3.0)", "unsupported metric"));
  assert_true(is_error("dist(\"rel\", \"a\", 3.0)", "metric expects numeric"));
  assert_true(is_error("dist(\"hamming\", 1, 2)", "expects strings"));
  assert_true(is_error("\"rel\".dist(100.0, 101.0)", "is a function, not a method"));
  EXPECT(V("within(\"rel\", 100.0, 101.0, 0.01)"), "true : bool");
  EXPECT(V("within(\"rel\", 100.0, 102.0, 0.01)"), "false : bool");
  EXPECT(V("within(\"eq\", \"CB\", \"CB\", 0.0)"), "true : bool");
  EXPECT(V("within(\"eq\", \"CB\", \"CG\", 0.0)"), "false : bool");
  EXPECT(V("within(\"hamming\", \"ABC\", \"ABD\", 0.0)"), "false : bool");
  EXPECT(V("within(\"hamming\", \"ABC\", \"ABD\", 0.34)"), "true : bool");
  assert_true(is_error("within(\"rel\", 1.0, 1.0, -0.1)", "tol must be >= 0"));
  assert_true(is_error("within(\"rel\", 1.0, 1.0, 'x')", "tol must be >= 0"));
}

static void test_list_helpers(void **state) {
  (void)state;
  EXPECT(V("max([1.0, 5.0, 2.0])"), "5.0 : double");
  EXPECT(V("min([1.0, 5.0, 2.0])"), "1.0 : double");
  EXPECT(V("sum([1, 2u, 3.5])"), "6.5 : double");
  assert_true(fabs(num("avg([1.0, 5.0, 2.0])", NULL) - 8.0 / 3) < 1e-15);
  EXPECT(V("median([1.0, 9.0, 3.0])"), "3.0 : double");
  EXPECT(V("median([1.0, 9.0, 3.0, 7.0])"), "5.0 : double");
  EXPECT(V("stdev([10.0, 10.0, 10.0])"), "0.0 : double");
  EXPECT(V("stdev([10.0])"), "0.0 : double");
  assert_true(fabs(num("stdev([10.0, 12.0, 8.0])", NULL) - sqrt(8.0 / 3)) < 1e-12);
  assert_true(fabs(num("cv([100.0, 101.0, 99.5])", NULL) - 0.0062258) < 1e-6);
  EXPECT(V("cv([-1.0, 1.0])"), "0.0 : double");
  EXPECT(V("mad([100.0, 101.0, 99.5, 500.0])"), "0.75 : double");
  /* neutral 0.0: empty, non-numeric, not a list */
  EXPECT(V("max([])"), "0.0 : double");
  EXPECT(V("avg([1.0, 'x'])"), "0.0 : double");
  EXPECT(V("sum('abc')"), "0.0 : double");
  EXPECT(V("median([])"), "0.0 : double");
}

static void test_quorum_consensus(void **state) {
  (void)state;
  const char *p3 = "{\"FetchedCoinbase\":100.0,\"FetchedBitstamp\":100.5,\"FetchedGecko\":120.0}";
  EXPECT(VV("quorum([FetchedCoinbase, FetchedBitstamp, FetchedGecko], \"rel\", 0.01, 2)", p3), "true : bool");
  EXPECT(VV("quorum([FetchedCoinbase, FetchedBitstamp, FetchedGecko], \"rel\", 0.01, 3)", p3), "false : bool");
  EXPECT(VV("quorum([[FetchedCoinbase], [FetchedBitstamp], [FetchedGecko]], \"rel\", \"pairwise\", 0.01, 2)", p3), "true : bool");
  EXPECT(VV("consensus([FetchedCoinbase, FetchedBitstamp, FetchedGecko], \"rel\", \"medoid\", 0.01, 2)", p3), "100.0 : double");
  EXPECT(VV("consensus([FetchedCoinbase, FetchedBitstamp, FetchedGecko], \"rel\", \"mean\", 0.01, 2)", p3), "100.25 : double");
  EXPECT(VV("consensus([FetchedCoinbase, FetchedBitstamp, FetchedGecko], \"rel\", \"median\", 0.01, 2)", p3), "100.25 : double");
  EXPECT(VV("consensus([FetchedCoinbase, FetchedBitstamp, FetchedGecko], \"rel\", \"mean\", 0.01, 3)", p3), "0.0 : double");
  EXPECT(V("quorum([\"A\", \"B\", \"A\"], \"eq\", 0.0, 2)"), "true : bool");
  EXPECT(V("consensus([\"A\", \"B\", \"A\"], \"eq\", \"mode\", 0.0, 2)"), "\"A\" : string");
  EXPECT(V("consensus([\"ABC\", \"ABD\", \"XYZ\"], \"hamming\", \"ball\", \"medoid\", 0.34, 2)"), "\"ABC\" : string");
  EXPECT(V("consensus([\"ABC\", \"ABD\", \"XYZ\"], \"hamming\", \"clique\", \"mode\", 0.34, 2)"), "\"ABC\" : string");
  /* the guide's guardrail composition */
  EXPECT(VV("(PrevPrice == 0.0) || (relDiff(consensus([A, B, C], \"rel\", \"mean\", 0.01, 2), PrevPrice) <= MaxDeltaPct)",
            "{\"A\":100.0,\"B\":100.5,\"C\":90.0,\"PrevPrice\":95.0,\"MaxDeltaPct\":0.2}"), "true : bool");
  /* ball picks the earliest center on ties; pairwise differs from ball on a chain */
  EXPECT(V("consensus([1.0, 2.0, 3.0], \"abs\", \"ball\", \"mean\", 1.0, 3)"), "2.0 : double");
  EXPECT(V("consensus([1.0, 2.0, 3.0], \"abs\", \"pairwise\", \"mean\", 1.0, 3)"), "0.0 : double");
  EXPECT(V("quorum([], \"rel\", 0.1, 1)"), "false : bool");
  assert_true(is_error("quorum(1.0, \"rel\", 0.1, 1)", "values must be a list"));
  assert_true(is_error("quorum([1.0], 5, 0.1, 1)", "metric must be string"));
  assert_true(is_error("quorum([1.0], \"rel\", -1.0, 1)", "tol must be >= 0"));
  assert_true(is_error("quorum([1.0], \"rel\", 0.1, 0)", "k must be >= 1"));
  assert_true(is_error("quorum([1.0], \"rel\", \"star\", 0.1, 1)", "unsupported mode"));
  assert_true(is_error("consensus([1.0], \"rel\", \"max\", 0.1, 1)", "unknown agg"));
  assert_true(is_error("consensus([\"a\"], \"eq\", \"mean\", 0.0, 1)", "needs numeric"));
  assert_true(is_error("quorum([1.0], \"rel\")", "takes 4 to 5 arguments"));
}

static void test_misc_helpers(void **state) {
  (void)state;
  EXPECT(V("join([1, \"a\", 2.5, true], \"-\")"), "\"1-a-2.5-true\" : string");
  EXPECT(V("[\"x\", \"y\"].join(\", \")"), "\"x, y\" : string");
  EXPECT(V("unique([3, 1, 3, 2, 1, 1.0])"), "[3,1,2] : list");
  EXPECT(V("u256(\"115792089237316195423570985008687907853269984665640564039457584007913129639935\")"),
         "\"115792089237316195423570985008687907853269984665640564039457584007913129639935\" : uint256");
  EXPECT(V("uint256(\"0xff\") + 1"), "\"256\" : uint256");
  EXPECT(V("u256(10) * u256(\"1000000000000000000\") > 5"), "true : bool");
  EXPECT(V("u256(\"1000\") == \"1000\""), "true : bool");
  EXPECT(V("u256(\"1000\") != \"0\""), "true : bool");
  EXPECT(V("u256(5) - 6u"), "error: at 8: uint256 overflow in '-'");
  assert_true(is_error("u256(-1)", "range"));
  assert_true(is_error("u256(\"12a\")", "not an integer"));
  EXPECT(V("int64(42u)"), "42 : int");
  assert_true(is_error("int64(18446744073709551615u)", "range"));
  EXPECT(V("uint64(7)"), "7 : uint");
  assert_true(is_error("uint64(-7)", "range"));
  EXPECT(V("int64(\"12\") + 1"), "13 : int");
}

/* ---- CEL core ----------------------------------------------------------------------------- */

static void test_cel_semantics(void **state) {
  (void)state;
  EXPECT(V("([1] + 2)"), "error: at 5: no such overload: list + int");
  EXPECT(V("(1 + 1.0)"), "error: at 3: no such overload: int + double");
  EXPECT(V("(1 < 1.5) && (2u == 2) && (3.0 == 3)"), "true : bool");
  EXPECT(V("(false && 1/0 == 1)"), "false : bool");
  EXPECT(V("(1/0 == 1 || true)"), "true : bool");
  EXPECT(V("(9223372036854775807 + 1)"), "error: at 21: int overflow in '+'");
  EXPECT(V("(5 % 0)"), "error: at 3: modulus by zero");
  EXPECT(V("({'a': [1, {'b': 2}]} == {'a': [1, {'b': 2}]})"), "true : bool");
  EXPECT(V("('ab' + 'cd')"), "\"abcd\" : string");
  EXPECT(V("(2 in [1, 2]) && ('k' in {'k': 1})"), "true : bool");
  EXPECT(V("size('héllo') + size([1,2]) + 'abc'.size()"), "10 : int");
  EXPECT(V("('hello'.contains('ell') && 'hello'.startsWith('he') && 'hello'.endsWith('lo'))"), "true : bool");
  EXPECT(V("('ABC-123'.matches('^[A-Z]+-[0-9]+$'))"), "true : bool");
  EXPECT(V("('AbC'.lowerAscii() + 'AbC'.upperAscii())"), "\"abcABC\" : string");
  EXPECT(V("(true ? 1 : 2)"), "1 : int");
  EXPECT(V("([1, 2, 3].map(x, x * 2))"), "[2,4,6] : list");
  EXPECT(V("([1, 2, 3].map(x, x > 1, x * 10))"), "[20,30] : list");
  EXPECT(V("([1, 2, 3].filter(x, x % 2 == 1))"), "[1,3] : list");
  EXPECT(V("([1, 2, 3].all(x, x > 0) && [1, 2, 3].exists(x, x == 2) && [1, 2, 3].exists_one(x, x == 3))"), "true : bool");
  EXPECT(V("(has({'a': 1}.a) && !has({'a': 1}.b))"), "true : bool");
  EXPECT(V("(type(1) == int && type('x') == string)"), "true : bool");
  EXPECT(V("(string(1.5) + string(2) + string(true))"), "\"1.52true\" : string");
  EXPECT(V("(0x10 + 1)"), "17 : int");
  EXPECT(V("(r'\\d' + \"\"\"x\"\"\")"), "\"\\\\dx\" : string");
  EXPECT(V("(b'ab' + b'\\x00')"), "\"YWIA\" : bytes");
  EXPECT(V("(-9223372036854775808 < 0)"), "true : bool");
  EXPECT(VV("(resp.data.amount > 5.0)", "{\"resp\":{\"data\":{\"amount\":7.5}}}"), "true : bool");
  EXPECT(VV("(m['k-1'] + m.k2)", "{\"m\":{\"k-1\":1,\"k2\":2}}"), "3 : int");
  EXPECT(VV("(items[1].name)", "{\"items\":[{\"name\":\"a\"},{\"name\":\"b\"}]}"), "\"b\" : string");
}

static void test_parse_errors(void **state) {
  (void)state;
  xgr_value r;
  char msg[512];
  assert_int_equal(run(XGR_CEL_MODE_RULE, "[A] > ", "{\"A\":1}", &r, msg), -100 + XGR_EPARSE);
  assert_string_equal(msg, "at 4: expected an expression, found end of input");
  assert_int_equal(run(XGR_CEL_MODE_RULE, "[A] = 1", NULL, &r, msg), -100 + XGR_EPARSE);
  assert_non_null(strstr(msg, "did you mean '=='"));
  assert_int_equal(run(XGR_CEL_MODE_RULE, "foo(1)", NULL, &r, msg), -100 + XGR_EEVAL);
  assert_string_equal(msg, "at 0: unknown function 'foo'");
  assert_int_equal(run(XGR_CEL_MODE_RULE, "size(1, 2)", NULL, &r, msg), -100 + XGR_EEVAL);
  assert_non_null(strstr(msg, "size() takes 1 argument, got 2"));
  assert_int_equal(run(XGR_CEL_MODE_RULE, "'x'.matches('(')", NULL, &r, msg), -100 + XGR_EEVAL);
  assert_non_null(strstr(msg, "invalid regular expression"));
  assert_int_equal(run(XGR_CEL_MODE_RULE, "if > 1", NULL, &r, msg), -100 + XGR_EPARSE);
  assert_non_null(strstr(msg, "reserved word"));
  assert_int_equal(run(XGR_CEL_MODE_RULE, "\"abc", NULL, &r, msg), -100 + XGR_EPARSE);
  assert_int_equal(run(XGR_CEL_MODE_RULE, "'\\q'", NULL, &r, msg), -100 + XGR_EPARSE);
  assert_int_equal(run(XGR_CEL_MODE_RULE, "9223372036854775808 > 1", NULL, &r, msg), -100 + XGR_EPARSE);
  assert_int_equal(run(XGR_CEL_MODE_RULE, "[1,2].all(1, true)", NULL, &r, msg), -100 + XGR_EPARSE);
  assert_int_equal(run(XGR_CEL_MODE_RULE, "has(x)", NULL, &r, msg), -100 + XGR_EPARSE);
  /* rule must be bool */
  assert_int_equal(run(XGR_CEL_MODE_RULE, "[A] + 1", "{\"A\":1}", &r, msg), XGR_CEL_ERROR);
  assert_string_equal(msg, "a rule must evaluate to bool, got int");
  /* nesting limit instead of a stack overflow */
  char deep[1100];
  memset(deep, '(', 600);
  strcpy(deep + 600, "1");
  memset(deep + 601, ')', 400);
  deep[1001] = '\0';
  assert_int_equal(run(XGR_CEL_MODE_RULE, deep, NULL, &r, msg), -100 + XGR_EPARSE);
  assert_non_null(strstr(msg, "nested deeper"));
}

/* ---- caps --------------------------------------------------------------------------------- */

static void test_caps(void **state) {
  (void)state;
  xgr_value r;
  char msg[512];
  char *long_src = malloc(2100);
  memset(long_src, ' ', 2000);
  memcpy(long_src, "true", 4);
  long_src[1025] = '\0';
  assert_int_equal(run(XGR_CEL_MODE_RULE, long_src, NULL, &r, msg), -100 + XGR_ELIMIT);
  assert_string_equal(msg, "expression is 1025 bytes, MaxExprLen is 1024");
  long_src[1024] = '\0';
  assert_int_equal(run(XGR_CEL_MODE_RULE, long_src, NULL, &r, msg), XGR_CEL_OK);
  free(long_src);
  /* AST nodes: a long chain compiled with MaxExprLen lifted */
  size_t n = 0;
  char *chain = malloc(20000);
  n += (size_t)sprintf(chain, "(");
  for (int i = 0; i < 2100; i++) n += (size_t)sprintf(chain + n, "%s1", i ? "+" : "");
  n += (size_t)sprintf(chain + n, ")");
  xgr_cel_options o = xgr_cel_options_default(XGR_CEL_MODE_VALUE);
  o.max_expr_len = 0;
  xgr_cel_program *p;
  xgr_error e;
  assert_int_equal(xgr_cel_compile(chain, n, &o, &p, &e), XGR_ELIMIT);
  assert_string_equal(e.message, "expression has 4199 AST nodes, MaxAstNodes is 4096 (too complex)");
  free(chain);
  o.max_ast_nodes = 5;
  assert_int_equal(xgr_cel_compile("(1 + 2 + 3 + 4)", (size_t)-1, &o, &p, &e), XGR_ELIMIT);
  assert_non_null(strstr(e.message, "MaxAstNodes is 5"));
  /* MaxListCap, deep, over inputs */
  char vars[1200];
  size_t k = (size_t)sprintf(vars, "{\"L\": {\"in\": [");
  for (int i = 0; i < 65; i++) k += (size_t)sprintf(vars + k, "%s%d", i ? "," : "", i);
  sprintf(vars + k, "]}}");
  assert_int_equal(run(XGR_CEL_MODE_RULE, "size([L].in) > 0", vars, &r, msg), XGR_CEL_ERROR);
  assert_string_equal(msg, "variable 'L' holds a list of 65 elements, MaxListCap is 64");
  assert_int_equal(run(XGR_CEL_MODE_PLAIN, "size(L.in) > 0", vars, &r, msg), XGR_CEL_OK);
  xgr_value_release(r);
  /* digits-only literal short-circuit */
  EXPECT(V("  1000000000000000000  "), "\"1000000000000000000\" : string");
  /* evaluation budget (deterministic, not a timeout) */
  o = xgr_cel_options_default(XGR_CEL_MODE_VALUE);
  o.max_cost = 1000;
  assert_int_equal(xgr_cel_compile("([1,2,3,4,5,6,7,8,9,10].map(a, [1,2,3,4,5,6,7,8,9,10].map(b, [1,2,3,4,5,6,7,8,9,10].map(c, c))))",
                                   (size_t)-1, &o, &p, &e), 0);
  assert_int_equal(xgr_cel_eval(p, NULL, &r, &e), XGR_CEL_ERROR);
  assert_int_equal(e.code, XGR_ELIMIT);
  assert_non_null(strstr(e.message, "evaluation budget exhausted"));
  xgr_cel_program_free(p);
}

/* ---- missing keys per mode ---------------------------------------------------------------- */

static void test_missing(void **state) {
  (void)state;
  xgr_value r;
  char msg[512];
  /* rule: false, status MISSING, even where CEL would short-circuit */
  assert_int_equal(run(XGR_CEL_MODE_RULE, "[A] > 1", "{}", &r, msg), XGR_CEL_MISSING);
  assert_true(r.kind == XGR_VBOOL && !r.as.b);
  assert_string_equal(msg, "missing key 'A'");
  assert_int_equal(run(XGR_CEL_MODE_RULE, "true || [A] > 1", "{}", &r, msg), XGR_CEL_MISSING);
  assert_int_equal(run(XGR_CEL_MODE_RULE, "[A] > 1", "{\"A\": 2}", &r, msg), XGR_CEL_OK);
  assert_true(r.as.b);
  /* value: soft-invalid (expressions and templates) */
  assert_int_equal(run(XGR_CEL_MODE_VALUE, "[A] + 1", "{\"B\": 1}", &r, msg), XGR_CEL_SOFT_INVALID);
  assert_int_equal(r.kind, XGR_VNULL);
  assert_int_equal(run(XGR_CEL_MODE_VALUE, "note [A]", "{}", &r, msg), XGR_CEL_SOFT_INVALID);
  /* extract: missing resp field is a CEL error, missing placeholder input soft-invalid */
  xgr_cel_options o = xgr_cel_options_default(XGR_CEL_MODE_EXTRACT);
  xgr_cel_program *p;
  xgr_error e;
  assert_int_equal(xgr_cel_compile("double(resp.data.price) * [Factor]", (size_t)-1, &o, &p, &e), 0);
  xgr_value resp = J("{\"data\": {\"price\": \"12.5\"}}");
  xgr_value in = J("{\"Factor\": 2.0}");
  xgr_cel_vars l_resp = xgr_cel_vars_one("resp", resp, NULL);
  xgr_cel_vars l_in = xgr_cel_vars_map(in, &l_resp);
  assert_int_equal(xgr_cel_eval(p, &l_in, &r, &e), XGR_CEL_OK);
  assert_true(r.kind == XGR_VDOUBLE && r.as.d == 25.0);
  xgr_cel_vars l_only = xgr_cel_vars_one("resp", resp, NULL);
  assert_int_equal(xgr_cel_eval(p, &l_only, &r, &e), XGR_CEL_SOFT_INVALID);
  xgr_cel_program_free(p);
  assert_int_equal(xgr_cel_compile("resp.data.missing", (size_t)-1, &o, &p, &e), 0);
  assert_int_equal(xgr_cel_eval(p, &l_resp, &r, &e), XGR_CEL_ERROR);
  assert_string_equal(e.message, "at 10: no such key: 'missing'");
  xgr_cel_program_free(p);
  xgr_value_release(resp);
  xgr_value_release(in);
  /* plain CEL: an unbound name is an ordinary error that || can absorb */
  assert_int_equal(run(XGR_CEL_MODE_PLAIN, "x || true", NULL, &r, msg), XGR_CEL_OK);
  assert_int_equal(run(XGR_CEL_MODE_PLAIN, "x", NULL, &r, msg), XGR_CEL_ERROR);
  assert_string_equal(msg, "at 0: undeclared reference to 'x'");
}

/* Context variables shadow payload keys when their layer comes first. */
static bool ctx_lookup(void *ctx, const char *name, size_t len, xgr_value *out) {
  (void)ctx;
  if (len == 11 && !memcmp(name, "__sessionId", 11)) {
    *out = xgr_value_uint(77);
    return true;
  }
  return false;
}

static void test_vars_layers(void **state) {
  (void)state;
  xgr_cel_options o = xgr_cel_options_default(XGR_CEL_MODE_VALUE);
  xgr_cel_program *p;
  xgr_error e;
  assert_int_equal(xgr_cel_compile("[__sessionId] + 1u", (size_t)-1, &o, &p, &e), 0);
  assert_int_equal(xgr_cel_program_nvars(p), 1);
  assert_string_equal(xgr_cel_program_var(p, 0), "__sessionId");
  assert_string_equal(xgr_cel_program_source(p), "__sessionId + 1u");
  xgr_value payload = J("{\"__sessionId\": 5}");
  xgr_cel_vars l_pay = xgr_cel_vars_map(payload, NULL);
  xgr_cel_vars l_ctx = xgr_cel_vars_fn(ctx_lookup, NULL, &l_pay);
  xgr_value r;
  assert_int_equal(xgr_cel_eval(p, &l_ctx, &r, &e), XGR_CEL_OK);
  assert_true(r.kind == XGR_VUINT && r.as.u == 78);
  assert_int_equal(xgr_cel_eval(p, &l_pay, &r, &e), XGR_CEL_ERROR); /* int + uint */
  xgr_cel_program_free(p);
  xgr_value_release(payload);
}

/* ---- threads ------------------------------------------------------------------------------ */

typedef struct targ {
  const xgr_cel_program *p;
  xgr_value vars;
  long ok;
} targ;

static void *worker(void *a) {
  targ *t = a;
  xgr_cel_vars lv = xgr_cel_vars_map(t->vars, NULL);
  for (int i = 0; i < 2000; i++) {
    xgr_value r;
    if (xgr_cel_eval(t->p, &lv, &r, NULL) == XGR_CEL_OK && r.kind == XGR_VSTRING) t->ok++;
    xgr_value_release(r);
  }
  return NULL;
}

/* One program evaluated by four threads at once (its constants pinned or not): every result is
 * right. */
static void share_program(bool pin) {
  xgr_cel_options o = xgr_cel_options_default(XGR_CEL_MODE_VALUE);
  xgr_cel_program *p;
  xgr_error e;
  assert_int_equal(xgr_cel_compile("[Names].filter(n, n.startsWith('a')).join('+') + '!'", (size_t)-1, &o, &p, &e), 0);
  if (pin) xgr_cel_program_pin(p);
  xgr_value vars = J("{\"Names\": [\"ann\", \"bob\", \"amy\"]}");
  targ t[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    t[i] = (targ){p, vars, 0};
    pthread_create(&th[i], NULL, worker, &t[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    assert_int_equal(t[i].ok, 2000);
  }
  xgr_value_release(vars);
  xgr_cel_program_free(p);
}

static void test_threads_share_program(void **state) {
  (void)state;
  share_program(false);
}

/* Pinned values ignore retain/release (no shared counter is written) and get their counts back
 * when unpinned: one release then frees them (ASan checks both: no use after free while pinned,
 * no leak after). A part shared by two pinned values is visited once. */
static void test_pin(void **state) {
  (void)state;
  xgr_value shared = xgr_value_cstring("shared");
  xgr_value m = xgr_map_new(2), l = xgr_list_new(2);
  xgr_list_push(l, xgr_value_retain(shared));
  xgr_map_set_str(m, "list", 4, l);
  xgr_map_set_str(m, "s", 1, xgr_value_retain(shared));
  xgr_value_pin(m);
  xgr_value_pin(shared);   /* already pinned through m: nothing changes */
  for (int i = 0; i < 5; i++) xgr_value_release(m);   /* ignored while pinned */
  for (int i = 0; i < 3; i++) xgr_value_release(shared);
  xgr_value got;
  assert_true(xgr_map_get_str(m, "s", 1, &got));
  assert_string_equal(xgr_value_str(got, NULL), "shared");
  xgr_value c = xgr_map_copy(m);   /* an ordinary map borrowing the pinned parts: */
  xgr_value_release(c);            /* gone before they are unpinned (the contract) */
  xgr_value_unpin(m);
  xgr_value_release(m);            /* frees m and its list; `shared` keeps the test's reference */
  assert_string_equal(xgr_value_str(shared, NULL), "shared");
  xgr_value_release(shared);       /* the test's own reference: freed now */
}

/* Setting an existing key keeps the new key object (equal content): maps copied from one shared
 * map stop sharing its keys once they are written. */
static void test_map_set_keeps_new_key(void **state) {
  (void)state;
  xgr_value m = xgr_map_new(2);
  xgr_map_set_str(m, "a", 1, xgr_value_int(1));
  xgr_value k2 = xgr_value_cstring("a");
  xgr_map_set(m, xgr_value_retain(k2), xgr_value_int(2));
  xgr_value k, v;
  xgr_map_entry(m, 0, &k, &v);
  assert_true(k.as.s == k2.as.s);
  assert_int_equal(v.as.i, 2);
  assert_int_equal(xgr_map_size(m), 1);
  xgr_value_release(k2);
  xgr_value_release(m);
}

/* A program with pinned constants evaluated on four threads at once: every result is right, and
 * results that are constants stay valid while the program lives. */
static void test_threads_share_pinned_program(void **state) {
  (void)state;
  share_program(true);
  xgr_cel_options o = xgr_cel_options_default(XGR_CEL_MODE_VALUE);
  xgr_error e;
  xgr_cel_program *q;
  assert_int_equal(xgr_cel_compile("'a constant'", (size_t)-1, &o, &q, &e), 0);
  xgr_cel_program_pin(q);
  xgr_cel_vars none = xgr_cel_vars_map(xgr_value_null(), NULL);
  xgr_value r1, r2;
  assert_int_equal(xgr_cel_eval(q, &none, &r1, NULL), XGR_CEL_OK);
  assert_int_equal(xgr_cel_eval(q, &none, &r2, NULL), XGR_CEL_OK);
  xgr_value_release(r1);
  assert_string_equal(xgr_value_str(r2, NULL), "a constant");
  xgr_value_release(r2);
  xgr_cel_program_free(q);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_pin),
    cmocka_unit_test(test_map_set_keeps_new_key),
    cmocka_unit_test(test_threads_share_pinned_program),
    cmocka_unit_test(test_json_exact),
    cmocka_unit_test(test_json_errors_and_flags),
    cmocka_unit_test(test_map_order_and_keys),
    cmocka_unit_test(test_render),
    cmocka_unit_test(test_list_cap_cached),
    cmocka_unit_test(test_classify),
    cmocka_unit_test(test_rewrite),
    cmocka_unit_test(test_templates),
    cmocka_unit_test(test_numeric_helpers),
    cmocka_unit_test(test_distance_helpers),
    cmocka_unit_test(test_list_helpers),
    cmocka_unit_test(test_quorum_consensus),
    cmocka_unit_test(test_misc_helpers),
    cmocka_unit_test(test_cel_semantics),
    cmocka_unit_test(test_parse_errors),
    cmocka_unit_test(test_caps),
    cmocka_unit_test(test_missing),
    cmocka_unit_test(test_vars_layers),
    cmocka_unit_test(test_threads_share_program),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
