/* test_abi.c — ABI signatures, encoding and decoding (src/chain/abi.c): the known vectors of the
 * Solidity ABI specification, round trips, and the decoder's refusal of malformed data. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "xgr/abi.h"
#include "xgr/value.h"

static xgr_value J(const char *json) {
  xgr_value v;
  xgr_error e;
  assert_int_equal(xgr_value_from_json_text(json, strlen(json), 0, &v, &e), 0);
  return v;
}

/* Encode the JSON list `args` as a call of `sig` and compare with the hex (selector included). */
static void check_call(const char *sig, const char *args, const char *hex) {
  xgr_abi_sig *s = NULL;
  xgr_error e;
  int rc = xgr_abi_sig_parse(sig, strlen(sig), &s, &e);
  if (rc) fail_msg("%s: %s", sig, e.message);
  xgr_value a = J(args);
  xgr_value vals[16];
  size_t n = xgr_list_size(a);
  for (size_t i = 0; i < n; i++) vals[i] = xgr_list_get(a, i);
  uint8_t *out;
  size_t len;
  rc = xgr_abi_encode_call(s, vals, n, &out, &len, &e);
  if (rc) fail_msg("%s: %s", sig, e.message);
  char *got = xgr_hex_encode_alloc(out, len);
  assert_string_equal(got, hex);
  /* decode the arguments back and re-encode: same bytes */
  xgr_value dec;
  rc = xgr_abi_decode(s->inputs, out + 4, len - 4, &dec, &e);
  if (rc) fail_msg("%s: decode: %s", sig, e.message);
  assert_int_equal(xgr_list_size(dec), n);
  xgr_value back[16];
  for (size_t i = 0; i < n; i++) back[i] = xgr_list_get(dec, i);
  uint8_t *out2;
  size_t len2;
  assert_int_equal(xgr_abi_encode(s->inputs, back, n, &out2, &len2, &e), 0);
  assert_int_equal(len2, len - 4);
  assert_memory_equal(out2, out + 4, len2);
  free(out2);
  xgr_value_release(dec);
  free(got);
  free(out);
  xgr_value_release(a);
  xgr_abi_sig_free(s);
}

static void test_selectors(void **state) {
  (void)state;
  const char *cases[][2] = {
      {"balanceOf(address)", "70a08231"},
      {"transfer(address,uint256)(bool)", "a9059cbb"},
      {"transfer( address , uint )", "a9059cbb"},
      {"slot0()", "3850c7bd"},
      {"baz(uint32,bool)", "cdcd77c0"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    xgr_abi_sig *s = NULL;
    xgr_error e;
    int rc = xgr_abi_sig_parse(cases[i][0], strlen(cases[i][0]), &s, &e);
    if (rc) fail_msg("%s: %s", cases[i][0], e.message);
    char hex[9];
    snprintf(hex, sizeof hex, "%02x%02x%02x%02x", s->selector[0], s->selector[1], s->selector[2], s->selector[3]);
    if (strcmp(hex, cases[i][1])) fail_msg("%s: selector %s, expected %s (%s)", cases[i][0], hex, cases[i][1], s->canonical);
    xgr_abi_sig_free(s);
  }
  xgr_abi_sig *s = NULL;
  xgr_error e;
  assert_int_equal(xgr_abi_sig_parse("transfer(address,uint256)(bool)", 31, &s, &e), 0);
  assert_string_equal(s->name, "transfer");
  assert_string_equal(s->canonical, "transfer(address,uint256)");
  assert_non_null(s->outputs);
  assert_int_equal(xgr_abi_tuple_size(s->outputs), 1);
  xgr_abi_sig_free(s);
}

static void test_spec_vectors(void **state) {
  (void)state;
  check_call("baz(uint32,bool)", "[69, true]",
             "0xcdcd77c0"
             "0000000000000000000000000000000000000000000000000000000000000045"
             "0000000000000000000000000000000000000000000000000000000000000001");
  check_call("bar(bytes3[2])", "[[\"0x616263\", \"0x646566\"]]",
             "0xfce353f6"
             "6162630000000000000000000000000000000000000000000000000000000000"
             "6465660000000000000000000000000000000000000000000000000000000000");
  check_call("sam(bytes,bool,uint256[])", "[\"0x64617665\", true, [1, 2, 3]]",
             "0xa5643bf2"
             "0000000000000000000000000000000000000000000000000000000000000060"
             "0000000000000000000000000000000000000000000000000000000000000001"
             "00000000000000000000000000000000000000000000000000000000000000a0"
             "0000000000000000000000000000000000000000000000000000000000000004"
             "6461766500000000000000000000000000000000000000000000000000000000"
             "0000000000000000000000000000000000000000000000000000000000000003"
             "0000000000000000000000000000000000000000000000000000000000000001"
             "0000000000000000000000000000000000000000000000000000000000000002"
             "0000000000000000000000000000000000000000000000000000000000000003");
  check_call("f(uint256,uint32[],bytes10,bytes)", "[\"0x123\", [1110, 1929], \"0x31323334353637383930\", \"0x48656c6c6f2c20776f726c6421\"]",
             "0x8be65246"
             "0000000000000000000000000000000000000000000000000000000000000123"
             "0000000000000000000000000000000000000000000000000000000000000080"
             "3132333435363738393000000000000000000000000000000000000000000000"
             "00000000000000000000000000000000000000000000000000000000000000e0"
             "0000000000000000000000000000000000000000000000000000000000000002"
             "0000000000000000000000000000000000000000000000000000000000000456"
             "0000000000000000000000000000000000000000000000000000000000000789"
             "000000000000000000000000000000000000000000000000000000000000000d"
             "48656c6c6f2c20776f726c642100000000000000000000000000000000000000");
  check_call("g(uint256[][],string[])", "[[[1, 2], [3]], [\"one\", \"two\", \"three\"]]",
             "0x2289b18c"
             "0000000000000000000000000000000000000000000000000000000000000040"
             "0000000000000000000000000000000000000000000000000000000000000140"
             "0000000000000000000000000000000000000000000000000000000000000002"
             "0000000000000000000000000000000000000000000000000000000000000040"
             "00000000000000000000000000000000000000000000000000000000000000a0"
             "0000000000000000000000000000000000000000000000000000000000000002"
             "0000000000000000000000000000000000000000000000000000000000000001"
             "0000000000000000000000000000000000000000000000000000000000000002"
             "0000000000000000000000000000000000000000000000000000000000000001"
             "0000000000000000000000000000000000000000000000000000000000000003"
             "0000000000000000000000000000000000000000000000000000000000000003"
             "0000000000000000000000000000000000000000000000000000000000000060"
             "00000000000000000000000000000000000000000000000000000000000000a0"
             "00000000000000000000000000000000000000000000000000000000000000e0"
             "0000000000000000000000000000000000000000000000000000000000000003"
             "6f6e650000000000000000000000000000000000000000000000000000000000"
             "0000000000000000000000000000000000000000000000000000000000000003"
             "74776f0000000000000000000000000000000000000000000000000000000000"
             "0000000000000000000000000000000000000000000000000000000000000005"
             "7468726565000000000000000000000000000000000000000000000000000000");
}

/* Signed integers, addresses, static tuples inline, dynamic tuples by offset. */
static void test_mixed(void **state) {
  (void)state;
  const char *sig = "h(int8,int256,address,(uint8,bool),(string,uint16))";
  xgr_abi_sig *s = NULL;
  xgr_error e;
  assert_int_equal(xgr_abi_sig_parse(sig, strlen(sig), &s, &e), 0);
  assert_string_equal(s->canonical, sig);
  xgr_value a = J("[-1, \"-57896044618658097711785492504343953926634992332820282019728792003956564819968\","
                  " \"0x00000000000000000000000000000000000000aB\", [7, false], [\"x\", 65535]]");
  xgr_value vals[5];
  for (size_t i = 0; i < 5; i++) vals[i] = xgr_list_get(a, i);
  uint8_t *out;
  size_t len;
  assert_int_equal(xgr_abi_encode(s->inputs, vals, 5, &out, &len, &e), 0);
  /* heads: 3 words + 2 words (static tuple inline) + 1 offset; tail: 2 words of tuple head,
   * then the string (length + 1 padded word) */
  assert_int_equal(len, 32 * (6 + 2 + 2));
  for (int i = 0; i < 32; i++) assert_int_equal(out[i], 0xff);            /* -1 */
  assert_int_equal(out[32], 0x80);                                          /* int256 min */
  assert_int_equal(out[64 + 31], 0xab);
  assert_int_equal(out[96 + 31], 7);
  assert_int_equal(out[128 + 31], 0);
  assert_int_equal(out[160 + 31], 0xc0);                                    /* offset 192 */
  xgr_value dec;
  assert_int_equal(xgr_abi_decode(s->inputs, out, len, &dec, &e), 0);
  char *txt = xgr_value_to_json_text(dec, 0, NULL);
  assert_string_equal(txt,
                      "[\"-1\",\"-57896044618658097711785492504343953926634992332820282019728792003956564819968\","
                      "\"0x00000000000000000000000000000000000000ab\",[\"7\",false],[\"x\",\"65535\"]]");
  free(txt);
  xgr_value_release(dec);
  free(out);
  xgr_value_release(a);
  xgr_abi_sig_free(s);
}

static void expect_encode_error(const char *sig, const char *args, const char *needle) {
  xgr_abi_sig *s = NULL;
  xgr_error e;
  assert_int_equal(xgr_abi_sig_parse(sig, strlen(sig), &s, &e), 0);
  xgr_value a = J(args);
  xgr_value vals[16];
  size_t n = xgr_list_size(a);
  for (size_t i = 0; i < n; i++) vals[i] = xgr_list_get(a, i);
  uint8_t *out = NULL;
  size_t len;
  assert_int_not_equal(xgr_abi_encode_call(s, vals, n, &out, &len, &e), 0);
  assert_null(out);
  if (!strstr(e.message, needle)) fail_msg("%s %s: message \"%s\" lacks \"%s\"", sig, args, e.message, needle);
  xgr_value_release(a);
  xgr_abi_sig_free(s);
}

static void test_encode_errors(void **state) {
  (void)state;
  expect_encode_error("f(uint8)", "[256]", "out of range");
  expect_encode_error("f(int8)", "[-129]", "out of range");
  expect_encode_error("f(uint256)", "[-1]", "out of range");
  expect_encode_error("f(uint256)", "[\"abc\"]", "expected an integer");
  expect_encode_error("f(address)", "[\"0x12\"]", "40 hex");
  expect_encode_error("f(bool)", "[1]", "expected a bool");
  expect_encode_error("f(bytes2)", "[\"0x010203\"]", "wrong length");
  expect_encode_error("f(uint8[2])", "[[1]]", "that length");
  expect_encode_error("f(uint8,uint8)", "[1]", "1 given");
  expect_encode_error("f((uint8,string)[])", "[[[1, \"a\"], [2, 3]]]", "[0][1][1]");
}

static void expect_parse_error(const char *sig, int code) {
  xgr_abi_sig *s = NULL;
  xgr_error e;
  int rc = xgr_abi_sig_parse(sig, strlen(sig), &s, &e);
  if (rc != code) fail_msg("%s: rc %d (%s), expected %d", sig, rc, e.message, code);
  assert_null(s);
}

static void test_sig_errors(void **state) {
  (void)state;
  expect_parse_error("", XGR_EPARSE);
  expect_parse_error("f", XGR_EPARSE);
  expect_parse_error("f(", XGR_EPARSE);
  expect_parse_error("f(uint7)", XGR_EPARSE);
  expect_parse_error("f(uint264)", XGR_EPARSE);
  expect_parse_error("f(bytes33)", XGR_EPARSE);
  expect_parse_error("f(bytes0)", XGR_EPARSE);
  expect_parse_error("f(address owner)", XGR_EPARSE);
  expect_parse_error("f(uint256)(bool", XGR_EPARSE);
  expect_parse_error("f(uint256)x", XGR_EPARSE);
  expect_parse_error("f(uint256[0])", XGR_ELIMIT);
  expect_parse_error("f(uint256[4097])", XGR_ELIMIT);
  expect_parse_error("f(uint256[4096][4096][4096])", XGR_ELIMIT);
  expect_parse_error("f(uint[][][][][][][][][][][][][][][][][][])", XGR_ELIMIT);
  expect_parse_error("f((((((((((((((((((uint))))))))))))))))))", XGR_ELIMIT);
}

static void expect_decode_error(const char *types, const char *hex, const char *needle) {
  xgr_abi_type *t = NULL;
  xgr_error e;
  int rc = xgr_abi_type_parse(types, strlen(types), &t, &e);
  if (rc) fail_msg("%s: %s", types, e.message);
  size_t n;
  uint8_t *d = xgr_hex_decode_alloc(hex, strlen(hex), &n);
  assert_non_null(d);
  xgr_value v;
  rc = xgr_abi_decode(t, d, n, &v, &e);
  if (!rc) fail_msg("%s %s: decoded", types, hex);
  assert_int_equal(v.kind, XGR_VNULL);
  if (!strstr(e.message, needle)) fail_msg("%s: message \"%s\" lacks \"%s\"", types, e.message, needle);
  free(d);
  xgr_abi_type_free(t);
}

#define W0 "0000000000000000000000000000000000000000000000000000000000000000"
#define W(x) "00000000000000000000000000000000000000000000000000000000000000" x

static void test_decode_errors(void **state) {
  (void)state;
  expect_decode_error("(uint256)", "", "needs 32 bytes");
  expect_decode_error("(uint256,uint256)", W0, "head needs 32 bytes");
  expect_decode_error("(uint8)", "0000000000000000000000000000000000000000000000000000000000000100", "padded");
  expect_decode_error("(int8)", "00000000000000000000000000000000000000000000000000000000000000ff", "padded");
  expect_decode_error("(bool)", W("02"), "neither 0 nor 1");
  expect_decode_error("(address)", "0100000000000000000000000000000000000000000000000000000000000001", "high bytes");
  expect_decode_error("(bytes1)", "0101000000000000000000000000000000000000000000000000000000000000", "padding");
  expect_decode_error("(string)", W("40"), "offset points outside");
  expect_decode_error("(string)", "ff00000000000000000000000000000000000000000000000000000000000020", "offset");
  expect_decode_error("(string)", W("20") W("21") W0, "length exceeds");
  expect_decode_error("(string)", W("20") "ffffffffffffffff00000000000000000000000000000000000000000000000" "0", "length exceeds");
  expect_decode_error("(uint256[])", W("20") W("02") W0, "array length");
  expect_decode_error("(uint256[])", W("20") "00000000000000000000000000000000000000000000000000ffffffffffffff", "array length");
  expect_decode_error("(string[])", W("20") W("01") W("ff"), "[0][0]");
}

/* Overlapping offsets: every element of an outer array points at the same inner array, so a
 * few KB would decode into n*m values; the budget stops the decoder. */
static void put_word(uint8_t *d, size_t word, uint64_t v) {
  for (int i = 0; i < 8; i++) d[word * 32 + 31 - i] = (uint8_t)(v >> (8 * i));
}

static void test_decode_budget(void **state) {
  (void)state;
  const char *types = "(uint256[][])";
  xgr_abi_type *t = NULL;
  xgr_error e;
  assert_int_equal(xgr_abi_type_parse(types, strlen(types), &t, &e), 0);
  size_t n = 300, m = 300;
  size_t words = 2 + n + 1 + m;
  uint8_t *d = calloc(words, 32);
  put_word(d, 0, 32);                                /* offset of the outer array */
  put_word(d, 1, n);                                 /* its length */
  for (size_t i = 0; i < n; i++) put_word(d, 2 + i, n * 32);  /* all point at the inner array */
  put_word(d, 2 + n, m);
  xgr_value v;
  int rc = xgr_abi_decode(t, d, words * 32, &v, &e);
  assert_int_not_equal(rc, 0);
  if (!strstr(e.message, "values")) fail_msg("%s", e.message);
  /* the same layout with a small n decodes: the budget is not in the way of real data */
  put_word(d, 1, 2);
  put_word(d, 2, 2 * 32);
  put_word(d, 3, 2 * 32);
  put_word(d, 4, 1);
  put_word(d, 5, 9);
  assert_int_equal(xgr_abi_decode(t, d, 6 * 32, &v, &e), 0);
  char *txt = xgr_value_to_json_text(v, 0, NULL);
  assert_string_equal(txt, "[[[\"9\"],[\"9\"]]]");
  free(txt);
  xgr_value_release(v);
  free(d);
  xgr_abi_type_free(t);
}

static void test_slots(void **state) {
  (void)state;
  const char *types = "(uint256,int256,string)";
  xgr_abi_type *t = NULL;
  xgr_error e;
  assert_int_equal(xgr_abi_type_parse(types, strlen(types), &t, &e), 0);
  size_t n;
  uint8_t *d = xgr_hex_decode_alloc(W("05") "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", 128, &n);
  xgr_value v;
  xgr_abi_decode_slots(t, d, n, &v);
  char *txt = xgr_value_to_json_text(v, 0, NULL);
  assert_string_equal(txt, "[\"5\",\"-1\"]");  /* the string slot is out of range */
  free(txt);
  xgr_value_release(v);
  free(d);
  d = xgr_hex_decode_alloc(W("05") W("01") W("ff"), 192, &n);
  xgr_abi_decode_slots(t, d, n, &v);
  txt = xgr_value_to_json_text(v, 0, NULL);
  assert_string_equal(txt, "[\"5\",\"1\",null]");  /* a bad offset: null in its slot */
  free(txt);
  xgr_value_release(v);
  free(d);
  xgr_abi_type_free(t);
}

static void test_revert_reason(void **state) {
  (void)state;
  size_t n;
  uint8_t *d = xgr_hex_decode_alloc("0x08c379a0" W("20") W("0d") "48656c6c6f2c20776f726c642100000000000000000000000000000000000000",
                              2 + 8 + 64 * 3, &n);
  char *r = xgr_abi_revert_reason(d, n);
  assert_string_equal(r, "Hello, world!");
  free(r);
  free(d);
  d = xgr_hex_decode_alloc("0x4e487b71" W("11"), 2 + 8 + 64, &n);
  r = xgr_abi_revert_reason(d, n);
  assert_string_equal(r, "panic 0x11");
  free(r);
  free(d);
  assert_null(xgr_abi_revert_reason((const uint8_t *)"\x01\x02\x03\x04", 4));
  d = xgr_hex_decode_alloc("0x08c379a0" W("20"), 2 + 8 + 64, &n);  /* truncated */
  assert_null(xgr_abi_revert_reason(d, n));
  free(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_selectors),     cmocka_unit_test(test_mixed),
      cmocka_unit_test(test_encode_errors), cmocka_unit_test(test_sig_errors),
      cmocka_unit_test(test_decode_errors), cmocka_unit_test(test_decode_budget),
      cmocka_unit_test(test_slots),         cmocka_unit_test(test_revert_reason),
      cmocka_unit_test(test_spec_vectors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
