/* fuzz_cel.c — libFuzzer target over the expression engine: the input's first byte picks the
 * mode (plain, rule, value, extract) and the rest is compiled and evaluated against a payload
 * with every value kind (resp bound too). The same bytes also go through the classifier, the
 * placeholder rewriter and the JSON reader/writer (round trip must be stable). Any crash, leak or
 * sanitizer report is a bug; errors are expected and fine. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xgr/cel.h"
#include "xgr/value.h"

static const char payload[] =
    "{\"A\": 1, \"B\": 2.5, \"C\": \"text\", \"D\": true, \"E\": null, \"U\": 18446744073709551615,"
    " \"Big\": 115792089237316195423570985008687907853269984665640564039457584007913129639935,"
    " \"L\": [1, 2.0, \"x\", [3], {\"k\": 4}], \"M\": {\"a\": 1, \"b\": [1, 2], \"c\": {\"d\": \"e\"}},"
    " \"P\": [100.0, 100.5, 99.9, 120.0], \"S\": [\"ABC\", \"ABD\", \"XYZ\"]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  xgr_cel_mode mode = (xgr_cel_mode)(data[0] % 4);
  const char *src = (const char *)data + 1;
  size_t len = size - 1;
  xgr_error e;
  xgr_value vars, resp;
  if (xgr_value_from_json_text(payload, sizeof payload - 1, 0, &vars, &e)) abort();
  if (xgr_value_from_json_text("{\"data\": {\"price\": \"12.5\", \"n\": 3}, \"items\": [1, 2]}", 52,
                               XGR_JSON_NUMBERS_AS_DOUBLE, &resp, &e))
    abort();

  (void)xgr_cel_classify(src, len);
  char *rw = NULL;
  if (xgr_cel_rewrite(src, len, &rw, &e) == 0) free(rw);

  xgr_cel_options o = xgr_cel_options_default(mode);
  o.max_cost = 200000;
  if (mode == XGR_CEL_MODE_PLAIN) o.max_expr_len = 4096;
  xgr_cel_program *p;
  if (xgr_cel_compile(src, len, &o, &p, &e) == 0) {
    xgr_cel_vars l_resp = xgr_cel_vars_one("resp", resp, NULL);
    xgr_cel_vars l_vars = xgr_cel_vars_map(vars, &l_resp);
    xgr_value r;
    int st = xgr_cel_eval(p, &l_vars, &r, &e);
    if (st == XGR_CEL_OK) {
      char *t = xgr_value_to_json_text(r, 0, NULL);
      char *s = xgr_value_render(r, NULL);
      free(s);
      free(t);
    }
    xgr_value_release(r);
    xgr_cel_program_free(p);
  }

  /* JSON reader on the raw bytes; a parsed value must print and re-read to the same text */
  xgr_value j;
  if (xgr_value_from_json_text(src, len, 0, &j, &e) == 0) {
    size_t n1, n2;
    char *t1 = xgr_value_to_json_text(j, 0, &n1);
    xgr_value j2;
    if (xgr_value_from_json_text(t1, n1, 0, &j2, &e) != 0) abort();
    char *t2 = xgr_value_to_json_text(j2, 0, &n2);
    if (n1 != n2 || memcmp(t1, t2, n1) != 0) abort();
    free(t1);
    free(t2);
    xgr_value_release(j2);
    xgr_value_release(j);
  }
  xgr_value_release(vars);
  xgr_value_release(resp);
  return 0;
}
