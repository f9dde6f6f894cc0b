/* xgr/secp.h — secp256k1 keys and Ethereum-style ECDSA signatures over libsecp256k1.
 *
 * What permits (EIP-712) and transaction signing need, and nothing more: sign a 32-byte digest
 * with a private key (RFC 6979 deterministic nonces, low-s normalised, 65 bytes r || s || v with
 * v = 27/28), recover the signer's address from a digest and a 65-byte signature (v in {27, 28}
 * or {0, 1}, anything else refused; high-s refused, as Ethereum's homestead rule says, because
 * libsecp256k1 accepts it on recovery), derive the address of a key (the last 20 bytes of
 * keccak-256 of the uncompressed public key), load a private key from a file that only its owner
 * may read, and make a fresh key from getrandom().
 *
 * A context object (xgr_secp) holds the libsecp256k1 context; the caller creates it once and
 * passes it to every call. After creation it is only read, so one context may be shared by any
 * number of threads. There is no global state.
 */
#ifndef XGR_SECP_H
#define XGR_SECP_H

#include <stddef.h>
#include <stdint.h>

#include "xgr/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xgr_secp xgr_secp;

/* A new context, randomised against side channels with getrandom(). NULL when out of memory or
 * when the system has no randomness. Free with xgr_secp_free. Thread-safe to use once created. */
xgr_secp *xgr_secp_new(void);
void xgr_secp_free(xgr_secp *ctx);   /* NULL is fine */

/* Sign digest with key: sig = r (32) || s (32, low half) || v (27 or 28). RFC 6979 nonces, so the
 * same key and digest always give the same signature. Fails (XGR_EINVAL) for a key that is zero
 * or not below the group order. */
int xgr_secp_sign(const xgr_secp *ctx, const uint8_t key[32], const uint8_t digest[32], uint8_t sig[65],
                  xgr_error *err);

/* Recover the address that signed digest. Refuses (XGR_EPERM, path "signature") a v outside
 * {27, 28, 0, 1}, an s above n/2, an r or s that is zero or not below n, and a signature from which
 * no public key follows. The message names the check that failed. */
int xgr_secp_recover(const xgr_secp *ctx, const uint8_t digest[32], const uint8_t sig[65], uint8_t addr[20],
                     xgr_error *err);

/* The address of key (keccak-256 of the 64-byte uncompressed public key, last 20 bytes). */
int xgr_secp_address(const xgr_secp *ctx, const uint8_t key[32], uint8_t addr[20], xgr_error *err);

/* A new random valid private key from getrandom(). */
int xgr_secp_key_generate(const xgr_secp *ctx, uint8_t key[32], xgr_error *err);

/* Read a private key from path: 64 hex digits, optionally with "0x", surrounding white space
 * allowed. Refused (XGR_EPERM) when the file is readable or writable by group or others, like ssh
 * does; XGR_EIO when unreadable, XGR_EPARSE when malformed, XGR_EINVAL when not a valid key. */
int xgr_secp_key_load(const xgr_secp *ctx, const char *path, uint8_t key[32], xgr_error *err);

/* Write key as "0x" + 64 hex + newline into a new file path created with mode 0600; refuses
 * (XGR_EIO) to replace an existing file. */
int xgr_secp_key_save(const char *path, const uint8_t key[32], xgr_error *err);

/* ---- hex helpers shared by permits and the CLI ---------------------------------------------- */

/* "0x" + 40 lowercase hex digits + NUL (43 bytes). */
void xgr_addr_hex(const uint8_t addr[20], char out[43]);

/* "0x" + 40 hex digits with the EIP-55 mixed-case checksum + NUL (43 bytes). */
void xgr_addr_hex_checksum(const uint8_t addr[20], char out[43]);

/* Parse exactly n bytes of hex from s: "0x" prefix required, 2n hex digits of either case, nothing
 * after. Returns 0 or -1 (the caller words the error: it knows the field path). */
int xgr_hex_decode(const char *s, uint8_t *out, size_t n);

/* "0x" + 2n lowercase hex digits + NUL into out (2n + 3 bytes). */
void xgr_hex_encode(const uint8_t *in, size_t n, char *out);

#ifdef __cplusplus
}
#endif
#endif
