/* rule_util.c — the helpers of rule_util.h. */
#include "rule_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

xgr_rule *rt_load(const char *text) {
  xgr_rule *r = NULL;
  xgr_error e;
  int rc = xgr_rule_parse(text, strlen(text), &r, &e);
  if (rc) fprintf(stderr, "load: %s: %s\n", e.path, e.message);
  assert_int_equal(rc, 0);
  return r;
}

xgr_value rt_json(const char *json) {
  xgr_value v;
  xgr_error e;
  assert_int_equal(xgr_value_from_json_text(json, strlen(json), 0, &v, &e), 0);
  return v;
}

xgr_value rt_get(xgr_value m, const char *k) {
  xgr_value v = xgr_value_null();
  xgr_map_get_str(m, k, strlen(k), &v);
  return v;
}

const char *rt_gets(xgr_value m, const char *k) { return xgr_value_str(rt_get(m, k), NULL); }

bool rt_has_soft(const xgr_step_result *r, const char *key) {
  for (size_t i = 0; i < xgr_list_size(r->soft_invalid); i++)
    if (!strcmp(xgr_value_str(xgr_list_get(r->soft_invalid, i), NULL), key)) return true;
  return false;
}
