/* test_host_guard.c — the HTTP server's Host-header check against DNS rebinding
 * (xgr__rpc_host_allowed, src/rpc/guard.c) and the same-origin check of POSTs (xgr__rpc_same_origin): a loopback listener accepts only loopback names, a
 * listener on one address only that address, one on every address any name; a port in the header
 * must be the listening port; a request without Host (HTTP/1.0) passes. A loopback name is a dotted
 * address in 127/8, the IPv6 loopback or `localhost` — never a DNS name that merely starts with
 * "127.". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "rpc/server_impl.h"

static void test_loopback_listener(void **state) {
  (void)state;
  assert_true(xgr__rpc_host_allowed(NULL, "127.0.0.1", 8729));
  assert_true(xgr__rpc_host_allowed("127.0.0.1:8729", "127.0.0.1", 8729));
  assert_true(xgr__rpc_host_allowed("localhost:8729", "127.0.0.1", 8729));
  assert_true(xgr__rpc_host_allowed("localhost", "127.0.0.1", 8729));
  assert_true(xgr__rpc_host_allowed("[::1]:8729", "127.0.0.1", 8729));
  assert_false(xgr__rpc_host_allowed("evil.example:8729", "127.0.0.1", 8729)); /* DNS rebinding */
  assert_false(xgr__rpc_host_allowed("127.0.0.1:80", "127.0.0.1", 8729));
  assert_false(xgr__rpc_host_allowed("127.0.0.1:", "127.0.0.1", 8729));
  assert_false(xgr__rpc_host_allowed("[::1", "127.0.0.1", 8729));
  assert_false(xgr__rpc_host_allowed("", "127.0.0.1", 8729));
  /* strictly loopback: a name that only starts like an address in 127/8 is a DNS name an attacker
   * can point at 127.0.0.1 (issue 38, finding 2) */
  assert_true(xgr__rpc_host_allowed("127.1.2.3:8729", "127.0.0.1", 8729));
  assert_true(xgr__rpc_host_allowed("[0:0:0:0:0:0:0:1]:8729", "127.0.0.1", 8729));
  assert_false(xgr__rpc_host_allowed("127.attacker.com:8729", "127.0.0.1", 8729));
  assert_false(xgr__rpc_host_allowed("127.attacker.com", "127.0.0.1", 8729));
  assert_false(xgr__rpc_host_allowed("127.0.0.1.attacker.com:8729", "127.0.0.1", 8729));
  assert_false(xgr__rpc_host_allowed("127.0.0.1.:8729", "127.0.0.1", 8729));
  assert_false(xgr__rpc_host_allowed("128.0.0.1:8729", "127.0.0.1", 8729));
  assert_false(xgr__rpc_host_allowed("localhost.attacker.com:8729", "127.0.0.1", 8729));
  assert_false(xgr__rpc_host_allowed("[::2]:8729", "127.0.0.1", 8729));
  /* the same for a listener on another loopback address or on ::1 */
  assert_true(xgr__rpc_host_allowed("localhost:8729", "::1", 8729));
  assert_false(xgr__rpc_host_allowed("127.evil:8729", "::1", 8729));
}

static void test_other_listeners(void **state) {
  (void)state;
  assert_true(xgr__rpc_host_allowed("10.0.0.5:8729", "10.0.0.5", 8729));
  assert_false(xgr__rpc_host_allowed("10.0.0.6:8729", "10.0.0.5", 8729));
  assert_true(xgr__rpc_host_allowed("xgr.example.org", "0.0.0.0", 8729));
}

/* Cross-site POSTs (xgr__rpc_same_origin): a browser's Origin must be this server's; a client that
 * sends neither Origin nor Sec-Fetch-Site (curl, the CLI) is no cross-site vector. */
static void test_same_origin(void **state) {
  (void)state;
  assert_true(xgr__rpc_same_origin(NULL, "127.0.0.1:8729", NULL));
  assert_true(xgr__rpc_same_origin("http://127.0.0.1:8729", "127.0.0.1:8729", "same-origin"));
  assert_true(xgr__rpc_same_origin("https://xgr.example.org", "xgr.example.org", NULL));
  assert_true(xgr__rpc_same_origin(NULL, "127.0.0.1:8729", "none"));
  assert_false(xgr__rpc_same_origin("http://127.0.0.1:9999", "127.0.0.1:8729", NULL));   /* another port */
  assert_false(xgr__rpc_same_origin("http://evil.example", "127.0.0.1:8729", "cross-site"));
  assert_false(xgr__rpc_same_origin(NULL, "127.0.0.1:8729", "same-site"));
  assert_false(xgr__rpc_same_origin("null", "127.0.0.1:8729", NULL));   /* a sandboxed frame, a file: page */
  assert_false(xgr__rpc_same_origin("http://127.0.0.1:8729", NULL, NULL));
  assert_false(xgr__rpc_same_origin("http://127.0.0.1:8729/", "127.0.0.1:8729", NULL));
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_loopback_listener), cmocka_unit_test(test_other_listeners),
                                     cmocka_unit_test(test_same_origin)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
