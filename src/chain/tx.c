/* tx.c — RLP, EIP-1559 (type 2) transactions signed with xgr/secp.h, and the synchronous sender
 * of xgr/chain.h (nonce, gas estimation, fees, broadcast, receipt) used by tools and tests.
 *
 * RLP here only encodes, and only what transactions need: byte strings (integers as their minimal
 * big-endian bytes, zero as the empty string) and lists of those.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chain/chain_impl.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "xgr/abi.h"
#include "xgr/keccak.h"
#include "xgr/secp.h"

static void rlp_len_prefix(xgr_buf *b, uint8_t short_base, size_t n) {
  if (n < 56) {
    xgr__buf_putc(b, (char)(short_base + n));
    return;
  }
  uint8_t be[8];
  int k = 0;
  for (size_t v = n; v; v >>= 8) be[7 - k++] = (uint8_t)v;
  xgr__buf_putc(b, (char)(short_base + 55 + k));
  xgr__buf_put(b, be + 8 - k, (size_t)k);
}

static void rlp_bytes(xgr_buf *b, const uint8_t *p, size_t n) {
  if (n == 1 && p[0] < 0x80) {
    xgr__buf_putc(b, (char)p[0]);
    return;
  }
  rlp_len_prefix(b, 0x80, n);
  xgr__buf_put(b, p, n);
}

/* An integer given as big-endian bytes: leading zeros stripped. */
static void rlp_uint_be(xgr_buf *b, const uint8_t *p, size_t n) {
  while (n && !*p) p++, n--;
  rlp_bytes(b, p, n);
}

static void rlp_u64(xgr_buf *b, uint64_t v) {
  uint8_t be[8];
  for (int i = 0; i < 8; i++) be[7 - i] = (uint8_t)(v >> (8 * i));
  rlp_uint_be(b, be, 8);
}

/* The fields shared by the signing payload and the signed transaction. */
static void tx_fields(xgr_buf *b, const xgr_tx1559 *tx) {
  rlp_u64(b, tx->chain_id);
  rlp_u64(b, tx->nonce);
  rlp_u64(b, tx->max_priority_fee);
  rlp_u64(b, tx->max_fee);
  rlp_u64(b, tx->gas_limit);
  if (tx->has_to) rlp_bytes(b, tx->to, 20);
  else rlp_bytes(b, NULL, 0);
  rlp_uint_be(b, tx->value, 32);
  rlp_bytes(b, tx->data, tx->data_len);
  xgr__buf_putc(b, (char)0xc0);  /* empty access list */
}

/* 0x02 || rlp(list(fields)) */
static void typed_envelope(xgr_buf *out, const xgr_buf *fields) {
  xgr__buf_putc(out, 0x02);
  rlp_len_prefix(out, 0xc0, fields->len);
  xgr__buf_put(out, fields->p, fields->len);
}

int xgr_tx1559_sign(const xgr_secp *secp, const xgr_tx1559 *tx, const uint8_t key[32], uint8_t **raw, size_t *rawlen,
                    uint8_t hash[32], xgr_error *e) {
  *raw = NULL;
  *rawlen = 0;
  xgr_buf f = {0}, env = {0};
  tx_fields(&f, tx);
  typed_envelope(&env, &f);
  uint8_t digest[32], sig[65];
  xgr_keccak256(env.p, env.len, digest);
  free(env.p);
  int rc = xgr_secp_sign(secp, key, digest, sig, e);
  if (rc) {
    free(f.p);
    return rc;
  }
  rlp_u64(&f, (uint64_t)(sig[64] - 27));  /* yParity */
  rlp_uint_be(&f, sig, 32);
  rlp_uint_be(&f, sig + 32, 32);
  xgr_buf out = {0};
  typed_envelope(&out, &f);
  free(f.p);
  xgr_keccak256(out.p, out.len, hash);
  *raw = (uint8_t *)out.p;
  *rawlen = out.len;
  return 0;
}

/* ---- the synchronous sender ------------------------------------------------------------------ */

static int rpc_quantity(xgr_chain_sender *s, const char *method, json_t *params, uint64_t *out, xgr_error *e) {
  json_t *res;
  int rc = xgr_chain_rpc(s->chain, s->backend, method, params, &res, NULL, e);
  if (rc) return rc;
  bool ok = xgr_chain_quantity(res, out);
  json_decref(res);
  return ok ? 0 : xgr_error_set(e, XGR_EHTTP, NULL, "%s: the node's answer is not a quantity", method);
}

int xgr_chain_sender_init(xgr_chain_sender *s, xgr_error *e) {
  uint8_t addr[20];
  int rc = xgr_secp_address(s->secp, s->key, addr, e);
  if (rc) return rc;
  xgr_addr_hex(addr, s->from);
  if ((rc = rpc_quantity(s, "eth_chainId", NULL, &s->chain_id, e))) return rc;
  if ((rc = rpc_quantity(s, "eth_getTransactionCount", json_pack("[s, s]", s->from, "pending"), &s->nonce, e))) return rc;
  if (!s->receipt_timeout_ms) s->receipt_timeout_ms = 60000;
  s->ready = true;
  return 0;
}

/* maxFee and tip: eth_feeHistory (base fee of the next block, median tip), else eth_gasPrice. */
static int fees(xgr_chain_sender *s, uint64_t *max_fee, uint64_t *tip, xgr_error *e) {
  json_t *res;
  xgr_error fe;
  if (xgr_chain_rpc(s->chain, s->backend, "eth_feeHistory", json_pack("[i, s, [i]]", 1, "latest", 50), &res, NULL, &fe) == 0) {
    json_t *base = json_object_get(res, "baseFeePerGas");
    json_t *rw = json_array_get(json_object_get(res, "reward"), 0);
    uint64_t b = 0, t = 0;
    bool ok = xgr_chain_quantity(json_array_get(base, json_array_size(base) ? json_array_size(base) - 1 : 0), &b);
    if (!xgr_chain_quantity(json_array_get(rw, 0), &t)) t = 0;
    json_decref(res);
    if (ok) {
      if (t == 0) t = 1000000000;  /* 1 gwei when the node reports no tips */
      *tip = t;
      *max_fee = 2 * b + t;
      return 0;
    }
  }
  uint64_t gp;
  int rc = rpc_quantity(s, "eth_gasPrice", NULL, &gp, e);
  if (rc) return rc;
  *tip = gp;
  *max_fee = gp;
  return 0;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

void xgr_chain_signed_clear(xgr_chain_signed *t) {
  free(t->raw_hex);
  memset(t, 0, sizeof *t);
}

int xgr_chain_sign(xgr_chain_sender *s, const char *to, const uint8_t *data, size_t len, const uint8_t value[32],
                   uint64_t gas_limit, xgr_chain_signed *out, xgr_error *e) {
  memset(out, 0, sizeof *out);
  if (!s->ready) {
    int rc = xgr_chain_sender_init(s, e);
    if (rc) return rc;
  }
  xgr_tx1559 tx = {.chain_id = s->chain_id, .nonce = s->nonce, .data = data, .data_len = len};
  if (value) memcpy(tx.value, value, 32);
  if (to) {
    if (!xgr_xrc_is_address(to, strlen(to)) || xgr_hex_decode(to, tx.to, 20))
      return xgr_error_set(e, XGR_EINVAL, NULL, "transaction target \"%.60s\" is not an address", to);
    tx.has_to = true;
  }
  if (!gas_limit) {
    char *dhex = xgr_hex_encode_alloc(data, len);
    json_t *call = json_pack("{s:s, s:s}", "from", s->from, "data", dhex);
    free(dhex);
    if (to) json_object_set_new(call, "to", json_string(to));
    if (value) {
      char *vhex = xgr_hex_encode_alloc(value, 32);
      /* a quantity: no leading zeros */
      const char *p = vhex + 2;
      while (*p == '0' && p[1]) p++;
      char q[70];
      snprintf(q, sizeof q, "0x%s", p);
      json_object_set_new(call, "value", json_string(q));
      free(vhex);
    }
    uint64_t est;
    int rc = rpc_quantity(s, "eth_estimateGas", json_pack("[o]", call), &est, e);
    if (rc) return rc;
    gas_limit = est + est / 5;
  }
  tx.gas_limit = gas_limit;
  int rc = fees(s, &tx.max_fee, &tx.max_priority_fee, e);
  if (rc) return rc;
  uint8_t *raw, hash[32];
  size_t rl;
  if ((rc = xgr_tx1559_sign(s->secp, &tx, s->key, &raw, &rl, hash, e))) return rc;
  xgr_hex_encode(hash, 32, out->hash);
  out->raw_hex = xgr_hex_encode_alloc(raw, rl);
  out->nonce = tx.nonce;
  out->gas_limit = gas_limit;
  free(raw);
  s->nonce++;  /* the nonce is taken once signed: a re-broadcast reuses this transaction */
  return 0;
}

/* The receipt of hash, or NULL when not mined (yet). */
static int get_receipt(xgr_chain_sender *s, const char *hash, json_t **out, xgr_error *e) {
  json_t *res;
  int rc = xgr_chain_rpc(s->chain, s->backend, "eth_getTransactionReceipt", json_pack("[s]", hash), &res, NULL, e);
  if (rc) return rc;
  if (json_is_object(res)) *out = res;
  else {
    json_decref(res);
    *out = NULL;
  }
  return 0;
}

int xgr_chain_broadcast(xgr_chain_sender *s, const xgr_chain_signed *tx, json_t **receipt, xgr_error *e) {
  if (receipt) *receipt = NULL;
  json_t *res = NULL;
  int rc = xgr_chain_rpc(s->chain, s->backend, "eth_sendRawTransaction", json_pack("[s]", tx->raw_hex), &res, NULL, e);
  json_decref(res);
  if (rc) {
    /* sent before (a re-broadcast after a restart): the node knows it or has mined it */
    json_t *r = NULL;
    xgr_error e2;
    if (get_receipt(s, tx->hash, &r, &e2) == 0 && r) {
      json_decref(r);
    } else if (!strstr(e->message, "already known") && !strstr(e->message, "already imported")) {
      return rc;
    }
    xgr_error_clear(e);
  }
  long waited = 0;
  json_t *r = NULL;
  for (;;) {
    if ((rc = get_receipt(s, tx->hash, &r, e))) return rc;
    if (r) break;
    if (waited >= s->receipt_timeout_ms)
      return xgr_error_set(e, XGR_ETIMEOUT, NULL, "transaction %s not mined within %ld ms", tx->hash, s->receipt_timeout_ms);
    sleep_ms(50);
    waited += 50;
  }
  uint64_t status = 0;
  xgr_chain_quantity(json_object_get(r, "status"), &status);
  if (receipt) *receipt = r;
  else json_decref(r);
  if (status != 1) return xgr_error_set(e, XGR_EEVAL, NULL, "transaction %s reverted", tx->hash);
  return 0;
}

int xgr_chain_send(xgr_chain_sender *s, const char *to, const uint8_t *data, size_t len, uint64_t gas_limit,
                   char hash_hex[67], json_t **receipt, xgr_error *e) {
  if (receipt) *receipt = NULL;
  if (hash_hex) hash_hex[0] = 0;
  xgr_chain_signed tx;
  int rc = xgr_chain_sign(s, to, data, len, NULL, gas_limit, &tx, e);
  if (rc) return rc;
  if (hash_hex) memcpy(hash_hex, tx.hash, 67);
  rc = xgr_chain_broadcast(s, &tx, receipt, e);
  xgr_chain_signed_clear(&tx);
  return rc;
}
