/* fuzz_orch.c — libFuzzer target for the orchestration parser: parse arbitrary bytes, and when
 * they load, run the analysis and both diagram writers. Any crash, leak or sanitizer report is
 * a bug. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "xgr/orch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  xgr_orch *o = NULL;
  xgr_error e;
  xgr_diags d;
  xgr_diags_init(&d);
  if (xgr_orch_parse((const char *)data, size, &o, &e, &d) == 0) {
    xgr_orch_analyze(o, &d);
    FILE *f = fopen("/dev/null", "w");
    if (f) {
      xgr_orch_graph(o, XGR_GRAPH_MERMAID, f);
      xgr_orch_graph(o, XGR_GRAPH_DOT, f);
      fclose(f);
    }
    for (size_t i = 0; i < o->nsteps; i++)
      if (xgr_orch_find(o, o->steps[i].id) != (int)i) abort();
    xgr_orch_free(o);
  }
  xgr_diags_free(&d);
  return 0;
}
