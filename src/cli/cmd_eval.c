/* cmd_eval.c — `xgr eval`: compile and evaluate one expression (or template) the way the step
 * engine does, for authors who want to try a rule, an outcome value or an extract expression. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "xgr/cel.h"
#include "xgr/json.h"
#include "xgr/value.h"

static void eval_usage(FILE *f) {
  fprintf(f,
          "usage: xgr eval [--mode rule|value|extract|plain] [--vars JSON] [--resp JSON] [--json] EXPR\n\n"
          "  --mode     rule: a bool rule, a missing variable makes it false;\n"
          "             value (default): EvalOrRender (template or expression), a missing variable\n"
          "             is soft-invalid; extract: an expression over `resp`; plain: pure CEL\n"
          "  --vars     a JSON object of variables (or @FILE); integers stay exact (int, uint,\n"
          "             uint256 above 64 bits), numbers with a fraction or exponent are doubles\n"
          "  --resp     the API response bound as `resp` (or @FILE); its numbers are doubles (guide §6)\n"
          "  --json     print {\"ok\":true,\"type\":...,\"value\":...} or {\"ok\":false,\"kind\":...,\"message\":...}\n\n"
          "Exit codes: 0 ok, 1 soft-invalid or error, 2 usage.\n");
}

static const char *type_name(xgr_value v) {
  if (v.kind == XGR_VNULL) return "null";
  return xgr_value_kind_name(v);
}

static void print_fail(bool json, const char *kind, const char *msg) {
  if (json) {
    xgr_value m = xgr_map_new(3);
    xgr_map_set_str(m, "ok", 2, xgr_value_bool(false));
    xgr_map_set_str(m, "kind", 4, xgr_value_cstring(kind));
    xgr_map_set_str(m, "message", 7, xgr_value_cstring(msg));
    char *t = xgr_value_to_json_text(m, 0, NULL);
    puts(t);
    free(t);
    xgr_value_release(m);
  } else {
    fprintf(stderr, "%s: %s\n", kind, msg);
  }
}

int xgr_cmd_eval(int argc, char **argv) {
  const char *mode_s = "value", *vars_s = NULL, *resp_s = NULL, *expr = NULL;
  bool json = false;
  static const struct option opts[] = {
    {"mode", required_argument, NULL, 'm'}, {"vars", required_argument, NULL, 'v'}, {"resp", required_argument, NULL, 'r'},
    {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {0, 0, 0, 0}};
  /* an expression may start with a minus (-1 + x): an argument with one dash other than -h is the
   * expression, not an option; it is taken out before the options are parsed */
  for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
    const char *a = argv[i];
    if (a[0] == '-' && a[1] == '-' && !strchr(a, '=')) {
      for (const struct option *o = opts; o->name; o++)
        if (!strcmp(a + 2, o->name) && o->has_arg) i++;   /* its value */
    } else if (a[0] == '-' && a[1] && strcmp(a, "-h") && !expr) {
      expr = a;
      memmove(argv + i, argv + i + 1, (size_t)(argc - i - 1) * sizeof *argv);
      argc--;
      break;
    }
  }
  int ch;
  optind = 1;
  while ((ch = xgr_cli_getopt(argc, argv, "h", opts, "xgr eval")) != -1) {
    switch (ch) {
      case 'h': eval_usage(stdout); return XGR_EXIT_OK;
      case 'j': json = true; break;
      case 'm': mode_s = optarg; break;
      case 'v': vars_s = optarg; break;
      case 'r': resp_s = optarg; break;
      default: return XGR_EXIT_USAGE;   /* reported by xgr_cli_getopt */
    }
  }
  if (optind < argc && !expr) expr = argv[optind++];
  if (optind < argc) {
    fprintf(stderr, "xgr eval: one expression expected (quote it)\n");
    return XGR_EXIT_USAGE;
  }
  if (!expr) {
    eval_usage(stderr);
    return XGR_EXIT_USAGE;
  }
  if (!xgr_utf8_valid(expr, strlen(expr))) {   /* raw bytes would reach the output (and --json) as they are */
    fprintf(stderr, "xgr eval: EXPR is not valid UTF-8; write other characters as \\uXXXX inside a quoted string\n");
    return XGR_EXIT_USAGE;
  }
  xgr_cel_mode mode;
  if (!strcmp(mode_s, "rule")) mode = XGR_CEL_MODE_RULE;
  else if (!strcmp(mode_s, "value")) mode = XGR_CEL_MODE_VALUE;
  else if (!strcmp(mode_s, "extract")) mode = XGR_CEL_MODE_EXTRACT;
  else if (!strcmp(mode_s, "plain")) mode = XGR_CEL_MODE_PLAIN;
  else {
    fprintf(stderr, "xgr eval: --mode must be rule, value, extract or plain, not '%s'\n", mode_s);
    return XGR_EXIT_USAGE;
  }
  xgr_error e;
  xgr_error_clear(&e);
  xgr_value vars = xgr_value_null(), resp = xgr_value_null();
  if (vars_s && xgr_cli_value_arg("xgr eval", "--vars", vars_s, 0, true, &vars)) return XGR_EXIT_USAGE;
  if (resp_s && xgr_cli_value_arg("xgr eval", "--resp", resp_s, XGR_JSON_NUMBERS_AS_DOUBLE, false, &resp)) {
    xgr_value_release(vars);
    return XGR_EXIT_USAGE;
  }
  int rc = XGR_EXIT_OK;
  xgr_cel_options o = xgr_cel_options_default(mode);
  xgr_cel_program *p = NULL;
  if (xgr_cel_compile(expr, (size_t)-1, &o, &p, &e)) {
    print_fail(json, "error", e.message);
    rc = XGR_EXIT_FAIL;
    goto out;
  }
  xgr_cel_vars l_resp = xgr_cel_vars_one("resp", resp, NULL);
  xgr_cel_vars l_vars = xgr_cel_vars_map(vars, resp_s ? &l_resp : NULL);
  xgr_value r;
  int st = xgr_cel_eval(p, &l_vars, &r, &e);
  if (st == XGR_CEL_ERROR || st == XGR_CEL_SOFT_INVALID) {
    print_fail(json, st == XGR_CEL_ERROR ? "error" : "soft_invalid", e.message);
    rc = XGR_EXIT_FAIL;
  } else if (json) {
    xgr_value m = xgr_map_new(4);
    xgr_map_set_str(m, "ok", 2, xgr_value_bool(true));
    xgr_map_set_str(m, "type", 4, xgr_value_cstring(type_name(r)));
    if (r.kind == XGR_VDOUBLE && !isfinite(r.as.d)) {   /* JSON has no NaN or Infinity: say it in words */
      xgr_map_set_str(m, "value", 5, xgr_value_null());
      xgr_map_set_str(m, "nonFinite", 9,
                      xgr_value_cstring(isnan(r.as.d) ? "NaN" : r.as.d > 0 ? "Infinity" : "-Infinity"));
    } else {
      xgr_map_set_str(m, "value", 5, xgr_value_retain(r));
    }
    if (st == XGR_CEL_MISSING) xgr_map_set_str(m, "missing", 7, xgr_value_cstring(e.message));
    char *t = xgr_value_to_json_text(m, 0, NULL);
    puts(t);
    free(t);
    xgr_value_release(m);
  } else {
    char *t = xgr_value_to_json_text(r, 0, NULL);
    printf("%s (%s)%s%s\n", t, type_name(r), st == XGR_CEL_MISSING ? " — rule false: " : "",
           st == XGR_CEL_MISSING ? e.message : "");
    free(t);
  }
  xgr_value_release(r);
out:
  xgr_cel_program_free(p);
  xgr_value_release(vars);
  xgr_value_release(resp);
  return rc;
}
