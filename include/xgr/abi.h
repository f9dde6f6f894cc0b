/* xgr/abi.h — Solidity ABI encoding and decoding, driven by signatures as rules write them:
 * "balanceOf(address)", "slot0()", "transfer(address,uint256)(bool)".
 *
 * Types: uint8..uint256 / int8..int256 (steps of 8; `uint`/`int` mean 256), address, bool,
 * bytes1..bytes32, bytes, string, T[] (dynamic arrays), T[k] (fixed arrays) and tuples (T1,...,Tn),
 * nested in any combination up to XGR_ABI_MAX_DEPTH.
 *
 * Values follow the value model (xgr/value.h):
 *   uintN / intN   encode from INT, UINT, BIGINT or a decimal / 0x-hex STRING (range-checked for N);
 *                  decode to BIGINT (uint256 flavour for uintN, int256 flavour for intN)
 *   address        STRING "0x" + 40 hex (or 20 BYTES); decodes to lower-case "0x…" STRING
 *   bool           BOOL; decodes a word of 0 or 1 (anything else is an error)
 *   bytesN, bytes  STRING "0x" + hex (bytesN: exactly N bytes) or BYTES; decode to BYTES
 *   string         STRING; decodes to STRING (bytes as stored, not checked for UTF-8 here)
 *   arrays, tuples LIST (fixed arrays and tuples: exactly their length); decode to LIST
 *
 * The decoder never trusts the data: every offset and length is checked against the bytes
 * present, padding of static words is checked, and the work per call is bounded
 * (XGR_ABI_MAX_VALUES decoded values, so overlapping offsets cannot blow up). Pure functions, no
 * global state: safe from any thread.
 */
#ifndef XGR_ABI_H
#define XGR_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "xgr/error.h"
#include "xgr/value.h"

#ifdef __cplusplus
extern "C" {
#endif

#define XGR_ABI_MAX_DEPTH 16          /* nesting of arrays and tuples in a type */
#define XGR_ABI_MAX_TUPLE 64          /* components of one tuple (also the parameters of a call) */
#define XGR_ABI_MAX_FIXED 4096        /* k of T[k] */
#define XGR_ABI_MAX_SIG_LEN 1024      /* bytes of a signature */
#define XGR_ABI_MAX_VALUES 65536      /* values one decode call may produce */

typedef struct xgr_abi_type xgr_abi_type;   /* opaque, immutable once parsed */

/* A parsed function signature. `inputs` is the parameter tuple; `outputs` the return tuple, or
 * NULL when the signature has no "(...)" return part. Owned by the caller: xgr_abi_sig_free. */
typedef struct xgr_abi_sig {
  char *name;                 /* function name */
  char *canonical;            /* "name(uint256,address)": what the selector hashes */
  uint8_t selector[4];        /* first 4 bytes of keccak256(canonical) */
  xgr_abi_type *inputs;
  xgr_abi_type *outputs;      /* NULL: no return types given */
} xgr_abi_sig;

/* Parse "name(T1,...)" or "name(T1,...)(R1,...)" (spaces around tokens allowed, parameter names
 * not). Errors: XGR_EPARSE naming the position and what was expected; XGR_ELIMIT for the caps
 * above. On success *out is a new signature. */
int xgr_abi_sig_parse(const char *sig, size_t len, xgr_abi_sig **out, xgr_error *e);
void xgr_abi_sig_free(xgr_abi_sig *s);

/* Parse one type ("uint256", "(address,uint256)[]"). On success *out is owned by the caller. */
int xgr_abi_type_parse(const char *s, size_t len, xgr_abi_type **out, xgr_error *e);
/* A new tuple type made of n copies' ownership of items (taken, even on failure). */
xgr_abi_type *xgr_abi_tuple_new(xgr_abi_type **take_items, size_t n);
void xgr_abi_type_free(xgr_abi_type *t);
/* Components of a tuple type (0 for other types). */
size_t xgr_abi_tuple_size(const xgr_abi_type *t);
/* Canonical text of a type ("uint256[2]", "(bool,string)"), malloc'd (caller frees). */
char *xgr_abi_type_text(const xgr_abi_type *t);

/* Encode n values as the tuple type `tuple` (n must equal its size). On success *out is a
 * malloc'd buffer of *outlen bytes (caller frees). Errors: XGR_EINVAL with the path of the
 * offending value ("[1]", "[0][3]") and what was expected. */
int xgr_abi_encode(const xgr_abi_type *tuple, const xgr_value *vals, size_t n, uint8_t **out,
                   size_t *outlen, xgr_error *e);
/* Call data: the selector followed by the encoded arguments. */
int xgr_abi_encode_call(const xgr_abi_sig *sig, const xgr_value *args, size_t n, uint8_t **out,
                        size_t *outlen, xgr_error *e);

/* Decode `len` bytes as the tuple type `tuple`: *out is a new LIST with one value per component.
 * Errors (XGR_EINVAL, *out null): data too short, an offset or length out of bounds, bad
 * padding, a bool other than 0/1, more than XGR_ABI_MAX_VALUES values; the message names the
 * component path and the byte offset. */
int xgr_abi_decode(const xgr_abi_type *tuple, const uint8_t *data, size_t len, xgr_value *out,
                   xgr_error *e);
/* Lenient per-slot decoding for contract reads without declared return types: component i is
 * decoded only if its head word is present and it decodes cleanly; otherwise the list stops
 * (fewer values) or holds null at i. Never fails; *out is a new LIST. */
void xgr_abi_decode_slots(const xgr_abi_type *tuple, const uint8_t *data, size_t len,
                          xgr_value *out);

/* If data is an Error(string) revert (selector 0x08c379a0) return its reason in a malloc'd
 * string (caller frees); Panic(uint256) becomes "panic 0x11". NULL otherwise. */
char *xgr_abi_revert_reason(const uint8_t *data, size_t len);

/* Variable-length hex (xgr/secp.h has the fixed-length forms): decode_alloc takes len bytes of
 * "0x"-prefixed (prefix optional) even-length hex and returns a malloc'd buffer (caller frees),
 * or NULL when s is not hex; encode_alloc returns a malloc'd "0x…" text. */
uint8_t *xgr_hex_decode_alloc(const char *s, size_t len, size_t *outlen);
char *xgr_hex_encode_alloc(const uint8_t *p, size_t n);

#ifdef __cplusplus
}
#endif
#endif
