/* fuzz_explore.c — libFuzzer target for `xgr explore` and its trace replay: the input is an
 * orchestration (explored from its first step with small bounds) followed, after a NUL byte, by a
 * replay file (a JSON trace, possibly malformed) applied to a driver on a bundle of that
 * orchestration whose every rule is valid. Any crash, leak or sanitizer report is a bug. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xgr/explore.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *nul = memchr(data, 0, size);
  size_t olen = nul ? (size_t)(nul - data) : size;
  xgr_orch *o = NULL;
  xgr_error e;
  if (xgr_orch_parse((const char *)data, olen, &o, &e, NULL)) return 0;
  xgr_explore_config cfg = {.max_states = 500, .max_steps = 20};
  json_t *r = NULL;
  if (!xgr_explore_run(o, NULL, o->steps[0].id, xgr_value_null(), &cfg, &r, &e)) {
    if (xgr_explore_has_error(r) && !json_array_size(json_object_get(r, "findings"))) abort();
    json_decref(r);
  }
  if (nul) {
    /* a bundle on the same steps, every rule valid */
    json_t *orch = json_loadb((const char *)data, olen, 0, NULL);
    json_t *file = json_loadb((const char *)nul + 1, size - olen - 1, 0, NULL);
    if (orch && file) {
      json_t *rules = json_object();
      json_t *structure = json_object_get(orch, "structure");
      const char *k;
      json_t *v;
      json_object_foreach(structure, k, v)
        if (json_is_object(v)) {
          const char *ref = json_string_value(json_object_get(v, "rule"));
          if (ref) json_object_set_new(rules, ref, json_pack("{s:{}, s:[s]}", "payload", "rules", "1 == 1"));
        }
      json_t *bj = json_pack("{s:O, s:o}", "orchestration", orch, "rules", rules);
      char *txt = json_dumps(bj, JSON_COMPACT);
      xgr_bundle *b = NULL;
      if (txt && !xgr_bundle_parse(txt, strlen(txt), &b, &e, NULL)) {
        xgr_driver_config dc = {.record = true, .max_steps = 100};
        xgr_driver *d = xgr_driver_new(&dc);
        if (!xgr_driver_add_session(d, b, "0x0000000000000000000000000000000000000001", 1, b->orch->steps[0].id,
                                    xgr_value_null(), &e))
          xgr_explore_replay(d, b, file, &e);
        json_decref(xgr_driver_report(d, 0));
        xgr_driver_free(d);
        xgr_bundle_free(b);
      }
      free(txt);
      json_decref(bj);
    }
    json_decref(orch);
    json_decref(file);
  }
  xgr_orch_free(o);
  return 0;
}
