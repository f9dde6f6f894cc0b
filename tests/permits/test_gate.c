/* test_gate.c — xgrd's permit bindings (src/auth/gate.c): a permit must name the call it
 * authorizes (action, sessionId, stepId, ostcId/ostcHash, owner), a control permit works once (its
 * mark kept in a real store), a missing permit names the kind the call needs; every refusal is
 * XGR_EPERM with the path, which the JSON-RPC layer answers as -32007. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "xgr/auth.h"
#include "xgr/rpc.h"
#include "xgr/store.h"

static int64_t fixed_now(void *ctx) { return *(int64_t *)ctx; }

/* The single-use marks on a store, as xgrd wires them. */
static int mark_once(void *ctx, const char *key, int64_t expires_at, int64_t now, xgr_error *err) {
  return xgr_store_mark_once(ctx, key, expires_at, now, err);
}

typedef struct env {
  xgr_secp *s;
  xgr_store *st;
  xgr_auth *a;
  int64_t now;
  uint8_t owner[32], other[32];
  char owner_addr[43], other_addr[43];
} env;

static env E;

static int setup(void **state) {
  (void)state;
  xgr_error e;
  E.s = xgr_secp_new();
  E.st = xgr_store_open("memory:", NULL, &e);
  E.now = 1800000000;
  xgr_auth_config cfg = {.chain_id = 5, .mark_once = mark_once, .mark_ctx = E.st, .now = fixed_now, .now_ctx = &E.now};
  E.a = xgr_auth_new(&cfg, &e);
  memset(E.owner, 0x31, 32);
  memset(E.other, 0x32, 32);
  uint8_t a[20];
  xgr_secp_address(E.s, E.owner, a, &e);
  xgr_addr_hex(a, E.owner_addr);
  xgr_secp_address(E.s, E.other, a, &e);
  xgr_addr_hex(a, E.other_addr);
  return E.a ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  xgr_auth_free(E.a);
  xgr_store_close(E.st);
  xgr_secp_free(E.s);
  return 0;
}

static json_t *params_with(const uint8_t key[32], xgr_permit_fields f) {
  uint8_t vc[20];
  xgr_hex_decode(XGR_AUTH_DEFAULT_CONTROL_CONTRACT, vc, 20);
  f.chain_id = 5;
  f.verifying_contract = vc;
  if (!f.expiry) f.expiry = (uint64_t)E.now + 60;
  json_t *p;
  xgr_error e;
  if (xgr_permit_sign(E.s, key, &f, &p, &e)) fail_msg("sign: %s", e.message);
  return json_pack("{s:o}", "permit", p);
}

static void test_missing_and_kind(void **state) {
  (void)state;
  xgr_permit p;
  xgr_error e;
  json_t *params = json_object();
  assert_int_equal(xgr_auth_verify(E.a, params, "permit", XGR_PERMIT_SESSION, &p, &e), XGR_EPERM);
  assert_string_equal(e.path, "permit");
  assert_non_null(strstr(e.message, "SessionPermit"));
  json_decref(params);
  params = params_with(E.owner, (xgr_permit_fields){.kind = XGR_PERMIT_XDALA});
  assert_int_equal(xgr_auth_verify(E.a, params, "permit", XGR_PERMIT_ANY_CONTROL, &p, &e), XGR_EPERM);
  assert_string_equal(e.path, "permit.primaryType");
  assert_int_equal(xgr_auth_verify(E.a, params, "permit", XGR_PERMIT_XDALA, &p, &e), 0);
  assert_string_equal(p.from, E.owner_addr);
  E.now += 61; /* expired by the daemon's clock */
  assert_int_equal(xgr_auth_verify(E.a, params, "permit", XGR_PERMIT_XDALA, &p, &e), XGR_EPERM);
  assert_string_equal(e.path, "permit.message.expiry");
  E.now -= 61;
  json_decref(params);
}

static void test_session_bindings(void **state) {
  (void)state;
  uint8_t h[32];
  memset(h, 0xab, 32);
  char hh[67], other[67];
  xgr_hex_encode(h, 32, hh);
  memset(h + 31, 0xac, 1);
  xgr_hex_encode(h, 32, other);
  memset(h, 0xab, 32);
  json_t *params = params_with(E.owner, (xgr_permit_fields){.kind = XGR_PERMIT_SESSION, .ostc_id = "orders",
                                                            .ostc_hash = h, .session_id = 4, .max_total_gas = 1});
  xgr_permit p;
  xgr_error e;
  assert_int_equal(xgr_auth_verify(E.a, params, "permit", XGR_PERMIT_SESSION, &p, &e), 0);
  assert_int_equal(xgr_auth_check_session(&p, 4, "orders", hh, &e), 0);
  assert_int_equal(xgr_auth_check_session(&p, 5, "orders", hh, &e), XGR_EPERM);
  assert_string_equal(e.path, "permit.message.sessionId");
  assert_int_equal(xgr_auth_check_session(&p, 4, "", hh, &e), XGR_EPERM);
  assert_string_equal(e.path, "permit.message.ostcId");
  assert_int_equal(xgr_auth_check_session(&p, 4, "orders", other, &e), XGR_EPERM);
  assert_string_equal(e.path, "permit.message.ostcHash");
  assert_int_equal(xgr_auth_check_starter(&p, E.owner_addr, NULL, &e), 0);
  assert_int_equal(xgr_auth_check_starter(&p, "", NULL, &e), 0);
  assert_int_equal(xgr_auth_check_starter(&p, E.other_addr, NULL, &e), XGR_EPERM);
  assert_string_equal(e.path, "permit.message.from");
  json_t *ex = json_pack("[s]", E.owner_addr);
  assert_int_equal(xgr_auth_check_starter(&p, E.other_addr, ex, &e), 0);
  json_decref(ex);
  json_decref(params);
}

static void test_control_bindings(void **state) {
  (void)state;
  xgr_permit p;
  xgr_error e;
  json_t *params = params_with(E.owner, (xgr_permit_fields){.kind = XGR_PERMIT_CONTROL, .action = "kill", .session_id = 9});
  assert_int_equal(xgr_auth_verify(E.a, params, "permit", XGR_PERMIT_ANY_CONTROL, &p, &e), 0);
  assert_int_equal(xgr_auth_check_control(&p, "kill", 9, NULL, E.owner_addr, &e), 0);
  assert_int_equal(xgr_auth_check_control(&p, "pause", 9, NULL, E.owner_addr, &e), XGR_EPERM);
  assert_string_equal(e.path, "permit.message.action");
  assert_int_equal(xgr_auth_check_control(&p, "kill", 8, NULL, E.owner_addr, &e), XGR_EPERM);
  assert_string_equal(e.path, "permit.message.sessionId");
  assert_int_equal(xgr_auth_check_control(&p, "kill", 9, NULL, E.other_addr, &e), XGR_EPERM);
  assert_string_equal(e.path, "permit.message.from");
  /* single use, and a refused second use leaves the mark as it was */
  assert_int_equal(xgr_auth_consume(E.a, &p, &e), 0);
  assert_int_equal(xgr_auth_consume(E.a, &p, &e), XGR_EPERM);
  assert_non_null(strstr(e.message, "already used"));
  json_decref(params);

  /* wakes: PID mode signs no step; step mode signs the step */
  params = params_with(E.owner, (xgr_permit_fields){.kind = XGR_PERMIT_CONTROL, .action = "wake", .session_id = 9,
                                                    .step_id = "Approve"});
  assert_int_equal(xgr_auth_verify(E.a, params, "permit", XGR_PERMIT_ANY_CONTROL, &p, &e), 0);
  assert_int_equal(xgr_auth_check_control(&p, "wake", 9, "Approve", E.owner_addr, &e), 0);
  assert_int_equal(xgr_auth_check_control(&p, "wake", 9, NULL, E.owner_addr, &e), XGR_EPERM);
  assert_string_equal(e.path, "permit.message.stepId");
  assert_int_equal(xgr_auth_check_control(&p, "wake", 9, "Other", E.owner_addr, &e), XGR_EPERM);
  json_decref(params);

  /* V2: a helper signs for the runner: step-mode wake only */
  params = params_with(E.other, (xgr_permit_fields){.kind = XGR_PERMIT_CONTROL_V2, .runner = E.owner_addr,
                                                    .action = "wake", .session_id = 9, .step_id = "Approve"});
  assert_int_equal(xgr_auth_verify(E.a, params, "permit", XGR_PERMIT_ANY_CONTROL, &p, &e), 0);
  assert_string_equal(p.runner, E.owner_addr);
  assert_string_equal(p.from, E.other_addr);
  assert_int_equal(xgr_auth_check_control(&p, "wake", 9, "Approve", E.owner_addr, &e), 0);
  assert_int_equal(xgr_auth_check_control(&p, "wake", 9, "Approve", E.other_addr, &e), XGR_EPERM);
  assert_string_equal(e.path, "permit.message.runner");
  json_decref(params);
  params = params_with(E.other, (xgr_permit_fields){.kind = XGR_PERMIT_CONTROL_V2, .runner = E.owner_addr,
                                                    .action = "kill", .session_id = 9});
  assert_int_equal(xgr_auth_verify(E.a, params, "permit", XGR_PERMIT_ANY_CONTROL, &p, &e), 0);
  assert_int_equal(xgr_auth_check_control(&p, "kill", 9, NULL, E.owner_addr, &e), XGR_EPERM);
  assert_non_null(strstr(e.message, "step-mode wakes only"));
  json_decref(params);
}

/* The one mapping callers answer a refusal with: XGR_EPERM is JSON-RPC -32007. */
static void test_rpc_code(void **state) {
  (void)state;
  assert_int_equal(xgr_rpc_code_for(XGR_EPERM), XGR_RPC_NOT_PERMITTED);
  assert_int_equal(XGR_RPC_NOT_PERMITTED, -32007);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_missing_and_kind), cmocka_unit_test(test_session_bindings),
                                     cmocka_unit_test(test_control_bindings), cmocka_unit_test(test_rpc_code)};
  return cmocka_run_group_tests(tests, setup, teardown);
}
