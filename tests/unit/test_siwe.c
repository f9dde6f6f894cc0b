/* test_siwe.c — Sign-In with Ethereum messages (xgr/siwe.h): RFC 3339 times, the EIP-4361 layout
 * parsed with and without a statement, built and parsed back, refusals naming the field, and a
 * message signed with a key and verified (the domain, the chain id, the times, the signer). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "xgr/siwe.h"

static void test_times(void **state) {
  (void)state;
  int64_t ms;
  assert_int_equal(xgr_siwe_parse_time("2026-11-29T11:20:00Z", &ms), 0);
  assert_int_equal(ms, 1795951200000LL);
  assert_int_equal(xgr_siwe_parse_time("2026-11-29T11:20:00.250Z", &ms), 0);
  assert_int_equal(ms, 1795951200250LL);
  assert_int_equal(xgr_siwe_parse_time("2026-11-29T12:20:00+01:00", &ms), 0);
  assert_int_equal(ms, 1795951200000LL);
  assert_int_equal(xgr_siwe_parse_time("2026-11-29 11:20:00Z", &ms), -1);
  assert_int_equal(xgr_siwe_parse_time("2026-11-29T11:20:00", &ms), -1);
  assert_int_equal(xgr_siwe_parse_time("2026-13-29T11:20:00Z", &ms), -1);
  char t[32];
  xgr_siwe_time(1795951200250LL, t);
  assert_string_equal(t, "2026-11-29T11:20:00.250Z");
}

static void test_parse(void **state) {
  (void)state;
  xgr_siwe m;
  xgr_error e;
  const char *plain = "127.0.0.1:8729 wants you to sign in with your Ethereum account:\n"
                      "0x2c7536E3605D9C16a7a3D7b1898e529396a65c23\n\n"
                      "URI: http://127.0.0.1:8729/ui/\nVersion: 1\nChain ID: 1887\nNonce: abcdef0123456789\n"
                      "Issued At: 2026-11-29T11:20:00Z";
  assert_int_equal(xgr_siwe_parse(plain, &m, &e), 0);
  assert_string_equal(m.domain, "127.0.0.1:8729");
  assert_string_equal(m.statement, "");
  assert_int_equal(m.chain_id, 1887);
  assert_string_equal(m.nonce, "abcdef0123456789");
  assert_int_equal(m.expiration, 0);
  /* a scheme before the domain, a statement, resources */
  const char *full = "https://xgr.example.org wants you to sign in with your Ethereum account:\n"
                     "0x2c7536E3605D9C16a7a3D7b1898e529396a65c23\n\nHello.\n\n"
                     "URI: https://xgr.example.org/ui/\nVersion: 1\nChain ID: 1\nNonce: abcdef0123456789\n"
                     "Issued At: 2026-11-29T11:20:00Z\nExpiration Time: 2026-11-29T11:25:00Z\n"
                     "Resources:\n- https://a\n- https://b";
  assert_int_equal(xgr_siwe_parse(full, &m, &e), 0);
  assert_string_equal(m.domain, "xgr.example.org");
  assert_string_equal(m.statement, "Hello.");
  assert_int_equal(m.expiration - m.issued_at, 300000);
  /* build and parse back */
  char *b = xgr_siwe_build(&m);
  xgr_siwe m2;
  assert_int_equal(xgr_siwe_parse(b, &m2, &e), 0);
  assert_string_equal(m2.uri, m.uri);
  assert_int_equal(m2.expiration, m.expiration);
  free(b);
  /* refusals name the field */
  assert_int_equal(xgr_siwe_parse("hello", &m, &e), XGR_EPARSE);
  assert_string_equal(e.path, "message");
  /* one field wrong, after the same first lines; the path the refusal names (NULL: not checked) */
  static const char head[] = "a wants you to sign in with your Ethereum account:\n"
                             "0x2c7536E3605D9C16a7a3D7b1898e529396a65c23\n\n";
  static const struct {
    const char *rest, *path;
  } bad[] = {
      {"URI: http://a/\nVersion: 1\nChain ID: 1\nNonce: short\nIssued At: 2026-11-29T11:20:00Z", "message.nonce"},
      {"Version: 1\nURI: http://a/\nChain ID: 1\nNonce: abcdef0123456789\nIssued At: 2026-11-29T11:20:00Z", NULL},
      {"URI: http://a/\nVersion: 1\nNonce: abcdef0123456789\nIssued At: 2026-11-29T11:20:00Z", "message.chainId"},
      /* fields that would not build back the same (fuzz_siwe found an empty Version and URI
         accepted, then built again as "1") */
      {"URI: http://a/\nVersion: \nChain ID: 1\nNonce: abcdef0123456789\nIssued At: 2026-11-29T11:20:00Z",
       "message.version"},
      {"URI: \nVersion: 1\nChain ID: 1\nNonce: abcdef0123456789\nIssued At: 2026-11-29T11:20:00Z", "message.uri"},
      {"URI: http://a/\nVersion: 1\nChain ID: 99999999999999999999999\nNonce: abcdef0123456789\n"
       "Issued At: 2026-11-29T11:20:00Z",
       "message.chainId"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s%s", head, bad[k].rest);
    assert_int_equal(xgr_siwe_parse(msg, &m, &e), XGR_EPARSE);
    if (bad[k].path) assert_string_equal(e.path, bad[k].path);
  }
}

static void test_sign_verify(void **state) {
  (void)state;
  xgr_secp *secp = xgr_secp_new();
  assert_non_null(secp);
  uint8_t key[32], addr[20];
  xgr_error e;
  assert_int_equal(xgr_hex_decode("0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318", key, 32), 0);
  assert_int_equal(xgr_secp_address(secp, key, addr, &e), 0);
  xgr_siwe m = {.domain = "127.0.0.1:8729", .uri = "http://127.0.0.1:8729/ui/", .version = "1", .chain_id = 1887,
                .nonce = "abcdef0123456789", .issued_at = 1795951200000LL, .expiration = 1795951500000LL};
  xgr_addr_hex_checksum(addr, m.address);
  char *msg = xgr_siwe_build(&m), sig[133];
  assert_int_equal(xgr_siwe_sign(secp, key, msg, sig, &e), 0);
  xgr_siwe out;
  xgr_siwe_expect x = {.domain = "127.0.0.1:8729", .chain_id = 1887, .now_ms = 1795951260000LL, .max_age_ms = 300000};
  assert_int_equal(xgr_siwe_verify(secp, msg, sig, &x, &out, &e), 0);
  assert_string_equal(out.address, "0x2c7536e3605d9c16a7a3d7b1898e529396a65c23");
  x.domain = "localhost:8729";
  assert_int_equal(xgr_siwe_verify(secp, msg, sig, &x, &out, &e), XGR_EPERM);
  assert_string_equal(e.path, "message.domain");
  x.domain = "127.0.0.1:8729";
  x.chain_id = 1;
  assert_int_equal(xgr_siwe_verify(secp, msg, sig, &x, &out, &e), XGR_EPERM);
  assert_string_equal(e.path, "message.chainId");
  x.chain_id = 1887;
  x.now_ms = 1795951500000LL;   /* the expiration */
  assert_int_equal(xgr_siwe_verify(secp, msg, sig, &x, &out, &e), XGR_EPERM);
  assert_string_equal(e.path, "message.expirationTime");
  x.now_ms = 1795951260000LL;
  sig[10] = sig[10] == 'a' ? 'b' : 'a';   /* another signature: another signer, or none */
  assert_int_equal(xgr_siwe_verify(secp, msg, sig, &x, &out, &e), XGR_EPERM);
  assert_string_equal(e.path, "signature");
  free(msg);
  xgr_secp_free(secp);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_times), cmocka_unit_test(test_parse),
                                     cmocka_unit_test(test_sign_verify)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
