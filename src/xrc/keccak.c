/* keccak.c — keccak-256 as Ethereum uses it: sponge with rate 136 bytes, capacity 512 bits,
 * multi-rate padding 0x01 ... 0x80, over nettle's sha3_permute (Keccak-f[1600]).
 * Lanes are little-endian 64-bit words, so bytes are XORed into the state lane by lane. */
#include "xgr/keccak.h"

#include <nettle/sha3.h>
#include <string.h>

#define RATE 136

static void absorb_block(struct sha3_state *st, const uint8_t *block) {
  for (int i = 0; i < RATE / 8; i++) {
    uint64_t lane = 0;
    for (int b = 0; b < 8; b++) lane |= (uint64_t)block[i * 8 + b] << (8 * b);
    st->a[i] ^= lane;
  }
  nettle_sha3_permute(st);
}

void xgr_keccak256(const void *data, size_t len, uint8_t digest[32]) {
  struct sha3_state st;
  memset(&st, 0, sizeof st);
  const uint8_t *p = data;
  while (len >= RATE) {
    absorb_block(&st, p);
    p += RATE;
    len -= RATE;
  }
  uint8_t last[RATE];
  memset(last, 0, sizeof last);
  if (len) memcpy(last, p, len);
  last[len] ^= 0x01;
  last[RATE - 1] ^= 0x80;
  absorb_block(&st, last);
  for (int i = 0; i < 4; i++)
    for (int b = 0; b < 8; b++) digest[i * 8 + b] = (uint8_t)(st.a[i] >> (8 * b));
}

void xgr_keccak256_hex(const void *data, size_t len, char out[67]) {
  static const char hex[] = "0123456789abcdef";
  uint8_t d[32];
  xgr_keccak256(data, len, d);
  out[0] = '0';
  out[1] = 'x';
  for (int i = 0; i < 32; i++) {
    out[2 + 2 * i] = hex[d[i] >> 4];
    out[3 + 2 * i] = hex[d[i] & 15];
  }
  out[66] = '\0';
}
