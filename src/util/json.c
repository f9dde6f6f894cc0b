/* json.c — file reading and JSON parsing helpers with path-carrying errors (see xgr/json.h). */
#include "xgr/json.h"
#include "util/alloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int xgr_file_read(const char *path, char **out, size_t *len, size_t max, xgr_error *e) {
  FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
  if (!f) return xgr_error_set(e, XGR_EIO, NULL, "cannot open %s: %s", path, strerror(errno));
  size_t cap = 4096, n = 0;
  char *buf = xgr__xmalloc(cap);
  int rc = 0;
  while (rc == 0) {
    if (n + 1 >= cap) {
      buf = xgr__xrealloc(buf, cap * 2);
      cap *= 2;
    }
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (max && n > max) {
      rc = xgr_error_set(e, XGR_ELIMIT, NULL, "%s is larger than %zu bytes", path, max);
      break;
    }
    if (got == 0) {
      if (ferror(f)) rc = xgr_error_set(e, XGR_EIO, NULL, "cannot read %s: %s", path, strerror(errno));
      break;
    }
  }
  if (f != stdin) fclose(f);
  if (rc) {
    free(buf);
    return rc;
  }
  buf[n] = '\0';
  *out = buf;
  *len = n;
  return 0;
}

int xgr_json_parse(const char *buf, size_t len, json_t **out, xgr_error *e) {
  json_error_t je;
  json_t *v = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
  if (!v)
    return xgr_error_set(e, XGR_EPARSE, NULL, "invalid JSON at line %d, column %d: %s", je.line,
                         je.column, je.text);
  *out = v;
  return 0;
}

int xgr_json_is_exact(const json_t *v) {
  return json_is_string(v) && json_string_length(v) > XGR_JSON_EXACT_PREFIX_LEN &&
         !memcmp(json_string_value(v), XGR_JSON_EXACT_PREFIX, XGR_JSON_EXACT_PREFIX_LEN);
}

const char *xgr_json_text(const json_t *v) { return xgr_json_is_exact(v) ? NULL : json_string_value(v); }

void xgr_json_array_sort(json_t *a, int (*cmp)(const void *, const void *)) {
  size_t n = json_array_size(a);
  if (n < 2) return;
  json_t **v = xgr__xmalloc(n * sizeof *v);
  for (size_t i = 0; i < n; i++) v[i] = json_incref(json_array_get(a, i));
  qsort(v, n, sizeof *v, cmp);
  json_array_clear(a);
  for (size_t i = 0; i < n; i++) json_array_append_new(a, v[i]);
  free(v);
}

const char *xgr_json_type_name(const json_t *v) {
  if (xgr_json_is_exact(v)) return "integer";
  switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    case JSON_NULL: return "null";
  }
  return "unknown";
}

void xgr_json_preview(const json_t *v, char *buf, size_t n) {
  if (n == 0) return;
  if (json_is_object(v) || json_is_array(v)) {
    snprintf(buf, n, "%s", json_is_object(v) ? "{...}" : "[...]");
    return;
  }
  if (xgr_json_is_exact(v)) {
    snprintf(buf, n, "%s", json_string_value(v) + XGR_JSON_EXACT_PREFIX_LEN);
    if (strlen(json_string_value(v) + XGR_JSON_EXACT_PREFIX_LEN) >= n && n > 4) memcpy(buf + n - 4, "...", 4);
    return;
  }
  char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
  if (!s) {
    snprintf(buf, n, "?");
    return;
  }
  if (strlen(s) >= n && n > 4) {
    memcpy(buf, s, n - 4);
    memcpy(buf + n - 4, "...", 4);
  } else {
    snprintf(buf, n, "%s", s);
  }
  free(s);
}

int xgr_json_expect(const json_t *v, json_type t, const xgr_path *p, xgr_error *e) {
  if (v && json_typeof(v) == t && !xgr_json_is_exact(v)) return 0;
  if (t == JSON_TRUE && (json_is_boolean(v))) return 0;
  static const char *const names[] = {"object", "array", "string", "integer", "number",
                                      "boolean", "boolean", "null"};
  if (!v) return xgr_error_set(e, XGR_ESCHEMA, p->buf, "missing; expected %s", names[t]);
  char prev[64];
  xgr_json_preview(v, prev, sizeof prev);
  return xgr_error_set(e, XGR_ESCHEMA, p->buf, "expected %s, got %s %s", names[t],
                       xgr_json_type_name(v), prev);
}
