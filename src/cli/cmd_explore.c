/* cmd_explore.c — `xgr explore BUNDLE|ORCHESTRATION --start STEP ...`: explore every outcome and
 * every ordering of one session before it runs (xgr/explore.h) and print the reachable final
 * results and the findings with their shortest traces (or the JSON). --emit DIR writes each trace
 * as a file that `xgr run BUNDLE --virtual-time --replay FILE` turns back into the same run.
 * Exit: 0 no error finding, 1 an error finding, 2 usage or unreadable input, 3 the file does not
 * load. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/load.h"
#include "xgr/bundle.h"
#include "xgr/explore.h"
#include "xgr/json.h"

static void usage(FILE *f) {
  fputs("usage: xgr explore BUNDLE|ORCHESTRATION --start STEP [--payload JSON]\n"
        "                   [--outcomes valid,invalid,error] [--rules] [--max-steps N] [--max-states N]\n"
        "                   [--json] [--emit DIR]\n\n"
        "Run the real session core on every choice a session can meet: each step execution's outcome\n"
        "(from --outcomes; the payload passes through), every order in which concurrently runnable\n"
        "processes are promoted and finish, kill races both ways (a waiting producer killed, or already\n"
        "running and finishing), and timers in their order. Prints the reachable final results and the\n"
        "findings, each with the shortest trace that shows it:\n"
        "  join_unfulfillable  a join can end unfulfillable (error: it is never satisfied)\n"
        "  join_undecided      a join can stay open forever\n"
        "  step_unreachable    a step never runs (error when the exploration is complete)\n"
        "  stall               the session can stop with processes still waiting\n"
        "  unbounded_loop      a loop can run forever without a waitSec\n"
        "  timing_dependent    the same step outcomes can end with different results\n"
        "A finding that only a step forced to end invalid or to fail shows is info and says so\n"
        "(\"... only if step X fails\"); so is a timing difference only in which pieces a join took\n"
        "(the race its k of n declares). xgr check reports the same findings.\n\n"
        "  --payload JSON      start payload (an object, or @FILE to read it from FILE; default {})\n"
        "  --outcomes LIST     outcomes a step execution can have (default valid,invalid,error)\n"
        "  --rules             evaluate each step's rule on its payload (bundles only); steps whose\n"
        "                      rules make API calls still take every outcome of --outcomes\n"
        "  --max-steps N       step executions along one path (default 200)\n"
        "  --max-states N      distinct states (default 200000); a cut exploration says complete: false\n"
        "  --json              {\"states\",\"complete\",\"results\":[{\"result\",\"count\"}],\"findings\":[{\"kind\",\n"
        "                      \"severity\",\"step\"?,\"join\"?,\"message\",\"trace\",\"onlyIf\"?}],...}\n"
        "  --emit DIR          write each finding's trace to DIR/NN-KIND.json for\n"
        "                      `xgr run BUNDLE --virtual-time --replay FILE`\n\n"
        "Exit: 0 no error finding, 1 a finding with severity error, 2 usage or unreadable input,\n"
        "3 the file does not load.\n",
        f);
}

void xgr_cli_print_trace(const json_t *tr) {
  size_t i;
  json_t *a;
  json_array_foreach(tr, i, a) {
    if (json_object_get(a, "advance"))
      printf("      %2zu. clock → %lldms\n", i + 1, (long long)json_integer_value(json_object_get(a, "advance")));
    else if (json_object_get(a, "promote"))
      printf("      %2zu. start  %-8s %s\n", i + 1, json_string_value(json_object_get(a, "promote")),
             json_string_value(json_object_get(a, "step")));
    else
      printf("      %2zu. finish %-8s %s %s%s\n", i + 1, json_string_value(json_object_get(a, "finish")),
             json_string_value(json_object_get(a, "step")), json_string_value(json_object_get(a, "outcome")),
             strcmp(json_string_value(json_object_get(a, "by")) ?: "", "rule") ? "" : " (rule)");
  }
}

static int write_json(const char *path, json_t *j) {
  char *txt = xgr_json_dumps(j, XGR_JSON_PRETTY);
  FILE *f = fopen(path, "w");
  if (!f || !txt) {
    free(txt);
    if (f) fclose(f);
    return -1;
  }
  fputs(txt, f);
  fputc('\n', f);
  free(txt);
  return fclose(f);
}

/* One replay file per trace: {"replay":{...},"finding":{...},"trace":[...]}. */
static int emit(const char *dir, const json_t *r) {
  if (mkdir(dir, 0777) && errno != EEXIST) {
    fprintf(stderr, "xgr explore: --emit %s: %s\n", dir, strerror(errno));
    return -1;
  }
  size_t i, n = 0;
  json_t *f;
  json_array_foreach(json_object_get(r, "findings"), i, f) {
    const char *kind = json_string_value(json_object_get(f, "kind"));
    const char *step = json_string_value(json_object_get(f, "step"));
    n++;
    for (int other = 0; other < 2; other++) {
      json_t *tr = json_object_get(f, other ? "otherTrace" : "trace");
      if (!tr || !json_array_size(tr)) continue;   /* step_unreachable has no trace */
      json_t *fd = json_deep_copy(f);
      json_object_del(fd, "trace");
      json_object_del(fd, "otherTrace");
      json_t *file = json_pack("{s:O, s:o, s:O, s:s}", "replay", json_object_get(r, "replay"), "finding", fd, "trace", tr,
                               "which", other ? "otherTrace" : "trace");
      char path[4096];
      snprintf(path, sizeof path, "%s/%02zu-%s%s%s%s.json", dir, n, kind, step ? "-" : "", step ? step : "", other ? "-other" : "");
      int rc = write_json(path, file);
      json_decref(file);
      if (rc) {
        fprintf(stderr, "xgr explore: cannot write %s\n", path);
        return -1;
      }
    }
  }
  return 0;
}

int xgr_cmd_explore(int argc, char **argv) {
  const char *start = NULL, *payload_s = NULL, *emit_dir = NULL;
  xgr_explore_config cfg = {0};
  int as_json = 0;
  static const struct option opts[] = {
    {"start", required_argument, NULL, 's'}, {"payload", required_argument, NULL, 'p'},
    {"outcomes", required_argument, NULL, 'o'}, {"max-steps", required_argument, NULL, 'm'},
    {"max-states", required_argument, NULL, 'M'}, {"json", no_argument, NULL, 'j'}, {"rules", no_argument, NULL, 'r'},
    {"emit", required_argument, NULL, 'e'}, {"help", no_argument, NULL, 'h'}, {0, 0, 0, 0}};
  int ch;
  optind = 1;
  xgr_error e;
  while ((ch = xgr_cli_getopt(argc, argv, "s:p:o:m:M:jre:h", opts, "xgr explore")) != -1) {
    switch (ch) {
      case 's': start = optarg; break;
      case 'p': payload_s = optarg; break;
      case 'j': as_json = 1; break;
      case 'r': cfg.rules = true; break;
      case 'e': emit_dir = optarg; break;
      case 'o':
        if (xgr_explore_parse_outcomes(optarg, &cfg.outcomes, &e)) {
          fprintf(stderr, "xgr explore: %s\n", e.message);
          return XGR_EXIT_USAGE;
        }
        break;
      case 'm':
      case 'M': {
        char *end;
        long long v = strtoll(optarg, &end, 10);
        if (*end || v < 1 || v > 100000000) {
          fprintf(stderr, "xgr explore: --%s is '%s'; expected an integer from 1 to 100000000\n",
                  ch == 'm' ? "max-steps" : "max-states", optarg);
          return XGR_EXIT_USAGE;
        }
        if (ch == 'm') cfg.max_steps = (uint64_t)v;
        else cfg.max_states = (size_t)v;
        break;
      }
      case 'h': usage(stdout); return XGR_EXIT_OK;
      default: return XGR_EXIT_USAGE;   /* reported by xgr_cli_getopt */
    }
  }
  if (optind != argc - 1 || !start) {
    fprintf(stderr, "xgr explore: %s\n", !start ? "--start STEP is required" : "exactly one BUNDLE or ORCHESTRATION is expected");
    usage(stderr);
    return XGR_EXIT_USAGE;
  }
  const char *file = argv[optind];
  xgr_value payload = xgr_value_null();
  if (payload_s && xgr_cli_value_arg("xgr explore", "--payload", payload_s, 0, true, &payload)) return XGR_EXIT_USAGE;
  char *buf;
  size_t len;
  if (xgr_file_read(file, &buf, &len, 64u << 20, &e)) {
    fprintf(stderr, "xgr explore: %s: %s\n", file, e.message);
    xgr_value_release(payload);
    return XGR_EXIT_USAGE;
  }
  xgr_diags d;
  xgr_diags_init(&d);
  xgr_bundle *b = NULL;
  xgr_orch *o = NULL;
  int rc = xgr_bundle_detect(buf, len) ? xgr_bundle_parse(buf, len, &b, &e, &d) : xgr_orch_parse(buf, len, &o, &e, &d);
  free(buf);
  if (rc) {
    cli_print_errors(stderr, file, &d);
    xgr_diags_free(&d);
    xgr_bundle_free(b);
    xgr_orch_free(o);
    xgr_value_release(payload);
    return XGR_EXIT_HARD;
  }
  xgr_diags_free(&d);
  cli_warn_undeclared_start("xgr explore", "--payload", payload, b, start);
  json_t *r = NULL;
  if (xgr_explore_run(b ? b->orch : o, b, start, payload, &cfg, &r, &e)) {
    fprintf(stderr, "xgr explore: %s%s%s\n", e.path[0] ? "--" : "", e.path[0] ? e.path : "", e.path[0] ? ": " : "");
    fprintf(stderr, "xgr explore: %s\n", e.message);
    xgr_bundle_free(b);
    xgr_orch_free(o);
    xgr_value_release(payload);
    return XGR_EXIT_USAGE;
  }
  int code = xgr_explore_has_error(r) ? XGR_EXIT_FAIL : XGR_EXIT_OK;
  if (emit_dir && emit(emit_dir, r)) code = XGR_EXIT_USAGE;
  if (as_json) {
    char *txt = xgr_json_dumps(r, XGR_JSON_PRETTY);
    if (txt) puts(txt);
    free(txt);
  } else {
    printf("%s: %lld states, %lld transitions, %s, %.3f s; at most %lld live processes\n", file,
           (long long)json_integer_value(json_object_get(r, "states")),
           (long long)json_integer_value(json_object_get(r, "transitions")),
           json_is_true(json_object_get(r, "complete")) ? "complete" : "INCOMPLETE (bounds reached)",
           json_real_value(json_object_get(r, "seconds")),
           (long long)json_integer_value(json_object_get(json_object_get(r, "maxLive"), "count")));
    printf("final results:\n");
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(r, "results"), i, x) {
      printf("  %-10s ×%-5lld", json_string_value(json_object_get(x, "result")),
             (long long)json_integer_value(json_object_get(x, "count")));
      size_t k;
      json_t *j;
      json_array_foreach(json_object_get(x, "joins"), k, j) {
        printf("%s%s %s", k ? ", " : " ", json_string_value(json_object_get(j, "join")),
               json_string_value(json_object_get(j, "outcome")));
        size_t q;
        json_t *pc;
        json_array_foreach(json_object_get(j, "pieces"), q, pc) printf("%s%s", q ? "+" : " from ", json_string_value(pc));
      }
      printf("\n");
    }
    size_t nf = json_array_size(json_object_get(r, "findings"));
    printf("%zu finding%s%s\n", nf, nf == 1 ? "" : "s", nf ? ":" : "");
    json_array_foreach(json_object_get(r, "findings"), i, x) {
      printf("  %s %s: %s\n", json_string_value(json_object_get(x, "severity")), json_string_value(json_object_get(x, "kind")),
             json_string_value(json_object_get(x, "message")));
      if (json_array_size(json_object_get(x, "trace"))) {
        printf("    trace:\n");
        xgr_cli_print_trace(json_object_get(x, "trace"));
      }
      if (json_object_get(x, "otherTrace")) {
        printf("    other trace:\n");
        xgr_cli_print_trace(json_object_get(x, "otherTrace"));
      }
    }
  }
  json_decref(r);
  xgr_bundle_free(b);
  xgr_orch_free(o);
  xgr_value_release(payload);
  return code;
}
