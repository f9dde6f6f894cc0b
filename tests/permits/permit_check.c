/* permit_check.c — test helper for the live ethers cross-check (ethers_live.sh): reads a JSON array
 * of {permit, digest, signer, policy: {chainId, controlContract, now}} on stdin (as
 * `node permits.js random N` prints it), verifies every permit with xgr and checks that xgr's
 * digest and recovered signer equal ethers'. Prints one line per failure; exit 0 when all pass. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xgr/json.h"
#include "xgr/permit.h"
#include "xgr/secp.h"

int main(void) {
  json_error_t je;
  json_t *all = json_loadf(stdin, 0, &je);
  if (!json_is_array(all)) {
    fprintf(stderr, "permit_check: stdin is not a JSON array: %s\n", je.text);
    return 2;
  }
  xgr_secp *s = xgr_secp_new();
  size_t i, bad = 0;
  json_t *it;
  json_array_foreach(all, i, it) {
    const json_t *pol = json_object_get(it, "policy");
    xgr_permit_policy p = {.accept = 15};
    p.chain_id = strtoull(json_string_value(json_object_get(pol, "chainId")), NULL, 10);
    p.now = (uint64_t)json_integer_value(json_object_get(pol, "now"));
    xgr_hex_decode(json_string_value(json_object_get(pol, "controlContract")), p.control_contract, 20);
    xgr_permit out;
    xgr_error e;
    if (xgr_permit_verify(s, json_object_get(it, "permit"), &p, "permit", &out, &e)) {
      char *d = json_dumps(json_object_get(it, "permit"), JSON_COMPACT);
      printf("[%zu] refused at %s: %s\n  %s\n", i, e.path, e.message, d);
      free(d);
      bad++;
      continue;
    }
    char dg[67];
    xgr_hex_encode(out.digest, 32, dg);
    if (strcmp(dg, json_string_value(json_object_get(it, "digest"))) ||
        strcmp(out.from, json_string_value(json_object_get(it, "signer")))) {
      printf("[%zu] digest %s / signer %s differ from ethers' %s / %s\n", i, dg, out.from,
             json_string_value(json_object_get(it, "digest")), json_string_value(json_object_get(it, "signer")));
      bad++;
    }
  }
  printf("permit_check: %zu of %zu ethers permits verified by xgr\n", json_array_size(all) - bad, json_array_size(all));
  xgr_secp_free(s);
  json_decref(all);
  return bad ? 1 : 0;
}
