/* xgr/xrc_types.h — the 14 XRC types of XRC-137 spec §10 and the casts into them.
 *
 * Every value written into a step's environment (input fields and their defaults, API extracts,
 * contract-read outputs, execution arguments) is cast to its declared XRC type. A cast either
 * returns the canonical value or fails with a message naming the value and what was expected.
 *
 * Canonical representations (what payloads and expressions see):
 *   string        STRING (valid UTF-8); numbers and bools are accepted and written as text
 *   bool          BOOL; accepts true/false, "true"/"false", any number (non-zero is true)
 *   int64/uint64  INT / UINT; integer numbers, integral doubles (42.0), bigints in range,
 *                 decimal strings ([+-]?digits); out of range is an error
 *   int256/uint256 BIGINT (XGR_VF_SIGNED for int256), range-checked with GMP; integer numbers,
 *                 integral doubles, decimal or 0x-hex strings. Written to JSON as decimal strings.
 *   double        DOUBLE; numbers and numeric strings (JSON number syntax), finite only
 *   decimal       STRING holding a decimal number as written ([+-]?digits[.digits][e[+-]digits]);
 *                 numbers are written in their exact / shortest round-trip form
 *   uuid          STRING, canonical 8-4-4-4-12 hex, lower-cased
 *   address       STRING "0x" + 40 hex digits, kept as written (checksum case preserved)
 *   bytes         STRING "0x" + even number of hex digits, lower-cased (BYTES values accepted)
 *   bytes32       like bytes, exactly 32 bytes
 *   timestamp_ms, duration_ms  UINT, like uint64
 * null, lists and maps are rejected by every cast.
 *
 * Casts are pure functions: no global state, safe from any thread.
 */
#ifndef XGR_XRC_TYPES_H
#define XGR_XRC_TYPES_H

#include <stdbool.h>
#include <stddef.h>

#include "xgr/error.h"
#include "xgr/value.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum xgr_xrc_type {
  XGR_XRC_STRING = 0,
  XGR_XRC_BOOL,
  XGR_XRC_INT64,
  XGR_XRC_UINT64,
  XGR_XRC_INT256,
  XGR_XRC_UINT256,
  XGR_XRC_DOUBLE,
  XGR_XRC_DECIMAL,
  XGR_XRC_UUID,
  XGR_XRC_ADDRESS,
  XGR_XRC_BYTES,
  XGR_XRC_BYTES32,
  XGR_XRC_TIMESTAMP_MS,
  XGR_XRC_DURATION_MS,
  XGR_XRC_TYPE_COUNT_
} xgr_xrc_type;

/* Look up a type by its spec name ("uint256", "timestamp_ms", ...; exact, case-sensitive).
 * Returns 0 and *out, or XGR_ESCHEMA when the name is not one of the 14 types. */
int xgr_xrc_type_parse(const char *name, xgr_xrc_type *out);
/* The spec name of t ("int64"); "?" for values outside the enum. */
const char *xgr_xrc_type_name(xgr_xrc_type t);
/* A comma-separated list of all type names, for messages. */
const char *xgr_xrc_type_list(void);

/* Cast v (borrowed) to type t. On success returns 0 and *out holds a new reference (v itself,
 * retained, when it is already canonical). On failure returns XGR_EINVAL and fills e (if not
 * NULL) with e.g. "cannot cast \"abc\" to int64: expected an integer or a decimal string";
 * *out is set to null. e->path is left empty: callers add the JSON path. */
int xgr_xrc_cast(xgr_xrc_type t, xgr_value v, xgr_value *out, xgr_error *e);

/* True when v is an "0x" + 40 hex address string. */
bool xgr_xrc_is_address(const char *s, size_t len);

#ifdef __cplusplus
}
#endif
#endif
