/* xgr/eip712.h — EIP-712 typed structured data hashing, general (not tied to the permit types).
 *
 * The input is jansson JSON in the shape wallets use for eth_signTypedData_v4:
 *   types:  {"TypeName": [{"name": "field", "type": "uint256"}, ...], ...}
 *   domain: {"name": ..., "version": ..., "chainId": ..., "verifyingContract": ..., "salt": ...}
 * Supported field types: address, bool, string, bytes, bytes1..bytes32, uint8..uint256, int8..int256
 * (multiples of 8), struct names defined in `types`, and arrays of any of them (`T[]`, `T[k]`,
 * nested). encodeType lists the primary type first, then every struct type it references
 * (transitively) sorted by name; string and bytes values are hashed; arrays hash the concatenation
 * of their elements' encodings; nested structs are hashed with hashStruct.
 *
 * Values: integers as JSON integers, decimal strings or 0x-hex strings (within the type's range);
 * addresses as 0x + 40 hex digits (all-lower, all-upper, or mixed case with a valid EIP-55
 * checksum); bytes and bytesN as 0x-hex (bytesN with exactly N bytes); bool as JSON true/false.
 * Every size is bounded (XGR_EIP712_MAX_*). Errors are XGR_ESCHEMA / XGR_ELIMIT with the JSON path
 * of the field (for example "message.sessionId") and what was expected.
 *
 * Pure functions over the caller's JSON (borrowed, never modified); no global state.
 */
#ifndef XGR_EIP712_H
#define XGR_EIP712_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "xgr/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define XGR_EIP712_MAX_DEPTH 16     /* nesting of structs and arrays in a value */
#define XGR_EIP712_MAX_TYPES 64     /* struct types in `types` */
#define XGR_EIP712_MAX_FIELDS 64    /* fields of one struct type */
#define XGR_EIP712_MAX_ARRAY 1024   /* elements of one array value */

/* encodeType(primary): "Mail(Person from,Person to,string contents)Person(string name,address wallet)".
 * *out is malloc'd (caller frees). Fails when a referenced type is missing or malformed. */
int xgr_eip712_encode_type(const json_t *types, const char *primary, char **out, xgr_error *err);

/* typeHash = keccak256(encodeType(primary)). */
int xgr_eip712_type_hash(const json_t *types, const char *primary, uint8_t out[32], xgr_error *err);

/* hashStruct(type, value) = keccak256(typeHash || encodeData(value)). `path` names value in errors
 * ("message"); NULL means "". */
int xgr_eip712_hash_struct(const json_t *types, const char *type, const json_t *value, const char *path,
                           uint8_t out[32], xgr_error *err);

/* The domain separator: hashStruct("EIP712Domain", domain). When types has "EIP712Domain" that
 * definition is used; otherwise it is built from the fields the domain object has, in the order
 * name, version, chainId, verifyingContract, salt (as ethers does); other domain keys are refused. */
int xgr_eip712_domain_separator(const json_t *types, const json_t *domain, uint8_t out[32], xgr_error *err);

/* The digest a wallet signs: keccak256(0x19 0x01 || domainSeparator || hashStruct(primaryType,
 * message)) for a document {types, domain, primaryType, message}. */
int xgr_eip712_digest(const json_t *typed, uint8_t out[32], xgr_error *err);

/* A field of a struct type known in advance (both strings borrowed, usually literals). */
typedef struct xgr_eip712_field {
  const char *name, *type;
} xgr_eip712_field;
/* typeHash of a struct type whose n fields are atomic (no struct references):
 * keccak256("Name(type1 name1,type2 name2,...)"). For callers that hash many values of one fixed
 * type and compute this once. */
void xgr_eip712_type_hash_fields(const char *name, const xgr_eip712_field *f, size_t n, uint8_t out[32]);
/* hashStruct(name, value) for that struct type, given its type hash (xgr_eip712_type_hash_fields):
 * the same value checks, errors and paths as xgr_eip712_hash_struct over the equivalent `types`.
 * Fields must be atomic types or arrays of them (asserted); n <= XGR_EIP712_MAX_FIELDS. */
int xgr_eip712_hash_fields(const char *name, const uint8_t type_hash[32], const xgr_eip712_field *f, size_t n,
                           const json_t *value, const char *path, uint8_t out[32], xgr_error *err);
/* Encode one atomic value of an integer type ("uint256", "int64", ...) as its 32-byte word (two's
 * complement for intN), with the range checks above. path names the value in errors. */
int xgr_eip712_encode_int(const char *type, const json_t *v, const char *path, uint8_t out[32], xgr_error *err);

#ifdef __cplusplus
}
#endif
#endif
