/* rule_util.h — the small helpers the rule tests (test_rule.c, test_rule_http.c) share: a rule
 * document parsed or the test failed, a JSON value, a payload key read, and the soft-invalid list
 * looked up. cmocka tests only (they fail the test with cmocka's asserts). */
#ifndef XGR_TEST_RULE_UTIL_H
#define XGR_TEST_RULE_UTIL_H

#include <stdbool.h>

#include "xgr/rule.h"

/* Parse a rule document (borrowed); fails the test, printing why, when it does not parse. The
 * caller frees the rule. */
xgr_rule *rt_load(const char *text);
/* A value from JSON text; fails the test when it does not parse. The caller owns the value. */
xgr_value rt_json(const char *json);
/* Map m's value at key k (borrowed), null when absent; and the same as a string (NULL: none). */
xgr_value rt_get(xgr_value m, const char *k);
const char *rt_gets(xgr_value m, const char *k);
/* Whether key is in the result's soft-invalid list. */
bool rt_has_soft(const xgr_step_result *r, const char *key);

#endif
