/* fuzz_author.c — libFuzzer target for the author-facing checks of issue 15: arbitrary bytes as a
 * JSON document through the rule linter (unknown keys, template traps) and the --script parser
 * (unknown keys, callers), and as text through the URL masking of API outcomes. Any crash, leak or
 * sanitizer report is a bug; the masked URL must never be longer than the bound it promises. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rule/rule_impl.h"
#include "xgr/json.h"
#include "xgr/rule.h"
#include "xgr/script.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 65536) return 0;
  char *text = malloc(size + 1);
  if (!text) abort();
  memcpy(text, data, size);
  text[size] = '\0';
  char *masked = xgr_rule_mask_url(text);
  if (strlen(masked) > strlen(text) * 3 + 7) abort();
  free(masked);
  json_t *doc = NULL;
  xgr_error e;
  if (xgr_json_parse(text, size, &doc, &e) == 0) {
    xgr_diags d;
    xgr_diags_init(&d);
    xgr_rule_lint(doc, &d);
    xgr_diags_free(&d);
    xgr_script_action *acts = NULL;
    size_t n = 0;
    if (xgr_script_parse(doc, &acts, &n, &e) == 0) xgr_script_free(acts, n);
    json_decref(doc);
  }
  free(text);
  return 0;
}
