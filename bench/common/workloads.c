/* workloads.c — the benchmark workloads (workloads.h). */
#include "workloads.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *pi_rule =
    "{\"onInvalid\":{},\"onValid\":{\"payload\":{\"Iter\":\"[Iter]+1\",\"Pi\":\"4.0*[S]\","
    "\"S\":\"[S]+pow(-1.0,double([Iter]))/(2.0*double([Iter])+1.0)\"},\"waitSec\":3600},"
    "\"payload\":{\"Iter\":{\"type\":\"int64\"},\"Pi\":{\"type\":\"double\"},\"S\":{\"type\":\"double\"}}}";

static xgr_bundle *load(const char *txt) {
  xgr_bundle *b = NULL;
  xgr_error e;
  if (xgr_bundle_parse(txt, strlen(txt), &b, &e, NULL)) {
    fprintf(stderr, "bench: bundle: %s: %s\n", e.path, e.message);
    exit(1);
  }
  return b;
}

xgr_bundle *bench_pi_loop_bundle(void) {
  char txt[2048];
  snprintf(txt, sizeof txt,
           "{\"orchestration\":{\"id\":\"IterationOfPi\",\"structure\":{\"PiIterationStep\":{\"rule\":\"pi\","
           "\"onValid\":{\"spawns\":[\"PiIterationStep\"]}}}},\"rules\":{\"pi\":%s}}", pi_rule);
  return load(txt);
}

xgr_bundle *bench_fanout_bundle(void) {
  char *txt = malloc(64 * 1024), *p = txt;
  if (!txt) abort();
  p += sprintf(p, "{\"orchestration\":{\"id\":\"fanout32\",\"structure\":{\"A\":{\"rule\":\"r\",\"onValid\":{\"spawns\":[");
  for (int i = 0; i < 32; i++) p += sprintf(p, "%s\"B%d\"", i ? "," : "", i);
  p += sprintf(p, "],\"join\":{\"joinid\":\"J\",\"mode\":\"all\",\"waitonjoin\":\"kill\",\"from\":[");
  for (int i = 0; i < 32; i++) p += sprintf(p, "%s{\"node\":\"B%d\",\"when\":\"valid\"}", i ? "," : "", i);
  p += sprintf(p, "]}}},\"J\":{\"rule\":\"r\"}");
  for (int i = 0; i < 32; i++) p += sprintf(p, ",\"B%d\":{\"rule\":\"r\"}", i);
  sprintf(p, "}},\"rules\":{\"r\":{\"payload\":{\"N\":{\"type\":\"int64\",\"default\":0}},\"rules\":[\"[N] >= 0\"],"
             "\"onValid\":{\"payload\":{\"N\":\"[N] + 1\"}}}}}");
  xgr_bundle *b = load(txt);
  free(txt);
  return b;
}

xgr_value bench_json(const char *txt) {
  xgr_value v;
  xgr_error e;
  if (xgr_value_from_json_text(txt, strlen(txt), 0, &v, &e)) {
    fprintf(stderr, "bench: JSON: %s\n", e.message);
    abort();
  }
  return v;
}
