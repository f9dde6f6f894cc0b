/* fuzz_rule.c — libFuzzer target for XRC-137 rule documents: parse arbitrary bytes, and when they
 * load, run a step on a small payload through the resumable API, feeding each API call a canned
 * response (no network), and serialise the result. Any crash, leak or sanitizer report is a bug. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xgr/rule.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  xgr_rule *r = NULL;
  xgr_error e;
  if (xgr_rule_parse((const char *)data, size, &r, &e) != 0) return 0;
  static const char pl[] = "{\"A\":1,\"S\":\"x\",\"Iter\":0,\"Pi\":0.0,\"_from\":\"a\",\"__wakeUp\":{}}";
  xgr_value p;
  if (xgr_value_from_json_text(pl, sizeof pl - 1, 0, &p, &e)) abort();
  xgr_step_ctx ctx = {.owner = "0x0000000000000000000000000000000000000001", .session_id = 1, .pid = "1:1",
                      .step_id = "s"};
  xgr_step_state *st = xgr_step_begin(r, p, &ctx);
  static const char body[] = "{\"ok\":true,\"data\":{\"amount\":\"1.5\"},\"last\":\"2\",\"bitcoin\":{\"usd\":3}}";
  const xgr_http_request *rq;
  int n = 0;
  while ((rq = xgr_step_next_request(st)) != NULL) {
    if (!rq->url) abort();
    xgr_http_response resp = {.status = (n++ % 3) ? 200 : 500, .body = body, .body_len = sizeof body - 1};
    xgr_step_feed_http(st, &resp);
  }
  xgr_step_result res;
  xgr_step_finish(st, &res);
  json_t *j = xgr_step_result_to_json(&res);
  json_decref(j);
  xgr_step_result_free(&res);
  xgr_value_release(p);
  xgr_rule_free(r);
  return 0;
}
