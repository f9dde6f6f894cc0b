/* fuzz_traceparent.c — libFuzzer target for the W3C `traceparent` parser (xgr/trace.h): arbitrary
 * bytes (not NUL-terminated) never crash it or read outside the input; a header it accepts has
 * non-zero ids, and written back as version 00 it parses to the same ids and flags. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xgr/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *copy = malloc(size ? size : 1);   /* exactly size bytes: ASan sees any read past them */
  if (!copy) return 0;
  memcpy(copy, data, size);
  xgr_traceparent tp;
  if (xgr_traceparent_parse(copy, size, &tp) == 0) {
    static const uint8_t zero[16];
    if (!memcmp(tp.trace_id, zero, 16) || !memcmp(tp.parent_id, zero, 8) || tp.version == 0xff) abort();
    char text[XGR_TRACEPARENT_LEN + 1];
    xgr_traceparent_format(&tp, text);
    xgr_traceparent back;
    if (xgr_traceparent_parse(text, strlen(text), &back) || memcmp(back.trace_id, tp.trace_id, 16) ||
        memcmp(back.parent_id, tp.parent_id, 8) || back.flags != tp.flags)
      abort();
  }
  free(copy);
  return 0;
}
