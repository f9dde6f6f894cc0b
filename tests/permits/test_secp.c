/* test_secp.c — secp256k1 keys and signatures (src/xrc/secp.c): a known key's address, deterministic
 * RFC 6979 signatures that recover to the signer, and the refusals of recovery (bad v, high s,
 * zero r), key files (mode, format) and hex helpers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "xgr/keccak.h"
#include "xgr/secp.h"

/* The key and address of web3.js's documentation (eth.accounts.privateKeyToAccount). */
static const char *KEY_HEX = "0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318";
static const char *ADDR_CHECKSUM = "0x2c7536E3605D9C16a7a3D7b1898e529396a65c23";

static void test_address(void **state) {
  (void)state;
  xgr_secp *s = xgr_secp_new();
  assert_non_null(s);
  uint8_t key[32], addr[20];
  assert_int_equal(xgr_hex_decode(KEY_HEX, key, 32), 0);
  xgr_error e;
  assert_int_equal(xgr_secp_address(s, key, addr, &e), 0);
  char hex[43];
  xgr_addr_hex_checksum(addr, hex);
  assert_string_equal(hex, ADDR_CHECKSUM);
  xgr_addr_hex(addr, hex);
  assert_string_equal(hex, "0x2c7536e3605d9c16a7a3d7b1898e529396a65c23");
  xgr_secp_free(s);
}

/* n - s for a big-endian 32-byte s. */
static void negate_s(uint8_t s[32]) {
  static const uint8_t N[32] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                0xff, 0xff, 0xff, 0xff, 0xfe, 0xba, 0xae, 0xdc, 0xe6, 0xaf, 0x48,
                                0xa0, 0x3b, 0xbf, 0xd2, 0x5e, 0x8c, 0xd0, 0x36, 0x41, 0x41};
  int borrow = 0;
  for (int i = 31; i >= 0; i--) {
    int d = N[i] - s[i] - borrow;
    borrow = d < 0;
    s[i] = (uint8_t)(d + (borrow ? 256 : 0));
  }
}

static void test_sign_recover(void **state) {
  (void)state;
  xgr_secp *s = xgr_secp_new();
  uint8_t key[32], addr[20], got[20], digest[32], sig[65], sig2[65];
  xgr_error e;
  for (int round = 0; round < 50; round++) {
    assert_int_equal(xgr_secp_key_generate(s, key, &e), 0);
    assert_int_equal(xgr_secp_address(s, key, addr, &e), 0);
    xgr_keccak256(&round, sizeof round, digest);
    assert_int_equal(xgr_secp_sign(s, key, digest, sig, &e), 0);
    assert_true(sig[64] == 27 || sig[64] == 28);
    assert_true(sig[32] < 0x80); /* low s */
    assert_int_equal(xgr_secp_sign(s, key, digest, sig2, &e), 0);
    assert_memory_equal(sig, sig2, 65); /* RFC 6979: deterministic */
    assert_int_equal(xgr_secp_recover(s, digest, sig, got, &e), 0);
    assert_memory_equal(addr, got, 20);
    /* v as 0/1 is the same signature */
    memcpy(sig2, sig, 65);
    sig2[64] = (uint8_t)(sig[64] - 27);
    assert_int_equal(xgr_secp_recover(s, digest, sig2, got, &e), 0);
    assert_memory_equal(addr, got, 20);
    /* other v values are refused */
    for (int v = 0; v < 256; v++) {
      if (v == 0 || v == 1 || v == 27 || v == 28) continue;
      sig2[64] = (uint8_t)v;
      assert_int_equal(xgr_secp_recover(s, digest, sig2, got, &e), XGR_EPERM);
      assert_non_null(strstr(e.message, "bad v"));
    }
    /* the high-s twin (n - s, v flipped) recovers the same key in libsecp256k1 but is refused */
    memcpy(sig2, sig, 65);
    negate_s(sig2 + 32);
    sig2[64] = (uint8_t)(sig[64] == 27 ? 28 : 27);
    assert_int_equal(xgr_secp_recover(s, digest, sig2, got, &e), XGR_EPERM);
    assert_non_null(strstr(e.message, "high s"));
    /* another digest recovers another address */
    digest[0] ^= 1;
    assert_int_equal(xgr_secp_recover(s, digest, sig, got, &e), 0);
    assert_memory_not_equal(addr, got, 20);
  }
  memset(sig, 0, 32);
  sig[64] = 27;
  assert_int_equal(xgr_secp_recover(s, digest, sig, got, &e), XGR_EPERM);
  memset(key, 0, 32);
  assert_int_equal(xgr_secp_sign(s, key, digest, sig, &e), XGR_EINVAL);
  memset(key, 0xff, 32);
  assert_int_equal(xgr_secp_address(s, key, addr, &e), XGR_EINVAL);
  xgr_secp_free(s);
}

static void test_key_files(void **state) {
  (void)state;
  xgr_secp *s = xgr_secp_new();
  char dir[] = "/tmp/xgr-secp-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[128];
  snprintf(path, sizeof path, "%s/key", dir);
  uint8_t key[32], back[32];
  xgr_error e;
  assert_int_equal(xgr_secp_key_generate(s, key, &e), 0);
  assert_int_equal(xgr_secp_key_save(path, key, &e), 0);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  assert_int_equal(xgr_secp_key_load(s, path, back, &e), 0);
  assert_memory_equal(key, back, 32);
  assert_int_equal(xgr_secp_key_save(path, key, &e), XGR_EIO); /* never replaces */
  chmod(path, 0640);
  assert_int_equal(xgr_secp_key_load(s, path, back, &e), XGR_EPERM);
  assert_non_null(strstr(e.message, "chmod 600"));
  chmod(path, 0604);
  assert_int_equal(xgr_secp_key_load(s, path, back, &e), XGR_EPERM);
  unlink(path);
  /* without 0x and with white space */
  FILE *f = fopen(path, "w");
  fprintf(f, "  %s\n\n", KEY_HEX + 2);
  fclose(f);
  chmod(path, 0600);
  assert_int_equal(xgr_secp_key_load(s, path, back, &e), 0);
  uint8_t want[32];
  xgr_hex_decode(KEY_HEX, want, 32);
  assert_memory_equal(want, back, 32);
  f = fopen(path, "w");
  fprintf(f, "%s00\n", KEY_HEX);
  fclose(f);
  assert_int_equal(xgr_secp_key_load(s, path, back, &e), XGR_EPARSE);
  f = fopen(path, "w");
  fprintf(f, "0x%064d\n", 0);
  fclose(f);
  assert_int_equal(xgr_secp_key_load(s, path, back, &e), XGR_EINVAL);
  unlink(path);
  assert_int_equal(xgr_secp_key_load(s, path, back, &e), XGR_EIO);
  rmdir(dir);
  xgr_secp_free(s);
}

static void test_hex(void **state) {
  (void)state;
  uint8_t b[2];
  assert_int_equal(xgr_hex_decode("0xAbCd", b, 2), 0);
  assert_int_equal(b[0], 0xab);
  assert_int_equal(b[1], 0xcd);
  assert_int_equal(xgr_hex_decode("abcd", b, 2), -1);
  assert_int_equal(xgr_hex_decode("0xabc", b, 2), -1);
  assert_int_equal(xgr_hex_decode("0xabcde", b, 2), -1);
  assert_int_equal(xgr_hex_decode("0xabcg", b, 2), -1);
  assert_int_equal(xgr_hex_decode(NULL, b, 2), -1);
  char out[7];
  xgr_hex_encode(b, 2, out);
  assert_string_equal(out, "0xabcd");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_address),
      cmocka_unit_test(test_sign_recover),
      cmocka_unit_test(test_key_files),
      cmocka_unit_test(test_hex),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
