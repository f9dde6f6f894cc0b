/* exec.c — executions of XRC-137 §8.3 on a real chain (xgr/chain.h): the resolved execution of a
 * step becomes a signed EIP-1559 transaction (tx.c); settling it broadcasts it, waits for the
 * receipt and records {"txHash","status","gasUsed","blockNumber","return"|"revertReason"}. The
 * return value and the revert reason come from replaying the same call at the parent block
 * (eth_call), since receipts carry neither.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain/chain_impl.h"
#include "util/alloc.h"
#include "xgr/abi.h"

/* Call data and value of x. */
static int exec_data(const xgr_execution *x, xgr_abi_sig **sig, uint8_t **data, size_t *len, uint8_t value[32],
                     bool *has_value, xgr_error *e) {
  *sig = NULL;
  *data = NULL;
  *len = 0;
  *has_value = false;
  int rc;
  if (x->function) {
    if ((rc = xgr_abi_sig_parse(x->function, strlen(x->function), sig, e))) return rc;
    xgr_value args[XGR_MAX_EXEC_ARGS];
    for (size_t i = 0; i < x->nargs && i < XGR_MAX_EXEC_ARGS; i++) args[i] = x->args[i].value;
    if ((rc = xgr_abi_encode_call(*sig, args, x->nargs, data, len, e))) {
      xgr_abi_sig_free(*sig);
      *sig = NULL;
      return rc;
    }
  }
  if (x->has_value) {
    xgr_abi_type *t = NULL;
    if (xgr_abi_type_parse("(uint256)", 9, &t, e)) abort();
    uint8_t *w;
    size_t wl;
    rc = xgr_abi_encode(t, &x->value.value, 1, &w, &wl, e);
    xgr_abi_type_free(t);
    if (rc) {
      xgr_abi_sig_free(*sig);
      *sig = NULL;
      free(*data);
      *data = NULL;
      return xgr_error_set(e, XGR_EINVAL, "execution.value", "execution value is not a wei amount (uint256)");
    }
    memcpy(value, w, 32);
    free(w);
    *has_value = true;
  }
  return 0;
}

int xgr_chain_exec_sign(xgr_chain_sender *s, const xgr_execution *x, xgr_chain_signed *out, xgr_error *e) {
  xgr_abi_sig *sig = NULL;
  uint8_t *data, value[32];
  size_t len;
  bool hv;
  int rc = exec_data(x, &sig, &data, &len, value, &hv, e);
  if (rc) return rc;
  rc = xgr_chain_sign(s, x->to, data, len, hv ? value : NULL, x->has_gas ? x->gas_limit : 0, out, e);
  xgr_abi_sig_free(sig);
  free(data);
  return rc;
}

json_t *xgr_chain_exec_refused(const xgr_error *e) {
  const char *m = e->message;
  const char *p = strstr(m, "execution reverted: ");
  return json_pack("{s:n, s:s, s:s, s:b}", "txHash", "status", "reverted", "revertReason", p ? p + 20 : m, "sent", 0);
}

/* A quantity from 32-byte big-endian hex: "0x" and no leading zeros. */
static void quantity_of(const char *hex32, char q[70]) {
  const char *p = hex32 + 2;
  while (*p == '0' && p[1]) p++;
  snprintf(q, 70, "0x%s", p);
}

/* eth_call of (to, data, value) from the sender at block `tag`. */
static int replay(xgr_chain_sender *s, const char *to, const char *data_hex, const char *value_hex, const char *tag,
                  json_t **res, xgr_error *e) {
  json_t *call = json_pack("{s:s, s:s, s:s}", "from", s->from, "to", to, "data", data_hex);
  if (value_hex) {
    char q[70];
    quantity_of(value_hex, q);
    json_object_set_new(call, "value", json_string(q));
  }
  return xgr_chain_rpc(s->chain, s->backend, "eth_call", json_pack("[o, s]", call, tag), res, NULL, e);
}

json_t *xgr__chain_settle(xgr_chain_sender *s, const char *to, const char *data_hex, const char *value_hex,
                          const char *function, const xgr_chain_signed *tx) {
  json_t *rcpt = NULL;
  xgr_error e;
  xgr_error_clear(&e);
  int rc = xgr_chain_broadcast(s, tx, &rcpt, &e);
  json_t *rec = json_pack("{s:s}", "txHash", tx->hash);
  if (!rcpt) {
    json_object_set_new(rec, "status", json_string("pending"));
    json_object_set_new(rec, "error", json_string(e.message));
    return rec;
  }
  uint64_t gas = 0, blk = 0;
  xgr_chain_quantity(json_object_get(rcpt, "gasUsed"), &gas);
  xgr_chain_quantity(json_object_get(rcpt, "blockNumber"), &blk);
  json_decref(rcpt);
  bool ok = rc == 0;
  json_object_set_new(rec, "status", json_string(ok ? "success" : "reverted"));
  json_object_set_new(rec, "gasUsed", json_integer((json_int_t)gas));
  json_object_set_new(rec, "blockNumber", json_integer((json_int_t)blk));
  char tag[24];
  snprintf(tag, sizeof tag, "0x%llx", (unsigned long long)(blk ? blk - 1 : 0));
  json_t *res = NULL;
  xgr_error re;
  xgr_error_clear(&re);
  int rr = replay(s, to, data_hex, value_hex, tag, &res, &re);
  if (ok) {
    xgr_abi_sig *sig = NULL;
    if (rr == 0 && function && xgr_abi_sig_parse(function, strlen(function), &sig, &re) == 0 && sig->outputs) {
      const char *hex = json_string_value(res);
      size_t n;
      uint8_t *raw = hex ? xgr_hex_decode_alloc(hex, strlen(hex), &n) : NULL;
      xgr_value v;
      if (raw && xgr_abi_decode(sig->outputs, raw, n, &v, &re) == 0) {
        json_object_set_new(rec, "return", xgr_value_to_json(xgr_list_size(v) == 1 ? xgr_list_get(v, 0) : v));
        xgr_value_release(v);
      }
      free(raw);
    }
    xgr_abi_sig_free(sig);
  } else {
    const char *p = rr ? strstr(re.message, "execution reverted: ") : NULL;
    json_object_set_new(rec, "revertReason", json_string(p ? p + 20 : rr ? re.message : "reverted without a reason"));
  }
  json_decref(res);
  return rec;
}

json_t *xgr_chain_exec_settle(xgr_chain_sender *s, const xgr_execution *x, const xgr_chain_signed *tx) {
  xgr_abi_sig *sig;
  uint8_t *data, value[32];
  size_t len;
  bool hv;
  xgr_error e;
  if (exec_data(x, &sig, &data, &len, value, &hv, &e))
    return json_pack("{s:s, s:s, s:s}", "txHash", tx->hash, "status", "pending", "error", e.message);
  xgr_abi_sig_free(sig);
  char *dhex = xgr_hex_encode_alloc(data ? data : (const uint8_t *)"", len);
  char *vhex = hv ? xgr_hex_encode_alloc(value, 32) : NULL;
  free(data);
  json_t *rec = xgr__chain_settle(s, x->to, dhex, vhex, x->function, tx);
  free(dhex);
  free(vhex);
  return rec;
}
