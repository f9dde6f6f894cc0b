/* test_xrc_types.c — every XRC type cast of spec §10: the accepted forms, their canonical result,
 * and the rejections (with the message naming the value and the expected form). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "xgr/xrc_types.h"

static xgr_value J(const char *json) {
  xgr_value v;
  xgr_error e;
  assert_int_equal(xgr_value_from_json_text(json, strlen(json), 0, &v, &e), 0);
  return v;
}

/* Cast JSON text `in` to t and compare the JSON text of the result with `want`. */
static void ok(xgr_xrc_type t, const char *in, const char *want) {
  xgr_value v = J(in), out;
  xgr_error e;
  int rc = xgr_xrc_cast(t, v, &out, &e);
  if (rc) fprintf(stderr, "%s <- %s: %s\n", xgr_xrc_type_name(t), in, e.message);
  assert_int_equal(rc, 0);
  char *txt = xgr_value_to_json_text(out, 0, NULL);
  if (strcmp(txt, want)) fprintf(stderr, "%s <- %s: got %s want %s\n", xgr_xrc_type_name(t), in, txt, want);
  assert_string_equal(txt, want);
  free(txt);
  xgr_value_release(out);
  xgr_value_release(v);
}

static void bad(xgr_xrc_type t, const char *in, const char *needle) {
  xgr_value v = J(in), out;
  xgr_error e;
  xgr_error_clear(&e);
  int rc = xgr_xrc_cast(t, v, &out, &e);
  if (rc == 0) fprintf(stderr, "%s <- %s: accepted\n", xgr_xrc_type_name(t), in);
  assert_int_equal(rc, XGR_EINVAL);
  assert_int_equal(out.kind, XGR_VNULL);
  assert_non_null(strstr(e.message, xgr_xrc_type_name(t)));
  if (needle && !strstr(e.message, needle)) fprintf(stderr, "message: %s (want %s)\n", e.message, needle);
  if (needle) assert_non_null(strstr(e.message, needle));
  xgr_value_release(v);
}

static void test_names(void **s) {
  (void)s;
  xgr_xrc_type t;
  int n = 0;
  for (int i = 0; i < XGR_XRC_TYPE_COUNT_; i++) {
    assert_int_equal(xgr_xrc_type_parse(xgr_xrc_type_name((xgr_xrc_type)i), &t), 0);
    assert_int_equal(t, i);
    n++;
  }
  assert_int_equal(n, 14);
  assert_int_equal(xgr_xrc_type_parse("int", &t), XGR_ESCHEMA);
  assert_int_equal(xgr_xrc_type_parse("Int64", &t), XGR_ESCHEMA);
}

static void test_string(void **s) {
  (void)s;
  ok(XGR_XRC_STRING, "\"héllo\"", "\"héllo\"");
  ok(XGR_XRC_STRING, "12", "\"12\"");
  ok(XGR_XRC_STRING, "1.5", "\"1.5\"");
  ok(XGR_XRC_STRING, "true", "\"true\"");
  bad(XGR_XRC_STRING, "null", "null");
  bad(XGR_XRC_STRING, "[1]", NULL);
  bad(XGR_XRC_STRING, "{}", NULL);
}

static void test_bool(void **s) {
  (void)s;
  ok(XGR_XRC_BOOL, "true", "true");
  ok(XGR_XRC_BOOL, "\"false\"", "false");
  ok(XGR_XRC_BOOL, "0", "false");
  ok(XGR_XRC_BOOL, "1", "true");
  ok(XGR_XRC_BOOL, "-3", "true");
  ok(XGR_XRC_BOOL, "0.0", "false");
  bad(XGR_XRC_BOOL, "\"yes\"", "\"yes\"");
  bad(XGR_XRC_BOOL, "\"TRUE\"", NULL);
  bad(XGR_XRC_BOOL, "null", NULL);
}

static void test_int64(void **s) {
  (void)s;
  ok(XGR_XRC_INT64, "42", "42");
  ok(XGR_XRC_INT64, "-42", "-42");
  ok(XGR_XRC_INT64, "42.0", "42");
  ok(XGR_XRC_INT64, "\"-17\"", "-17");
  ok(XGR_XRC_INT64, "\"+17\"", "17");
  ok(XGR_XRC_INT64, "9223372036854775807", "9223372036854775807");
  ok(XGR_XRC_INT64, "-9223372036854775808", "-9223372036854775808");
  ok(XGR_XRC_INT64, "\"9223372036854775807\"", "9223372036854775807");
  bad(XGR_XRC_INT64, "9223372036854775808", "out of range");
  bad(XGR_XRC_INT64, "\"-9223372036854775809\"", "out of range");
  bad(XGR_XRC_INT64, "42.5", "integer");
  bad(XGR_XRC_INT64, "\"42.0\"", NULL);
  bad(XGR_XRC_INT64, "\"abc\"", "\"abc\"");
  bad(XGR_XRC_INT64, "\" 1\"", NULL);
  bad(XGR_XRC_INT64, "true", NULL);
  bad(XGR_XRC_INT64, "1e300", "out of range");
}

static void test_uint64_and_time(void **s) {
  (void)s;
  xgr_xrc_type ts[] = {XGR_XRC_UINT64, XGR_XRC_TIMESTAMP_MS, XGR_XRC_DURATION_MS};
  for (int i = 0; i < 3; i++) {
    ok(ts[i], "0", "0");
    ok(ts[i], "18446744073709551615", "18446744073709551615");
    ok(ts[i], "\"1700000000000\"", "1700000000000");
    ok(ts[i], "3.0", "3");
    bad(ts[i], "18446744073709551616", "out of range");
    bad(ts[i], "-1", "out of range");
    bad(ts[i], "\"-1\"", "out of range");
    bad(ts[i], "1.5", NULL);
    bad(ts[i], "\"0x10\"", NULL);
    bad(ts[i], "[]", NULL);
  }
}

static void test_256(void **s) {
  (void)s;
  const char *max_u = "115792089237316195423570985008687907853269984665640564039457584007913129639935";
  const char *over_u = "115792089237316195423570985008687907853269984665640564039457584007913129639936";
  char in[128], want[128];
  snprintf(in, sizeof in, "%s", max_u);
  snprintf(want, sizeof want, "\"%s\"", max_u);
  ok(XGR_XRC_UINT256, in, want);
  snprintf(in, sizeof in, "\"%s\"", max_u);
  ok(XGR_XRC_UINT256, in, want);
  ok(XGR_XRC_UINT256, "0", "\"0\"");
  ok(XGR_XRC_UINT256, "\"0xff\"", "\"255\"");
  ok(XGR_XRC_UINT256, "1e3", "\"1000\"");
  bad(XGR_XRC_UINT256, over_u, "out of range");
  bad(XGR_XRC_UINT256, "-1", "out of range");
  bad(XGR_XRC_UINT256, "\"12abc\"", NULL);
  bad(XGR_XRC_UINT256, "1.5", NULL);
  bad(XGR_XRC_UINT256, "true", NULL);
  const char *max_i = "57896044618658097711785492504343953926634992332820282019728792003956564819967";
  const char *min_i = "-57896044618658097711785492504343953926634992332820282019728792003956564819968";
  snprintf(in, sizeof in, "\"%s\"", max_i);
  snprintf(want, sizeof want, "\"%s\"", max_i);
  ok(XGR_XRC_INT256, in, want);
  snprintf(in, sizeof in, "\"%s\"", min_i);
  snprintf(want, sizeof want, "\"%s\"", min_i);
  ok(XGR_XRC_INT256, in, want);
  ok(XGR_XRC_INT256, "-5", "\"-5\"");
  bad(XGR_XRC_INT256, "\"57896044618658097711785492504343953926634992332820282019728792003956564819968\"",
      "out of range");
  bad(XGR_XRC_INT256, "\"-57896044618658097711785492504343953926634992332820282019728792003956564819969\"",
      "out of range");
  /* the result is a 256-bit integer value */
  xgr_value v = J("\"123\""), out;
  assert_int_equal(xgr_xrc_cast(XGR_XRC_INT256, v, &out, NULL), 0);
  assert_int_equal(out.kind, XGR_VBIGINT);
  assert_true(out.flags & XGR_VF_SIGNED);
  xgr_value again;
  assert_int_equal(xgr_xrc_cast(XGR_XRC_INT256, out, &again, NULL), 0);
  assert_ptr_equal(again.as.n, out.as.n);  /* canonical: returned as is */
  xgr_value_release(again);
  xgr_value_release(out);
  xgr_value_release(v);
}

static void test_double(void **s) {
  (void)s;
  ok(XGR_XRC_DOUBLE, "1.5", "1.5");
  ok(XGR_XRC_DOUBLE, "2", "2.0");
  ok(XGR_XRC_DOUBLE, "\"65000.12\"", "65000.12");
  ok(XGR_XRC_DOUBLE, "\"-1e3\"", "-1000.0");
  ok(XGR_XRC_DOUBLE, "\".5\"", "0.5");
  bad(XGR_XRC_DOUBLE, "\"1e999\"", "out of range");
  bad(XGR_XRC_DOUBLE, "\"NaN\"", NULL);
  bad(XGR_XRC_DOUBLE, "\"inf\"", NULL);
  bad(XGR_XRC_DOUBLE, "\"0x10\"", NULL);
  bad(XGR_XRC_DOUBLE, "\"12 \"", NULL);
  bad(XGR_XRC_DOUBLE, "false", NULL);
}

static void test_decimal(void **s) {
  (void)s;
  ok(XGR_XRC_DECIMAL, "\"12.50\"", "\"12.50\"");
  ok(XGR_XRC_DECIMAL, "\"-0.000001\"", "\"-0.000001\"");
  ok(XGR_XRC_DECIMAL, "7", "\"7\"");
  ok(XGR_XRC_DECIMAL, "0.1", "\"0.1\"");
  bad(XGR_XRC_DECIMAL, "\"1,5\"", "\"1,5\"");
  bad(XGR_XRC_DECIMAL, "\"\"", NULL);
  bad(XGR_XRC_DECIMAL, "true", NULL);
}

static void test_uuid(void **s) {
  (void)s;
  ok(XGR_XRC_UUID, "\"123e4567-e89b-12d3-a456-426614174000\"", "\"123e4567-e89b-12d3-a456-426614174000\"");
  ok(XGR_XRC_UUID, "\"123E4567-E89B-12D3-A456-426614174000\"", "\"123e4567-e89b-12d3-a456-426614174000\"");
  bad(XGR_XRC_UUID, "\"123e4567e89b12d3a456426614174000\"", "canonical UUID");
  bad(XGR_XRC_UUID, "\"{123e4567-e89b-12d3-a456-426614174000}\"", NULL);
  bad(XGR_XRC_UUID, "\"123e4567-e89b-12d3-a456-42661417400g\"", NULL);
  bad(XGR_XRC_UUID, "5", NULL);
}

static void test_address(void **s) {
  (void)s;
  ok(XGR_XRC_ADDRESS, "\"0x1f98431c8ad98523631ae4a59f267346ea31f984\"", "\"0x1f98431c8ad98523631ae4a59f267346ea31f984\"");
  ok(XGR_XRC_ADDRESS, "\"0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48\"", "\"0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48\"");
  bad(XGR_XRC_ADDRESS, "\"0x1f98431c8ad98523631ae4a59f267346ea31f98\"", "40 hex");
  bad(XGR_XRC_ADDRESS, "\"1f98431c8ad98523631ae4a59f267346ea31f984aa\"", NULL);
  bad(XGR_XRC_ADDRESS, "\"0x1f98431c8ad98523631ae4a59f267346ea31f98z\"", NULL);
  bad(XGR_XRC_ADDRESS, "\"Token=0x1f98431c8ad98523631ae4a59f267346ea31f984\"", NULL);
  bad(XGR_XRC_ADDRESS, "12", NULL);
}

static void test_bytes(void **s) {
  (void)s;
  ok(XGR_XRC_BYTES, "\"0x\"", "\"0x\"");
  ok(XGR_XRC_BYTES, "\"0xDEADbeef\"", "\"0xdeadbeef\"");
  ok(XGR_XRC_BYTES, "\"0XAB\"", "\"0xab\"");
  bad(XGR_XRC_BYTES, "\"0xabc\"", "even number");
  bad(XGR_XRC_BYTES, "\"0xzz\"", NULL);
  bad(XGR_XRC_BYTES, "\"dead\"", NULL);
  bad(XGR_XRC_BYTES, "1", NULL);
  xgr_value raw = xgr_value_bytes("\x01\xff", 2), out;
  assert_int_equal(xgr_xrc_cast(XGR_XRC_BYTES, raw, &out, NULL), 0);
  assert_string_equal(xgr_value_str(out, NULL), "0x01ff");
  xgr_value_release(out);
  xgr_value_release(raw);
  char b32[80];
  snprintf(b32, sizeof b32, "\"0x%064d\"", 0);
  ok(XGR_XRC_BYTES32, b32, b32);
  snprintf(b32, sizeof b32, "\"0x%062d\"", 0);
  bad(XGR_XRC_BYTES32, b32, "exactly 64");
  snprintf(b32, sizeof b32, "\"0x%066d\"", 0);
  bad(XGR_XRC_BYTES32, b32, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names),  cmocka_unit_test(test_string),  cmocka_unit_test(test_bool),
      cmocka_unit_test(test_int64),  cmocka_unit_test(test_uint64_and_time), cmocka_unit_test(test_256),
      cmocka_unit_test(test_double), cmocka_unit_test(test_decimal), cmocka_unit_test(test_uuid),
      cmocka_unit_test(test_address), cmocka_unit_test(test_bytes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
