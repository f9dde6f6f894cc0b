/* fuzz_permit.c — libFuzzer target for permits: arbitrary bytes through the permit parser and
 * verifier (every kind accepted, the fixtures' chain and control contract, so mutated valid permits
 * get deep into the checks), and through the general EIP-712 digest. Any crash, leak or sanitizer
 * report is a bug; a permit that verifies must carry a well-formed signer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xgr/eip712.h"
#include "xgr/json.h"
#include "xgr/permit.h"
#include "xgr/secp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static xgr_secp *ctx; /* one context for the fuzzing process; libFuzzer calls us on one thread */
  if (!ctx) ctx = xgr_secp_new();
  xgr_permit_policy pol = {.chain_id = 1879, .now = 1700000000, .accept = 15};
  pol.control_contract[19] = 0xaa;
  xgr_permit p;
  xgr_error e;
  if (xgr_permit_verify_text(ctx, (const char *)data, size, &pol, &p, &e) == 0) {
    if (strlen(p.from) != 42 || p.expiry <= pol.now) abort();
  } else if (e.code != XGR_EPERM) {
    abort();
  }
  json_t *j;
  if (size <= XGR_PERMIT_MAX_BYTES && xgr_json_parse((const char *)data, size, &j, &e) == 0) {
    uint8_t d[32];
    xgr_eip712_digest(j, d, &e);
    json_decref(j);
  }
  return 0;
}
