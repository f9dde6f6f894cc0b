/* malleate.h — one forgery the permit tests (test_permit.c, test_refusals.c) both try: a permit's
 * signature turned into its high-s twin (s' = n - s, v flipped), which recovers to the same signer
 * but that EIP-2 forbids. Header only: one static function. */
#ifndef XGR_TEST_PERMITS_MALLEATE_H
#define XGR_TEST_PERMITS_MALLEATE_H

#include <jansson.h>
#include <stdint.h>

#include "xgr/secp.h"

/* Replace p.signature (0x + 130 hex digits) with its high-s twin. */
static inline void malleate_high_s(json_t *p) {
  static const uint8_t N[32] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                0xff, 0xff, 0xff, 0xff, 0xfe, 0xba, 0xae, 0xdc, 0xe6, 0xaf, 0x48,
                                0xa0, 0x3b, 0xbf, 0xd2, 0x5e, 0x8c, 0xd0, 0x36, 0x41, 0x41};
  uint8_t b[65];
  xgr_hex_decode(json_string_value(json_object_get(p, "signature")), b, 65);
  int borrow = 0;
  for (int i = 31; i >= 0; i--) {
    int d = N[i] - b[32 + i] - borrow;
    borrow = d < 0;
    b[32 + i] = (uint8_t)(d + (borrow ? 256 : 0));
  }
  b[64] = b[64] == 27 ? 28 : 27;
  char s[140];
  xgr_hex_encode(b, 65, s);
  json_object_set_new(p, "signature", json_string(s));
}

#endif
