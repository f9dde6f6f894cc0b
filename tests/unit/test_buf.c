/* test_buf.c — the growable text buffer of src/util/buf.h: appends, printf beyond the stack
 * buffer, and an empty append from a NULL pointer (an empty ABI value does that; UBSan flagged the
 * memcpy it used to reach); the printf-free pieces (decimals, bounded copies) and the formatters
 * built on them (xgr_pid_format, xgr_bigint_to_dec) write exactly what snprintf writes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>

#include "util/buf.h"
#include "xgr/session.h"
#include "xgr/value.h"

static void test_appends(void **s) {
  (void)s;
  xgr_buf b = {0};
  xgr__buf_put(&b, NULL, 0);
  xgr__buf_puts(&b, "ab");
  xgr__buf_putc(&b, 'c');
  xgr__buf_put(&b, NULL, 0);
  char big[600];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = 0;
  xgr__buf_printf(&b, "%s%d", big, 7);
  size_t len;
  char *out = xgr__buf_finish(&b, &len);
  assert_int_equal(len, 3 + 599 + 1);
  assert_memory_equal(out, "abc", 3);
  assert_int_equal(out[len - 1], '7');
  assert_int_equal(out[len], 0);
  free(out);
}

static void test_empty_finish(void **s) {
  (void)s;
  xgr_buf b = {0};
  xgr__buf_put(&b, NULL, 0);
  size_t len = 1;
  char *out = xgr__buf_finish(&b, &len);
  assert_non_null(out);
  assert_int_equal(len, 0);
  assert_string_equal(out, "");
  free(out);
}

/* Numbers around every power of ten and the ends of the ranges. */
static size_t sample_u64(uint64_t *out) {
  size_t n = 0;
  out[n++] = 0;
  out[n++] = UINT64_MAX;
  out[n++] = UINT64_MAX - 1;
  out[n++] = (uint64_t)INT64_MAX;
  out[n++] = (uint64_t)INT64_MAX + 1;
  for (uint64_t p = 1; p <= UINT64_C(10000000000000000000); p *= 10) {
    out[n++] = p - 1;
    out[n++] = p;
    out[n++] = p + 1;
    if (p == UINT64_C(10000000000000000000)) break;
  }
  return n;
}

static void test_decimals(void **s) {
  (void)s;
  uint64_t v[80];
  size_t nv = sample_u64(v);
  for (size_t i = 0; i < nv; i++) {
    char want[64], got[21];
    size_t k = xgr__u64_dec(got, v[i]);
    got[k] = 0;
    snprintf(want, sizeof want, "%" PRIu64, v[i]);
    assert_string_equal(got, want);
    int64_t sv[] = {(int64_t)v[i], -(int64_t)(v[i] & INT64_MAX), INT64_MIN};
    for (size_t j = 0; j < 3; j++) {
      xgr_buf b = {0};
      xgr__buf_put_i64(&b, sv[j]);
      xgr__buf_put_u64(&b, v[i]);
      char *out = xgr__buf_finish(&b, NULL);
      snprintf(want, sizeof want, "%" PRId64 "%" PRIu64, sv[j], v[i]);
      assert_string_equal(out, want);
      free(out);
    }
  }
}

static void test_copies_and_formatters(void **s) {
  (void)s;
  const char *src[] = {"", "a", "0x8bbe9e3894fa2a5dbcc59e403b8bcdb6b7e1e2c1", "exactly-sixteen!"};
  for (size_t i = 0; i < 4; i++)
    for (size_t cap = 1; cap < 50; cap++) {
      char want[64], got[64];
      memset(want, '#', sizeof want);
      memset(got, '#', sizeof got);
      snprintf(want, cap, "%s", src[i]);
      size_t n = xgr__str_copy(got, cap, src[i]);
      assert_memory_equal(got, want, sizeof got);   /* nothing written past the NUL either */
      assert_int_equal(n, strlen(want));
    }
  uint64_t v[80];
  size_t nv = sample_u64(v);
  for (size_t i = 0; i < nv; i++)
    for (size_t j = 0; j < nv; j += 7)
      for (size_t cap = 0; cap < 44; cap += cap < 4 ? 1 : 13) {
        char want[48], got[48];
        memset(want, '#', sizeof want);
        memset(got, '#', sizeof got);
        snprintf(want, cap, "%" PRIu64 ":%" PRIu64, v[i], v[j]);
        xgr_pid_format(v[i], v[j], got, cap);
        assert_memory_equal(got, want, sizeof got);
      }
  for (size_t i = 0; i < nv; i++)
    for (size_t cap = 1; cap < 24; cap += 3) {
      char want[32], got[32];
      memset(want, '#', sizeof want);
      memset(got, '#', sizeof got);
      int wn = snprintf(want, cap, "%" PRIu64, v[i]);
      assert_int_equal(xgr_bigint_to_dec(xgr_value_uint(v[i]), got, cap), (size_t)wn);
      assert_memory_equal(got, want, sizeof got);
      memset(want, '#', sizeof want);
      memset(got, '#', sizeof got);
      int64_t x = i & 1 ? (int64_t)v[i] : -(int64_t)(v[i] & INT64_MAX);
      wn = snprintf(want, cap, "%" PRId64, x);
      assert_int_equal(xgr_bigint_to_dec(xgr_value_int(x), got, cap), (size_t)wn);
      assert_memory_equal(got, want, sizeof got);
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_appends), cmocka_unit_test(test_empty_finish),
                                     cmocka_unit_test(test_decimals), cmocka_unit_test(test_copies_and_formatters)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
