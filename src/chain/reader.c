/* reader.c — contract reads of the step engine over a chain set (XRC-137 spec §6).
 *
 * The reader is resumable: `prepare` ABI-encodes the call (selector + arguments, the XRC-cast
 * argument values mapped onto the signature's ABI types) into an eth_call request for the
 * backend the read's `rpc` selector names; the step engine hands it out as an HTTP request, so
 * the engine's multi loop performs it; `decode` reads the JSON-RPC answer. A signature with
 * return types ("slot0()(uint160,int24)") is decoded strictly by them; one without is decoded slot
 * by slot from the saveAs types (uint256 for a slot no entry saves), so a short answer leaves the
 * missing slots out of range and a slot that does not decode becomes null — both take the slot's
 * default (§6.4). The synchronous `call` runs the same two halves around a blocking POST, for
 * callers without a loop.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain/chain_impl.h"
#include "util/alloc.h"
#include "xgr/abi.h"

/* The ABI type a saveAs slot is decoded as when the signature declares no return types. */
static const char *slot_abi(xgr_xrc_type t) {
  switch (t) {
    case XGR_XRC_STRING:
    case XGR_XRC_UUID: return "string";
    case XGR_XRC_BOOL: return "bool";
    case XGR_XRC_INT64:
    case XGR_XRC_INT256: return "int256";
    case XGR_XRC_ADDRESS: return "address";
    case XGR_XRC_BYTES: return "bytes";
    case XGR_XRC_BYTES32: return "bytes32";
    default: return "uint256";
  }
}

static int chain_prepare(void *ctx, const xgr_chain_call *call, xgr_chain_post *post, xgr_error *e) {
  xgr_chain *c = ctx;
  backend *b = xgr__chain_backend(c, call->rpc);
  if (!b) {
    if (call->rpc && *call->rpc) return xgr_error_set(e, XGR_ENOTFOUND, NULL, "rpc backend \"%s\" is not configured", call->rpc);
    return xgr_error_set(e, XGR_ENOTFOUND, NULL, "no backend configured");
  }
  xgr_abi_sig *s = NULL;
  int rc = xgr_abi_sig_parse(call->function, strlen(call->function), &s, e);
  if (rc) return rc;
  uint8_t *data;
  size_t dl;
  rc = xgr_abi_encode_call(s, call->args, call->nargs, &data, &dl, e);
  xgr_abi_sig_free(s);
  if (rc) return rc;
  char *hex = xgr_hex_encode_alloc(data, dl);
  free(data);
  json_t *tx = json_pack("{s:s, s:s}", "to", call->to, "data", hex);
  free(hex);
  uint64_t id = atomic_fetch_add_explicit(&c->next_id, 1, memory_order_relaxed) + 1;
  post->body = xgr_chain_rpc_body("eth_call", json_pack("[o, s]", tx, "latest"), id, &post->body_len);
  post->url = xgr__xstrdup(b->url);
  post->timeout_ms = c->timeout_ms;
  return 0;
}

static int chain_decode(void *ctx, const xgr_chain_call *call, const char *body, size_t len, xgr_value *out,
                        xgr_error *e) {
  xgr_chain *c = ctx;
  *out = xgr_value_null();
  backend *b = xgr__chain_backend(c, call->rpc);
  json_t *res;
  int rc = xgr_chain_rpc_parse(body, len, &res, NULL, e);
  if (b) xgr__chain_note(b, rc == 0 || e->code == XGR_EEVAL, e->message);
  if (rc) return rc;
  const char *rs = json_string_value(res);
  size_t rawn = 0;
  uint8_t *raw = rs ? xgr_hex_decode_alloc(rs, strlen(rs), &rawn) : NULL;
  json_decref(res);
  if (!raw) return xgr_error_set(e, XGR_EHTTP, NULL, "eth_call result is not hex data");
  xgr_abi_sig *s = NULL;
  rc = xgr_abi_sig_parse(call->function, strlen(call->function), &s, e);
  if (rc == 0 && s->outputs) {
    rc = xgr_abi_decode(s->outputs, raw, rawn, out, e);
    if (rc) {
      char msg[XGR_MSG_MAX];
      snprintf(msg, sizeof msg, "%s", e->message);
      rc = xgr_error_set(e, XGR_EINVAL, NULL, "return data of %s does not decode: %s", call->function, msg);
    }
  } else if (rc == 0) {
    xgr_abi_type *items[1000];
    size_t n = call->nslots;
    assert(n <= 1000);
    for (size_t i = 0; i < n; i++) {
      const char *tn = slot_abi(i < call->nslots ? call->slot_types[i] : XGR_XRC_TYPE_COUNT_);
      if (xgr_abi_type_parse(tn, strlen(tn), &items[i], NULL)) abort();
    }
    xgr_abi_type *tup = xgr_abi_tuple_new(items, n);
    if (!tup) rc = xgr_error_set(e, XGR_ELIMIT, NULL, "saveAs slots too large");
    else xgr_abi_decode_slots(tup, raw, rawn, out);
    xgr_abi_type_free(tup);
  }
  xgr_abi_sig_free(s);
  free(raw);
  return rc;
}

static int chain_call_sync(void *ctx, const xgr_chain_call *call, xgr_value *out, xgr_error *e) {
  *out = xgr_value_null();
  xgr_chain_post post = {0};
  int rc = chain_prepare(ctx, call, &post, e);
  if (rc == 0) {
    char *resp;
    size_t rl;
    rc = xgr__chain_post(post.url, post.body, post.body_len, post.timeout_ms, &resp, &rl, e);
    if (rc == 0) {
      rc = chain_decode(ctx, call, resp, rl, out, e);
      free(resp);
    } else {
      backend *b = xgr__chain_backend(ctx, call->rpc);
      if (b) xgr__chain_note(b, false, e->message);
    }
  }
  free(post.url);
  free(post.body);
  return rc;
}

static void chain_failed(void *ctx, const xgr_chain_call *call, const char *why) {
  backend *b = xgr__chain_backend(ctx, call->rpc);
  if (b) xgr__chain_note(b, false, why);
}

xgr_chain_reader xgr_chain_reader_of(xgr_chain *c) {
  xgr_chain_reader r = {.call = chain_call_sync, .ctx = c, .prepare = chain_prepare, .decode = chain_decode,
                        .failed = chain_failed};
  return r;
}
