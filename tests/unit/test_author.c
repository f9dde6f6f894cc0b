/* test_author.c — the small helpers behind issue 15's messages: the nearest known key of a typo
 * (util/suggest.h) and the masking of credentials in API URLs (src/rule, reports and history). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "rule/rule_impl.h"
#include "util/suggest.h"

static void test_nearest_key(void **state) {
  (void)state;
  static const char *const k[] = {"payload", "waitSec", "rules", "onValid", "caller", "step"};
  assert_string_equal(xgr__nearest_key("paylod", k, 6), "payload");
  assert_string_equal(xgr__nearest_key("waitsec", k, 6), "waitSec");   /* case does not count */
  assert_string_equal(xgr__nearest_key("rulez", k, 6), "rules");
  assert_string_equal(xgr__nearest_key("stp", k, 6), "step");
  assert_null(xgr__nearest_key("from", k, 6));       /* not a typo of anything */
  assert_null(xgr__nearest_key("x", k, 6));          /* too short to guess */
  assert_null(xgr__nearest_key("", k, 6));
}

static void masked(const char *url, const char *want) {
  char *m = xgr_rule_mask_url(url);
  assert_string_equal(m, want);
  free(m);
}

static void test_mask_url(void **state) {
  (void)state;
  masked("https://api.example.com/v1/price?symbol=ETH", "https://api.example.com/v1/price?symbol=ETH");
  masked("http://user:pw@h.example/p", "http://***@h.example/p");
  masked("http://h.example/p?apikey=S&x=1&token=&sig=a#frag", "http://h.example/p?apikey=***&x=1&token=***&sig=***#frag");
  masked("http://h.example/p?API_KEY=abc&Password=x", "http://h.example/p?API_KEY=***&Password=***");
  masked("http://h.example/a@b?x=1", "http://h.example/a@b?x=1");   /* '@' in the path is not userinfo */
  masked("no-scheme?secret=1", "no-scheme?secret=***");
  masked("", "");
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_nearest_key), cmocka_unit_test(test_mask_url)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
