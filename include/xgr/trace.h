/* xgr/trace.h — the W3C Trace Context `traceparent` header (level 1), as xgrd reads it from an
 * `xgr.enqueue` request to continue the caller's trace (docs/OPERATIONS.md "Tracing").
 *
 * The header is "VERSION-TRACEID-PARENTID-FLAGS": 2, 32, 16 and 2 lowercase hex digits joined by
 * '-'. Version "ff" is invalid; version 00 is exactly 55 characters; a later version may carry more
 * after a '-' at offset 55, which is ignored (the spec's forward compatibility). An all-zero trace
 * id or parent id is invalid. Optional whitespace around the value (HTTP's OWS) is skipped.
 * Whoever gets an invalid header ignores it and starts a new trace, as the spec says.
 */
#ifndef XGR_TRACE_H
#define XGR_TRACE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xgr_traceparent {
  uint8_t version;
  uint8_t trace_id[16];
  uint8_t parent_id[8];
  uint8_t flags;                /* bit 0: sampled */
} xgr_traceparent;

/* The length of a version-00 header (and of what xgr_traceparent_format writes, without the NUL). */
#define XGR_TRACEPARENT_LEN 55

/* Parse s[0..len) (not necessarily NUL-terminated; any bytes). 0 and *out filled, or XGR_EINVAL
 * (*out untouched) when it is not a valid header. Never reads outside s[0..len). */
int xgr_traceparent_parse(const char *s, size_t len, xgr_traceparent *out);

/* Write tp as a version-00 header and a NUL into out. */
void xgr_traceparent_format(const xgr_traceparent *tp, char out[XGR_TRACEPARENT_LEN + 1]);

/* Lowercase hex of n bytes and a NUL into out (2n + 1 bytes): the form OTLP/JSON carries ids in. */
void xgr_trace_hex(const uint8_t *b, size_t n, char *out);

#ifdef __cplusplus
}
#endif
#endif
