/* test_json_depth.c — the nesting scanner xgrd runs on every request body before parsing it
 * (xgr_json_check_depth, src/value/json.c): the limit and its path, and a body that ends inside a
 * string right after a backslash (the fuzzer found the scanner reading past such a body); and the
 * fast reader in front of jansson in xgr_json_parse_exact (xgr__json_parse_fast): the tree it
 * builds equals jansson's, keys in order, and what it declines is left to jansson, errors included. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "value/value_impl.h"
#include "xgr/value.h"

/* The scanner on an exact-size heap copy (no NUL after it), so ASan sees any read past the end. */
static int scan(const char *text, size_t max, xgr_error *e) {
  size_t n = strlen(text);
  char *copy = malloc(n ? n : 1);
  memcpy(copy, text, n);
  int rc = xgr_json_check_depth(copy, n, max, e);
  free(copy);
  return rc;
}

static void test_trailing_backslash(void **s) {
  (void)s;
  xgr_error e;
  assert_int_equal(scan("\"ab\\", 8, &e), 0);
  assert_int_equal(scan("{\"k\\", 8, &e), 0);
  assert_int_equal(scan("\"\\", 8, &e), 0);
}

static void test_limit_and_path(void **s) {
  (void)s;
  xgr_error e;
  assert_int_equal(scan("{\"a\":[1,[2]]}", 3, &e), 0);
  assert_int_not_equal(scan("{\"a\":[1,{\"b\":[[]]}]}", 3, &e), 0);
  assert_int_equal(e.code, XGR_ELIMIT);
  assert_string_equal(e.path, "a[1].b");
}

/* Texts the fast reader takes: its tree must be jansson's (values and key order). */
static const char *const FAST[] = {
    "{}", "[]", " \n\t{\"a\" : 1 }\r\n", "[0,-0,-1,123456789012345678,-999999999999999999]",
    "{\"s\":\"h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80\",\"e\":\"\",\"\":null}",
    "[true,false,null,[[[]]],{\"x\":{\"y\":[1,{\"z\":\"w\"}]}}]",
    "{\"z\":1,\"a\":2,\"m\":3}",
    "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"xgr.enqueue\",\"params\":{\"rootPid\":1,\"init\":{\"payload\":{\"x\":0}}}}",
};
/* Texts it declines (valid or not): jansson decides, as before. */
static const char *const DECLINED[] = {
    "", "1", "\"top\"", "null", "{\"a\":\"x\\ny\"}", "{\"a\":\"\\u0041\"}", "[1.5]", "[1e3]", "[1E3]",
    "[1234567890123456789]", "[01]", "[-]", "[+1]", "{\"a\":1,\"a\":2}", "{\"a\":1,}", "[1,]", "[1 2]",
    "{\"a\" 1}", "{a:1}", "[tru]", "[truex]", "[nul]", "{\"a\":1} x", "[\"\xff\"]", "[\"\xc3\"]",
    "[\"\xed\xa0\x80\"]", "[\"a\x01b\"]", "[\"unterminated]", "{\"a\":[1]", "\xef\xbb\xbf{}",
};

static char *heap_copy(const char *t, size_t n) {
  char *c = malloc(n ? n : 1);
  memcpy(c, t, n);
  return c;
}

static void test_fast_reader(void **s) {
  (void)s;
  for (size_t i = 0; i < sizeof FAST / sizeof *FAST; i++) {
    size_t n = strlen(FAST[i]);
    char *t = heap_copy(FAST[i], n);
    json_t *f = xgr__json_parse_fast(t, n), *r = json_loadb(t, n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
    assert_non_null(f);
    assert_non_null(r);
    assert_true(json_equal(f, r));
    char *fs = json_dumps(f, JSON_COMPACT), *rs = json_dumps(r, JSON_COMPACT);
    assert_string_equal(fs, rs);
    free(fs);
    free(rs);
    json_decref(f);
    json_decref(r);
    free(t);
  }
  for (size_t i = 0; i < sizeof DECLINED / sizeof *DECLINED; i++) {
    size_t n = strlen(DECLINED[i]);
    char *t = heap_copy(DECLINED[i], n);
    assert_null(xgr__json_parse_fast(t, n));
    free(t);
  }
  /* declined texts keep jansson's reading: an escape, a big integer (the exact reader), an error */
  json_t *j;
  xgr_error e;
  assert_int_equal(xgr_json_parse_exact("{\"a\":\"x\\ny\"}", 12, &j, &e), 0);
  assert_string_equal(json_string_value(json_object_get(j, "a")), "x\ny");
  json_decref(j);
  assert_int_equal(xgr_json_parse_exact("[123456789012345678901234]", 26, &j, &e), 0);
  xgr_value v;
  assert_true(xgr_json_exact_integer(json_array_get(j, 0), &v));
  xgr_value_release(v);
  json_decref(j);
  assert_int_equal(xgr_json_parse_exact("{\"a\":1,\"a\":2}", 13, &j, &e), XGR_EPARSE);   /* 13 bytes: the text */
  assert_non_null(strstr(e.message, "duplicate object key"));
  assert_int_equal(xgr_json_parse_exact("[1,]", 4, &j, &e), XGR_EPARSE);
  assert_non_null(strstr(e.message, "line 1, column"));
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_trailing_backslash), cmocka_unit_test(test_limit_and_path),
                                     cmocka_unit_test(test_fast_reader)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
