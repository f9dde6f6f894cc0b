/* test_chain.c — the JSON-RPC client and contract reads (XRC-137 spec §6) against a real anvil on
 * 127.0.0.1 (anvil.c): the revert dialects of the common nodes, eth_call with ABI decoding, the
 * step engine's contract reads on a deployed ERC-20 (balanceOf, a tuple read) through the
 * resumable reader and the synchronous one, and every default path of §6.4: revert,
 * out-of-range index, cast failure, unknown rpc selector, soft-invalid without default. Also a
 * node that never answers (timeout). Skipped (77) when anvil is not installed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "anvil.h"
#include "xgr/abi.h"
#include "xgr/chain.h"
#include "xgr/rule.h"
#include "xgr/secp.h"

static anvil node;
static char token[43];
static xgr_chain *set;        /* default + "main" (both the anvil) + "dead" (nothing listens) */

#define SUPPLY "1000000000000000000000000"  /* 1e24: above int64 */

static int setup(void **st) {
  (void)st;
  if (anvil_start(&node, NULL)) return -1;
  if (anvil_deploy(&node, "TestToken", "(string,string,uint256)", "[\"Test\", \"TST\", \"" SUPPLY "\"]", token)) return -1;
  char buf[128];
  /* account 1 gets 250 tokens */
  snprintf(buf, sizeof buf, "[\"%s\", 250]", node.accounts[1]);
  if (anvil_send(&node, 0, token, "transfer(address,uint256)", buf)) return -1;
  set = xgr_chain_new();
  xgr_error e;
  if (xgr_chain_add(set, node.url, &e)) return -1;
  snprintf(buf, sizeof buf, "main=%s", node.url);
  if (xgr_chain_add(set, buf, &e)) return -1;
  if (xgr_chain_add(set, "dead=http://127.0.0.1:1", &e)) return -1;
  return 0;
}

static int teardown(void **st) {
  (void)st;
  xgr_chain_free(set);
  anvil_stop(&node);
  return 0;
}

/* ---- the wire format: revert dialects ------------------------------------------------------- */

#define ERR_BOOM "0x08c379a0" \
  "0000000000000000000000000000000000000000000000000000000000000020" \
  "0000000000000000000000000000000000000000000000000000000000000004" \
  "626f6f6d00000000000000000000000000000000000000000000000000000000"

static void expect_parse(const char *body, int code, const char *msg, bool reverted) {
  json_t *res;
  xgr_chain_fault f;
  xgr_error e;
  int rc = xgr_chain_rpc_parse(body, strlen(body), &res, &f, &e);
  if (rc != code) fail_msg("%s: rc %d (%s), expected %d", body, rc, rc ? e.message : "", code);
  if (code) {
    assert_null(res);
    if (!strstr(e.message, msg)) fail_msg("%s: \"%s\" lacks \"%s\"", body, e.message, msg);
    assert_int_equal(f.reverted, reverted);
  } else {
    json_decref(res);
  }
  xgr_chain_fault_clear(&f);
}

static void test_dialects(void **st) {
  (void)st;
  expect_parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"0x01\"}", 0, NULL, false);
  /* anvil / geth: code 3 with data */
  expect_parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":3,\"message\":\"execution reverted: boom\",\"data\":\"" ERR_BOOM "\"}}",
               XGR_EEVAL, "execution reverted: boom", true);
  /* hardhat: -32603 with data.data */
  expect_parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32603,\"message\":\"Error: VM Exception\",\"data\":{\"message\":\"x\",\"data\":\"" ERR_BOOM "\"}}}",
               XGR_EEVAL, "execution reverted: boom", true);
  /* ganache 6: -32000 with data keyed by transaction hash */
  expect_parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32000,\"message\":\"VM Exception while processing transaction: revert boom\","
               "\"data\":{\"0xabc\":{\"error\":\"revert\",\"return\":\"" ERR_BOOM "\"}}}}",
               XGR_EEVAL, "execution reverted: boom", true);
  /* old geth: -32000 "execution reverted" and no data */
  expect_parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32000,\"message\":\"execution reverted\"}}", XGR_EEVAL,
               "execution reverted", true);
  /* a revert without a reason: the raw data is shown */
  expect_parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":3,\"message\":\"execution reverted\",\"data\":\"0x12345678\"}}",
               XGR_EEVAL, "data 0x12345678", true);
  /* not a revert */
  expect_parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32601,\"message\":\"Method not found\"}}", XGR_EHTTP,
               "chain node error -32601: Method not found", false);
  expect_parse("<html>", XGR_EHTTP, "not a JSON-RPC object", false);
  expect_parse("{\"jsonrpc\":\"2.0\",\"id\":1}", XGR_EHTTP, "neither result nor error", false);
}

static void test_backends(void **st) {
  (void)st;
  xgr_chain *c = xgr_chain_new();
  xgr_error e;
  assert_int_equal(xgr_chain_add(c, "http://127.0.0.1:8545", &e), 0);
  assert_int_equal(xgr_chain_add(c, "http://127.0.0.1:8546", &e), XGR_EINVAL);
  assert_non_null(strstr(e.message, "only one unnamed"));
  assert_int_equal(xgr_chain_add(c, "l2=http://127.0.0.1:8546/?a=b", &e), 0);
  assert_int_equal(xgr_chain_add(c, "l2=http://127.0.0.1:8547", &e), XGR_EINVAL);
  assert_non_null(strstr(e.message, "given twice"));
  assert_int_equal(xgr_chain_add(c, "b@d=http://x", &e), XGR_EINVAL);
  assert_int_equal(xgr_chain_add(c, "ftp://x", &e), XGR_EINVAL);
  assert_string_equal(xgr_chain_url(c, NULL), "http://127.0.0.1:8545");
  assert_string_equal(xgr_chain_url(c, "l2"), "http://127.0.0.1:8546/?a=b");
  assert_null(xgr_chain_url(c, "l3"));
  assert_int_equal(xgr_chain_count(c), 2);
  xgr_chain_free(c);
}

/* ---- live calls -------------------------------------------------------------------------------- */

static void test_rpc_live(void **st) {
  (void)st;
  json_t *res;
  xgr_error e;
  assert_int_equal(xgr_chain_rpc(node.chain, NULL, "eth_chainId", NULL, &res, NULL, &e), 0);
  uint64_t id;
  assert_true(xgr_chain_quantity(res, &id));
  assert_int_equal(id, 31337);
  json_decref(res);

  char *txt = anvil_balance(&node, token, node.accounts[1]);
  assert_string_equal(txt, "[\"250\"]");
  free(txt);
  xgr_value out;

  assert_int_equal(xgr_chain_eth_call(node.chain, NULL, NULL, token, "info()(string,string,uint8,uint256,address[])", NULL, 0, &out, NULL, &e), 0);
  txt = xgr_value_to_json_text(out, 0, NULL);
  char want[512];
  snprintf(want, sizeof want, "[\"Test\",\"TST\",\"18\",\"" SUPPLY "\",[\"%s\",\"%s\"]]", node.accounts[0], node.accounts[1]);
  assert_string_equal(txt, want);
  free(txt);
  xgr_value_release(out);

  /* a revert from the real node: anvil's dialect, the Error(string) reason decoded */
  xgr_value why = xgr_value_cstring("boom");
  xgr_chain_fault f;
  assert_int_equal(xgr_chain_eth_call(node.chain, NULL, NULL, token, "fail(string)(uint256)", &why, 1, &out, &f, &e), XGR_EEVAL);
  assert_string_equal(e.message, "execution reverted: boom");
  assert_true(f.reverted);
  assert_non_null(f.data);
  xgr_chain_fault_clear(&f);
  xgr_value_release(why);

  /* unknown method */
  assert_int_equal(xgr_chain_rpc(node.chain, NULL, "eth_noSuchMethod", NULL, &res, NULL, &e), XGR_EHTTP);
  json_t *h = xgr_chain_health(node.chain);
  assert_int_equal(json_array_size(h), 1);
  assert_true(json_integer_value(json_object_get(json_array_get(h, 0), "errors")) >= 1);
  json_decref(h);
}

/* A socket that accepts connections (backlog) but never answers: the request times out. */
static void test_timeout(void **st) {
  (void)st;
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal(listen(s, 8), 0);
  socklen_t sl = sizeof sa;
  getsockname(s, (struct sockaddr *)&sa, &sl);
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d", ntohs(sa.sin_port));
  xgr_chain *c = xgr_chain_new();
  xgr_error e;
  assert_int_equal(xgr_chain_add(c, url, &e), 0);
  xgr_chain_set_timeout(c, 300);
  json_t *res;
  assert_int_equal(xgr_chain_rpc(c, NULL, "eth_chainId", NULL, &res, NULL, &e), XGR_ETIMEOUT);
  assert_non_null(strstr(e.message, "300 ms"));
  xgr_chain_free(c);
  close(s);
}

/* ---- contract reads in rules ------------------------------------------------------------------- */

/* Run `rule` (with %TOKEN% replaced) on payload through reader r; returns the result JSON. */
static json_t *run_rule(const char *rule, const char *payload, const xgr_chain_reader *r, xgr_step_result *res) {
  char doc[8192];
  const char *p = strstr(rule, "%TOKEN%");
  size_t n = 0;
  const char *q = rule;
  while ((p = strstr(q, "%TOKEN%"))) {
    memcpy(doc + n, q, (size_t)(p - q));
    n += (size_t)(p - q);
    memcpy(doc + n, token, 42);
    n += 42;
    q = p + 7;
  }
  strcpy(doc + n, q);
  xgr_rule *ru;
  xgr_error e;
  if (xgr_rule_parse(doc, strlen(doc), &ru, &e)) fail_msg("rule: %s: %s", e.path, e.message);
  xgr_value pl;
  assert_int_equal(xgr_value_from_json_text(payload, strlen(payload), 0, &pl, &e), 0);
  xgr_step_ctx ctx = {.owner = node.accounts[0], .session_id = 1, .pid = "1:1", .step_id = "s", .chain = r};
  xgr_step_run(ru, pl, &ctx, NULL, res);
  json_t *j = xgr_step_result_to_json(res);
  xgr_step_result_free(res);
  xgr_value_release(pl);
  xgr_rule_free(ru);
  return j;
}

static const char *jstr(json_t *j, const char *path) {
  /* "extracted.Balance" style lookup */
  char buf[256];
  snprintf(buf, sizeof buf, "%s", path);
  json_t *cur = j;
  for (char *tok = strtok(buf, "."); tok && cur; tok = strtok(NULL, ".")) cur = json_object_get(cur, tok);
  static char out[512];
  if (!cur) return "(missing)";
  char *d = json_dumps(cur, JSON_ENCODE_ANY | JSON_COMPACT);
  snprintf(out, sizeof out, "%s", d);
  free(d);
  return out;
}

static const char balance_rule[] =
    "{\"payload\":{\"User\":{\"type\":\"address\"}},"
    "\"contractReads\":[{\"to\":\"%TOKEN%\",\"function\":\"balanceOf(address)\","
    "\"args\":[{\"type\":\"address\",\"value\":\"[User]\"}],"
    "\"saveAs\":{\"0\":{\"key\":\"Balance\",\"type\":\"uint256\",\"default\":\"0\"}}}],"
    "\"rules\":[\"[Balance] > 100\"],"
    "\"onValid\":{\"payload\":{\"rich\":true}},\"onInvalid\":{\"payload\":{\"rich\":false}}}";

static void check_balance(const xgr_chain_reader *r) {
  char pl[128];
  xgr_step_result res;
  snprintf(pl, sizeof pl, "{\"User\":\"%s\"}", node.accounts[1]);
  json_t *j = run_rule(balance_rule, pl, r, &res);
  assert_string_equal(jstr(j, "extracted.Balance"), "\"250\"");
  assert_string_equal(jstr(j, "valid"), "true");
  json_decref(j);
  snprintf(pl, sizeof pl, "{\"User\":\"%s\"}", node.accounts[2]);
  j = run_rule(balance_rule, pl, r, &res);
  assert_string_equal(jstr(j, "extracted.Balance"), "\"0\"");
  assert_string_equal(jstr(j, "valid"), "false");
  json_decref(j);
}

static void test_read_balance(void **st) {
  (void)st;
  xgr_chain_reader r = xgr_chain_reader_of(set);
  check_balance(&r);                                   /* resumable: reads handed out as requests */
  xgr_chain_reader sync = {.call = r.call, .ctx = r.ctx};
  check_balance(&sync);                                /* synchronous reader */
}

/* A tuple read: slots by index, declared return types; a uint256 saved as int64 that does not
 * fit takes its default (cast failure), an index past the end its default (out of range), and
 * the `rpc` selector picks a named backend. */
static const char tuple_rule[] =
    "{\"payload\":{},"
    "\"contractReads\":[{\"rpc\":\"main\",\"to\":\"%TOKEN%\",\"function\":\"info()(string,string,uint8,uint256,address[])\","
    "\"saveAs\":{\"0\":{\"key\":\"Name\",\"type\":\"string\"},"
    "\"2\":{\"key\":\"Decimals\",\"type\":\"uint64\"},"
    "\"3\":{\"key\":\"Supply\",\"type\":\"uint256\"},"
    "\"1\":{\"key\":\"SupplySmall\",\"type\":\"int64\",\"default\":-1},"
    "\"7\":{\"key\":\"Beyond\",\"type\":\"string\",\"default\":\"none\"}}},"
    "{\"to\":\"%TOKEN%\",\"function\":\"totalSupply()\","
    "\"saveAs\":{\"0\":{\"key\":\"Supply64\",\"type\":\"int64\",\"default\":42},"
    "\"1\":{\"key\":\"Second\",\"type\":\"uint64\",\"default\":7}}}],"
    "\"rules\":[\"[Decimals] == 18\"],"
    "\"onValid\":{\"payload\":{\"ok\":true}}}";

static void test_read_tuple(void **st) {
  (void)st;
  xgr_chain_reader r = xgr_chain_reader_of(set);
  xgr_step_result res;
  json_t *j = run_rule(tuple_rule, "{}", &r, &res);
  assert_string_equal(jstr(j, "extracted.Name"), "\"Test\"");
  assert_string_equal(jstr(j, "extracted.Decimals"), "18");
  assert_string_equal(jstr(j, "extracted.Supply"), "\"" SUPPLY "\"");
  assert_string_equal(jstr(j, "extracted.SupplySmall"), "-1");   /* "TST" is not an int64: cast failure */
  assert_string_equal(jstr(j, "extracted.Beyond"), "\"none\"");  /* out-of-range index */
  assert_string_equal(jstr(j, "extracted.Supply64"), "42");      /* 1e24 does not fit int64: cast failure */
  assert_string_equal(jstr(j, "extracted.Second"), "7");         /* one word returned: slot 1 out of range */
  assert_string_equal(jstr(j, "valid"), "true");
  json_decref(j);
}

/* Failures of the whole read: revert, unknown rpc selector, a dead backend; without a default
 * the key becomes soft-invalid and the valid branch is not taken. */
static const char fail_rule[] =
    "{\"payload\":{},"
    "\"contractReads\":["
    "{\"to\":\"%TOKEN%\",\"function\":\"fail(string)\",\"args\":[{\"type\":\"string\",\"value\":\"no way\"}],"
    "\"saveAs\":{\"0\":{\"key\":\"A\",\"type\":\"uint256\",\"default\":\"5\"}}},"
    "{\"rpc\":\"mars\",\"to\":\"%TOKEN%\",\"function\":\"decimals()\","
    "\"saveAs\":{\"0\":{\"key\":\"B\",\"type\":\"uint64\",\"default\":6}}},"
    "{\"rpc\":\"dead\",\"to\":\"%TOKEN%\",\"function\":\"decimals()\","
    "\"saveAs\":{\"0\":{\"key\":\"C\",\"type\":\"uint64\",\"default\":8}}},"
    "{\"to\":\"%TOKEN%\",\"function\":\"fail(string)\",\"args\":[{\"type\":\"string\",\"value\":\"again\"}],"
    "\"saveAs\":{\"0\":{\"key\":\"D\",\"type\":\"uint256\"}}}],"
    "\"rules\":[\"true\"],"
    "\"onValid\":{\"payload\":{\"branch\":\"valid\"}},\"onInvalid\":{\"payload\":{\"branch\":\"invalid\"}}}";

static void test_read_failures(void **st) {
  (void)st;
  xgr_chain_reader r = xgr_chain_reader_of(set);
  xgr_step_result res;
  json_t *j = run_rule(fail_rule, "{}", &r, &res);
  assert_string_equal(jstr(j, "extracted.A"), "\"5\"");
  assert_string_equal(jstr(j, "extracted.B"), "6");
  assert_string_equal(jstr(j, "extracted.C"), "8");
  assert_string_equal(jstr(j, "extracted.D"), "(missing)");
  assert_string_equal(jstr(j, "valid"), "false");
  assert_string_equal(jstr(j, "outputPayload.branch"), "\"invalid\"");
  char *d = json_dumps(j, JSON_COMPACT);
  if (!strstr(d, "execution reverted: no way")) fail_msg("revert reason missing: %s", d);
  if (!strstr(d, "rpc backend \\\"mars\\\" is not configured")) fail_msg("selector error missing: %s", d);
  if (!strstr(d, "\"D\"")) fail_msg("soft-invalid D missing: %s", d);
  free(d);
  json_decref(j);
  /* the dead backend's health counts the failed read (it never reached decode) */
  json_t *h = xgr_chain_health(set);
  size_t hi;
  json_t *hb;
  bool seen = false;
  json_array_foreach(h, hi, hb) if (json_is_string(json_object_get(hb, "name")) &&
                                    !strcmp(json_string_value(json_object_get(hb, "name")), "dead")) {
    seen = true;
    assert_true(json_integer_value(json_object_get(hb, "errors")) >= 1);
    assert_non_null(json_string_value(json_object_get(hb, "lastError")));
  }
  assert_true(seen);
  json_decref(h);

  /* no chain at all: "no backend configured", defaults apply */
  j = run_rule(fail_rule, "{}", NULL, &res);
  assert_string_equal(jstr(j, "extracted.A"), "\"5\"");
  d = json_dumps(j, JSON_COMPACT);
  assert_non_null(strstr(d, "no backend configured"));
  free(d);
  json_decref(j);
}

/* ---- signed EIP-1559 transactions ------------------------------------------------------------- */

/* anvil's well-known dev key #2 (account 0x3c44…93bc); the node accepts only correctly encoded and
 * signed transactions, and the receipt's `from` proves the signature recovers to that key. */
#define DEV_KEY2 "5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a"

static void test_tx_signed(void **st) {
  (void)st;
  xgr_secp *secp = xgr_secp_new();
  assert_non_null(secp);
  xgr_chain_sender s = {.chain = node.chain, .secp = secp};
  assert_int_equal(xgr_hex_decode("0x" DEV_KEY2, s.key, 32), 0);
  xgr_error e;
  assert_int_equal(xgr_chain_sender_init(&s, &e), 0);
  assert_string_equal(s.from, node.accounts[2]);
  assert_int_equal(s.chain_id, 31337);

  /* deterministic: the same transaction signs to the same bytes */
  xgr_tx1559 tx = {.chain_id = 31337, .nonce = 5, .max_priority_fee = 1, .max_fee = 2, .gas_limit = 21000, .has_to = true};
  uint8_t *r1, *r2, h1[32], h2[32];
  size_t l1, l2;
  assert_int_equal(xgr_tx1559_sign(secp, &tx, s.key, &r1, &l1, h1, &e), 0);
  assert_int_equal(xgr_tx1559_sign(secp, &tx, s.key, &r2, &l2, h2, &e), 0);
  assert_int_equal(l1, l2);
  assert_memory_equal(r1, r2, l1);
  assert_int_equal(r1[0], 0x02);
  free(r1);
  free(r2);

  /* account 2 has ether but no tokens: account 0 funds it through anvil, then account 2 sends
   * tokens with a signed transaction */
  char buf[160];
  snprintf(buf, sizeof buf, "[\"%s\", 1000]", node.accounts[2]);
  assert_int_equal(anvil_send(&node, 0, token, "transfer(address,uint256)", buf), 0);
  xgr_abi_sig *sig = NULL;
  assert_int_equal(xgr_abi_sig_parse("transfer(address,uint256)", 25, &sig, &e), 0);
  xgr_value args[2] = {xgr_value_cstring(node.accounts[3]), xgr_value_uint(400)};
  uint8_t *data;
  size_t dl;
  assert_int_equal(xgr_abi_encode_call(sig, args, 2, &data, &dl, &e), 0);
  char hash[67];
  json_t *rcpt;
  int rc = xgr_chain_send(&s, token, data, dl, 0, hash, &rcpt, &e);
  if (rc) fail_msg("send: %s", e.message);
  assert_string_equal(json_string_value(json_object_get(rcpt, "from")), node.accounts[2]);
  assert_string_equal(json_string_value(json_object_get(rcpt, "transactionHash")), hash);
  json_decref(rcpt);
  char *txt = anvil_balance(&node, token, node.accounts[3]);
  assert_string_equal(txt, "[\"400\"]");
  free(txt);
  free(data);

  /* more than the balance: estimation reverts with the contract's reason */
  xgr_value_release(args[1]);
  args[1] = xgr_value_uint(10000);
  assert_int_equal(xgr_abi_encode_call(sig, args, 2, &data, &dl, &e), 0);
  assert_int_equal(xgr_chain_send(&s, token, data, dl, 0, hash, NULL, &e), XGR_EEVAL);
  assert_non_null(strstr(e.message, "ERC20: insufficient balance"));
  /* with an explicit gas limit it is mined and reverts: status 0 */
  assert_int_equal(xgr_chain_send(&s, token, data, dl, 100000, hash, &rcpt, &e), XGR_EEVAL);
  assert_non_null(rcpt);
  assert_string_equal(json_string_value(json_object_get(rcpt, "status")), "0x0");
  json_decref(rcpt);
  free(data);
  xgr_value_release(args[0]);
  xgr_abi_sig_free(sig);
  xgr_secp_free(secp);
}

int main(void) {
  if (!anvil_test_begin()) return 77;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dialects),      cmocka_unit_test(test_backends),     cmocka_unit_test(test_rpc_live),
      cmocka_unit_test(test_timeout),       cmocka_unit_test(test_read_balance), cmocka_unit_test(test_read_tuple),
      cmocka_unit_test(test_read_failures), cmocka_unit_test(test_tx_signed),
  };
  return anvil_test_end(cmocka_run_group_tests(tests, setup, teardown));
}
