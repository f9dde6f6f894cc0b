/* test_cel_alloc.c — proves that evaluating a compiled program with a scalar result allocates
 * nothing: malloc/calloc/realloc are wrapped at link time (-Wl,--wrap) and counted around the
 * evaluation loop of the benchmark expressions: each must make none in 1000 evaluations. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/expect.h"
#include "xgr/cel.h"
#include "xgr/value.h"

static long allocs;
void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n) { allocs++; return __real_malloc(n); }
void *__wrap_calloc(size_t a, size_t b) { allocs++; return __real_calloc(a, b); }
void *__wrap_realloc(void *p, size_t n) { allocs++; return __real_realloc(p, n); }

int main(void) {
  const char *vars_json = "{\"PrevPrice\": 100.0, \"FetchedPrice\": 101.5, \"MaxDeltaPct\": 0.02,"
                          " \"Iter\": 41, \"A\": 100.0, \"B\": 100.4, \"C\": 97.0, \"S\": \"abc\"}";
  const char *exprs[] = {
    "([PrevPrice] == 0.0) || (abs([FetchedPrice] - [PrevPrice]) / [PrevPrice] <= [MaxDeltaPct])",
    "[Iter] + 1",
    "[S].startsWith('ab') && size([S]) == 3 && [S] == 'abc'",
    "relDiff([A], [B]) < 0.01 ? clamp([C], 98.0, 99.0) : safeDiv([A], 0.0, -1.0)",
    "quorum([[A], [B], [C]], \"rel\", 0.01, 2)",
    "consensus([A, B, C], \"rel\", \"pairwise\", \"mean\", 0.01, 2)",
  };
  xgr_value vars;
  xgr_error e;
  REQUIRE(xgr_value_from_json_text(vars_json, strlen(vars_json), 0, &vars, &e) == 0, "vars: %s", e.message);
  for (size_t i = 0; i < sizeof exprs / sizeof exprs[0]; i++) {
    xgr_cel_options o = xgr_cel_options_default(XGR_CEL_MODE_VALUE);
    xgr_cel_program *p;
    REQUIRE(xgr_cel_compile(exprs[i], (size_t)-1, &o, &p, &e) == 0, "%s: %s", exprs[i], e.message);
    xgr_cel_vars lv = xgr_cel_vars_map(vars, NULL);
    long before = allocs;
    for (int k = 0; k < 1000; k++) {
      xgr_value r;
      REQUIRE(xgr_cel_eval(p, &lv, &r, &e) == XGR_CEL_OK, "%s: %s", exprs[i], e.message);
      xgr_value_release(r);
    }
    long n = allocs - before;
    printf("%-90s %ld allocations in 1000 evaluations\n", exprs[i], n);
    EXPECT(n == 0, "%s: %ld allocations in 1000 evaluations", exprs[i], n);
    xgr_cel_program_free(p);
  }
  xgr_value_release(vars);
  return expect_done();
}
