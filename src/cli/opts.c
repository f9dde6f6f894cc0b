/* opts.c — the command line's option parser and its error reports (see opts.h). */
#include "cli/opts.h"

#include <assert.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "xgr/json.h"
#include "xgr/suggest.h"

#define MAX_OPTS 128

const char *xgr_cli_nearest_word(const char *word, const char *const *known, size_t n) {
  return xgr_suggest_nearest(word, known, n);
}

const char *xgr_cli_nearest_option(const char *name, const struct option *longopts) {
  const char *names[MAX_OPTS];
  size_t n = 0;
  for (const struct option *o = longopts; o->name && n < MAX_OPTS; o++) names[n++] = o->name;
  return xgr_suggest_nearest(name, names, n);
}

/* The long options that start with the n bytes of name, into buf as "--a, --b"; how many. */
static size_t prefixed(const char *name, size_t n, const struct option *longopts, char *buf, size_t cap) {
  size_t k = 0;
  buf[0] = '\0';
  for (const struct option *o = longopts; o->name; o++)
    if (!strncmp(o->name, name, n)) {
      size_t used = strlen(buf);
      snprintf(buf + used, cap - used, "%s--%s", k ? ", " : "", o->name);
      k++;
    }
  return k;
}

/* The long option that `--name` (n bytes, maybe a unique prefix) selects, as getopt_long does. */
static const struct option *selected(const char *name, size_t n, const struct option *longopts) {
  const struct option *hit = NULL;
  size_t k = 0;
  for (const struct option *o = longopts; o->name; o++) {
    if (strncmp(o->name, name, n)) continue;
    if (strlen(o->name) == n) return o;
    hit = o;
    k++;
  }
  return k == 1 ? hit : NULL;   /* two prefixed matches: ambiguous (unless one is exact) */
}

static void bad_long(const char *prog, const char *arg, const struct option *longopts, int code) {
  const char *name = arg + 2;
  size_t n = strcspn(name, "=");
  char shown[80];
  snprintf(shown, sizeof shown, "%.*s", (int)(n < 64 ? n : 64), name);
  const struct option *o = selected(name, n, longopts);
  char list[512];
  if (o && code == ':') {
    fprintf(stderr, "%s: --%s needs a value (%s --help)\n", prog, o->name, prog);
  } else if (o && name[n] == '=' && o->has_arg == no_argument) {
    fprintf(stderr, "%s: --%s takes no value; give it as --%s\n", prog, o->name, o->name);
  } else if (!o && n && prefixed(name, n, longopts, list, sizeof list) > 1) {
    fprintf(stderr, "%s: option --%s is ambiguous; it could be %s\n", prog, shown, list);
  } else {
    const char *near = xgr_cli_nearest_option(shown, longopts);
    if (near) fprintf(stderr, "%s: unknown option --%s; did you mean --%s?\n", prog, shown, near);
    else fprintf(stderr, "%s: unknown option --%s (%s --help lists the options)\n", prog, shown, prog);
  }
}

int xgr_cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts, const char *prog) {
  return xgr_cli_getopt_index(argc, argv, shortopts, longopts, prog, NULL);
}

int xgr_cli_getopt_index(int argc, char **argv, const char *shortopts, const struct option *longopts, const char *prog,
                         int *longindex) {
  char so[128];
  assert(shortopts[0] != ':' && strlen(shortopts) + 2 <= sizeof so);
  snprintf(so, sizeof so, ":%s", shortopts);
  opterr = 0;
  optopt = 0;
  int ch = getopt_long(argc, argv, so, longopts, longindex);
  if (ch != '?' && ch != ':') return ch;
  /* getopt_long has moved past the element of a bad long option and of a short option without
   * its value; an unknown short option inside a cluster (-xq) leaves optind where it was */
  const char *el = optind > 0 && optind <= argc ? argv[optind - 1] : "";
  bool is_long = !strncmp(el, "--", 2) && el[2];
  if (ch == '?' && optopt) {   /* an unknown short option, or a long one given a value it does not take */
    const char *eq = is_long ? strchr(el, '=') : NULL;
    const struct option *o = eq ? selected(el + 2, (size_t)(eq - el - 2), longopts) : NULL;
    is_long = o && o->has_arg == no_argument && o->val == optopt;
  }
  if (is_long) bad_long(prog, el, longopts, ch);
  else if (ch == ':') fprintf(stderr, "%s: -%c needs a value (%s --help)\n", prog, optopt, prog);
  else fprintf(stderr, "%s: unknown option -%c (%s --help lists the options)\n", prog, optopt, prog);
  return '?';
}

/* ---- option values that are JSON ------------------------------------------------------------- */

#define MAX_ARG_FILE (16u << 20)

/* The text of arg (inline, or the file of "@FILE": *buf then owns it); 0, or 2 after a report. */
static int arg_text(const char *prog, const char *flag, const char *arg, char **buf, const char **text, size_t *len) {
  *buf = NULL;
  if (arg[0] != '@') {
    *text = arg;
    *len = strlen(arg);
    return 0;
  }
  xgr_error e;
  if (xgr_file_read(arg + 1, buf, len, MAX_ARG_FILE, &e)) {
    fprintf(stderr, "%s: %s %s: %s\n", prog, flag, arg, e.message);
    return XGR_EXIT_USAGE;
  }
  *text = *buf;
  return 0;
}

static int arg_bad(const char *prog, const char *flag, const char *arg, const char *why, const char *kind) {
  const char *file = arg[0] == '@' ? arg : "";
  if (why) fprintf(stderr, "%s: %s%s%s: %s\n", prog, flag, *file ? " " : "", file, why);
  else fprintf(stderr, "%s: %s%s%s: expected a JSON object, got %s\n", prog, flag, *file ? " " : "", file, kind);
  return XGR_EXIT_USAGE;
}

int xgr_cli_value_arg(const char *prog, const char *flag, const char *arg, unsigned flags, bool object, xgr_value *out) {
  *out = xgr_value_null();
  char *buf;
  const char *text;
  size_t len;
  if (arg_text(prog, flag, arg, &buf, &text, &len)) return XGR_EXIT_USAGE;
  xgr_error e;
  int rc = xgr_value_from_json_text(text, len, flags, out, &e);
  free(buf);
  if (rc) return arg_bad(prog, flag, arg, e.message, NULL);
  if (object && out->kind != XGR_VMAP) {
    const char *kind = out->kind == XGR_VLIST ? "an array" : out->kind == XGR_VSTRING ? "a string"
                     : out->kind == XGR_VBOOL ? "a boolean" : out->kind == XGR_VNULL ? "null" : "a number";
    xgr_value_release(*out);
    *out = xgr_value_null();
    return arg_bad(prog, flag, arg, NULL, kind);
  }
  return 0;
}

int xgr_cli_object_arg(const char *prog, const char *flag, const char *arg, json_t **out) {
  *out = NULL;
  char *buf;
  const char *text;
  size_t len;
  if (arg_text(prog, flag, arg, &buf, &text, &len)) return XGR_EXIT_USAGE;
  xgr_error e;
  json_t *j = NULL;
  int rc = xgr_json_parse_exact(text, len, &j, &e);
  free(buf);
  if (rc) return arg_bad(prog, flag, arg, e.message, NULL);
  if (!json_is_object(j)) {
    static const char *const kinds[] = {"an object", "an array", "a string", "an integer", "a number", "true", "false", "null"};
    const char *kind = kinds[json_typeof(j)];
    json_decref(j);
    return arg_bad(prog, flag, arg, NULL, kind);
  }
  *out = j;
  return 0;
}

int xgr_cli_api_map_arg(const char *prog, char *arg, xgr_api_map_entry *map, size_t *n, size_t max) {
  char *eq = strchr(arg, '=');
  if (!eq || eq == arg || !eq[1] || *n >= max) {
    fprintf(stderr, "%s: --api-map \"%s\": expected FROM=TO with both non-empty (at most %zu)\n", prog, arg, max);
    return XGR_EXIT_USAGE;
  }
  *eq = '\0';
  map[(*n)++] = (xgr_api_map_entry){arg, eq + 1};
  return 0;
}

int xgr_cli_chain_arg(const char *prog, const char *arg, xgr_chain **chain) {
  xgr_error ce;
  if (!*chain) *chain = xgr_chain_new();
  if (xgr_chain_add(*chain, arg, &ce)) {
    fprintf(stderr, "%s: %s\n", prog, ce.message);
    return XGR_EXIT_USAGE;
  }
  return 0;
}

int xgr_cli_outbound_arg(const char *prog, const char *arg, xgr_outbound_policy **p) {
  if (!*p) *p = xgr_outbound_policy_new();
  const char *s = arg ? arg : "";
  do {   /* comma-separated entries; an empty entry is refused like any other bad one */
    const char *comma = strchr(s, ',');
    size_t len = comma ? (size_t)(comma - s) : strlen(s);
    char item[128];
    xgr_error e;
    if (len >= sizeof item) {
      fprintf(stderr, "%s: --allow-outbound \"%.60s...\": an entry is at most %zu bytes\n", prog, s, sizeof item - 1);
      return XGR_EXIT_USAGE;
    }
    memcpy(item, s, len);
    item[len] = 0;
    if (xgr_outbound_policy_allow(*p, item, &e)) {
      fprintf(stderr, "%s: --allow-outbound %s\n", prog, e.message);
      return XGR_EXIT_USAGE;
    }
    s = comma ? comma + 1 : NULL;
  } while (s);
  return 0;
}
