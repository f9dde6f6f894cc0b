/* xgr/siwe.h — Sign-In with Ethereum (EIP-4361) messages: the console's sign-in (docs/CONSOLE.md,
 * "Signing in").
 *
 * A wallet (or `xgr console --key`) signs a text message with personal_sign (EIP-191: keccak-256
 * of "\x19Ethereum Signed Message:\n" + the message's length in decimal + the message):
 *
 *   127.0.0.1:8729 wants you to sign in with your Ethereum account:
 *   0xAbC…
 *
 *   Sign in to the xgr console.
 *
 *   URI: http://127.0.0.1:8729/ui/
 *   Version: 1
 *   Chain ID: 1887
 *   Nonce: 5f2c…
 *   Issued At: 2026-11-29T11:20:00.000Z
 *   Expiration Time: 2026-11-29T11:25:00.000Z
 *
 * This file parses and builds such messages and verifies their signatures against what xgrd
 * expects (its host, its chain id, the time); the nonce's single use is the caller's (xgrd's
 * nonce table). Pure functions: no state, any thread. Refusals are XGR_EPERM (XGR_EPARSE for a
 * message that is not EIP-4361) with err naming the field ("message.domain", "signature", ...).
 */
#ifndef XGR_SIWE_H
#define XGR_SIWE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xgr/error.h"
#include "xgr/secp.h"

#ifdef __cplusplus
extern "C" {
#endif

#define XGR_SIWE_MAX 4096   /* the longest message accepted (bytes) */

/* The fields of a message (strings NUL-terminated; absent optional times are 0). */
typedef struct xgr_siwe {
  char domain[256];         /* host[:port] the message is for (an optional "scheme://" is dropped) */
  char address[43];         /* the signer as written, "0x" + 40 hex */
  char statement[512];      /* "" when absent */
  char uri[512];
  char version[8];
  uint64_t chain_id;
  char nonce[80];
  int64_t issued_at;        /* ms since the epoch */
  int64_t expiration;       /* ms; 0: absent */
  int64_t not_before;       /* ms; 0: absent */
} xgr_siwe;

/* Parse msg (NUL-terminated, at most XGR_SIWE_MAX bytes, lines ended by "\n") into *out. */
int xgr_siwe_parse(const char *msg, xgr_siwe *out, xgr_error *err);

/* The message of m (domain, address, statement if any, uri, version, chain id, nonce, issued at,
 * expiration if set) in EIP-4361's layout. malloc'd; the caller frees it. */
char *xgr_siwe_build(const xgr_siwe *m);

/* The EIP-191 personal_sign digest of msg[len]. */
void xgr_siwe_digest(const char *msg, size_t len, uint8_t digest[32]);

/* Sign msg with key: "0x" + 130 hex (r, s, v = 27/28) into sig[133]. */
int xgr_siwe_sign(const xgr_secp *secp, const uint8_t key[32], const char *msg, char sig[133], xgr_error *err);

/* What the verifier expects. */
typedef struct xgr_siwe_expect {
  const char *domain;       /* the Host the request reached (host[:port]); compared case-insensitively */
  uint64_t chain_id;
  int64_t now_ms;
  int64_t max_age_ms;       /* Issued At no older than this (the nonce's life) */
} xgr_siwe_expect;

/* Verify: msg parses, the signature (hex, 65 bytes) recovers to its address, its domain and the
 * authority of its URI (http or https) are x->domain, Version 1, its Chain ID x->chain_id, Issued
 * At neither in the future (a minute of clock skew allowed) nor older than max_age_ms, an Expiration
 * Time that has not passed (required), a Not Before that has passed. The fields go to *out (the
 * nonce for the caller's single-use check); the recovered address (lowercase) is out->address. */
int xgr_siwe_verify(const xgr_secp *secp, const char *msg, const char *sig_hex, const xgr_siwe_expect *x,
                    xgr_siwe *out, xgr_error *err);

/* ms since the epoch as RFC 3339 UTC with milliseconds ("2026-11-29T11:20:00.000Z") into out[32]. */
void xgr_siwe_time(int64_t ms, char out[32]);
/* Parse RFC 3339 ("…Z" or "…+hh:mm", optional fraction): 0 and *ms, or -1. */
int xgr_siwe_parse_time(const char *s, int64_t *ms);

#ifdef __cplusplus
}
#endif
#endif
