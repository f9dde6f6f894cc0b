/* fuzz_siwe.c — libFuzzer target for the console's Sign-In with Ethereum parser (xgr/siwe.h):
 * arbitrary bytes never crash xgr_siwe_parse or xgr_siwe_parse_time or make them read past the
 * input; a message it accepts, built again with xgr_siwe_build, parses to the same fields (the
 * ones xgr_siwe_build writes). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xgr/siwe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 2 * XGR_SIWE_MAX) return 0;
  char *copy = malloc(size + 1);   /* exactly the input and its NUL: ASan sees any read past them */
  if (!copy) return 0;
  memcpy(copy, data, size);
  copy[size] = 0;
  int64_t ms;
  (void)xgr_siwe_parse_time(copy, &ms);
  xgr_siwe m;
  xgr_error err;
  /* times outside years 1970..9999 (an offset can push a valid text past them) are not written back */
  static const int64_t last_ms = 253402300799999;
  if (xgr_siwe_parse(copy, &m, &err) == 0 && m.issued_at >= 0 && m.issued_at <= last_ms && m.expiration >= 0 &&
      m.expiration <= last_ms) {
    char *again = xgr_siwe_build(&m);
    xgr_siwe b;
    if (!again || strlen(again) > XGR_SIWE_MAX) {   /* a message of the longest fields can outgrow the cap */
      free(again);
      free(copy);
      return 0;
    }
    if (xgr_siwe_parse(again, &b, &err) || strcmp(b.domain, m.domain) || strcmp(b.address, m.address) ||
        strcmp(b.statement, m.statement) || strcmp(b.uri, m.uri) || strcmp(b.version, m.version) ||
        b.chain_id != m.chain_id || strcmp(b.nonce, m.nonce) || b.issued_at != m.issued_at ||
        b.expiration != m.expiration)
      abort();
    free(again);
  }
  free(copy);
  return 0;
}
