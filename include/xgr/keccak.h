/* xgr/keccak.h — Ethereum's keccak-256 (the original Keccak padding 0x01, not SHA3-256's 0x06),
 * built on nettle's exported Keccak-f[1600] permutation. Pure functions, no global state. */
#ifndef XGR_KECCAK_H
#define XGR_KECCAK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* digest = keccak256(data[0..len)). */
void xgr_keccak256(const void *data, size_t len, uint8_t digest[32]);

/* Write "0x" + 64 lowercase hex digits of keccak256(data) and a NUL into out (67 bytes). */
void xgr_keccak256_hex(const void *data, size_t len, char out[67]);

#ifdef __cplusplus
}
#endif
#endif
