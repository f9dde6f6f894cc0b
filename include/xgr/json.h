/* xgr/json.h — reading files and JSON documents (jansson) with errors that carry JSON paths.
 *
 * Documents are parsed with duplicate keys rejected and object key order kept (jansson keeps
 * insertion order), so diagnostics and diagrams follow the author's order.
 */
#ifndef XGR_JSON_H
#define XGR_JSON_H

#include <jansson.h>
#include <stddef.h>

#include "xgr/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Read a whole file ("-" reads stdin). On success *out is a NUL-terminated malloc'd buffer the
 * caller frees and *len its length without the NUL. Files larger than max bytes are refused with
 * XGR_ELIMIT (max = 0: no limit). */
int xgr_file_read(const char *path, char **out, size_t *len, size_t max, xgr_error *e);

/* Parse len bytes of JSON. On success *out is a new reference the caller releases with
 * json_decref. Syntax errors are XGR_EPARSE with "line L, column C: reason". */
int xgr_json_parse(const char *buf, size_t len, json_t **out, xgr_error *e);

/* An "exact integer" node (xgr/value.h: xgr_json_parse_exact keeps an integer beyond int64 as a
 * jansson string of these prefix bytes, which UTF-8 text never holds, then its decimal digits). */
#define XGR_JSON_EXACT_PREFIX "\xff\xfe" "xgr-int:"
#define XGR_JSON_EXACT_PREFIX_LEN (sizeof XGR_JSON_EXACT_PREFIX - 1)
/* Is v such a node? (A number to every reader: never a string.) */
int xgr_json_is_exact(const json_t *v);
/* v's text when v is a real JSON string, else NULL (also for an exact integer node). */
const char *xgr_json_text(const json_t *v);

/* Sort array a in place by cmp, which qsort calls with pointers to two elements (json_t *const *);
 * the order of equal elements is not kept. a keeps its references. */
void xgr_json_array_sort(json_t *a, int (*cmp)(const void *, const void *));

/* "object", "array", "string", "integer", "number", "boolean" or "null" (an exact integer node:
 * "integer"). */
const char *xgr_json_type_name(const json_t *v);

/* A short compact rendering of v for messages ("\"abc\"", "12", "{...}"; an exact integer node's
 * digits), truncated to n-1 bytes. */
void xgr_json_preview(const json_t *v, char *buf, size_t n);

/* Check that v has JSON type t; otherwise fill e with XGR_ESCHEMA at path p:
 * "expected string, got integer 12". An exact integer node is an integer here, never a string. */
int xgr_json_expect(const json_t *v, json_type t, const xgr_path *p, xgr_error *e);

#ifdef __cplusplus
}
#endif
#endif
