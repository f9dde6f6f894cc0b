/* cmd_check.c — `xgr check FILE...`: load each orchestration (or bundle), run the static
 * analysis and report every finding. Exit 0 clean or warnings only, 1 errors, 2 usage or
 * unreadable input. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/load.h"
#include "xgr/explore.h"

static void usage(FILE *f) {
  fputs("usage: xgr check [--json] [--quiet] [--no-explore] FILE...\n\n"
        "Validate XRC-729 orchestrations, XRC-137 rule documents and bundles (an orchestration with\n"
        "its rules): schema, the caps of docs/RULE_FORMAT.md, references, join thresholds, joins that can\n"
        "never be satisfied, unknown keys (with the nearest known one) and templates that look like\n"
        "arithmetic. The kind of each FILE is told by its keys.\n"
        "Prints `file: path: severity: message [code]` lines and a summary.\n\n"
        "  --json    one JSON object per file: {\"file\",\"ok\",\"hash\",\"errors\":[{\"path\",\"code\",\"message\"}],\n"
        "            \"warnings\":[...],\"info\":[...]}\n"
        "  --quiet   print errors only (and the summary)\n"
        "  --no-explore  skip the bounded exploration (xgr explore from every start step, with\n"
        "            forced outcomes and the bundle's waitSec, at most 1 s per file and as long again\n"
        "            for the re-checks), whose findings are reported with codes explore_<kind>: as\n"
        "            info when only a step forced to end invalid or to fail shows it (\"only if step\n"
        "            X fails\") or when it is the race a join declares, else as warnings\n\n"
        "Exit: 0 clean or warnings only, 1 errors, 2 usage or unreadable input.\n",
        f);
}

static json_t *diag_array(const xgr_diags *d, xgr_severity sev) {
  json_t *a = json_array();
  for (size_t i = 0; i < d->n; i++) {
    if (d->items[i].severity != sev) continue;
    json_array_append_new(a, json_pack("{s:s, s:s, s:s}", "path", d->items[i].path, "code",
                                       d->items[i].code, "message", d->items[i].message));
  }
  return a;
}

/* The bounded exploration of `xgr check`: from every step no other step spawns or joins into, what
 * `xgr explore FILE --start STEP` finds (a bundle's rules give the waitSec of forced outcomes), in
 * a time budget; each finding becomes a diagnostic explore_<kind>: info when the explorer says so
 * (a finding only some step forced to end invalid or fail shows, a race a join declares), else a
 * warning. */
static void explore_warnings(const xgr_orch *o, const xgr_bundle *bundle, xgr_diags *d) {
  bool target[XGR_MAX_STEPS] = {0};
  for (size_t i = 0; i < o->nsteps; i++)
    for (int br = 0; br < 2; br++) {
      const xgr_branch *b = &o->steps[i].branch[br];
      for (unsigned k = 0; k < b->nspawns; k++)
        if (b->spawns[k] != i) target[b->spawns[k]] = true;   /* a step that spawns itself can still start */
      if (b->join && b->join->target != i) target[b->join->target] = true;
    }
  size_t nstarts = 0;
  for (size_t i = 0; i < o->nsteps; i++) nstarts += !target[i];
  for (size_t i = 0; i < o->nsteps; i++) {
    if (target[i]) continue;
    xgr_explore_config cfg = {.max_states = 50000, .time_budget = 1.0 / (double)nstarts};
    json_t *r = NULL;
    xgr_error e;
    if (xgr_explore_run(o, bundle, o->steps[i].id, xgr_value_null(), &cfg, &r, &e)) continue;
    size_t k;
    json_t *f;
    json_array_foreach(json_object_get(r, "findings"), k, f) {
      const char *kind = json_string_value(json_object_get(f, "kind"));
      if (!strcmp(kind, "step_unreachable") && !json_is_true(json_object_get(r, "complete"))) continue;
      if (!strcmp(kind, "step_unreachable") && nstarts > 1) continue;   /* another start may run it */
      const char *step = json_string_value(json_object_get(f, "step"));
      static const char *const codes[] = {"explore_join_unfulfillable", "explore_join_undecided", "explore_step_unreachable",
                                          "explore_stall", "explore_unbounded_loop", "explore_timing_dependent"};
      const char *code = "explore";
      for (size_t c = 0; c < sizeof codes / sizeof *codes; c++)
        if (!strcmp(codes[c] + 8, kind)) code = codes[c];   /* diags keep the code by pointer */
      char path[XGR_PATH_MAX];
      if (step) snprintf(path, sizeof path, "structure.%s", step);
      else path[0] = '\0';
      bool info = !strcmp(json_string_value(json_object_get(f, "severity")), "info");
      xgr_diags_add(d, info ? XGR_SEV_INFO : XGR_SEV_WARNING, code, path, "from %s%s: %s (xgr explore --start %s shows the trace)",
                    o->steps[i].id, json_is_true(json_object_get(r, "complete")) ? "" : ", exploration cut by its time budget",
                    json_string_value(json_object_get(f, "message")), o->steps[i].id);
    }
    json_decref(r);
  }
}

int xgr_cmd_check(int argc, char **argv) {
  int as_json = 0, quiet = 0, no_explore = 0;
  static const struct option opts[] = {
    {"json", no_argument, NULL, 'j'}, {"quiet", no_argument, NULL, 'q'}, {"help", no_argument, NULL, 'h'},
    {"no-explore", no_argument, NULL, 'X'}, {0, 0, 0, 0}};
  int ch;
  optind = 1;
  while ((ch = xgr_cli_getopt(argc, argv, "jqh", opts, "xgr check")) != -1) {
    switch (ch) {
      case 'j': as_json = 1; break;
      case 'q': quiet = 1; break;
      case 'X': no_explore = 1; break;
      case 'h': usage(stdout); return XGR_EXIT_OK;
      default: return XGR_EXIT_USAGE;   /* reported by xgr_cli_getopt */
    }
  }
  if (optind >= argc) {
    fputs("xgr check: no FILE given\n", stderr);
    usage(stderr);
    return XGR_EXIT_USAGE;
  }
  size_t tot_err = 0, tot_warn = 0, bad_files = 0;
  int unreadable = 0;
  for (int a = optind; a < argc; a++) {
    const char *file = argv[a];
    xgr_diags d;
    xgr_diags_init(&d);
    cli_doc doc;
    cli_load_orch(file, &doc, &d);
    unreadable |= doc.io_error;
    if (doc.orch) {
      size_t before = d.n;
      xgr_orch_analyze(doc.orch, &d);
      if (!no_explore) explore_warnings(doc.orch, doc.bundle, &d);
      if (doc.is_bundle) xgr_diags_prefix(&d, before, "orchestration");   /* relative to the bundle */
    }
    size_t ne = xgr_diags_count(&d, XGR_SEV_ERROR), nw = xgr_diags_count(&d, XGR_SEV_WARNING);
    tot_err += ne;
    tot_warn += nw;
    bad_files += ne > 0;
    if (as_json) {
      json_t *o = json_pack("{s:s, s:b, s:s?, s:o, s:o, s:o}", "file", file, "ok", ne == 0, "hash",
                            doc.orch ? doc.orch->hash : NULL, "errors", diag_array(&d, XGR_SEV_ERROR),
                            "warnings", diag_array(&d, XGR_SEV_WARNING), "info", diag_array(&d, XGR_SEV_INFO));
      char *s = json_dumps(o, JSON_COMPACT);
      if (s) puts(s);
      free(s);
      json_decref(o);
    } else {
      static const char *const sev_name[] = {"error", "warning", "info"};
      for (size_t i = 0; i < d.n; i++) {
        const xgr_diag *g = &d.items[i];
        if (quiet && g->severity != XGR_SEV_ERROR) continue;
        printf("%s: %s: %s: %s [%s]\n", file, g->path[0] ? g->path : "(document)", sev_name[g->severity],
               g->message, g->code);
      }
      if (doc.is_rule && !quiet)
        printf("%s: %s, rule document, %zu input%s, %zu rule%s\n", file, ne || !doc.rule_ok ? "FAILED" : "ok",
               doc.rule_inputs, doc.rule_inputs == 1 ? "" : "s", doc.rule_rules, doc.rule_rules == 1 ? "" : "s");
      else if (doc.is_rule)
        ;
      else if (doc.orch && !quiet)
        printf("%s: %s, %zu step%s, hash %s\n", file, ne ? "FAILED" : "ok", doc.orch->nsteps,
               doc.orch->nsteps == 1 ? "" : "s", doc.orch->hash);
      else if (!doc.orch)
        printf("%s: FAILED\n", file);
    }
    cli_doc_free(&doc);
    xgr_diags_free(&d);
  }
  if (!as_json)
    fprintf(stderr, "checked %d file%s: %zu error%s, %zu warning%s%s\n", argc - optind, argc - optind == 1 ? "" : "s",
            tot_err, tot_err == 1 ? "" : "s", tot_warn, tot_warn == 1 ? "" : "s",
            bad_files ? "" : " — ok");
  if (unreadable) return XGR_EXIT_USAGE;
  return tot_err ? XGR_EXIT_FAIL : XGR_EXIT_OK;
}
