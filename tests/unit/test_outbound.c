/* test_outbound.c — the outbound address policy (xgr/outbound.h) on addresses alone: each refused
 * class in both families, IPv4 carried in IPv6 (mapped, compatible, NAT64, 6to4) judged as IPv4,
 * public addresses allowed, and allow entries (CIDR with host bits, address, class word, any,
 * bracketed IPv6) with the refusals of bad entries. The connect-time use on real connections is
 * tested in tests/rule/test_rule_http.c and tests/cli/outbound.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <netinet/in.h>

#include "xgr/outbound.h"

/* Whether p allows the address text a; *cls gets the refusing class ("" when allowed). */
static bool allowed(const xgr_outbound_policy *p, const char *a, const char **cls) {
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
  struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
  if (inet_pton(AF_INET, a, &s4->sin_addr) == 1) s4->sin_family = AF_INET;
  else if (inet_pton(AF_INET6, a, &s6->sin6_addr) == 1) s6->sin6_family = AF_INET6;
  else fail_msg("not an address: %s", a);
  char text[64];
  *cls = "";
  return xgr_outbound_allowed(p, (struct sockaddr *)&ss, cls, text, sizeof text);
}

static void test_default(void **st) {
  (void)st;
  static const struct { const char *addr, *cls; } cases[] = {
      {"127.0.0.1", "loopback"}, {"127.255.1.2", "loopback"}, {"::1", "loopback"},
      {"169.254.169.254", "link-local"}, {"fe80::1", "link-local"}, {"febf::1", "link-local"},
      {"10.0.0.1", "private"}, {"172.16.0.1", "private"}, {"172.31.255.255", "private"}, {"192.168.0.1", "private"},
      {"fc00::1", "private"}, {"fd12:3456::1", "private"}, {"fec0::1", "private"},
      {"0.0.0.0", "unspecified"}, {"0.1.2.3", "unspecified"}, {"::", "unspecified"},
      {"100.64.0.1", "cgnat"}, {"100.127.255.254", "cgnat"},
      {"224.0.0.1", "multicast"}, {"239.1.1.1", "multicast"}, {"ff02::1", "multicast"},
      {"240.0.0.1", "reserved"}, {"255.255.255.255", "reserved"},
      /* IPv4 carried in IPv6 */
      {"::ffff:127.0.0.1", "loopback"}, {"::ffff:169.254.169.254", "link-local"}, {"::ffff:10.1.2.3", "private"},
      {"::127.0.0.1", "loopback"}, {"64:ff9b::a9fe:a9fe", "link-local"}, {"2002:7f00:1::", "loopback"},
      {"2002:c0a8:101::1", "private"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *cls;
    if (allowed(NULL, cases[i].addr, &cls)) fail_msg("%s allowed by default", cases[i].addr);
    if (strcmp(cls, cases[i].cls)) fail_msg("%s: class %s, expected %s", cases[i].addr, cls, cases[i].cls);
    assert_false(allowed(xgr_outbound_default(), cases[i].addr, &cls));
  }
  static const char *const public[] = {"8.8.8.8", "1.1.1.1", "172.32.0.1", "172.15.255.255", "100.128.0.1",
                                       "169.253.1.1", "2001:4860:4860::8888", "::ffff:8.8.8.8", "64:ff9b::808:808",
                                       "2002:808:808::1", "223.255.255.255"};
  for (size_t i = 0; i < sizeof public / sizeof public[0]; i++) {
    const char *cls;
    if (!allowed(NULL, public[i], &cls)) fail_msg("%s refused (%s)", public[i], cls);
  }
}

static void test_allow(void **st) {
  (void)st;
  xgr_outbound_policy *p = xgr_outbound_policy_new();
  xgr_error e;
  const char *cls;
  assert_int_equal(xgr_outbound_policy_allow(p, "10.1.2.3/16", &e), 0);   /* host bits are ignored */
  assert_true(allowed(p, "10.1.200.7", &cls));
  assert_true(allowed(p, "::ffff:10.1.0.9", &cls));   /* mapped: the same address */
  assert_false(allowed(p, "10.2.0.1", &cls));
  assert_string_equal(cls, "private");
  assert_int_equal(xgr_outbound_policy_allow(p, "[::1]", &e), 0);
  assert_true(allowed(p, "::1", &cls));
  assert_false(allowed(p, "127.0.0.1", &cls));
  assert_int_equal(xgr_outbound_policy_allow(p, "link-local", &e), 0);
  assert_true(allowed(p, "169.254.169.254", &cls));
  assert_true(allowed(p, "fe80::2", &cls));
  assert_int_equal(xgr_outbound_policy_allow(p, "192.168.7.7", &e), 0);
  assert_true(allowed(p, "192.168.7.7", &cls));
  assert_false(allowed(p, "192.168.7.8", &cls));
  assert_int_equal(xgr_outbound_policy_allow(p, "fd00::/8", &e), 0);
  assert_true(allowed(p, "fd99::1", &cls));
  assert_false(allowed(p, "fc00::1", &cls));
  xgr_outbound_policy_free(p);

  p = xgr_outbound_policy_new();
  assert_int_equal(xgr_outbound_policy_allow(p, "any", &e), 0);
  assert_true(allowed(p, "127.0.0.1", &cls));
  assert_true(allowed(p, "fe80::1", &cls));
  xgr_outbound_policy_free(p);

  p = xgr_outbound_policy_new();
  static const char *const bad[] = {"", "nonsense", "10.0.0.0/33", "::/129", "10.0.0.0/", "10.0.0.0/-1", "300.1.1.1",
                                    "10.0.0.0/8x", "Loopback", "/8"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    if (xgr_outbound_policy_allow(p, bad[i], &e) != XGR_EINVAL) fail_msg("\"%s\" accepted", bad[i]);
    assert_non_null(strstr(e.message, "\""));
  }
  assert_int_equal(xgr_outbound_policy_allow(p, "10.0.0.0/33", &e), XGR_EINVAL);
  assert_string_equal(e.message, "\"10.0.0.0/33\": the prefix length must be 0..32");
  assert_int_equal(xgr_outbound_policy_allow(p, "nonsense", &e), XGR_EINVAL);
  assert_string_equal(e.message, "\"nonsense\": expected a CIDR (10.0.0.0/8, fd00::/8), an address, or one of loopback, "
                                 "link-local, private, cgnat, unspecified, multicast, reserved, any");
  assert_false(allowed(p, "127.0.0.1", &cls));   /* nothing bad was added */
  xgr_outbound_policy_free(p);
  xgr_outbound_policy_free(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_default), cmocka_unit_test(test_allow)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
