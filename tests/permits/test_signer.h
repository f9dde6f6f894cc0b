/* test_signer.h — signing for tests that drive xgrd in permit mode (tests/daemon): three test
 * identities with fixed keys, and tsign_attach(), which puts the permit a JSON-RPC call needs into
 * its params, signed by the identity the params name (`from`, else `owner`/`runner`, else
 * TS_OWNER) — the same library code as the CLI's --key (xgr_permit_sign_call). What the params do
 * not say (the next rootPid, the registered hash) is asked from xgrd through the caller's
 * callbacks. Header-only for the test programs that include it. */
#ifndef XGR_TESTS_TEST_SIGNER_H
#define XGR_TESTS_TEST_SIGNER_H

#include <jansson.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "xgr/auth.h"
#include "xgr/permit.h"
#include "xgr/secp.h"

/* The addresses of the keys 0x61..61, 0x62..62, 0x63..63 (tsign_check asserts them). */
#define TS_OWNER "0xed5970f07eea5a9e7b359d3c5d3f82b34a8f1e15"
#define TS_OTHER "0xfa2cbbcafbb04314d07984f6a78c0063f9bc9eba"
#define TS_DELEGATE "0xfc5e22c7be9d60db4bbe0345709734a815fb0e40"

typedef struct tsign {
  xgr_secp *s;
  uint64_t chain_id;                 /* xgrd's --chain-id (default XGR_AUTH_DEFAULT_CHAIN_ID) */
  uint8_t contract[20];              /* xgrd's --control-contract */
  xgr_permit_call info;              /* callbacks set by the test */
} tsign;

static inline int tsign_key(const char *addr, uint8_t key[32]) {
  static const char *const addrs[] = {TS_OWNER, TS_OTHER, TS_DELEGATE};
  for (int i = 0; i < 3; i++)
    if (addr && !strcasecmp(addr, addrs[i])) {
      memset(key, 0x61 + i, 32);
      return 0;
    }
  return -1;
}

/* 0 when the three addresses are those of their keys. */
static inline int tsign_check(tsign *t) {
  static const char *const addrs[] = {TS_OWNER, TS_OTHER, TS_DELEGATE};
  for (int i = 0; i < 3; i++) {
    uint8_t key[32], a[20];
    char hex[43];
    xgr_error e;
    memset(key, 0x61 + i, 32);
    if (xgr_secp_address(t->s, key, a, &e)) return -1;
    xgr_addr_hex(a, hex);
    if (strcmp(hex, addrs[i])) return -1;
  }
  return 0;
}

static inline void tsign_init(tsign *t) {
  memset(t, 0, sizeof *t);
  t->s = xgr_secp_new();
  t->chain_id = XGR_AUTH_DEFAULT_CHAIN_ID;
  xgr_hex_decode(XGR_AUTH_DEFAULT_CONTROL_CONTRACT, t->contract, 20);
}

static inline void tsign_free(tsign *t) { xgr_secp_free(t->s); }

/* Attach the permit `method` needs, signed by the identity params name. Identities without a key
 * (malformed addresses, unknown callers) get no permit: xgrd must refuse those calls anyway.
 * Returns 0, or -1 with *err when signing failed. */
static inline int tsign_attach(tsign *t, const char *method, json_t *params, xgr_error *err) {
  if (json_is_array(params) && json_array_size(params) == 1 && json_is_object(json_array_get(params, 0)))
    params = json_array_get(params, 0); /* the params[0] convention */
  if (!json_is_object(params) || !xgr_permit_kind_for_method(method)) return 0;
  const char *who = json_string_value(json_object_get(params, "from"));
  if (!who) who = json_string_value(json_object_get(params, "owner"));
  if (!who) who = json_string_value(json_object_get(params, "runner"));
  if (!who) who = TS_OWNER;
  uint8_t key[32];
  if (tsign_key(who, key)) return 0;
  xgr_permit_call info = t->info;
  info.chain_id = t->chain_id;
  info.control_contract = t->contract;
  static uint64_t n; /* distinct expiries: the same call signed twice is two permits (single use) */
  if (!info.expiry) info.expiry = (uint64_t)time(NULL) + 600 + (n++ % 100000);
  if (!info.max_total_gas) info.max_total_gas = 1000000;
  return xgr_permit_sign_call(t->s, key, method, params, &info, err) ? -1 : 0;
}

#endif
